//! Tests of the live CC context: a hand-built ring program and a mesh program, driven step by
//! step with a fake semaphore store, imaged at every interesting point. Field offsets are the
//! spec's numbers (docs/contract/carrier.md §3), written out here, not the builder's constants; the JSON
//! side goes through `ctx_log`.

use std::collections::HashMap;

use serde_json::Value;

use super::*;
use crate::error::Result;
use crate::isa::ccop::{pack_cc_op, CcOpFields, CcOpOperands};
use crate::isa::memmap::{program_area, S2M_RING_OFF};
use crate::isa::slot::{CHAIN_SEM, RECORD_BYTES, SLOT_SPAD_BYTES};
use crate::isa::udma::Direction;
use crate::ncfw::{ctx_log_string, LogStatus};

use super::super::dma::Queue;
use super::super::topsp::{Action, SemAccess, SeqConfig};

/// Spec offsets per arch: (`neff_configs`, `dev_configs`, runtime `neff`, runtime `algo`)
/// — docs/contract/carrier.md §3.1 (0x3060/0x30C0 vs 0x4280/0x42E0) and §3.2 (0x2228/0x3030 vs 0x3448/0x4250).
fn offs(arch: Arch) -> (usize, usize, usize, usize) {
    match arch {
        Arch::V2 => (0x2228, 0x3030, 0x3060, 0x30C0),
        _ => (0x3448, 0x4250, 0x4280, 0x42E0),
    }
}

fn u8_at(b: &[u8], o: usize) -> u8 {
    b[o]
}
fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}
fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}

/// Quote the unquoted glibc `%p` values so the dump parses as JSON (docs/contract/carrier.md §5 item 5).
fn json(text: &str) -> Value {
    let mut s = String::new();
    for line in text.lines() {
        match line.split_once("\": ") {
            Some((k, v)) if v.starts_with("0x") || v.starts_with("(nil)") => {
                let (val, comma) = v.strip_suffix(',').map_or((v, ""), |x| (x, ","));
                s.push_str(&format!("{k}\": \"{val}\"{comma}\n"));
            }
            _ => {
                s.push_str(line);
                s.push('\n');
            }
        }
    }
    serde_json::from_str(&s).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

#[derive(Default)]
struct Fake {
    sems: HashMap<(u8, u8), i32>,
    writes: Vec<u64>,
}

impl SemAccess for Fake {
    fn value(&self, t: u8, id: u8) -> i32 {
        self.sems.get(&(t, id)).copied().unwrap_or(0)
    }
    fn try_wait(&mut self, t: u8, id: u8, target: i32, consume: i32) -> bool {
        let v = self.value(t, id);
        if v < target {
            return false;
        }
        self.sems.insert((t, id), v - consume);
        true
    }
    fn inc(&mut self, t: u8, id: u8, by: i32) {
        let v = self.value(t, id);
        self.sems.insert((t, id), v + by);
    }
    fn inc_addr(&mut self, addr: u64, _by: u32) -> Result<()> {
        self.writes.push(addr);
        Ok(())
    }
}

/// Rank-local TOP_SP 1 of core 2, placed at device TOP_SP 9 (die 1) of chip 3.
const LOCAL: u8 = 1;
const DEVICE: u8 = 9;
const CHIP: u8 = 3;
/// A compute-engine completion address (per-TPB EVT_SEM INC window, docs/contract/device.md §5.1).
const COMPL: u64 = 0x28_0270_1800 + 4 * 3;

struct Rig {
    seq: Sequencer,
    pair: QueuePair,
    sems: Fake,
    ctrl: [u8; 8],
}

fn rig(mesh: bool, records: &[SlotRecord]) -> Rig {
    rig_with(mesh, false, records)
}

/// `wait_complete`: the reporter collects one completion on `CHAIN_SEM` at the entry's end.
fn rig_with(mesh: bool, wait_complete: bool, records: &[SlotRecord]) -> Rig {
    let operands = if mesh {
        CcOpOperands::Mesh {
            sema_shift_offset: 1,
            sema_mask: 3,
        }
    } else {
        CcOpOperands::Ring {
            channel_list: 0b0110,
        }
    };
    let f = CcOpFields {
        algo_type: u8::from(mesh),
        algo_sub_type: 0,
        trigger_next: false,
        reporter: true,
        ring_wait_complete: wait_complete,
        ring_send_complete: false,
        safe_mode: false,
        unique_tensors: false,
        operands,
    };
    let ctrl = pack_cc_op([0; 8], &f, 1).unwrap();
    let mut spad = vec![0u8; SLOT_SPAD_BYTES];
    for (i, r) in records.iter().enumerate() {
        spad[i * RECORD_BYTES..(i + 1) * RECORD_BYTES].copy_from_slice(&r.encode());
    }
    let read = |idx: u8| {
        SemAddr {
            topsp: DEVICE,
            window: SemWindow::Read,
            idx,
        }
        .encode()
    };
    let cfg = SeqConfig {
        topsp: LOCAL,
        trigger: read(0),
        complete_prev: read(CHAIN_SEM),
        complete_prev_target: u32::from(wait_complete),
        op_num: 1,
        leader: true,
        completion_addrs: vec![COMPL],
        ..Default::default()
    };
    let seq = Sequencer::load(&ctrl, &spad, cfg).unwrap();
    let area = program_area(2, LOCAL);
    let pair = QueuePair::new(
        LOCAL,
        Queue::new(Direction::M2S, area + M2S_RING_OFF, 64).unwrap(),
        Queue::new(Direction::S2M, area + S2M_RING_OFF, 64).unwrap(),
    );
    Rig {
        seq,
        pair,
        sems: Fake::default(),
        ctrl,
    }
}

impl Rig {
    /// One sequencer step; a release is applied to the pair as the executor does (S2M first).
    fn step(&mut self) -> Action {
        let a = self.seq.step(&mut self.sems).unwrap();
        if let Action::TailInc { m2s, s2m } = a {
            self.pair.s2m.tail_inc(u64::from(s2m)).unwrap();
            self.pair.m2s.tail_inc(u64::from(m2s)).unwrap();
        }
        a
    }
    fn image(&self, arch: Arch) -> Vec<u8> {
        let live = LiveTopsp {
            arch,
            chip: CHIP,
            topsp: DEVICE,
            seq: &self.seq,
            pair: &self.pair,
        };
        let img = cc_context_image(&live);
        assert_eq!(
            img,
            cc_context_image(&live),
            "on demand: same state, same bytes"
        );
        img
    }
    fn dump(&self, arch: Arch) -> Value {
        let (text, st) = ctx_log_string(&self.image(arch), arch, b"rig").unwrap();
        assert_eq!(st, LogStatus::Complete);
        json(&text)
    }
}

fn wait(sem: u8, target: u32, consume: u32) -> Option<SlotWait> {
    Some(SlotWait {
        topsp: LOCAL,
        sem,
        target,
        consume,
    })
}

fn ring_records() -> Vec<SlotRecord> {
    vec![
        SlotRecord {
            m2s: 3,
            s2m: 2,
            repeat: 2,
            wait: None,
            end: false,
        },
        SlotRecord {
            m2s: 1,
            s2m: 1,
            repeat: 1,
            wait: wait(9, 2, 1),
            end: false,
        },
        SlotRecord {
            end: true,
            ..Default::default()
        },
    ]
}

/// READ window of device TOP_SP 9's semaphore 9: 0x8280000000 + (9 & 7) << 30 + 1 << 47
/// + 0x1000 + 4·9 (docs/contract/device.md §5.1, §9.2; docs/contract/carrier.md Appendix A).
const SEM9_READ: u64 = 0x8082_C000_1024;

/// Ring row `c` of the runtime algo context (docs/contract/carrier.md §3.7: 16-byte rows).
fn row(arch: Arch, c: usize) -> usize {
    offs(arch).3 + 16 * c
}

#[test]
fn sizes_and_static_fields() {
    for arch in Arch::ALL {
        let r = rig(false, &ring_records());
        let img = r.image(arch);
        // docs/contract/carrier.md §3.1: minimum readable size 0x32C6 (v2) / 0x44E6 (v3+).
        assert_eq!(img.len(), if arch == Arch::V2 { 0x32C6 } else { 0x44E6 });
        let (nc, dev, neff, _) = offs(arch);
        let area = program_area(2, LOCAL);
        // docs/contract/carrier.md §3.2.7: trigger @3544, op_num @3584, tpb_compl_addr_num @3590,
        // flags @3591 (leader bit 0), slot_spad_base[0] @2144, ctrl_spad_base @2192.
        assert_eq!(u64_at(&img, nc + 3544), 0x82_C000_1000 | (1 << 47));
        assert_eq!(u32_at(&img, nc + 3584), 1);
        assert_eq!(u8_at(&img, nc + 3590), 1);
        assert_eq!(u8_at(&img, nc + 3591), 1);
        assert_eq!(u64_at(&img, nc + 2144), area + 0x1000);
        assert_eq!(u64_at(&img, nc + 2192), area);
        // docs/contract/carrier.md §3.2.11 (basic_block_configs @2496): table[0].desc_count =
        // 3·2 + 1 M2S descriptors; pring_base_addr @+0x408, pring_total_desc_num @+0x410.
        assert_eq!(u16_at(&img, nc + 2496), 7);
        assert_eq!(u16_at(&img, nc + 2496 + 4), 0, "one basic block");
        assert_eq!(u64_at(&img, nc + 2496 + 0x408), area + 0x10_0000);
        assert_eq!(u32_at(&img, nc + 2496 + 0x410), 7);
        // docs/contract/carrier.md §3.2.12: tpb_id = bits 3:0 of +0x2C, dev_id = bits 3:0 of +0x2D.
        assert_eq!(u8_at(&img, dev + 0x2C), DEVICE);
        assert_eq!(u8_at(&img, dev + 0x2D), CHIP);
        // docs/contract/carrier.md §3.2.2: channel_id (+140) of the driven channels 1 and
        // 2, stride 148.
        assert_eq!(u8_at(&img, 148 + 140), 1);
        assert_eq!(u8_at(&img, 2 * 148 + 140), 2);
        assert_eq!(u8_at(&img, 3 * 148 + 140), 0);
        // docs/contract/carrier.md §3.4 / §3.6: tpb_compl[0] @+0x08; basic_block slot_spad_addr[0]
        // @+0x20, ctrl_spad_addr @+0x50 (the runtime's cayman cross-check 0x42A0 / 0x42D0).
        assert_eq!(u64_at(&img, neff + 0x08), COMPL);
        assert_eq!(u64_at(&img, neff + 0x20), area + 0x1000);
        assert_eq!(u64_at(&img, neff + 0x50), area);
        assert_eq!(u8_at(&img, neff + 0x5C), 0, "no barrier");
    }
}

#[test]
fn ring_entry_start_records_and_done() {
    let arch = Arch::V3;
    let (_, _, neff, algo) = offs(arch);
    let mut r = rig(false, &ring_records());

    // Not triggered: blocked at the start (run_state 0), the op is entry 0's slot.
    assert!(matches!(r.step(), Action::Blocked { sem: 0, .. }));
    let img = r.image(arch);
    assert_eq!(
        &img[neff..neff + 8],
        &r.ctrl,
        "docs/contract/carrier.md §3.5 ctrl_entry = the CTRL SPAD slot"
    );
    assert_eq!(
        u8_at(&img, algo + 0x200),
        0,
        "hierarchical run_state: start"
    );
    assert_eq!(u8_at(&img, row(arch, 1) + 0xF), 0);

    // Triggered: record 0 releases twice; between the two, repeat_cnt = 1.
    r.sems.sems.insert((LOCAL, 0), 1);
    assert_eq!(r.step(), Action::TailInc { m2s: 3, s2m: 2 });
    let img = r.image(arch);
    let lead = row(arch, 1);
    assert_eq!(u16_at(&img, lead + 0x4), 1, "repeat_cnt");
    assert_eq!(u16_at(&img, lead + 0x6), 3, "m2s_val");
    assert_eq!(u16_at(&img, lead + 0x8), 2, "s2m_val");
    assert_eq!(u8_at(&img, lead + 0xF), 1, "run_state: records");
    assert_eq!(u8_at(&img, row(arch, 2) + 0xF), 0, "one lane: the lead row");
    assert_eq!(r.step(), Action::TailInc { m2s: 3, s2m: 2 });
    assert_eq!(u16_at(&r.image(arch), lead + 0x4), 2);

    // Record 1 waits semaphore 9 >= 2: the lead channel's recv_sema names it.
    assert!(matches!(r.step(), Action::Blocked { sem: 9, .. }));
    let img = r.image(arch);
    assert_eq!(
        u64_at(&img, 148 + 56),
        SEM9_READ,
        "docs/contract/carrier.md §3.2.2 recv_sema of channel 1"
    );
    assert_eq!(u16_at(&img, lead), 0, "recv_cnt: the wait has not passed");
    assert_eq!(u16_at(&img, lead + 0x4), 0);
    assert_eq!(u16_at(&img, lead + 0x6), 1);
    let j = r.dump(arch);
    let top = &j["ncfw_ctx_top_sp"];
    assert_eq!(
        top["configs"]["algo"]["ring"]["channels"][1]["recv_sema"]["addr"]["soc_addr"],
        "0x00008082C0001024"
    );
    let ch1 = &top["algo"]["ring"]["channels"][1];
    assert_eq!(ch1["channel_id"], 1);
    assert_eq!(ch1["run_state"], 1);
    assert_eq!(ch1["slot_idx"], 0);
    assert_eq!(ch1["recv_cnt"], 0);
    assert_eq!(top["neff"]["op"]["id"], 0);
    assert_eq!(
        top["neff"]["op"]["ctrl_entry"]["cc_op"]["ring"]["channel_list"],
        6
    );
    assert_eq!(top["neff"]["op"]["reporter"], 1);

    // The peer signals twice: the wait passes (recv_cnt 1), record 1 releases, then done.
    r.sems.sems.insert((LOCAL, 9), 2);
    assert_eq!(r.step(), Action::TailInc { m2s: 1, s2m: 1 });
    let img = r.image(arch);
    assert_eq!(u16_at(&img, lead), 1);
    assert_eq!(u16_at(&img, lead + 0x4), 1);
    assert_eq!(r.step(), Action::Done);
    assert_eq!(r.sems.writes, vec![COMPL], "leader posted completion");
    let img = r.image(arch);
    assert_eq!(u8_at(&img, algo + 0x200), 3, "hierarchical run_state: done");
    assert_eq!(u8_at(&img, lead + 0xF), 3);
    assert_eq!(u16_at(&img, lead), 1, "recv_cnt: every wait of the entry");
    assert_eq!(u64_at(&img, 148 + 56), 0, "no current wait");
    let j = r.dump(arch);
    assert_eq!(j["ncfw_ctx_top_sp"]["algo"]["hierarchical"]["run_state"], 3);
    assert_eq!(
        j["ncfw_ctx_top_sp"]["algo"]["ring"]["channels"][1]["run_state"],
        3
    );
}

#[test]
fn mesh_entry_events_and_event_index() {
    let recs = [
        SlotRecord {
            m2s: 1,
            s2m: 1,
            repeat: 1,
            wait: wait(12, 3, 3),
            end: false,
        },
        SlotRecord {
            end: true,
            ..Default::default()
        },
    ];
    for arch in [Arch::V2, Arch::V4Plus] {
        let (_, _, _, algo) = offs(arch);
        let mut r = rig(true, &recs);
        r.sems.sems.insert((LOCAL, 0), 1);
        assert!(matches!(r.step(), Action::Blocked { sem: 12, .. }));
        let img = r.image(arch);
        // docs/contract/carrier.md §3.2.6: events at 0x1280, 80 bytes each; event_wait_sema
        // +0x40, wait_val +0x48, dma_trigger +0x4D, wait_event +0x4F. §3.7: event_index u16
        // at algo + 0x204.
        let e0 = 0x1280;
        assert_eq!(u64_at(&img, e0 + 0x40), SEM9_READ + 4 * 3, "semaphore 12");
        assert_eq!(u32_at(&img, e0 + 0x48), 3);
        assert_eq!(u8_at(&img, e0 + 0x4D), 1);
        assert_eq!(u8_at(&img, e0 + 0x4F), 1);
        let e1 = 0x1280 + 80;
        assert_eq!(
            &img[e1..e1 + 80],
            &[0u8; 80][..],
            "END record: no wait, no DMA"
        );
        assert_eq!(u16_at(&img, algo + 0x204), 0);
        assert_eq!(u8_at(&img, algo + 0x200), 1);
        assert!(
            img[algo..algo + 0x200].iter().all(|&b| b == 0),
            "mesh: no ring rows"
        );
        let j = r.dump(arch);
        let ev = &j["ncfw_ctx_top_sp"]["configs"]["algo"]["mesh"]["events"][0];
        assert_eq!(
            ev["event_wait_sema"]["addr"]["soc_addr"],
            "0x00008082C0001030"
        );
        assert_eq!(ev["wait_val"], 3);
        r.sems.sems.insert((LOCAL, 12), 3);
        assert_eq!(r.step(), Action::TailInc { m2s: 1, s2m: 1 });
        assert_eq!(u16_at(&r.image(arch), algo + 0x204), 0, "still in event 0");
        assert_eq!(r.step(), Action::Done);
        let img = r.image(arch);
        assert_eq!(u16_at(&img, algo + 0x204), 2, "every event done");
        assert_eq!(u8_at(&img, algo + 0x200), 3);
    }
}

/// A ring placed outside any program area: the SPAD addresses are unknown and stay 0.
#[test]
fn foreign_ring_base_leaves_spad_addresses_zero() {
    let mut r = rig(false, &ring_records());
    r.pair = QueuePair::new(
        LOCAL,
        Queue::new(Direction::M2S, 0x4000, 64).unwrap(),
        Queue::new(Direction::S2M, 0x8000, 64).unwrap(),
    );
    let img = r.image(Arch::V3);
    let (nc, _, neff, _) = offs(Arch::V3);
    assert_eq!(u64_at(&img, nc + 2192), 0);
    assert_eq!(u64_at(&img, neff + 0x50), 0);
    assert_eq!(
        u64_at(&img, nc + 2496 + 0x408),
        0x4000,
        "the pring is still known"
    );
}

/// The reporter waiting the other TOP_SPs' completions: run_state 2, and `complete_prev` is
/// the semaphore it waits (docs/contract/carrier.md §3.2.7 @3568, READ form).
#[test]
fn reporter_collecting_completions() {
    let arch = Arch::V4;
    let (nc, _, _, algo) = offs(arch);
    let mut r = rig_with(false, true, &ring_records());
    r.sems.sems.insert((LOCAL, 0), 1);
    r.sems.sems.insert((LOCAL, 9), 2);
    while let Action::TailInc { .. } = r.step() {}
    assert!(matches!(r.seq.position().waiting_on, Some(w) if w.sem == CHAIN_SEM));
    let img = r.image(arch);
    assert_eq!(u8_at(&img, algo + 0x200), 2);
    assert_eq!(u8_at(&img, row(arch, 1) + 0xF), 2);
    assert_eq!(
        u16_at(&img, row(arch, 1)),
        1,
        "recv_cnt: the entry's one wait"
    );
    // CHAIN_SEM (254) of device TOP_SP 9: SEM9_READ − 4·9 + 4·254.
    assert_eq!(u64_at(&img, nc + 3568), SEM9_READ - 36 + 4 * 254);
    let j = r.dump(arch);
    assert_eq!(
        j["ncfw_ctx_top_sp"]["neff"]["op"]["ctrl_entry"]["cc_op"]["ring_wait_complete"],
        1
    );
}

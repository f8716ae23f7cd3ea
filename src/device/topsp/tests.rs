//! Tests of the TOP_SP sequencer: hand-built CTRL/SLOT images driven by a fake semaphore
//! store, load-time rejections, and the real emitted images of a 2-rank ring all-reduce.

use crate::error::ErrorKind;
use std::collections::HashMap;

use super::*;
use crate::error::Error;
use crate::isa::ccop::{
    pack_cc_op, CcOpFields, CcOpOperands, CTRL_SPAD_BYTES, SPAD_SLOT_CONTINUE_MARK,
};
use crate::isa::evtsem::{SemAddr, SemWindow, SocAddr};
use crate::isa::slot::{
    SlotWait, CHAIN_SEM, NEXT_SEM, RECORD_BYTES, SLOT_RECORDS, SLOT_SPAD_BYTES,
};

/// Semaphores by (topsp, id); address writes are logged and, when they name a TOP_SP INC
/// window, applied (device TOP_SP = rank-local TOP_SP here: core 0).
#[derive(Default)]
struct Fake {
    sems: HashMap<(u8, u8), i32>,
    writes: Vec<(u64, u32)>,
    grant_all: bool,
    /// Grant every wait except on TRIGGER, NEXT_SEM and CHAIN_SEM (the chaining protocol).
    grant_steps: bool,
    /// Log address writes without applying them.
    deaf: bool,
    /// Device TOP_SP of rank-local TOP_SP 0 (addresses name device TOP_SPs).
    topsp_base: u8,
}

impl Fake {
    fn get(&self, t: u8, id: u8) -> i32 {
        self.sems.get(&(t, id)).copied().unwrap_or(0)
    }
    fn set(&mut self, t: u8, id: u8, v: i32) {
        self.sems.insert((t, id), v);
    }
}

impl SemAccess for Fake {
    fn value(&self, topsp: u8, id: u8) -> i32 {
        self.get(topsp, id)
    }
    fn try_wait(&mut self, topsp: u8, id: u8, target: i32, consume: i32) -> bool {
        let chaining = id == 0 || id == NEXT_SEM || id == CHAIN_SEM;
        if self.grant_all || (self.grant_steps && !chaining) {
            return true;
        }
        let v = self.get(topsp, id);
        if v >= target {
            self.set(topsp, id, v.wrapping_sub(consume));
            true
        } else {
            false
        }
    }
    fn inc(&mut self, topsp: u8, id: u8, by: i32) {
        let v = self.get(topsp, id);
        self.set(topsp, id, v.wrapping_add(by));
    }
    fn inc_addr(&mut self, addr: u64, by: u32) -> Result<()> {
        self.writes.push((addr, by));
        if self.deaf {
            return Ok(());
        }
        let soc = SocAddr::decode(addr)?;
        if let Some(s) = SemAddr::decode(soc.on_chip()) {
            if s.window != SemWindow::Inc {
                return Err(Error::invalid(format!("{addr:#x} is not an INC window")));
            }
            self.inc(s.topsp - self.topsp_base, s.idx, by as i32);
        }
        Ok(())
    }
}

fn read(topsp: u8, idx: u8) -> u64 {
    let window = SemWindow::Read;
    SemAddr { topsp, window, idx }.encode()
}

fn inc_addr(topsp: u8, idx: u8) -> u64 {
    read(topsp, idx) + 0x800
}

/// A ring cc_op slot.
fn ccop(reporter: bool, trigger_next: bool, wait: bool, send: bool) -> [u8; 8] {
    let f = CcOpFields {
        algo_type: 0,
        algo_sub_type: 0,
        trigger_next,
        reporter,
        ring_wait_complete: wait,
        ring_send_complete: send,
        safe_mode: false,
        unique_tensors: false,
        operands: CcOpOperands::Ring { channel_list: 1 },
    };
    pack_cc_op([0; 8], &f, u32::from(!reporter)).unwrap()
}

fn rec(m2s: u16, s2m: u16, repeat: u16, wait: Option<(u8, u8, u32, u32)>, end: bool) -> SlotRecord {
    SlotRecord {
        m2s,
        s2m,
        repeat,
        wait: wait.map(|(topsp, sem, target, consume)| SlotWait {
            topsp,
            sem,
            target,
            consume,
        }),
        end,
    }
}

/// SLOT SPAD bytes from (slot, records starting at the slot's first record).
fn slot_spad(slots: &[(usize, Vec<SlotRecord>)]) -> Vec<u8> {
    let n = slots
        .iter()
        .map(|(s, r)| s + r.len().div_ceil(SLOT_RECORDS))
        .max()
        .unwrap_or(0);
    let mut b = vec![0u8; n * SLOT_RECORDS * RECORD_BYTES];
    for (s, recs) in slots {
        for (i, r) in recs.iter().enumerate() {
            let o = (s * SLOT_RECORDS + i) * RECORD_BYTES;
            b[o..o + RECORD_BYTES].copy_from_slice(&r.encode());
        }
    }
    b
}

fn cfg(topsp: u8, op_num: u32, leader: bool) -> SeqConfig {
    SeqConfig {
        topsp,
        trigger: read(topsp, 0),
        trigger_next: read(topsp, NEXT_SEM),
        complete: 0,
        complete_prev: 0,
        complete_prev_target: 0,
        op_num,
        leader,
        completion_addrs: vec![],
    }
}

fn tail(m2s: u16, s2m: u16) -> Action {
    Action::TailInc { m2s, s2m }
}

fn blocked(topsp: u8, sem: u8, value: i32, target: i32) -> Action {
    Action::Blocked {
        topsp,
        sem,
        value,
        target,
    }
}

/// Drive to Done (or the first Blocked); returns the actions before it.
fn run(s: &mut Sequencer, f: &mut Fake) -> (Vec<Action>, Action) {
    let mut out = vec![];
    loop {
        match s.step(f).unwrap() {
            a @ Action::TailInc { .. } => out.push(a),
            a => return (out, a),
        }
    }
}

/// docs/contract/device.md §8.3: TRIGGER, then records: no wait, wait (≥ then −1), END with repeat 2;
/// the leader posts COMPLETION and the tpb_compl address.
#[test]
fn single_entry_three_records() {
    let ctrl = ccop(true, false, false, false);
    let spad = slot_spad(&[(
        0,
        vec![
            rec(2, 1, 1, None, false),
            rec(1, 1, 1, Some((0, 8, 2, 1)), false),
            rec(3, 0, 2, None, true),
        ],
    )]);
    let mut c = cfg(0, 1, true);
    let compl = 0x28_0270_1800 | (1 << 54) | (3 << 48);
    c.completion_addrs = vec![compl];
    let mut s = Sequencer::load(&ctrl, &spad, c).unwrap();
    let mut f = Fake::default();
    assert_eq!(s.step(&mut f).unwrap(), blocked(0, 0, 0, 1));
    assert_eq!(s.position().stage, Stage::Start);
    f.set(0, 0, 1);
    assert_eq!(s.step(&mut f).unwrap(), tail(2, 1));
    assert_eq!(f.get(0, 0), 0, "TRIGGER consumed");
    assert_eq!(s.step(&mut f).unwrap(), blocked(0, 8, 0, 2));
    let p = s.position();
    assert_eq!(
        (p.entry, p.slot, p.record, p.stage),
        (0, 0, Some(1), Stage::Records)
    );
    assert_eq!(
        p.waiting_on,
        Some(WaitOn {
            topsp: 0,
            sem: 8,
            target: 2,
            consume: 1
        })
    );
    f.set(0, 8, 1);
    assert_eq!(s.step(&mut f).unwrap(), blocked(0, 8, 1, 2));
    f.set(0, 8, 2);
    assert_eq!(s.step(&mut f).unwrap(), tail(1, 1));
    assert_eq!(f.get(0, 8), 1, "wait_ge_and_dec takes one, not the target");
    assert_eq!(s.position().waiting_on, None);
    assert_eq!(s.step(&mut f).unwrap(), tail(3, 0));
    assert_eq!(s.step(&mut f).unwrap(), tail(3, 0));
    assert_eq!(f.get(0, COMPLETION_SEM), 0);
    assert_eq!(s.step(&mut f).unwrap(), Action::Done);
    assert_eq!(f.get(0, COMPLETION_SEM), 1);
    assert_eq!(f.writes, vec![(compl, 1)]);
    assert!(s.is_done());
    assert_eq!(s.step(&mut f).unwrap(), Action::Done);
    assert_eq!(f.get(0, COMPLETION_SEM), 1, "completion posted once");
}

/// docs/contract/device.md §5.3 / docs/contract/lowering.md §4.6: ≥ (not >), and the record's consume is subtracted.
#[test]
fn ge_and_consume() {
    let ctrl = ccop(true, false, false, false);
    let spad = slot_spad(&[(
        0,
        vec![
            rec(1, 0, 1, Some((2, 9, 3, 3)), false),
            rec(1, 0, 1, Some((2, 9, 2, 1)), false),
            rec(1, 0, 1, Some((2, 9, 2, 1)), true),
        ],
    )]);
    let mut s = Sequencer::load(&ctrl, &spad, cfg(2, 1, true)).unwrap();
    let mut f = Fake::default();
    f.set(2, 0, 1);
    f.set(2, 9, 5);
    assert_eq!(s.step(&mut f).unwrap(), tail(1, 0));
    assert_eq!(f.get(2, 9), 2, "mesh-style consume of 3");
    assert_eq!(s.step(&mut f).unwrap(), tail(1, 0));
    assert_eq!(f.get(2, 9), 1);
    assert_eq!(s.step(&mut f).unwrap(), blocked(2, 9, 1, 2));
    f.inc(2, 9, 1);
    assert_eq!(s.step(&mut f).unwrap(), tail(1, 0));
    assert_eq!(s.step(&mut f).unwrap(), Action::Done);
    assert_eq!(f.get(2, 9), 1);
}

/// docs/contract/lowering.md §6.3: trigger_next bumps NEXT_SEM (INC window of the neff address);
/// the next entry waits it. A record without increments releases nothing and yields no action.
#[test]
fn two_chained_entries() {
    let mut ctrl = ccop(true, true, false, false).to_vec();
    ctrl.extend(ccop(true, false, false, false));
    let spad = slot_spad(&[
        (0, vec![rec(0, 0, 1, None, false), rec(1, 2, 1, None, true)]),
        (1, vec![rec(0, 0, 0, Some((1, 8, 1, 1)), true)]),
    ]);
    let mut s = Sequencer::load(&ctrl, &spad, cfg(1, 2, true)).unwrap();
    let mut f = Fake::default();
    f.set(1, 0, 1);
    assert_eq!(s.step(&mut f).unwrap(), tail(1, 2));
    assert_eq!(s.step(&mut f).unwrap(), blocked(1, 8, 0, 1));
    assert_eq!(f.writes, vec![(inc_addr(1, NEXT_SEM), 1)]);
    assert_eq!(f.get(1, NEXT_SEM), 0, "consumed by entry 1's start");
    let p = s.position();
    assert_eq!((p.entry, p.slot, p.record), (1, 1, Some(64)));
    f.set(1, 8, 1);
    assert_eq!(s.step(&mut f).unwrap(), Action::Done);
    assert_eq!(f.get(1, COMPLETION_SEM), 1);
}

/// Without its trigger_next the second entry stays blocked on NEXT_SEM.
#[test]
fn chained_entry_waits_next_sem() {
    let mut ctrl = ccop(true, true, false, false).to_vec();
    ctrl.extend(ccop(true, false, false, false));
    let spad = slot_spad(&[
        (0, vec![rec(1, 1, 1, None, true)]),
        (1, vec![rec(1, 1, 1, None, true)]),
    ]);
    let mut s = Sequencer::load(&ctrl, &spad, cfg(0, 2, true)).unwrap();
    // Address writes are logged but not applied.
    let mut d = Fake {
        deaf: true,
        ..Default::default()
    };
    d.set(0, 0, 1);
    assert_eq!(s.step(&mut d).unwrap(), tail(1, 1));
    assert_eq!(s.step(&mut d).unwrap(), blocked(0, NEXT_SEM, 0, 1));
    assert_eq!(s.position().stage, Stage::Start);
}

/// docs/contract/lowering.md §6.3 as emitted: the non-reporter increments the reporter's CHAIN_SEM;
/// the reporter waits `complete_prev_target` of them before posting completion.
#[test]
fn reporter_waits_second_topsp() {
    let spad = slot_spad(&[(0, vec![rec(2, 2, 1, None, true)])]);
    let mut c0 = cfg(0, 1, true);
    c0.complete_prev = read(0, CHAIN_SEM);
    c0.complete_prev_target = 1;
    let mut c1 = cfg(1, 1, false);
    c1.complete = read(0, CHAIN_SEM);
    let mut rep = Sequencer::load(&ccop(true, false, true, false), &spad, c0).unwrap();
    let mut other = Sequencer::load(&ccop(false, false, false, true), &spad, c1).unwrap();
    let mut f = Fake::default();
    f.set(0, 0, 1);
    f.set(1, 0, 1);
    let (acts, last) = run(&mut rep, &mut f);
    assert_eq!(
        (acts, last),
        (vec![tail(2, 2)], blocked(0, CHAIN_SEM, 0, 1))
    );
    assert_eq!(rep.position().stage, Stage::Completions);
    assert_eq!(f.get(0, COMPLETION_SEM), 0);
    let (acts, last) = run(&mut other, &mut f);
    assert_eq!((acts, last), (vec![tail(2, 2)], Action::Done));
    assert_eq!(f.writes, vec![(inc_addr(0, CHAIN_SEM), 1)]);
    assert_eq!(f.get(1, COMPLETION_SEM), 0, "non-leader posts nothing");
    assert_eq!(rep.step(&mut f).unwrap(), Action::Done);
    assert_eq!((f.get(0, CHAIN_SEM), f.get(0, COMPLETION_SEM)), (0, 1));
}

/// docs/contract/lowering.md §6.2: an entry of 70 records spans SLOT slots 0–1; CTRL slot 1 is a
/// continuation mark. Full-size (zero-padded) SPAD images load too.
#[test]
fn continuation_slots() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    let mut recs: Vec<_> = (0..70)
        .map(|i| rec(1, (i % 3) as u16, 1, None, false))
        .collect();
    recs[69].end = true;
    let mut spad = slot_spad(&[(0, recs)]);
    let mut ctrl = ccop(true, false, false, false).to_vec();
    ctrl.extend(SPAD_SLOT_CONTINUE_MARK.to_le_bytes());
    let mut s = Sequencer::load(&ctrl, &spad, cfg(0, 1, true)).unwrap();
    let mut f = Fake::default();
    f.set(0, 0, 1);
    let (acts, last) = run(&mut s, &mut f);
    assert_eq!((acts.len(), last), (70, Action::Done));
    assert_eq!(acts[69], tail(1, 0));
    ctrl.resize(CTRL_SPAD_BYTES, 0);
    spad.resize(SLOT_SPAD_BYTES, 0);
    let s = Sequencer::load(&ctrl, &spad, cfg(0, 1, true)).unwrap();
    assert_eq!(s.entries(), 1);
    assert_eq!(s.entry(0).unwrap().1.len(), 70);
    // Without the continuation mark, the END lies outside the entry's slot.
    let e = Sequencer::load(&ctrl[..8], &spad, cfg(0, 1, true)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert!(e.message().contains("no END record"), "{e}");
}

fn load_err(ctrl: &[u8], spad: &[u8], c: SeqConfig) -> String {
    let e = Sequencer::load(ctrl, spad, c).unwrap_err();
    assert_eq!(e.kind(), crate::error::ErrorKind::Invalid, "{e}");
    e.message().to_string()
}

/// Anything undecodable or inconsistent is refused at load, naming the slot/record and byte.
#[test]
fn load_rejects_malformed_tables() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    let good = ccop(true, false, false, false);
    let spad = slot_spad(&[(0, vec![rec(1, 1, 1, None, true)])]);
    let c = || cfg(0, 1, true);
    assert!(Sequencer::load(&good, &spad, c()).is_ok());
    // Continuation mark first.
    let m = load_err(&SPAD_SLOT_CONTINUE_MARK.to_le_bytes(), &spad, c());
    assert!(m.contains("slot 0") && m.contains("continuation"), "{m}");
    // Ragged CTRL SPAD.
    assert!(load_err(&good[..7], &spad, c()).contains("multiple of 8"));
    // cc_op bit clear on a non-empty slot.
    let mut b = good;
    b[0] = 0;
    assert!(load_err(&b, &spad, c()).contains("header.cc_op is 0"));
    // Reserved flag bits.
    let mut b = good;
    b[2] |= 0x80;
    assert!(load_err(&b, &spad, c()).contains("byte 2"));
    // Garbage after the end of the table.
    let mut t = good.to_vec();
    t.extend([0; 8]);
    t.extend([0, 0, 0, 0, 0, 0, 0, 1]);
    let m = load_err(&t, &spad, c());
    assert!(
        m.contains("after the end of the table") && m.contains("0x17"),
        "{m}"
    );
    // Bad record flags: names record and byte.
    let mut sp = spad.clone();
    sp[7] |= 0x20;
    let m = load_err(&good, &sp, c());
    assert!(
        m.contains("SLOT SPAD record 0") && m.contains("byte 0x0"),
        "{m}"
    );
    // Missing END.
    let no_end = slot_spad(&[(0, vec![rec(1, 1, 1, None, false)])]);
    assert!(load_err(&good, &no_end, c()).contains("no END record"));
    assert!(load_err(&good, &no_end[..32], c()).contains("past the end"));
    // op_num mismatch, leader mismatch.
    assert!(load_err(&good, &spad, cfg(0, 2, true)).contains("op_num"));
    assert!(load_err(&good, &spad, cfg(0, 1, false)).contains("leader"));
    // trigger_next on the last entry.
    let m = load_err(&ccop(true, true, false, false), &spad, c());
    assert!(m.contains("trigger_next on the last entry"), "{m}");
    // ring_wait_complete without complete_prev.
    let m = load_err(&ccop(true, false, true, false), &spad, c());
    assert!(m.contains("complete_prev"), "{m}");
    // ring_send_complete without complete.
    let m = load_err(&ccop(false, false, false, true), &spad, cfg(0, 1, false));
    assert!(m.contains("complete"), "{m}");
    // Trigger in the INC window; trigger_next in another TOP_SP's block.
    let mut bad = c();
    bad.trigger = inc_addr(0, 0);
    assert!(load_err(&good, &spad, bad).contains("READ form"));
    let mut two = good.to_vec();
    two[1] |= 0x80;
    two.extend(good);
    let sp2 = slot_spad(&[
        (0, vec![rec(1, 1, 1, None, true)]),
        (1, vec![rec(1, 1, 1, None, true)]),
    ]);
    assert!(Sequencer::load(&two, &sp2, cfg(0, 2, true)).is_ok());
    let mut bad = cfg(0, 2, true);
    bad.trigger_next = read(3, NEXT_SEM);
    assert!(load_err(&two, &sp2, bad).contains("block 3"));
    // repeat 0 with increments.
    let z = slot_spad(&[(0, vec![rec(1, 0, 0, None, true)])]);
    assert!(load_err(&good, &z, c()).contains("repeat 0"));
}

/// What a loader does: the emitter's `NeffConfigs` → [`SeqConfig`].
fn load_image(img: &crate::lower::emit::TopspImage) -> Sequencer {
    let nf = img.neff;
    let c = SeqConfig {
        topsp: img.topsp,
        trigger: nf.trigger,
        trigger_next: nf.trigger_next,
        complete: nf.complete,
        complete_prev: nf.complete_prev,
        complete_prev_target: nf.complete_prev_target,
        op_num: nf.op_num,
        leader: nf.leader,
        completion_addrs: vec![],
    };
    Sequencer::load(&img.ctrl_spad, &img.slot_spad, c).unwrap()
}

/// The real images of a 2-rank ring all-reduce: every TOP_SP loads and, with every wait
/// granted, walks to Done releasing exactly its streams' descriptors.
#[test]
fn real_emitted_ring_all_reduce() {
    use crate::isa::enums::Dtype;
    use crate::lower::pipeline::{address_map, lower, LowerConfig};
    use crate::lower::program::Algorithm;
    use crate::lower::request::{CollectiveOp, CollectiveRequest, ReduceOp};
    for (count, forced) in [
        (1u64, Some(Algorithm::Ring)),
        (4099, Some(Algorithm::Ring)),
        (4099, None),
    ] {
        let req = CollectiveRequest::new(
            CollectiveOp::AllReduce,
            Dtype::Fp32,
            Some(ReduceOp::Add),
            count,
            vec![0, 1],
            0,
        );
        let mut lc = LowerConfig::for_world(2).unwrap();
        lc.select.forced = forced;
        let p = lower(&req, &lc).unwrap();
        let map = address_map(&p, &lc.topology).unwrap();
        let e = crate::lower::emit::emit(&p, &map).unwrap();
        let mut n = 0;
        for r in &e.ranks {
            for img in &r.topsps {
                let nf = img.neff;
                let mut s = load_image(img);
                let mut f = Fake {
                    grant_all: true,
                    ..Default::default()
                };
                let (acts, last) = run(&mut s, &mut f);
                assert_eq!(last, Action::Done, "rank {} TOP_SP {}", r.rank, img.topsp);
                let expected: usize = img
                    .steps
                    .iter()
                    .flat_map(|st| st.records.clone())
                    .map(|pos| {
                        let o = pos as usize * RECORD_BYTES;
                        let b = img.slot_spad[o..o + RECORD_BYTES].try_into().unwrap();
                        let r = SlotRecord::decode(b).unwrap();
                        if r.m2s | r.s2m != 0 {
                            usize::from(r.repeat)
                        } else {
                            0
                        }
                    })
                    .sum();
                assert_eq!(acts.len(), expected);
                let (m, s2) = acts.iter().fold((0usize, 0usize), |(a, b), x| match x {
                    Action::TailInc { m2s, s2m } => (a + *m2s as usize, b + *s2m as usize),
                    _ => unreachable!(),
                });
                assert_eq!((m, s2), (img.m2s.len(), img.s2m.len()));
                assert_eq!(f.get(img.topsp, COMPLETION_SEM), i32::from(nf.leader));
                n += 1;
            }
        }
        assert!(n >= 2);
    }
}

/// The chaining protocol on real images: every TOP_SP of a rank of a 2-rank ring all-reduce
/// (2 channels), triggered once, run interleaved with only the step waits granted; TRIGGER,
/// NEXT_SEM and CHAIN_SEM are honoured, so the reporter finishes only after the others sent
/// their completions, and every chaining semaphore ends at 0.
#[test]
fn real_images_chain_between_topsps() {
    use crate::isa::enums::Dtype;
    use crate::lower::pipeline::{address_map, lower, LowerConfig};
    use crate::lower::request::{CollectiveOp, CollectiveRequest, ReduceOp};
    let req = CollectiveRequest::new(
        CollectiveOp::AllReduce,
        Dtype::Bf16,
        Some(ReduceOp::Add),
        1 << 16,
        vec![0, 1],
        0,
    );
    let mut lc = LowerConfig::for_world(2).unwrap();
    lc.chunk = crate::lower::pipeline::ChunkSize::Elems(1024);
    lc.select.forced = Some(crate::lower::program::Algorithm::Ring);
    let p = lower(&req, &lc).unwrap();
    let map = address_map(&p, &lc.topology).unwrap();
    let e = crate::lower::emit::emit(&p, &map).unwrap();
    for r in &e.ranks {
        let mut f = Fake {
            grant_steps: true,
            topsp_base: map.device_topsp(r.rank, 0).unwrap(),
            ..Default::default()
        };
        let mut seqs: Vec<Sequencer> = r
            .topsps
            .iter()
            .map(|img| {
                f.set(img.topsp, 0, 1);
                load_image(img)
            })
            .collect();
        assert_eq!(seqs.len(), 2, "channels 0 and 1 on TOP_SPs 0 and 1");
        // Round-robin, one action at a time, the reporter (leader) first.
        seqs.sort_by_key(|s| !s.config().leader);
        let mut rounds = 0;
        while !seqs.iter().all(Sequencer::is_done) {
            for s in &mut seqs {
                s.step(&mut f).unwrap();
            }
            rounds += 1;
            assert!(rounds < 100_000, "rank {} does not finish", r.rank);
        }
        let leaders: Vec<u8> = seqs
            .iter()
            .filter(|s| s.config().leader)
            .map(|s| s.config().topsp)
            .collect();
        assert_eq!(leaders.len(), 1, "one reporter per rank");
        for s in &seqs {
            let t = s.config().topsp;
            assert_eq!(f.get(t, COMPLETION_SEM), i32::from(s.config().leader));
            for id in [0, NEXT_SEM, CHAIN_SEM] {
                assert_eq!(f.get(t, id), 0, "rank {} TOP_SP {t} sem {id}", r.rank);
            }
        }
        let sends = f
            .writes
            .iter()
            .filter(|(a, _)| {
                SocAddr::decode(*a)
                    .ok()
                    .and_then(|s| SemAddr::decode(s.on_chip()))
                    .map(|s| s.idx)
                    == Some(CHAIN_SEM)
            })
            .count();
        let entries: usize = seqs
            .iter()
            .filter(|s| !s.config().leader)
            .map(Sequencer::entries)
            .sum();
        assert_eq!(sends, entries, "one completion per non-reporter entry");
    }
}

//! The live CC context of one simulated TOP_SP: its state rendered as the NCFW context image of
//! docs/contract/carrier.md §3 for the machine's arch, so that `libncfw_ctx_log` (our
//! [`ncfw::ctx_log`](crate::ncfw::ctx_log()) or the vendor's) dumps a running or stuck collective.
//!
//! **On demand.** The image is built from the live state each time it is asked for
//! ([`cc_context_image`]); nothing is kept up to date while the sequencer moves. The bytes are a
//! pure function of that state, so two calls without a step in between give the same image.
//! Layouts are not repeated here: every byte goes through [`CcContextBuilder`] and the offsets
//! of [`ncfw::ctx_layout`](crate::ncfw::ctx_layout).
//!
//! # The hang report offers the dump
//!
//! [`Machine::hang_report`](super::executor::Machine::hang_report) ends with one line per stuck
//! TOP_SP (a sequencer that has not finished) naming how to get its context:
//! [`Machine::ctx_log`](super::executor::Machine::ctx_log)`(chip, topsp)`, or the environment
//! variable [`HANG_DUMP_ENV`] (`OPENNRT_HANG_DUMP=<dir>`). When that variable is set, the report
//! writes `<dir>/chip<C>_topsp<T>.json` (the `ctx_log` text) and `<dir>/chip<C>_topsp<T>.ctx`
//! (the raw image, which `opennrt ctx-log --arch <id> --ctx <file>` or the vendor's libncfw dumps
//! again) for every stuck TOP_SP and names the `.json` files instead (an empty value counts as
//! unset); a failed write is reported in the same place. The `.json` file is exactly what
//! `libncfw_ctx_log` prints, vendor quirks included (`%p` fields are not JSON strings,
//! docs/contract/carrier.md §5 item 5).
//!
//! # Where each value comes from
//!
//! Inputs: the [`Sequencer`] (its decoded CTRL SPAD entries and SLOT SPAD records, its
//! [`SeqConfig`](super::topsp::SeqConfig) neff values, its [`Position`](super::topsp::Position)),
//! the [`QueuePair`] (ring bases and tails), the chip and device TOP_SP, and the arch.
//!
//! | context field (docs/contract/carrier.md §3) | value |
//! |---|---|
//! | `neff_configs.trigger`, `trigger_next`, `complete`, `complete_prev` (§3.2.7) | the loaded neff values: SoC addresses in the READ-window form (docs/contract/device.md §9.2) |
//! | `neff_configs.op_num`, `leader` | the loaded neff values |
//! | `neff_configs.tpb_compl_addr_num`, `neff.op.tpb_compl[0..2]` (docs/contract/carrier.md §3.4) | the number of completion addresses, and the first two |
//! | `neff_configs.ctrl_spad_base`, `slot_spad_base[0]`; `neff.basic_block.ctrl_spad_addr`, `slot_spad_addr[0]` (§3.6) | the program area of the TOP_SP (`isa::memmap`), found from its M2S ring base |
//! | `basic_block_configs.pring_base_addr` / `pring_total_desc_num` (§3.2.11) | the M2S ring base / the M2S descriptors the whole program releases (Σ `m2s · repeat`) |
//! | `basic_block_configs.table[0].desc_count` | the same count, saturated to u16 (one basic block per program) |
//! | `dev.tpb_id`, `dev.dev_id` (§3.2.12) | device TOP_SP and chip, each cut to its 4-bit field |
//! | `configs.algo.ring.channels[c].channel_id` (§3.2.2) | `c`, for every channel a ring entry of this TOP_SP drives (`channel_list`) |
//! | `configs.algo.ring.channels[lead].recv_sema` | READ-form address of the semaphore the current record waits (ring entry, in its records) |
//! | `configs.algo.mesh.events[i]` (§3.2.6) | mesh entry: record `i` of the current entry: `wait_event`, `event_wait_sema` (READ form), `wait_val` = target, `dma_trigger` = it releases descriptors |
//! | `neff.op.ctrl_entry` (§3.5) | the current entry's 8-byte CTRL SPAD slot (re-packed losslessly from the decoded slot) |
//! | `neff.op.id` / `neff.op.reporter` | the current entry's ordinal / its reporter bit |
//! | `neff.basic_block.curr_id` | 0 (one basic block per program) |
//! | `algo.ring.channels[lead]` (§3.7) | ring entry: `recv_cnt` = waits completed in the entry, `repeat_cnt` = repeats of the current record already applied, `m2s_val`/`s2m_val` = the current record's increments, `slot_idx` = SLOT SPAD slot of the current record, `run_state` (below) |
//! | `algo.hierarchical.run_state` | [`RunState`] of the walk, for ring and mesh entries alike |
//! | `algo.mesh.event_index` | mesh entry: index of the current record in the entry (= events done) |
//!
//! `lead` is the lowest channel of the current entry's `channel_list`: one TOP_SP drives one
//! queue pair and walks its tapes one after the other, so its state is one lane, reported once.
//!
//! Choices (the spec gives the field, not its meaning for our device — change them here):
//! * [`RunState`] values 0 start / 1 records / 2 completions / 3 done (`run_state` is \[M\],
//!   docs/contract/carrier.md Q-K).
//! * `repeat_cnt` is derived from the queue tails: the queue pair's tails move only by the
//!   sequencer's releases, so the tail minus what the records before the current one released,
//!   divided by the current record's increment, is how many repeats it applied (clamped to
//!   `repeat`).
//! * `slot_idx` is the SLOT SPAD slot holding the current record (the entry's own slot outside
//!   the records).
//! * Fields with no live value in our device stay zero: `send_credit` (one record wait gates
//!   both directions; there is no separate credit counter), the neighbours, `post_sema`,
//!   `dma_compl_sema`, kangaring semaphores and every `dma_apb_bcast` (tail increments are not
//!   broadcast register writes here), `dma_alloc_bitmap`, `desc_count[]`, the barrier configs
//!   and `barrier_completed` (no barrier), `tpb_stop_sema`, `function_n`, `tsync`,
//!   `tpb_ctrl_ack`, `seng_id`, the static hierarchical handle.
//! * Semaphore *values* have no place in the §3 layout (it stores addresses, and the firmware
//!   reads values through them); the hang report prints them.
//! * The program area is found only when the M2S ring sits at a program area's M2S offset
//!   (`isa::memmap`, as every loader of this crate places it); otherwise the SPAD addresses are 0.

use crate::isa::ccop::{
    AlgoTypeEncoding, DevicePattern, SpadCtrlEntry, ALGO_TYPE_CARRIES, SPAD_CTRL_ENTRY_SIZE,
};
use crate::isa::evtsem::{SemAddr, SemWindow, MAX_TOPSPS};
use crate::isa::memmap::{
    program_part, window_of, ProgramPart, CTRL_SPAD_OFF, M2S_RING_OFF, SLOT_SPAD_OFF,
};
use crate::isa::slot::{SlotRecord, SlotWait, SLOT_RECORDS};
use crate::ncfw::{
    Arch, BasicBlockCtx, CcContextBuilder, DevConfigs, MeshEvent, NeffSemas, RingChannel, RingRow,
};

use super::dma::QueuePair;
use super::topsp::{Sequencer, Stage};

/// Environment variable naming a directory: when set, the hang report writes every stuck
/// TOP_SP's context there (see [`dump_file_stem`]).
pub const HANG_DUMP_ENV: &str = "OPENNRT_HANG_DUMP";

/// The walk state written to `run_state` (Choice, see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum RunState {
    /// Waiting the start of an entry (`trigger` for the first, `trigger_next` after).
    Start = 0,
    /// Inside the entry's SLOT SPAD records.
    Records = 1,
    /// The reporter collecting the other TOP_SPs' completions (`complete_prev`).
    Completions = 2,
    /// Every entry done, completion posted.
    Done = 3,
}

impl From<Stage> for RunState {
    fn from(s: Stage) -> RunState {
        match s {
            Stage::Start => RunState::Start,
            Stage::Records => RunState::Records,
            Stage::Completions => RunState::Completions,
            Stage::Done => RunState::Done,
        }
    }
}

/// One TOP_SP's live state, as the executor holds it.
#[derive(Debug, Clone, Copy)]
pub struct LiveTopsp<'a> {
    /// The machine's arch (selects the docs/contract/carrier.md §3 layout).
    pub arch: Arch,
    /// Chip.
    pub chip: u8,
    /// Device TOP_SP index.
    pub topsp: u8,
    /// Its sequencer.
    pub seq: &'a Sequencer,
    /// Its queue pair.
    pub pair: &'a QueuePair,
}

impl LiveTopsp<'_> {
    /// Device TOP_SP of the sequencer's rank-local TOP_SP `t` (consecutive per rank, as the
    /// executor places them).
    fn device(&self, t: u8) -> u8 {
        self.topsp
            .wrapping_sub(self.seq.config().topsp)
            .wrapping_add(t)
    }

    /// READ-window address of a record's wait semaphore (docs/contract/device.md §9.2).
    fn read_addr(&self, w: &SlotWait) -> u64 {
        SemAddr {
            topsp: self.device(w.topsp),
            window: SemWindow::Read,
            idx: w.sem,
        }
        .encode()
    }
}

/// The name `ctx_log` gets for a live context (inserted raw into the dump, so no quotes).
pub fn model_name(chip: u8, topsp: u8, rank: Option<u32>) -> String {
    match rank {
        Some(r) => format!("opennrt rank {r} chip {chip} TOP_SP {topsp}"),
        None => format!("opennrt chip {chip} TOP_SP {topsp}"),
    }
}

/// File stem of a hang dump: `chip<C>_topsp<T>` (`.json` = the ctx_log text, `.ctx` = the raw
/// image that `opennrt ctx-log --ctx` or the vendor's libncfw can dump again).
pub fn dump_file_stem(chip: u8, topsp: u8) -> String {
    format!("chip{chip}_topsp{topsp}")
}

/// Is this cc_op a mesh-family entry (mesh events) rather than a ring one (channels)?
/// Under the host-algorithm reading the mesh family is MESH 2, INTRA_RDH 5, SINGLE_STEP_MESH 6
/// and the mesh variants 8..10 (docs/contract/lowering.md §2.2, §6.1).
fn is_mesh(c: &SpadCtrlEntry) -> bool {
    match ALGO_TYPE_CARRIES {
        AlgoTypeEncoding::DevicePattern => c.algo_type == DevicePattern::Mesh as u8,
        AlgoTypeEncoding::HostAlgorithm => matches!(c.algo_type, 2 | 5 | 6 | 8 | 9 | 10),
    }
}

/// `(m2s, s2m)` descriptors released by `recs`.
fn released(recs: &[SlotRecord]) -> (u64, u64) {
    recs.iter().fold((0, 0), |(m, s), r| {
        let n = u64::from(r.repeat);
        (m + u64::from(r.m2s) * n, s + u64::from(r.s2m) * n)
    })
}

/// CTRL and SLOT SPAD bases of the program area whose M2S ring starts at `m2s_base`.
fn spad_bases(m2s_base: u64) -> Option<(u64, u64)> {
    let (_, off) = window_of(m2s_base)?;
    match program_part(off, u32::from(MAX_TOPSPS))? {
        (_, ProgramPart::M2sRing, 0) => {
            let area = m2s_base - M2S_RING_OFF;
            Some((area + CTRL_SPAD_OFF, area + SLOT_SPAD_OFF))
        }
        _ => None,
    }
}

/// Where the walk is, resolved against the loaded program.
struct Cursor<'a> {
    /// Current entry ordinal.
    entry: usize,
    ctrl: SpadCtrlEntry,
    slot: usize,
    records: &'a [SlotRecord],
    /// Index of the current record in the entry (Records stage only).
    rec: Option<usize>,
    state: RunState,
}

impl Cursor<'_> {
    /// Waits completed in the current entry: those of the records before the current one, plus
    /// the current record's own once it is no longer `waiting` on it.
    fn waits_done(&self, waiting: bool) -> u16 {
        let before = match (self.state, self.rec) {
            (RunState::Records, Some(r)) => &self.records[..r],
            (RunState::Start, _) => &[],
            _ => self.records,
        };
        let mut n = before.iter().filter(|r| r.wait.is_some()).count();
        if let Some(r) = self.rec.and_then(|r| self.records.get(r)) {
            n += usize::from(r.wait.is_some() && !waiting);
        }
        u16::try_from(n).unwrap_or(u16::MAX)
    }
}

fn cursor(seq: &Sequencer) -> Option<Cursor<'_>> {
    let p = seq.position();
    let entry = p.entry.min(seq.entries().checked_sub(1)?);
    let (ctrl, records) = seq.entry(entry)?;
    let state = RunState::from(p.stage);
    let rec = match (state, p.record) {
        (RunState::Records, Some(pos)) => {
            Some((pos as usize).saturating_sub(p.slot * SLOT_RECORDS))
                .filter(|&r| r < records.len())
        }
        _ => None,
    };
    Some(Cursor {
        entry,
        ctrl: *ctrl,
        slot: p.slot,
        records,
        rec,
        state,
    })
}

/// Repeats of the current record already applied, derived from the queue tails (module doc).
fn repeats_done(live: &LiveTopsp, cur: &Cursor) -> u16 {
    let Some(r) = cur.rec.map(|i| cur.records[i]) else {
        return 0;
    };
    let (mut m, mut s) = (0, 0);
    for e in 0..cur.entry {
        let (dm, ds) = live.seq.entry(e).map_or((0, 0), |(_, recs)| released(recs));
        m += dm;
        s += ds;
    }
    let (dm, ds) = released(&cur.records[..cur.rec.unwrap_or(0)]);
    let (m, s) = (m + dm, s + ds);
    let done = if r.m2s > 0 {
        live.pair.m2s.tail().saturating_sub(m) / u64::from(r.m2s)
    } else if r.s2m > 0 {
        live.pair.s2m.tail().saturating_sub(s) / u64::from(r.s2m)
    } else {
        0
    };
    done.min(u64::from(r.repeat)) as u16
}

/// The CC-context image of one live TOP_SP: exactly the arch's minimum context size
/// (0x32C6 bytes on v2, 0x44E6 on v3+, docs/contract/carrier.md §3.1), filled as the module doc says.
pub fn cc_context_image(live: &LiveTopsp) -> Vec<u8> {
    const IN_RANGE: &str = "index in range by construction";
    let seq = live.seq;
    let cfg = seq.config();
    let mut b = CcContextBuilder::new(live.arch);

    // neff_configs (docs/contract/carrier.md §3.2.7) and dev_configs (§3.2.12).
    b.neff_semas(&NeffSemas {
        trigger: cfg.trigger,
        trigger_next: cfg.trigger_next,
        complete: cfg.complete,
        complete_prev: cfg.complete_prev,
        tpb_stop_sema: 0,
    })
    .op_num(cfg.op_num)
    .leader(cfg.leader)
    .function_n(
        0,
        u8::try_from(cfg.completion_addrs.len()).unwrap_or(u8::MAX),
    );
    let m2s_base = live.pair.m2s.base();
    let (ctrl_base, slot_base) = spad_bases(m2s_base).unwrap_or((0, 0));
    b.ctrl_spad_base(ctrl_base)
        .slot_spad_base(0, slot_base)
        .expect(IN_RANGE);
    let total_m2s = (0..seq.entries())
        .filter_map(|e| seq.entry(e))
        .map(|(_, recs)| released(recs).0)
        .sum::<u64>();
    if total_m2s > 0 {
        let n = u16::try_from(total_m2s).unwrap_or(u16::MAX);
        b.basic_block(0, n, 0, 0).expect(IN_RANGE);
    }
    let pring_total = u32::try_from(total_m2s).unwrap_or(u32::MAX);
    b.basic_block_switch(0, m2s_base, pring_total);
    b.dev_configs(&DevConfigs {
        tpb_id: live.topsp & 0xF,
        dev_id: live.chip & 0xF,
        ..Default::default()
    })
    .expect("4-bit fields masked");

    // Static ring channels: the channels the ring entries drive.
    let mut channels = [RingChannel::default(); 32];
    for (ctrl, _) in (0..seq.entries()).filter_map(|e| seq.entry(e)) {
        if !is_mesh(ctrl) {
            for (c, ch) in channels.iter_mut().enumerate() {
                if ctrl.channel_list() >> c & 1 == 1 {
                    ch.channel_id = c as u8;
                }
            }
        }
    }

    // The runtime part (docs/contract/carrier.md §3.3–§3.7) from the current position.
    let mut compl = [0u64; 2];
    for (d, a) in compl.iter_mut().zip(&cfg.completion_addrs) {
        *d = *a;
    }
    b.runtime_basic_block(&BasicBlockCtx {
        slot_spad_addr: [slot_base, 0, 0, 0, 0, 0],
        ctrl_spad_addr: ctrl_base,
        curr_id: 0,
    });
    let Some(cur) = cursor(seq) else {
        b.runtime_op(compl, 0, 0);
        for (c, ch) in channels.iter().enumerate() {
            b.ring_channel(c, ch).expect(IN_RANGE);
        }
        return b.build();
    };
    let slot: [u8; SPAD_CTRL_ENTRY_SIZE] = cur.ctrl.pack().expect("an unpacked slot re-packs");
    b.runtime_ctrl_entry(slot);
    b.runtime_op(compl, cur.entry as u32, u8::from(cur.ctrl.reporter));
    b.runtime_hier_run_state(cur.state as u8);
    let waiting = seq.position().waiting_on.is_some();
    let current = cur.rec.map(|i| cur.records[i]);
    if is_mesh(&cur.ctrl) {
        for (i, r) in cur.records.iter().take(live.arch.mesh_events()).enumerate() {
            b.mesh_event(
                i,
                &MeshEvent {
                    event_wait_sema: r.wait.map_or(0, |w| live.read_addr(&w)),
                    wait_val: r.wait.map_or(0, |w| w.target),
                    wait_event: u8::from(r.wait.is_some()),
                    dma_trigger: u8::from(r.m2s != 0 || r.s2m != 0),
                    ..Default::default()
                },
            )
            .expect(IN_RANGE);
        }
        let index = match cur.state {
            RunState::Start => 0,
            RunState::Records => cur.rec.unwrap_or(0),
            RunState::Completions | RunState::Done => cur.records.len(),
        };
        b.runtime_mesh_event_index(u16::try_from(index).unwrap_or(u16::MAX));
    } else if cur.ctrl.channel_list() != 0 {
        let lead = cur.ctrl.channel_list().trailing_zeros() as usize;
        if let Some(w) = current.and_then(|r| r.wait) {
            channels[lead].recv_sema = live.read_addr(&w);
        }
        let slot_idx = cur
            .rec
            .map_or(cur.slot, |r| (r + cur.slot * SLOT_RECORDS) / SLOT_RECORDS);
        let row = RingRow {
            recv_cnt: cur.waits_done(waiting),
            send_credit: 0,
            repeat_cnt: repeats_done(live, &cur),
            m2s_val: current.map_or(0, |r| r.m2s),
            s2m_val: current.map_or(0, |r| r.s2m),
            slot_idx: u8::try_from(slot_idx).unwrap_or(u8::MAX),
            run_state: cur.state as u8,
        };
        b.runtime_ring_row(lead, &row).expect(IN_RANGE);
    }
    for (c, ch) in channels.iter().enumerate() {
        b.ring_channel(c, ch).expect(IN_RANGE);
    }
    b.build()
}

#[cfg(test)]
mod tests;

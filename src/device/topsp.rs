//! The TOP_SP sequencer of one (rank, TOP_SP): a pure, resumable state machine that walks the
//! cc_op program it was loaded with (docs/contract/device.md §8.3, §10; docs/contract/lowering.md §6.2–§6.5) —
//! no threads, no blocking. The executor calls [`Sequencer::step`] until it returns
//! [`Action::Blocked`] (re-run it when that semaphore changes) or [`Action::Done`].
//!
//! # Protocol (exactly what `lower::emit` / `lower::spad` write)
//!
//! 1. Wait the `trigger` semaphore (own id 0): `≥ 1`, consume 1 (docs/contract/device.md §8.3).
//! 2. Per cc_op entry (CTRL SPAD slot k; `SPAD_SLOT_CONTINUE_MARK` slots extend it, and CTRL
//!    slot k ↔ SLOT SPAD slot k), its records from the first record of slot k up to END
//!    (`isa::slot`): wait `sem ≥ target` then `sem −= consume` (the record's own consume: 1 for
//!    ring steps, `wait_val` for mesh events — docs/contract/device.md §5.3, docs/contract/lowering.md §4.6; never the
//!    firmware's strict `>`); then `repeat` × {S2M tail += s2m; M2S tail += m2s}, one
//!    [`Action::TailInc`] per repeat (the executor applies S2M first, docs/contract/device.md §1.2). A record
//!    whose m2s and s2m are both 0 releases nothing and yields no action.
//! 3. At the entry's end (docs/contract/lowering.md §6.3 as the emitter implements it):
//!    `ring_wait_complete` (reporter) waits its own `complete_prev` semaphore (`CHAIN_SEM`)
//!    `≥ complete_prev_target`, consuming that many (one completion per other TOP_SP of the
//!    entry); `ring_send_complete` (non-reporter) increments `complete` (the reporter's
//!    `CHAIN_SEM`) by 1; `trigger_next` increments its own `trigger_next` semaphore (`NEXT_SEM`)
//!    by 1, and the next entry starts by waiting that semaphore `≥ 1`, consuming 1.
//! 4. After the last entry the leader posts completion once (docs/contract/device.md §10): +1 on its own
//!    COMPLETION semaphore (id 1), then +1 at every `completion_addrs` address (the compute
//!    engines' SEM_INC_COMPLETE). Then [`Action::Done`].
//!
//! Choices: §10 says the reporter "sets" COMPLETION; we increment it by 1 (so repeated runs
//! count). Neff addresses are SoC addresses in the READ form; increments go to the INC twin
//! (+0x800, docs/contract/device.md §9.2) through [`SemAccess::inc_addr`], waits on own semaphores use the
//! decoded index through [`SemAccess::try_wait`]. Completion is posted when this TOP_SP has
//! released its last descriptors: draining the DMA rings is the executor's (or the program's
//! final waits') business.

use std::sync::Arc;

use crate::error::Result;
use crate::isa::ccop::SpadCtrlEntry;
use crate::isa::slot::SlotRecord;

mod load;

/// Reserved TOP_SP semaphore id the leader increments on completion (docs/contract/lowering.md §6.4).
pub const COMPLETION_SEM: u8 = 1;

/// The `neff_configs` values the sequencer needs (docs/contract/lowering.md §6.3), as plain numbers. Mirrors
/// the emitter's `NeffConfigs` (the loader fills it from there or from a context image);
/// semaphore fields are SoC addresses in the READ-window form (docs/contract/device.md §9.2), 0 = unused.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SeqConfig {
    /// Rank-local TOP_SP index (own semaphores are waited as `(topsp, idx)`).
    pub topsp: u8,
    /// Own TRIGGER semaphore (id 0), waited before the first entry.
    pub trigger: u64,
    /// Own `trigger_next` semaphore (`NEXT_SEM`); required when an entry has `trigger_next`.
    pub trigger_next: u64,
    /// The reporter's `CHAIN_SEM`; required when an entry has `ring_send_complete`.
    pub complete: u64,
    /// Own `CHAIN_SEM`; required when an entry has `ring_wait_complete`.
    pub complete_prev: u64,
    /// Completions `complete_prev` collects per entry (> 0 when it is used).
    pub complete_prev_target: u32,
    /// Number of cc_op entries (continuations excluded); must match the CTRL SPAD.
    pub op_num: u32,
    /// Reporter of the entries: posts completion; must match the entries' reporter bits.
    pub leader: bool,
    /// `tpb_compl` addresses (INC-window SoC addresses of compute-engine semaphores) the
    /// leader increments by 1 on completion; empty = none.
    pub completion_addrs: Vec<u64>,
}

/// The executor's view of the machine's semaphores, as this sequencer's rank sees them.
pub trait SemAccess {
    /// Current value of `(rank-local topsp, id)`.
    fn value(&self, topsp: u8, id: u8) -> i32;
    /// If `(topsp, id) ≥ target`, subtract `consume` and return true; else change nothing.
    fn try_wait(&mut self, topsp: u8, id: u8, target: i32, consume: i32) -> bool;
    /// `(topsp, id) += by`.
    fn inc(&mut self, topsp: u8, id: u8, by: i32);
    /// A 32-bit write of `by` to the SoC address `addr` (an INC window), issued by this rank.
    fn inc_addr(&mut self, addr: u64, by: u32) -> Result<()>;
}

/// What the sequencer asks of the executor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Release descriptors: S2M tail += `s2m`, then M2S tail += `m2s` (one repeat).
    TailInc {
        /// M2S (TX) descriptors.
        m2s: u16,
        /// S2M (RX) descriptors.
        s2m: u16,
    },
    /// Waiting for `(topsp, sem) ≥ target`; `value` is what it read.
    Blocked {
        /// Rank-local TOP_SP of the semaphore.
        topsp: u8,
        /// Semaphore id.
        sem: u8,
        /// Its value when the wait failed.
        value: i32,
        /// The threshold.
        target: i32,
    },
    /// Every entry finished and completion was posted. Further steps return `Done` again.
    Done,
}

/// A pending wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitOn {
    /// Rank-local TOP_SP.
    pub topsp: u8,
    /// Semaphore id.
    pub sem: u8,
    /// Threshold (`≥`).
    pub target: i32,
    /// Subtracted once it holds.
    pub consume: i32,
}

/// Where the walk is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Waiting the start of entry `entry` (TRIGGER for the first, `trigger_next` after).
    Start,
    /// Inside the records.
    Records,
    /// The reporter waiting the other TOP_SPs' completions.
    Completions,
    /// Finished.
    Done,
}

/// The current position, for diagnostics (hang reports).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// Entry ordinal (0-based, continuations not counted).
    pub entry: usize,
    /// CTRL SPAD slot of that entry.
    pub slot: usize,
    /// SLOT SPAD record position (slot · 64 + index) when in [`Stage::Records`].
    pub record: Option<u32>,
    /// Stage.
    pub stage: Stage,
    /// The wait it is blocked on, if any.
    pub waiting_on: Option<WaitOn>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Start,
    Record { rec: usize, waited: bool, done: u16 },
    Completions,
    Finish,
    Done,
}

/// One TOP_SP's sequencer.
#[derive(Debug, Clone)]
pub struct Sequencer {
    cfg: SeqConfig,
    /// The decoded tables: read-only once loaded, so a clone (a resident machine starts every
    /// run from one, `runtime::machine::TopspAgent`) shares them instead of copying every
    /// entry's records — no allocation per TOP_SP per run.
    prog: Arc<load::Loaded>,
    entry: usize,
    phase: Phase,
    waiting: Option<WaitOn>,
}

impl Sequencer {
    /// Decode and validate the CTRL SPAD, the SLOT SPAD and the neff values (module doc); a
    /// malformed table is an error naming the slot or record and its byte offset.
    pub fn load(ctrl_spad: &[u8], slot_spad: &[u8], neff: SeqConfig) -> Result<Sequencer> {
        let prog = Arc::new(load::load(ctrl_spad, slot_spad, &neff)?);
        Ok(Sequencer {
            cfg: neff,
            prog,
            entry: 0,
            phase: Phase::Start,
            waiting: None,
        })
    }

    /// The configuration it was loaded with.
    pub fn config(&self) -> &SeqConfig {
        &self.cfg
    }

    /// `(CTRL slot, algo_type)` of every cc_op entry in order: the key of the NCFW dispatch
    /// (docs/contract/device.md §9.1).
    pub fn entry_algo_types(&self) -> Vec<(usize, u8)> {
        self.prog
            .entries
            .iter()
            .map(|e| (e.slot, e.ctrl.algo_type))
            .collect()
    }

    /// Number of cc_op entries.
    pub fn entries(&self) -> usize {
        self.prog.entries.len()
    }

    /// The decoded cc_op slot and records of entry `i` (for traces and context dumps).
    pub fn entry(&self, i: usize) -> Option<(&SpadCtrlEntry, &[SlotRecord])> {
        let e = self.prog.entries.get(i)?;
        Some((&e.ctrl, &e.records))
    }

    /// Has it finished?
    pub fn is_done(&self) -> bool {
        self.phase == Phase::Done
    }

    /// Where it is.
    pub fn position(&self) -> Position {
        let e = self
            .prog
            .entries
            .get(self.entry.min(self.prog.entries.len().saturating_sub(1)));
        let (stage, record) = match self.phase {
            Phase::Start => (Stage::Start, None),
            Phase::Record { rec, .. } => (Stage::Records, e.map(|e| e.first_pos + rec as u32)),
            Phase::Completions | Phase::Finish => (Stage::Completions, None),
            Phase::Done => (Stage::Done, None),
        };
        Position {
            entry: self.entry,
            slot: e.map_or(0, |e| e.slot),
            record,
            stage,
            waiting_on: self.waiting,
        }
    }

    fn wait(&mut self, sems: &mut dyn SemAccess, w: WaitOn) -> Option<Action> {
        if sems.try_wait(w.topsp, w.sem, w.target, w.consume) {
            self.waiting = None;
            None
        } else {
            self.waiting = Some(w);
            Some(Action::Blocked {
                topsp: w.topsp,
                sem: w.sem,
                value: sems.value(w.topsp, w.sem),
                target: w.target,
            })
        }
    }

    /// Run until the next action. Errors only come from [`SemAccess::inc_addr`] (an address
    /// the executor cannot route), which are fatal for the collective.
    pub fn step(&mut self, sems: &mut dyn SemAccess) -> Result<Action> {
        let own = self.cfg.topsp;
        loop {
            match self.phase {
                Phase::Done => return Ok(Action::Done),
                Phase::Start => {
                    let idx = if self.entry == 0 {
                        self.prog.trigger_idx
                    } else {
                        self.prog.next.expect("validated at load: trigger_next").0
                    };
                    let w = WaitOn {
                        topsp: own,
                        sem: idx,
                        target: 1,
                        consume: 1,
                    };
                    if let Some(a) = self.wait(sems, w) {
                        return Ok(a);
                    }
                    self.phase = Phase::Record {
                        rec: 0,
                        waited: false,
                        done: 0,
                    };
                }
                Phase::Record { rec, waited, done } => {
                    let r = self.prog.entries[self.entry].records[rec];
                    if !waited {
                        if let Some(sw) = r.wait {
                            let w = WaitOn {
                                topsp: sw.topsp,
                                sem: sw.sem,
                                target: sw.target as i32,
                                consume: sw.consume as i32,
                            };
                            if let Some(a) = self.wait(sems, w) {
                                return Ok(a);
                            }
                        }
                    }
                    let releases = r.m2s != 0 || r.s2m != 0;
                    if releases && done < r.repeat {
                        self.phase = Phase::Record {
                            rec,
                            waited: true,
                            done: done + 1,
                        };
                        return Ok(Action::TailInc {
                            m2s: r.m2s,
                            s2m: r.s2m,
                        });
                    }
                    self.phase = if r.end {
                        Phase::Completions
                    } else {
                        Phase::Record {
                            rec: rec + 1,
                            waited: false,
                            done: 0,
                        }
                    };
                }
                Phase::Completions => {
                    if self.prog.entries[self.entry].ctrl.ring_wait_complete {
                        let (idx, n) = self.prog.chain.expect("validated at load: complete_prev");
                        let w = WaitOn {
                            topsp: own,
                            sem: idx,
                            target: n as i32,
                            consume: n as i32,
                        };
                        if let Some(a) = self.wait(sems, w) {
                            return Ok(a);
                        }
                    }
                    self.phase = Phase::Finish;
                }
                Phase::Finish => {
                    let c = self.prog.entries[self.entry].ctrl;
                    if c.ring_send_complete {
                        let a = self.prog.complete_inc.expect("validated at load: complete");
                        sems.inc_addr(a, 1)?;
                    }
                    if c.trigger_next {
                        let a = self.prog.next.expect("validated at load: trigger_next").1;
                        sems.inc_addr(a, 1)?;
                    }
                    if self.entry + 1 < self.prog.entries.len() {
                        self.entry += 1;
                        self.phase = Phase::Start;
                        continue;
                    }
                    if self.cfg.leader {
                        sems.inc(own, COMPLETION_SEM, 1);
                        for &a in &self.cfg.completion_addrs {
                            sems.inc_addr(a, 1)?;
                        }
                    }
                    self.phase = Phase::Done;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;

//! The order in which the device runs one rank's tapes, as the scheduler (`schedule`) models it:
//! one **lane** per TOP_SP (docs/contract/device.md §8.3, docs/contract/lowering.md §6.2–§6.3, and
//! exactly what `lower::emit` lays out).
//!
//! * A TOP_SP walks only its own cc_op table: the entries it drives at least one tape of, in
//!   entry order, and inside an entry its tapes in channel order, one after the other (one
//!   queue pair per TOP_SP). Entries are chained on that TOP_SP alone (`trigger_next` on its
//!   own `NEXT_SEM`): nothing makes a TOP_SP wait for another TOP_SP's earlier entries.
//! * The one cross-TOP_SP order the device adds: at the end of an entry with several TOP_SPs,
//!   the reporter (the TOP_SP driving the entry's lowest channel, `lower::spad::reporter_of`)
//!   waits for every other TOP_SP of the entry to send its completion (`ring_wait_complete` /
//!   `complete_prev`) before it moves on. The other TOP_SPs do not wait for the reporter.
//!
//! So entries are **not** a rank-wide barrier: a TOP_SP that has no tape in entry k (a mesh
//! leg on channel 0 only) starts entry k + 1 as soon as it is triggered, and a non-reporter
//! starts entry k + 1 while the reporter may still be in entry k. A program whose entry reads
//! what another TOP_SP's earlier entry wrote must say so with semaphores (the hierarchical
//! composer's leg joins, `compose::hier`). This model is what makes the verifier reject a
//! program that relies on an order the device does not give (HIER-2CH: the symbolic run used
//! to join all tapes at every entry boundary, so such a program verified and then lost data on
//! the device).
//!
//! Choice: the reporter's wait is modelled as "every other lane of the entry has finished its
//! tapes of this entry or of a later one". The device counts completions on one semaphore
//! (`CHAIN_SEM`) with a fixed target per TOP_SP, which is the same thing as long as no
//! non-reporter can finish two entries before the reporter's wait — true with the two
//! TOP_SPs the pipeline uses (`channel % 2`), and programs must not rely on this wait for data
//! anyway (only the reporter is ordered by it).

use crate::lower::program::{Entry, RankProgram};
use crate::lower::spad::{participants, reporter_of};

/// One TOP_SP of a rank, walking its tapes.
#[derive(Debug, Default, Clone)]
pub(crate) struct Lane {
    /// The TOP_SP.
    pub topsp: u8,
    /// `(entry, tape index)` in the order the TOP_SP runs them.
    pub items: Vec<(usize, usize)>,
    /// Index in `items` of the tape being run (`items.len()`: every tape ran).
    pub pos: usize,
    /// Next step of that tape.
    pub pc: usize,
    /// Rank-reached bits of this lane (see `schedule`'s causality rule).
    pub know: Vec<u64>,
    /// Set while the lane, reporter of this entry, waits for the entry's other TOP_SPs.
    pub report: Option<usize>,
}

impl Lane {
    /// The entry of the tape being run; `None` when every tape ran.
    pub fn entry(&self) -> Option<usize> {
        self.items.get(self.pos).map(|&(e, _)| e)
    }

    /// True once the lane has run all its tapes of entries `..= e` (it may still be waiting
    /// as the reporter of `e`: completion is sent before that, see the module doc).
    pub fn passed(&self, e: usize) -> bool {
        self.entry().is_none_or(|cur| cur > e)
    }

    /// True when the lane has nothing left to do.
    pub fn done(&self) -> bool {
        self.entry().is_none() && self.report.is_none()
    }
}

/// True if `topsp` is the reporter of `e` and `e` has other TOP_SPs whose completions it
/// collects (docs/contract/lowering.md §6.3 as `lower::spad` applies it).
pub(crate) fn reporter_waits(e: &Entry, topsp: u8) -> bool {
    reporter_of(e) == Some(topsp) && participants(e).len() > 1
}

/// The lanes of one rank.
#[derive(Debug, Default, Clone)]
pub(crate) struct RankLanes {
    /// Per TOP_SP used by the rank, ascending.
    pub lanes: Vec<Lane>,
    /// `slot[entry][tape] = (lane, index in that lane's items)`.
    pub slot: Vec<Vec<(usize, usize)>>,
    /// The rank-reached bits the rank starts with (its own start; a rank without tapes keeps
    /// just these).
    pub start: Vec<u64>,
}

impl RankLanes {
    /// Lay out `rp` as the emitter does; every lane starts with `know`.
    pub fn new(rp: &RankProgram, know: &[u64]) -> RankLanes {
        let mut topsps: Vec<u8> = rp
            .entries
            .iter()
            .flat_map(|e| e.tapes.iter().map(|t| t.topsp))
            .collect();
        topsps.sort_unstable();
        topsps.dedup();
        let mut lanes: Vec<Lane> = topsps
            .iter()
            .map(|&topsp| Lane {
                topsp,
                know: know.to_vec(),
                ..Lane::default()
            })
            .collect();
        let mut slot = Vec::with_capacity(rp.entries.len());
        for (ei, e) in rp.entries.iter().enumerate() {
            let mut here = vec![(0, 0); e.tapes.len()];
            let mut order: Vec<usize> = (0..e.tapes.len()).collect();
            order.sort_by_key(|&t| e.tapes[t].channel);
            for t in order {
                let l = topsps
                    .binary_search(&e.tapes[t].topsp)
                    .expect("every tape's TOP_SP has a lane");
                here[t] = (l, lanes[l].items.len());
                lanes[l].items.push((ei, t));
            }
            slot.push(here);
        }
        RankLanes {
            lanes,
            slot,
            start: know.to_vec(),
        }
    }

    /// True when every lane is done.
    pub fn done(&self) -> bool {
        self.lanes.iter().all(Lane::done)
    }

    /// True if step `s` of tape `t` of entry `e` has not run yet.
    pub fn pending(&self, e: usize, t: usize, s: usize) -> bool {
        let (l, i) = self.slot[e][t];
        let lane = &self.lanes[l];
        lane.pos < i || (lane.pos == i && s >= lane.pc)
    }

    /// The lanes (other than `l`) taking part in entry `e` that have not passed it yet.
    pub fn unfinished_peers(&self, e: &Entry, ei: usize, l: usize) -> Vec<usize> {
        let parts = participants(e);
        (0..self.lanes.len())
            .filter(|&o| o != l && parts.contains(&self.lanes[o].topsp))
            .filter(|&o| !self.lanes[o].passed(ei))
            .collect()
    }

    /// The rank-reached bits of the whole rank (every lane's, joined).
    pub fn know(&self) -> Vec<u64> {
        let mut k = self.start.clone();
        for lane in &self.lanes {
            if k.len() < lane.know.len() {
                k.resize(lane.know.len(), 0);
            }
            for (d, s) in k.iter_mut().zip(&lane.know) {
                *d |= s;
            }
        }
        k
    }
}

#[cfg(test)]
mod tests;

//! The join between two consecutive legs of one rank (hierarchical ops,
//! docs/contract/lowering.md §4.7): explicit semaphores that make every TOP_SP start leg k + 1 only
//! after every other TOP_SP of the rank has finished leg k.
//!
//! Why it is needed: the device chains the cc_op entries of a TOP_SP on that TOP_SP alone
//! (docs/contract/device.md §8.3: `trigger_next` increments its own semaphore;
//! docs/contract/lowering.md §6.3: only the reporter waits for the others' completions). Leg k + 1
//! generally reads, on one TOP_SP, what leg k wrote on another: the legs use different algorithms
//! and channel splits (an intra mesh leg runs on channel 0 only, the inter ring leg after it splits
//! each block over two channels on TOP_SPs 0 and 1). Without a join, TOP_SP 1 starts the ring leg
//! at trigger time and sends scratch the mesh leg has not written yet (HIER-2CH). The verifier
//! models the device's order (`verify::lanes`), so a missing join is an uninitialised read there.
//!
//! The join, for leg entries `prev` → `next` of one rank and one free semaphore id `J`:
//! * for every TOP_SP `t` of `next`, let `A_t` be the tapes of `prev` on other TOP_SPs; if it
//!   is empty (same TOP_SP only), the TOP_SP's own walk already orders the legs;
//! * every tape of `A_t` ends with a step that increments `(rank, t, J)` by 1 (one step per
//!   tape, one signal per target TOP_SP) — the tape's last data has been received (its waits)
//!   or has landed (steps run in order on a queue, signals after the data, §6.4);
//! * the first tape of `next` on `t` (lowest channel: a TOP_SP runs its tapes in channel
//!   order) starts with a step that waits `(rank, t, J) ≥ |A_t|` and consumes `|A_t|`.
//!   Later tapes on `t` follow it on the same TOP_SP.
//!
//! Cost per boundary: one signal per (tape of `prev`, other TOP_SP of `next`) — with the
//! default two channels on two TOP_SPs, two semaphore-increment descriptors per rank — and one
//! wait per TOP_SP. One semaphore id per boundary serves every TOP_SP (ids are per TOP_SP).
//!
//! Choice: the join steps are `MeshEvent` steps without an event type (a pure semaphore event,
//! §4.6: wait or direct semaphore trigger, no data) on the rank's own chunk; their signals are
//! `Local` (same core). Change [`join_step`] to label them otherwise.

use crate::lower::program::{Entry, Half, Primitive, Sem, Signal, SignalKind, Step, Wait};

/// A data-less step of rank `rank`: an optional wait and some signals.
pub fn join_step(rank: u32, wait: Option<Wait>, signals: Vec<Signal>) -> Step {
    Step {
        primitive: Primitive::MeshEvent,
        half: Half::H0,
        chunk: rank,
        reduction: None,
        wait,
        transfers: vec![],
        signals,
        event_type: None,
    }
}

/// Order `next` after `prev` on every TOP_SP of rank `rank` with semaphore id `id` (module
/// doc). Returns the number of waits added (0: both legs use one TOP_SP, nothing to join).
pub fn join_entries(prev: &mut Entry, next: &mut Entry, rank: u32, id: u8) -> usize {
    let mut targets: Vec<u8> = next.tapes.iter().map(|t| t.topsp).collect();
    targets.sort_unstable();
    targets.dedup();
    let mut waits = 0;
    let mut signals: Vec<Vec<Signal>> = vec![Vec::new(); prev.tapes.len()];
    for &t in &targets {
        let sem = Sem { rank, topsp: t, id };
        let from: Vec<usize> = (0..prev.tapes.len())
            .filter(|&i| prev.tapes[i].topsp != t)
            .collect();
        if from.is_empty() {
            continue;
        }
        for &i in &from {
            signals[i].push(Signal {
                sem,
                amount: 1,
                kind: SignalKind::Local,
            });
        }
        let first = next
            .tapes
            .iter_mut()
            .filter(|tp| tp.topsp == t)
            .min_by_key(|tp| tp.channel)
            .expect("t is a TOP_SP of next");
        let n = from.len() as u32;
        let wait = Wait {
            sem,
            target: n,
            consume: n,
        };
        first.steps.insert(0, join_step(rank, Some(wait), vec![]));
        waits += 1;
    }
    for (tape, sigs) in prev.tapes.iter_mut().zip(signals) {
        if !sigs.is_empty() {
            tape.steps.push(join_step(rank, None, sigs));
        }
    }
    waits
}

#[cfg(test)]
mod tests;

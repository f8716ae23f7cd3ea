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
mod tests {
    use super::*;
    use crate::lower::program::Algorithm;

    fn entry(tapes: &[(u8, u8)]) -> Entry {
        Entry::for_test(Algorithm::Ring, None, vec![3], tapes, || {
            vec![join_step(3, None, vec![])]
        })
    }

    fn waits_of(e: &Entry, channel: u8) -> Option<Wait> {
        let t = e.tapes.iter().find(|t| t.channel == channel).unwrap();
        t.steps[0].wait
    }

    fn signalled(e: &Entry, channel: u8) -> Vec<u8> {
        let t = e.tapes.iter().find(|t| t.channel == channel).unwrap();
        let last = t.steps.last().unwrap();
        last.signals.iter().map(|s| s.sem.topsp).collect()
    }

    /// HIER-2CH's shape: a one-channel leg (TOP_SP 0) before a two-channel leg (TOP_SPs 0, 1):
    /// only TOP_SP 1 needs the join, and it waits for channel 0's tape.
    #[test]
    fn one_channel_then_two() {
        let (mut a, mut b) = (entry(&[(0, 0)]), entry(&[(0, 0), (1, 1)]));
        assert_eq!(join_entries(&mut a, &mut b, 3, 40), 1);
        assert_eq!(signalled(&a, 0), vec![1]);
        assert_eq!(waits_of(&b, 0), None);
        let w = waits_of(&b, 1).unwrap();
        assert_eq!(
            (w.sem, w.target, w.consume),
            (
                Sem {
                    rank: 3,
                    topsp: 1,
                    id: 40
                },
                1,
                1
            )
        );
    }

    /// Three channels on two TOP_SPs both sides: each TOP_SP's lowest channel waits for the
    /// other TOP_SP's tapes; later tapes of a TOP_SP get no wait.
    #[test]
    fn three_channels_on_two_topsps() {
        let (mut a, mut b) = (
            entry(&[(0, 0), (1, 1), (2, 0)]),
            entry(&[(2, 0), (0, 0), (1, 1)]),
        );
        assert_eq!(join_entries(&mut a, &mut b, 3, 9), 2);
        assert_eq!(waits_of(&b, 0).unwrap().target, 1);
        assert_eq!(waits_of(&b, 1).unwrap().target, 2);
        assert_eq!(waits_of(&b, 2), None);
        assert_eq!(signalled(&a, 0), vec![1]);
        assert_eq!(signalled(&a, 1), vec![0]);
        assert_eq!(signalled(&a, 2), vec![1]);
        assert_eq!(b.tapes[0].steps.len(), 1, "channel 2 keeps its steps");
    }

    /// Both legs on one TOP_SP: the TOP_SP's own walk orders them, nothing is added.
    #[test]
    fn one_topsp_needs_nothing() {
        let (mut a, mut b) = (entry(&[(0, 0)]), entry(&[(0, 0)]));
        let before = (a.clone(), b.clone());
        assert_eq!(join_entries(&mut a, &mut b, 3, 9), 0);
        assert_eq!((a, b), before);
    }

    /// HIER-2CH at the lowering level: hierarchical programs whose legs use different
    /// algorithms / channel splits on two channels (intra mesh → inter ring; ring → single-
    /// cycle ring → ring; inter RDH → intra ring) verify with their joins and are rejected by
    /// the verifier without them (what `opennrt verify` would have said before the fix).
    #[test]
    fn hier_programs_need_their_joins() {
        use crate::lower::cases::{Case, Lowered};
        use crate::lower::request::CollectiveOp;
        use crate::lower::verify::verify;
        let cases = [
            (CollectiveOp::ReduceScatter, 4, "custom:2x1x2", 2049),
            (CollectiveOp::AllReduce, 8, "custom:2x1x4", 65536),
            (CollectiveOp::AllGather, 32, "custom:8x1x4", 4099),
        ];
        for (op, n, topo, count) in cases {
            let c = Case {
                topology: Some(topo.into()),
                dtype: crate::isa::enums::Dtype::Fp32,
                ..Case::new(op, Some(Algorithm::Hier), n, count)
            };
            let Ok(Lowered::Program(b)) = c.lower() else {
                panic!("{} does not lower", c.name(false));
            };
            let (_, _, mut p) = *b;
            let algs: Vec<Algorithm> = p.ranks[0].entries.iter().map(|e| e.algorithm).collect();
            assert!(
                algs.windows(2).any(|w| w[0] != w[1]),
                "{}: {algs:?}",
                c.name(false)
            );
            verify(&p).unwrap_or_else(|e| panic!("{}: {e}", c.name(false)));
            let mut joins = 0;
            for t in p
                .ranks
                .iter_mut()
                .flat_map(|r| &mut r.entries)
                .flat_map(|e| &mut e.tapes)
            {
                let before = t.steps.len();
                t.steps
                    .retain(|s| *s != join_step(s.chunk, s.wait, s.signals.clone()));
                joins += before - t.steps.len();
            }
            assert!(joins > 0, "{}: no join steps", c.name(false));
            assert!(
                verify(&p).is_err(),
                "{}: verifies without its joins",
                c.name(false)
            );
        }
    }
}

//! KANGARING: the ring tape of docs/contract/lowering.md §4.2–§4.3 with the kangaring reduce step
//! (§4.4, §8.2: the composer passes `KANGARING_NR1W` where the ring passes `RING_2R1W`).
//!
//! **Step count** and **bytes on the wire**: those of [`ring`](super::ring) — all-reduce 2N
//! steps per rank per (channel, loop, half) piece and 2·(N−1)/N · count · E bytes per rank;
//! reduce-scatter N steps, (N−1) · count · E; all-gather N steps, (N−1) · count · E.
//!
//! **Grouping (OPEN in the spec, simplest result-equivalent choice).** Every reduce step is one
//! `direct_reduce_send_kangaring(h, op)` with shape `KANGARING_NR1W` whose CCE op reads the
//! local block and one incoming partial (num_sources = 2, within the ≤ 4 = local + 3 peers the
//! hardware allows) and writes once: to NEXT's scratch on the middle steps, to this rank's
//! output on the last. So the additions are grouped exactly as the ring's (§4.13), and the
//! result equals the ring's bit for bit. The vendor's multi-hop peer paths (`logical_path`,
//! `peer_rmtv`, `seng ^ 2`) and up-to-3-peer grouping change only which partials meet in one
//! CCE op; to adopt one, give a reduce step more sources in `ring::Build::step`. The all-gather
//! carries no reduce step, so it is the ring all-gather under the KANGARING tag.

use crate::error::Result;
use crate::lower::compose::ring::{compose_styled, Style};
use crate::lower::compose::{ComposedLeg, Leg};
use crate::lower::program::{Algorithm, RingShape};

/// The kangaring style.
pub const STYLE: Style = Style {
    algorithm: Algorithm::Kangaring,
    shape: RingShape::KangaringNR1W,
    kangaring: true,
    fused_final: false,
};

/// Compose a kangaring leg (all-reduce, reduce-scatter or all-gather).
pub fn compose(leg: &Leg) -> Result<ComposedLeg> {
    compose_styled(leg, STYLE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lower::compose::testeval::{census, check_all, leg, request, shuffled, Case};
    use crate::lower::program::{Primitive, Transfer};
    use crate::lower::request::{CollectiveOp, ReduceOp};

    fn case(op: CollectiveOp, n: u32, count: u64) -> Case {
        let mut c = Case::new(op, n, count);
        if op != CollectiveOp::AllGather {
            c.reduce = Some(ReduceOp::Max);
        }
        c
    }

    /// docs/contract/lowering.md §8.2: kangaring reduce steps carry KANGARING_NR1W; the op is
    /// separate.
    #[test]
    fn uses_kangaring_nr1w() {
        for op in [CollectiveOp::AllReduce, CollectiveOp::ReduceScatter] {
            let c = case(op, 4, 1000);
            let req = request(&c);
            let k = compose(&leg(&c, &req)).unwrap();
            let mut reduces = 0;
            for e in k.entries.values() {
                assert_eq!(e.algorithm, Algorithm::Kangaring);
                for s in e.tapes.iter().flat_map(|t| &t.steps) {
                    if s.primitive.is_reduce() {
                        reduces += 1;
                        assert_eq!(s.primitive, Primitive::DirectReduceSendKangaring);
                        assert_eq!(s.reduction, Some((ReduceOp::Max, RingShape::KangaringNR1W)));
                        for t in &s.transfers {
                            if let Transfer::Reduce { srcs, shape, .. } = t {
                                assert!(srcs.len() <= 4);
                                assert_eq!(*shape, RingShape::KangaringNR1W);
                            }
                        }
                    } else {
                        assert!(s.reduction.is_none());
                    }
                }
            }
            assert!(reduces > 0);
        }
        let c = case(CollectiveOp::AllGather, 4, 100);
        let req = request(&c);
        let ag = census(&compose(&leg(&c, &req)).unwrap());
        assert!(!ag.keys().any(|k| k.contains("Reduce")));
    }

    #[test]
    fn results_equal_ring() {
        for op in [
            CollectiveOp::AllReduce,
            CollectiveOp::ReduceScatter,
            CollectiveOp::AllGather,
        ] {
            for n in [1, 2, 3, 4, 5, 8] {
                for count in [0, 1, 7, 4099] {
                    let mut c = case(op, n, count);
                    check_all(&c, compose);
                    c.in_place = true;
                    c.order = shuffled(n);
                    check_all(&c, compose);
                }
            }
        }
    }

    #[test]
    fn large_two_ranks() {
        let mut c = case(CollectiveOp::AllReduce, 2, 1 << 20);
        c.chunk = 4096;
        check_all(&c, compose);
    }
}

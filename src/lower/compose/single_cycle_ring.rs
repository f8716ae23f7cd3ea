//! SINGLE_CYCLE_RING: all-reduce only (docs/contract/lowering.md §4.5; §8.3: the `can_post` gate
//! requires `op_type == ENC_ALLREDUCE`). Any other op is an error.
//!
//! **OPEN in the spec**: the vendor's fused one-pass tape was not recovered. This composer
//! writes the simplest result-equivalent tape: the ring all-reduce of §4.2 with the last
//! reduce-scatter step fused into one `recv_reduce_copy_send` (reduce into this rank's output
//! and forward the finished block in one step — the fusion §4.2 notes for the host-driven path),
//! so reduce-scatter and all-gather run as one continuous pass per piece.
//!
//! **Step count**: 2N − 1 per rank per (channel, loop, half) piece (N − 1 `send` /
//! `recv_reduce_send`, one `recv_reduce_copy_send`, N − 2 `direct_recv_send`, one
//! `direct_recv`); N = 1: one `direct_copy` (none in place). **Bytes on the wire** per rank:
//! 2·(N−1)/N · count · E, as the ring.

use crate::error::{Error, Result};
use crate::lower::compose::ring::{compose_styled, Style};
use crate::lower::compose::{ComposedLeg, Leg};
use crate::lower::program::{Algorithm, RingShape};
use crate::lower::request::CollectiveOp;

/// The single-cycle style: ring shape, fused final step.
pub const STYLE: Style = Style {
    algorithm: Algorithm::SingleCycleRing,
    shape: RingShape::Ring2R1W,
    kangaring: false,
    fused_final: true,
};

/// Compose a single-cycle-ring all-reduce leg.
pub fn compose(leg: &Leg) -> Result<ComposedLeg> {
    if leg.op != CollectiveOp::AllReduce {
        return Err(Error::invalid(format!(
            "SINGLE_CYCLE_RING composes all-reduce only (docs/contract/lowering.md §4.5), not {:?}",
            leg.op
        )));
    }
    compose_styled(leg, STYLE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lower::compose::testeval::{census, check_all, leg, request, shuffled, Case};
    use crate::lower::request::ReduceOp;

    fn case(op: CollectiveOp, n: u32, count: u64) -> Case {
        let mut c = Case::new(op, n, count);
        c.reduce = Some(ReduceOp::Add);
        c
    }

    #[test]
    fn refuses_other_ops() {
        for op in [
            CollectiveOp::AllGather,
            CollectiveOp::ReduceScatter,
            CollectiveOp::AllToAll,
            CollectiveOp::Permute,
        ] {
            let c = case(op, 4, 8);
            let req = request(&c);
            assert!(compose(&leg(&c, &req)).is_err(), "{op:?}");
        }
    }

    #[test]
    fn fused_tape() {
        let mut c = case(CollectiveOp::AllReduce, 4, 4 * 64);
        c.channels = 1;
        let req = request(&c);
        let k = compose(&leg(&c, &req)).unwrap();
        let m = census(&k);
        assert_eq!(m["RecvReduceCopySend"], 4 * 2);
        assert!(!m.contains_key("RecvReduceCopy"));
        for e in k.entries.values() {
            assert_eq!(e.algorithm, Algorithm::SingleCycleRing);
            assert_eq!(e.tapes[0].steps.len(), 2 * (2 * 4 - 1));
        }
    }

    #[test]
    fn results() {
        for n in [1, 2, 3, 4, 5, 8] {
            for count in [0, 1, 7, 4099] {
                let mut c = case(CollectiveOp::AllReduce, n, count);
                check_all(&c, compose);
                c.in_place = true;
                c.order = shuffled(n);
                c.reduce = Some(ReduceOp::Min);
                check_all(&c, compose);
            }
        }
        let mut c = case(CollectiveOp::AllReduce, 2, 1 << 20);
        c.chunk = 4096;
        check_all(&c, compose);
    }
}

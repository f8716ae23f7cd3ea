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
mod tests;

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
mod tests;

//! `--show-algorithm`: the algorithm the lowering chooses for a size, computed in the parent
//! by the lowering's own selection (`opennrt::lower::select`, as `opennrt lower` reports it) for
//! the request equivalent to the NEFF's collective: the same op, type, per-rank block, replica
//! subgroup and permute pairs, on the topology and selection knobs of the environment the
//! workers inherit (`OPENNRT_TOPOLOGY`, `OPENNRT_CC_ALGO`, …; docs/contract/lowering.md §3).
//!
//! Names are the vendor's five: `mesh`, `rdh` (intra and inter RDH), `kangaring`, `ring`
//! (ring and single-cycle ring), `hier`.

use opennrt::isa::enums::Dtype;
use opennrt::lower::pipeline::LowerConfig;
use opennrt::lower::program::Algorithm;
use opennrt::lower::request::{CollectiveRequest, ReduceOp};
use opennrt::lower::select::select;

use crate::ops::{Op, Sizes};

/// The vendor's name of an algorithm.
pub fn vendor_name(a: Algorithm) -> &'static str {
    match a {
        Algorithm::Mesh => "mesh",
        Algorithm::IntraRdh | Algorithm::InterRdh => "rdh",
        Algorithm::Kangaring => "kangaring",
        Algorithm::Ring | Algorithm::SingleCycleRing => "ring",
        Algorithm::Hier => "hier",
    }
}

/// The request the NEFF's trigger amounts to, for the first rank of `group` (global ranks);
/// `pairs` in global ranks (permute).
pub fn request(
    op: Op,
    dtype: Dtype,
    count: u64,
    group: &[u32],
    pairs: &[(u32, u32)],
) -> CollectiveRequest {
    let mut r = CollectiveRequest::new(
        op.collective(),
        dtype,
        op.is_reducing().then_some(ReduceOp::Add),
        count,
        group.to_vec(),
        0,
    );
    if op == Op::Permute {
        let index = |g: u32| group.iter().position(|&m| m == g).map(|i| i as u32);
        r.pairs = pairs
            .iter()
            .filter_map(|&(s, t)| Some((index(s)?, index(t)?)))
            .collect();
    }
    r
}

/// The algorithm chosen for `op` on `group` in a world of `world` ranks, or the lowering's
/// reason for refusing.
pub fn chosen(
    op: Op,
    dtype: Dtype,
    count: u64,
    world: u32,
    group: &[u32],
    pairs: &[(u32, u32)],
) -> Result<&'static str, String> {
    let cfg = LowerConfig::from_lookup(opennrt::runtime::config::env_lookup, world)
        .map_err(|e| e.message().to_string())?;
    let req = request(op, dtype, count, group, pairs);
    let sel = select(&req, &cfg.topology, &cfg.select).map_err(|e| e.message().to_string())?;
    Ok(vendor_name(sel.algorithm))
}

#[cfg(test)]
mod tests;

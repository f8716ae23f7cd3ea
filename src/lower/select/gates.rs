//! The seven "can_post" gates of docs/contract/lowering.md §3.2, the mesh flavour of §3.5, the mesh
//! caps of §5.4 and the legality rules (re-exported from [`crate::lower::select`]).
//!
//! Every gate is a pure predicate over a [`GateCtx`] (the numbers of §3.1 for one group or one
//! HIER leg) and returns a [`Gate`]: pass or not, and why, naming the condition and the value
//! that decided it. Gates also check the ops their composer handles (the ring family — RING,
//! KANGARING, the RDHs, HIER — covers all-reduce, all-gather and reduce-scatter; single-cycle
//! ring covers all-reduce; MESH adds all-to-all(-v); RING also takes the point-to-point ops).
//!
//! Choices where the spec is open (§7 item 7):
//! * **Mesh cap** (§5.4, inferred): the t0 shape (one node, 2 ranks) may use mesh up to the per-op
//!   limit of 256 MiB; every other shape up to `min(0x8000, 8 MiB / groups)` bytes with one
//!   group per node, read as bytes: mesh is the latency algorithm for small messages.
//!   "Op size" is the larger of a rank's input and output buffers ([`op_bytes`]).
//! * **Mesh availability** adds the CCE fan-in: a mesh reduce sums all G sources in one
//!   operation (§4.6), at most 32, so reducing ops need rank_n ≤ 32 on a mesh.
//! * **Mesh flavour** (§3.5): on trn2/trn3, MESH_TRN2 for one node, a 4-node pod, or one rank
//!   per node across nodes; FULL_MESH for other multi-node shapes. Switch fabric with more than
//!   one rank per node: MESH_SWITCH. Trn1: FULL_MESH. (inf2, the only GROUPED_MESH user, is not
//!   simulated.)

#[cfg(test)]
mod tests;

use crate::error::{Error, Result};
use crate::lower::program::Algorithm;
use crate::lower::request::{CollectiveOp, CollectiveRequest};
use crate::lower::topology::{Fabric, Generation, ULTRASERVER_NODES};

/// `enc_alg_mesh_type` FULL_MESH (docs/contract/lowering.md §2.3).
pub const MESH_FULL: u8 = 0;
/// `enc_alg_mesh_type` GROUPED_MESH.
pub const MESH_GROUPED: u8 = 1;
/// `enc_alg_mesh_type` MESH_TRN2.
pub const MESH_TRN2: u8 = 2;
/// `enc_alg_mesh_type` MESH_SWITCH.
pub const MESH_SWITCH: u8 = 3;
/// Mesh per-op limit, t0 (docs/contract/lowering.md §5.4).
pub const MESH_OP_LIMIT_BYTES: u64 = 0x1000_0000;
/// Mesh limit t1 (docs/contract/lowering.md §5.4), before the per-group limit.
pub const MESH_T1_LIMIT_BYTES: u64 = 0x8000;
/// Mesh channel buffer maximum, shared by the groups (docs/contract/lowering.md §5.4).
pub const MESH_CHANNEL_BUFFER_MAX: u64 = 8 << 20;
/// Most sources one CCE reduce takes (docs/contract/lowering.md §4.6).
pub const MESH_MAX_REDUCE_SOURCES: u32 = 32;

/// What the gates read (docs/contract/lowering.md §3.1), for one group or one HIER leg.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateCtx {
    /// The operation (of the leg).
    pub op: CollectiveOp,
    /// Ranks.
    pub rank_n: u32,
    /// Nodes.
    pub node_n: u32,
    /// Ranks per node (the most on any node).
    pub local_rank_n: u32,
    /// Silicon generation.
    pub generation: Generation,
    /// LNC size (the gates' "vcore" / "vnc").
    pub lnc: u32,
    /// Inter-node fabric.
    pub fabric: Fabric,
    /// More than one collective stream is in use.
    pub multi_stream: bool,
    /// RDH mode switch (`OPENNRT_CC_RDH`).
    pub rdh_mode: bool,
    /// Mesh enabled (`OPENNRT_CC_MESH`).
    pub mesh_enabled: bool,
    /// Explicit source-target pairs exist.
    pub has_pairs: bool,
    /// Op size in bytes, for the mesh cap.
    pub op_bytes: u64,
}

impl GateCtx {
    /// One node.
    pub fn is_intra(&self) -> bool {
        self.node_n == 1
    }
    /// `node_n · local_rank_n == rank_n`.
    pub fn is_uniform(&self) -> bool {
        self.node_n * self.local_rank_n == self.rank_n
    }
}

/// A gate's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gate {
    /// The gate passes.
    pub pass: bool,
    /// Why: on a pass, the conditions met; on a fail, the first unmet one and the value.
    pub why: String,
}

impl std::fmt::Display for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.pass {
            write!(f, "pass ({})", self.why)
        } else {
            write!(f, "fail: {}", self.why)
        }
    }
}

/// One condition: (met, the requirement, the actual value).
type Cond = (bool, &'static str, String);

fn all(conds: Vec<Cond>) -> Gate {
    match conds.iter().find(|c| !c.0) {
        Some((_, need, actual)) => Gate {
            pass: false,
            why: format!("needs {need}, but {actual}"),
        },
        None => Gate {
            pass: true,
            why: conds.iter().map(|c| c.1).collect::<Vec<_>>().join("; "),
        },
    }
}

fn is_ring_family(op: CollectiveOp) -> bool {
    matches!(
        op,
        CollectiveOp::AllReduce | CollectiveOp::AllGather | CollectiveOp::ReduceScatter
    )
}

fn is_all_to_all(op: CollectiveOp) -> bool {
    matches!(op, CollectiveOp::AllToAll | CollectiveOp::AllToAllV)
}

fn is_reducing(op: CollectiveOp) -> bool {
    matches!(op, CollectiveOp::AllReduce | CollectiveOp::ReduceScatter)
}

fn ring_family(ctx: &GateCtx) -> Cond {
    (
        is_ring_family(ctx.op),
        "all-reduce, all-gather or reduce-scatter",
        format!("the op is {}", ctx.op.label()),
    )
}

fn v(name: &str, x: impl std::fmt::Display) -> String {
    format!("{name} = {x}")
}

/// The op size the mesh cap is checked against: the larger of a rank's input and output
/// buffers, in bytes.
pub fn op_bytes(req: &CollectiveRequest) -> u64 {
    let elem = req.dtype.size_bytes().unwrap_or(1) as u64;
    req.input_elems().max(req.output_elems()) * elem
}

/// Gate 1, hierarchical (docs/contract/lowering.md §3.2): inter; local_rank_n > 1;
/// node_n·local_rank_n == rank_n; no source-target pairs.
pub fn gate_hierarchical(ctx: &GateCtx) -> Gate {
    all(vec![
        ring_family(ctx),
        (
            ctx.node_n > 1,
            "node_n > 1 (inter)",
            v("node_n", ctx.node_n),
        ),
        (
            ctx.local_rank_n > 1,
            "local_rank_n > 1",
            v("local_rank_n", ctx.local_rank_n),
        ),
        (
            ctx.is_uniform(),
            "node_n * local_rank_n == rank_n",
            format!("{} * {} != {}", ctx.node_n, ctx.local_rank_n, ctx.rank_n),
        ),
        (
            !ctx.has_pairs,
            "no source-target pairs",
            "the request has pairs".into(),
        ),
    ])
}

/// Gate 2, kangaring (docs/contract/lowering.md §3.2): intra only; not multi-stream; (vcore 2 and
/// rank_n > 4) or (vcore 1 and rank_n > 8).
pub fn gate_kangaring(ctx: &GateCtx) -> Gate {
    let size_ok = (ctx.lnc == 2 && ctx.rank_n > 4) || (ctx.lnc == 1 && ctx.rank_n > 8);
    all(vec![
        ring_family(ctx),
        (
            ctx.is_intra(),
            "node_n == 1 (intra only)",
            v("node_n", ctx.node_n),
        ),
        (!ctx.multi_stream, "a single stream", "multi-stream".into()),
        (
            size_ok,
            "(lnc == 2 and rank_n > 4) or (lnc == 1 and rank_n > 8)",
            format!("lnc = {}, rank_n = {}", ctx.lnc, ctx.rank_n),
        ),
    ])
}

/// Gate 3, single-cycle ring (docs/contract/lowering.md §3.2): all-reduce only; inter; one rank per
/// node.
pub fn gate_single_cycle_ring(ctx: &GateCtx) -> Gate {
    all(vec![
        (
            ctx.op == CollectiveOp::AllReduce,
            "all-reduce (op_type == ALLREDUCE)",
            format!("the op is {}", ctx.op.label()),
        ),
        (
            ctx.node_n > 1,
            "node_n > 1 (inter)",
            v("node_n", ctx.node_n),
        ),
        (
            ctx.rank_n == ctx.node_n,
            "rank_n == node_n (one rank per node)",
            format!("rank_n = {}, node_n = {}", ctx.rank_n, ctx.node_n),
        ),
    ])
}

/// Gate 4, intra RDH (docs/contract/lowering.md §3.2): intra; not multi-stream; RDH mode; mesh
/// available; rank_n ∈ {4, 8, 16, 64}; node_n == 1; vnc ∈ {1, 2}.
pub fn gate_intra_rdh(ctx: &GateCtx) -> Gate {
    let mesh = mesh_available(ctx);
    all(vec![
        ring_family(ctx),
        (
            ctx.is_intra(),
            "node_n == 1 (intra)",
            v("node_n", ctx.node_n),
        ),
        (!ctx.multi_stream, "a single stream", "multi-stream".into()),
        (
            ctx.rdh_mode,
            "RDH mode (OPENNRT_CC_RDH=1)",
            "RDH mode is off".into(),
        ),
        (
            mesh.pass,
            "mesh available",
            format!("mesh is not ({})", mesh.why),
        ),
        (
            matches!(ctx.rank_n, 4 | 8 | 16 | 64),
            "rank_n in {4, 8, 16, 64}",
            v("rank_n", ctx.rank_n),
        ),
        (matches!(ctx.lnc, 1 | 2), "vnc in {1, 2}", v("lnc", ctx.lnc)),
    ])
}

/// Gate 5, inter RDH (docs/contract/lowering.md §3.2): inter; local_rank_n == 1; rank_n == node_n;
/// rank_n a power of two ≥ 8; not on a pod fabric.
pub fn gate_inter_rdh(ctx: &GateCtx) -> Gate {
    all(vec![
        ring_family(ctx),
        (
            ctx.node_n > 1,
            "node_n > 1 (inter)",
            v("node_n", ctx.node_n),
        ),
        (
            ctx.local_rank_n == 1,
            "local_rank_n == 1",
            v("local_rank_n", ctx.local_rank_n),
        ),
        (
            ctx.rank_n == ctx.node_n,
            "rank_n == node_n",
            format!("rank_n = {}, node_n = {}", ctx.rank_n, ctx.node_n),
        ),
        (
            ctx.rank_n.is_power_of_two() && ctx.rank_n >= 8,
            "rank_n a power of two >= 8",
            v("rank_n", ctx.rank_n),
        ),
        (
            ctx.fabric != Fabric::PodP2p,
            "not a pod fabric",
            "the fabric is an UltraServer pod".into(),
        ),
    ])
}

/// The mesh flavour (`algo_sub_type`, docs/contract/lowering.md §3.5), or `None` where mesh is
/// unavailable.
pub fn mesh_flavour(ctx: &GateCtx) -> Option<u8> {
    if ctx.fabric == Fabric::Switch && ctx.local_rank_n > 1 {
        return Some(MESH_SWITCH);
    }
    match ctx.generation {
        Generation::V2 => Some(MESH_FULL),
        Generation::V3 | Generation::V4 => {
            let pod = ctx.fabric == Fabric::PodP2p && ctx.node_n == ULTRASERVER_NODES;
            if ctx.node_n == 1 || pod || ctx.node_n == ctx.rank_n {
                Some(MESH_TRN2)
            } else {
                Some(MESH_FULL)
            }
        }
    }
}

/// The mesh cap in bytes for this shape (docs/contract/lowering.md §5.4; see the module doc).
pub fn mesh_cap(ctx: &GateCtx) -> u64 {
    if ctx.node_n == 1 && ctx.rank_n == 2 {
        MESH_OP_LIMIT_BYTES
    } else {
        MESH_T1_LIMIT_BYTES.min(MESH_CHANNEL_BUFFER_MAX / u64::from(ctx.node_n.max(1)))
    }
}

/// Mesh is structurally available (gate 6 without the size cap): a mesh op, mesh enabled, a
/// flavour for the platform, and the CCE fan-in for a reduce.
pub fn mesh_available(ctx: &GateCtx) -> Gate {
    all(vec![
        (
            is_ring_family(ctx.op) || is_all_to_all(ctx.op),
            "all-reduce, all-gather, reduce-scatter or all-to-all(-v)",
            format!("the op is {}", ctx.op.label()),
        ),
        (
            ctx.mesh_enabled,
            "mesh enabled (OPENNRT_CC_MESH=1)",
            "mesh is disabled".into(),
        ),
        (
            mesh_flavour(ctx).is_some(),
            "a mesh flavour for the platform",
            "the platform has none (untested)".into(),
        ),
        (
            !is_reducing(ctx.op) || ctx.rank_n <= MESH_MAX_REDUCE_SOURCES,
            "rank_n <= 32 for a reduce (CCE sources)",
            v("rank_n", ctx.rank_n),
        ),
    ])
}

/// Gate 6, mesh (docs/contract/lowering.md §3.2): mesh available and the op size within the mesh
/// cap (§5.4).
pub fn gate_mesh(ctx: &GateCtx) -> Gate {
    let avail = mesh_available(ctx);
    if !avail.pass {
        return avail;
    }
    let cap = mesh_cap(ctx);
    let size = all(vec![(
        ctx.op_bytes <= cap,
        "the op size within the mesh cap",
        format!("{} B > {cap} B", ctx.op_bytes),
    )]);
    if size.pass {
        Gate {
            pass: true,
            why: format!("{}; {} B <= cap {cap} B", avail.why, ctx.op_bytes),
        }
    } else {
        size
    }
}

/// Gate 7, ring (docs/contract/lowering.md §3.2): always legal, except for all-to-all (MESH only).
pub fn gate_ring(ctx: &GateCtx) -> Gate {
    all(vec![(
        !is_all_to_all(ctx.op),
        "any op but all-to-all",
        format!("the op is {}", ctx.op.label()),
    )])
}

/// The gate of `alg` (HIER's is [`gate_hierarchical`]).
pub fn gate_of(alg: Algorithm, ctx: &GateCtx) -> Gate {
    match alg {
        Algorithm::Hier => gate_hierarchical(ctx),
        Algorithm::Kangaring => gate_kangaring(ctx),
        Algorithm::SingleCycleRing => gate_single_cycle_ring(ctx),
        Algorithm::IntraRdh => gate_intra_rdh(ctx),
        Algorithm::InterRdh => gate_inter_rdh(ctx),
        Algorithm::Mesh => gate_mesh(ctx),
        Algorithm::Ring => gate_ring(ctx),
    }
}

/// The legality assertions (docs/contract/lowering.md §3.3, §3.4): all-to-all must be MESH;
/// SINGLE_CYCLE_RING is all-reduce only; KANGARING and INTRA_RDH are intra only, INTER_RDH inter
/// only; the point-to-point ops and the barrier go through the ring driver only.
pub fn check_legal(op: CollectiveOp, alg: Algorithm, inter: bool) -> Result<()> {
    let name = op.label();
    let why = if is_all_to_all(op) && alg != Algorithm::Mesh {
        Some(format!(
            "{name} must be MESH (docs/contract/lowering.md §3.3)"
        ))
    } else if alg == Algorithm::SingleCycleRing && op != CollectiveOp::AllReduce {
        Some(format!(
            "SINGLE_CYCLE_RING is all-reduce only, not {name} (docs/contract/lowering.md §3.2)"
        ))
    } else if alg == Algorithm::Kangaring && inter {
        Some(
            "KANGARING is intra-node only, never on an inter leg (docs/contract/lowering.md §3.4)"
                .to_string(),
        )
    } else if alg == Algorithm::IntraRdh && inter {
        Some("INTRA_RDH is intra-node only (docs/contract/lowering.md §3.2)".to_string())
    } else if alg == Algorithm::InterRdh && !inter {
        Some("INTER_RDH is inter-node only (docs/contract/lowering.md §3.2)".to_string())
    } else if !is_ring_family(op) && !is_all_to_all(op) && alg != Algorithm::Ring {
        Some(format!(
            "{name} is lowered by the point-to-point ring driver only \
             (docs/contract/lowering.md §4.9, §4.10)"
        ))
    } else {
        None
    };
    match why {
        Some(w) => Err(Error::invalid(format!(
            "{} is illegal for {name}: {w}",
            alg.name()
        ))),
        None => Ok(()),
    }
}

/// Map an `enc_op_type` (docs/contract/lowering.md §2.1) to the op, rejecting BROADCAST (2),
/// REDUCE (3) and the explicit PERMUTE_REDUCE (9): the analysed runtime has no composer for them
/// (§3.3, §4.11).
pub fn collective_op_from_enc(enc_op_type: u8) -> Result<CollectiveOp> {
    Ok(match enc_op_type {
        0 => CollectiveOp::AllGather,
        1 => CollectiveOp::AllReduce,
        4 => CollectiveOp::ReduceScatter,
        5 => CollectiveOp::Send,
        6 => CollectiveOp::Recv,
        7 => CollectiveOp::AllToAll,
        8 => CollectiveOp::Permute,
        10 => CollectiveOp::PermuteImplicit,
        11 => CollectiveOp::PermuteReduceImplicit,
        12 => CollectiveOp::AllToAllV,
        2 | 3 | 9 => {
            let n = match enc_op_type {
                2 => "BROADCAST",
                3 => "REDUCE",
                _ => "PERMUTE_REDUCE",
            };
            return Err(Error::invalid(format!(
                "enc_op_type {enc_op_type} ({n}) is not a supported operation: the runtime has \
                 no composer for it (docs/contract/lowering.md §3.3)"
            )));
        }
        other => {
            return Err(Error::invalid(format!(
                "enc_op_type {other} is not a collective operation (0..=12)"
            )))
        }
    })
}

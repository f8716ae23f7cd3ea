//! Algorithm selection (docs/contract/lowering.md §3): which composer runs a collective, per leg,
//! and why.
//!
//! [`select`] computes the group's shape on the [`Topology`], evaluates the seven gates of §3.2
//! (in [`crate::lower::select`]'s gate functions: [`gate_hierarchical`], [`gate_kangaring`],
//! [`gate_single_cycle_ring`], [`gate_intra_rdh`], [`gate_inter_rdh`], [`gate_mesh`],
//! [`gate_ring`]) and takes, in the flat precedence of §3.3, the first algorithm whose gate
//! passes: INTRA_RDH, MESH, KANGARING, SINGLE_CYCLE_RING, INTER_RDH; only when none applies,
//! HIER (if its gate passes), else RING. All-to-all(-v) is always MESH. HIER is decomposed into
//! legs (§4.7) — all-reduce: intra reduce-scatter → inter all-reduce → intra all-gather;
//! reduce-scatter: intra → inter; all-gather: **inter first**, then intra — and each leg takes
//! the first legal candidate of §3.4 judged on its slice size (intra: ceil(bytes / local_rank_n);
//! inter: that × node_n), else RING. Selection is pure: it does not know which composers exist.
//! Every decision is logged at INFO (target `select`) and returned in [`Selection::reasons`].
//!
//! # Environment ([`SelectConfig::from_lookup`], fed by `runtime::config`)
//!
//! * `OPENNRT_CC_ALGO` — force an algorithm, by the names of [`Algorithm::parse`]: `ring`,
//!   `hier`, `mesh`, `kangaring`, `single_cycle_ring`, `intra_rdh`, `inter_rdh` (unset, empty
//!   or `auto`: automatic). Like `NCCL_ALGO`, a force that is illegal for the request is an
//!   error that says why, never a silent fallback. A forced algorithm must pass its gate, with
//!   two exceptions that are preferences rather than legality: the mesh size cap, and the RDH
//!   mode switch (forcing `intra_rdh` turns RDH mode on). Forcing `ring` keeps a hierarchical
//!   group flat (§3.3: HIER only if the ring driver was not forced); forcing `hier` still lets
//!   each leg choose its own algorithm.
//! * `OPENNRT_CC_RDH` — `0`/`1`, RDH mode for automatic selection (default `0`: the vendor's
//!   switch is a debug variable, and with it on every single-node group of 4, 8, 16 or 64 ranks
//!   would take INTRA_RDH ahead of MESH).
//! * `OPENNRT_CC_MESH` — `0`/`1`, mesh enabled (default `1`). With `0`, all-to-all fails.
//! * `OPENNRT_CC_ALGOS` — comma list of the algorithms selection may use (the allowed-algorithm
//!   bitmap of §3.3; default all). A gate of an algorithm outside the list counts as failed.
//!
//! Multi-stream ([`SelectConfig::multi_stream`]) is set by the runtime when more than one
//! collective stream is in use; a request on a stream other than 0 implies it.

pub(super) mod gates;
#[cfg(test)]
mod tests;

use crate::error::{Error, Result};
use crate::lower::program::Algorithm;
use crate::lower::request::{CollectiveOp, CollectiveRequest};
use crate::lower::topology::{GroupShape, Topology};

pub use crate::lower::select::gates::*;

/// The selection knobs (see the module doc for their variables).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectConfig {
    /// Forced algorithm (`OPENNRT_CC_ALGO`).
    pub forced: Option<Algorithm>,
    /// RDH mode (`OPENNRT_CC_RDH`).
    pub rdh: bool,
    /// Mesh enabled (`OPENNRT_CC_MESH`).
    pub mesh: bool,
    /// Allowed algorithms: bit `1 << enc_alg_type` (`OPENNRT_CC_ALGOS`).
    pub allowed: u16,
    /// More than one collective stream is in use.
    pub multi_stream: bool,
}

/// Every algorithm allowed.
pub const ALL_ALGORITHMS: u16 = {
    let mut m = 0u16;
    let mut i = 0;
    while i < Algorithm::ALL.len() {
        m |= 1 << Algorithm::ALL[i] as u16;
        i += 1;
    }
    m
};

impl Default for SelectConfig {
    fn default() -> Self {
        SelectConfig {
            forced: None,
            rdh: false,
            mesh: true,
            allowed: ALL_ALGORITHMS,
            multi_stream: false,
        }
    }
}

fn names() -> String {
    Algorithm::ALL.map(Algorithm::name).join(", ")
}

fn parse_bool(var: &str, v: &str) -> Result<bool> {
    match v.trim() {
        "0" => Ok(false),
        "1" => Ok(true),
        other => Err(Error::bad_variable(var, other, "must be 0 or 1")),
    }
}

impl SelectConfig {
    /// Read the knobs from a variable lookup (pure).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<SelectConfig> {
        let mut c = SelectConfig::default();
        if let Some(v) = get("OPENNRT_CC_ALGO") {
            let v = v.trim();
            if !v.is_empty() && !v.eq_ignore_ascii_case("auto") {
                c.forced = Some(Algorithm::parse(v).ok_or_else(|| {
                    Error::bad_variable(
                        "OPENNRT_CC_ALGO",
                        v,
                        format_args!("not an algorithm; use auto or one of {}", names()),
                    )
                })?);
            }
        }
        if let Some(v) = get("OPENNRT_CC_RDH") {
            c.rdh = parse_bool("OPENNRT_CC_RDH", &v)?;
        }
        if let Some(v) = get("OPENNRT_CC_MESH") {
            c.mesh = parse_bool("OPENNRT_CC_MESH", &v)?;
        }
        if let Some(v) = get("OPENNRT_CC_ALGOS") {
            c.allowed = 0;
            for name in v.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                let a = Algorithm::parse(name).ok_or_else(|| {
                    Error::bad_variable(
                        "OPENNRT_CC_ALGOS",
                        &v,
                        format_args!("{name:?} is not an algorithm; use {}", names()),
                    )
                })?;
                c.allowed |= 1 << a as u16;
            }
        }
        Ok(c)
    }

    /// Whether `alg` is in the allowed set.
    pub fn allows(&self, alg: Algorithm) -> bool {
        self.allowed & (1 << alg as u16) != 0
    }
}

/// Which ranks a leg spans: what the lowering tells the legs of a hierarchical op apart by
/// (their names are for people: reasons, logs, the IR's `leg`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LegRole {
    /// The whole group (a flat collective's only leg).
    Flat,
    /// The ranks of one node (a HIER leg; docs/contract/lowering.md §4.7).
    Intra,
    /// One rank per node, across the nodes (a HIER leg).
    Inter,
}

/// One leg of the chosen plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LegPlan {
    /// What the leg does, e.g. "intra reduce-scatter" (a flat collective: the op's name).
    pub name: String,
    /// Which ranks it spans.
    pub role: LegRole,
    /// The leg's operation.
    pub op: CollectiveOp,
    /// The algorithm composing it.
    pub algorithm: Algorithm,
    /// Mesh flavour (`algo_sub_type`, docs/contract/lowering.md §3.5) when the leg is MESH.
    pub mesh_sub_type: Option<u8>,
    /// The rank sets (indices into the request's group) that run this leg in parallel, each
    /// in ring order.
    pub groups: Vec<Vec<u32>>,
}

/// What [`select`] decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    /// The algorithm of the collective (HIER for a decomposed one).
    pub algorithm: Algorithm,
    /// Mesh flavour when `algorithm` is MESH.
    pub mesh_sub_type: Option<u8>,
    /// The legs, in execution order (one for a flat collective).
    pub legs: Vec<LegPlan>,
    /// One line per decision, also logged at INFO.
    pub reasons: Vec<String>,
}

/// Collects reasons and logs each at INFO.
struct Reasons(Vec<String>);

impl Reasons {
    fn push(&mut self, line: String) {
        crate::log_info!("select", "{line}");
        self.0.push(line);
    }
}

/// The flat precedence of docs/contract/lowering.md §3.3 after HIER: the first passing gate wins.
pub const FLAT_ORDER: [Algorithm; 5] = [
    Algorithm::IntraRdh,
    Algorithm::Mesh,
    Algorithm::Kangaring,
    Algorithm::SingleCycleRing,
    Algorithm::InterRdh,
];

/// The gate order in which reasons list the verdicts.
const GATE_ORDER: [Algorithm; 7] = [
    Algorithm::Hier,
    Algorithm::IntraRdh,
    Algorithm::Mesh,
    Algorithm::Kangaring,
    Algorithm::SingleCycleRing,
    Algorithm::InterRdh,
    Algorithm::Ring,
];

fn ctx_for(req: &CollectiveRequest, topo: &Topology, s: &GroupShape, c: &SelectConfig) -> GateCtx {
    GateCtx {
        op: req.op,
        rank_n: s.rank_n,
        node_n: s.node_n,
        local_rank_n: s.local_rank_n,
        generation: topo.generation,
        lnc: topo.lnc,
        fabric: topo.fabric,
        multi_stream: c.multi_stream || req.stream != 0,
        rdh_mode: c.rdh,
        mesh_enabled: c.mesh,
        has_pairs: !req.pairs.is_empty(),
        op_bytes: op_bytes(req),
    }
}

/// The gate a forced algorithm must pass: its own, minus the preferences (mesh cap, RDH mode).
fn legality_gate(alg: Algorithm, ctx: &GateCtx) -> Gate {
    match alg {
        Algorithm::Mesh => mesh_available(ctx),
        Algorithm::IntraRdh => gate_intra_rdh(&GateCtx {
            rdh_mode: true,
            ..ctx.clone()
        }),
        other => gate_of(other, ctx),
    }
}

/// Choose the algorithm(s) for `req` on `topo` (docs/contract/lowering.md §3; see the module doc).
pub fn select(req: &CollectiveRequest, topo: &Topology, cfg: &SelectConfig) -> Result<Selection> {
    let shape = topo.group_shape(&req.group)?;
    let ctx = ctx_for(req, topo, &shape, cfg);
    let mut why = Reasons(Vec::new());
    why.push(format!(
        "{} of {} B per rank on {} ranks ({} node(s), local_rank_n {}) of {}",
        req.op.label(),
        ctx.op_bytes,
        ctx.rank_n,
        ctx.node_n,
        ctx.local_rank_n,
        topo.name
    ));
    for alg in GATE_ORDER {
        let g = gate_of(alg, &ctx);
        let off = if cfg.allows(alg) {
            ""
        } else {
            " [not allowed by OPENNRT_CC_ALGOS]"
        };
        why.push(format!("gate {}: {g}{off}", alg.name()));
    }
    let passes = |alg: Algorithm| cfg.allows(alg) && gate_of(alg, &ctx).pass;

    let algorithm = if let Some(f) = cfg.forced {
        let illegal = |w: String| {
            Error::invalid(format!(
                "forced algorithm {} (OPENNRT_CC_ALGO) is illegal for {} on {} ranks of {}: {w}",
                f.name(),
                req.op.label(),
                ctx.rank_n,
                topo.name
            ))
        };
        if !cfg.allows(f) {
            return Err(illegal("it is not in OPENNRT_CC_ALGOS".into()));
        }
        check_legal(req.op, f, shape.is_inter()).map_err(|e| illegal(e.message().into()))?;
        let g = legality_gate(f, &ctx);
        if !g.pass {
            return Err(illegal(g.why));
        }
        why.push(format!(
            "chose {}: forced by OPENNRT_CC_ALGO ({})",
            f.name(),
            g.why
        ));
        f
    } else if matches!(req.op, CollectiveOp::AllToAll | CollectiveOp::AllToAllV) {
        let g = mesh_available(&ctx);
        if !g.pass || !cfg.allows(Algorithm::Mesh) {
            let w = if g.pass {
                "MESH is not in OPENNRT_CC_ALGOS".into()
            } else {
                g.why
            };
            return Err(Error::invalid(format!(
                "{} must be MESH (docs/contract/lowering.md §3.3) but mesh is unavailable: {w}",
                req.op.label()
            )));
        }
        why.push(format!(
            "chose mesh: {} must be MESH (docs/contract/lowering.md §3.3); the size cap does \
             not apply",
            req.op.label()
        ));
        Algorithm::Mesh
    } else if let Some(a) = FLAT_ORDER.into_iter().find(|&a| passes(a)) {
        why.push(format!(
            "chose {}: first passing gate in the flat precedence intra_rdh > mesh > kangaring > \
             single_cycle_ring > inter_rdh (docs/contract/lowering.md §3.3)",
            a.name()
        ));
        a
    } else if passes(Algorithm::Hier) {
        why.push(
            "chose hier: no flat-family algorithm applies and the hierarchical gate passes \
             (docs/contract/lowering.md §3.3)"
                .into(),
        );
        Algorithm::Hier
    } else if passes(Algorithm::Ring) {
        why.push(
            "chose ring: no other gate passes; ring is the fallback \
             (docs/contract/lowering.md §3.3)"
                .into(),
        );
        Algorithm::Ring
    } else {
        return Err(Error::invalid(format!(
            "no allowed algorithm can run {} on {} ranks of {} (OPENNRT_CC_ALGOS excludes ring)",
            req.op.label(),
            ctx.rank_n,
            topo.name
        )));
    };

    let legs = if algorithm == Algorithm::Hier {
        hier_legs(req.op, &shape, &ctx, cfg, &mut why)?
    } else {
        vec![LegPlan {
            name: req.op.label().to_string(),
            role: LegRole::Flat,
            op: req.op,
            algorithm,
            mesh_sub_type: (algorithm == Algorithm::Mesh)
                .then(|| mesh_flavour(&ctx))
                .flatten(),
            groups: vec![(0..shape.rank_n).collect()],
        }]
    };
    for leg in &legs {
        let inter = match leg.role {
            LegRole::Inter => true,
            LegRole::Intra => false,
            LegRole::Flat => shape.is_inter(),
        };
        check_legal(leg.op, leg.algorithm, inter)?;
    }
    let mesh_sub_type = if algorithm == Algorithm::Mesh {
        legs[0].mesh_sub_type
    } else {
        None
    };
    if let Some(m) = mesh_sub_type {
        why.push(format!(
            "mesh flavour (algo_sub_type) {m} (docs/contract/lowering.md §3.5)"
        ));
    }
    Ok(Selection {
        algorithm,
        mesh_sub_type,
        legs,
        reasons: why.0,
    })
}

/// The HIER legs of docs/contract/lowering.md §4.7 with the per-leg choice of §3.4.
fn hier_legs(
    op: CollectiveOp,
    shape: &GroupShape,
    ctx: &GateCtx,
    cfg: &SelectConfig,
    why: &mut Reasons,
) -> Result<Vec<LegPlan>> {
    let (l, n) = (shape.local_rank_n, shape.node_n);
    let intra_bytes = ctx.op_bytes.div_ceil(u64::from(l));
    let intra = GateCtx {
        rank_n: l,
        node_n: 1,
        local_rank_n: l,
        has_pairs: false,
        op_bytes: intra_bytes,
        ..ctx.clone()
    };
    let inter = GateCtx {
        rank_n: n,
        node_n: n,
        local_rank_n: 1,
        has_pairs: false,
        op_bytes: intra_bytes * u64::from(n),
        ..ctx.clone()
    };
    use CollectiveOp::{AllGather as AG, AllReduce as AR, ReduceScatter as RS};
    use LegRole::{Inter, Intra};
    let plan: &[(LegRole, CollectiveOp)] = match op {
        AR => &[(Intra, RS), (Inter, AR), (Intra, AG)],
        RS => &[(Intra, RS), (Inter, RS)],
        AG => &[(Inter, AG), (Intra, AG)],
        other => {
            return Err(Error::invalid(format!(
                "{} has no hierarchical form",
                other.label()
            )))
        }
    };
    plan.iter()
        .map(|&(role, leg_op)| {
            let is_inter = role == Inter;
            let base = if is_inter { &inter } else { &intra };
            let leg_ctx = GateCtx {
                op: leg_op,
                ..base.clone()
            };
            let (algorithm, line) = choose_leg(is_inter, &leg_ctx, cfg)?;
            why.push(line);
            Ok(LegPlan {
                name: format!(
                    "{} {}",
                    if is_inter { "inter" } else { "intra" },
                    leg_op.label()
                ),
                role,
                op: leg_op,
                algorithm,
                mesh_sub_type: (algorithm == Algorithm::Mesh)
                    .then(|| mesh_flavour(&leg_ctx))
                    .flatten(),
                groups: if is_inter {
                    shape.inter_groups()
                } else {
                    shape.intra_groups()
                },
            })
        })
        .collect()
}

/// The docs/contract/lowering.md §3.4 cascade for one leg: the first candidate whose gate passes,
/// else RING.
fn choose_leg(is_inter: bool, ctx: &GateCtx, cfg: &SelectConfig) -> Result<(Algorithm, String)> {
    let slot = match (is_inter, ctx.op) {
        (false, CollectiveOp::AllGather) => "alg_intra_allg",
        (false, _) => "alg_intra_redsct",
        (true, CollectiveOp::AllReduce) => "alg_inter_allr",
        (true, CollectiveOp::AllGather) => "alg_inter_allg",
        (true, _) => "alg_inter_redsct",
    };
    let candidates: &[Algorithm] = match (is_inter, ctx.op) {
        (false, _) => &[Algorithm::IntraRdh, Algorithm::Mesh, Algorithm::Kangaring],
        (true, CollectiveOp::AllReduce) => &[
            Algorithm::Mesh,
            Algorithm::InterRdh,
            Algorithm::SingleCycleRing,
        ],
        (true, _) => &[Algorithm::Mesh, Algorithm::InterRdh],
    };
    let mut tried = Vec::new();
    for &a in candidates {
        let g = gate_of(a, ctx);
        if g.pass && cfg.allows(a) {
            tried.push(format!("{}: {g}", a.name()));
            let line = format!(
                "{slot} = {} on {} B ({})",
                a.name(),
                ctx.op_bytes,
                tried.join("; ")
            );
            return Ok((a, line));
        }
        let off = if g.pass {
            "pass, not allowed".to_string()
        } else {
            g.to_string()
        };
        tried.push(format!("{}: {off}", a.name()));
    }
    if !cfg.allows(Algorithm::Ring) {
        return Err(Error::invalid(format!(
            "{slot}: no allowed algorithm ({}); OPENNRT_CC_ALGOS excludes ring",
            tried.join("; ")
        )));
    }
    Ok((
        Algorithm::Ring,
        format!(
            "{slot} = ring on {} B (fallback; {})",
            ctx.op_bytes,
            tried.join("; ")
        ),
    ))
}

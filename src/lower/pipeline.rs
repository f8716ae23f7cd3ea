//! The lowering pipeline (docs/contract/lowering.md §6.6 steps 2–5): request → selection →
//! composition → [`Program`]. Verification and emission run on the result
//! ([`crate::lower::verify`], [`crate::lower::emit`]).
//!
//! Knobs (parsed by [`LowerConfig::from_lookup`] from what `runtime::config` read; the selection and topology knobs are documented
//! in [`crate::lower::select`] and [`crate::lower::topology`]):
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | `OPENNRT_CC_CHANNELS` | 2 | ring channels per leg (1..=32; §5.3 allows up to 32). OpenNRT's choice: the vendor's default was not recovered |
//! | `NEURON_RT_CC_CHUNK_SIZE` | 2 MiB | chunk bytes (§5.3), rounded down to 32 elements |

use crate::error::{Error, Result};
use crate::lower::compose::hier::{compose_hier, HierAlgs, HierConfig};
use crate::lower::compose::{
    default_chunk_elems, kangaring, mesh, mesh_a2a, permute, rdh, ring, single_cycle_ring,
    split_even, ComposedLeg, Leg, SemPlan, Window, CHUNK_ALIGN_ELEMS, MAX_CHANNELS,
};
use crate::lower::program::{sem_id, Algorithm, Buf, Program, RankProgram};
use crate::lower::request::{CollectiveOp, CollectiveRequest};
use crate::lower::select::{select, LegPlan, LegRole, SelectConfig, Selection};
use crate::lower::topology::Topology;

/// Default ring channels per leg.
pub const DEFAULT_CHANNELS: u8 = 2;

/// Everything besides the request that decides the program.
#[derive(Debug, Clone)]
pub struct LowerConfig {
    /// The simulated machine.
    pub topology: Topology,
    /// Selection knobs.
    pub select: SelectConfig,
    /// Ring channels per leg.
    pub channels: u8,
    /// How large a chunk is (elements are known only with the request's dtype).
    pub chunk: ChunkSize,
}

/// A chunk size as it was given. The environment gives bytes and the tests and
/// `opennrt lower --chunk` give elements, while the dtype that turns one into the other is
/// known only per request ([`ChunkSize::elems`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ChunkSize {
    /// 2 MiB worth of the request's dtype ([`default_chunk_elems`]): nothing was given.
    #[default]
    Default,
    /// Exactly this many elements, taken as given (the composers refuse an odd or zero one).
    Elems(u64),
    /// This many bytes (`NEURON_RT_CC_CHUNK_SIZE`), rounded down to a whole number of
    /// [`CHUNK_ALIGN_ELEMS`] elements, at least one such group.
    Bytes(u64),
}

impl ChunkSize {
    /// Chunk elements for a dtype of `elem_bytes` bytes.
    pub fn elems(self, elem_bytes: u64) -> u64 {
        match self {
            ChunkSize::Default => default_chunk_elems(elem_bytes),
            ChunkSize::Elems(e) => e,
            ChunkSize::Bytes(b) => {
                let e = b / elem_bytes.max(1);
                (e / CHUNK_ALIGN_ELEMS * CHUNK_ALIGN_ELEMS).max(CHUNK_ALIGN_ELEMS)
            }
        }
    }
}

impl LowerConfig {
    /// Defaults for a world of `world` devices, no environment.
    pub fn for_world(world: u32) -> Result<LowerConfig> {
        Ok(LowerConfig {
            topology: Topology::for_world(world)?,
            select: SelectConfig::default(),
            channels: DEFAULT_CHANNELS,
            chunk: ChunkSize::Default,
        })
    }

    /// Read the knobs from a variable lookup (pure).
    pub fn from_lookup(
        get: impl Fn(&str) -> Option<String> + Copy,
        world: u32,
    ) -> Result<LowerConfig> {
        let channels = match get("OPENNRT_CC_CHANNELS") {
            None => DEFAULT_CHANNELS,
            Some(v) => v
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|c| (1..=MAX_CHANNELS).contains(c))
                .ok_or_else(|| {
                    Error::bad_variable(
                        "OPENNRT_CC_CHANNELS",
                        &v,
                        format_args!("must be a number in 1..={MAX_CHANNELS}"),
                    )
                })?,
        };
        let chunk = match get("NEURON_RT_CC_CHUNK_SIZE") {
            None => ChunkSize::Default,
            Some(v) => {
                ChunkSize::Bytes(v.trim().parse::<u64>().ok().filter(|b| *b > 0).ok_or_else(
                    || {
                        Error::bad_variable(
                            "NEURON_RT_CC_CHUNK_SIZE",
                            &v,
                            "must be a positive number of bytes",
                        )
                    },
                )?)
            }
        };
        Ok(LowerConfig {
            topology: Topology::from_lookup(get, world)?,
            select: SelectConfig::from_lookup(get)?,
            channels,
            chunk,
        })
    }
}

/// Channel c is driven by TOP_SP `c mod 2` of the rank's logical core: every configuration
/// gives a logical core at least 2 TOP_SPs (v3/v4 LNC 1: 2; v2: 3). OpenNRT's choice; the
/// vendor maps channels to TOP_SPs through `get_sp_engine_idx`, which was not recovered.
fn topsp_of_channel(c: u8) -> u8 {
    c % 2
}

/// The flat leg of a request over `order` (blocks per the conventions of
/// [`crate::lower::compose::Leg`]; in-place reduce-scatter and all-gather keep rank k's block at
/// `k·count` of the shared storage, NCCL's convention).
pub fn flat_leg<'a>(
    req: &'a CollectiveRequest,
    order: Vec<u32>,
    channels: u8,
    chunk: u64,
    sems: SemPlan,
) -> Leg<'a> {
    let n = req.rank_n();
    let c = req.count;
    let own: Vec<(u64, u64)> = (0..u64::from(n)).map(|k| (k * c, c)).collect();
    let each = |b: (u64, u64)| vec![b; n as usize];
    let (src_block, dst_block) = match req.op {
        CollectiveOp::AllReduce => (split_even(c, n), split_even(c, n)),
        CollectiveOp::ReduceScatter if req.in_place => (own.clone(), own),
        CollectiveOp::ReduceScatter => (own, each((0, c))),
        CollectiveOp::AllGather if req.in_place => (own.clone(), own),
        CollectiveOp::AllGather => (each((0, c)), own),
        CollectiveOp::AllToAll | CollectiveOp::AllToAllV => (own.clone(), own),
        _ => (each((0, c)), each((0, c))),
    };
    Leg {
        request: req,
        op: req.op,
        order,
        src: Window {
            buf: Buf::Input,
            offset: 0,
        },
        dst: Window {
            buf: Buf::Output,
            offset: 0,
        },
        src_block,
        dst_block,
        scratch_base: 0,
        channels,
        chunk_elems: chunk,
        topsp_of_channel,
        sems,
    }
}

/// Compose one leg with `alg` (the dispatcher HIER also uses).
pub fn dispatch(leg: &Leg, alg: Algorithm, mesh_sub_type: u8) -> Result<ComposedLeg> {
    use CollectiveOp::*;
    match (alg, leg.op) {
        (Algorithm::Ring, AllReduce | ReduceScatter | AllGather) => ring::compose(leg),
        (
            Algorithm::Ring,
            Permute | PermuteImplicit | PermuteReduceImplicit | Send | Recv | Barrier,
        ) => permute::compose(leg),
        (Algorithm::Kangaring, _) => kangaring::compose(leg),
        (Algorithm::SingleCycleRing, _) => single_cycle_ring::compose(leg),
        (Algorithm::Mesh, AllToAllV) => {
            let layout = a2av_layout(leg.request)?;
            mesh_a2a::compose_mesh_a2av(leg, mesh_sub_type, &layout)
        }
        (Algorithm::Mesh, _) => mesh::compose_mesh(leg, mesh_sub_type),
        (Algorithm::IntraRdh | Algorithm::InterRdh, _) => rdh::compose_rdh(leg, alg),
        (alg, op) => Err(Error::invalid(format!(
            "no composer for {} with algorithm {}",
            op.label(),
            alg.name()
        ))),
    }
}

/// The all-to-all-v layout of a request: its resolved table ([`A2avMeta::table`], see
/// [`crate::lower::request::a2av`]). Unlike fixed-block all-to-all, nothing in the leg says how
/// much each rank sends where, so a request without a table is refused rather than lowered to
/// a guessed uniform layout. The buffer sizes come from [`A2avMeta`] through
/// [`CollectiveRequest::input_elems`] / [`CollectiveRequest::output_elems`].
///
/// [`A2avMeta`]: crate::lower::request::A2avMeta
/// [`A2avMeta::table`]: crate::lower::request::A2avMeta::table
pub fn a2av_layout(req: &CollectiveRequest) -> Result<mesh_a2a::A2avLayout> {
    let meta = req.a2av.as_ref().ok_or_else(|| {
        Error::invalid(
            "all-to-all-v request without A2Av metadata: the lowering needs every rank's send \
             counts and displacements (docs/contract/isa.md §9 rule 9)",
        )
    })?;
    let table = meta.table.as_ref().ok_or_else(|| {
        Error::invalid(
            "all-to-all-v request without a resolved counts table: the lowering needs every \
             rank's send counts and displacements; resolve the metadata rows first \
             (A2avMeta::with_table)",
        )
    })?;
    mesh_a2a::A2avLayout::from_table(table, req.rank_n())
}

/// The algorithm selection chose for the HIER leg spanning `role` that does `op` (ring when the
/// op has no such leg).
fn leg_alg(sel: &Selection, role: LegRole, op: CollectiveOp) -> Algorithm {
    sel.legs
        .iter()
        .find(|l| l.role == role && l.op == op)
        .map(|l| l.algorithm)
        .unwrap_or(Algorithm::Ring)
}

/// Lower `req` to every rank's program. Fails with a clear error when the request, the
/// selection (e.g. an illegal forced algorithm) or a composer refuses.
pub fn lower(req: &CollectiveRequest, cfg: &LowerConfig) -> Result<Program> {
    let n = req.rank_n();
    if n == 0 {
        return Err(Error::invalid("the replica group is empty"));
    }
    let sel = select(req, &cfg.topology, &cfg.select)?;
    let chunk = cfg.chunk.elems(req.dtype.size_bytes().unwrap_or(1) as u64);
    let mut ranks: Vec<RankProgram> = (0..n)
        .map(|rank| RankProgram {
            rank,
            scratch_elems: 0,
            entries: Vec::new(),
        })
        .collect();
    let mut merge = |c: ComposedLeg, scratch_end: u64| {
        for (r, e) in c.entries {
            let rp = &mut ranks[r as usize];
            rp.entries.push(e);
            rp.scratch_elems = rp.scratch_elems.max(scratch_end);
        }
    };
    if sel.algorithm == Algorithm::Hier {
        let shape = cfg.topology.group_shape(&req.group)?;
        let l = shape.local_rank_n;
        let node_major = shape.by_node.iter().enumerate().all(|(i, g)| {
            g.iter()
                .enumerate()
                .all(|(j, &r)| r == i as u32 * l + j as u32)
        });
        if !node_major {
            return Err(Error::invalid(
                "hierarchical lowering needs the replica group in node-major order (rank n·L + l on node n); force OPENNRT_CC_ALGO=ring for other orders",
            ));
        }
        let mesh_sub = sel
            .legs
            .iter()
            .find_map(|lp: &LegPlan| lp.mesh_sub_type)
            .unwrap_or(0);
        let hcfg = HierConfig {
            node_n: shape.node_n,
            local_rank_n: l,
            algs: HierAlgs {
                intra_allg: leg_alg(&sel, LegRole::Intra, CollectiveOp::AllGather),
                intra_redsct: leg_alg(&sel, LegRole::Intra, CollectiveOp::ReduceScatter),
                inter_allr: leg_alg(&sel, LegRole::Inter, CollectiveOp::AllReduce),
                inter_allg: leg_alg(&sel, LegRole::Inter, CollectiveOp::AllGather),
                inter_redsct: leg_alg(&sel, LegRole::Inter, CollectiveOp::ReduceScatter),
            },
            intra_channels: cfg.channels,
            inter_channels: cfg.channels,
            chunk_elems: chunk,
            topsp_of_channel,
            scratch_base: 0,
            sem_base: sem_id::FIRST_FREE,
        };
        let hc = compose_hier(req, &hcfg, &|leg, alg| dispatch(leg, alg, mesh_sub))?;
        let end = hcfg.scratch_base + hc.scratch_elems;
        for hl in hc.legs {
            merge(hl.composed, end);
        }
    } else {
        let plan = sel
            .legs
            .first()
            .ok_or_else(|| Error::failure("selection returned no leg"))?;
        for group in &plan.groups {
            let leg = flat_leg(
                req,
                group.clone(),
                cfg.channels,
                chunk,
                SemPlan::new(sem_id::FIRST_FREE),
            );
            let c = dispatch(&leg, plan.algorithm, plan.mesh_sub_type.unwrap_or(0))?;
            let end = leg.scratch_base + c.scratch_elems;
            merge(c, end);
        }
    }
    Ok(Program {
        request: req.clone(),
        selection: sel.reasons,
        ranks,
    })
}

/// The address map of a program on a topology (every rank's placement, buffer sizes in bytes).
pub fn address_map(p: &Program, topo: &Topology) -> Result<crate::lower::addrmap::AddressMap> {
    use crate::lower::addrmap::{AddressMap, BufferSizes, RankPlace};
    let esz = p.request.dtype.size_bytes().unwrap_or(1) as u64;
    let places = p
        .request
        .group
        .iter()
        .map(|&g| {
            topo.place(g).map(|pl| RankPlace {
                node: pl.node,
                device: pl.device,
                core: pl.core,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let scratch = p.ranks.iter().map(|r| r.scratch_elems).max().unwrap_or(0);
    AddressMap::new(
        places,
        topo.lnc,
        topo.generation,
        BufferSizes {
            input: p.request.input_elems() * esz,
            output: p.request.output_elems() * esz,
            scratch: scratch * esz,
            in_place: p.request.in_place,
        },
    )
}

#[cfg(test)]
mod tests;

//! Models: a NEFF loaded onto a logical core (`nrt_load`, `nrt_load_collectives`) and executed
//! (`nrt_execute`), docs/contract/abi.md §3.4, §5.9; what the public format leaves open is in
//! docs/neff.md.
//!
//! **Load** parses the NEFF (`neff::Neff`, every member checked), checks its LNC size against
//! the runtime's, places it on a core, and — the load-time rewrite of docs/contract/abi.md §5.9 —
//! lowers every collective pseudo-instruction of graph 0's engine programs into a device
//! program (`lower::request::stream` resolves each word's operands through `def.json`'s vars and
//! its replica group through `replica_groups`; `runtime::collective::prepare` lowers, verifies
//! and emits it, cached by signature). The other graphs of an LNC=2 NEFF are the second physical
//! core's copy and must carry the same collective sequence. A word the software device cannot
//! run (compute) is recorded, not refused: introspection works, execution fails naming it.
//!
//! **Execute** binds the model's input and output vars by name from the tensor sets (a missing
//! or wrong-sized tensor is `NRT_INVALID` naming the var), checks once per model that every rank
//! of each replica group carries the same collective sequence ([`signature`]), and runs the
//! collectives in stream order on the software device, each meeting its group's other ranks
//! (in this process, or in others through `runtime::multi_process`). The user's calls, with
//! their repeat count and output completions, are in the `execute` child module
//! ([`Model::execute_repeat`], [`schedule`]).
//!
//! Choices:
//! * `vnc = -1` is the first visible core holding no model, else core 0 (the vendor loads
//!   several models per core); `vnc_count` −1, 0 and 1 are accepted, more is
//!   `NRT_LOAD_NOT_ENOUGH_NC` (one model spans one logical core here).
//! * A NEFF with collectives loaded by `nrt_load` uses the core's place in the global
//!   communicator (`nrt_build_global_comm`); without one its collectives need
//!   `nrt_load_collectives`.
//! * `tmp-buf` vars are device tensors the model allocates at load. Collective operands must be
//!   input, output or tmp-buf vars in device memory, contiguous; anything else (the state
//!   buffer, 2-D walks, constant files) is recorded as not executable.
//! * All-to-all-v is lowered at execution, when its table is known (the `a2av` child module,
//!   docs/neff.md §1.3).

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::error::{Error, ErrorKind, Result};
use crate::lower::program::Algorithm;
use crate::lower::request::instr::{InstrContext, TensorInfo};
use crate::lower::request::stream::requests_from_stream;
use crate::lower::request::{CollectiveOp, CollectiveRequest, Operand, Placement, TensorName};
use crate::neff::{Engine, Graph, Neff, ParseOptions, VarKind};
use crate::runtime::collective::{self, Arrival, Lowered};
use crate::runtime::comm::{self, Slot};
use crate::runtime::rendezvous::GroupKey;
use crate::runtime::sys_trace;
use crate::runtime::tensor::{Placement as TensorPlacement, Tensor};

mod a2av;
mod execute;
mod io;
pub mod signature;

pub use execute::schedule;
use io::{NeffIo, Part};

/// How a model is loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadArgs {
    /// The logical core (process-relative); `None` = the first free one.
    pub vnc: Option<u32>,
    /// `vnc_count` as passed (deprecated; −1, 0, 1).
    pub vnc_count: i32,
    /// `nrt_load_collectives`: (this worker's global rank, the world size).
    pub world: Option<(u32, u32)>,
}

/// Where an operand lives in the model's storage.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Binding {
    /// The var's id.
    var: u32,
    /// Byte offset in it.
    offset: u64,
}

/// One collective of the model, lowered at load.
#[derive(Debug)]
pub struct NeffCollective {
    /// Where its word is: graph, engine, byte offset.
    pub graph: String,
    /// The engine whose program holds it.
    pub engine: Engine,
    /// Byte offset of the word in that program.
    pub at: usize,
    /// This rank's request.
    pub req: CollectiveRequest,
    /// Prepared at load; `None` for all-to-all-v (prepared per execution, [`a2av`]).
    lowered: Option<Arc<Lowered>>,
    src: Vec<(Binding, u64)>,
    dst: Option<Binding>,
    /// All-to-all-v: the metadata tensor.
    meta: Option<Binding>,
    /// The NEFF's `opennrt_algorithm`.
    forced: Option<Algorithm>,
}

/// A loaded model.
#[derive(Debug)]
pub struct Model {
    neff: Neff,
    vnc: u32,
    /// This core's global id and the world (for collectives).
    world: Option<(u32, u32)>,
    collectives: Vec<NeffCollective>,
    /// Why `nrt_execute` cannot run this model on the software device, if it cannot.
    unsupported: Option<Error>,
    /// tmp-buf vars, by id.
    scratch: BTreeMap<u32, Tensor>,
    /// The cross-rank sequence check, done at the first execution.
    checked: Mutex<Option<Result<()>>>,
}

/// Models loaded per core (for `vnc = -1`).
static LOADED: Mutex<BTreeMap<u32, usize>> = Mutex::new(BTreeMap::new());

fn invalid_at(g: &Graph, engine: Engine, at: usize, e: Error) -> Error {
    e.context(format_args!(
        "graph {} {} program, slot {} (byte {at:#x})",
        g.name,
        engine.name(),
        at / 64
    ))
}

impl Model {
    /// Load `file` as [`LoadArgs`] say.
    ///
    /// # Errors
    /// The NEFF's own refusals (`NRT_INVALID`, `NRT_UNSUPPORTED_NEFF_VERSION`); `NRT_INVALID` for
    /// an LNC mismatch (naming both sizes), a core that is not visible, a NEFF world larger than
    /// the communicator's, or a collective word the lowering refuses;
    /// `NRT_LOAD_NOT_ENOUGH_NC` for `vnc_count` > 1.
    pub fn load(file: &[u8], args: LoadArgs) -> Result<Model> {
        let config = crate::runtime::process::config()?;
        if args.vnc_count > 1 {
            return Err(Error::new(
                ErrorKind::NotEnoughCores,
                format!(
                    "vnc_count {}: a model occupies one logical core here (pass 1, 0 or -1)",
                    args.vnc_count
                ),
            ));
        }
        let neff = Neff::parse(
            file,
            &ParseOptions {
                validate_hash: config.validate_hash,
            },
        )?;
        let lnc = neff.header.lnc_size;
        if lnc != 0 && lnc != config.lnc {
            return Err(Error::invalid(format!(
                "the NEFF {:?} was compiled for LNC size {lnc}, but the runtime runs LNC size \
                 {} ({}): recompile for LNC {}, or set NEURON_LOGICAL_NC_CONFIG={lnc} on an \
                 instance that allows it (docs/contract/abi.md §3.4)",
                neff.header.name, config.lnc, config.instance.name, config.lnc
            ))
            .with_field("lnc_size")
            .with_values(config.lnc, lnc));
        }
        let vnc = match args.vnc {
            Some(v) if v >= config.visible_cores => {
                return Err(Error::invalid(format!(
                    "vnc {v} is not one of this process's {} logical cores",
                    config.visible_cores
                )))
            }
            Some(v) => v,
            None => {
                let loaded = LOADED.lock();
                (0..config.visible_cores)
                    .find(|v| !loaded.contains_key(v))
                    .unwrap_or(0)
            }
        };
        let has_collectives = neff
            .graphs
            .iter()
            .flat_map(|g| &g.programs)
            .any(|p| p.stream.triggers().next().is_some());
        let world = match args.world {
            Some((gid, count)) => {
                join_world(vnc, gid, count, config.visible_cores, &config)?;
                Some((gid, count))
            }
            None if has_collectives => {
                let w = comm::world(Slot::Neff).ok_or_else(|| {
                    Error::invalid(
                        "the NEFF has collectives: load it with nrt_load_collectives, or \
                         create the global communicator first (nrt_build_global_comm)",
                    )
                })?;
                let gid = w.members.get(&vnc).copied().ok_or_else(|| {
                    Error::invalid(format!(
                        "the NEFF has collectives, but vnc {vnc} has not joined the global \
                         communicator (nrt_build_global_comm for this core)"
                    ))
                })?;
                Some((gid, w.count))
            }
            None => None,
        };
        if let Some((_, count)) = world {
            for g in &neff.graphs {
                if g.rank_world_size > count {
                    return Err(Error::invalid(format!(
                        "graph {} was compiled for a world of {} ranks, larger than the \
                         communicator's {count} (docs/contract/abi.md §3.4)",
                        g.name, g.rank_world_size
                    ))
                    .with_field("#rank_world_size")
                    .with_values(count, g.rank_world_size));
                }
            }
        }
        let mut scratch = BTreeMap::new();
        for v in neff.graphs[0]
            .vars
            .iter()
            .filter(|v| v.kind == VarKind::TmpBuf)
        {
            let t = Tensor::allocate(TensorPlacement::Device, Some(vnc), v.size, &v.name)?;
            scratch.insert(v.var_id, t);
        }
        let mut model = Model {
            neff,
            vnc,
            world,
            collectives: Vec::new(),
            unsupported: None,
            scratch,
            checked: Mutex::new(None),
        };
        model.unsupported = model.first_compute_word();
        if let Some((gid, count)) = world {
            model.collectives = model.lower_collectives(gid, count)?;
        }
        if model.unsupported.is_none() {
            model.unsupported = model
                .collectives
                .iter()
                .find_map(|c| c.why_not_executable(&model));
        }
        *LOADED.lock().entry(vnc).or_insert(0) += 1;
        crate::log_info!(
            "nrt_load",
            "model {:?} on vnc {vnc}: {} graph(s), {} input(s), {} output(s), {} collective(s){}",
            model.neff.header.name,
            model.neff.graphs.len(),
            model.neff.inputs().count(),
            model.neff.outputs().count(),
            model.collectives.len(),
            match &model.unsupported {
                Some(e) => format!("; not executable here: {}", e.message()),
                None => String::new(),
            }
        );
        Ok(model)
    }

    /// The parsed NEFF.
    pub fn neff(&self) -> &Neff {
        &self.neff
    }

    /// The logical core it is loaded on.
    pub fn vnc(&self) -> u32 {
        self.vnc
    }

    /// The collectives, in execution order.
    pub fn collectives(&self) -> &[NeffCollective] {
        &self.collectives
    }

    /// Why execution fails on the software device, if it does.
    pub fn unsupported(&self) -> Option<&Error> {
        self.unsupported.as_ref()
    }

    /// The first word of any graph that the software device cannot execute: anything but the
    /// collective triggers and the rank-id load (docs/neff.md §1.3).
    fn first_compute_word(&self) -> Option<Error> {
        use crate::isa::instr::Instr;
        for g in &self.neff.graphs {
            for p in &g.programs {
                for w in &p.stream.words {
                    let runs = w.instr.is_collective_trigger()
                        || matches!(w.instr, Instr::CurProcessingRankId(_));
                    if !runs {
                        return Some(
                            Error::failure(format!(
                                "the software device cannot execute graph {} engine {} slot {} \
                             (byte {:#x} of {}): opcode {:#04x} is not one it executes (it runs \
                             a NEFF's collective pseudo-instructions, not its compute; \
                             docs/neff.md §1.3)",
                                g.name,
                                p.engine.name(),
                                w.offset / 64,
                                w.offset,
                                p.member,
                                w.instr.opcode()
                            ))
                            .with_op(format!("{:#04x}", w.instr.opcode()))
                            .with_field(format!("{}/{}", g.name, p.engine.name()))
                            .with_step((w.offset / 64) as u64),
                        );
                    }
                }
            }
        }
        None
    }

    /// Lower graph 0's collectives for global id `gid` of a `count`-rank world, and check that
    /// every other graph carries the same sequence.
    fn lower_collectives(&self, gid: u32, count: u32) -> Result<Vec<NeffCollective>> {
        let mut first: Option<Vec<CollectiveRequest>> = None;
        let mut out = Vec::new();
        for (gi, g) in self.neff.graphs.iter().enumerate() {
            let ctx = instr_context(g, gid)?;
            let mut reqs = Vec::new();
            for p in &g.programs {
                let found = requests_from_stream(&p.stream, &ctx).map_err(|e| {
                    e.context(format_args!("graph {} {} program", g.name, p.engine.name()))
                })?;
                let offsets: Vec<usize> = p.stream.triggers().map(|w| w.offset).collect();
                for (r, at) in found.into_iter().zip(offsets) {
                    reqs.push((p.engine, at, r));
                }
            }
            let list: Vec<CollectiveRequest> = reqs.iter().map(|(_, _, r)| r.clone()).collect();
            match &first {
                None => {
                    let forced = match &g.algorithm {
                        None => None,
                        Some(a) => Some(Algorithm::parse(a).ok_or_else(|| {
                            Error::invalid(format!(
                                "{}: opennrt_algorithm {a:?} names no algorithm",
                                g.def_member
                            ))
                        })?),
                    };
                    for (engine, at, req) in reqs {
                        out.push(
                            NeffCollective::new(g, engine, at, req, count, forced)
                                .map_err(|e| invalid_at(g, engine, at, e))?,
                        );
                    }
                    first = Some(list);
                }
                Some(f) if *f != list => {
                    return Err(Error::invalid(format!(
                        "graph {} carries {} collective(s) that differ from graph {}'s {}: the \
                         graphs of one NEFF are the physical cores of one logical core and run \
                         the same collectives",
                        g.name,
                        list.len(),
                        self.neff.graphs[0].name,
                        f.len()
                    ))
                    .with_step(gi as u64));
                }
                Some(_) => {}
            }
        }
        Ok(out)
    }

    /// Run the model once: bind `inputs` and `outputs` by name and run its collectives.
    ///
    /// # Errors
    /// `NRT_FAILURE` naming the first word the software device cannot execute; `NRT_INVALID`
    /// for a missing or wrong-sized tensor (named); the collectives' own errors
    /// (`NRT_TIMEOUT`, 1200, …), and `NRT_INVALID` on every rank when the ranks' NEFFs carry
    /// different collective sequences.
    pub fn execute(&self, inputs: &[(String, Tensor)], outputs: &[(String, Tensor)]) -> Result<()> {
        let bound = self.bind(inputs, outputs)?;
        if let Some(e) = &self.unsupported {
            return Err(e.clone());
        }
        sys_trace::record(
            sys_trace::NC_EXEC,
            self.vnc,
            || self.neff.header.name.clone(),
            || self.run(&bound),
        )
    }

    /// The device part of [`Model::execute`]: the collectives in stream order.
    fn run(&self, bound: &BTreeMap<u32, Tensor>) -> Result<()> {
        if self.collectives.is_empty() {
            return Ok(());
        }
        self.check_sequences()?;
        let world = self.world.map_or(1, |(_, c)| c);
        for (k, c) in self.collectives.iter().enumerate() {
            let at = |e: Error| {
                e.context(format_args!(
                    "collective {k} of model {:?} (graph {} {} slot {})",
                    self.neff.header.name,
                    c.graph,
                    c.engine.name(),
                    c.at / 64
                ))
            };
            let meta = c
                .meta
                .as_ref()
                .map(|b| {
                    bound.get(&b.var).map(|t| (b, t)).ok_or_else(|| {
                        Error::failure(format!("var {} is not bound (an OpenNRT bug)", b.var))
                    })
                })
                .transpose()?;
            let (req, lowered) = match (&c.lowered, meta) {
                (Some(l), _) => (None, l.clone()),
                (None, Some((_, t))) => {
                    let (r, l) = a2av::prepare(c, t, world).map_err(at)?;
                    (Some(r), l)
                }
                (None, None) => {
                    return Err(at(Error::failure(
                        "a collective with no program (an OpenNRT bug)",
                    )))
                }
            };
            let req = req.as_ref().unwrap_or(&c.req);
            let part = |b: &Binding, len: u64| -> Result<Part> {
                let t = bound.get(&b.var).ok_or_else(|| {
                    Error::failure(format!("var {} is not bound (an OpenNRT bug)", b.var))
                })?;
                Ok(Part {
                    tensor: t.clone(),
                    offset: b.offset,
                    len,
                })
            };
            let src = c
                .src
                .iter()
                .map(|(b, len)| part(b, *len))
                .collect::<Result<Vec<_>>>()?;
            let out_len = req.output_elems() * req.elem_bytes().unwrap_or(1);
            let dst = c.dst.as_ref().map(|b| part(b, out_len)).transpose()?;
            let key = GroupKey {
                kind: "neff",
                slot: Slot::Neff as u8,
                group: req.group.clone(),
            };
            let ticket = collective::meetings().ticket(&key, req.rank);
            let arrival = Arrival {
                req: req.clone(),
                lowered,
                io: Box::new(NeffIo {
                    src,
                    dst,
                    dst_windows: written_windows(req),
                }),
            };
            sys_trace::record(
                sys_trace::CC_EXEC,
                self.vnc,
                || req.op.name().to_string(),
                || collective::run_user(&key, ticket, arrival, collective::Wait::Block),
            )
            .map_err(at)?;
            if let Some((b, t)) = meta {
                a2av::write_back(req, t, b).map_err(at)?;
            }
        }
        Ok(())
    }

    /// var id → the tensor bound to it: the inputs and outputs by name from the sets (sizes
    /// exact), the model's own scratch.
    fn bind(
        &self,
        inputs: &[(String, Tensor)],
        outputs: &[(String, Tensor)],
    ) -> Result<BTreeMap<u32, Tensor>> {
        let mut bound = BTreeMap::new();
        for (set, kind, list) in [
            ("input", VarKind::Input, inputs),
            ("output", VarKind::Output, outputs),
        ] {
            for v in self.neff.graphs[0].vars.iter().filter(|v| v.kind == kind) {
                let t = list
                    .iter()
                    .find(|(n, _)| *n == v.name)
                    .map(|(_, t)| t)
                    .ok_or_else(|| {
                        let names: Vec<&str> = list.iter().map(|(n, _)| n.as_str()).collect();
                        Error::invalid(format!(
                            "the {set} set has no tensor named {:?} (the model's {set} of {} \
                             bytes); it holds {names:?}",
                            v.name, v.size
                        ))
                        .with_field(v.name.clone())
                    })?;
                if t.size() != v.size {
                    return Err(Error::invalid(format!(
                        "{set} tensor {:?} has {} bytes; the model's {set} {:?} has {}",
                        t.name(),
                        t.size(),
                        v.name,
                        v.size
                    ))
                    .with_field(v.name.clone())
                    .with_values(v.size, t.size()));
                }
                bound.insert(v.var_id, t.clone());
            }
        }
        for (id, t) in &self.scratch {
            bound.insert(*id, t.clone());
        }
        Ok(bound)
    }

    /// The cross-rank sequence check of [`signature`], once per model.
    fn check_sequences(&self) -> Result<()> {
        let mut done = self.checked.lock();
        if let Some(r) = &*done {
            return r.clone();
        }
        let world = self.world.map_or(1, |(_, c)| c);
        let r = signature::check(&self.collectives, world);
        *done = Some(r.clone());
        r
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        let mut loaded = LOADED.lock();
        if let Some(n) = loaded.get_mut(&self.vnc) {
            *n -= 1;
            if *n == 0 {
                loaded.remove(&self.vnc);
            }
        }
    }
}

/// Join (or check) the NEFF world for `nrt_load_collectives` (docs/contract/abi.md §3.4): with no
/// world, this call creates it; an existing world of the same size is joined; a smaller NEFF
/// world is fine when the core is already a member; a larger one is `NRT_INVALID`.
fn join_world(
    vnc: u32,
    gid: u32,
    count: u32,
    visible: u32,
    config: &crate::runtime::config::Config,
) -> Result<()> {
    if let Some(w) = comm::world(Slot::Neff) {
        if count > w.count {
            return Err(Error::invalid(format!(
                "ctx_device_count {count} is larger than the global communicator's {} ranks \
                 (docs/contract/abi.md §3.4)",
                w.count
            )));
        }
        if count < w.count {
            return match w.members.get(&vnc) {
                Some(_) => Ok(()),
                None => Err(Error::invalid(format!(
                    "ctx_device_count {count} is smaller than the global communicator's {} \
                     ranks and vnc {vnc} has not joined it: call nrt_build_global_comm first",
                    w.count
                ))),
            };
        }
    }
    comm::join(
        Slot::Neff,
        vnc,
        gid,
        count,
        visible,
        config.root_comm_id.clone(),
    )
}

/// The instruction context of graph `g` for global id `gid`: its groups (the sub-group holding
/// `gid` of each replica group), its vars (one id space for tensor ids and var ids,
/// docs/neff.md §1.3) and its permute pairs in rank indices.
fn instr_context(g: &Graph, gid: u32) -> Result<InstrContext> {
    let mut groups = BTreeMap::new();
    for (k, subs) in g.replica_groups.iter().enumerate() {
        if let Some(sub) = subs.iter().find(|s| s.contains(&gid)) {
            groups.insert(k as u16, sub.clone());
        }
    }
    let mut tensors = BTreeMap::new();
    let mut vars = BTreeMap::new();
    for v in &g.vars {
        let placement = match v.kind {
            VarKind::StateBuffer => Some(Placement::Sbuf),
            VarKind::Input | VarKind::Output | VarKind::TmpBuf | VarKind::File => {
                Some(Placement::Hbm)
            }
            _ => None,
        };
        let info = TensorInfo {
            bytes: v.size,
            placement,
        };
        tensors.insert(v.var_id, info);
        if let Ok(id) = u16::try_from(v.var_id) {
            vars.insert(id, info);
        }
    }
    let mut permute_pairs = BTreeMap::new();
    for set in &g.src_target_pairs {
        let Some(sub) = groups.get(&set.group_id) else {
            continue;
        };
        let index = |id: u32| -> Result<u32> {
            sub.iter()
                .position(|&d| d == id)
                .map(|i| i as u32)
                .ok_or_else(|| {
                    Error::invalid(format!(
                        "{}: src_target_pairs of group {} names device {id}, which is not in this \
                     rank's sub-group {sub:?}",
                        g.def_member, set.group_id
                    ))
                })
        };
        let pairs = set
            .pairs
            .iter()
            .filter(|(s, t)| sub.contains(s) && sub.contains(t))
            .map(|&(s, t)| Ok((index(s)?, index(t)?)))
            .collect::<Result<Vec<_>>>()?;
        permute_pairs.insert(set.group_id, pairs);
    }
    let mut ctx = InstrContext::new(gid, groups);
    ctx.tensors = Some(tensors);
    ctx.vars = Some(vars);
    ctx.collective_streams = Some(g.num_streams);
    ctx.permute_pairs = permute_pairs;
    Ok(ctx)
}

impl NeffCollective {
    fn new(
        g: &Graph,
        engine: Engine,
        at: usize,
        req: CollectiveRequest,
        world: u32,
        forced: Option<Algorithm>,
    ) -> Result<NeffCollective> {
        let esize = req.elem_bytes().unwrap_or(1);
        let binding = |o: &Option<Operand>| -> Option<Binding> {
            o.as_ref().map(|o| Binding {
                var: match o.tensor {
                    TensorName::TensorId(id) => id,
                    TensorName::Var(id) => u32::from(id),
                },
                offset: o.offset_bytes,
            })
        };
        let mut src = Vec::new();
        if let Some(b) = binding(&req.operands.src0) {
            let len = match req.op {
                CollectiveOp::PermuteReduceImplicit => req.count * esize,
                _ => req.input_elems() * esize,
            };
            let own = if req.in_place && req.op == CollectiveOp::AllGather {
                u64::from(req.rank) * req.count * esize
            } else {
                0
            };
            src.push((
                Binding {
                    offset: b.offset + own,
                    ..b
                },
                len,
            ));
        }
        if req.op == CollectiveOp::PermuteReduceImplicit {
            if let Some(b) = binding(&req.operands.src1) {
                src.push((b, req.count * esize));
            }
        }
        let meta = req.a2av.as_ref().and_then(|m| binding(&m.metadata.clone()));
        let mut dst = binding(&req.operands.dst);
        if let Some(d) = &mut dst {
            if req.in_place && req.op == CollectiveOp::ReduceScatter {
                d.offset += u64::from(req.rank) * req.count * esize;
            }
        }
        // Lower only what can run; the rest is reported at execute.
        let mut c = NeffCollective {
            graph: g.name.clone(),
            engine,
            at,
            req,
            lowered: None,
            src,
            dst,
            meta,
            forced,
        };
        if c.operand_problem(g).is_none() && c.req.op != CollectiveOp::AllToAllV {
            c.lowered = Some(collective::prepare_with(&c.req, world, forced)?);
        }
        Ok(c)
    }

    /// Why this collective's operands cannot be executed by the software device, if so.
    fn operand_problem(&self, g: &Graph) -> Option<String> {
        let r = &self.req;
        let metadata = r.a2av.as_ref().and_then(|m| m.metadata.as_ref());
        for o in [
            &r.operands.src0,
            &r.operands.src1,
            &r.operands.dst,
            &metadata.cloned(),
        ]
        .into_iter()
        .flatten()
        {
            if o.shape
                .is_some_and(|s| !contiguous(s.step_elem, s.num_elem))
            {
                return Some("a strided 2-D operand".into());
            }
        }
        if r.op == CollectiveOp::AllToAllV && self.meta.is_none() {
            return Some("the all-to-all-v word names no metadata tensor".into());
        }
        let bindings = self
            .src
            .iter()
            .map(|(b, _)| b)
            .chain(self.dst.as_ref())
            .chain(self.meta.as_ref());
        for b in bindings {
            let Some(v) = g.var(b.var) else {
                return Some(format!("var {} is not defined", b.var));
            };
            if !matches!(v.kind, VarKind::Input | VarKind::Output | VarKind::TmpBuf) {
                return Some(format!(
                    "operand var {:?} is of type {} (operands must be input, output or tmp-buf \
                     vars)",
                    v.name,
                    v.kind.name()
                ));
            }
        }
        if r.op != CollectiveOp::Barrier && (self.src.is_empty() || self.dst.is_none()) {
            return Some("the word names no input or no output operand".into());
        }
        None
    }

    fn why_not_executable(&self, m: &Model) -> Option<Error> {
        let g = &m.neff.graphs[0];
        self.operand_problem(g).map(|why| {
            Error::failure(format!(
                "the software device cannot execute graph {} engine {} slot {} (byte {:#x}): \
                 {why} (docs/neff.md §1.3)",
                self.graph,
                self.engine.name(),
                self.at / 64,
                self.at
            ))
            .with_field(format!("{}/{}", self.graph, self.engine.name()))
            .with_step((self.at / 64) as u64)
        })
    }
}

/// The byte ranges of this rank's output the collective writes, when not all of it: an
/// all-to-all-v's receive windows; nothing for a permute rank that is no pair's target. The
/// rest keeps what the tensor held, as the device's DMA leaves it (docs/neff.md §1.3).
fn written_windows(req: &CollectiveRequest) -> Option<Vec<(u64, u64)>> {
    match req.op {
        CollectiveOp::AllToAllV => a2av::windows(req),
        CollectiveOp::Permute if !req.pairs.iter().any(|p| p.1 == req.rank) => Some(Vec::new()),
        _ => None,
    }
}

/// A 2-D walk that is one contiguous run: inner stride 1 and outer stride the inner length
/// (or a single row).
fn contiguous(step: [i32; 2], num: [u32; 2]) -> bool {
    (step[0] == 1 || num[0] <= 1) && (num[1] <= 1 || i64::from(step[1]) == i64::from(num[0]))
}

#[cfg(test)]
mod tests;

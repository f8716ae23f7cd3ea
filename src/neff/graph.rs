//! A whole NEFF, parsed: the header, the KELF descriptor, and every graph's `def.json`, vars,
//! replica groups and engine programs (docs/contract/abi.md §7.2–§7.3; what the public format
//! leaves open is decided in docs/neff.md §1).
//!
//! Every refusal is `NRT_INVALID` (or the header's own statuses) with a message naming the
//! member, where in it (a JSON line and column, a byte offset, a key) and the rule it broke; the
//! error's `field` is the member (for an engine program the decoder's field, with the word's
//! byte offset as the step, and the member in the message). Nothing is allocated from a size the file states before the
//! size is checked: the payload reader bounds every member, and the counts here are bounded
//! before anything is built from them.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::{NeffHeader, Payload};
use crate::error::{Error, Result};
use crate::isa::stream::{decode_stream, DecodedStream};

/// What the loader checks beyond the format itself.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ParseOptions {
    /// Check the header's payload hash (`NEURON_RT_VALIDATE_HASH`; off by default, as the
    /// vendor's: the real NEFF in testdata carries a hash that is not its payload's MD5).
    pub validate_hash: bool,
}

/// The largest var size accepted: 2^48 bytes (far above any device, far below overflow).
pub const MAX_VAR_BYTES: u64 = 1 << 48;
/// Graphs per KELF (one per physical core of a logical core; generous).
pub const MAX_GRAPHS: usize = 64;
/// Vars per graph (var ids are u16 on the 0xD9/0xDA operands).
pub const MAX_VARS: usize = 1 << 16;
/// Replica groups per NEFF (the vendor's 2.34 limit, docs/contract/abi.md §5.9).
pub const MAX_REPLICA_GROUPS: usize = 16;
/// Largest global device id in a replica group or a pair.
pub const MAX_DEVICE_ID: u64 = 1 << 20;

/// The kind of a `def.json` var (its `type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum VarKind {
    /// `state-buffer`: the on-chip SBUF.
    StateBuffer,
    /// `input`: bound from the input tensor set by name.
    Input,
    /// `output`: bound from the output tensor set by name.
    Output,
    /// `file`: a constant the NEFF carries.
    File,
    /// `tmp-buf`: device scratch the runtime allocates per model.
    TmpBuf,
    /// `virtual`.
    Virtual,
    /// `pointer`.
    Pointer,
    /// `dge-table`: a descriptor-generation table.
    DgeTable,
}

impl VarKind {
    /// Every kind, with its `def.json` spelling.
    pub const ALL: [(VarKind, &'static str); 8] = [
        (VarKind::StateBuffer, "state-buffer"),
        (VarKind::Input, "input"),
        (VarKind::Output, "output"),
        (VarKind::File, "file"),
        (VarKind::TmpBuf, "tmp-buf"),
        (VarKind::Virtual, "virtual"),
        (VarKind::Pointer, "pointer"),
        (VarKind::DgeTable, "dge-table"),
    ];

    /// The `def.json` spelling.
    pub fn name(self) -> &'static str {
        VarKind::ALL
            .iter()
            .find(|(k, _)| *k == self)
            .map_or("?", |(_, n)| n)
    }

    /// The kind a `def.json` spelling names.
    pub fn parse(s: &str) -> Option<VarKind> {
        VarKind::ALL.iter().find(|(_, n)| *n == s).map(|(k, _)| *k)
    }

    /// Kinds whose `size` the runtime must know (it binds or allocates them).
    fn needs_size(self) -> bool {
        matches!(
            self,
            VarKind::Input | VarKind::Output | VarKind::File | VarKind::TmpBuf
        )
    }
}

/// One `def.json` var.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Var {
    /// Its name (the key in `var`; what tensor sets bind by).
    pub name: String,
    /// Its `type`.
    pub kind: VarKind,
    /// Its id (dense over the graph); the id instruction operands name.
    pub var_id: u32,
    /// Bytes (0 when the kind has none, e.g. the state buffer).
    pub size: u64,
    /// The numpy dtype name `tensor_map.json` gives, if any.
    pub dtype: Option<String>,
    /// The shape `tensor_map.json` gives (`tf_shape`), if any.
    pub shape: Option<Vec<u64>>,
}

/// One `dma_queue` entry (kept for `opennrt neff info`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DmaQueue {
    /// Its key.
    pub name: String,
    /// `owner` (the engine that drives it, or `COLLECTIVES`).
    pub owner: String,
    /// `type`.
    pub kind: String,
    /// `num_queues`.
    pub num_queues: u32,
}

/// One `src_target_pairs` entry (docs/neff.md §1.2 spelling).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PairSet {
    /// The replica group the pairs belong to.
    pub group_id: u16,
    /// (source, target) as global device ids.
    pub pairs: Vec<(u32, u32)>,
}

/// An engine of a graph, in the index order of docs/contract/abi.md §7.2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Engine {
    /// 0: the tensor engine.
    Pe,
    /// 1: the activation engine.
    Act,
    /// 2: the pool engine.
    Pool,
    /// 3: the vector engine.
    Dve,
    /// 4: the SP (sync/queue) engine.
    Sp,
}

impl Engine {
    /// Every engine, in index order.
    pub const ALL: [Engine; 5] = [
        Engine::Pe,
        Engine::Act,
        Engine::Pool,
        Engine::Dve,
        Engine::Sp,
    ];

    /// The `def.json` key prefix (`pe`, `act`, …).
    pub fn name(self) -> &'static str {
        match self {
            Engine::Pe => "pe",
            Engine::Act => "act",
            Engine::Pool => "pool",
            Engine::Dve => "dve",
            Engine::Sp => "sp",
        }
    }

    /// Its index (0–4).
    pub fn index(self) -> usize {
        self as usize
    }
}

/// One engine's program, decoded word by word.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineProgram {
    /// The engine.
    pub engine: Engine,
    /// The payload member holding it.
    pub member: String,
    /// The words.
    pub stream: DecodedStream,
}

impl EngineProgram {
    /// Opcode → number of words with it (a 0xD9+0xDA pair counts once, as 0xD9).
    pub fn census(&self) -> BTreeMap<u8, u32> {
        let mut m = BTreeMap::new();
        for w in &self.stream.words {
            *m.entry(w.instr.opcode()).or_insert(0) += 1;
        }
        m
    }
}

/// One graph (subgraph) of the KELF: one physical core's program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Graph {
    /// Its name in the KELF (`sg00`).
    pub name: String,
    /// The `def.json` member.
    pub def_member: String,
    /// The vars, in `var_id` order.
    pub vars: Vec<Var>,
    /// The DMA queue sets.
    pub dma_queues: Vec<DmaQueue>,
    /// group_id → sub-groups → global device ids.
    pub replica_groups: Vec<Vec<Vec<u32>>>,
    /// Permute pairs per group.
    pub src_target_pairs: Vec<PairSet>,
    /// Collective streams.
    pub num_streams: u32,
    /// The world the NEFF was compiled for (0 = not stated).
    pub rank_world_size: u32,
    /// `opennrt_algorithm` (an OpenNRT extension, docs/neff.md §1.2).
    pub algorithm: Option<String>,
    /// The engine programs present, in engine order.
    pub programs: Vec<EngineProgram>,
}

impl Graph {
    /// The var with id `id`.
    pub fn var(&self, id: u32) -> Option<&Var> {
        self.vars.get(id as usize).filter(|v| v.var_id == id)
    }
}

/// A parsed NEFF.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Neff {
    /// The header.
    pub header: NeffHeader,
    /// The KELF descriptor's member name.
    pub kelf: String,
    /// The KELF `target` (`cayman` = trn2 in the real NEFF).
    pub target: String,
    /// The graphs, in KELF order.
    pub graphs: Vec<Graph>,
}

/// The refusal of `member`: `NRT_INVALID` naming it, where, and the rule.
fn bad(member: &str, at: impl std::fmt::Display, why: impl std::fmt::Display) -> Error {
    Error::invalid(format!(
        "NEFF member {member}: {at}: {why} (docs/neff.md §1)"
    ))
    .with_field(member)
}

fn json(payload: &Payload, member: &str, named_by: &str) -> Result<Value> {
    let bytes = payload.get(member).ok_or_else(|| {
        bad(
            member,
            "missing",
            format_args!("{named_by} names it, but the payload has no such member"),
        )
    })?;
    serde_json::from_slice(bytes).map_err(|e| {
        bad(
            member,
            format_args!("line {} column {}", e.line(), e.column()),
            format_args!("not valid JSON: {e}"),
        )
    })
}

fn object<'a>(v: &'a Value, member: &str, key: &str) -> Result<&'a Map<String, Value>> {
    v.as_object()
        .ok_or_else(|| bad(member, key, "must be a JSON object"))
}

fn string<'a>(v: &'a Value, member: &str, key: &str) -> Result<&'a str> {
    v.as_str()
        .ok_or_else(|| bad(member, key, "must be a string"))
}

fn uint(v: &Value, member: &str, key: &str, max: u64) -> Result<u64> {
    match v.as_u64() {
        Some(n) if n <= max => Ok(n),
        Some(n) => {
            Err(bad(member, key, format_args!("{n} is above the limit {max}")).with_actual(n))
        }
        None => Err(bad(
            member,
            key,
            format_args!("must be an unsigned integer, not {v}"),
        )),
    }
}

fn array<'a>(v: &'a Value, member: &str, key: &str, max: usize) -> Result<&'a Vec<Value>> {
    let a = v
        .as_array()
        .ok_or_else(|| bad(member, key, "must be an array"))?;
    if a.len() > max {
        return Err(bad(
            member,
            key,
            format_args!("{} entries, above the limit {max}", a.len()),
        ));
    }
    Ok(a)
}

/// The directory part of a member name, with its trailing `/` (empty at the top).
fn dir_of(member: &str) -> &str {
    member.rfind('/').map_or("", |i| &member[..=i])
}

/// The KELF descriptor's name: from `neff.json`'s `__kelf` node, else the known names.
fn kelf_member(payload: &Payload) -> Result<String> {
    if payload.get("neff.json").is_some() {
        let v = json(payload, "neff.json", "the container")?;
        let nodes = v.get("nodes").and_then(Value::as_array);
        for (i, n) in nodes.into_iter().flatten().enumerate() {
            let attrs = n.get("attrs");
            if attrs
                .and_then(|a| a.get("func_name"))
                .and_then(Value::as_str)
                == Some("__kelf")
            {
                let k = attrs.and_then(|a| a.get("kelf")).ok_or_else(|| {
                    bad(
                        "neff.json",
                        format_args!("nodes[{i}]"),
                        "the __kelf node has no attrs.kelf",
                    )
                })?;
                return Ok(string(k, "neff.json", "attrs.kelf")?.to_string());
            }
        }
    }
    for name in ["kelf-a.json", "kelf-0.json", "kelp.json"] {
        if payload.get(name).is_some() {
            return Ok(name.to_string());
        }
    }
    Err(bad(
        "neff.json",
        "nodes",
        "no __kelf node, and none of kelf-a.json, kelf-0.json, kelp.json is in the payload",
    ))
}

impl Neff {
    /// Parse and check the NEFF `file`.
    ///
    /// # Errors
    /// The header's statuses (`NRT_INVALID`, `NRT_UNSUPPORTED_NEFF_VERSION`); `NRT_INVALID`
    /// for a bad hash (when checked), a damaged payload, a missing or malformed member, or an
    /// engine program the decoder rejects; `NRT_FAIL_HOST_MEM_ALLOC` when a member cannot be
    /// held.
    pub fn parse(file: &[u8], opts: &ParseOptions) -> Result<Neff> {
        let header = NeffHeader::parse(file)?;
        if opts.validate_hash {
            header.check_hash(file)?;
        }
        let payload = Payload::read(&header, file)?;
        let kelf = kelf_member(&payload)?;
        let v = json(&payload, &kelf, "neff.json")?;
        let graphs_v = v
            .get("graphs")
            .ok_or_else(|| bad(&kelf, "graphs", "missing"))?;
        let graphs_v = array(graphs_v, &kelf, "graphs", MAX_GRAPHS)?;
        if graphs_v.is_empty() {
            return Err(bad(&kelf, "graphs", "no graph"));
        }
        let target = match v.get("target") {
            Some(t) => string(t, &kelf, "target")?.to_string(),
            None => String::new(),
        };
        let mut graphs = Vec::with_capacity(graphs_v.len());
        let mut names = BTreeSet::new();
        for (i, g) in graphs_v.iter().enumerate() {
            let at = format!("graphs[{i}]");
            let name = string(
                g.get("name").ok_or_else(|| bad(&kelf, &at, "no name"))?,
                &kelf,
                &at,
            )?;
            let def = string(
                g.get("definition")
                    .ok_or_else(|| bad(&kelf, &at, "no definition"))?,
                &kelf,
                &at,
            )?;
            if !names.insert(name.to_string()) {
                return Err(bad(
                    &kelf,
                    &at,
                    format_args!("graph {name:?} appears twice"),
                ));
            }
            graphs.push(parse_def(&payload, name, def, &kelf)?);
        }
        Ok(Neff {
            header,
            kelf,
            target,
            graphs,
        })
    }

    /// The model's inputs (graph 0's vars of type input, in var_id order).
    pub fn inputs(&self) -> impl Iterator<Item = &Var> {
        self.graphs[0]
            .vars
            .iter()
            .filter(|v| v.kind == VarKind::Input)
    }

    /// The model's outputs.
    pub fn outputs(&self) -> impl Iterator<Item = &Var> {
        self.graphs[0]
            .vars
            .iter()
            .filter(|v| v.kind == VarKind::Output)
    }
}

/// Parse one graph's `def.json` (named `def` by the KELF) and everything it names.
fn parse_def(payload: &Payload, name: &str, def: &str, kelf: &str) -> Result<Graph> {
    let v = json(payload, def, kelf)?;
    let top = object(&v, def, "the top level")?;
    let mut vars = parse_vars(top, def)?;
    if let Some(map) = payload.get(&format!("{}tensor_map.json", dir_of(def))) {
        let tm_member = format!("{}tensor_map.json", dir_of(def));
        let tm: Value = serde_json::from_slice(map).map_err(|e| {
            bad(
                &tm_member,
                format_args!("line {} column {}", e.line(), e.column()),
                format_args!("not valid JSON: {e}"),
            )
        })?;
        for var in &mut vars {
            if let Some(entry) = tm.get(&var.name) {
                var.dtype = entry
                    .get("dtype")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                var.shape = entry
                    .get("tf_shape")
                    .and_then(Value::as_array)
                    .and_then(|a| {
                        (a.len() <= 16)
                            .then(|| a.iter().map(Value::as_u64).collect::<Option<Vec<_>>>())
                            .flatten()
                    });
            }
        }
    }
    let dma_queues = match top.get("dma_queue") {
        None => Vec::new(),
        Some(q) => {
            let q = object(q, def, "dma_queue")?;
            let mut out = Vec::new();
            for (k, e) in q {
                let at = format!("dma_queue.{k}");
                let field = |f: &str| e.get(f).and_then(Value::as_str).unwrap_or("").to_string();
                let num_queues = match e.get("num_queues") {
                    Some(n) => uint(n, def, &format!("{at}.num_queues"), 64)? as u32,
                    None => 0,
                };
                out.push(DmaQueue {
                    name: k.clone(),
                    owner: field("owner"),
                    kind: field("type"),
                    num_queues,
                });
            }
            out
        }
    };
    let replica_groups = match top.get("replica_groups") {
        None => Vec::new(),
        Some(g) => parse_groups(g, def)?,
    };
    let src_target_pairs = match top.get("src_target_pairs") {
        None => Vec::new(),
        Some(p) => parse_pairs(p, def, replica_groups.len())?,
    };
    let streams_v = top
        .get("num_streams")
        .or_else(|| top.get("cc_streams").and_then(|c| c.get("num_streams")));
    let num_streams = match streams_v {
        None => 1,
        Some(n) => uint(n, def, "num_streams", 4)? as u32,
    };
    let rank_world_size = match top.get("#rank_world_size") {
        None => 0,
        Some(n) => uint(n, def, "#rank_world_size", MAX_DEVICE_ID)? as u32,
    };
    let algorithm = match top.get("opennrt_algorithm") {
        None => None,
        Some(a) => Some(string(a, def, "opennrt_algorithm")?.to_string()),
    };
    let mut programs = Vec::new();
    for engine in Engine::ALL {
        let key = format!("{}_instr", engine.name());
        let Some(file) = top.get(&key) else { continue };
        let member = format!("{}{}", dir_of(def), string(file, def, &key)?);
        let bytes = payload.get(&member).ok_or_else(|| {
            bad(
                &member,
                "missing",
                format_args!("{def} {key} names it, but the payload has no such member"),
            )
        })?;
        let stream = decode_stream(bytes).map_err(|e| {
            let at = e.word_at.unwrap_or(0);
            Error::from(e).context(format_args!(
                "NEFF member {member} ({} program of {name}), slot {} at byte {at:#x} \
                 (docs/neff.md §1.3)",
                engine.name(),
                at / 64
            ))
        })?;
        programs.push(EngineProgram {
            engine,
            member,
            stream,
        });
    }
    Ok(Graph {
        name: name.to_string(),
        def_member: def.to_string(),
        vars,
        dma_queues,
        replica_groups,
        src_target_pairs,
        num_streams,
        rank_world_size,
        algorithm,
        programs,
    })
}

/// The `var` object: kinds, dense ids, checked sizes, at least one output.
fn parse_vars(top: &Map<String, Value>, def: &str) -> Result<Vec<Var>> {
    let vars_v = top
        .get("var")
        .ok_or_else(|| bad(def, "var", "missing: a graph needs its vars"))?;
    let vars_v = object(vars_v, def, "var")?;
    if vars_v.len() > MAX_VARS {
        return Err(bad(
            def,
            "var",
            format_args!("{} vars, above the limit {MAX_VARS}", vars_v.len()),
        ));
    }
    let mut by_id: BTreeMap<u32, Var> = BTreeMap::new();
    for (name, e) in vars_v {
        let at = format!("var.{name}");
        let kind_s = string(
            e.get("type").ok_or_else(|| bad(def, &at, "has no type"))?,
            def,
            &format!("{at}.type"),
        )?;
        let kind = VarKind::parse(kind_s).ok_or_else(|| {
            bad(
                def,
                format_args!("{at}.type"),
                format_args!(
                    "unknown var type {kind_s:?} (known: {})",
                    VarKind::ALL.map(|(_, n)| n).join(", ")
                ),
            )
        })?;
        let id = uint(
            e.get("var_id")
                .ok_or_else(|| bad(def, &at, "has no var_id"))?,
            def,
            &format!("{at}.var_id"),
            MAX_VARS as u64 - 1,
        )? as u32;
        let size = match e.get("size") {
            Some(s) => uint(s, def, &format!("{at}.size"), MAX_VAR_BYTES)?,
            None if kind.needs_size() => {
                return Err(bad(
                    def,
                    &at,
                    format_args!("a var of type {} needs a size", kind.name()),
                ))
            }
            None => 0,
        };
        let var = Var {
            name: name.clone(),
            kind,
            var_id: id,
            size,
            dtype: None,
            shape: None,
        };
        if let Some(other) = by_id.insert(id, var) {
            return Err(bad(
                def,
                &at,
                format_args!("var_id {id} is also var {:?}'s", other.name),
            ));
        }
    }
    let n = by_id.len() as u32;
    if let Some((&id, v)) = by_id.iter().find(|(&id, _)| id >= n) {
        return Err(bad(
            def,
            format_args!("var.{}.var_id", v.name),
            format_args!("var_id {id} is out of range: the {n} vars must have ids 0..{n}"),
        )
        .with_actual(id));
    }
    if !by_id.values().any(|v| v.kind == VarKind::Output) {
        return Err(bad(def, "var", "no var of type output (a model needs one)"));
    }
    Ok(by_id.into_values().collect())
}

fn device_id(v: &Value, def: &str, at: &str) -> Result<u32> {
    Ok(uint(v, def, at, MAX_DEVICE_ID - 1)? as u32)
}

/// `replica_groups`: group → sub-groups → ids; no id twice within a group.
fn parse_groups(v: &Value, def: &str) -> Result<Vec<Vec<Vec<u32>>>> {
    let groups = array(v, def, "replica_groups", MAX_REPLICA_GROUPS)?;
    let mut out = Vec::with_capacity(groups.len());
    for (k, g) in groups.iter().enumerate() {
        let at = format!("replica_groups[{k}]");
        let subs = array(g, def, &at, MAX_DEVICE_ID as usize)?;
        let mut seen = BTreeSet::new();
        let mut group = Vec::with_capacity(subs.len().min(1024));
        for (s, sub) in subs.iter().enumerate() {
            let at = format!("{at}[{s}]");
            let ids = array(sub, def, &at, MAX_DEVICE_ID as usize)?;
            if ids.is_empty() {
                return Err(bad(def, &at, "an empty sub-group"));
            }
            let mut list = Vec::with_capacity(ids.len());
            for (j, id) in ids.iter().enumerate() {
                let id = device_id(id, def, &format!("{at}[{j}]"))?;
                if !seen.insert(id) {
                    return Err(bad(
                        def,
                        format_args!("{at}[{j}]"),
                        format_args!("device {id} appears twice in replica group {k}"),
                    ));
                }
                list.push(id);
            }
            group.push(list);
        }
        out.push(group);
    }
    Ok(out)
}

/// `src_target_pairs` in the spelling of docs/neff.md §1.2.
fn parse_pairs(v: &Value, def: &str, groups: usize) -> Result<Vec<PairSet>> {
    let sets = array(v, def, "src_target_pairs", MAX_REPLICA_GROUPS)?;
    let mut out = Vec::with_capacity(sets.len());
    for (k, s) in sets.iter().enumerate() {
        let at = format!("src_target_pairs[{k}]");
        let group_id = uint(
            s.get("group_id")
                .ok_or_else(|| bad(def, &at, "has no group_id"))?,
            def,
            &format!("{at}.group_id"),
            MAX_REPLICA_GROUPS as u64 - 1,
        )? as u16;
        if usize::from(group_id) >= groups {
            return Err(bad(
                def,
                format_args!("{at}.group_id"),
                format_args!("group {group_id} is not one of the {groups} replica groups"),
            ));
        }
        let list = array(
            s.get("pairs")
                .ok_or_else(|| bad(def, &at, "has no pairs"))?,
            def,
            &format!("{at}.pairs"),
            MAX_DEVICE_ID as usize,
        )?;
        let mut pairs = Vec::with_capacity(list.len().min(4096));
        for (j, p) in list.iter().enumerate() {
            let pat = format!("{at}.pairs[{j}]");
            let p = array(p, def, &pat, 2)?;
            if p.len() != 2 {
                return Err(bad(def, &pat, "a pair is [source, target]"));
            }
            pairs.push((device_id(&p[0], def, &pat)?, device_id(&p[1], def, &pat)?));
        }
        out.push(PairSet { group_id, pairs });
    }
    Ok(out)
}

#[cfg(test)]
mod tests;

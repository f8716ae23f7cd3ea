//! The instruction entry path: decoded pseudo-instruction words → [`CollectiveRequest`]
//! (docs/contract/isa.md §3–§9; docs/contract/lowering.md §2.1, §2.11, §4.9–§4.12, §6.3).
//!
//! [`CollectiveRequest::from_instr`] lowers one word (0xC7, 0xC8, the 0xD9+0xDA pair, 0xCB);
//! [`request_stream`](super::stream) lowers whole programs and chains. Every word first goes through [`isa::validate`](validate)
//! with a [`ValidationContext`] filled from the [`InstrContext`]; its [`IsaError`](crate::isa::IsaError) becomes the
//! `Invalid` error (it names the opcode, field, byte offset, value and rule). Then:
//!
//! * the replica group is resolved (group_id → participants; this device's index is the rank);
//! * ctype → op (§2.1), ALU_OP → reduce op (§2.11; copy ops ignore it), dtype passes through;
//! * counts follow docs/contract/isa.md §4: `count` is the per-rank block; the input is
//!   `count × rank_n` for reduce-scatter and all-to-all, the output for all-gather and all-to-all.
//!   0xD9 has no count: each operand's is `num_elem[0] · num_elem[1]`, and the two must agree with
//!   the op;
//! * every operand must fit its tensor / NEFF variable (when the context knows the sizes);
//! * in-place = input and output name the same tensor at the same offset; any other overlap of
//!   the two windows is rejected (the result would depend on the algorithm's order).
//!
//! Choices where the spec is silent:
//! * 0xC7 uses replica group 0 (docs/contract/isa.md §3: it implies a single replica group).
//! * 0xCB `peer_id` is the peer's global device id; the request's group is the pair in
//!   (sender, receiver) order, so a send is rank 0 and the matching receive rank 1 of the same
//!   group. It is a byte copy: dtype UINT8, count = size_bytes.
//! * The 0xDA channel_id is kept only for permutes (§6: "used by permutes").
//! * On v2 the priority class is 0: the encoder reads it only on arch > v2 (§6).

use std::collections::BTreeMap;

use super::check::{byte_window, in_place_or_disjoint, mul, pairs_of, var_operand};

use super::{
    A2avMeta, CcBuf, ChainInfo, CollectiveOp, CollectiveRequest, Operand, Operands, Placement,
    ReduceOp, TensorName, TriggerEvents,
};
use crate::error::{Error, Result};
use crate::isa::enums::{permute_chain_active, CollectiveType, Dtype, InstrChaining};
use crate::isa::instr::other::SendRecv;
use crate::isa::instr::trigger::Collective2;
use crate::isa::instr::{Common, Instr};
use crate::isa::operand::Tensor2d;
use crate::isa::validate::{validate, Arch, Location, ValidationContext};

/// Size and placement of a NEFF tensor or variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TensorInfo {
    /// Size in bytes.
    pub bytes: u64,
    /// HBM or SBUF, when known.
    pub placement: Option<Placement>,
}

/// What the words refer to. A field left `None` means "unknown here": the check that needs it
/// is skipped (as with [`ValidationContext`]); the replica groups and this device are required.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct InstrContext {
    /// group_id → participants as global device ids, in rank order.
    pub groups: BTreeMap<u16, Vec<u32>>,
    /// This rank's global device id.
    pub device_id: u32,
    /// NEFF DRAM tensors by tensor id (0xC7, 0xC8, 0xCB).
    pub tensors: Option<BTreeMap<u32, TensorInfo>>,
    /// NEFF variables by var id (the VAR_ID operands of 0xD9/0xDA).
    pub vars: Option<BTreeMap<u16, TensorInfo>>,
    /// Collective streams of the NEFF (docs/contract/isa.md §9 rule 2).
    pub collective_streams: Option<u32>,
    /// NeuronCore generation.
    pub arch: Option<Arch>,
    /// channel_n of the metaring (docs/contract/isa.md §9 rule 8).
    pub metaring_channel_n: Option<u32>,
    /// Whether MESH is available (docs/contract/isa.md §9 rules 7 and 12).
    pub mesh_available: Option<bool>,
    /// group_id → the module's source → target pairs (rank indices), for explicit permutes.
    pub permute_pairs: BTreeMap<u16, Vec<(u32, u32)>>,
}

impl InstrContext {
    /// A context with the replica groups and this device, everything else unknown.
    pub fn new(device_id: u32, groups: BTreeMap<u16, Vec<u32>>) -> Self {
        InstrContext {
            groups,
            device_id,
            ..Default::default()
        }
    }

    /// The participants of `group_id` and this device's rank in them.
    fn group(&self, group_id: u16) -> Result<(Vec<u32>, u32)> {
        let g = self.groups.get(&group_id).ok_or_else(|| {
            Error::invalid(format!(
                "group_id {group_id} names no replica group (the NEFF defines groups {:?})",
                self.groups.keys().collect::<Vec<_>>()
            ))
        })?;
        if g.is_empty() {
            return Err(Error::invalid(format!("replica group {group_id} is empty")));
        }
        for (i, id) in g.iter().enumerate() {
            if let Some(j) = g[..i].iter().position(|x| x == id) {
                return Err(Error::invalid(format!(
                    "replica group {group_id} lists device {id} twice (ranks {j} and {i})"
                )));
            }
        }
        let rank = g.iter().position(|&d| d == self.device_id).ok_or_else(|| {
            Error::invalid(format!(
                "replica group {group_id} = {g:?} does not contain this rank's device id {}",
                self.device_id
            ))
        })?;
        Ok((g.clone(), rank as u32))
    }

    fn tensor(&self, id: u32) -> Result<Option<TensorInfo>> {
        match &self.tensors {
            None => Ok(None),
            Some(m) => m.get(&id).copied().map(Some).ok_or_else(|| {
                Error::invalid(format!("tensor id {id} names no tensor of the NEFF"))
            }),
        }
    }

    pub(super) fn var(&self, id: u16) -> Result<Option<TensorInfo>> {
        match &self.vars {
            None => Ok(None),
            Some(m) => m.get(&id).copied().map(Some).ok_or_else(|| {
                Error::invalid(format!("var id {id} names no variable of the NEFF"))
            }),
        }
    }

    /// The per-word validation context: the running stream↔group maps of `running` plus what
    /// this word's group and operands establish.
    fn validation(
        &self,
        running: &ValidationContext,
        rank_n: Option<u32>,
        placements: &[Option<Placement>],
    ) -> ValidationContext {
        let location = if placements.contains(&Some(Placement::Sbuf)) {
            Some(Location::Sbuf)
        } else if !placements.is_empty() && placements.iter().all(|p| p.is_some()) {
            Some(Location::Hbm)
        } else {
            None
        };
        ValidationContext {
            collective_streams: self.collective_streams,
            rank_n,
            metaring_channel_n: self.metaring_channel_n,
            mesh_available: self.mesh_available,
            location,
            arch: self.arch,
            stream_to_group: running.stream_to_group.clone(),
            group_to_stream: running.group_to_stream.clone(),
        }
    }
}

fn events_of(c: &Common) -> TriggerEvents {
    let e = c.events;
    TriggerEvents {
        wait_mode: e.wait_mode,
        wait_idx: e.wait_idx,
        semaphore_value: e.semaphore_value,
        update_mode: e.update_mode,
        update_idx: e.update_idx,
    }
}

/// The reduce op of a word: ALU_OP mapped for reducing ops, `None` for copy ops (which ignore
/// the op byte, docs/contract/isa.md §9 rule 6).
fn reduce_of(op: CollectiveOp, alu: crate::isa::enums::AluOp) -> Result<Option<ReduceOp>> {
    if op.is_reducing() {
        ReduceOp::from_alu(alu).map(Some)
    } else {
        Ok(None)
    }
}

/// Lower 0xC7 (as 0xC8 with ctype ALL_REDUCE, group 0) or 0xC8.
#[allow(clippy::too_many_arguments)]
fn lower_c8(
    ctx: &InstrContext,
    running: &ValidationContext,
    instr: &Instr,
    ctype: CollectiveType,
    group_id: u16,
    alu: crate::isa::enums::AluOp,
    dtype: Dtype,
    ids: (u32, u32),
    num_elements: u64,
    offs: (u64, u64),
) -> Result<CollectiveRequest> {
    let group = ctx.groups.get(&group_id);
    let (tin, tout) = (ctx.tensor(ids.0)?, ctx.tensor(ids.1)?);
    let v = ctx.validation(
        running,
        group.map(|g| g.len() as u32),
        &[
            tin.and_then(|t| t.placement),
            tout.and_then(|t| t.placement),
        ],
    );
    validate(instr, &v).map_err(Error::from)?;
    let (group, rank) = ctx.group(group_id)?;
    let op = CollectiveOp::from_ctype(ctype)?;
    let reduce = reduce_of(op, alu)?;
    let n = group.len() as u64;
    let enc = ctype.enc_op();
    let in_count = if enc.input_spans_ranks() {
        mul(num_elements, n, "input count")?
    } else {
        num_elements
    };
    let out_count = if enc.output_spans_ranks() {
        mul(num_elements, n, "output count")?
    } else {
        num_elements
    };
    let esize = dtype.size_bytes().expect("validated dtype") as u64;
    for (what, id, info, off, cnt) in [
        ("input", ids.0, tin, offs.0, in_count),
        ("output", ids.1, tout, offs.1, out_count),
    ] {
        let Some(info) = info else { continue };
        let have = info.bytes / esize;
        if off.checked_add(cnt).is_none_or(|end| end > have) {
            return Err(Error::invalid(format!(
                "{what} tensor {id} has {have} {} elements ({} bytes); the op needs {cnt} from \
                 element offset {off} (num_elements {num_elements}, rank_n {n}, \
                 docs/contract/isa.md §4)",
                dtype.name(),
                info.bytes
            )));
        }
    }
    let in_place = if ids.0 == ids.1 {
        in_place_or_disjoint(
            &format!("tensor {}", ids.0),
            offs.0 == offs.1,
            (offs.0, in_count),
            (offs.1, out_count),
        )?
    } else {
        false
    };
    let mut req = CollectiveRequest::new(op, dtype, reduce, num_elements, group, rank);
    req.in_place = in_place;
    if op == CollectiveOp::Permute {
        req.pairs = pairs_of(ctx, group_id, n)?;
    }
    let operand = |what: &str, id: u32, info: Option<TensorInfo>, off: u64| {
        let offset_bytes = off.checked_mul(esize).ok_or_else(|| {
            Error::invalid(format!(
                "{what} element offset {off} x {esize} bytes overflows u64"
            ))
        })?;
        Ok::<_, Error>(Operand {
            tensor: TensorName::TensorId(id),
            offset_bytes,
            shape: None,
            placement: info.and_then(|t| t.placement),
        })
    };
    req.operands = Operands {
        src0: Some(operand("src", ids.0, tin, offs.0)?),
        src1: None,
        dst: Some(operand("dst", ids.1, tout, offs.1)?),
    };
    req.trigger = instr.common().map(events_of);
    Ok(req)
}

/// Lower a 0xD9+0xDA pair (one logical cc-op).
fn lower_c2(
    ctx: &InstrContext,
    running: &ValidationContext,
    instr: &Instr,
    c: &Collective2,
) -> Result<CollectiveRequest> {
    let (t, e) = (&c.trigger, &c.ext);
    let esize = t.dtype.size_bytes().unwrap_or(1) as u64;
    let group = ctx.groups.get(&e.group_id);
    let a2av = t.ctype == CollectiveType::AllToAllV;
    let uses_src1 = a2av || t.ctype == CollectiveType::PermuteReduceImplicit;
    // Operands first only for their placement (rule 7); errors from them wait until the word
    // itself has passed validation.
    let peek = |tt: &Tensor2d| {
        tt.start
            .var_id()
            .and_then(|v| ctx.vars.as_ref()?.get(&v)?.placement)
    };
    let mut places = vec![peek(&t.src0), peek(&e.dst)];
    if uses_src1 && !a2av {
        places.push(peek(&t.src1));
    }
    let v = ctx.validation(running, group.map(|g| g.len() as u32), &places);
    validate(instr, &v).map_err(Error::from)?;
    let (group, rank) = ctx.group(e.group_id)?;
    let n = group.len() as u64;
    let op = CollectiveOp::from_ctype(t.ctype)?;
    let reduce = reduce_of(op, t.op)?;
    let src0 = var_operand(ctx, &t.src0, "src0", esize)?;
    let dst = var_operand(ctx, &e.dst, "dst", esize)?;
    let (cin, cout) = (t.src0.num_elements(), e.dst.num_elements());
    let mismatch = |need: &str| {
        Err(Error::invalid(format!(
            "{}: src0 has {cin} elements and dst {cout} (num_elem[0]*num_elem[1]); {} needs \
             {need} (rank_n {n}, docs/contract/isa.md §4)",
            t.ctype.name(),
            t.ctype.name()
        )))
    };
    let count = match op {
        CollectiveOp::AllGather if mul(cin, n, "dst count")? != cout => {
            return mismatch("dst = src0 x rank_n")
        }
        CollectiveOp::AllGather => cin,
        CollectiveOp::ReduceScatter if mul(cout, n, "src0 count")? != cin => {
            return mismatch("src0 = dst x rank_n")
        }
        CollectiveOp::ReduceScatter => cout,
        CollectiveOp::AllToAll if cin != cout || cin % n != 0 => {
            return mismatch("src0 = dst, a multiple of rank_n (one block per peer)")
        }
        CollectiveOp::AllToAll => cin / n,
        CollectiveOp::AllToAllV => cout / n,
        _ if cin != cout => return mismatch("src0 = dst"),
        _ => cin,
    };
    let mut req = CollectiveRequest::new(op, t.dtype, reduce, count, group, rank);
    let mut src1 = None;
    if op == CollectiveOp::PermuteReduceImplicit {
        let o = var_operand(ctx, &t.src1, "src1", esize)?;
        if t.src1.num_elements() != cin {
            return Err(Error::invalid(format!(
                "PERMUTE_REDUCE_IMPLICIT: src1 has {} elements but src0 has {cin}; the two \
                 operands of op(src0, src1) must match",
                t.src1.num_elements()
            )));
        }
        src1 = Some(o);
    }
    if a2av {
        let meta = var_operand(ctx, &t.src1, "src1 (A2Av metadata, uint32)", 4)?;
        req.a2av = Some(A2avMeta::from_bitmap(e.src1_bitmap, cin, cout, Some(meta))?);
    }
    if src0.tensor == dst.tensor {
        req.in_place = in_place_or_disjoint(
            &format!("{:?}", src0.tensor),
            src0.offset_bytes == dst.offset_bytes,
            byte_window(&src0, esize),
            byte_window(&dst, esize),
        )?;
    }
    if op == CollectiveOp::Permute {
        req.pairs = pairs_of(ctx, e.group_id, n)?;
    }
    req.operands = Operands {
        src0: Some(src0),
        src1,
        dst: Some(dst),
    };
    req.stream = e.stream_id as u8; // < 4 after rule 8
    req.channel = t.ctype.is_permute().then_some(e.channel_id);
    req.cc_dim = t.cc_dim.as_u8();
    req.priority = if ctx.arch == Some(Arch::V2) {
        0
    } else {
        e.dma_configs.priority_class()
    };
    req.chain = ChainInfo {
        role: e.instr_chaining,
        index: 0,
        len: if e.instr_chaining == InstrChaining::None {
            1
        } else {
            0
        },
        permute_chain: permute_chain_active(e.permute_chain),
        unique_tensors: e.unique_tensors.is_on(),
    };
    if e.cc_buf_start_addr.raw != 0 || e.cc_buf_size != 0 {
        req.cc_buf = Some(CcBuf {
            start_addr: e.cc_buf_start_addr.raw,
            size: e.cc_buf_size,
        });
    }
    req.cross_sb_out = e.cross_sb_out.is_on();
    req.trigger = matches!(e.instr_chaining, InstrChaining::None | InstrChaining::Final)
        .then(|| events_of(&t.common));
    Ok(req)
}

/// Lower a 0xCB (see the module doc for the pair-group choice).
fn lower_cb(
    ctx: &InstrContext,
    running: &ValidationContext,
    instr: &Instr,
    w: &SendRecv,
) -> Result<CollectiveRequest> {
    let info = ctx.tensor(w.tensor_id)?;
    let v = ctx.validation(running, Some(2), &[info.and_then(|t| t.placement)]);
    validate(instr, &v).map_err(Error::from)?;
    let peer = u32::try_from(w.peer_id)
        .ok()
        .filter(|&p| p != ctx.device_id)
        .ok_or_else(|| {
            Error::invalid(format!(
                "peer_id = {} must be another rank's global device id (this device is {})",
                w.peer_id, ctx.device_id
            ))
        })?;
    if let Some(info) = info {
        if w.offset_bytes
            .checked_add(w.size_bytes)
            .is_none_or(|e| e > info.bytes)
        {
            return Err(Error::invalid(format!(
                "{} of {} bytes at offset_bytes {} runs past tensor {} ({} bytes)",
                if w.is_send { "send" } else { "recv" },
                w.size_bytes,
                w.offset_bytes,
                w.tensor_id,
                info.bytes
            )));
        }
    }
    let (op, group, rank) = if w.is_send {
        (CollectiveOp::Send, vec![ctx.device_id, peer], 0)
    } else {
        (CollectiveOp::Recv, vec![peer, ctx.device_id], 1)
    };
    let mut req = CollectiveRequest::new(op, Dtype::Uint8, None, w.size_bytes, group, rank);
    let o = Some(Operand {
        tensor: TensorName::TensorId(w.tensor_id),
        offset_bytes: w.offset_bytes,
        shape: None,
        placement: info.and_then(|t| t.placement),
    });
    if w.is_send {
        req.operands.src0 = o;
    } else {
        req.operands.dst = o;
    }
    req.trigger = Some(events_of(&w.common));
    Ok(req)
}

/// Lower one word against the running validation state; `None` for words that are not
/// collective triggers (they are validated all the same).
pub(super) fn lower_word(
    instr: &Instr,
    ctx: &InstrContext,
    running: &ValidationContext,
) -> Result<Option<CollectiveRequest>> {
    let req = match instr {
        Instr::TriggerAllReduce(w) => lower_c8(
            ctx,
            running,
            instr,
            CollectiveType::AllReduce,
            0,
            w.op,
            w.dtype,
            (w.input_tensor_id, w.output_tensor_id),
            w.num_elements,
            (0, 0),
        )?,
        Instr::TriggerCollective(w) => lower_c8(
            ctx,
            running,
            instr,
            w.ctype,
            w.group_id,
            w.op,
            w.dtype,
            (w.input_tensor_id, w.output_tensor_id),
            w.num_elements,
            (w.src_offset_elems, w.dst_offset_elems),
        )?,
        Instr::Collective2(c) => lower_c2(ctx, running, instr, c)?,
        Instr::SendRecv(w) => lower_cb(ctx, running, instr, w)?,
        other => {
            let v = ctx.validation(running, None, &[]);
            validate(other, &v).map_err(Error::from)?;
            return Ok(None);
        }
    };
    Ok(Some(req))
}

impl CollectiveRequest {
    /// Lower one collective word (0xC7, 0xC8, 0xD9+0xDA, 0xCB) for this rank. Any other word is
    /// an error. A chained 0xD9+0xDA lowered alone gets its role but `chain.len = 0` (unknown);
    /// use [`requests_from_stream`](super::stream::requests_from_stream) for chains.
    pub fn from_instr(instr: &Instr, ctx: &InstrContext) -> Result<CollectiveRequest> {
        let op = instr.opcode();
        lower_word(instr, ctx, &ValidationContext::default())
            .map_err(|e| e.context(format_args!("opcode {op:#04X}")))?
            .ok_or_else(|| {
                Error::invalid(format!(
                    "opcode {op:#04X} is not a collective trigger (0xC7, 0xC8, 0xD9+0xDA, 0xCB)"
                ))
            })
    }
}

#[cfg(test)]
pub(crate) mod testutil;

#[cfg(test)]
mod tests;

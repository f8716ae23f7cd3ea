//! The load-time validation rules of docs/contract/isa.md §9 (reject with `NRT_INVALID` = 2).
//!
//! One function per rule, named after it (`rule_01_update_mode` … `rule_12_supported_operation`),
//! all called by [`validate`] in rule order, so a word that breaks several rules reports the
//! lowest-numbered one. Decoding already rejects codes outside their enum tables (an unlisted
//! dtype is a rule 10 error, an unlisted cc_dim a rule 7 error, a 0xD9 without 0xDA rule 3).
//!
//! [`ValidationContext`] carries what a rule needs beyond the word. A field left `None` means
//! "not decidable here" and the check that needs it is skipped, so a caller never gets a false
//! rejection from missing context; the loader fills in what it knows.

use std::collections::BTreeMap;

use super::enums::{AluOp, CollectiveType, Dtype, EncOpType, UpdateMode};
use super::instr::trigger::{Collective2, Collective2Ext, TriggerCollective};
use super::instr::{Common, Instr, WORD};
use super::isa_error::{rule, IsaError, IsaResult};
use super::layout::{da_field, ExtField, C8_RESERVED};
use super::markers::opcode;
use super::operand::PseudoAddr8;
use super::stream::DecodedStream;

/// NEC_MAX_STREAM_N: stream ids are below 4 (docs/contract/isa.md §9 rule 8 **\[H\]**).
pub const MAX_STREAMS: u16 = 4;
/// NEC_MAX_CHANNELS: ring channel ids are below 32 (docs/contract/isa.md §9 rule 8 **\[H\]**).
pub const MAX_CHANNELS: u16 = 32;
/// `t3d_element_count <= 256` for 0xBF (docs/contract/isa.md §8 **\[H\]**).
pub const SB2SB_MAX_ELEMENTS: u64 = 256;

/// Where a collective's operands live, when the loader knows (NEFF variable kind).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Location {
    /// Device HBM (DRAM).
    Hbm,
    /// State buffer.
    Sbuf,
}

/// NeuronCore generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Arch {
    /// v2 = Sunda / Trn1.
    V2,
    /// v3 = Cayman / Trn2.
    V3,
    /// v4 = Mariana / Trn3.
    V4,
    /// v5 = Maverick (inferred only).
    V5,
}

/// What the rules need beyond the word. `None` = unknown: the dependent check is skipped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ValidationContext {
    /// Rule 2: the number of collective streams of the NEFF.
    pub collective_streams: Option<u32>,
    /// Rules 7 and 9: ranks in the replica group.
    pub rank_n: Option<u32>,
    /// Rule 8: channel_n of the metaring the op runs on.
    pub metaring_channel_n: Option<u32>,
    /// Rules 7 and 12: whether the MESH algorithm is available.
    pub mesh_available: Option<bool>,
    /// Rule 7: where the operands live.
    pub location: Option<Location>,
    /// 0xBF needs nc ≥ v3 (docs/contract/isa.md §8); checked under rule 11.
    pub arch: Option<Arch>,
    /// Rule 8: stream_id → group_id seen so far (filled by [`ValidationContext::observe`]).
    pub stream_to_group: BTreeMap<u16, u16>,
    /// Rule 8: group_id → stream_id seen so far.
    pub group_to_stream: BTreeMap<u16, u16>,
}

impl ValidationContext {
    /// Record what a validated word establishes (the stream ↔ group mapping of rule 8).
    pub fn observe(&mut self, instr: &Instr) {
        let ids = match instr {
            Instr::Collective2(c) => Some((c.ext.stream_id, c.ext.group_id)),
            Instr::CurProcessingRankId(w) => Some((w.stream_id, w.group_id)),
            _ => None,
        };
        if let Some((s, g)) = ids {
            self.stream_to_group.entry(s).or_insert(g);
            self.group_to_stream.entry(g).or_insert(s);
        }
    }
}

/// Validate one word against every rule that applies to it.
pub fn validate(instr: &Instr, ctx: &ValidationContext) -> IsaResult<()> {
    match instr {
        Instr::TriggerAllReduce(w) => {
            let op = opcode::TRIGGER_ALL_REDUCE;
            rule_01_update_mode(op, &w.common)?;
            rule_02_single_stream(op, ctx)?;
            rule_06_reduce_op(op, CollectiveType::AllReduce, w.op)?;
            rule_10_dtype(op, "dtype", 13, w.dtype, true)
        }
        Instr::TriggerCollective(w) => {
            let op = opcode::TRIGGER_COLLECTIVE;
            rule_01_update_mode(op, &w.common)?;
            rule_02_single_stream(op, ctx)?;
            rule_06_reduce_op(op, w.ctype, w.op)?;
            rule_09_all_to_all_v_c8(w)?;
            rule_10_dtype(op, "dtype", 13, w.dtype, w.ctype.is_reducing())?;
            rule_12_supported_operation(op, 32, w.ctype, ctx)?;
            c8_reserved_zero(w)
        }
        Instr::Collective2(c) => {
            let op = opcode::TRIGGER_COLLECTIVE2;
            rule_01_update_mode(op, &c.trigger.common)?;
            rule_03_d9_pairing(&c.encode())?;
            rule_04_address_markers(c)?;
            rule_05_dma_configs(&c.ext)?;
            rule_06_reduce_op(op, c.trigger.ctype, c.trigger.op)?;
            rule_07_cc_dim(c, ctx)?;
            let e = &c.ext;
            rule_08_stream_channel_group(
                opcode::EXTENSION,
                [6, 4, 2],
                e.stream_id,
                e.channel_id,
                e.group_id,
                ctx,
            )?;
            rule_09_all_to_all_v(c, ctx)?;
            rule_10_dtype(
                op,
                "dtype",
                13,
                c.trigger.dtype,
                c.trigger.ctype.is_reducing(),
            )?;
            rule_12_supported_operation(op, 14, c.trigger.ctype, ctx)
        }
        Instr::SendRecv(w) => rule_01_update_mode(opcode::SEND_RECV, &w.common),
        Instr::CurProcessingRankId(w) => rule_08_stream_channel_group(
            opcode::CUR_PROCESSING_RANK_ID,
            [20, 14, 12],
            w.stream_id,
            w.channel_id,
            w.group_id,
            ctx,
        ),
        Instr::Sb2sb(w) => {
            let op = opcode::SB2SB_COLLECTIVE;
            rule_10_dtype(op, "in_dtype", 12, w.in_dtype, false)?;
            rule_10_dtype(op, "out_dtype", 13, w.out_dtype, false)?;
            rule_11_s3d3(w, ctx)
        }
        Instr::DmaExt { .. } | Instr::Other { .. } => Ok(()),
    }
}

/// Validate every word of a decoded stream in order, recording the stream ↔ group mapping as it
/// goes. Errors carry the word's stream offset.
pub fn validate_stream(stream: &DecodedStream, ctx: &mut ValidationContext) -> IsaResult<()> {
    for w in &stream.words {
        validate(&w.instr, ctx).map_err(|e| e.at(w.offset))?;
        ctx.observe(&w.instr);
    }
    Ok(())
}

/// Rule 1: a collective pseudo-op (0xC7, 0xC8, 0xD9, 0xCB) must update with SEM_INC_COMPLETE
/// ("a collective instruction must increment a semaphore when done" **\[H\]**). 0xCB counts: it is
/// lowered into a cc-op like the triggers.
pub fn rule_01_update_mode(op: u8, common: &Common) -> IsaResult<()> {
    let m = common.events.update_mode;
    if m == UpdateMode::SemIncComplete {
        return Ok(());
    }
    Err(IsaError::new(
        op,
        "update_mode",
        6,
        u64::from(m.as_u8()),
        "collective pseudo-ops must use update mode SEM_INC_COMPLETE (0x13)",
        rule::RULE_1,
    ))
}

/// Rule 2: a plain-trigger collective (0xC8, and 0xC7 which lowers like it) is only allowed
/// when the NEFF has a single collective stream **\[H\]**.
pub fn rule_02_single_stream(op: u8, ctx: &ValidationContext) -> IsaResult<()> {
    match ctx.collective_streams {
        Some(n) if n > 1 => Err(IsaError::new(
            op,
            "opcode",
            0,
            u64::from(op),
            format!(
                "a plain-trigger collective is only allowed on a single stream; the NEFF has {n} \
                 collective streams"
            ),
            rule::RULE_2,
        )),
        _ => Ok(()),
    }
}

/// Rule 3: a 0xD9 at the start of `bytes` must be followed at +64 by a 0xDA
/// (docs/contract/isa.md §6 **\[H\]**). Bytes not starting with 0xD9 pass.
pub fn rule_03_d9_pairing(bytes: &[u8]) -> IsaResult<()> {
    if bytes.first() != Some(&opcode::TRIGGER_COLLECTIVE2) {
        return Ok(());
    }
    let err = |value: u64, reason: &str| {
        Err(IsaError::new(
            opcode::TRIGGER_COLLECTIVE2,
            "next_opcode",
            WORD,
            value,
            reason,
            rule::RULE_3,
        ))
    };
    match bytes.get(WORD) {
        Some(&opcode::EXTENSION) if bytes.len() >= 2 * WORD => Ok(()),
        Some(&opcode::EXTENSION) => err(
            bytes.len() as u64,
            "the 0xDA ext after the 0xD9 is cut short (the value is the bytes available)",
        ),
        Some(&v) => err(u64::from(v), "0xD9 must be followed at +64 by its 0xDA ext"),
        None => err(
            bytes.len() as u64,
            "the stream ends after the 0xD9; its 0xDA ext is missing (the value is the bytes available)",
        ),
    }
}

fn marker_error(op: u8, field: &'static str, off: usize, a: PseudoAddr8) -> IsaError {
    IsaError::new(
        op,
        field,
        off,
        u64::from(a.marker()),
        "the operand must be a VAR_ID address: (marker & 0xFC) == 0x10",
        rule::RULE_4,
    )
}

/// src1 is in use: the op reads it (A2Av metadata, a permute-reduce's second operand) or it is
/// not all zero. An all-zero src1 of another op means "absent" and is not marker-checked.
fn src1_used(c: &Collective2) -> bool {
    matches!(
        c.trigger.ctype,
        CollectiveType::AllToAllV
            | CollectiveType::PermuteReduce
            | CollectiveType::PermuteReduceImplicit
    ) || !c.trigger.src1.is_absent()
}

/// Rule 4: src0, src1 (when used) and dst are VAR_ID addresses; cc_buf_start_addr, when set, is
/// an immediate SBUF offset (bit 25 and bits 26–31 clear) **\[H\]**.
pub fn rule_04_address_markers(c: &Collective2) -> IsaResult<()> {
    let d9 = opcode::TRIGGER_COLLECTIVE2;
    if !c.trigger.src0.start.is_var_id() {
        return Err(marker_error(
            d9,
            "src0.start_addr",
            16,
            c.trigger.src0.start,
        ));
    }
    if src1_used(c) && !c.trigger.src1.start.is_var_id() {
        return Err(marker_error(
            d9,
            "src1.start_addr",
            40,
            c.trigger.src1.start,
        ));
    }
    if !c.ext.dst.start.is_var_id() {
        return Err(marker_error(
            opcode::EXTENSION,
            "dst.start_addr",
            8,
            c.ext.dst.start,
        ));
    }
    let a = c.ext.cc_buf_start_addr;
    if a.raw != 0 && !a.is_imm_sbuf() {
        let s = da_field(ExtField::CcBufStartAddr);
        return Err(IsaError::new(
            opcode::EXTENSION,
            s.name,
            s.offset,
            u64::from(a.raw),
            "an SBUF offset must have bit 25 (not-SBUF) and bits 26-31 clear",
            rule::RULE_4,
        ));
    }
    Ok(())
}

/// Rule 5: dma_configs is valid iff `priority_class <= 4 && reserved == 0` **\[H\]**.
pub fn rule_05_dma_configs(ext: &Collective2Ext) -> IsaResult<()> {
    let d = ext.dma_configs;
    if d.priority_class() <= 4 && d.reserved() == 0 {
        return Ok(());
    }
    let s = da_field(ExtField::DmaConfigs);
    Err(IsaError::new(
        opcode::EXTENSION,
        s.name,
        s.offset,
        u64::from(d.raw),
        format!(
            "priority_class (bits 0-2) must be 0..=4 and bits 3-7 reserved 0; got priority {} \
             reserved {:#x}",
            d.priority_class(),
            d.reserved()
        ),
        rule::RULE_5,
    ))
}

/// Rule 6: a reducing op (all-reduce, reduce-scatter, the permute-reduces) needs ADD, MAX or
/// MIN. The vendor mask `(1<<op) & 0x350` also admits MULT, which we reject (docs/design.md §2.9,
/// docs/contract/lowering.md §2.11). Copy ops ignore the op byte.
pub fn rule_06_reduce_op(op: u8, ctype: CollectiveType, alu: AluOp) -> IsaResult<()> {
    if !ctype.is_reducing() || alu.cce_op().is_some() {
        return Ok(());
    }
    let reason = if alu.is_integer() {
        format!(
            "{} is an integer reduction, which is not supported: the compiler converts integer \
             reductions to FP32 (docs/design.md §2.9)",
            alu.name()
        )
    } else if alu == AluOp::Mult {
        "MULT is not supported as a reduce op: the CCE has no product reduce, and the positional \
         ALU->CCE mapping gives FMA, a scaled accumulate that would give wrong numbers \
         (docs/design.md §2.9, docs/contract/lowering.md §2.11); use ADD, MAX or MIN"
            .to_string()
    } else {
        format!(
            "{} is not a reduce op; {} needs ADD, MAX or MIN",
            alu.name(),
            ctype.name()
        )
    };
    Err(IsaError::new(
        op,
        "op",
        12,
        u64::from(alu.as_u8()),
        reason,
        rule::RULE_6,
    ))
}

/// Rule 8: stream_id < 4, channel_id < 32 and < the metaring's channel_n, and stream_id ↔
/// group_id one-to-one across the words seen so far **\[H\]**. `offs` = byte offsets of
/// [stream_id, channel_id, group_id] in the word with opcode `op`.
pub fn rule_08_stream_channel_group(
    op: u8,
    offs: [usize; 3],
    stream_id: u16,
    channel_id: u16,
    group_id: u16,
    ctx: &ValidationContext,
) -> IsaResult<()> {
    let err = |field, off, v: u16, reason: String| {
        Err(IsaError::new(
            op,
            field,
            off,
            u64::from(v),
            reason,
            rule::RULE_8,
        ))
    };
    if stream_id >= MAX_STREAMS {
        return err(
            "stream_id",
            offs[0],
            stream_id,
            format!("stream_id must be < {MAX_STREAMS} (NEC_MAX_STREAM_N)"),
        );
    }
    if channel_id >= MAX_CHANNELS {
        return err(
            "channel_id",
            offs[1],
            channel_id,
            format!("channel_id must be < {MAX_CHANNELS} (NEC_MAX_CHANNELS)"),
        );
    }
    if let Some(n) = ctx.metaring_channel_n {
        if u32::from(channel_id) >= n {
            return err(
                "channel_id",
                offs[1],
                channel_id,
                format!("channel_id must be < the metaring's channel_n {n}"),
            );
        }
    }
    if let Some(&g) = ctx.stream_to_group.get(&stream_id) {
        if g != group_id {
            return err("stream_id", offs[0], stream_id, format!("stream {stream_id} is already mapped to group {g}, not {group_id} (stream <-> group must be one-to-one)"));
        }
    }
    if let Some(&s) = ctx.group_to_stream.get(&group_id) {
        if s != stream_id {
            return err("group_id", offs[2], group_id, format!("group {group_id} is already mapped to stream {s}, not {stream_id} (stream <-> group must be one-to-one)"));
        }
    }
    Ok(())
}

/// Rule 10: a valid dtype (decode rejects codes ≥ 16), never INVALID; a reducing op needs a
/// CCE-reducible dtype (BF16, FP16, FP32, FP8 E3/E4/E5); integer reduce is rejected.
pub fn rule_10_dtype(
    op: u8,
    field: &'static str,
    off: usize,
    d: Dtype,
    reducing: bool,
) -> IsaResult<()> {
    let reason = if d == Dtype::Invalid {
        "dtype INVALID (0) is not a data type".to_string()
    } else if reducing && d.is_integer() {
        format!(
            "{} reduction is not supported: the compiler converts integer reductions to FP32 \
             (docs/design.md §2.9)",
            d.name()
        )
    } else if reducing && !d.is_cce_reducible() {
        format!(
            "{} cannot be reduced: the CCE reduces BF16, FP16, FP32 and FP8 E3/E4/E5 (FP32R is an \
             accumulation type, not an I/O type; docs/design.md §2.9)",
            d.name()
        )
    } else {
        return Ok(());
    };
    Err(IsaError::new(
        op,
        field,
        off,
        u64::from(d.as_u8()),
        reason,
        rule::RULE_10,
    ))
}

/// Why `op` cannot run, or `None`: BROADCAST, REDUCE and explicit PERMUTE_REDUCE have no path in
/// the operation dispatcher ("not supported operation"); ALLTOALL(_V) need mesh (rule 12). For
/// the API path as well as the instruction path.
pub fn enc_op_unsupported(op: EncOpType, mesh_available: Option<bool>) -> Option<String> {
    match op {
        EncOpType::Broadcast
        | EncOpType::Reduce
        | EncOpType::PermuteReduce
        | EncOpType::Invalid => Some(format!(
            "not supported operation: {} has no dispatcher path",
            op.name()
        )),
        EncOpType::AllToAll | EncOpType::AllToAllV if mesh_available == Some(false) => {
            Some(format!(
                "{} requires the MESH algorithm, which is not available",
                op.name()
            ))
        }
        _ => None,
    }
}

/// Rule 12 for a ctype at byte `off` of word `op`.
pub fn rule_12_supported_operation(
    op: u8,
    off: usize,
    ctype: CollectiveType,
    ctx: &ValidationContext,
) -> IsaResult<()> {
    match enc_op_unsupported(ctype.enc_op(), ctx.mesh_available) {
        None => Ok(()),
        Some(reason) => Err(IsaError::new(
            op,
            "ctype",
            off,
            u64::from(ctype.as_u8()),
            reason,
            rule::RULE_12,
        )),
    }
}

/// 0xC8 bytes 33–47 ([`C8_RESERVED`]) must be 0 (docs/contract/isa.md §4 **\[OPEN\]**,
/// docs/contract/lowering.md §7 item 2).
pub fn c8_reserved_zero(w: &TriggerCollective) -> IsaResult<()> {
    match w.reserved.iter().position(|&x| x != 0) {
        None => Ok(()),
        Some(i) => Err(IsaError::new(
            opcode::TRIGGER_COLLECTIVE,
            C8_RESERVED.name,
            C8_RESERVED.offset + i,
            u64::from(w.reserved[i]),
            "undocumented bytes 33-47 of 0xC8 must be 0",
            rule::C8_RESERVED,
        )),
    }
}

mod shape;
pub use shape::{rule_07_cc_dim, rule_09_all_to_all_v, rule_09_all_to_all_v_c8, rule_11_s3d3};

#[cfg(test)]
mod tests;

//! The collective trigger words: 0xC7, 0xC8, 0xD9, the 0xDA collective2 ext, and the
//! 0xD9 + 0xDA pair (docs/contract/isa.md §3–§6).

use super::{enum_at, Common, WORD};
use crate::isa::enums::{AluOp, CcDim, CollectiveType, Dtype, Flag, InstrChaining};
use crate::isa::isa_error::{rule, IsaError, IsaResult};
use crate::isa::layout::{
    da_covers, da_field, rd_u16, rd_u32, rd_u64, read_le, write_le, ExtField, C8_RESERVED,
    DA_TAIL_START,
};
use crate::isa::markers::opcode;
use crate::isa::operand::{Addr4, Tensor2d};

/// 0xC7 PSEUDO_TRIGGER_ALL_REDUCE (docs/contract/isa.md §3 **\[H\]**): the fixed all-reduce
/// form, single replica group. It lowers like 0xC8 with ctype ALL_REDUCE and group 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TriggerAllReduce {
    /// Bytes 1–11.
    pub common: Common,
    /// Byte 12.
    pub op: AluOp,
    /// Byte 13.
    pub dtype: Dtype,
    /// Bytes 14–15 (there is no group_id).
    pub reserved14: [u8; 2],
    /// Byte 16: NEFF DRAM tensor handle.
    pub input_tensor_id: u32,
    /// Byte 20.
    pub output_tensor_id: u32,
    /// Byte 24: per-rank element count.
    pub num_elements: u64,
    /// Bytes 32–63 (reserved **\[M\]**).
    pub reserved32: [u8; 32],
}

impl TriggerAllReduce {
    /// Decode a 0xC7 word.
    pub fn decode(b: &[u8; WORD]) -> IsaResult<Self> {
        let mut reserved32 = [0u8; 32];
        reserved32.copy_from_slice(&b[32..64]);
        Ok(TriggerAllReduce {
            common: Common::read(b)?,
            op: enum_at(b, 12, "op", AluOp::from_u8, rule::ENUMS)?,
            dtype: enum_at(b, 13, "dtype", Dtype::from_u8, rule::RULE_10)?,
            reserved14: [b[14], b[15]],
            input_tensor_id: rd_u32(b, 16),
            output_tensor_id: rd_u32(b, 20),
            num_elements: rd_u64(b, 24),
            reserved32,
        })
    }
    /// Encode.
    pub fn encode(&self) -> [u8; WORD] {
        let mut b = [0u8; WORD];
        self.common.write(opcode::TRIGGER_ALL_REDUCE, &mut b);
        b[12] = self.op.as_u8();
        b[13] = self.dtype.as_u8();
        b[14..16].copy_from_slice(&self.reserved14);
        b[16..20].copy_from_slice(&self.input_tensor_id.to_le_bytes());
        b[20..24].copy_from_slice(&self.output_tensor_id.to_le_bytes());
        b[24..32].copy_from_slice(&self.num_elements.to_le_bytes());
        b[32..64].copy_from_slice(&self.reserved32);
        b
    }
}

/// 0xC8 PSEUDO_TRIGGER_COLLECTIVE (docs/contract/isa.md §4 **\[H\]**).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TriggerCollective {
    /// Bytes 1–11.
    pub common: Common,
    /// Byte 12.
    pub op: AluOp,
    /// Byte 13.
    pub dtype: Dtype,
    /// Byte 14: replica group / communicator.
    pub group_id: u16,
    /// Byte 16: NEFF DRAM tensor handle.
    pub input_tensor_id: u32,
    /// Byte 20.
    pub output_tensor_id: u32,
    /// Byte 24: per-rank block (see [`TriggerCollective::input_count`]).
    pub num_elements: u64,
    /// Byte 32.
    pub ctype: CollectiveType,
    /// Bytes 33–47 ([`C8_RESERVED`]; must be 0, checked by validation).
    pub reserved: [u8; C8_RESERVED.width],
    /// Byte 48: element offset into the input tensor.
    pub src_offset_elems: u64,
    /// Byte 56: element offset into the output tensor.
    pub dst_offset_elems: u64,
}

impl TriggerCollective {
    /// Decode a 0xC8 word.
    pub fn decode(b: &[u8; WORD]) -> IsaResult<Self> {
        let mut reserved = [0u8; C8_RESERVED.width];
        reserved.copy_from_slice(&b[C8_RESERVED.offset..C8_RESERVED.offset + C8_RESERVED.width]);
        Ok(TriggerCollective {
            common: Common::read(b)?,
            op: enum_at(b, 12, "op", AluOp::from_u8, rule::ENUMS)?,
            dtype: enum_at(b, 13, "dtype", Dtype::from_u8, rule::RULE_10)?,
            group_id: rd_u16(b, 14),
            input_tensor_id: rd_u32(b, 16),
            output_tensor_id: rd_u32(b, 20),
            num_elements: rd_u64(b, 24),
            ctype: enum_at(b, 32, "ctype", CollectiveType::from_u8, rule::ENUMS)?,
            reserved,
            src_offset_elems: rd_u64(b, 48),
            dst_offset_elems: rd_u64(b, 56),
        })
    }
    /// Encode.
    pub fn encode(&self) -> [u8; WORD] {
        let mut b = [0u8; WORD];
        self.common.write(opcode::TRIGGER_COLLECTIVE, &mut b);
        b[12] = self.op.as_u8();
        b[13] = self.dtype.as_u8();
        b[14..16].copy_from_slice(&self.group_id.to_le_bytes());
        b[16..20].copy_from_slice(&self.input_tensor_id.to_le_bytes());
        b[20..24].copy_from_slice(&self.output_tensor_id.to_le_bytes());
        b[24..32].copy_from_slice(&self.num_elements.to_le_bytes());
        b[32] = self.ctype.as_u8();
        b[C8_RESERVED.offset..C8_RESERVED.offset + C8_RESERVED.width]
            .copy_from_slice(&self.reserved);
        b[48..56].copy_from_slice(&self.src_offset_elems.to_le_bytes());
        b[56..64].copy_from_slice(&self.dst_offset_elems.to_le_bytes());
        b
    }
    /// Input element count: `num_elements × rank_n` for REDUCE_SCATTER and ALLTOALL, else
    /// `num_elements` (docs/contract/isa.md §4 **\[H\]**, mask 0x90 on the enc op).
    pub fn input_count(&self, rank_n: u64) -> u64 {
        let scale = if self.ctype.enc_op().input_spans_ranks() {
            rank_n
        } else {
            1
        };
        self.num_elements.saturating_mul(scale)
    }
    /// Output element count: `num_elements × rank_n` for ALLGATHER and ALLTOALL (mask 0x81).
    pub fn output_count(&self, rank_n: u64) -> u64 {
        let scale = if self.ctype.enc_op().output_spans_ranks() {
            rank_n
        } else {
            1
        };
        self.num_elements.saturating_mul(scale)
    }
}

/// 0xD9 PSEUDO_TRIGGER_COLLECTIVE2 (docs/contract/isa.md §5 **\[H\]**): no tensor ids, no count;
/// each operand's count is `num_elem[0]·num_elem[1]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TriggerCollective2 {
    /// Bytes 1–11.
    pub common: Common,
    /// Byte 12.
    pub op: AluOp,
    /// Byte 13.
    pub dtype: Dtype,
    /// Byte 14.
    pub ctype: CollectiveType,
    /// Byte 15.
    pub cc_dim: CcDim,
    /// Bytes 16–39.
    pub src0: Tensor2d,
    /// Bytes 40–63: the A2Av metadata tensor or a permute-reduce's second operand; all zero
    /// when absent.
    pub src1: Tensor2d,
}

impl TriggerCollective2 {
    /// Decode a 0xD9 word.
    pub fn decode(b: &[u8; WORD]) -> IsaResult<Self> {
        Ok(TriggerCollective2 {
            common: Common::read(b)?,
            op: enum_at(b, 12, "op", AluOp::from_u8, rule::ENUMS)?,
            dtype: enum_at(b, 13, "dtype", Dtype::from_u8, rule::RULE_10)?,
            ctype: enum_at(b, 14, "ctype", CollectiveType::from_u8, rule::ENUMS)?,
            cc_dim: enum_at(b, 15, "cc_dim", CcDim::from_u8, rule::RULE_7)?,
            src0: Tensor2d::read(b, 16),
            src1: Tensor2d::read(b, 40),
        })
    }
    /// Encode.
    pub fn encode(&self) -> [u8; WORD] {
        let mut b = [0u8; WORD];
        self.common.write(opcode::TRIGGER_COLLECTIVE2, &mut b);
        b[12] = self.op.as_u8();
        b[13] = self.dtype.as_u8();
        b[14] = self.ctype.as_u8();
        b[15] = self.cc_dim.as_u8();
        self.src0.write(&mut b, 16);
        self.src1.write(&mut b, 40);
        b
    }
}

/// `dma_configs` (0xDA, [`ExtField::DmaConfigs`]): priority_class in bits 0–2, reserved in
/// bits 3–7 (docs/contract/isa.md §6 **\[H\]**). Kept as the raw byte; §9 rule 5 checks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct DmaConfigs {
    /// The byte.
    pub raw: u8,
}

impl DmaConfigs {
    /// Bits 0–2 (the encoder reads `byte & 7` on arch > v2).
    pub fn priority_class(self) -> u8 {
        self.raw & 7
    }
    /// Bits 3–7.
    pub fn reserved(self) -> u8 {
        self.raw >> 3
    }
}

/// 0xDA PSEUDO_EXTENSION in its collective2-ext role (docs/contract/isa.md §6). Bytes 0–31 are
/// **\[H\]**; the knobs in bytes 32–63 are placed by the
/// [`DA_EXT_FIELDS`](crate::isa::layout::DA_EXT_FIELDS) table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Collective2Ext {
    /// Byte 1.
    pub instr_chaining: InstrChaining,
    /// Byte 2.
    pub group_id: u16,
    /// Byte 4 (used by permutes).
    pub channel_id: u16,
    /// Byte 6.
    pub stream_id: u16,
    /// Bytes 8–31.
    pub dst: Tensor2d,
    /// Explicit collective scratch in SBUF (table row).
    pub cc_buf_start_addr: Addr4,
    /// Its size (table row).
    pub cc_buf_size: u32,
    /// UNIQUE_TENSORS (table row).
    pub unique_tensors: Flag,
    /// dma_configs (table row).
    pub dma_configs: DmaConfigs,
    /// A2Av src1 row-presence bits (table row).
    pub src1_bitmap: u8,
    /// PERMUTE_CHAIN, raw (0 = not in a chain; see `enums::permute_chain_active`).
    pub permute_chain: u8,
    /// CROSS_SBOUTPUT_TRANSFER (table row).
    pub cross_sb_out: Flag,
    /// Bytes 32–63 as on the wire, with the bytes the table covers zeroed (canonical form:
    /// decode always produces it, and encode writes these first and the table fields on top).
    pub tail_reserved: [u8; 32],
}

impl Collective2Ext {
    /// Decode a 0xDA word as a collective2 ext.
    pub fn decode(b: &[u8; WORD]) -> IsaResult<Self> {
        let knob = |f: ExtField| {
            let s = da_field(f);
            read_le(b, s.offset, s.width)
        };
        let flag = |f: ExtField| -> IsaResult<Flag> {
            let s = da_field(f);
            let v = knob(f);
            u8::try_from(v).ok().and_then(Flag::from_u8).ok_or_else(|| {
                IsaError::new(
                    opcode::EXTENSION,
                    s.name,
                    s.offset,
                    v,
                    format!(
                        "{} is taken as a boolean (0 = off, 1 = on; codes OPEN, \
                             docs/contract/lowering.md §7 item 11); another value suggests its \
                             offset in layout.rs is wrong",
                        s.name
                    ),
                    rule::ENUMS,
                )
            })
        };
        let mut tail_reserved = [0u8; 32];
        for (i, slot) in tail_reserved.iter_mut().enumerate() {
            let off = DA_TAIL_START + i;
            if !da_covers(off) {
                *slot = b[off];
            }
        }
        Ok(Collective2Ext {
            instr_chaining: enum_at(b, 1, "instr_chaining", InstrChaining::from_u8, rule::ENUMS)?,
            group_id: rd_u16(b, 2),
            channel_id: rd_u16(b, 4),
            stream_id: rd_u16(b, 6),
            dst: Tensor2d::read(b, 8),
            cc_buf_start_addr: Addr4 {
                raw: knob(ExtField::CcBufStartAddr) as u32,
            },
            cc_buf_size: knob(ExtField::CcBufSize) as u32,
            unique_tensors: flag(ExtField::UniqueTensors)?,
            dma_configs: DmaConfigs {
                raw: knob(ExtField::DmaConfigs) as u8,
            },
            src1_bitmap: knob(ExtField::Src1Bitmap) as u8,
            permute_chain: knob(ExtField::PermuteChain) as u8,
            cross_sb_out: flag(ExtField::CrossSbOut)?,
            tail_reserved,
        })
    }
    /// Encode.
    pub fn encode(&self) -> [u8; WORD] {
        let mut b = [0u8; WORD];
        b[0] = opcode::EXTENSION;
        b[1] = self.instr_chaining.as_u8();
        b[2..4].copy_from_slice(&self.group_id.to_le_bytes());
        b[4..6].copy_from_slice(&self.channel_id.to_le_bytes());
        b[6..8].copy_from_slice(&self.stream_id.to_le_bytes());
        self.dst.write(&mut b, 8);
        b[DA_TAIL_START..].copy_from_slice(&self.tail_reserved);
        let mut put = |f: ExtField, v: u64| {
            let s = da_field(f);
            write_le(&mut b, s.offset, s.width, v);
        };
        put(
            ExtField::CcBufStartAddr,
            u64::from(self.cc_buf_start_addr.raw),
        );
        put(ExtField::CcBufSize, u64::from(self.cc_buf_size));
        put(
            ExtField::UniqueTensors,
            u64::from(self.unique_tensors.as_u8()),
        );
        put(ExtField::DmaConfigs, u64::from(self.dma_configs.raw));
        put(ExtField::Src1Bitmap, u64::from(self.src1_bitmap));
        put(ExtField::PermuteChain, u64::from(self.permute_chain));
        put(ExtField::CrossSbOut, u64::from(self.cross_sb_out.as_u8()));
        b
    }
}

/// The 0xD9 + 0xDA pair: one logical cc-op of 128 bytes (docs/contract/isa.md §6 **\[H\]**).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Collective2 {
    /// The 0xD9 word (bytes 0–63).
    pub trigger: TriggerCollective2,
    /// The 0xDA word (bytes 64–127).
    pub ext: Collective2Ext,
}

impl Collective2 {
    /// Decode the pair. The caller has checked byte 64 is 0xDA (docs/contract/isa.md §9 rule 3);
    /// this only reads.
    pub fn decode(b: &[u8; 2 * WORD]) -> IsaResult<Self> {
        let mut w0 = [0u8; WORD];
        let mut w1 = [0u8; WORD];
        w0.copy_from_slice(&b[..WORD]);
        w1.copy_from_slice(&b[WORD..]);
        Ok(Collective2 {
            trigger: TriggerCollective2::decode(&w0)?,
            ext: Collective2Ext::decode(&w1)?,
        })
    }
    /// Encode the 128 bytes.
    pub fn encode(&self) -> [u8; 2 * WORD] {
        let mut b = [0u8; 2 * WORD];
        b[..WORD].copy_from_slice(&self.trigger.encode());
        b[WORD..].copy_from_slice(&self.ext.encode());
        b
    }
}

#[cfg(test)]
mod tests;

//! The other words the lowering reads or emits (docs/contract/isa.md §8): 0xCB PSEUDO_SEND_RECV,
//! 0xDB PSEUDO_CUR_PROCESSING_RANK_ID and the real 0xBF SB2SB_COLLECTIVE (S3D3).
//!
//! Where a compiler-side page disagrees with the ISA header (0xCB), the ISA layout is used
//! (docs/contract/isa.md §8, docs/contract/lowering.md §7 item 10).

use super::{enum_at, Common, WORD};
use crate::isa::enums::{Dtype, EncOpType};
use crate::isa::isa_error::{rule, IsaError, IsaResult};
use crate::isa::layout::{rd_u16, rd_u32, rd_u64};
use crate::isa::markers::{opcode, LncSizeFmt};
use crate::isa::operand::Tensor3d;

/// 0xCB PSEUDO_SEND_RECV, ISA view (docs/contract/isa.md §8 **\[H\]**). The width of `tensor_id`
/// is not stated; it is read as u32 (bytes 12–15), the only width that fits before `peer_id`@16
/// and matches the u32 tensor ids of 0xC7/0xC8.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SendRecv {
    /// Bytes 1–11.
    pub common: Common,
    /// Byte 12.
    pub tensor_id: u32,
    /// Byte 16.
    pub peer_id: u64,
    /// Byte 24: 1 = ENC_SEND, 0 = ENC_RECV (any other value is rejected at decode).
    pub is_send: bool,
    /// Bytes 25–47.
    pub reserved25: [u8; 23],
    /// Byte 48.
    pub offset_bytes: u64,
    /// Byte 56.
    pub size_bytes: u64,
}

impl SendRecv {
    /// Decode a 0xCB word.
    pub fn decode(b: &[u8; WORD]) -> IsaResult<Self> {
        let is_send = match b[24] {
            0 => false,
            1 => true,
            v => {
                return Err(IsaError::new(
                    opcode::SEND_RECV,
                    "is_send",
                    24,
                    u64::from(v),
                    "is_send must be 1 (send) or 0 (recv)",
                    rule::ENUMS,
                ))
            }
        };
        let mut reserved25 = [0u8; 23];
        reserved25.copy_from_slice(&b[25..48]);
        Ok(SendRecv {
            common: Common::read(b)?,
            tensor_id: rd_u32(b, 12),
            peer_id: rd_u64(b, 16),
            is_send,
            reserved25,
            offset_bytes: rd_u64(b, 48),
            size_bytes: rd_u64(b, 56),
        })
    }
    /// Encode.
    pub fn encode(&self) -> [u8; WORD] {
        let mut b = [0u8; WORD];
        self.common.write(opcode::SEND_RECV, &mut b);
        b[12..16].copy_from_slice(&self.tensor_id.to_le_bytes());
        b[16..24].copy_from_slice(&self.peer_id.to_le_bytes());
        b[24] = u8::from(self.is_send);
        b[25..48].copy_from_slice(&self.reserved25);
        b[48..56].copy_from_slice(&self.offset_bytes.to_le_bytes());
        b[56..64].copy_from_slice(&self.size_bytes.to_le_bytes());
        b
    }
    /// ENC_SEND or ENC_RECV (docs/contract/lowering.md §2.1).
    pub fn enc_op(&self) -> EncOpType {
        if self.is_send {
            EncOpType::Send
        } else {
            EncOpType::Recv
        }
    }
}

/// 0xDB PSEUDO_CUR_PROCESSING_RANK_ID (docs/contract/isa.md §8: offsets **\[H\]**, u16 widths
/// **\[M\]**): writes into `dst_reg` the rank whose data is processed at `iteration_id` of a
/// permute chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CurProcessingRankId {
    /// Bytes 1–11.
    pub common: Common,
    /// Byte 12.
    pub group_id: u16,
    /// Byte 14.
    pub channel_id: u16,
    /// Byte 16.
    pub iteration_id: u16,
    /// Byte 18.
    pub dst_reg: u16,
    /// Byte 20.
    pub stream_id: u16,
    /// Bytes 22–63.
    pub reserved22: [u8; 42],
}

impl CurProcessingRankId {
    /// Decode a 0xDB word.
    pub fn decode(b: &[u8; WORD]) -> IsaResult<Self> {
        let mut reserved22 = [0u8; 42];
        reserved22.copy_from_slice(&b[22..64]);
        Ok(CurProcessingRankId {
            common: Common::read(b)?,
            group_id: rd_u16(b, 12),
            channel_id: rd_u16(b, 14),
            iteration_id: rd_u16(b, 16),
            dst_reg: rd_u16(b, 18),
            stream_id: rd_u16(b, 20),
            reserved22,
        })
    }
    /// Encode.
    pub fn encode(&self) -> [u8; WORD] {
        let mut b = [0u8; WORD];
        self.common.write(opcode::CUR_PROCESSING_RANK_ID, &mut b);
        for (k, v) in [
            self.group_id,
            self.channel_id,
            self.iteration_id,
            self.dst_reg,
            self.stream_id,
        ]
        .into_iter()
        .enumerate()
        {
            b[12 + 2 * k..14 + 2 * k].copy_from_slice(&v.to_le_bytes());
        }
        b[22..64].copy_from_slice(&self.reserved22);
        b
    }
}

/// Bytes 34–47 of 0xBF: reserved1, must be 0.
pub const SB2SB_RESERVED1: std::ops::Range<usize> = 34..48;

/// 0xBF S3D3 / SB2SB_COLLECTIVE (docs/contract/isa.md §8 **\[H\]**): one
/// state-buffer-to-state-buffer hop, the on-chip leg; nc ≥ v3 only. No reduce-op field. §9 rule 11
/// constrains it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Sb2sbCollective {
    /// Bytes 1–11 (waits on the inbound semaphore, updates on completion).
    pub common: Common,
    /// Byte 12.
    pub in_dtype: Dtype,
    /// Byte 13 (must equal `in_dtype`).
    pub out_dtype: Dtype,
    /// Bytes 14–15.
    pub reserved0: [u8; 2],
    /// Bytes 16–31.
    pub src: Tensor3d,
    /// Byte 32.
    pub lnc_size_fmt: LncSizeFmt,
    /// Byte 33: 1..128.
    pub num_active_channels: u8,
    /// Bytes 34–47 (must be 0).
    pub reserved1: [u8; 14],
    /// Bytes 48–63.
    pub dst: Tensor3d,
}

impl Sb2sbCollective {
    /// Decode a 0xBF word.
    pub fn decode(b: &[u8; WORD]) -> IsaResult<Self> {
        let mut reserved1 = [0u8; 14];
        reserved1.copy_from_slice(&b[SB2SB_RESERVED1]);
        Ok(Sb2sbCollective {
            common: Common::read(b)?,
            in_dtype: enum_at(b, 12, "in_dtype", Dtype::from_u8, rule::RULE_10)?,
            out_dtype: enum_at(b, 13, "out_dtype", Dtype::from_u8, rule::RULE_10)?,
            reserved0: [b[14], b[15]],
            src: Tensor3d::read(b, 16),
            lnc_size_fmt: enum_at(b, 32, "lnc_size_fmt", LncSizeFmt::from_u8, rule::RULE_11)?,
            num_active_channels: b[33],
            reserved1,
            dst: Tensor3d::read(b, 48),
        })
    }
    /// Encode.
    pub fn encode(&self) -> [u8; WORD] {
        let mut b = [0u8; WORD];
        self.common.write(opcode::SB2SB_COLLECTIVE, &mut b);
        b[12] = self.in_dtype.as_u8();
        b[13] = self.out_dtype.as_u8();
        b[14..16].copy_from_slice(&self.reserved0);
        self.src.write(&mut b, 16);
        b[32] = self.lnc_size_fmt.as_u8();
        b[33] = self.num_active_channels;
        b[SB2SB_RESERVED1].copy_from_slice(&self.reserved1);
        self.dst.write(&mut b, 48);
        b
    }
}

#[cfg(test)]
mod tests;

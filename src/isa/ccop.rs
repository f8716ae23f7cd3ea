//! The 8-byte `spad_ctrl_entry`: one cc_op slot of the TOP_SP CTRL scratchpad table.
//!
//! Layout (seed `003_85c867ca45640e23.txt`, digested in docs/contract/isa.md §11.1–§11.3;
//! docs/contract/carrier.md §3.5; docs/contract/lowering.md §6.1):
//!
//! | slot byte | bits | field |
//! |---|---|---|
//! | 0 | 0 | `header.cc_op` (the slot carries a collective op; the packer always sets 1) |
//! | 0 | 1–7 | header reserved |
//! | 1 | 0–3 | `algo_type` |
//! | 1 | 4–6 | `algo_sub_type` |
//! | 1 | 7 | `trigger_next` |
//! | 2 | 0..4 | `reporter`, `ring_wait_complete`, `ring_send_complete`, `safe_mode`, `unique_tensors` |
//! | 2 | 5–7 | reserved (the packer keeps the old bits) |
//! | 3 | | padding (the packer never stores it) |
//! | 4–7 | | union: ring `channel_list` u32, or mesh `sema_shift_offset` u16 @4 + `sema_mask` u16 @6 |
//!
//! The `cc_op_entry` proper starts at slot byte 1: a consumer offset `cc_op + N` is slot byte
//! `N + 1` (seed 003, docs/contract/isa.md §11.6: "the +1 header base"). Everything here is
//! measured from the slot.
//!
//! What `algo_type` carries is a contested fact (docs/contract/lowering.md §6.1, §7 item 3;
//! docs/design.md §2.5). We follow seed 003 (docs/contract/isa.md §11.4): the device pattern
//! `enc_pattern_t` (RING 0 / MESH 1). The choice lives in exactly one place,
//! [`ALGO_TYPE_CARRIES`], so it can be flipped if real dumps show the other reading.

use crate::error::{Error, Result};

/// Size of one slot in bytes.
pub const SPAD_CTRL_ENTRY_SIZE: usize = 8;

/// Bytes of the CTRL scratchpad on cayman: at most 512 slots (docs/contract/carrier.md §3.5,
/// Appendix A).
pub const CTRL_SPAD_BYTES: usize = 0x1000;

/// Marker stored in a continuation slot (`SPAD_SLOT_CONTINUE_MARK`, docs/contract/isa.md §11.5).
pub const SPAD_SLOT_CONTINUE_MARK: u64 = 0xFFFE_FFFE_0000_0000;

/// The device algorithm family (`enc_pattern_t`, docs/contract/isa.md §11.4): selects which union
/// view the TOP_SP reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum DevicePattern {
    /// `ENC_PATTERN_RING` = 0: the union is a `channel_list` bitmap.
    Ring = 0,
    /// `ENC_PATTERN_MESH` = 1: the union is `{sema_shift_offset, sema_mask}`.
    Mesh = 1,
}

/// Which enumeration the 4-bit `algo_type` field carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlgoTypeEncoding {
    /// Seed 003: `enc_pattern_t` (RING 0 / MESH 1).
    DevicePattern,
    /// Seeds 000–002: the low nibble of the host `enc_alg_type`.
    HostAlgorithm,
}

/// The one switch for the `algo_type` contradiction (docs/design.md §2.5). The lowering writes and
/// the device reads `algo_type` according to this constant.
pub const ALGO_TYPE_CARRIES: AlgoTypeEncoding = AlgoTypeEncoding::DevicePattern;

/// Mesh flavours written into `algo_sub_type` for mesh ops (docs/contract/carrier.md Appendix A).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum MeshSubType {
    /// FULL = 0.
    Full = 0,
    /// GROUPED = 1.
    Grouped = 1,
    /// TRN2 = 2.
    Trn2 = 2,
    /// SWITCH = 3.
    Switch = 3,
}

/// Every field of one slot, decoded losslessly (reserved bits included), so that
/// `SpadCtrlEntry::unpack(b).pack() == b` for every 8-byte `b`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SpadCtrlEntry {
    /// Header bit 0: the slot carries a collective op.
    pub cc_op: bool,
    /// Header bits 1–7 (reserved), as a 7-bit value.
    pub header_reserved: u8,
    /// 4-bit algorithm family (see [`ALGO_TYPE_CARRIES`]).
    pub algo_type: u8,
    /// 3-bit sub-variant (mesh flavour for mesh ops).
    pub algo_sub_type: u8,
    /// Chain into the next entry.
    pub trigger_next: bool,
    /// This TOP_SP posts the completion.
    pub reporter: bool,
    /// Ring: wait for the receive side to complete.
    pub ring_wait_complete: bool,
    /// Ring: wait for the send side to complete.
    pub ring_send_complete: bool,
    /// From the context's permute-chain flag; a real wire bit that ctx_log does not dump.
    pub safe_mode: bool,
    /// The ops of a chain use distinct tensors; not dumped by ctx_log.
    pub unique_tensors: bool,
    /// Flag byte bits 5–7 (reserved), as a 3-bit value.
    pub flags_reserved: u8,
    /// Slot byte 3 (padding).
    pub pad: u8,
    /// Slot bytes 4–7, little-endian: the ring/mesh union.
    pub union_word: u32,
}

/// The fields the lowering chooses for one cc_op (what the vendor packer
/// `create_spad_ctrl_entry` takes); everything else in the slot is preserved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CcOpFields {
    /// 4-bit `algo_type`.
    pub algo_type: u8,
    /// 3-bit `algo_sub_type`.
    pub algo_sub_type: u8,
    /// Chain into the next entry.
    pub trigger_next: bool,
    /// This TOP_SP posts the completion.
    pub reporter: bool,
    /// `ring_wait_complete`.
    pub ring_wait_complete: bool,
    /// `ring_send_complete`.
    pub ring_send_complete: bool,
    /// `safe_mode`.
    pub safe_mode: bool,
    /// `unique_tensors`.
    pub unique_tensors: bool,
    /// The union operands.
    pub operands: CcOpOperands,
}

/// The two views of the 4-byte union at slot byte 4.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CcOpOperands {
    /// Ring view: bit n = ring channel with absolute id n is driven by this TOP_SP.
    Ring {
        /// The channel bitmap.
        channel_list: u32,
    },
    /// Mesh view.
    Mesh {
        /// u16 at slot byte 4.
        sema_shift_offset: u16,
        /// u16 at slot byte 6.
        sema_mask: u16,
    },
}

impl CcOpOperands {
    /// The union as the u32 stored little-endian at slot byte 4.
    pub fn word(self) -> u32 {
        match self {
            CcOpOperands::Ring { channel_list } => channel_list,
            CcOpOperands::Mesh {
                sema_shift_offset,
                sema_mask,
            } => u32::from(sema_shift_offset) | (u32::from(sema_mask) << 16),
        }
    }
}

fn bit(b: u8, n: u32) -> bool {
    (b >> n) & 1 == 1
}

impl SpadCtrlEntry {
    /// Decode a slot. Total: every byte pattern decodes, nothing is lost.
    pub fn unpack(b: [u8; SPAD_CTRL_ENTRY_SIZE]) -> Self {
        SpadCtrlEntry {
            cc_op: bit(b[0], 0),
            header_reserved: b[0] >> 1,
            algo_type: b[1] & 0xF,
            algo_sub_type: (b[1] >> 4) & 0x7,
            trigger_next: bit(b[1], 7),
            reporter: bit(b[2], 0),
            ring_wait_complete: bit(b[2], 1),
            ring_send_complete: bit(b[2], 2),
            safe_mode: bit(b[2], 3),
            unique_tensors: bit(b[2], 4),
            flags_reserved: b[2] >> 5,
            pad: b[3],
            union_word: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
        }
    }

    /// Encode a slot. Fails if a field does not fit its width.
    pub fn pack(&self) -> Result<[u8; SPAD_CTRL_ENTRY_SIZE]> {
        let check = |name: &str, v: u8, bits: u32| {
            if u32::from(v) >> bits != 0 {
                Err(Error::invalid(format!(
                    "spad_ctrl_entry: field {name} = {v} does not fit in {bits} bits"
                )))
            } else {
                Ok(())
            }
        };
        check("header_reserved", self.header_reserved, 7)?;
        check("algo_type", self.algo_type, 4)?;
        check("algo_sub_type", self.algo_sub_type, 3)?;
        check("flags_reserved", self.flags_reserved, 3)?;
        let mut b = [0u8; SPAD_CTRL_ENTRY_SIZE];
        b[0] = u8::from(self.cc_op) | (self.header_reserved << 1);
        b[1] = self.algo_type | (self.algo_sub_type << 4) | (u8::from(self.trigger_next) << 7);
        b[2] = u8::from(self.reporter)
            | (u8::from(self.ring_wait_complete) << 1)
            | (u8::from(self.ring_send_complete) << 2)
            | (u8::from(self.safe_mode) << 3)
            | (u8::from(self.unique_tensors) << 4)
            | (self.flags_reserved << 5);
        b[3] = self.pad;
        b[4..8].copy_from_slice(&self.union_word.to_le_bytes());
        Ok(b)
    }

    /// Ring view of the union.
    pub fn channel_list(&self) -> u32 {
        self.union_word
    }
    /// Mesh view of the union: `sema_shift_offset` (slot bytes 4–5).
    pub fn sema_shift_offset(&self) -> u16 {
        (self.union_word & 0xFFFF) as u16
    }
    /// Mesh view of the union: `sema_mask` (slot bytes 6–7).
    pub fn sema_mask(&self) -> u16 {
        (self.union_word >> 16) as u16
    }
}

/// Pack one cc_op into the slot `old`, exactly as the vendor packer does
/// (docs/contract/isa.md §11.2):
///
/// * the first 16-bit word is `(trigger_next << 15) | (algo_sub_type << 12) | (algo_type << 8) | 1`,
///   merged with `old_word & 0xFE` (the header's reserved bits 1–7 survive);
/// * the flag byte is `reporter | ring_wait_complete << 1 | ring_send_complete << 2 |
///   safe_mode << 3 | unique_tensors << 4`, masked to 5 bits and merged with `old_flag & 0xE0`;
/// * slot byte 3 is not stored (keeps `old`);
/// * the union is stored as two u16 at slot bytes 4 and 6.
///
/// Also enforces the packer's assertion `channel id != 0 || reporter`: pass the id of the
/// channel the entry is built for as `channel_id`.
pub fn pack_cc_op(
    old: [u8; SPAD_CTRL_ENTRY_SIZE],
    f: &CcOpFields,
    channel_id: u32,
) -> Result<[u8; SPAD_CTRL_ENTRY_SIZE]> {
    if f.algo_type > 0xF {
        return Err(Error::invalid(format!(
            "cc_op algo_type {} does not fit in 4 bits",
            f.algo_type
        )));
    }
    if f.algo_sub_type > 0x7 {
        return Err(Error::invalid(format!(
            "cc_op algo_sub_type {} does not fit in 3 bits",
            f.algo_sub_type
        )));
    }
    if channel_id == 0 && !f.reporter {
        return Err(Error::invalid(
            "cc_op for channel 0 must have the reporter bit set (packer assertion `channel id != 0 || reporter`)",
        )
        .with_field("reporter"));
    }
    let old_word = u16::from_le_bytes([old[0], old[1]]);
    let word = (u16::from(f.trigger_next) << 15)
        | (u16::from(f.algo_sub_type) << 12)
        | (u16::from(f.algo_type) << 8)
        | 1
        | (old_word & 0xFE);
    let flag = (u8::from(f.reporter)
        | (u8::from(f.ring_wait_complete) << 1)
        | (u8::from(f.ring_send_complete) << 2)
        | (u8::from(f.safe_mode) << 3)
        | (u8::from(f.unique_tensors) << 4))
        & 0x1F;
    let mut b = old;
    b[0..2].copy_from_slice(&word.to_le_bytes());
    b[2] = flag | (old[2] & 0xE0);
    let u = f.operands.word();
    b[4..6].copy_from_slice(&((u & 0xFFFF) as u16).to_le_bytes());
    b[6..8].copy_from_slice(&((u >> 16) as u16).to_le_bytes());
    Ok(b)
}

#[cfg(test)]
mod tests;

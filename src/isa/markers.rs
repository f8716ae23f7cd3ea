//! Address-operand markers, the 0xBF LNC size format, and the opcodes of the typed words
//! (docs/contract/isa.md §1, §7, §8). Split from `enums.rs`; same `wire_enum!` conventions.

use std::fmt;

use super::enums::wire_enum;

wire_enum! {
    /// PSEUDO_ADDR8 mode: bits 7..5 of the marker byte (docs/contract/isa.md §7) **\[H\]**.
    pub enum Addr8Mode {
        /// Immediate address.
        Imm = 0x00 => "IMM",
        /// ADDR_TBL_SHAPE_IMM.
        AddrTblShapeImm = 0x20 => "ADDR_TBL_SHAPE_IMM",
        /// SHAPE_REG.
        ShapeReg = 0x40 => "SHAPE_REG",
        /// ADDR_TBL_SHAPE_REG.
        AddrTblShapeReg = 0x60 => "ADDR_TBL_SHAPE_REG",
        /// ADDR_REG.
        AddrReg = 0x80 => "ADDR_REG",
        /// ADDR_SHAPE_REG.
        AddrShapeReg = 0xC0 => "ADDR_SHAPE_REG",
    }
}

/// The PSEUDO_ADDR8 marker test mask: `(high byte & 0xFC)` is mode | modifiers
/// (docs/contract/isa.md §7 **\[H\]**).
pub const ADDR8_MARKER_MASK: u8 = 0xFC;
/// Bits of the marker byte that hold the mode.
pub const ADDR8_MODE_MASK: u8 = 0xE0;
/// Modifier +0x10: VAR_ID (pseudo only): the low part is a NEFF variable id + immediate offset.
pub const ADDR8_MOD_VAR_ID: u8 = 0x10;
/// Modifier +0x08: the table offset is held in a register.
pub const ADDR8_MOD_TBL_OFFSET_REG: u8 = 0x08;
/// Modifier +0x04: wide table offset.
pub const ADDR8_MOD_WIDE_TBL_OFFSET: u8 = 0x04;

wire_enum! {
    /// ADDR4 marker: the high byte masked with 0xFC (docs/contract/isa.md §7) **\[H\]**. Bits 25:24
    /// belong to the offset, so they are outside the mask.
    pub enum Addr4Marker {
        /// Immediate (an SBUF partition offset when bit 25 is clear).
        Imm = 0x00 => "IMM",
        /// INDIRECT_IMM.
        IndirectImm = 0x20 => "INDIRECT_IMM",
        /// SHAPE_REG.
        ShapeReg = 0x40 => "SHAPE_REG",
        /// ADDR_REG.
        AddrReg = 0x80 => "ADDR_REG",
        /// INDIRECT_REG.
        IndirectReg = 0xA0 => "INDIRECT_REG",
        /// ADDR_SHAPE_REG.
        AddrShapeReg = 0xC0 => "ADDR_SHAPE_REG",
    }
}

wire_enum! {
    /// lnc_size_fmt, 0xBF byte 32 (docs/contract/isa.md §8) **\[H\]**. All four decode; only LNC1
    /// and LNC2 pass §9 rule 11.
    pub enum LncSizeFmt {
        /// One physical core per logical core.
        Lnc1 = 0 => "LNC1",
        /// Two.
        Lnc2 = 1 => "LNC2",
        /// Four (rejected).
        Lnc4 = 2 => "LNC4",
        /// Eight (rejected).
        Lnc8 = 3 => "LNC8",
    }
}

impl LncSizeFmt {
    /// Physical cores per logical core.
    pub fn cores(self) -> u32 {
        1 << self.as_u8()
    }
}

/// Opcodes of the words this module types (docs/contract/isa.md §1, §8).
pub mod opcode {
    /// 0xC7 PSEUDO_TRIGGER_ALL_REDUCE.
    pub const TRIGGER_ALL_REDUCE: u8 = 0xC7;
    /// 0xC8 PSEUDO_TRIGGER_COLLECTIVE.
    pub const TRIGGER_COLLECTIVE: u8 = 0xC8;
    /// 0xCB PSEUDO_SEND_RECV.
    pub const SEND_RECV: u8 = 0xCB;
    /// 0xD9 PSEUDO_TRIGGER_COLLECTIVE2.
    pub const TRIGGER_COLLECTIVE2: u8 = 0xD9;
    /// 0xDA PSEUDO_EXTENSION (collective2 ext after 0xD9, PSEUDO_DMA_EXT otherwise).
    pub const EXTENSION: u8 = 0xDA;
    /// 0xDB PSEUDO_CUR_PROCESSING_RANK_ID.
    pub const CUR_PROCESSING_RANK_ID: u8 = 0xDB;
    /// 0xBF S3D3 / SB2SB_COLLECTIVE (a real POOL op).
    pub const SB2SB_COLLECTIVE: u8 = 0xBF;

    /// The class rule: top three bits 0b110 (0xC0–0xDF) is a pseudo-op
    /// (docs/contract/isa.md §1 **\[H\]**).
    pub fn is_pseudo(op: u8) -> bool {
        op & 0xE0 == 0xC0
    }
}

#[cfg(test)]
mod tests;

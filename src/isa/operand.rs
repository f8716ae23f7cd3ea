//! Address operands of the pseudo-instruction words (docs/contract/isa.md §7, §8).
//!
//! Every operand keeps its raw bits, so any bit pattern decodes and re-encodes unchanged; the
//! typed views (marker, mode, variable id, SBUF-ness, element walk) are methods. Whether a marker
//! is *acceptable* is a validation question (§9 rules 4 and 11), not a decoding one.

use super::enums::{Axis, Dtype};
use super::layout::{rd_i16, rd_i32, rd_u16, rd_u32, rd_u64};
use super::markers::{
    Addr4Marker, Addr8Mode, ADDR8_MARKER_MASK, ADDR8_MODE_MASK, ADDR8_MOD_TBL_OFFSET_REG,
    ADDR8_MOD_VAR_ID, ADDR8_MOD_WIDE_TBL_OFFSET,
};

/// PSEUDO_ADDR8: an 8-byte address union whose high byte (bits 63:56) is the marker.
///
/// The marker test is `high_byte & 0xFC` (docs/contract/isa.md §7 **\[H\]**); bits 57:56 are
/// outside the mask and belong to the low part.
///
/// **VAR_ID split (our choice; the spec only says "a NEFF variable id plus an immediate
/// offset").** Under marker 0x10, bits 55:40 hold the NEFF variable id (16 bits: a NEFF has far
/// fewer variables than 65 536) and bits 39:0 hold the immediate byte offset into that variable
/// (40 bits = 1 TiB, more than any device memory). Bits 57:56 are ignored by the view and
/// written as 0 by [`PseudoAddr8::var`]. The split lives in [`VAR_ID_SHIFT`] / [`VAR_ID_BITS`] /
/// [`VAR_OFFSET_BITS`] only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PseudoAddr8 {
    /// The 64 raw bits, little-endian on the wire.
    pub raw: u64,
}

/// First bit of the variable id in a VAR_ID PSEUDO_ADDR8.
pub const VAR_ID_SHIFT: u32 = 40;
/// Width of the variable id.
pub const VAR_ID_BITS: u32 = 16;
/// Width of the immediate offset (bits below [`VAR_ID_SHIFT`]).
pub const VAR_OFFSET_BITS: u32 = VAR_ID_SHIFT;

impl PseudoAddr8 {
    /// Size on the wire.
    pub const SIZE: usize = 8;

    /// The marker: high byte masked with 0xFC (mode | modifiers).
    pub fn marker(self) -> u8 {
        ((self.raw >> 56) as u8) & ADDR8_MARKER_MASK
    }
    /// The addressing mode (bits 7..5 of the marker), `None` for 0xA0/0xE0 which no table lists.
    pub fn mode(self) -> Option<Addr8Mode> {
        Addr8Mode::from_u8(self.marker() & ADDR8_MODE_MASK)
    }
    /// Modifier +0x10 present.
    pub fn has_var_id_modifier(self) -> bool {
        self.marker() & ADDR8_MOD_VAR_ID != 0
    }
    /// Modifier +0x08: table offset held in a register.
    pub fn table_offset_in_reg(self) -> bool {
        self.marker() & ADDR8_MOD_TBL_OFFSET_REG != 0
    }
    /// Modifier +0x04: wide table offset.
    pub fn wide_table_offset(self) -> bool {
        self.marker() & ADDR8_MOD_WIDE_TBL_OFFSET != 0
    }
    /// The form the translator requires of 0xD9/0xDA operands: `(marker & 0xFC) == 0x10`
    /// (IMM mode, VAR_ID modifier and nothing else; docs/contract/isa.md §7 **\[H\]**).
    pub fn is_var_id(self) -> bool {
        self.marker() == ADDR8_MOD_VAR_ID
    }
    /// A VAR_ID address naming `var_id` at byte `offset`; `None` if `offset` needs more than
    /// [`VAR_OFFSET_BITS`] bits.
    pub fn var(var_id: u16, offset: u64) -> Option<Self> {
        if offset >> VAR_OFFSET_BITS != 0 {
            return None;
        }
        let raw =
            (u64::from(ADDR8_MOD_VAR_ID) << 56) | (u64::from(var_id) << VAR_ID_SHIFT) | offset;
        Some(PseudoAddr8 { raw })
    }
    /// An immediate address (marker 0x00); `None` if `addr` reaches into the marker bits.
    pub fn imm(addr: u64) -> Option<Self> {
        (addr >> 58 == 0).then_some(PseudoAddr8 { raw: addr })
    }
    /// The NEFF variable id, for a VAR_ID address.
    pub fn var_id(self) -> Option<u16> {
        self.is_var_id()
            .then_some(((self.raw >> VAR_ID_SHIFT) & ((1 << VAR_ID_BITS) - 1)) as u16)
    }
    /// The immediate byte offset into the variable, for a VAR_ID address.
    pub fn var_offset(self) -> Option<u64> {
        self.is_var_id()
            .then_some(self.raw & ((1u64 << VAR_OFFSET_BITS) - 1))
    }
    /// Decode from 8 little-endian bytes.
    pub fn from_bytes(b: &[u8; 8]) -> Self {
        PseudoAddr8 {
            raw: u64::from_le_bytes(*b),
        }
    }
}

/// Which dimension of a [`Tensor2d`] walks the free dimension of an SBUF operand. Not
/// documented (docs/contract/isa.md §7 **\[L\]**); the safe reading is dimension 0 = free,
/// dimension 1 = partitions.
pub const TENSOR2D_FREE_DIM: usize = 0;
/// Which dimension of a [`Tensor2d`] walks partitions (see [`TENSOR2D_FREE_DIM`]).
pub const TENSOR2D_PARTITION_DIM: usize = 1 - TENSOR2D_FREE_DIM;

/// PSEUDO_ADDR8TENSOR2D (24 B, docs/contract/isa.md §7 **\[H\]**): start address, element
/// strides, shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Tensor2d {
    /// Bytes 0–7.
    pub start: PseudoAddr8,
    /// Bytes 8–15: strides in elements.
    pub step_elem: [i32; 2],
    /// Bytes 16–23: the shape.
    pub num_elem: [u32; 2],
}

impl Tensor2d {
    /// Size on the wire.
    pub const SIZE: usize = 24;

    /// Decode from the 24 bytes at `b[off..off + 24]` (`b` is a whole 64-byte word).
    pub fn read(b: &[u8; 64], off: usize) -> Self {
        Tensor2d {
            start: PseudoAddr8 {
                raw: rd_u64(b, off),
            },
            step_elem: [rd_i32(b, off + 8), rd_i32(b, off + 12)],
            num_elem: [rd_u32(b, off + 16), rd_u32(b, off + 20)],
        }
    }
    /// Encode into `b[off..off + 24]`.
    pub fn write(&self, b: &mut [u8; 64], off: usize) {
        b[off..off + 8].copy_from_slice(&self.start.raw.to_le_bytes());
        b[off + 8..off + 12].copy_from_slice(&self.step_elem[0].to_le_bytes());
        b[off + 12..off + 16].copy_from_slice(&self.step_elem[1].to_le_bytes());
        b[off + 16..off + 20].copy_from_slice(&self.num_elem[0].to_le_bytes());
        b[off + 20..off + 24].copy_from_slice(&self.num_elem[1].to_le_bytes());
    }
    /// A contiguous 1-D operand of `n` elements at `start`.
    pub fn contiguous(start: PseudoAddr8, n: u32) -> Self {
        Tensor2d {
            start,
            step_elem: [1, 0],
            num_elem: [n, 1],
        }
    }
    /// All 24 bytes zero: the operand is absent (e.g. src1 of an all-reduce).
    pub fn is_absent(&self) -> bool {
        *self == Tensor2d::default()
    }
    /// `num_elem[0] · num_elem[1]`: the element count (docs/contract/isa.md §5).
    pub fn num_elements(&self) -> u64 {
        u64::from(self.num_elem[0]) * u64::from(self.num_elem[1])
    }
    /// The element count along `axis`, per [`TENSOR2D_FREE_DIM`].
    pub fn extent(&self, axis: Axis) -> u32 {
        match axis {
            Axis::Free => self.num_elem[TENSOR2D_FREE_DIM],
            Axis::Partition => self.num_elem[TENSOR2D_PARTITION_DIM],
        }
    }
    /// The walk collapses to one dimension (a single row, or rows laid end to end).
    pub fn is_one_dimensional(&self) -> bool {
        self.num_elem[0] <= 1
            || self.num_elem[1] <= 1
            || i64::from(self.step_elem[1])
                == i64::from(self.step_elem[0]) * i64::from(self.num_elem[0])
    }
    /// Element offsets from `start`, in the order of docs/contract/isa.md §7:
    /// `for i1 in 0..num_elem[1] { for i0 in 0..num_elem[0] { i0·step[0] + i1·step[1] } }`.
    /// Saturating arithmetic: no real shape comes near i64's range, and the walk must not panic.
    pub fn element_offsets(&self) -> impl Iterator<Item = i64> + '_ {
        let [s0, s1] = self.step_elem.map(i64::from);
        let [n0, n1] = self.num_elem;
        (0..n1).flat_map(move |i1| {
            (0..n0).map(move |i0| {
                i64::from(i0)
                    .saturating_mul(s0)
                    .saturating_add(i64::from(i1).saturating_mul(s1))
            })
        })
    }
    /// Byte offsets from `start` for elements of `dtype` (in-memory size; `None` for INVALID).
    pub fn byte_offsets(&self, dtype: Dtype) -> Option<impl Iterator<Item = i64> + '_> {
        let size = dtype.size_bytes()? as i64;
        Some(self.element_offsets().map(move |o| o.saturating_mul(size)))
    }
}

/// ADDR4: a 4-byte address whose high byte (masked with 0xFC) is the marker
/// (docs/contract/isa.md §7 **\[H\]**). For an immediate SBUF partition offset, bits 25:0 are the
/// offset and bit 25 clear means SBUF; the translator rejects bit 25 or bits 26–31 set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Addr4 {
    /// The 32 raw bits.
    pub raw: u32,
}

/// Bit 25 of an ADDR4: set = not an SBUF address.
pub const ADDR4_NOT_SBUF: u32 = 1 << 25;
/// Bits 26–31 of an ADDR4 (the marker bits reachable by the 0xFC mask).
pub const ADDR4_HIGH_BITS: u32 = 0xFC00_0000;

impl Addr4 {
    /// The marker: high byte & 0xFC.
    pub fn marker(self) -> u8 {
        ((self.raw >> 24) as u8) & 0xFC
    }
    /// The marker as a listed kind, `None` if unlisted.
    pub fn marker_kind(self) -> Option<Addr4Marker> {
        Addr4Marker::from_u8(self.marker())
    }
    /// Bits 25:0.
    pub fn offset(self) -> u32 {
        self.raw & 0x03FF_FFFF
    }
    /// Bit 25 clear: an SBUF address.
    pub fn is_sbuf(self) -> bool {
        self.raw & ADDR4_NOT_SBUF == 0
    }
    /// An immediate SBUF partition offset: bit 25 and bits 26–31 all clear.
    pub fn is_imm_sbuf(self) -> bool {
        self.raw & (ADDR4_NOT_SBUF | ADDR4_HIGH_BITS) == 0
    }
    /// An immediate SBUF offset; `None` if it needs bit 25 or above.
    pub fn sbuf(offset: u32) -> Option<Self> {
        (offset < ADDR4_NOT_SBUF).then_some(Addr4 { raw: offset })
    }
}

/// TENSOR3D of 0xBF (16 B, docs/contract/isa.md §8 **\[H\]**): ADDR4 + `i16 step[3]` +
/// `u16 num[3]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Tensor3d {
    /// Bytes 0–3.
    pub addr: Addr4,
    /// Bytes 4–9: element strides.
    pub step: [i16; 3],
    /// Bytes 10–15: shape.
    pub num: [u16; 3],
}

impl Tensor3d {
    /// Size on the wire.
    pub const SIZE: usize = 16;

    /// Decode from `b[off..off + 16]`.
    pub fn read(b: &[u8; 64], off: usize) -> Self {
        Tensor3d {
            addr: Addr4 {
                raw: rd_u32(b, off),
            },
            step: [rd_i16(b, off + 4), rd_i16(b, off + 6), rd_i16(b, off + 8)],
            num: [
                rd_u16(b, off + 10),
                rd_u16(b, off + 12),
                rd_u16(b, off + 14),
            ],
        }
    }
    /// Encode into `b[off..off + 16]`.
    pub fn write(&self, b: &mut [u8; 64], off: usize) {
        b[off..off + 4].copy_from_slice(&self.addr.raw.to_le_bytes());
        for k in 0..3 {
            b[off + 4 + 2 * k..off + 6 + 2 * k].copy_from_slice(&self.step[k].to_le_bytes());
            b[off + 10 + 2 * k..off + 12 + 2 * k].copy_from_slice(&self.num[k].to_le_bytes());
        }
    }
    /// `num[0]·num[1]·num[2]` (the `t3d_element_count` of docs/contract/isa.md §8).
    pub fn element_count(&self) -> u64 {
        self.num.iter().map(|&n| u64::from(n)).product()
    }
    /// Element offsets, dimension 0 innermost.
    pub fn element_offsets(&self) -> impl Iterator<Item = i64> + '_ {
        let [s0, s1, s2] = self.step.map(i64::from);
        let [n0, n1, n2] = self.num;
        (0..n2).flat_map(move |i2| {
            (0..n1).flat_map(move |i1| {
                (0..n0).map(move |i0| i64::from(i0) * s0 + i64::from(i1) * s1 + i64::from(i2) * s2)
            })
        })
    }
}

#[cfg(test)]
mod tests;

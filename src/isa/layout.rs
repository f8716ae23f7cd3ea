//! Table-driven field offsets for the parts of the words whose layout is not settled, plus the
//! little-endian byte helpers the codecs share.
//!
//! **0xDA bytes 32–63** (docs/contract/isa.md §6, docs/contract/lowering.md §7 item 1): the
//! headers name the knobs in the order cc_buf_*, dma_configs, src1_bitmap, cross_sb_out, but only
//! dma_configs@41 and permute_chain@43 are read directly **\[H\]**. Decode, encode and validation
//! of these knobs all go through [`DA_EXT_FIELDS`]: to correct an offset or width, edit that one
//! table (and nothing else); the codec keeps every byte the table does not cover as raw reserved
//! bytes, so moving a field never loses data. The table's confidence column says how sure each row
//! is.
//!
//! **0xC8 bytes 33–47** (docs/contract/isa.md §4, docs/contract/lowering.md §7 item 2):
//! undocumented, required to be 0; the range is [`C8_RESERVED`].

/// How sure a table row is (docs/contract/lowering.md §0 tags).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Confidence {
    /// Read directly from a header, DWARF or disassembly.
    High,
    /// Inferred from strong evidence.
    Medium,
    /// A guess, or the sources disagree.
    Low,
    /// Not found: our placement.
    Open,
}

/// The knobs of the 0xDA collective2 ext that live in bytes 32–63.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExtField {
    /// ADDR4 of the explicit collective scratch in SBUF.
    CcBufStartAddr,
    /// Size of that scratch.
    CcBufSize,
    /// UNIQUE_TENSORS flag.
    UniqueTensors,
    /// priority_class (bits 0–2) + reserved (bits 3–7).
    DmaConfigs,
    /// A2Av src1 row-presence bits.
    Src1Bitmap,
    /// PERMUTE_CHAIN.
    PermuteChain,
    /// CROSS_SBOUTPUT_TRANSFER.
    CrossSbOut,
}

/// One row: a field, its spec name, byte offset inside the 0xDA word, width in bytes (1..=8,
/// little-endian), and confidence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FieldSpec {
    /// Which field.
    pub field: ExtField,
    /// The spec's name (used in error messages).
    pub name: &'static str,
    /// Byte offset inside the 64-byte 0xDA word.
    pub offset: usize,
    /// Width in bytes.
    pub width: usize,
    /// Confidence of `offset`.
    pub conf: Confidence,
}

/// The 0xDA bytes 32–63 layout (docs/contract/isa.md §6 table):
///
/// | field | off | width | conf |
/// |---|---|---|---|
/// | cc_buf_start_addr | 32 | 4 | \[M\] (field \[H\], offset \[M\]) |
/// | cc_buf_size | 36 | 4 | \[L\] |
/// | unique_tensors | 40 | 1 | \[L\] — the spec puts "one of unique_tensors / cross_sb_out" here |
/// | dma_configs | 41 | 1 | \[H\] (the encoder reads byte41 & 7) |
/// | src1_bitmap | 42 | 1 | \[L\] |
/// | permute_chain | 43 | 1 | \[H\] |
/// | cross_sb_out | 44 | 1 | \[OPEN\] |
///
/// Our choice for byte 40 vs cross_sb_out: the header order is cc_buf_*, dma_configs,
/// src1_bitmap, cross_sb_out, so cross_sb_out comes after src1_bitmap@42; 43 is permute_chain
/// \[H\], so cross_sb_out takes the first free byte, 44. unique_tensors is not in that named order
/// and takes 40. Bytes 45–63 stay raw (not required to be 0: they may hold knobs not yet found).
pub const DA_EXT_FIELDS: [FieldSpec; 7] = [
    FieldSpec {
        field: ExtField::CcBufStartAddr,
        name: "cc_buf_start_addr",
        offset: 32,
        width: 4,
        conf: Confidence::Medium,
    },
    FieldSpec {
        field: ExtField::CcBufSize,
        name: "cc_buf_size",
        offset: 36,
        width: 4,
        conf: Confidence::Low,
    },
    FieldSpec {
        field: ExtField::UniqueTensors,
        name: "unique_tensors",
        offset: 40,
        width: 1,
        conf: Confidence::Low,
    },
    FieldSpec {
        field: ExtField::DmaConfigs,
        name: "dma_configs",
        offset: 41,
        width: 1,
        conf: Confidence::High,
    },
    FieldSpec {
        field: ExtField::Src1Bitmap,
        name: "src1_bitmap",
        offset: 42,
        width: 1,
        conf: Confidence::Low,
    },
    FieldSpec {
        field: ExtField::PermuteChain,
        name: "permute_chain",
        offset: 43,
        width: 1,
        conf: Confidence::High,
    },
    FieldSpec {
        field: ExtField::CrossSbOut,
        name: "cross_sb_out",
        offset: 44,
        width: 1,
        conf: Confidence::Open,
    },
];

/// First byte of the 0xDA region the table covers (bytes before it are fixed **\[H\]** fields).
pub const DA_TAIL_START: usize = 32;

/// The table row of `field`.
pub fn da_field(field: ExtField) -> &'static FieldSpec {
    // Every ExtField has exactly one row (checked by a test); the fallback is unreachable.
    DA_EXT_FIELDS
        .iter()
        .find(|s| s.field == field)
        .unwrap_or(&DA_EXT_FIELDS[0])
}

/// True if byte `off` (0..64) of the 0xDA word is covered by a table row.
pub fn da_covers(off: usize) -> bool {
    DA_EXT_FIELDS
        .iter()
        .any(|s| off >= s.offset && off < s.offset + s.width)
}

/// A byte range of a word that must hold zeros.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReservedRange {
    /// Name used in error messages.
    pub name: &'static str,
    /// First byte.
    pub offset: usize,
    /// Length in bytes.
    pub width: usize,
}

/// 0xC8 bytes 33–47: not documented, must be 0 (docs/contract/isa.md §4 **\[OPEN\]**,
/// docs/contract/lowering.md §7 item 2).
pub const C8_RESERVED: ReservedRange = ReservedRange {
    name: "reserved",
    offset: 33,
    width: 15,
};

/// Read a little-endian unsigned field of `width` (1..=8) bytes at `off` of a 64-byte word.
pub fn read_le(b: &[u8; 64], off: usize, width: usize) -> u64 {
    b[off..off + width]
        .iter()
        .rev()
        .fold(0u64, |acc, &x| (acc << 8) | u64::from(x))
}

/// Write the low `width` bytes of `v` little-endian at `off`.
pub fn write_le(b: &mut [u8; 64], off: usize, width: usize, v: u64) {
    b[off..off + width].copy_from_slice(&v.to_le_bytes()[..width]);
}

/// u16 at `off`.
pub fn rd_u16(b: &[u8; 64], off: usize) -> u16 {
    u16::from_le_bytes([b[off], b[off + 1]])
}
/// i16 at `off`.
pub fn rd_i16(b: &[u8; 64], off: usize) -> i16 {
    i16::from_le_bytes([b[off], b[off + 1]])
}
/// u32 at `off`.
pub fn rd_u32(b: &[u8; 64], off: usize) -> u32 {
    u32::from_le_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}
/// i32 at `off`.
pub fn rd_i32(b: &[u8; 64], off: usize) -> i32 {
    rd_u32(b, off) as i32
}
/// u64 at `off`.
pub fn rd_u64(b: &[u8; 64], off: usize) -> u64 {
    read_le(b, off, 8)
}

#[cfg(test)]
mod tests;

//! Where each field of the 1024-byte NEFF header lies, `neff_header_t` (docs/contract/abi.md
//! §7.2): its name in messages, its offset and its size. The reader
//! ([`NeffHeader::parse`](super::NeffHeader::parse)) and the writer
//! ([`container`](crate::neff::build::container)) both take the offsets from here, so that what
//! one writes the other reads.

use std::ops::Range;

/// One header field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// The field's name in refusals (the vendor's `neff_header_t` member).
    pub name: &'static str,
    /// Its first byte.
    pub off: usize,
    /// Its size in bytes.
    pub len: usize,
}

impl Field {
    const fn new(name: &'static str, off: usize, len: usize) -> Field {
        Field { name, off, len }
    }

    /// Its bytes in the header.
    pub fn range(self) -> Range<usize> {
        self.off..self.off + self.len
    }
}

/// Bytes of the header; the payload follows.
pub const HEADER_SIZE: usize = 0x400;

/// The whole header (what a file too short for it is refused as).
pub const HEADER: Field = Field::new("header", 0, HEADER_SIZE);
/// u64: 1 raw tar, 2 gzip tar.
pub const PKG_VERSION: Field = Field::new("pkg_version", 0x000, 8);
/// u64: where the payload starts.
pub const HEADER_SIZE_FIELD: Field = Field::new("header_size", 0x008, 8);
/// u64: bytes of the (compressed) payload.
pub const DATA_SIZE: Field = Field::new("data_size", 0x010, 8);
/// u64: NEFF format version, major.
pub const VERSION_MAJOR: Field = Field::new("neff_version_major", 0x018, 8);
/// u64: NEFF format version, minor.
pub const VERSION_MINOR: Field = Field::new("neff_version_minor", 0x020, 8);
/// Text: the compiler's build string.
pub const BUILD_VERSION: Field = Field::new("neff_build_version", 0x028, 128);
/// u32: `num_tpb`.
pub const NUM_TPB: Field = Field::new("num_tpb", 0x0A8, 4);
/// The payload hash: MD5 in the first 16 bytes (package 2), SHA-256 (package 1).
pub const HASH: Field = Field::new("hash", 0x0AC, 32);
/// The model's UUID.
pub const UUID: Field = Field::new("uuid", 0x0CC, 16);
/// Text: the model's name.
pub const NAME: Field = Field::new("name", 0x0DC, 256);
/// u32: cores the model asks for.
pub const REQUESTED_TPB_COUNT: Field = Field::new("requested_tpb_count", 0x1DC, 4);
/// 16 × u32: cores per node.
pub const TPB_PER_NODE: Field = Field::new("tpb_per_node", 0x1E0, 64);
/// u64: feature bits.
pub const FEATURE_BITS: Field = Field::new("feature_bits", 0x220, 8);
/// u32: the logical core size the model was compiled for.
pub const LNC_SIZE: Field = Field::new("lnc_size", 0x228, 4);

/// Every field in offset order (the whole-header [`HEADER`] aside).
pub const FIELDS: [Field; 14] = [
    PKG_VERSION,
    HEADER_SIZE_FIELD,
    DATA_SIZE,
    VERSION_MAJOR,
    VERSION_MINOR,
    BUILD_VERSION,
    NUM_TPB,
    HASH,
    UUID,
    NAME,
    REQUESTED_TPB_COUNT,
    TPB_PER_NODE,
    FEATURE_BITS,
    LNC_SIZE,
];

#[cfg(test)]
mod tests;

//! The 1024-byte NEFF header, `neff_header_t` (docs/contract/abi.md §7.2): little-endian,
//! no magic number, so the file is recognised by its structure, and every field is checked.
//!
//! Choices where the contract leaves room: `header_size` must be at least 1024 (the fields
//! occupy that much) and leave room for the payload; `lnc_size` 0 means "not stated" (it is
//! compared with the runtime's logical core size at load, where 0 matches any); text fields
//! end at their first NUL and must be UTF-8.
//!
//! Where each field lies is [`layout`]'s, which the writer uses too.

pub mod layout;

use crate::error::{Error, ErrorKind, Result};
pub use layout::HEADER_SIZE;
use layout::{
    Field, BUILD_VERSION, DATA_SIZE, FEATURE_BITS, HASH, HEADER, HEADER_SIZE_FIELD, LNC_SIZE, NAME,
    NUM_TPB, PKG_VERSION, REQUESTED_TPB_COUNT, TPB_PER_NODE, UUID, VERSION_MAJOR, VERSION_MINOR,
};

/// Feature bits a major-version-2 NEFF may not set: the runtime knows bits 0–26 only
/// (docs/contract/abi.md §7.2).
pub const UNKNOWN_FEATURES: u64 = 0x7FFF_FFFF_F800_0000;

/// How the payload is packed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PkgVersion {
    /// 1: a raw tar, hashed with SHA-256.
    RawTar,
    /// 2: a gzip-compressed tar, hashed with MD5 (what production NEFFs are).
    GzipTar,
}

/// A checked header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NeffHeader {
    /// Payload packing.
    pub pkg_version: PkgVersion,
    /// Where the payload starts.
    pub header_size: u64,
    /// Bytes of the (compressed) payload.
    pub data_size: u64,
    /// NEFF format version, major (0..=2).
    pub version_major: u64,
    /// NEFF format version, minor (informational).
    pub version_minor: u64,
    /// The compiler's build string.
    pub build_version: String,
    /// `num_tpb` (documented as the core count; unused by the runtime).
    pub num_tpb: u32,
    /// The payload hash: MD5 in the first 16 bytes (package 2), SHA-256 (package 1).
    pub hash: [u8; 32],
    /// The model's UUID.
    pub uuid: [u8; 16],
    /// The model's name.
    pub name: String,
    /// Cores the model asks for.
    pub requested_tpb_count: u32,
    /// Cores per node, 16 entries.
    pub tpb_per_node: [u32; 16],
    /// Feature bits.
    pub feature_bits: u64,
    /// The logical core size the model was compiled for (0: not stated).
    pub lnc_size: u32,
}

fn u32_of(b: &[u8], f: Field) -> u32 {
    u32::from_le_bytes(b[f.range()].try_into().expect("4 bytes"))
}

fn u64_of(b: &[u8], f: Field) -> u64 {
    u64::from_le_bytes(b[f.range()].try_into().expect("8 bytes"))
}

/// A refusal of the header: field `f` (at its offset) broke `rule`; `actual` is what was there.
fn bad(kind: ErrorKind, f: Field, actual: impl std::fmt::Display, rule: &str) -> Error {
    let (field, off) = (f.name, f.off);
    Error::new(
        kind,
        format!("NEFF header: {field} at offset {off:#x} is {actual}: {rule} (docs/contract/abi.md §7.2)"),
    )
    .with_field(field)
    .with_step(off as u64)
    .with_actual(actual)
}

/// A NUL-terminated UTF-8 text field.
fn text(b: &[u8], f: Field) -> Result<String> {
    let raw = &b[f.range()];
    let end = raw.iter().position(|&c| c == 0).unwrap_or(f.len);
    String::from_utf8(raw[..end].to_vec()).map_err(|e| {
        bad(
            ErrorKind::Invalid,
            Field {
                off: f.off + e.utf8_error().valid_up_to(),
                ..f
            },
            "not UTF-8",
            "text fields are UTF-8 up to their first NUL",
        )
    })
}

impl NeffHeader {
    /// Parse and check the header of the NEFF `file` (the whole file, so that the sizes can be
    /// checked against it).
    ///
    /// # Errors
    /// `NRT_INVALID` for a file shorter than the header, an unknown package version, or sizes
    /// that do not fit the file; `NRT_UNSUPPORTED_NEFF_VERSION` for a major version above 2 or
    /// a feature bit the runtime does not know. Each names the field and its offset.
    pub fn parse(file: &[u8]) -> Result<NeffHeader> {
        if file.len() < HEADER_SIZE {
            return Err(bad(
                ErrorKind::Invalid,
                HEADER,
                format_args!("{} bytes long", file.len()),
                "a NEFF starts with a 1024-byte header",
            ));
        }
        let b = &file[HEADER.range()];
        let len = file.len() as u64;
        let pkg_version = match u64_of(b, PKG_VERSION) {
            1 => PkgVersion::RawTar,
            2 => PkgVersion::GzipTar,
            v => {
                return Err(bad(
                    ErrorKind::Invalid,
                    PKG_VERSION,
                    v,
                    "must be 1 (raw tar) or 2 (gzip tar)",
                ))
            }
        };
        let header_size = u64_of(b, HEADER_SIZE_FIELD);
        if header_size < HEADER_SIZE as u64 || header_size >= len {
            return Err(bad(
                ErrorKind::Invalid,
                HEADER_SIZE_FIELD,
                header_size,
                &format!("must be at least 1024 and below the file size {len}"),
            ));
        }
        let data_size = u64_of(b, DATA_SIZE);
        if data_size == 0 || data_size > len - header_size {
            return Err(bad(
                ErrorKind::Invalid,
                DATA_SIZE,
                data_size,
                &format!(
                    "must be 1..={} (the file's bytes after the header)",
                    len - header_size
                ),
            ));
        }
        let version_major = u64_of(b, VERSION_MAJOR);
        if version_major > 2 {
            return Err(bad(
                ErrorKind::UnsupportedNeffVersion,
                VERSION_MAJOR,
                version_major,
                "this runtime reads NEFF versions 0 to 2",
            ));
        }
        let feature_bits = u64_of(b, FEATURE_BITS);
        if version_major == 2 && feature_bits & UNKNOWN_FEATURES != 0 {
            return Err(bad(
                ErrorKind::UnsupportedNeffVersion,
                FEATURE_BITS,
                format_args!("{feature_bits:#x}"),
                &format!(
                    "bits {:#x} are features this runtime does not know",
                    feature_bits & UNKNOWN_FEATURES
                ),
            ));
        }
        let lnc_size = u32_of(b, LNC_SIZE);
        if lnc_size > 2 {
            return Err(bad(
                ErrorKind::Invalid,
                LNC_SIZE,
                lnc_size,
                "a logical core is 1 or 2 physical cores (0: not stated)",
            ));
        }
        let mut tpb_per_node = [0u32; 16];
        for (t, raw) in tpb_per_node
            .iter_mut()
            .zip(b[TPB_PER_NODE.range()].chunks_exact(4))
        {
            *t = u32::from_le_bytes(raw.try_into().expect("4 bytes"));
        }
        Ok(NeffHeader {
            pkg_version,
            header_size,
            data_size,
            version_major,
            version_minor: u64_of(b, VERSION_MINOR),
            build_version: text(b, BUILD_VERSION)?,
            num_tpb: u32_of(b, NUM_TPB),
            hash: b[HASH.range()].try_into().expect("32 bytes"),
            uuid: b[UUID.range()].try_into().expect("16 bytes"),
            name: text(b, NAME)?,
            requested_tpb_count: u32_of(b, REQUESTED_TPB_COUNT),
            tpb_per_node,
            feature_bits,
            lnc_size,
        })
    }

    /// The payload bytes of `file` (checked by [`NeffHeader::parse`] to lie inside it).
    pub fn payload<'a>(&self, file: &'a [u8]) -> &'a [u8] {
        let start = self.header_size as usize;
        &file[start..start + self.data_size as usize]
    }

    /// Check the payload hash (`NEURON_RT_VALIDATE_HASH`): package 2 carries the MD5 of the
    /// compressed payload in the first 16 bytes of `hash`, package 1 the SHA-256 of the raw
    /// tar (docs/contract/abi.md §7.2).
    ///
    /// # Errors
    /// `NRT_INVALID` naming both digests when they differ.
    pub fn check_hash(&self, file: &[u8]) -> Result<()> {
        use md5::Digest as _;
        let payload = self.payload(file);
        let (want, got): (&[u8], Vec<u8>) = match self.pkg_version {
            PkgVersion::GzipTar => (&self.hash[..16], md5::Md5::digest(payload).to_vec()),
            PkgVersion::RawTar => (&self.hash[..], sha2::Sha256::digest(payload).to_vec()),
        };
        if want != got.as_slice() {
            let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
            return Err(Error::invalid(format!(
                "NEFF header: hash at {:#05X} is {}, but the payload's {} is {} \
                 (NEURON_RT_VALIDATE_HASH is on; docs/contract/abi.md §7.2)",
                HASH.off,
                hex(want),
                match self.pkg_version {
                    PkgVersion::GzipTar => "MD5",
                    PkgVersion::RawTar => "SHA-256",
                },
                hex(&got)
            ))
            .with_field(HASH.name)
            .with_values(hex(&got), hex(want)));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;

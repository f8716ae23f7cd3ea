//! The 1024-byte NEFF header, `neff_header_t` (docs/contract/abi.md §7.2): little-endian,
//! no magic number, so the file is recognised by its structure, and every field is checked.
//!
//! Choices where the contract leaves room: `header_size` must be at least 1024 (the fields
//! occupy that much) and leave room for the payload; `lnc_size` 0 means "not stated" (it is
//! compared with the runtime's logical core size at load, where 0 matches any); text fields
//! end at their first NUL and must be UTF-8.

use crate::error::{Error, ErrorKind, Result};

/// Bytes of the header; the payload follows.
pub const HEADER_SIZE: usize = 0x400;

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

fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(b[off..off + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().expect("8 bytes"))
}

/// A refusal of the header: `field` at byte `off` broke `rule`; `actual` is what was there.
fn bad(
    kind: ErrorKind,
    field: &str,
    off: usize,
    actual: impl std::fmt::Display,
    rule: &str,
) -> Error {
    Error::new(
        kind,
        format!("NEFF header: {field} at offset {off:#x} is {actual}: {rule} (docs/contract/abi.md §7.2)"),
    )
    .with_field(field)
    .with_step(off as u64)
    .with_actual(actual)
}

/// A NUL-terminated UTF-8 text field of `len` bytes at `off`.
fn text(b: &[u8], field: &str, off: usize, len: usize) -> Result<String> {
    let raw = &b[off..off + len];
    let end = raw.iter().position(|&c| c == 0).unwrap_or(len);
    String::from_utf8(raw[..end].to_vec()).map_err(|e| {
        bad(
            ErrorKind::Invalid,
            field,
            off + e.utf8_error().valid_up_to(),
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
                "header",
                0,
                format_args!("{} bytes long", file.len()),
                "a NEFF starts with a 1024-byte header",
            ));
        }
        let b = &file[..HEADER_SIZE];
        let len = file.len() as u64;
        let pkg_version = match u64_at(b, 0x000) {
            1 => PkgVersion::RawTar,
            2 => PkgVersion::GzipTar,
            v => {
                return Err(bad(
                    ErrorKind::Invalid,
                    "pkg_version",
                    0x000,
                    v,
                    "must be 1 (raw tar) or 2 (gzip tar)",
                ))
            }
        };
        let header_size = u64_at(b, 0x008);
        if header_size < HEADER_SIZE as u64 || header_size >= len {
            return Err(bad(
                ErrorKind::Invalid,
                "header_size",
                0x008,
                header_size,
                &format!("must be at least 1024 and below the file size {len}"),
            ));
        }
        let data_size = u64_at(b, 0x010);
        if data_size == 0 || data_size > len - header_size {
            return Err(bad(
                ErrorKind::Invalid,
                "data_size",
                0x010,
                data_size,
                &format!(
                    "must be 1..={} (the file's bytes after the header)",
                    len - header_size
                ),
            ));
        }
        let version_major = u64_at(b, 0x018);
        if version_major > 2 {
            return Err(bad(
                ErrorKind::UnsupportedNeffVersion,
                "neff_version_major",
                0x018,
                version_major,
                "this runtime reads NEFF versions 0 to 2",
            ));
        }
        let feature_bits = u64_at(b, 0x220);
        if version_major == 2 && feature_bits & UNKNOWN_FEATURES != 0 {
            return Err(bad(
                ErrorKind::UnsupportedNeffVersion,
                "feature_bits",
                0x220,
                format_args!("{feature_bits:#x}"),
                &format!(
                    "bits {:#x} are features this runtime does not know",
                    feature_bits & UNKNOWN_FEATURES
                ),
            ));
        }
        let lnc_size = u32_at(b, 0x228);
        if lnc_size > 2 {
            return Err(bad(
                ErrorKind::Invalid,
                "lnc_size",
                0x228,
                lnc_size,
                "a logical core is 1 or 2 physical cores (0: not stated)",
            ));
        }
        let mut tpb_per_node = [0u32; 16];
        for (i, t) in tpb_per_node.iter_mut().enumerate() {
            *t = u32_at(b, 0x1E0 + 4 * i);
        }
        Ok(NeffHeader {
            pkg_version,
            header_size,
            data_size,
            version_major,
            version_minor: u64_at(b, 0x020),
            build_version: text(b, "neff_build_version", 0x028, 128)?,
            num_tpb: u32_at(b, 0x0A8),
            hash: b[0x0AC..0x0CC].try_into().expect("32 bytes"),
            uuid: b[0x0CC..0x0DC].try_into().expect("16 bytes"),
            name: text(b, "name", 0x0DC, 256)?,
            requested_tpb_count: u32_at(b, 0x1DC),
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
                "NEFF header: hash at 0x0AC is {}, but the payload's {} is {} \
                 (NEURON_RT_VALIDATE_HASH is on; docs/contract/abi.md §7.2)",
                hex(want),
                match self.pkg_version {
                    PkgVersion::GzipTar => "MD5",
                    PkgVersion::RawTar => "SHA-256",
                },
                hex(&got)
            ))
            .with_field("hash")
            .with_values(hex(&got), hex(want)));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;

//! The NEFF payload: a POSIX tar, gzip-compressed for package version 2, unpacked in memory
//! (never to disk) into its members by name (docs/contract/abi.md §7.2).
//!
//! The payload is hostile until proven otherwise:
//! * the decompressed bytes are bounded ([`unpacked_limit`], and never more than the packed
//!   bytes can hold: a raw tar its own length, deflate 1032 times its input) before they are
//!   read, so a gzip bomb is refused instead of exhausting memory;
//! * a member's size is the one the tar reader goes by (its header's, or a pax `size` record)
//!   and is checked against what is left of that bound before anything is allocated for it;
//! * the tar must end with its end-of-archive marker (two zero blocks), so a payload cut at a
//!   member boundary is refused, not read as a shorter archive; the gzip stream is then read
//!   to its end, so its CRC-32 and length are checked;
//! * names are relative paths without `..` (a leading `./` is stripped); a name that appears
//!   twice is refused; only regular files and directories may appear (directories are
//!   skipped, and so are `*wavegraph-bin.json` debug members, as the vendor's loader does).
//!
//! A refusal names the member (as the `field`) and what was wrong.

use std::collections::BTreeMap;
use std::io::Read;

use crate::error::{Error, Result};
use crate::neff::header::{NeffHeader, PkgVersion};

/// Most unpacked bytes a payload of `packed` bytes may hold: 64 times its size, at least
/// 1 GiB, at most 16 GiB. OpenNRT's choice (the vendor's loader states none): real NEFFs
/// compress their weights far less than 64:1, and the bound keeps a gzip bomb from
/// exhausting memory.
pub fn unpacked_limit(packed: u64) -> u64 {
    packed.saturating_mul(64).clamp(1 << 30, 16 << 30)
}

/// Deflate's largest expansion (zlib's figure): a 258-byte match coded in two bits.
const DEFLATE_MAX_RATIO: u64 = 1032;

/// Bytes of a tar block.
const BLOCK: u64 = 512;

/// The members of a payload, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Payload {
    members: BTreeMap<String, Vec<u8>>,
}

fn bad(member: &str, why: impl std::fmt::Display) -> Error {
    Error::invalid(format!(
        "NEFF payload: {member}: {why} (docs/contract/abi.md §7.2)"
    ))
    .with_field(member)
}

/// The member name of a tar path: `./` stripped; absolute paths, `..`, and empty or non-UTF-8
/// names refused.
fn member_name(raw: &[u8]) -> Result<String> {
    let s = std::str::from_utf8(raw).map_err(|_| bad("payload", "a member name is not UTF-8"))?;
    let s = s.strip_prefix("./").unwrap_or(s);
    let s = s.trim_end_matches('/');
    if s.is_empty() || s.starts_with('/') || s.split('/').any(|c| c == ".." || c.is_empty()) {
        return Err(bad(s, "not a relative path inside the payload"));
    }
    Ok(s.to_string())
}

impl Payload {
    /// Unpack the payload of `file`, whose header is `h`.
    ///
    /// # Errors
    /// `NRT_INVALID` for bad gzip (a CRC-32 or length that does not match included), a damaged
    /// or truncated tar (one without its end-of-archive marker included), a hostile member
    /// name, a duplicate member, a member that is not a regular file, or more unpacked bytes
    /// than [`unpacked_limit`] or the packed bytes allow.
    pub fn read(h: &NeffHeader, file: &[u8]) -> Result<Payload> {
        let packed = h.payload(file);
        // What the packed bytes can physically hold: a size above it is a lie, refused before
        // anything is read or allocated for it.
        let physical = match h.pkg_version {
            PkgVersion::GzipTar => (packed.len() as u64).saturating_mul(DEFLATE_MAX_RATIO),
            PkgVersion::RawTar => packed.len() as u64,
        };
        let limit = unpacked_limit(packed.len() as u64).min(physical);
        let stream: Box<dyn Read + '_> = match h.pkg_version {
            PkgVersion::GzipTar => Box::new(flate2::read::GzDecoder::new(packed)),
            PkgVersion::RawTar => Box::new(packed),
        };
        // One byte over the limit is read, so that "too big" is told apart from "just fits".
        let mut archive = tar::Archive::new(stream.take(limit + 1));
        let mut members = BTreeMap::new();
        let mut left = limit;
        // Where the last entry's data ends, rounded up to its block: the end-of-archive
        // marker starts there.
        let mut end = 0u64;
        let entries = archive
            .entries()
            .map_err(|e| bad("payload", format_args!("not a tar: {e}")))?;
        for entry in entries {
            let mut entry =
                entry.map_err(|e| bad("payload", format_args!("damaged tar or gzip: {e}")))?;
            // The size the tar reader goes by: a pax `size` record overrides the header's.
            let size = entry.size();
            end = entry
                .raw_file_position()
                .saturating_add(size.div_ceil(BLOCK).saturating_mul(BLOCK));
            let name = member_name(&entry.path_bytes())?;
            let kind = entry.header().entry_type();
            if kind.is_dir() {
                continue;
            }
            if !kind.is_file() {
                return Err(bad(
                    &name,
                    format_args!("a {kind:?} entry, not a regular file"),
                ));
            }
            if size > left {
                return Err(bad(
                    &name,
                    format_args!(
                        "{size} bytes would exceed the payload's bound of {limit} unpacked \
                         bytes ({left} left)"
                    ),
                ));
            }
            left -= size;
            let mut data = Vec::new();
            data.try_reserve_exact(size as usize).map_err(|_| {
                Error::new(
                    crate::error::ErrorKind::HostAlloc,
                    format!("NEFF payload: {name}: cannot allocate {size} bytes"),
                )
            })?;
            entry
                .read_to_end(&mut data)
                .map_err(|e| bad(&name, format_args!("truncated: {e}")))?;
            if data.len() as u64 != size {
                return Err(bad(
                    &name,
                    format_args!("truncated: {} of {size} bytes", data.len()),
                ));
            }
            if name.ends_with("wavegraph-bin.json") {
                continue;
            }
            if members.insert(name.clone(), data).is_some() {
                return Err(bad(&name, "appears twice"));
            }
        }
        // The tar reader stops at a zero block (it has read it) or at the end of the stream
        // (it has not): the latter is a payload cut at a member boundary.
        let mut rest = archive.into_inner();
        let consumed = limit + 1 - rest.limit();
        if consumed < end.saturating_add(BLOCK) {
            return Err(bad(
                "payload",
                format_args!(
                    "truncated: the stream ends at byte {consumed}, after the last member, with \
                     no end-of-archive marker (a tar ends with two zero blocks)"
                ),
            ));
        }
        let mut second = [0u8; BLOCK as usize];
        match rest.read_exact(&mut second) {
            Ok(()) if second.iter().all(|&b| b == 0) => {}
            Ok(()) => {
                return Err(bad(
                    "payload",
                    format_args!(
                        "the end-of-archive marker at byte {end} is one zero block, then data \
                         (a tar ends with two zero blocks)"
                    ),
                ))
            }
            Err(e) => {
                return Err(bad(
                    "payload",
                    format_args!(
                        "truncated or damaged in the end-of-archive marker at byte {end}: {e}"
                    ),
                ))
            }
        }
        // The rest of the stream (record padding) is read to its end, so that a gzip stream's
        // CRC-32 and length are checked.
        std::io::copy(&mut rest, &mut std::io::sink()).map_err(|e| {
            bad(
                "payload",
                format_args!("damaged gzip after the end-of-archive marker: {e}"),
            )
        })?;
        if rest.limit() == 0 {
            return Err(bad(
                "payload",
                format_args!("more than the bound of {limit} unpacked bytes"),
            ));
        }
        if members.is_empty() {
            return Err(bad("payload", "no members"));
        }
        Ok(Payload { members })
    }

    /// The member `name`, if present.
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.members.get(name).map(Vec::as_slice)
    }

    /// Every member name, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.members.keys().map(String::as_str)
    }
}

#[cfg(test)]
mod tests;

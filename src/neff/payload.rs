//! The NEFF payload: a POSIX tar, gzip-compressed for package version 2, unpacked in memory
//! (never to disk) into its members by name (docs/contract/abi.md §7.2).
//!
//! The payload is hostile until proven otherwise:
//! * the decompressed bytes are bounded ([`unpacked_limit`]) before they are read, so a gzip
//!   bomb is refused instead of exhausting memory;
//! * a member's size comes from its tar header and is checked against what is left of that
//!   bound before anything is allocated for it;
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
    /// `NRT_INVALID` for bad gzip, a damaged or truncated tar, a hostile member name, a
    /// duplicate member, a member that is not a regular file, or more unpacked bytes than
    /// [`unpacked_limit`] allows.
    pub fn read(h: &NeffHeader, file: &[u8]) -> Result<Payload> {
        let packed = h.payload(file);
        let limit = unpacked_limit(packed.len() as u64);
        let stream: Box<dyn Read + '_> = match h.pkg_version {
            PkgVersion::GzipTar => Box::new(flate2::read::GzDecoder::new(packed)),
            PkgVersion::RawTar => Box::new(packed),
        };
        // One byte over the limit is read, so that "too big" is told apart from "just fits".
        let mut archive = tar::Archive::new(stream.take(limit + 1));
        let mut members = BTreeMap::new();
        let mut left = limit;
        let entries = archive
            .entries()
            .map_err(|e| bad("payload", format_args!("not a tar: {e}")))?;
        for entry in entries {
            let mut entry =
                entry.map_err(|e| bad("payload", format_args!("damaged tar or gzip: {e}")))?;
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
            let size = entry
                .header()
                .size()
                .map_err(|e| bad(&name, format_args!("bad size field: {e}")))?;
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

//! Helpers the fuzz targets share: framing that lets the fuzzer's mutations reach the layers
//! under a checksum (fuzz/README.md, "Checksums").

use std::io::Write as _;

use opennrt::neff::header::layout::{
    DATA_SIZE, HEADER_SIZE, HEADER_SIZE_FIELD, PKG_VERSION, VERSION_MAJOR,
};

/// Bytes of a tar block.
pub const BLOCK: usize = 512;

/// A tar header's size field (octal text, or base-256 when its first byte has the high bit).
fn tar_size(h: &[u8]) -> u64 {
    let f = &h[124..136];
    if f[0] & 0x80 != 0 {
        return f[1..].iter().fold(0u64, |n, &b| {
            n.saturating_mul(256).saturating_add(u64::from(b))
        });
    }
    f.iter()
        .skip_while(|&&b| b == b' ')
        .take_while(|&&b| (b'0'..=b'7').contains(&b))
        .fold(0u64, |n, &b| {
            n.saturating_mul(8).saturating_add(u64::from(b - b'0'))
        })
}

/// Rewrite the checksum of every tar header in `tar`, walking header to header by each
/// header's size field, up to the first zero block: a mutated header then fails on what was
/// mutated, not on its checksum.
pub fn fix_tar_checksums(tar: &mut [u8]) {
    let mut at = 0usize;
    while at + BLOCK <= tar.len() {
        let h = &mut tar[at..at + BLOCK];
        if h.iter().all(|&b| b == 0) {
            break;
        }
        h[148..156].fill(b' ');
        let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
        let text = format!("{sum:06o}\0 ");
        h[148..156].copy_from_slice(&text.as_bytes()[..8]);
        let size = tar_size(h);
        let Some(next) = usize::try_from(size)
            .ok()
            .and_then(|s| s.checked_next_multiple_of(BLOCK))
            .and_then(|s| s.checked_add(at + BLOCK))
        else {
            break;
        };
        at = next;
    }
}

/// A NEFF file around the tar `tar`: package version 2 (gzip, a correct CRC-32 and length)
/// when `gzip`, else 1 (raw tar); the header's sizes fit the payload.
pub fn neff_around(tar: &[u8], gzip: bool) -> Vec<u8> {
    let payload = if gzip {
        let mut gz = flate2::GzBuilder::new()
            .mtime(0)
            .write(Vec::new(), flate2::Compression::fast());
        gz.write_all(tar).expect("in-memory gzip");
        gz.finish().expect("in-memory gzip")
    } else {
        tar.to_vec()
    };
    let mut file = vec![0u8; HEADER_SIZE];
    for (f, v) in [
        (PKG_VERSION, if gzip { 2u64 } else { 1 }),
        (HEADER_SIZE_FIELD, HEADER_SIZE as u64),
        (DATA_SIZE, payload.len() as u64),
        (VERSION_MAJOR, 2),
    ] {
        file[f.range()].copy_from_slice(&v.to_le_bytes());
    }
    file.extend_from_slice(&payload);
    file
}

/// Exercise what a loader does with a parsed NEFF (every accessor a caller walks).
pub fn walk(n: &opennrt::neff::Neff) {
    for g in &n.graphs {
        for p in &g.programs {
            let _ = p.census();
            for w in p.stream.triggers() {
                let _ = w.instr.len();
            }
        }
        for v in &g.vars {
            let _ = g.var(v.var_id);
        }
    }
    let _ = n.inputs().count() + n.outputs().count();
}

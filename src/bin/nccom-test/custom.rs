//! `--custom-replica-groups F` and `--custom-src-target-pairs F`: the vendor's JSON files,
//! `{"replica_groups": [[[0,1,..],[..]]]}` and `{"src_target_pairs": [[[0,1],[1,0],..]]}`.
//!
//! OpenNRT's NEFFs hold one collective, so each file must give exactly one group (the outer
//! list has one entry). Replica subgroups must partition the ranks `0..R` (every rank runs the
//! NEFF, so every rank needs a subgroup) into subgroups of one size `g`, which then plays the
//! rank count's part in sizes and bus factors. Pairs are global ranks, each rank the source of
//! at most one pair and the target of at most one; the NEFF builder also refuses pairs that
//! cross subgroups.

use std::path::Path;

pub use opennrt::nccom_files::ring_pairs;

/// Read a file named by `flag`.
fn read(flag: &str, path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{flag} {}: {e}", path.display()))
}

/// The subgroups of a replica-groups file (parsed by `opennrt::nccom_files::parse_groups`).
pub fn groups(path: &Path, ranks: u32) -> Result<Vec<Vec<u32>>, String> {
    let text = read("--custom-replica-groups", path)?;
    opennrt::nccom_files::parse_groups(&text, ranks, &path.display().to_string())
}

/// The pairs of a src-target-pairs file (parsed by `opennrt::nccom_files::parse_pairs`).
pub fn pairs(path: &Path, ranks: u32) -> Result<Vec<(u32, u32)>, String> {
    let text = read("--custom-src-target-pairs", path)?;
    opennrt::nccom_files::parse_pairs(&text, ranks, &path.display().to_string())
}

#[cfg(test)]
mod tests;

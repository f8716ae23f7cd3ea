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

use serde::Deserialize;

/// `{"replica_groups": …}`.
#[derive(Debug, Deserialize)]
struct GroupsFile {
    replica_groups: Vec<Vec<Vec<u32>>>,
}

/// `{"src_target_pairs": …}`.
#[derive(Debug, Deserialize)]
struct PairsFile {
    src_target_pairs: Vec<Vec<(u32, u32)>>,
}

/// Read a file named by `flag`.
fn read(flag: &str, path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{flag} {}: {e}", path.display()))
}

/// Check that `subgroups` partition `0..ranks` into groups of one size; the subgroups.
pub fn check_groups(subgroups: Vec<Vec<u32>>, ranks: u32) -> Result<Vec<Vec<u32>>, String> {
    let flag = "--custom-replica-groups";
    let g = subgroups.first().map_or(0, Vec::len);
    if g == 0 || subgroups.iter().any(|s| s.len() != g) {
        return Err(format!(
            "{flag}: the subgroups must all have the same number of ranks (at least 1)"
        ));
    }
    let mut seen = vec![false; ranks as usize];
    for &r in subgroups.iter().flatten() {
        match seen.get_mut(r as usize) {
            None => return Err(format!("{flag}: rank {r} is not below -r {ranks}")),
            Some(true) => return Err(format!("{flag}: rank {r} is in two subgroups")),
            Some(s) => *s = true,
        }
    }
    if let Some(r) = seen.iter().position(|s| !s) {
        return Err(format!(
            "{flag}: rank {r} is in no subgroup (every rank runs the NEFF, so the subgroups \
             must cover 0..{ranks})"
        ));
    }
    Ok(subgroups)
}

/// The subgroups of a replica-groups file.
pub fn groups(path: &Path, ranks: u32) -> Result<Vec<Vec<u32>>, String> {
    let flag = "--custom-replica-groups";
    let f: GroupsFile = serde_json::from_str(&read(flag, path)?)
        .map_err(|e| format!("{flag} {}: {e}", path.display()))?;
    let [one]: [Vec<Vec<u32>>; 1] = f.replica_groups.try_into().map_err(|v: Vec<_>| {
        format!(
            "{flag}: {} groups given; OpenNRT's NEFFs hold one collective, give one group",
            v.len()
        )
    })?;
    check_groups(one, ranks)
}

/// Check permute pairs over `0..ranks`.
pub fn check_pairs(pairs: Vec<(u32, u32)>, ranks: u32) -> Result<Vec<(u32, u32)>, String> {
    let flag = "--custom-src-target-pairs";
    if pairs.is_empty() {
        return Err(format!("{flag}: no pairs given"));
    }
    for (i, &(s, t)) in pairs.iter().enumerate() {
        if s >= ranks || t >= ranks {
            return Err(format!(
                "{flag}: pair [{s}, {t}] names a rank not below -r {ranks}"
            ));
        }
        if pairs[..i].iter().any(|p| p.0 == s) {
            return Err(format!("{flag}: rank {s} is the source of two pairs"));
        }
        if pairs[..i].iter().any(|p| p.1 == t) {
            return Err(format!("{flag}: rank {t} is the target of two pairs"));
        }
    }
    Ok(pairs)
}

/// The pairs of a src-target-pairs file.
pub fn pairs(path: &Path, ranks: u32) -> Result<Vec<(u32, u32)>, String> {
    let flag = "--custom-src-target-pairs";
    let f: PairsFile = serde_json::from_str(&read(flag, path)?)
        .map_err(|e| format!("{flag} {}: {e}", path.display()))?;
    let [one]: [Vec<(u32, u32)>; 1] = f.src_target_pairs.try_into().map_err(|v: Vec<_>| {
        format!(
            "{flag}: {} groups of pairs given; OpenNRT's NEFFs hold one collective, give one",
            v.len()
        )
    })?;
    check_pairs(one, ranks)
}

/// The default pairs of a permute: every subgroup member sends to the next one of its
/// subgroup (`r → (r+1) mod R` for the one group of all ranks; docs/neff.md §2, the NEFF
/// builder's default).
pub fn ring_pairs(groups: &[Vec<u32>]) -> Vec<(u32, u32)> {
    groups
        .iter()
        .flat_map(|g| (0..g.len()).map(move |i| (g[i], g[(i + 1) % g.len()])))
        .collect()
}

#[cfg(test)]
mod tests;

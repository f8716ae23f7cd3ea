//! The JSON files `nccom-test` reads (docs/contract/nccom-test.md §2), parsed from their text:
//! the variable-size ops' table (`--variable-size-op-metadata`), the replica subgroups
//! (`--custom-replica-groups`) and the permute pairs (`--custom-src-target-pairs`).
//!
//! A user hands these files to the benchmark, so every parser here treats its text as hostile
//! and answers a bad file with an `Err` message, never a panic (fuzzed: fuzz/README.md). The
//! `nccom-test` binary reads the files and prefixes its messages with the flag and path; the
//! rules are documented on its modules (`src/bin/nccom-test/metadata.rs`, `custom.rs`).

use serde::Deserialize;

use crate::lower::request::A2avMeta;

/// One rank's four rows: send counts, send displacements, receive counts, receive
/// displacements (each one entry per peer, in elements).
pub type Rows = [Vec<u64>; 4];

/// One entry of the metadata file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    send_counts: Vec<u64>,
    send_displs: Vec<u64>,
    recv_counts: Option<Vec<u64>>,
    recv_displs: Option<Vec<u64>>,
}

/// `{"metadata": [...]}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MetadataFile {
    metadata: Vec<Entry>,
}

/// The rows per position of a metadata file's text for groups of `g`: `all_gather_v` is the op
/// `allgv` (one send window per rank), else `alltoallv` (one per peer); `op_name` names the op
/// in messages. The rules: `src/bin/nccom-test/metadata.rs`.
pub fn parse_metadata(
    text: &str,
    all_gather_v: bool,
    op_name: &str,
    g: u32,
) -> Result<Vec<Rows>, String> {
    let mut f: MetadataFile = serde_json::from_str(text).map_err(|e| format!("bad JSON: {e}"))?;
    // The vendor's guide writes `"recv_counts": []`: an empty receive row means left out.
    for e in &mut f.metadata {
        e.recv_counts.take_if(|v| v.is_empty());
        e.recv_displs.take_if(|v| v.is_empty());
    }
    let n = g as usize;
    let entries = f.metadata.len();
    if entries != 1 && entries != n {
        return Err(format!(
            "{entries} metadata entries; give one for every rank or one per rank ({n})"
        ));
    }
    let send_len = if all_gather_v { 1 } else { n };
    let entry = |q: usize| &f.metadata[if entries == 1 { 0 } else { q }];
    for (k, e) in f.metadata.iter().enumerate() {
        for (name, list, want) in [
            ("send_counts", Some(&e.send_counts), send_len),
            ("send_displs", Some(&e.send_displs), send_len),
            ("recv_counts", e.recv_counts.as_ref(), n),
            ("recv_displs", e.recv_displs.as_ref(), n),
        ] {
            let Some(l) = list else { continue };
            if l.len() != want {
                return Err(format!(
                    "entry {k}: {name} has {} entries; {} on groups of {n} needs {want}",
                    l.len(),
                    op_name
                ));
            }
            // The device reads uint32 entries (`metadata0`); a larger value cannot be written.
            if let Some((i, v)) = l.iter().enumerate().find(|(_, &v)| v > u64::from(u32::MAX)) {
                return Err(format!(
                    "entry {k}: {name}[{i}] = {v} is above {}, the largest entry metadata0 holds",
                    u32::MAX
                ));
            }
        }
    }
    // What position q sends to peer p, and from where.
    let send = |q: usize, p: usize| -> (u64, u64) {
        let e = entry(q);
        let i = if all_gather_v { 0 } else { p };
        (e.send_counts[i], e.send_displs[i])
    };
    let mut out = Vec::with_capacity(n);
    for r in 0..n {
        let e = entry(r);
        let sends: Vec<(u64, u64)> = (0..n).map(|p| send(r, p)).collect();
        let recv_counts = match &e.recv_counts {
            Some(c) => c.clone(),
            None => (0..n).map(|q| send(q, r).0).collect(),
        };
        let recv_displs = match &e.recv_displs {
            Some(d) => d.clone(),
            None => recv_counts
                .iter()
                .scan(0u64, |at, &c| {
                    let d = *at;
                    *at = at.saturating_add(c);
                    Some(d)
                })
                .collect(),
        };
        out.push([
            sends.iter().map(|s| s.0).collect(),
            sends.iter().map(|s| s.1).collect(),
            recv_counts,
            recv_displs,
        ]);
    }
    Ok(out)
}

/// Check `rows` against one size's buffers (`in_elems`, `out_elems` per rank) by the runtime's
/// own rules; the reason it does not fit, naming rank, peer and values.
pub fn check_fits(rows: &[Rows], in_elems: u64, out_elems: u64) -> Result<(), String> {
    let meta = A2avMeta::from_bitmap(0x0F, in_elems, out_elems, None)
        .map_err(|e| e.message().to_string())?;
    let all: Vec<Vec<Vec<u64>>> = rows.iter().map(|r| r.to_vec()).collect();
    meta.resolve(rows.len() as u32, &all)
        .map(|_| ())
        .map_err(|e| e.message().to_string())
}

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

/// The subgroups of a replica-groups file's `text`, checked over `0..ranks`; `origin` (the
/// path) names the file in a JSON error.
pub fn parse_groups(text: &str, ranks: u32, origin: &str) -> Result<Vec<Vec<u32>>, String> {
    let flag = "--custom-replica-groups";
    let f: GroupsFile = serde_json::from_str(text).map_err(|e| format!("{flag} {origin}: {e}"))?;
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

/// The pairs of a src-target-pairs file's `text`, checked over `0..ranks`; `origin` (the
/// path) names the file in a JSON error.
pub fn parse_pairs(text: &str, ranks: u32, origin: &str) -> Result<Vec<(u32, u32)>, String> {
    let flag = "--custom-src-target-pairs";
    let f: PairsFile = serde_json::from_str(text).map_err(|e| format!("{flag} {origin}: {e}"))?;
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

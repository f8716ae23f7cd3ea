//! The tables of the variable-size ops (`alltoallv`, `allgv`): `--variable-size-op-metadata F`
//! (alias `--alltoallv-metadata`, its 2.28 name), or equal blocks without it.
//!
//! The file is the vendor's (docs/contract/nccom-test.md §2):
//! `{"metadata":[{"send_counts":[..],"send_displs":[..],"recv_counts":[..],"recv_displs":[..]}]}`,
//! in elements, one entry for every rank or one entry per rank (position in the replica
//! subgroup). For `alltoallv` the `send_*` lists have one entry per peer; for `allgv` they have
//! one entry (the rank's one window, sent to every peer). `recv_counts` and `recv_displs` may be
//! left out, or given as `[]` (as the vendor's guide writes them), which is the same: the counts are then what the peers send, and the windows are packed in peer order
//! from element 0; given, they must agree with what the peers send.
//!
//! What the NEFF's `metadata0` input receives is the same four rows the device reads
//! (docs/neff.md §2): [`Rows`] per position. The whole table is checked here, against each
//! size's buffers, by the runtime's own rules (`A2avMeta::resolve`: windows inside the
//! buffers, receive counts equal to what the peers send, no overlapping receive windows), so a
//! table a size cannot hold is refused before anything runs: the rules that do not depend on the
//! size once when the file is read ([`load`], the message naming the file), the windows against
//! every size's buffers by the caller ([`check_fits`], the message naming the size). Entries
//! must fit the uint32 the device reads.

use std::path::Path;

use opennrt::lower::request::A2avMeta;
use opennrt::neff::build::BuildSpec;
use serde::Deserialize;

use crate::ops::Op;

/// One rank's four rows: send counts, send displacements, receive counts, receive
/// displacements (each one entry per peer, in elements).
pub type Rows = [Vec<u64>; 4];

/// One entry of the file.
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
struct File {
    metadata: Vec<Entry>,
}

/// The flag's name, for messages.
const FLAG: &str = "--variable-size-op-metadata";

/// The equal-blocks table of `op` for a per-rank block of `count` on groups of `g`: the NEFF
/// builder's (`BuildSpec::uniform_metadata`), the same on every rank.
pub fn uniform(op: Op, g: u32, count: u64) -> Vec<Rows> {
    let b = match op {
        Op::AllGatherV => Op::AllGatherV,
        _ => Op::AllToAllV,
    };
    let rows = BuildSpec::new(b, g, count, opennrt::isa::enums::Dtype::Uint8)
        .uniform_metadata()
        .expect("a variable-size op has a table");
    vec![rows; g as usize]
}

/// Read and parse the file at `path` for `op` on groups of `g`, and check the rules that do
/// not depend on a size (receive counts equal to what the peers send, no overlapping receive
/// windows) once here, so that their message names the file rather than the first size.
pub fn load(path: &Path, op: Op, g: u32) -> Result<Vec<Rows>, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("{FLAG} {}: {e}", path.display()))?;
    let rows = parse(&text, op, g).map_err(|e| format!("{FLAG} {}: {e}", path.display()))?;
    check_fits(&rows, u64::MAX, u64::MAX).map_err(|e| format!("{FLAG} {}: {e}", path.display()))?;
    Ok(rows)
}

/// The rows per position of a file's text (see the module doc for the rules).
pub fn parse(text: &str, op: Op, g: u32) -> Result<Vec<Rows>, String> {
    let mut f: File = serde_json::from_str(text).map_err(|e| format!("bad JSON: {e}"))?;
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
    let send_len = if op == Op::AllGatherV { 1 } else { n };
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
                    op.nccom_name()
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
        let i = if op == Op::AllGatherV { 0 } else { p };
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

#[cfg(test)]
mod tests;

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

pub use opennrt::nccom_files::{check_fits, Rows};
use opennrt::neff::build::BuildSpec;

use crate::ops::Op;

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

/// The rows per position of a file's text (see the module doc for the rules; the parser is the
/// library's, `opennrt::nccom_files`).
pub fn parse(text: &str, op: Op, g: u32) -> Result<Vec<Rows>, String> {
    opennrt::nccom_files::parse_metadata(text, op == Op::AllGatherV, op.nccom_name(), g)
}

#[cfg(test)]
mod tests;

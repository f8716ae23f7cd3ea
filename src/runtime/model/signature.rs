//! The cross-rank check of a model's collective sequence, at its first execution
//! (docs/contract/abi.md §5.9: the vendor exchanges per-replica-group MD5 signatures of the
//! ordered op list and aborts on a mismatch; its users know it as "mismatching number of cc
//! ops, expected 3 received 6").
//!
//! For every replica group the model's collectives use, the ranks of the group all-gather a
//! 32-byte record — the MD5 of the group's op list (op, dtype, count, reduce op, group, in
//! place, tensor lists, one line per collective), the number of ops and the list's length.
//! Equal records: done. Otherwise a second all-gather carries every rank's whole list, and
//! every rank fails with the same message: the first rank whose list differs from the group's
//! rank 0, both op counts, and the first collective in which they differ with both values.
//!
//! Choice: the exchange runs as device all-gathers of uint8 on the group (lowered and executed
//! like any collective), so it works wherever the collectives do (threads of one process, or
//! processes of a job) and a rank that never arrives fails it with `NRT_TIMEOUT` naming the
//! missing ranks. A rank whose NEFF uses a group the others' do not waits on it until then.

use std::collections::BTreeMap;
use std::sync::Arc;

use md5::Digest as _;
use parking_lot::Mutex;

use super::NeffCollective;
use crate::error::{Error, Result};
use crate::isa::enums::Dtype;
use crate::lower::request::{CollectiveOp, CollectiveRequest};
use crate::runtime::collective::{self, agreed_fields, Arrival, VecIo};
use crate::runtime::comm::Slot;
use crate::runtime::rendezvous::GroupKey;

/// Bytes of one rank's record: MD5, op count, list length.
const RECORD: usize = 32;
/// The meeting kind of the check's all-gathers.
const KIND: &str = "neff-signature";
/// What a failed exchange was, for its error.
const WHAT: &str = "the cross-rank check of the model's collective sequence";

/// One collective as a line of the op list.
fn describe(r: &CollectiveRequest) -> String {
    agreed_fields(r)
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Check every group of `collectives` (this rank's model) against the other ranks'.
///
/// # Errors
/// `NRT_INVALID` naming the two ranks and the first difference; the exchange's own errors.
pub fn check(collectives: &[NeffCollective], world: u32) -> Result<()> {
    let mut groups: BTreeMap<Vec<u32>, (u32, Vec<String>)> = BTreeMap::new();
    for c in collectives {
        groups
            .entry(c.req.group.clone())
            .or_insert_with(|| (c.req.rank, Vec::new()))
            .1
            .push(describe(&c.req));
    }
    for (group, (rank, ops)) in &groups {
        if group.len() > 1 {
            check_group(group, *rank, ops, world)?;
        }
    }
    Ok(())
}

fn check_group(group: &[u32], rank: u32, ops: &[String], world: u32) -> Result<()> {
    let text = ops.join("\n").into_bytes();
    let mut record = [0u8; RECORD];
    record[..16].copy_from_slice(&md5::Md5::digest(&text));
    record[16..24].copy_from_slice(&(ops.len() as u64).to_le_bytes());
    record[24..32].copy_from_slice(&(text.len() as u64).to_le_bytes());
    let all = gather(KIND, group, rank, &record, world).map_err(|e| e.context(WHAT))?;
    let records: Vec<&[u8]> = all.chunks(RECORD).collect();
    if records.iter().all(|r| *r == records[0]) {
        return Ok(());
    }
    let len_of = |r: &[u8]| u64::from_le_bytes(r[24..32].try_into().expect("8 bytes"));
    let count_of = |r: &[u8]| u64::from_le_bytes(r[16..24].try_into().expect("8 bytes"));
    let max = records.iter().map(|r| len_of(r)).max().unwrap_or(0) as usize;
    let mut padded = text.clone();
    padded.resize(max.max(1), 0);
    let lists = gather(KIND, group, rank, &padded, world).map_err(|e| e.context(WHAT))?;
    let list_of = |q: usize| -> Vec<String> {
        let chunk = &lists[q * max.max(1)..][..len_of(records[q]) as usize];
        String::from_utf8_lossy(chunk)
            .split('\n')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    };
    let first = list_of(0);
    let b = (1..records.len())
        .find(|&q| records[q] != records[0])
        .expect("some record differs");
    let other = list_of(b);
    let (n0, nb) = (count_of(records[0]), count_of(records[b]));
    let k = first
        .iter()
        .zip(&other)
        .position(|(x, y)| x != y)
        .unwrap_or(first.len().min(other.len()));
    let show = |l: &[String]| l.get(k).cloned().unwrap_or_else(|| "nothing".into());
    Err(Error::invalid(format!(
        "mismatched collectives between the ranks of group {group:?}: rank 0 (global id {}) \
         carries {n0} collective(s), rank {b} (global id {}) carries {nb}; the first \
         difference is collective #{k}: rank 0 has {}, rank {b} has {} (the ranks' NEFFs \
         were compiled differently; docs/contract/abi.md §5.9)",
        group[0],
        group[b],
        show(&first),
        show(&other)
    ))
    .with_op("collective sequence")
    .with_rank(b as u32)
    .with_step(k as u64)
    .with_field("collectives")
    .with_values(n0, nb))
}

/// All-gather `bytes` (the same length on every rank) over `group` on the device, as meetings
/// of `kind` (one the job's root knows, `runtime::multi_process`): the sequence check here and
/// the all-to-all-v table exchange (`super::a2av`).
pub(super) fn gather(
    kind: &'static str,
    group: &[u32],
    rank: u32,
    bytes: &[u8],
    world: u32,
) -> Result<Vec<u8>> {
    let req = CollectiveRequest::new(
        CollectiveOp::AllGather,
        Dtype::Uint8,
        None,
        bytes.len() as u64,
        group.to_vec(),
        rank,
    );
    let lowered = collective::prepare(&req, world)?;
    let key = GroupKey {
        kind,
        slot: Slot::Neff as u8,
        group: group.to_vec(),
    };
    let ticket = collective::meetings().ticket(&key, rank);
    let output = Arc::new(Mutex::new(Vec::new()));
    collective::run(
        &key,
        ticket,
        Arrival {
            req,
            lowered,
            io: Box::new(VecIo {
                input: bytes.to_vec(),
                output: output.clone(),
            }),
        },
    )?;
    let out = output.lock().clone();
    Ok(out)
}

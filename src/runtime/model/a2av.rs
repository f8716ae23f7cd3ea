//! All-to-all-v from a NEFF: the table is data, read at execution (docs/neff.md §1.3).
//!
//! The 0xD9+0xDA ALL_TO_ALL_V word names a metadata tensor (src1: 4 rows of rank_n uint32 —
//! send counts, send displacements, receive counts, receive displacements; `src1_bitmap` says
//! which rows are inputs, docs/contract/isa.md §9 rule 9). The counts live in a device tensor
//! the application writes between executions, so nothing can be lowered at load. At every
//! `nrt_execute`:
//!
//! 1. each rank reads its metadata tensor (`4·rank_n` entries from the operand's offset);
//! 2. the group's ranks all-gather those bytes on the device (meetings of kind `neff-a2av`,
//!    like the sequence check's, so it works in threads and in processes);
//! 3. every rank resolves the same table from the same rows (`A2avMeta::resolve`: windows
//!    inside the buffers, given receive counts equal to what the peers send, no overlapping
//!    receive windows), so a bad table fails on every rank with the same message, and nobody
//!    waits for a peer that gave up;
//! 4. the request with its table is prepared (lowered, verified, emitted; cached by the table,
//!    so a table that does not change is lowered once) and run like any collective.
//!
//! Only the receive windows of the output are stored ([`windows`]); the rest keeps what the
//! tensor held. After the run, when row 2 is an output (bitmap bit 2 clear) the counts actually received are
//! written into it, as the device does.
//!
//! Choice: the exchange is one small all-gather per all-to-all-v execution (16·rank_n bytes
//! per rank). The vendor's device reads the peers' metadata itself; here the table must be
//! known to the lowering before the program exists, and the exchange is what makes every
//! rank's program the same.

use std::sync::Arc;

use super::{Binding, NeffCollective};
use crate::error::{Error, Result};
use crate::lower::request::{decode_metadata, metadata_bytes, A2avRow, CollectiveRequest};
use crate::runtime::collective::{self, Lowered};
use crate::runtime::tensor::Tensor;

/// The meeting kind of the table exchange.
const KIND: &str = "neff-a2av";

/// This execution's request (with its resolved table) and program, for collective `c` whose
/// metadata operand is bound to `meta`.
///
/// # Errors
/// `NRT_INVALID` for a table the resolution refuses (the same on every rank); the exchange's
/// and the lowering's own errors.
pub(super) fn prepare(
    c: &NeffCollective,
    meta: &Tensor,
    world: u32,
) -> Result<(CollectiveRequest, Arc<Lowered>)> {
    let m = c
        .req
        .a2av
        .as_ref()
        .ok_or_else(|| Error::failure("an all-to-all-v without metadata (an OpenNRT bug)"))?;
    let b = c.meta.as_ref().ok_or_else(|| {
        Error::failure("an all-to-all-v without a metadata binding (an OpenNRT bug)")
    })?;
    let n = c.req.rank_n();
    let len = metadata_bytes(n);
    let mut own = vec![0u8; len as usize];
    meta.read(b.offset, &mut own)?;
    let all = super::signature::gather(KIND, &c.req.group, c.req.rank, &own, world)
        .map_err(|e| e.context("the all-to-all-v table exchange"))?;
    let rows = all
        .chunks(len as usize)
        .map(|r| decode_metadata(n, r))
        .collect::<Result<Vec<_>>>()?;
    let mut req = c.req.clone();
    req.a2av = Some(m.clone().with_table(n, &rows)?);
    let lowered = collective::prepare_with(&req, world, c.forced)?;
    Ok((req, lowered))
}

/// The byte ranges of this rank's output its receive windows cover (`None` without a table).
pub(super) fn windows(req: &CollectiveRequest) -> Option<Vec<(u64, u64)>> {
    let t = req.a2av.as_ref()?.table.as_ref()?;
    let esize = req.elem_bytes().unwrap_or(1);
    let r = req.rank as usize;
    Some(
        t.recv_displs[r]
            .iter()
            .zip(&t.recv_counts[r])
            .filter(|(_, &c)| c > 0)
            .map(|(&d, &c)| (d * esize, c * esize))
            .collect(),
    )
}

/// After the run: when row 2 of the metadata is an output, write the counts this rank
/// received into it (uint32, little-endian).
pub(super) fn write_back(req: &CollectiveRequest, meta: &Tensor, b: &Binding) -> Result<()> {
    let Some(m) = &req.a2av else { return Ok(()) };
    let Some(t) = &m.table else { return Ok(()) };
    if m.rows[2] != A2avRow::Output {
        return Ok(());
    }
    let n = u64::from(req.rank_n());
    let row: Vec<u8> = t.recv_counts[req.rank as usize]
        .iter()
        .flat_map(|&v| (v as u32).to_le_bytes())
        .collect();
    meta.write(b.offset + 2 * 4 * n, &row)
}

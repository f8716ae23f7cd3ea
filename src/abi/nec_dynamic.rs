//! `nec.h` dynamic-size callbacks (docs/contract/abi.md §3.10): libnccom asks the runtime how many
//! bytes a ragged (all-to-all-v) collective sends to, and receives from, each rank, reading a
//! per-rank table in host memory described by an `enc_host_mem_t`. No lifecycle guard (see
//! [`nec`](super::nec)); every access is bounds- and alignment-checked, and an invalid argument
//! is logged and answered with 0 (or ignored, for the setter).

use crate::abi::boundary::{enter_value, enter_void};
use std::ffi::c_int;

use crate::abi::boundary::{in_ref, Guard};
use crate::abi::types::*;
use crate::error::{Error, Result};

/// (L) Layout of `dyn_input->va` read by the four dynamic-size callbacks: four arrays of
/// `rank_n` `uint64_t` element counts, one after another — send counts, send offsets, receive
/// offsets, receive counts — so the table needs `4 * rank_n * 8` bytes of `dyn_input->size`.
/// Byte values are element values times `data_type_sz`.
pub const DYN_TABLES: usize = 4;
const SEND_COUNT: usize = 0;
const SEND_OFFSET: usize = 1;
const RECV_OFFSET: usize = 2;
const RECV_COUNT: usize = 3;

/// The address of entry `rank` of table `table`, bounds- and alignment-checked.
///
/// # Safety
/// `dyn_input` must be NULL or point to an `enc_host_mem_t` that is readable and not written
/// during this call; its `va` is only offset here, never dereferenced, but must be NULL or
/// point to `size` bytes for the returned pointer to be usable.
unsafe fn dyn_slot(
    dyn_input: *const enc_host_mem_t,
    data_type_sz: usize,
    rank: c_int,
    rank_n: c_int,
    table: usize,
) -> Result<*mut u64> {
    // SAFETY: `dyn_input` is NULL (refused by in_ref) or valid for reads, as # Safety requires.
    let m = unsafe { in_ref(dyn_input, "dyn_input") }?;
    if data_type_sz == 0 {
        return Err(Error::invalid("data_type_sz is 0"));
    }
    let n = usize::try_from(rank_n)
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| Error::invalid(format!("rank_n {rank_n} is not positive")))?;
    let r = usize::try_from(rank)
        .ok()
        .filter(|r| *r < n)
        .ok_or_else(|| Error::invalid(format!("rank {rank} is outside 0..{n}")))?;
    let need = n
        .checked_mul(DYN_TABLES * std::mem::size_of::<u64>())
        .ok_or_else(|| Error::invalid(format!("rank_n {n} is too large")))?;
    if m.va.is_null() {
        return Err(Error::invalid("dyn_input->va is NULL"));
    }
    if m.size < need {
        return Err(Error::invalid(format!(
            "dyn_input->size {} is smaller than the {need} bytes of the {DYN_TABLES} per-rank tables for {n} ranks",
            m.size
        )));
    }
    let base = m.va.cast::<u64>();
    if !base.is_aligned() {
        return Err(Error::invalid("dyn_input->va is not 8-byte aligned"));
    }
    // SAFETY: table * n + r < 4 * n, inside the `need` bytes checked above.
    Ok(unsafe { base.add(table * n + r) })
}

/// # Safety
/// `dyn_input` must be NULL or point to an `enc_host_mem_t` that is readable and not written
/// during this call, whose `va` is NULL or readable for `size` bytes.
unsafe fn dyn_bytes(
    dyn_input: *const enc_host_mem_t,
    data_type_sz: usize,
    rank: c_int,
    rank_n: c_int,
    table: usize,
) -> Result<usize> {
    // SAFETY: `dyn_input` is NULL or a readable `enc_host_mem_t` not written during this call
    // (this function's contract), which is what `dyn_slot` requires.
    let p = unsafe { dyn_slot(dyn_input, data_type_sz, rank, rank_n, table) }?;
    // SAFETY: `dyn_slot` checked `p` is non-NULL, 8-byte aligned and inside the first `size`
    // bytes at `va`, which are readable (this function's contract).
    let elems = unsafe { p.read() };
    usize::try_from(elems)
        .ok()
        .and_then(|e| e.checked_mul(data_type_sz))
        .ok_or_else(|| {
            Error::invalid(format!(
                "{elems} elements of {data_type_sz} bytes overflow size_t"
            ))
        })
}

/// (L) Bytes to send to `dst_rank`: send count × `data_type_sz` (layout at [`DYN_TABLES`]).
/// Returns 0 (and logs) on any invalid argument.
///
/// # Safety
/// `dyn_input` must be NULL or valid for reading one `enc_host_mem_t`, not written during this
/// call; its `va` NULL or readable for `size` bytes.
pub unsafe extern "C" fn nec_get_dynamic_send_size_bytes(
    dyn_input: *mut enc_host_mem_t,
    data_type_sz: usize,
    dst_rank: c_int,
    rank_n: c_int,
) -> usize {
    enter_value("nec_get_dynamic_send_size_bytes", Guard::None, 0, || {
        // SAFETY: `dyn_input` is NULL or valid and its `va` readable for `size` bytes (this
        // function's contract), which is `dyn_bytes`'s contract.
        unsafe { dyn_bytes(dyn_input, data_type_sz, dst_rank, rank_n, SEND_COUNT) }
    })
}

/// (L) Byte offset in the send buffer of the data for `dst_rank`. Returns 0 (and logs) on any
/// invalid argument.
///
/// # Safety
/// As for `nec_get_dynamic_send_size_bytes`.
pub unsafe extern "C" fn nec_get_dynamic_send_offset_bytes(
    dyn_input: *mut enc_host_mem_t,
    data_type_sz: usize,
    dst_rank: c_int,
    rank_n: c_int,
) -> usize {
    enter_value("nec_get_dynamic_send_offset_bytes", Guard::None, 0, || {
        // SAFETY: `dyn_input` is NULL or valid and its `va` readable for `size` bytes (this
        // function's contract), which is `dyn_bytes`'s contract.
        unsafe { dyn_bytes(dyn_input, data_type_sz, dst_rank, rank_n, SEND_OFFSET) }
    })
}

/// (L) Byte offset in the receive buffer of the data from `src_rank`. Returns 0 (and logs) on
/// any invalid argument.
///
/// # Safety
/// As for `nec_get_dynamic_send_size_bytes`.
pub unsafe extern "C" fn nec_get_dynamic_recv_offset_bytes(
    dyn_input: *mut enc_host_mem_t,
    data_type_sz: usize,
    src_rank: c_int,
    rank_n: c_int,
) -> usize {
    enter_value("nec_get_dynamic_recv_offset_bytes", Guard::None, 0, || {
        // SAFETY: `dyn_input` is NULL or valid and its `va` readable for `size` bytes (this
        // function's contract), which is `dyn_bytes`'s contract.
        unsafe { dyn_bytes(dyn_input, data_type_sz, src_rank, rank_n, RECV_OFFSET) }
    })
}

/// (L) Record that `recv_size_bytes` arrived from `src_rank`: stores
/// `recv_size_bytes / data_type_sz` in the receive-count table. A size that is not a whole
/// number of elements, or any invalid argument, is logged and ignored.
///
/// # Safety
/// `dyn_input` must be NULL or valid for reading one `enc_host_mem_t`, not written during this
/// call; its `va` NULL or readable and writable for `size` bytes, with no other access to them
/// during this call.
pub unsafe extern "C" fn nec_set_recv_size_bytes(
    dyn_input: *mut enc_host_mem_t,
    recv_size_bytes: usize,
    data_type_sz: usize,
    src_rank: c_int,
    rank_n: c_int,
) {
    enter_void("nec_set_recv_size_bytes", Guard::None, || {
        // SAFETY: `dyn_input` is NULL or valid (this function's contract), which is what
        // `dyn_slot` requires.
        let p = unsafe { dyn_slot(dyn_input, data_type_sz, src_rank, rank_n, RECV_COUNT) }?;
        if recv_size_bytes % data_type_sz != 0 {
            return Err(Error::invalid(format!(
                "recv_size_bytes {recv_size_bytes} is not a multiple of data_type_sz {data_type_sz}"
            )));
        }
        // SAFETY: `dyn_slot` checked `p` is non-NULL, 8-byte aligned and inside the first `size`
        // bytes at `va`, which are writable (this function's contract).
        unsafe { p.write((recv_size_bytes / data_type_sz) as u64) };
        Ok(())
    })
}

#[cfg(test)]
mod tests;

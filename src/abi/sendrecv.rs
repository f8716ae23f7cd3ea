//! `nrt_async_sendrecv.h`: point-to-point async send/recv between logical cores, possibly on
//! other hosts (docs/contract/abi.md §3.7, §5.12; symbol node `NRT_2.0.0`).
//!
//! The vendor's entry points are unguarded thunks (the engine behind them checks the state,
//! spec §5.1), so these run with no lifecycle guard of their own: `init` itself fails with
//! `NRT_FAILURE` outside an initialised runtime. Each entry makes one call into
//! `runtime::sendrecv`; this file only checks arguments, hands out handles and maps errors.
//!
//! **Handles.** A communicator lives until `nrt_async_sendrecv_close` of its core (the header
//! has no other way to end one); a request until `test_request` reports it done. Both are
//! registered handles (`abi::handle`), so a handle used after that is `NRT_INVALID_HANDLE`,
//! never a dangling pointer; `nrt_close` frees whatever is left.

use crate::abi::boundary::enter_status;
use std::collections::BTreeMap;
use std::ffi::{c_char, c_int};

use parking_lot::Mutex;

use crate::abi::args::tensor_of;
use crate::abi::boundary::{out_param, req_cstr, Guard};
use crate::abi::handle::{self, Opaque};
use crate::abi::types::*;
use crate::error::{Error, ErrorKind, Result};
use crate::runtime::sendrecv::{self, Comm, Request, Settings};
use crate::runtime::{process, state};

/// Communicators per logical core (the vendor's connect-task ring holds 128; docs/contract/abi.md
/// §10 item 13).
pub const MAX_COMMUNICATORS_PER_LNC: c_int = 128;
/// Pending requests per communicator (docs/contract/abi.md §3.7).
pub const MAX_PENDING_REQUESTS: c_int = 128;
// The header's numbers (literal, for cbindgen) are the core's.
const _: () = assert!(MAX_COMMUNICATORS_PER_LNC as usize == sendrecv::MAX_COMMUNICATORS_PER_LNC);
const _: () = assert!(MAX_PENDING_REQUESTS as usize == sendrecv::MAX_PENDING_REQUESTS);

/// The object behind `nrt_async_sendrecv_comm_t *`.
#[derive(Debug)]
struct CommObject {
    comm: Comm,
}

impl Opaque for CommObject {
    type Handle = nrt_async_sendrecv_comm;
    const KIND: &'static str = "async send/recv communicator";
    const PER_INIT: bool = true;
}

/// The object behind `nrt_async_sendrecv_request_t *`.
#[derive(Debug)]
struct RequestObject {
    request: Request,
}

impl Opaque for RequestObject {
    type Handle = nrt_async_sendrecv_request;
    const KIND: &'static str = "async send/recv request";
    const PER_INIT: bool = true;
}

/// The handle addresses handed out for one core.
#[derive(Debug, Default)]
struct CoreHandles {
    comms: Vec<usize>,
    requests: Vec<usize>,
}

/// The handles handed out per core, released by a successful close of the core.
static HANDLES: Mutex<BTreeMap<u32, CoreHandles>> = Mutex::new(BTreeMap::new());

/// `nrt_close`: `abi::handle` frees the objects; forget their addresses.
pub(crate) fn forget_handles() {
    HANDLES.lock().clear();
}

fn lnc_arg(v: c_int, what: &str) -> Result<u32> {
    u32::try_from(v)
        .ok()
        .filter(|&l| l < sendrecv::LNC_COUNT)
        .ok_or_else(|| {
            Error::invalid(format!(
                "{what} {v} is not a host logical core (0..{})",
                sendrecv::LNC_COUNT
            ))
            .with_field(what)
        })
}

/// The connect or accept entry's body.
///
/// # Safety
/// `peer_ip` must be NULL or NUL-terminated; `out` NULL or valid for writing one communicator
/// handle.
unsafe fn open_comm(
    peer_ip: *const c_char,
    peer_lnc: c_int,
    lnc: c_int,
    out: *mut *mut nrt_async_sendrecv_comm_t,
    accept: bool,
) -> Result<()> {
    let name = if accept { "recv_comm" } else { "send_comm" };
    // SAFETY: `out` is NULL or valid for one write (this function's contract); `out_param`
    // refuses NULL and misalignment, so `out.write` below is in bounds.
    let out = unsafe { out_param(out, name) }?;
    // SAFETY: `peer_ip` is NULL or NUL-terminated (this function's contract); `req_cstr`
    // refuses NULL.
    let ip = unsafe { req_cstr(peer_ip, "peer_ip") }?;
    let peer_lnc = lnc_arg(peer_lnc, "peer_lnc")?;
    let lnc = lnc_arg(lnc, "lnc")?;
    let comm = match accept {
        true => sendrecv::accept(lnc, &ip, peer_lnc)?,
        false => sendrecv::connect(lnc, &ip, peer_lnc)?,
    };
    let h = handle::export(CommObject { comm });
    HANDLES
        .lock()
        .entry(lnc)
        .or_default()
        .comms
        .push(h as usize);
    out.write(h);
    Ok(())
}

/// The send or receive entry's body.
///
/// # Safety
/// `tensor` and `comm` may be any value (NULL and non-live handles are refused before any
/// dereference); live ones must not be freed by another thread during this call. `request`
/// must be NULL or valid for writing one request handle.
unsafe fn post(
    tensor: *mut nrt_tensor_t,
    offset: usize,
    length: usize,
    comm: *mut nrt_async_sendrecv_comm_t,
    request: *mut *mut nrt_async_sendrecv_request_t,
    send: bool,
) -> Result<()> {
    // SAFETY: `request` is NULL or valid for one write (this function's contract); `out_param`
    // refuses NULL and misalignment, so `out.write` below is in bounds.
    let out = unsafe { out_param(request, "request") }?;
    let name = if send { "send_comm" } else { "recv_comm" };
    // SAFETY: a live `comm` is not freed during this call (this function's contract), so `c`
    // stays valid; `handle::get` refuses NULL and non-live handles before any dereference.
    let c = unsafe { handle::get::<CommObject>(comm, name) }?;
    // SAFETY: a live `tensor` is not freed during this call (this function's contract), as
    // `tensor_of` requires; it refuses NULL and non-live handles before any dereference.
    let t = unsafe { tensor_of(tensor, "tensor") }?;
    let r = match send {
        true => c.comm.send(&t, offset as u64, length as u64)?,
        false => c.comm.recv(&t, offset as u64, length as u64)?,
    };
    let lnc = r.lnc();
    let h = handle::export(RequestObject { request: r });
    HANDLES
        .lock()
        .entry(lnc)
        .or_default()
        .requests
        .push(h as usize);
    out.write(h);
    Ok(())
}

/// Maximum number of communicators per logical core: 128. Legal in any state.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` if `num` is NULL.
///
/// # Safety
/// `num` must be NULL or writable.
pub unsafe extern "C" fn nrt_async_sendrecv_get_max_num_communicators_per_lnc(
    num: *mut c_int,
) -> NRT_STATUS {
    enter_status(
        "nrt_async_sendrecv_get_max_num_communicators_per_lnc",
        Guard::None,
        || {
            // SAFETY: `num` is NULL or valid for writing one `int` (this function's contract);
            // `out_param` refuses NULL and misalignment, so the write is in bounds.
            unsafe { out_param(num, "num") }?.write(MAX_COMMUNICATORS_PER_LNC);
            Ok(())
        },
    )
}

/// Maximum number of pending requests per communicator: 128. Legal in any state.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` if `num` is NULL.
///
/// # Safety
/// `num` must be NULL or writable.
pub unsafe extern "C" fn nrt_async_sendrecv_get_max_num_pending_request(
    num: *mut c_int,
) -> NRT_STATUS {
    enter_status(
        "nrt_async_sendrecv_get_max_num_pending_request",
        Guard::None,
        || {
            // SAFETY: `num` is NULL or valid for writing one `int` (this function's contract);
            // `out_param` refuses NULL and misalignment, so the write is in bounds.
            unsafe { out_param(num, "num") }?.write(MAX_PENDING_REQUESTS);
            Ok(())
        },
    )
}

/// Start the send/recv service of absolute host logical core `lnc` (0–127). Requires
/// `NEURON_RT_ASYNC_SENDRECV_EXPERIMENTAL_ENABLED=1` and a bootstrap port.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` for a bad core; `NRT_FAILURE` when the feature is disabled,
/// the runtime is not initialized, the core's service already runs, or its last close failed.
pub extern "C" fn nrt_async_sendrecv_init(lnc: c_int) -> NRT_STATUS {
    enter_status("nrt_async_sendrecv_init", Guard::None, || {
        let lnc = lnc_arg(lnc, "lnc")?;
        if let Some(e) = state::guard_error(state::current()) {
            return Err(Error::failure(format!(
                "nrt_async_sendrecv_init needs an initialized runtime: {}",
                e.message()
            )));
        }
        let settings = Settings::from_config(&*process::config()?)?;
        sendrecv::init(lnc, settings)
    })
}

/// Stop the send/recv service of `lnc`; fails with communicators still connecting or requests
/// in flight (and then the next `init` of `lnc` fails until a close succeeds). Its
/// communicators and requests are gone afterwards: their handles are freed here, so no other
/// thread may be inside a call with one of them meanwhile (as with any handle a call frees;
/// after the close, calls with them fail with `NRT_INVALID_HANDLE`).
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` for a bad core; `NRT_FAILURE` otherwise.
pub extern "C" fn nrt_async_sendrecv_close(lnc: c_int) -> NRT_STATUS {
    enter_status("nrt_async_sendrecv_close", Guard::None, || {
        let lnc = lnc_arg(lnc, "lnc")?;
        sendrecv::close(lnc)?;
        let CoreHandles { comms, requests } = HANDLES.lock().remove(&lnc).unwrap_or_default();
        for h in requests {
            // SAFETY: an address this file exported; one already released is refused by the
            // live table, and nobody else frees these.
            let _ = unsafe { handle::release::<RequestObject>(h as *mut _, "request") };
        }
        for h in comms {
            // SAFETY: an address this file exported as a communicator of `lnc`; one already
            // released is refused by the live table, and nothing else frees these.
            let _ = unsafe { handle::release::<CommObject>(h as *mut _, "comm") };
        }
        Ok(())
    })
}

/// Start connecting (sender side, non-blocking) from local core `lnc` to `peer_lnc` at
/// `peer_ip`; poll `nrt_async_sendrecv_test_comm` until done.
///
/// # Returns
/// `NRT_SUCCESS` with `*send_comm` set; `NRT_INVALID` (a NULL or non-IP `peer_ip`, a bad
/// core); `NRT_RESOURCE` beyond the communicator limit; `NRT_FAILURE` when the core's service
/// is not started.
///
/// # Safety
/// `peer_ip` must be NUL-terminated; `send_comm` NULL or writable.
pub unsafe extern "C" fn nrt_async_sendrecv_connect(
    peer_ip: *const c_char,
    peer_lnc: c_int,
    lnc: c_int,
    send_comm: *mut *mut nrt_async_sendrecv_comm_t,
) -> NRT_STATUS {
    enter_status("nrt_async_sendrecv_connect", Guard::None, || {
        // SAFETY: `peer_ip` is NUL-terminated and `send_comm` NULL or writable (this function's
        // contract), which covers `open_comm`'s contract.
        unsafe { open_comm(peer_ip, peer_lnc, lnc, send_comm, false) }
    })
}

/// Start accepting (receiver side, non-blocking) a connection from `peer_lnc` at `peer_ip`.
///
/// # Returns
/// As `nrt_async_sendrecv_connect`.
///
/// # Safety
/// `peer_ip` must be NUL-terminated; `recv_comm` NULL or writable.
pub unsafe extern "C" fn nrt_async_sendrecv_accept(
    peer_ip: *const c_char,
    peer_lnc: c_int,
    lnc: c_int,
    recv_comm: *mut *mut nrt_async_sendrecv_comm_t,
) -> NRT_STATUS {
    enter_status("nrt_async_sendrecv_accept", Guard::None, || {
        // SAFETY: `peer_ip` is NUL-terminated and `recv_comm` NULL or writable (this function's
        // contract), which covers `open_comm`'s contract.
        unsafe { open_comm(peer_ip, peer_lnc, lnc, recv_comm, true) }
    })
}

/// Non-blocking: has the communicator finished connecting?
///
/// # Returns
/// `NRT_SUCCESS` with `*done` set; `NRT_TIMEOUT` if the connection did not form in time (or
/// the peer went silent); `NRT_FAILURE` if it failed otherwise; `NRT_INVALID`;
/// `NRT_INVALID_HANDLE` for a communicator that is not live.
///
/// # Safety
/// `comm` must be a live communicator that no other thread frees during this call; `done`
/// NULL or writable.
pub unsafe extern "C" fn nrt_async_sendrecv_test_comm(
    comm: *mut nrt_async_sendrecv_comm_t,
    done: *mut bool,
) -> NRT_STATUS {
    enter_status("nrt_async_sendrecv_test_comm", Guard::None, || {
        // SAFETY: `done` is NULL or valid for writing one `bool` (this function's contract);
        // `out_param` refuses NULL and misalignment, so `out.write` is in bounds.
        let out = unsafe { out_param(done, "done") }?;
        // SAFETY: `comm` is not freed during this call (this function's contract), so `c` stays
        // valid; `handle::get` refuses NULL and non-live handles before any dereference.
        let c = unsafe { handle::get::<CommObject>(comm, "comm") }?;
        out.write(c.comm.test()?);
        Ok(())
    })
}

/// Post a non-blocking send of `length` bytes of `tensor` at `offset`.
///
/// # Returns
/// `NRT_SUCCESS` with `*request` set; `NRT_INVALID` (bounds, an unconnected or receiving
/// comm); `NRT_RESOURCE` beyond 128 pending requests; the communicator's failure.
///
/// # Safety
/// `tensor` and `send_comm` must be live and not freed by another thread during this call;
/// `request` NULL or writable.
pub unsafe extern "C" fn nrt_async_sendrecv_send_tensor(
    tensor: *mut nrt_tensor_t,
    offset: usize,
    length: usize,
    send_comm: *mut nrt_async_sendrecv_comm_t,
    request: *mut *mut nrt_async_sendrecv_request_t,
) -> NRT_STATUS {
    enter_status("nrt_async_sendrecv_send_tensor", Guard::None, || {
        // SAFETY: `tensor` and `send_comm` are not freed during this call and `request` is NULL
        // or writable (this function's contract), which is `post`'s contract.
        unsafe { post(tensor, offset, length, send_comm, request, true) }
    })
}

/// Post a non-blocking receive of up to `length` bytes into `tensor` at `offset`.
///
/// # Returns
/// As `nrt_async_sendrecv_send_tensor`.
///
/// # Safety
/// `tensor` and `recv_comm` must be live and not freed by another thread during this call;
/// `request` NULL or writable.
pub unsafe extern "C" fn nrt_async_sendrecv_recv_tensor(
    tensor: *mut nrt_tensor_t,
    offset: usize,
    length: usize,
    recv_comm: *mut nrt_async_sendrecv_comm_t,
    request: *mut *mut nrt_async_sendrecv_request_t,
) -> NRT_STATUS {
    enter_status("nrt_async_sendrecv_recv_tensor", Guard::None, || {
        // SAFETY: `tensor` and `recv_comm` are not freed during this call and `request` is NULL
        // or writable (this function's contract), which is `post`'s contract.
        unsafe { post(tensor, offset, length, recv_comm, request, false) }
    })
}

/// Non-blocking: has the request completed, and how many bytes moved? A request reported done
/// is recycled and must not be tested again (its handle is then `NRT_INVALID_HANDLE`).
///
/// # Returns
/// `NRT_SUCCESS` with `*done` (and `*size`, when not NULL, once done) set; the request's
/// failure (`NRT_TIMEOUT` for a silent peer, `NRT_INVALID` for a send larger than the receive,
/// `NRT_FAILURE` otherwise), again on every later test; `NRT_INVALID`.
///
/// # Safety
/// `request` must be live, and no other thread may use or free it during this call (a request
/// reported done is freed by it); `done` NULL or writable; `size` NULL or writable.
pub unsafe extern "C" fn nrt_async_sendrecv_test_request(
    request: *mut nrt_async_sendrecv_request_t,
    done: *mut bool,
    size: *mut usize,
) -> NRT_STATUS {
    enter_status("nrt_async_sendrecv_test_request", Guard::None, || {
        // SAFETY: `done` is NULL or valid for writing one `bool` (this function's contract);
        // `out_param` refuses NULL and misalignment, so `done_out.write` is in bounds.
        let done_out = unsafe { out_param(done, "done") }?;
        let size_out = match size.is_null() {
            true => None,
            // SAFETY: `size` is non-NULL here, so valid for writing one `size_t` (this function's
            // contract); `out_param` refuses misalignment.
            false => Some(unsafe { out_param(size, "size") }?),
        };
        // SAFETY: no other thread frees `request` during this call (this function's contract),
        // so `r` stays valid until the release below; `handle::get` checks it first.
        let r = unsafe { handle::get::<RequestObject>(request, "request") }.map_err(|e| match e
            .kind()
        {
            ErrorKind::InvalidHandle => {
                e.context("a request is recycled once reported done, and must not be tested again")
            }
            _ => e,
        })?;
        let lnc = r.request.lnc();
        match r.request.test()? {
            None => {
                done_out.write(false);
            }
            Some(n) => {
                if let Some(out) = size_out {
                    out.write(n);
                }
                done_out.write(true);
                if let Some(list) = HANDLES.lock().get_mut(&lnc) {
                    list.requests.retain(|&h| h != request as usize);
                }
                // SAFETY: `r` is not used after this; the handle came from this file.
                unsafe { handle::release::<RequestObject>(request, "request") }?;
            }
        };
        Ok(())
    })
}

/// Make completed receives on `lnc` visible in memory (a full fence: a completion is only
/// reported once the bytes are in memory).
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` for a bad core; `NRT_FAILURE` when its service is not started.
pub extern "C" fn nrt_async_sendrecv_flush(lnc: c_int) -> NRT_STATUS {
    enter_status("nrt_async_sendrecv_flush", Guard::None, || {
        sendrecv::flush(lnc_arg(lnc, "lnc")?)
    })
}

#[cfg(test)]
mod tests;

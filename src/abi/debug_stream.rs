//! `nrt_debug_stream.h`: the device debug-event stream (docs/contract/abi.md §3.9). OpenNRT's
//! simulated device emits no debug events, so the stream is real but always empty — a
//! deliberate, well-behaved no-op for good:
//!
//! * `nrt_debug_client_connect` (lifecycle guard) hands out a real file descriptor: a
//!   non-blocking, close-on-exec eventfd that is never signalled. Polling it never reports it
//!   readable, so an event loop that waits on it simply sleeps.
//! * `nrt_debug_client_read_one_event` (lifecycle guard) checks its arguments and returns
//!   `NRT_QUEUE_EMPTY` (15) at once, without writing the header or the payload pointer; this is
//!   the normal answer and is not logged as an error.
//! * `nrt_debug_client_connect_close` (no guard, so a client can still close after `nrt_close`)
//!   closes a descriptor handed out by `connect`; any other value is logged and ignored, so the
//!   library never closes a descriptor it does not own.

use crate::abi::boundary::{enter_code, enter_status, enter_void};
use std::collections::BTreeSet;
use std::ffi::{c_int, c_void};

use parking_lot::Mutex;

use crate::abi::args::visible_core;
use crate::abi::boundary::{out_param, Guard};
use crate::abi::types::*;
use crate::error::Error;

/// Descriptors handed out by `nrt_debug_client_connect` and not yet closed.
static STREAMS: Mutex<BTreeSet<c_int>> = Mutex::new(BTreeSet::new());

fn known(fd: c_int) -> crate::Result<()> {
    if STREAMS.lock().contains(&fd) {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "stream_fd {fd} is not an open debug stream from nrt_debug_client_connect"
        )))
    }
}

/// Open the debug-event stream of visible logical core `logical_nc_idx` and return its file
/// descriptor in `*stream_fd`. The stream never carries events (see the module docs).
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` if `stream_fd` is NULL or the core is not visible; `NRT_RESOURCE`
/// if no descriptor can be created; `NRT_UNINITIALIZED` before `nrt_init`.
///
/// # Safety
/// `stream_fd` must be NULL or writable.
pub unsafe extern "C" fn nrt_debug_client_connect(
    logical_nc_idx: i32,
    stream_fd: *mut c_int,
) -> NRT_STATUS {
    enter_status("nrt_debug_client_connect", Guard::Lifecycle, || {
        // SAFETY: `stream_fd` is NULL or valid for writing one `int` (this function's contract);
        // `out_param` refuses NULL and misalignment, so `out.write` is in bounds.
        let out = unsafe { out_param(stream_fd, "stream_fd") }?;
        visible_core(logical_nc_idx.into(), "logical_nc_idx")?;
        // SAFETY: eventfd has no memory preconditions.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(Error::resource(format!(
                "cannot create the debug-stream descriptor: {}",
                std::io::Error::last_os_error()
            )));
        }
        STREAMS.lock().insert(fd);
        crate::log_info!(
            "nrt_debug_client_connect",
            "debug stream of core {logical_nc_idx} is fd {fd}; OpenNRT's simulated device emits no debug events"
        );
        out.write(fd);
        Ok(())
    })
}

/// Close a stream opened by `nrt_debug_client_connect`. Works in any state; a descriptor this
/// library did not hand out is logged and left alone.
pub extern "C" fn nrt_debug_client_connect_close(stream_fd: c_int) {
    enter_void("nrt_debug_client_connect_close", Guard::None, || {
        if !STREAMS.lock().remove(&stream_fd) {
            return Err(Error::invalid(format!(
                "stream_fd {stream_fd} is not an open debug stream; not closed"
            )));
        }
        // SAFETY: the descriptor was created by nrt_debug_client_connect and is closed once.
        unsafe { libc::close(stream_fd) };
        Ok(())
    })
}

/// Read the next event of a debug stream. There never is one: returns `NRT_QUEUE_EMPTY` without
/// writing `*header` or `*payload`.
///
/// # Returns
/// `NRT_QUEUE_EMPTY`; `NRT_INVALID` if `header` or `payload` is NULL or `stream_fd` is not an
/// open debug stream; `NRT_UNINITIALIZED` before `nrt_init`.
///
/// # Safety
/// `header` and `payload` are only checked for NULL.
pub unsafe extern "C" fn nrt_debug_client_read_one_event(
    stream_fd: c_int,
    header: *mut ndebug_stream_event_header_t,
    payload: *mut *mut c_void,
) -> NRT_STATUS {
    enter_code("nrt_debug_client_read_one_event", Guard::Lifecycle, || {
        if header.is_null() {
            return Err(Error::invalid("header is NULL"));
        }
        if payload.is_null() {
            return Err(Error::invalid("payload is NULL"));
        }
        known(stream_fd)?;
        // The empty queue is the expected answer, not an error: no events are ever produced.
        Ok(nrt_status::NRT_QUEUE_EMPTY)
    })
}

#[cfg(test)]
mod tests;

//! `nrt_profile.h` inspect family (docs/contract/abi.md §3.9): activity capture and its
//! configuration object. OpenNRT simulates the device, so nothing is captured: these are
//! deliberate, well-behaved no-ops for good. torch-neuronx calls several at start-up, so they
//! succeed.
//!
//! * The config object ([`inspect_config`](super::inspect_config)) is real: allocated,
//!   validated, freed; every setter stores its value; it works before `nrt_init`.
//! * `nrt_inspect_begin*` / `nrt_inspect_stop` run the lifecycle guard, log at INFO and succeed.
//! * Activity-type lists are empty (OpenNRT knows no activity types; see
//!   [`inspect_config`](super::inspect_config)).
//! * `nrt_inspect_get_instance_output_dir` needs no runtime state and works before `nrt_init`.

use crate::abi::boundary::enter_status;
use std::ffi::c_char;

use crate::abi::boundary::{req_cstr, Guard};
use crate::abi::handle;
use crate::abi::inspect_config::with;
use crate::abi::types::*;
use crate::error::Error;

fn nothing(target: &str) {
    crate::log_info!(
        target,
        "OpenNRT simulates the device and has nothing to inspect"
    );
}

/// Begin inspect capture with default settings. Succeeds without capturing anything.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_UNINITIALIZED` before `nrt_init`.
pub extern "C" fn nrt_inspect_begin() -> NRT_STATUS {
    enter_status("nrt_inspect_begin", Guard::Lifecycle, || {
        nothing("nrt_inspect_begin");
        Ok(())
    })
}

/// Begin inspect capture with `options`. Succeeds without capturing anything.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` if `options` is NULL; `NRT_INVALID_HANDLE` for a pointer that
/// is not a live config object; `NRT_UNINITIALIZED` before `nrt_init`.
///
/// # Safety
/// `options` must be NULL or a config handle from this library that no other thread frees
/// during this call.
pub unsafe extern "C" fn nrt_inspect_begin_with_options(
    options: *mut nrt_inspect_config_t,
) -> NRT_STATUS {
    enter_status("nrt_inspect_begin_with_options", Guard::Lifecycle, || {
        // SAFETY: `options` is NULL or a config object that no other thread frees during this
        // call (this function's contract), as `with` requires; `with` checks it first.
        unsafe { with(options, |_| ()) }?;
        nothing("nrt_inspect_begin_with_options");
        Ok(())
    })
}

/// Stop inspect capture. Succeeds.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_UNINITIALIZED` before `nrt_init`.
pub extern "C" fn nrt_inspect_stop() -> NRT_STATUS {
    enter_status("nrt_inspect_stop", Guard::Lifecycle, || {
        nothing("nrt_inspect_stop");
        Ok(())
    })
}

/// The per-process directory inside `output_dir`: `<output_dir>/<hostname>_pid<pid>` (trailing
/// slashes of `output_dir` removed).
pub fn instance_output_dir(output_dir: &str) -> String {
    let mut host = [0 as c_char; 256];
    // SAFETY: the buffer is writable for its length; gethostname NUL-terminates on success
    // (the last byte stays 0 in any case).
    let rc = unsafe { libc::gethostname(host.as_mut_ptr(), host.len() - 1) };
    let name = if rc == 0 {
        // SAFETY: NUL-terminated (last byte never written).
        unsafe { std::ffi::CStr::from_ptr(host.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    } else {
        "localhost".to_string()
    };
    let base = match output_dir.trim_end_matches('/') {
        "" => "/",
        b => b,
    };
    let sep = if base.ends_with('/') { "" } else { "/" };
    format!("{base}{sep}{name}_pid{}", std::process::id())
}

/// Write the directory this process's inspect output would go to under `output_dir` into
/// `instance_dir_buf` (NUL-terminated): `<output_dir>/<hostname>_pid<pid>`. Works before
/// `nrt_init`; the directory is not created.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` if `output_dir` is NULL or empty or `instance_dir_buf` is NULL;
/// `NRT_RESOURCE` if `buf_size` cannot hold the path and its NUL (nothing is written).
///
/// # Safety
/// `output_dir` must be NULL or NUL-terminated; `instance_dir_buf` NULL or writable for
/// `buf_size` bytes.
pub unsafe extern "C" fn nrt_inspect_get_instance_output_dir(
    output_dir: *const c_char,
    instance_dir_buf: *mut c_char,
    buf_size: usize,
) -> NRT_STATUS {
    enter_status("nrt_inspect_get_instance_output_dir", Guard::None, || {
        // SAFETY: `output_dir` is NULL or NUL-terminated (this function's contract); `req_cstr`
        // refuses NULL.
        let dir = unsafe { req_cstr(output_dir, "output_dir") }?;
        if dir.is_empty() {
            return Err(Error::invalid("output_dir is empty"));
        }
        let path = instance_output_dir(&dir);
        // SAFETY: `instance_dir_buf` is NULL or writable for `buf_size` bytes (this function's
        // contract), as `write_c_string` requires; it refuses NULL and a short buffer.
        unsafe { handle::write_c_string(instance_dir_buf, buf_size, &path, "instance_dir_buf") }
    })
}

#[cfg(test)]
mod tests;

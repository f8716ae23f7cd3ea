//! `nrt_profile.h`: device profiling, profile sessions and continuous profiling
//! (docs/contract/abi.md §3.9). OpenNRT simulates the device, so there is nothing to profile: these
//! are deliberate, well-behaved no-ops for good.
//!
//! * The continuous-profile options object is real (allocated, validated, freed); its functions
//!   are pure and work before `nrt_init` (no lifecycle guard).
//! * Start/stop/save/serialize run the lifecycle guard, check their arguments, log at INFO that
//!   there is nothing to profile, and succeed. No file is written.
//! * Profile sessions are tracked for real, so their ids behave: `nrt_profile_session_start`
//!   opens a session on a visible core (one at a time per core), `..._stop` closes it and
//!   returns a fresh id (from 1), `..._serialize` and `..._drop` need a known id, and
//!   `..._drop_all` forgets every stopped session of a core. Sessions survive `nrt_close`.

use crate::abi::boundary::enter_status;
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::c_char;

use parking_lot::Mutex;

use crate::abi::args::visible_core;
use crate::abi::boundary::{out_param, req_cstr, Guard};
use crate::abi::handle::{self, Opaque};
use crate::abi::types::*;
use crate::error::Error;

/// The object behind `nrt_profile_continuous_options_t *`.
#[derive(Debug, Default)]
pub struct ContinuousOptions {
    /// Set by `nrt_profile_continuous_options_set_output_dir`.
    pub output_dir: Mutex<Option<String>>,
}

impl Opaque for ContinuousOptions {
    type Handle = nrt_profile_continuous_options_t;
    const KIND: &'static str = "continuous-profile options object";
}

#[derive(Debug)]
struct Sessions {
    running: BTreeSet<u32>,
    stopped: BTreeMap<u64, u32>,
    next_id: u64,
}

static SESSIONS: Mutex<Sessions> = Mutex::new(Sessions {
    running: BTreeSet::new(),
    stopped: BTreeMap::new(),
    next_id: 1,
});

/// Forget every profile session: `nrt_close` ends them all (session ids do not survive a
/// close/init cycle).
pub(crate) fn reset_sessions() {
    let mut s = SESSIONS.lock();
    s.running.clear();
    s.stopped.clear();
}

fn nothing(target: &str, what: std::fmt::Arguments<'_>) {
    crate::log_info!(
        target,
        "{what}: OpenNRT simulates the device and has nothing to profile"
    );
}

/// Profile the next executions of `model` into `filename`. Succeeds without capturing anything.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` if `model` or `filename` is NULL; `NRT_UNINITIALIZED` before
/// `nrt_init`.
///
/// # Safety
/// `filename` must be NULL or NUL-terminated; `model` is only checked for NULL.
pub unsafe extern "C" fn nrt_profile_start(
    model: *mut nrt_model_t,
    filename: *const c_char,
) -> NRT_STATUS {
    enter_status("nrt_profile_start", Guard::Lifecycle, || {
        if model.is_null() {
            return Err(Error::invalid("model is NULL"));
        }
        // SAFETY: `filename` is NULL or NUL-terminated (this function's contract); `req_cstr`
        // refuses NULL.
        let f = unsafe { req_cstr(filename, "filename") }?;
        nothing(
            "nrt_profile_start",
            format_args!("profile to {f:?} requested"),
        );
        Ok(())
    })
}

/// Stop profiling and save to `filename`. Succeeds without writing a file.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` if `filename` is NULL; `NRT_UNINITIALIZED` before `nrt_init`.
///
/// # Safety
/// `filename` must be NULL or NUL-terminated.
pub unsafe extern "C" fn nrt_profile_stop(filename: *const c_char) -> NRT_STATUS {
    enter_status("nrt_profile_stop", Guard::Lifecycle, || {
        // SAFETY: `filename` is NULL or NUL-terminated (this function's contract); `req_cstr`
        // refuses NULL.
        let f = unsafe { req_cstr(filename, "filename") }?;
        nothing("nrt_profile_stop", format_args!("{f:?} is not written"));
        Ok(())
    })
}

/// Open a profile session on visible logical core `vnc`.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` for a core that is not visible or already has an open session;
/// `NRT_UNINITIALIZED` before `nrt_init`.
pub extern "C" fn nrt_profile_session_start(vnc: i32) -> NRT_STATUS {
    enter_status("nrt_profile_session_start", Guard::Lifecycle, || {
        let core = visible_core(vnc.into(), "vnc")?;
        if !SESSIONS.lock().running.insert(core) {
            return Err(Error::invalid(format!(
                "logical core {core} already has a profile session open"
            )));
        }
        nothing(
            "nrt_profile_session_start",
            format_args!("session on core {core} opened"),
        );
        Ok(())
    })
}

/// Close the open profile session of `vnc` and return its id in `*session_id`.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` if `session_id` is NULL or the core is not visible or has no
/// open session; `NRT_UNINITIALIZED` before `nrt_init`.
///
/// # Safety
/// `session_id` must be NULL or writable.
pub unsafe extern "C" fn nrt_profile_session_stop(vnc: i32, session_id: *mut u64) -> NRT_STATUS {
    enter_status("nrt_profile_session_stop", Guard::Lifecycle, || {
        // SAFETY: `session_id` is NULL or valid for writing one `u64` (this function's
        // contract); `out_param` refuses NULL and misalignment, so `out.write` is in bounds.
        let out = unsafe { out_param(session_id, "session_id") }?;
        let core = visible_core(vnc.into(), "vnc")?;
        let mut s = SESSIONS.lock();
        if !s.running.remove(&core) {
            return Err(Error::invalid(format!(
                "logical core {core} has no open profile session"
            )));
        }
        let id = s.next_id;
        s.next_id += 1;
        s.stopped.insert(id, core);
        out.write(id);
        Ok(())
    })
}

/// Save stopped session `session_id` to `filename`. The session is empty; no file is written.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` for an unknown session or a NULL `filename`;
/// `NRT_UNINITIALIZED` before `nrt_init`.
///
/// # Safety
/// `filename` must be NULL or NUL-terminated.
pub unsafe extern "C" fn nrt_profile_session_serialize(
    session_id: u64,
    filename: *const c_char,
) -> NRT_STATUS {
    enter_status("nrt_profile_session_serialize", Guard::Lifecycle, || {
        // SAFETY: `filename` is NULL or NUL-terminated (this function's contract); `req_cstr`
        // refuses NULL.
        let f = unsafe { req_cstr(filename, "filename") }?;
        if !SESSIONS.lock().stopped.contains_key(&session_id) {
            return Err(Error::invalid(format!(
                "no stopped profile session has id {session_id}"
            )));
        }
        nothing(
            "nrt_profile_session_serialize",
            format_args!("session {session_id} is empty; {f:?} is not written"),
        );
        Ok(())
    })
}

/// Forget stopped session `session_id`.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` for an unknown session; `NRT_UNINITIALIZED` before `nrt_init`.
pub extern "C" fn nrt_profile_session_drop(session_id: u64) -> NRT_STATUS {
    enter_status("nrt_profile_session_drop", Guard::Lifecycle, || {
        SESSIONS
            .lock()
            .stopped
            .remove(&session_id)
            .map(|_| ())
            .ok_or_else(|| {
                Error::invalid(format!("no stopped profile session has id {session_id}"))
            })
    })
}

/// Forget every stopped session of visible logical core `vnc`.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` for a core that is not visible; `NRT_UNINITIALIZED` before
/// `nrt_init`.
pub extern "C" fn nrt_profile_session_drop_all(vnc: i32) -> NRT_STATUS {
    enter_status("nrt_profile_session_drop_all", Guard::Lifecycle, || {
        let core = visible_core(vnc.into(), "vnc")?;
        SESSIONS.lock().stopped.retain(|_, c| *c != core);
        Ok(())
    })
}

/// Allocate a continuous-profile options object (no output directory set). Works before
/// `nrt_init`.
///
/// # Returns
/// `NRT_SUCCESS` with `*options` set; `NRT_INVALID` if `options` is NULL.
///
/// # Safety
/// `options` must be NULL or writable.
pub unsafe extern "C" fn nrt_profile_continuous_options_allocate(
    options: *mut *mut nrt_profile_continuous_options_t,
) -> NRT_STATUS {
    enter_status(
        "nrt_profile_continuous_options_allocate",
        Guard::None,
        || {
            // SAFETY: `options` is NULL or valid for writing one handle (this function's
            // contract); `out_param` refuses NULL and misalignment, so `out.write` is in bounds.
            let out = unsafe { out_param(options, "options") }?;
            out.write(handle::export(ContinuousOptions::default()));
            Ok(())
        },
    )
}

/// Free a continuous-profile options object. NULL is a no-op.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID_HANDLE` for a pointer that is not a live options object.
///
/// # Safety
/// `options` must not be used afterwards.
pub unsafe extern "C" fn nrt_profile_continuous_options_free(
    options: *mut nrt_profile_continuous_options_t,
) -> NRT_STATUS {
    enter_status("nrt_profile_continuous_options_free", Guard::None, || {
        // SAFETY: `options` is not used after this call (this function's contract), so no
        // reference from `handle::get` outlives the release; `release` refuses non-live handles.
        unsafe { handle::release::<ContinuousOptions>(options, "options") }.map(|_| ())
    })
}

/// Set the directory continuous profiles would be saved to.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` if `options` or `output_dir` is NULL or `output_dir` is empty;
/// `NRT_INVALID_HANDLE` for a pointer that is not a live options object.
///
/// # Safety
/// `options` must be NULL or an options object that no other thread frees during this call;
/// `output_dir` NULL or NUL-terminated.
pub unsafe extern "C" fn nrt_profile_continuous_options_set_output_dir(
    options: *mut nrt_profile_continuous_options_t,
    output_dir: *const c_char,
) -> NRT_STATUS {
    enter_status(
        "nrt_profile_continuous_options_set_output_dir",
        Guard::None,
        || {
            // SAFETY: `options` is not freed during this call (this function's contract), so `o`
            // stays valid; `handle::get` refuses NULL and non-live handles before any dereference.
            let o = unsafe { handle::get::<ContinuousOptions>(options, "options") }?;
            // SAFETY: `output_dir` is NULL or NUL-terminated (this function's contract);
            // `req_cstr` refuses NULL.
            let dir = unsafe { req_cstr(output_dir, "output_dir") }?;
            if dir.is_empty() {
                return Err(Error::invalid("output_dir is empty"));
            }
            *o.output_dir.lock() = Some(dir);
            Ok(())
        },
    )
}

/// Check an optional options handle: NULL means defaults.
///
/// # Safety
/// `options` may be any value (NULL is `None`; a non-live handle is refused before any
/// dereference); a live one must not be freed by another thread while the returned reference
/// lives (`'a`).
unsafe fn opt_options<'a>(
    options: *const nrt_profile_continuous_options_t,
) -> crate::Result<Option<&'a ContinuousOptions>> {
    if options.is_null() {
        return Ok(None);
    }
    // SAFETY: `handle::get` checks `options` against the live table before any dereference; a
    // live one is not freed for `'a` (this function's contract), which is `get`'s requirement.
    unsafe { handle::get::<ContinuousOptions>(options, "options") }.map(Some)
}

/// Start continuous profiling (NULL `options` = defaults). Succeeds without capturing.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID_HANDLE` for a pointer that is not a live options object;
/// `NRT_UNINITIALIZED` before `nrt_init`.
///
/// # Safety
/// `options` must be NULL or an options object from this library that no other thread frees
/// during this call.
pub unsafe extern "C" fn nrt_profile_continuous_start(
    options: *mut nrt_profile_continuous_options_t,
) -> NRT_STATUS {
    enter_status("nrt_profile_continuous_start", Guard::Lifecycle, || {
        // SAFETY: `options` is NULL or an options object not freed during this call (this
        // function's contract), and `o` does not outlive the call, as `opt_options` requires.
        let o = unsafe { opt_options(options) }?;
        let dir = o.and_then(|o| o.output_dir.lock().clone());
        nothing(
            "nrt_profile_continuous_start",
            format_args!("continuous profiling (output dir {dir:?}) requested"),
        );
        Ok(())
    })
}

/// Stop continuous profiling. Succeeds.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_UNINITIALIZED` before `nrt_init`.
pub extern "C" fn nrt_profile_continuous_stop() -> NRT_STATUS {
    enter_status("nrt_profile_continuous_stop", Guard::Lifecycle, || {
        nothing(
            "nrt_profile_continuous_stop",
            format_args!("continuous profiling stopped"),
        );
        Ok(())
    })
}

/// Save the continuous profile of visible logical core `vnc` (NULL `options` = defaults).
/// Succeeds without writing anything.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` for a core that is not visible; `NRT_INVALID_HANDLE` for a
/// pointer that is not a live options object; `NRT_UNINITIALIZED` before `nrt_init`.
///
/// # Safety
/// `options` must be NULL or an options object from this library that no other thread frees
/// during this call.
pub unsafe extern "C" fn nrt_profile_continuous_save(
    vnc: u32,
    options: *mut nrt_profile_continuous_options_t,
) -> NRT_STATUS {
    enter_status("nrt_profile_continuous_save", Guard::Lifecycle, || {
        let core = visible_core(vnc.into(), "vnc")?;
        // SAFETY: `options` is NULL or an options object not freed during this call (this
        // function's contract); the reference is dropped at once, as `opt_options` requires.
        unsafe { opt_options(options) }?;
        nothing(
            "nrt_profile_continuous_save",
            format_args!("nothing saved for core {core}"),
        );
        Ok(())
    })
}

#[cfg(test)]
mod tests;

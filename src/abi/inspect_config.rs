//! `nrt_profile.h` inspect configuration object (docs/contract/abi.md §3.9), used by
//! `nrt_inspect_begin_with_options` (see [`inspect`](super::inspect) for the policy). The object
//! is real: allocated, validated, freed; every setter stores its value. These functions are pure
//! and work before `nrt_init` (no lifecycle guard). Every setter returns `NRT_INVALID` for a NULL
//! object and `NRT_INVALID_HANDLE` for a pointer that is not a live config object.
//!
//! Activity-type lists are empty: OpenNRT knows no activity types. Names given to the setters
//! are accepted and recorded, but nothing is captured, so the enabled list is empty too. An empty
//! list is a real allocation (never NULL) with count 0; free it with
//! `nrt_inspect_config_free_activity_types` (see [`handle`]).

use crate::abi::boundary::{enter_status, enter_void};
use std::collections::BTreeMap;
use std::ffi::{c_char, c_int};

use parking_lot::Mutex;

use crate::abi::boundary::{out_param, req_cstr, Guard};
use crate::abi::handle::{self, Opaque};
use crate::abi::types::*;
use crate::error::Error;

/// The settings of an inspect config object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InspectSettings {
    /// Output directory (`None` = not set).
    pub output_dir: Option<String>,
    /// Session id.
    pub session_id: c_int,
    /// Activity name → enabled.
    pub activities: BTreeMap<String, bool>,
    /// Logical core → capture enabled.
    pub capture_nc: BTreeMap<u32, bool>,
    /// Event type name → capture enabled.
    pub capture_event_types: BTreeMap<String, bool>,
    /// Inspect enabled.
    pub enable_inspect: bool,
    /// Inspect on failure enabled.
    pub enable_inspect_on_fail: bool,
    /// Device profile mode (vendor enum; stored as given).
    pub device_profile_mode: u32,
    /// System-trace events kept per core (0 = default).
    pub sys_trace_max_events_per_nc: u64,
}

/// The object behind `nrt_inspect_config_t *`.
#[derive(Debug, Default)]
pub struct InspectConfig {
    /// Current settings.
    pub settings: Mutex<InspectSettings>,
}

impl Opaque for InspectConfig {
    type Handle = nrt_inspect_config_t;
    const KIND: &'static str = "inspect config object";
}

/// Apply `f` to the settings of a live config object.
///
/// # Safety
/// `options` may be any value: NULL and addresses that are not live config objects are refused
/// before any dereference. If `options` is a live config object, no other thread may free it
/// during this call.
pub(crate) unsafe fn with(
    options: *const nrt_inspect_config_t,
    f: impl FnOnce(&mut InspectSettings),
) -> crate::Result<()> {
    // SAFETY: `handle::get` checks `options` against the live table before any dereference; a
    // live `options` is not freed by another thread during this call (this function's contract).
    let c = unsafe { handle::get::<InspectConfig>(options, "options") }?;
    f(&mut c.settings.lock());
    Ok(())
}

/// Allocate an inspect config object with default settings (nothing set or enabled).
///
/// # Returns
/// `NRT_SUCCESS` with `*options` set; `NRT_INVALID` if `options` is NULL.
///
/// # Safety
/// `options` must be NULL or writable.
pub unsafe extern "C" fn nrt_inspect_config_allocate(
    options: *mut *mut nrt_inspect_config_t,
) -> NRT_STATUS {
    enter_status("nrt_inspect_config_allocate", Guard::None, || {
        // SAFETY: `options` is NULL or valid for writing one handle (this function's contract);
        // `out_param` refuses NULL and misalignment, so `out.write` is in bounds.
        let out = unsafe { out_param(options, "options") }?;
        out.write(handle::export(InspectConfig::default()));
        Ok(())
    })
}

/// Free an inspect config object. NULL is a no-op.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID_HANDLE` for a pointer that is not a live config object.
///
/// # Safety
/// `options` must not be used afterwards.
pub unsafe extern "C" fn nrt_inspect_config_free(options: *mut nrt_inspect_config_t) -> NRT_STATUS {
    enter_status("nrt_inspect_config_free", Guard::None, || {
        // SAFETY: `options` is not used after this call (this function's contract), so no reference
        // from `handle::get` outlives the release; `release` refuses non-live handles.
        unsafe { handle::release::<InspectConfig>(options, "options") }.map(|_| ())
    })
}

/// Reset every setting to its default.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` if `options` is NULL; `NRT_INVALID_HANDLE` if it is not a live
/// config object (the same two errors apply to every setter below).
///
/// # Safety
/// `options` must be NULL or a config handle from this library that no other thread frees
/// during this call.
pub unsafe extern "C" fn nrt_inspect_config_set_defaults(
    options: *mut nrt_inspect_config_t,
) -> NRT_STATUS {
    enter_status("nrt_inspect_config_set_defaults", Guard::None, || {
        // SAFETY: `options` is NULL or a config object that no other thread frees during this call
        // (this function's contract), as `with` requires; `with` checks it against the live table.
        unsafe { with(options, |s| *s = InspectSettings::default()) }
    })
}

/// Set the output directory.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` also if `output_dir` is NULL or empty.
///
/// # Safety
/// `options` must be NULL or a config handle that no other thread frees during this call;
/// `output_dir` NULL or NUL-terminated.
pub unsafe extern "C" fn nrt_inspect_config_set_output_dir(
    options: *mut nrt_inspect_config_t,
    output_dir: *const c_char,
) -> NRT_STATUS {
    enter_status("nrt_inspect_config_set_output_dir", Guard::None, || {
        // SAFETY: `output_dir` is NULL or NUL-terminated (this function's contract); `req_cstr`
        // refuses NULL.
        let dir = unsafe { req_cstr(output_dir, "output_dir") }?;
        if dir.is_empty() {
            return Err(Error::invalid("output_dir is empty"));
        }
        // SAFETY: `options` is NULL or a config object that no other thread frees during this call
        // (this function's contract), as `with` requires; `with` checks it against the live table.
        unsafe { with(options, |s| s.output_dir = Some(dir)) }
    })
}

/// Set the session id.
///
/// # Returns
/// `NRT_SUCCESS` (errors as for `nrt_inspect_config_set_defaults`).
///
/// # Safety
/// `options` must be NULL or a config handle from this library that no other thread frees
/// during this call.
pub unsafe extern "C" fn nrt_inspect_config_set_session_id(
    options: *mut nrt_inspect_config_t,
    session_id: c_int,
) -> NRT_STATUS {
    enter_status("nrt_inspect_config_set_session_id", Guard::None, || {
        // SAFETY: `options` is NULL or a config object that no other thread frees during this call
        // (this function's contract), as `with` requires; `with` checks it against the live table.
        unsafe { with(options, |s| s.session_id = session_id) }
    })
}

/// Enable or disable an activity type by name. Any name is accepted and recorded.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` also if `activity_type` is NULL.
///
/// # Safety
/// `options` must be NULL or a config handle that no other thread frees during this call;
/// `activity_type` NULL or NUL-terminated.
pub unsafe extern "C" fn nrt_inspect_config_set_activity(
    options: *mut nrt_inspect_config_t,
    activity_type: *const c_char,
    enabled: bool,
) -> NRT_STATUS {
    enter_status("nrt_inspect_config_set_activity", Guard::None, || {
        // SAFETY: `activity_type` is NULL or NUL-terminated (this function's contract); `req_cstr`
        // refuses NULL.
        let name = unsafe { req_cstr(activity_type, "activity_type") }?;
        // SAFETY: `options` is NULL or a config object that no other thread frees during this call
        // (this function's contract), as `with` requires; `with` checks it against the live table.
        unsafe {
            with(options, |s| {
                s.activities.insert(name, enabled);
            })
        }
    })
}

/// Enable or disable capture on logical core `nc_idx`.
///
/// # Returns
/// `NRT_SUCCESS` (errors as for `nrt_inspect_config_set_defaults`).
///
/// # Safety
/// `options` must be NULL or a config handle from this library that no other thread frees
/// during this call.
pub unsafe extern "C" fn nrt_inspect_config_set_capture_enabled_for_nc(
    options: *mut nrt_inspect_config_t,
    nc_idx: u32,
    enabled: bool,
) -> NRT_STATUS {
    enter_status(
        "nrt_inspect_config_set_capture_enabled_for_nc",
        Guard::None,
        || {
            // SAFETY: `options` is NULL or a config object that no other thread frees during this
            // call (this function's contract), as `with` requires; `with` checks it against the
            // live table.
            unsafe {
                with(options, |s| {
                    s.capture_nc.insert(nc_idx, enabled);
                })
            }
        },
    )
}

/// Enable or disable capture of an event type by name. Any name is accepted and recorded.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` also if `event_type` is NULL.
///
/// # Safety
/// `options` must be NULL or a config handle that no other thread frees during this call;
/// `event_type` NULL or NUL-terminated.
pub unsafe extern "C" fn nrt_inspect_config_set_capture_enabled_for_event_type_string(
    options: *mut nrt_inspect_config_t,
    event_type: *const c_char,
    enabled: bool,
) -> NRT_STATUS {
    enter_status(
        "nrt_inspect_config_set_capture_enabled_for_event_type_string",
        Guard::None,
        || {
            // SAFETY: `event_type` is NULL or NUL-terminated (this function's contract); `req_cstr`
            // refuses NULL.
            let name = unsafe { req_cstr(event_type, "event_type") }?;
            // SAFETY: `options` is NULL or a config object that no other thread frees during this
            // call (this function's contract), as `with` requires; `with` checks it against the
            // live table.
            unsafe {
                with(options, |s| {
                    s.capture_event_types.insert(name, enabled);
                })
            }
        },
    )
}

/// Enable or disable inspect.
///
/// # Returns
/// `NRT_SUCCESS` (errors as for `nrt_inspect_config_set_defaults`).
///
/// # Safety
/// `options` must be NULL or a config handle from this library that no other thread frees
/// during this call.
pub unsafe extern "C" fn nrt_inspect_config_set_enable_inspect(
    options: *mut nrt_inspect_config_t,
    enable_inspect: bool,
) -> NRT_STATUS {
    enter_status("nrt_inspect_config_set_enable_inspect", Guard::None, || {
        // SAFETY: `options` is NULL or a config object that no other thread frees during this call
        // (this function's contract), as `with` requires; `with` checks it against the live table.
        unsafe { with(options, |s| s.enable_inspect = enable_inspect) }
    })
}

/// Enable or disable inspect on execution failure.
///
/// # Returns
/// `NRT_SUCCESS` (errors as for `nrt_inspect_config_set_defaults`).
///
/// # Safety
/// `options` must be NULL or a config handle from this library that no other thread frees
/// during this call.
pub unsafe extern "C" fn nrt_inspect_config_set_enable_inspect_on_fail(
    options: *mut nrt_inspect_config_t,
    enable_inspect_on_fail: bool,
) -> NRT_STATUS {
    enter_status(
        "nrt_inspect_config_set_enable_inspect_on_fail",
        Guard::None,
        || {
            // SAFETY: `options` is NULL or a config object that no other thread frees during this
            // call (this function's contract), as `with` requires; `with` checks it against the
            // live table.
            unsafe {
                with(options, |s| {
                    s.enable_inspect_on_fail = enable_inspect_on_fail
                })
            }
        },
    )
}

/// Set the device profile mode (stored as given; its values are not public).
///
/// # Returns
/// `NRT_SUCCESS` (errors as for `nrt_inspect_config_set_defaults`).
///
/// # Safety
/// `options` must be NULL or a config handle from this library that no other thread frees
/// during this call.
pub unsafe extern "C" fn nrt_inspect_config_set_inspect_device_profile_mode(
    options: *mut nrt_inspect_config_t,
    device_profile_mode: nrt_inspect_device_profile_mode_t,
) -> NRT_STATUS {
    enter_status(
        "nrt_inspect_config_set_inspect_device_profile_mode",
        Guard::None,
        || {
            // SAFETY: `options` is NULL or a config object that no other thread frees during this
            // call (this function's contract), as `with` requires; `with` checks it against the
            // live table.
            unsafe { with(options, |s| s.device_profile_mode = device_profile_mode) }
        },
    )
}

/// Set how many system-trace events are kept per core.
///
/// # Returns
/// `NRT_SUCCESS` (errors as for `nrt_inspect_config_set_defaults`).
///
/// # Safety
/// `options` must be NULL or a config handle from this library that no other thread frees
/// during this call.
pub unsafe extern "C" fn nrt_inspect_config_set_sys_trace_max_events_per_nc(
    options: *mut nrt_inspect_config_t,
    sys_trace_max_events_per_nc: u64,
) -> NRT_STATUS {
    enter_status(
        "nrt_inspect_config_set_sys_trace_max_events_per_nc",
        Guard::None,
        || {
            // SAFETY: `options` is NULL or a config object that no other thread frees during this
            // call (this function's contract), as `with` requires; `with` checks it against the
            // live table.
            unsafe {
                with(options, |s| {
                    s.sys_trace_max_events_per_nc = sys_trace_max_events_per_nc
                })
            }
        },
    )
}

/// Write an empty string list to the two out-parameters (after checking both).
///
/// # Safety
/// `list` must be NULL or valid for writing one `const char **`, and `count` NULL or valid for
/// writing one `usize`, with no other access to either during this call.
unsafe fn empty_list(
    list: *mut *mut *const c_char,
    count: *mut usize,
    what: &str,
) -> crate::Result<()> {
    // SAFETY: `list` is NULL or valid for one write (this function's contract); `out_param`
    // refuses NULL and misalignment, so `l.write` below is in bounds.
    let l = unsafe { out_param(list, what) }?;
    // SAFETY: `count` is NULL or valid for one write (this function's contract); `out_param`
    // refuses NULL and misalignment, so `c.write` below is in bounds.
    let c = unsafe { out_param(count, "count") }?;
    let (p, n) = handle::export_list(&[], what)?;
    l.write(p);
    c.write(n);
    Ok(())
}

/// Every activity type that can be enabled. OpenNRT captures none: an empty list (a real
/// allocation, count 0); free it with `nrt_inspect_config_free_activity_types`.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` if either pointer is NULL.
///
/// # Safety
/// `activity_types` and `count` must be NULL or writable.
pub unsafe extern "C" fn nrt_inspect_config_get_all_activity_types(
    activity_types: *mut *mut *const c_char,
    count: *mut usize,
) -> NRT_STATUS {
    enter_status(
        "nrt_inspect_config_get_all_activity_types",
        Guard::None,
        || {
            // SAFETY: `activity_types` and `count` are each NULL or valid for one write (this
            // function's contract), as `empty_list` requires.
            unsafe { empty_list(activity_types, count, "activity_types") }
        },
    )
}

/// The activity types `options` would capture: always an empty list (nothing is captured).
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` if a pointer is NULL; `NRT_INVALID_HANDLE` if `options` is not
/// a live config object.
///
/// # Safety
/// `options` must be NULL or a config handle that no other thread frees during this call;
/// `activity_types` and `count` NULL or writable.
pub unsafe extern "C" fn nrt_inspect_config_get_enabled_activity_types(
    options: *mut nrt_inspect_config_t,
    activity_types: *mut *mut *const c_char,
    count: *mut usize,
) -> NRT_STATUS {
    enter_status(
        "nrt_inspect_config_get_enabled_activity_types",
        Guard::None,
        || {
            // SAFETY: `options` is NULL or a config object that no other thread frees during this
            // call (this function's contract), as `with` requires; `with` checks it against the
            // live table.
            unsafe { with(options, |_| ()) }?;
            // SAFETY: `activity_types` and `count` are each NULL or valid for one write (this
            // function's contract), as `empty_list` requires.
            unsafe { empty_list(activity_types, count, "activity_types") }
        },
    )
}

/// Free a list from `nrt_inspect_config_get_*_activity_types`. NULL is a no-op; a pointer that
/// is not such a live list is logged and ignored.
///
/// # Safety
/// `activity_types` must not be used afterwards.
pub unsafe extern "C" fn nrt_inspect_config_free_activity_types(
    activity_types: *mut *const c_char,
    count: usize,
) {
    enter_void(
        "nrt_inspect_config_free_activity_types",
        Guard::None,
        || {
            // SAFETY: `activity_types` is not used after this call (this function's contract);
            // `free_list` frees it only if it is a live list from `export_list`, and NULL is a
            // no-op.
            unsafe { handle::free_list(activity_types, count, "activity_types") }
        },
    )
}

#[cfg(test)]
mod tests;

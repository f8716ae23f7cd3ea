//! `nrt_sys_trace.h`: the system-event trace (docs/contract/abi.md §3.9) over the runtime's
//! recorder, [`crate::runtime::sys_trace`]: every model execution (`nc_exec_running`), collective
//! (`cc_exec_running`) and async tensor operation (`tensor_op_running`) the software device runs
//! while a capture is active, as start/stop pairs with `CLOCK_MONOTONIC` nanosecond timestamps.
//!
//! * The capture-config and fetch-options objects are real: allocated, freed, and every setter
//!   stores its value. They are pure and work before `nrt_init` (no lifecycle guard). Setters
//!   that return `void` log a NULL or unknown handle and ignore the call; the status-returning
//!   ones return `NRT_INVALID` (NULL) or `NRT_INVALID_HANDLE` (not a live object).
//! * `nrt_sys_trace_start` starts a capture with the config's settings (NULL = defaults: every
//!   core, every type), replacing any earlier one and emptying the buffers; `_stop` ends
//!   recording and keeps what was recorded; `nrt_close` forgets it all.
//! * `_fetch_events` consumes the recorded events (of the options' core, at most its
//!   `max_events_per_nc` per core) and hands out their JSON, `{"events": [...]}`, in a
//!   NUL-terminated buffer (`*written_size` = its length without the NUL) that
//!   `nrt_sys_trace_buffer_free` frees. The event's fields are in the recorder's docs.
//! * Event-type lists are real allocations freed by `nrt_sys_trace_free_event_types` (see
//!   [`handle`]). Names given to the setters that the recorder does not know are accepted,
//!   stored and match nothing.

use crate::abi::boundary::{enter_status, enter_void};
use std::collections::BTreeMap;
use std::ffi::c_char;

use parking_lot::Mutex;

use crate::abi::boundary::{out_param, req_cstr, Guard};
use crate::abi::handle::{self, Opaque};
use crate::abi::types::*;
use crate::runtime::sys_trace as rt;

/// Settings of a capture-config object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CaptureSettings {
    /// Events kept per core (0 = default).
    pub max_events_per_nc: u64,
    /// Logical core → capture enabled.
    pub capture_nc: BTreeMap<u32, bool>,
    /// Event type name → capture enabled.
    pub event_types: BTreeMap<String, bool>,
}

impl CaptureSettings {
    /// The recorder's capture for these settings.
    pub fn capture(&self) -> rt::Capture {
        rt::Capture {
            max_events_per_nc: self.max_events_per_nc,
            cores: self.capture_nc.clone(),
            event_types: self.event_types.clone(),
        }
    }
}

/// The object behind `nrt_sys_trace_config_t *`.
#[derive(Debug, Default)]
pub struct SysTraceConfig {
    /// Current settings.
    pub settings: Mutex<CaptureSettings>,
}

impl Opaque for SysTraceConfig {
    type Handle = nrt_sys_trace_config_t;
    const KIND: &'static str = "sys-trace config object";
}

/// Settings of a fetch-options object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FetchSettings {
    /// Events fetched per core (0 = all).
    pub max_events_per_nc: u64,
    /// Core to fetch from (`None` = all).
    pub nc_idx: Option<u64>,
}

/// The object behind `nrt_sys_trace_fetch_options_t *`.
#[derive(Debug, Default)]
pub struct SysTraceFetchOptions {
    /// Current settings.
    pub settings: Mutex<FetchSettings>,
}

impl Opaque for SysTraceFetchOptions {
    type Handle = nrt_sys_trace_fetch_options_t;
    const KIND: &'static str = "sys-trace fetch-options object";
}

/// # Safety
/// `p` may be any value: NULL and addresses that are not live config objects are refused
/// before any dereference. If `p` is a live config object, no other thread may free it during
/// this call.
unsafe fn config(
    p: *const nrt_sys_trace_config_t,
    f: impl FnOnce(&mut CaptureSettings),
) -> crate::Result<()> {
    // SAFETY: `handle::get` checks `p` against the live table before any dereference; a live
    // `p` is not freed by another thread during this call (this function's contract).
    let c = unsafe { handle::get::<SysTraceConfig>(p, "options") }?;
    f(&mut c.settings.lock());
    Ok(())
}

/// # Safety
/// `p` may be any value: NULL and addresses that are not live fetch-options objects are refused
/// before any dereference. If `p` is a live fetch-options object, no other thread may free it
/// during this call.
unsafe fn fetch(
    p: *const nrt_sys_trace_fetch_options_t,
    f: impl FnOnce(&mut FetchSettings),
) -> crate::Result<()> {
    // SAFETY: `handle::get` checks `p` against the live table before any dereference; a live
    // `p` is not freed by another thread during this call (this function's contract).
    let c = unsafe { handle::get::<SysTraceFetchOptions>(p, "options") }?;
    f(&mut c.settings.lock());
    Ok(())
}

/// Start capturing system events with the settings of `options` (NULL = defaults: every core,
/// every event type). Replaces a capture already running and empties the event buffers.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID_HANDLE` if `options` is not NULL and not a live config object;
/// `NRT_UNINITIALIZED` before `nrt_init`.
///
/// # Safety
/// `options` must be NULL or a config handle from this library that no other thread frees
/// during this call.
pub unsafe extern "C" fn nrt_sys_trace_start(options: *mut nrt_sys_trace_config_t) -> NRT_STATUS {
    enter_status("nrt_sys_trace_start", Guard::Lifecycle, || {
        let mut settings = CaptureSettings::default();
        if !options.is_null() {
            // SAFETY: `options` is NULL or a config object that no other thread frees during this
            // call (this function's contract), as `config` requires; `config` checks it against the
            // live table.
            unsafe { config(options, |s| settings = s.clone()) }?;
        }
        rt::start(settings.capture());
        Ok(())
    })
}

/// Stop capturing; the events recorded so far stay until fetched or the next start. Stopping
/// without a capture succeeds.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_UNINITIALIZED` before `nrt_init`.
pub extern "C" fn nrt_sys_trace_stop() -> NRT_STATUS {
    enter_status("nrt_sys_trace_stop", Guard::Lifecycle, || {
        rt::stop();
        Ok(())
    })
}

/// Fetch (and consume) the recorded events as JSON, `{"events": [...]}`, oldest first: of the
/// core `options` names, else of every core; at most its `max_events_per_nc` per core (0 or
/// NULL `options` = all). `*buffer` receives a NUL-terminated copy, `*written_size` its length
/// without the NUL. Free the buffer with `nrt_sys_trace_buffer_free`.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` if `buffer` or `written_size` is NULL; `NRT_INVALID_HANDLE` for
/// an `options` that is not a live fetch-options object; `NRT_FAIL_HOST_MEM_ALLOC`;
/// `NRT_UNINITIALIZED` before `nrt_init`.
///
/// # Safety
/// `buffer` and `written_size` must be NULL or writable; `options` NULL or a fetch-options
/// handle from this library that no other thread frees during this call.
pub unsafe extern "C" fn nrt_sys_trace_fetch_events(
    buffer: *mut *mut c_char,
    written_size: *mut usize,
    options: *const nrt_sys_trace_fetch_options_t,
) -> NRT_STATUS {
    enter_status("nrt_sys_trace_fetch_events", Guard::Lifecycle, || {
        // SAFETY: `buffer` is NULL or valid for writing one `char *` (this function's contract);
        // `out_param` refuses NULL and misalignment, so `b.write` below is in bounds.
        let b = unsafe { out_param(buffer, "buffer") }?;
        // SAFETY: `written_size` is NULL or valid for writing one `size_t` (this function's
        // contract); `out_param` refuses NULL and misalignment, so `w.write` below is in bounds.
        let w = unsafe { out_param(written_size, "written_size") }?;
        let mut how = FetchSettings::default();
        if !options.is_null() {
            // SAFETY: `options` is NULL or a fetch-options object that no other thread frees during
            // this call (this function's contract), as `fetch` requires; `fetch` checks it against
            // the live table.
            unsafe { fetch(options, |s| how = s.clone()) }?;
        }
        // A core index past u32 names no core: nothing to fetch.
        let nc = how.nc_idx.map(|n| u32::try_from(n).unwrap_or(u32::MAX));
        let events = rt::take(nc, how.max_events_per_nc);
        let text = rt::to_json(&events)?;
        let p = handle::export_buffer(&text, "sys-trace event buffer")?;
        b.write(p);
        w.write(text.len());
        Ok(())
    })
}

/// Free a buffer from `nrt_sys_trace_fetch_events`. NULL is a no-op; any other pointer not
/// handed out by `nrt_sys_trace_fetch_events` is logged and ignored.
///
/// # Safety
/// `buffer` must not be used afterwards.
pub unsafe extern "C" fn nrt_sys_trace_buffer_free(buffer: *mut c_char) {
    enter_void("nrt_sys_trace_buffer_free", Guard::None, || {
        // SAFETY: `buffer` is not used after this call (this function's contract); `free_buffer`
        // frees it only if it is a live buffer from `export_buffer`, and NULL is a no-op.
        unsafe { handle::free_buffer(buffer, "buffer") }
    })
}

/// Write a list of event-type names to the out-parameters (after checking both).
///
/// # Safety
/// `list` must be NULL or valid for writing one `const char **`, and `count` NULL or valid for
/// writing one `usize`, with no other access to either during this call.
unsafe fn type_list(
    list: *mut *mut *const c_char,
    count: *mut usize,
    items: &[&str],
) -> crate::Result<()> {
    // SAFETY: `list` is NULL or valid for one write (this function's contract); `out_param`
    // refuses NULL and misalignment, so `l.write` below is in bounds.
    let l = unsafe { out_param(list, "event_types") }?;
    // SAFETY: `count` is NULL or valid for one write (this function's contract); `out_param`
    // refuses NULL and misalignment, so `c.write` below is in bounds.
    let c = unsafe { out_param(count, "count") }?;
    let (p, n) = handle::export_list(items, "event_types")?;
    l.write(p);
    c.write(n);
    Ok(())
}

/// Every event type the trace can record: `nc_exec_running`, `cc_exec_running`,
/// `tensor_op_running`. Free the list with `nrt_sys_trace_free_event_types`. Works before
/// `nrt_init`.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` if either pointer is NULL.
///
/// # Safety
/// `event_types` and `count` must be NULL or writable.
pub unsafe extern "C" fn nrt_sys_trace_get_event_types(
    event_types: *mut *mut *const c_char,
    count: *mut usize,
) -> NRT_STATUS {
    enter_status("nrt_sys_trace_get_event_types", Guard::None, || {
        // SAFETY: `event_types` and `count` are each NULL or valid for one write (this function's
        // contract), as `type_list` requires.
        unsafe { type_list(event_types, count, &rt::EVENT_TYPES) }
    })
}

/// Free a list from `nrt_sys_trace_get_event_types` or
/// `nrt_sys_trace_config_get_enabled_event_types`. NULL is a no-op; anything else not handed
/// out by those is logged and ignored.
///
/// # Safety
/// `event_types` must not be used afterwards.
pub unsafe extern "C" fn nrt_sys_trace_free_event_types(
    event_types: *mut *const c_char,
    count: usize,
) {
    enter_void("nrt_sys_trace_free_event_types", Guard::None, || {
        // SAFETY: `event_types` is not used after this call (this function's contract); `free_list`
        // frees it only if it is a live list from `export_list`, and NULL is a no-op.
        unsafe { handle::free_list(event_types, count, "event_types") }
    })
}

/// Allocate a capture-config object with default settings.
///
/// # Returns
/// `NRT_SUCCESS` with `*options` set; `NRT_INVALID` if `options` is NULL.
///
/// # Safety
/// `options` must be NULL or writable.
pub unsafe extern "C" fn nrt_sys_trace_config_allocate(
    options: *mut *mut nrt_sys_trace_config_t,
) -> NRT_STATUS {
    enter_status("nrt_sys_trace_config_allocate", Guard::None, || {
        // SAFETY: `options` is NULL or valid for writing one handle (this function's contract);
        // `out_param` refuses NULL and misalignment, so `out.write` is in bounds.
        let out = unsafe { out_param(options, "options") }?;
        out.write(handle::export(SysTraceConfig::default()));
        Ok(())
    })
}

/// Free a capture-config object. NULL is a no-op; an unknown pointer is logged and ignored.
///
/// # Safety
/// `options` must not be used afterwards.
pub unsafe extern "C" fn nrt_sys_trace_config_free(options: *mut nrt_sys_trace_config_t) {
    enter_void("nrt_sys_trace_config_free", Guard::None, || {
        // SAFETY: `options` is not used after this call (this function's contract), so no reference
        // from `handle::get` outlives the release; `release` refuses non-live handles.
        unsafe { handle::release::<SysTraceConfig>(options, "options") }.map(|_| ())
    })
}

/// Reset a capture-config object to its defaults (NULL or unknown: logged and ignored).
///
/// # Safety
/// `options` must be NULL or a config handle from this library that no other thread frees
/// during this call.
pub unsafe extern "C" fn nrt_sys_trace_config_set_defaults(options: *mut nrt_sys_trace_config_t) {
    enter_void("nrt_sys_trace_config_set_defaults", Guard::None, || {
        // SAFETY: `options` is NULL or a config object that no other thread frees during this call
        // (this function's contract), as `config` requires; `config` checks it against the live
        // table.
        unsafe { config(options, |s| *s = CaptureSettings::default()) }
    })
}

/// Set how many events are kept per core, the newest (0 = 65536; NULL or unknown: logged and
/// ignored).
///
/// # Safety
/// `options` must be NULL or a config handle from this library that no other thread frees
/// during this call.
pub unsafe extern "C" fn nrt_sys_trace_config_set_max_events_per_nc(
    options: *mut nrt_sys_trace_config_t,
    max_events_per_nc: u64,
) {
    enter_void(
        "nrt_sys_trace_config_set_max_events_per_nc",
        Guard::None,
        || {
            // SAFETY: `options` is NULL or a config object that no other thread frees during this
            // call (this function's contract), as `config` requires; `config` checks it against the
            // live table.
            unsafe { config(options, |s| s.max_events_per_nc = max_events_per_nc) }
        },
    )
}

/// Enable or disable capture on logical core `nc_idx`, process-relative (every core is captured
/// unless disabled; NULL or unknown: logged and ignored).
///
/// # Safety
/// `options` must be NULL or a config handle from this library that no other thread frees
/// during this call.
pub unsafe extern "C" fn nrt_sys_trace_config_set_capture_enabled_for_nc(
    options: *mut nrt_sys_trace_config_t,
    nc_idx: u32,
    enabled: bool,
) {
    enter_void(
        "nrt_sys_trace_config_set_capture_enabled_for_nc",
        Guard::None,
        || {
            // SAFETY: `options` is NULL or a config object that no other thread frees during this
            // call (this function's contract), as `config` requires; `config` checks it against the
            // live table.
            unsafe {
                config(options, |s| {
                    s.capture_nc.insert(nc_idx, enabled);
                })
            }
        },
    )
}

/// Enable or disable capture of an event type by name (every type is captured unless disabled);
/// any name is accepted and stored, one the trace does not know matches nothing.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` if `options` or `event_type` is NULL; `NRT_INVALID_HANDLE` if
/// `options` is not a live config object.
///
/// # Safety
/// `options` must be NULL or a config handle that no other thread frees during this call;
/// `event_type` NULL or NUL-terminated.
pub unsafe extern "C" fn nrt_sys_trace_config_set_capture_enabled_for_event_type(
    options: *mut nrt_sys_trace_config_t,
    event_type: *const c_char,
    enabled: bool,
) -> NRT_STATUS {
    enter_status(
        "nrt_sys_trace_config_set_capture_enabled_for_event_type",
        Guard::None,
        || {
            // SAFETY: `event_type` is NULL or NUL-terminated (this function's contract); `req_cstr`
            // refuses NULL.
            let name = unsafe { req_cstr(event_type, "event_type") }?;
            // SAFETY: `options` is NULL or a config object that no other thread frees during this
            // call (this function's contract), as `config` requires; `config` checks it against the
            // live table.
            unsafe {
                config(options, |s| {
                    s.event_types.insert(name, enabled);
                })
            }
        },
    )
}

/// The known event types `options` would capture (every one not disabled). Free the list with
/// `nrt_sys_trace_free_event_types`.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` if a pointer is NULL; `NRT_INVALID_HANDLE` if `options` is not
/// a live config object.
///
/// # Safety
/// `options` must be NULL or a config handle that no other thread frees during this call;
/// `event_types` and `count` NULL or writable.
pub unsafe extern "C" fn nrt_sys_trace_config_get_enabled_event_types(
    options: *mut nrt_sys_trace_config_t,
    event_types: *mut *mut *const c_char,
    count: *mut usize,
) -> NRT_STATUS {
    enter_status(
        "nrt_sys_trace_config_get_enabled_event_types",
        Guard::None,
        || {
            let mut types = Vec::new();
            // SAFETY: `options` is NULL or a config object that no other thread frees during this
            // call (this function's contract), as `config` requires; `config` checks it against the
            // live table.
            unsafe { config(options, |s| types = s.capture().enabled_types()) }?;
            // SAFETY: `event_types` and `count` are each NULL or valid for one write (this
            // function's contract), as `type_list` requires.
            unsafe { type_list(event_types, count, &types) }
        },
    )
}

/// Allocate a fetch-options object with default settings (all cores, all events).
///
/// # Returns
/// `NRT_SUCCESS` with `*options` set; `NRT_INVALID` if `options` is NULL.
///
/// # Safety
/// `options` must be NULL or writable.
pub unsafe extern "C" fn nrt_sys_trace_fetch_options_allocate(
    options: *mut *mut nrt_sys_trace_fetch_options_t,
) -> NRT_STATUS {
    enter_status("nrt_sys_trace_fetch_options_allocate", Guard::None, || {
        // SAFETY: `options` is NULL or valid for writing one handle (this function's contract);
        // `out_param` refuses NULL and misalignment, so `out.write` is in bounds.
        let out = unsafe { out_param(options, "options") }?;
        out.write(handle::export(SysTraceFetchOptions::default()));
        Ok(())
    })
}

/// Free a fetch-options object. NULL is a no-op; an unknown pointer is logged and ignored.
///
/// # Safety
/// `options` must not be used afterwards.
pub unsafe extern "C" fn nrt_sys_trace_fetch_options_free(
    options: *mut nrt_sys_trace_fetch_options_t,
) {
    enter_void("nrt_sys_trace_fetch_options_free", Guard::None, || {
        // SAFETY: `options` is not used after this call (this function's contract), so no reference
        // from `handle::get` outlives the release; `release` refuses non-live handles.
        unsafe { handle::release::<SysTraceFetchOptions>(options, "options") }.map(|_| ())
    })
}

/// Reset a fetch-options object to its defaults (NULL or unknown: logged and ignored).
///
/// # Safety
/// `options` must be NULL or a fetch-options handle from this library that no other thread
/// frees during this call.
pub unsafe extern "C" fn nrt_sys_trace_fetch_options_set_defaults(
    options: *mut nrt_sys_trace_fetch_options_t,
) {
    enter_void(
        "nrt_sys_trace_fetch_options_set_defaults",
        Guard::None,
        || {
            // SAFETY: `options` is NULL or a fetch-options object that no other thread frees during
            // this call (this function's contract), as `fetch` requires; `fetch` checks it against
            // the live table.
            unsafe { fetch(options, |s| *s = FetchSettings::default()) }
        },
    )
}

/// Set how many events are fetched per core (NULL or unknown: logged and ignored).
///
/// # Safety
/// `options` must be NULL or a fetch-options handle from this library that no other thread
/// frees during this call.
pub unsafe extern "C" fn nrt_sys_trace_fetch_options_set_max_events_per_nc(
    options: *mut nrt_sys_trace_fetch_options_t,
    max_events_per_nc: u64,
) {
    enter_void(
        "nrt_sys_trace_fetch_options_set_max_events_per_nc",
        Guard::None,
        || {
            // SAFETY: `options` is NULL or a fetch-options object that no other thread frees during
            // this call (this function's contract), as `fetch` requires; `fetch` checks it against
            // the live table.
            unsafe { fetch(options, |s| s.max_events_per_nc = max_events_per_nc) }
        },
    )
}

/// Fetch from logical core `nc_idx` only (NULL or unknown: logged and ignored).
///
/// # Safety
/// `options` must be NULL or a fetch-options handle from this library that no other thread
/// frees during this call.
pub unsafe extern "C" fn nrt_sys_trace_fetch_options_set_nc_idx(
    options: *mut nrt_sys_trace_fetch_options_t,
    nc_idx: u64,
) {
    enter_void(
        "nrt_sys_trace_fetch_options_set_nc_idx",
        Guard::None,
        || {
            // SAFETY: `options` is NULL or a fetch-options object that no other thread frees during
            // this call (this function's contract), as `fetch` requires; `fetch` checks it against
            // the live table.
            unsafe { fetch(options, |s| s.nc_idx = Some(nc_idx)) }
        },
    )
}

#[cfg(test)]
mod tests;

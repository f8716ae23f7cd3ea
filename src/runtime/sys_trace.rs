//! The system trace's recorder (`nrt_sys_trace.h`, docs/contract/abi.md §3.9): what the software
//! device really runs, as start/stop event pairs per logical core, kept while a capture is
//! active and handed to `nrt_sys_trace_fetch_events` as JSON.
//!
//! **Where events come from.** The runtime records where it runs the work, never the ABI:
//! * [`NC_EXEC`] — one model execution (`runtime::model`): every `nrt_execute`, each run of
//!   `nrt_execute_repeat`, and every `nrta_execute_schedule` when its XU runs it.
//! * [`CC_EXEC`] — one collective on this core: `nrta_cc_schedule` / `nrt_cc_schedule` from
//!   the moment its queue starts it until it completes (the wait for the other ranks
//!   included, as on the device), `nrt_barrier`, `nrt_all_gather`, and each collective inside
//!   a NEFF execution (nested in its [`NC_EXEC`] pair).
//! * [`TENSOR_OP`] — one `nrta_tensor_read` / `_write` / `_copy` when its XU runs it.
//!
//! **The event.** `{"event_type", "phase": "start"|"stop", "tracking_id", "nc_idx",
//! "timestamp_ns", "data": {"nc_timestamp_ns", "name", "status"? | "exec_ret"?}}`; both phases of one run
//! share its `tracking_id` (unique within the process), `nc_idx` is the process-relative
//! logical core, the timestamps are `CLOCK_MONOTONIC` nanoseconds (the software device's clock
//! is the host's, so `timestamp_ns == nc_timestamp_ns`), and a stop carries the status name of
//! the run (`NRT_SUCCESS` or its error), or for a tensor operation the `NRT_STATUS` number its
//! XU wrote to `exec_ret`. The fetch wraps the events in `{"events": [...]}`,
//! oldest first. The event-type names other than `nc_exec_running` and the extra fields are
//! OpenNRT's (\[L\] in docs/abi-status.md).
//!
//! **The capture.** [`start`] replaces any earlier capture and empties the buffers; [`stop`]
//! ends recording but keeps what was recorded (a run in flight still records its stop); a
//! fetch consumes what it returns. Every core and every type is captured unless its setting
//! says `false`; each core keeps at most `max_events_per_nc` events (0 =
//! [`DEFAULT_MAX_EVENTS_PER_NC`]) and drops its oldest past that, as a ring does. `nrt_close`
//! forgets everything ([`reset`]).
//!
//! **Cost.** With no capture active, [`begin`] is one relaxed atomic load.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};

use once_cell::sync::Lazy;
use parking_lot::Mutex;
use serde::Serialize;

use crate::error::Result;

/// A model execution on a core.
pub const NC_EXEC: &str = "nc_exec_running";
/// A collective on a core.
pub const CC_EXEC: &str = "cc_exec_running";
/// An async tensor operation (read, write, copy) on a core's tensor-op XU.
pub const TENSOR_OP: &str = "tensor_op_running";
/// Every event type the recorder knows, in `nrt_sys_trace_get_event_types` order.
pub const EVENT_TYPES: [&str; 3] = [NC_EXEC, CC_EXEC, TENSOR_OP];
/// Events kept per core when the capture says 0.
pub const DEFAULT_MAX_EVENTS_PER_NC: u64 = 1 << 16;

/// What a capture records (the settings of `nrt_sys_trace_config_t`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Capture {
    /// Events kept per core (0 = [`DEFAULT_MAX_EVENTS_PER_NC`]).
    pub max_events_per_nc: u64,
    /// Logical core → captured; a core not named is captured.
    pub cores: BTreeMap<u32, bool>,
    /// Event type name → captured; a type not named is captured. Unknown names are kept and
    /// match nothing.
    pub event_types: BTreeMap<String, bool>,
}

impl Capture {
    /// Whether events of core `nc` are recorded.
    pub fn core_on(&self, nc: u32) -> bool {
        self.cores.get(&nc).copied().unwrap_or(true)
    }
    /// Whether events of type `t` are recorded.
    pub fn type_on(&self, t: &str) -> bool {
        self.event_types.get(t).copied().unwrap_or(true)
    }
    /// The known event types this capture records.
    pub fn enabled_types(&self) -> Vec<&'static str> {
        EVENT_TYPES
            .into_iter()
            .filter(|t| self.type_on(t))
            .collect()
    }
    fn limit(&self) -> usize {
        match self.max_events_per_nc {
            0 => DEFAULT_MAX_EVENTS_PER_NC as usize,
            n => usize::try_from(n).unwrap_or(usize::MAX),
        }
    }
}

/// The phase of an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// The run began on the core.
    Start,
    /// The run ended.
    Stop,
}

/// The `data` object of an event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EventData {
    /// The core's clock at the event, in ns (`CLOCK_MONOTONIC`).
    pub nc_timestamp_ns: u64,
    /// What ran: the model's name, the collective, the tensor operation.
    pub name: String,
    /// Stop only: the status name of the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<&'static str>,
    /// Stop of an XU request only: the `NRT_STATUS` number written to its `exec_ret`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exec_ret: Option<i32>,
}

/// One recorded event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Event {
    /// One of [`EVENT_TYPES`].
    pub event_type: &'static str,
    /// Start or stop.
    pub phase: Phase,
    /// Shared by the start and the stop of one run.
    pub tracking_id: u64,
    /// Process-relative logical core.
    pub nc_idx: u32,
    /// Host clock at the event, in ns (`CLOCK_MONOTONIC`).
    pub timestamp_ns: u64,
    /// Details.
    pub data: EventData,
}

#[derive(Default)]
struct Recorder {
    /// The active capture (`None` after [`stop`]).
    capture: Option<Capture>,
    /// Bumped by every [`start`] and [`reset`]: a run begun under an older capture records
    /// no stop.
    generation: u64,
    /// The limit of the capture the buffers were filled under.
    limit: usize,
    rings: BTreeMap<u32, VecDeque<Event>>,
    next_id: u64,
}

impl Recorder {
    fn push(&mut self, e: Event) {
        let limit = self.limit.max(1);
        let ring = self.rings.entry(e.nc_idx).or_default();
        if ring.len() >= limit {
            ring.pop_front();
        }
        ring.push_back(e);
    }
}

static ACTIVE: AtomicBool = AtomicBool::new(false);
static RECORDER: Lazy<Mutex<Recorder>> = Lazy::new(|| Mutex::new(Recorder::default()));

/// `CLOCK_MONOTONIC` in nanoseconds.
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// Start a capture: replaces any earlier one and empties the buffers.
pub fn start(capture: Capture) {
    let mut r = RECORDER.lock();
    r.generation += 1;
    r.limit = capture.limit();
    r.rings.clear();
    r.capture = Some(capture);
    ACTIVE.store(true, Ordering::Release);
}

/// Stop recording; what was recorded stays until fetched, the next [`start`] or [`reset`].
pub fn stop() {
    let mut r = RECORDER.lock();
    r.capture = None;
    ACTIVE.store(false, Ordering::Release);
}

/// Forget the capture and every event (`nrt_close`).
pub fn reset() {
    let mut r = RECORDER.lock();
    r.capture = None;
    r.generation += 1;
    r.rings.clear();
    ACTIVE.store(false, Ordering::Release);
}

/// Whether a capture is active.
pub fn active() -> bool {
    ACTIVE.load(Ordering::Relaxed)
}

/// Take (consume) the recorded events: of core `nc` only, or of every core; at most
/// `max_per_nc` per core (0 = all), the oldest first. The result is ordered by time.
pub fn take(nc: Option<u32>, max_per_nc: u64) -> Vec<Event> {
    let mut r = RECORDER.lock();
    let n = match max_per_nc {
        0 => usize::MAX,
        m => usize::try_from(m).unwrap_or(usize::MAX),
    };
    let mut out = Vec::new();
    for (core, ring) in r.rings.iter_mut() {
        if nc.is_some_and(|c| c != *core) {
            continue;
        }
        let k = ring.len().min(n);
        out.extend(ring.drain(..k));
    }
    // Stable: a start and a stop with one timestamp keep their order.
    out.sort_by_key(|e| e.timestamp_ns);
    out
}

/// The fetch text: `{"events": [...]}`.
pub fn to_json(events: &[Event]) -> Result<String> {
    #[derive(Serialize)]
    struct Doc<'a> {
        events: &'a [Event],
    }
    serde_json::to_string(&Doc { events })
        .map_err(|e| crate::error::Error::failure(format!("sys trace: encoding events: {e}")))
}

/// One run being recorded: made by [`begin`], closed by [`Span::end`] (or, if dropped, with
/// status `NRT_FAILURE`).
#[derive(Debug)]
pub struct Span {
    event_type: &'static str,
    nc: u32,
    id: u64,
    generation: u64,
    name: String,
    done: bool,
}

/// Record the start of a run of `event_type` on core `nc`; `None` (and `name` never called)
/// when no capture is active or it leaves out this core or type.
pub fn begin(event_type: &'static str, nc: u32, name: impl FnOnce() -> String) -> Option<Span> {
    if !active() {
        return None;
    }
    let mut r = RECORDER.lock();
    let on = r
        .capture
        .as_ref()
        .is_some_and(|c| c.core_on(nc) && c.type_on(event_type));
    if !on {
        return None;
    }
    r.next_id += 1;
    let id = r.next_id;
    let name = name();
    let t = now_ns();
    r.push(Event {
        event_type,
        phase: Phase::Start,
        tracking_id: id,
        nc_idx: nc,
        timestamp_ns: t,
        data: EventData {
            nc_timestamp_ns: t,
            name: name.clone(),
            status: None,
            exec_ret: None,
        },
    });
    Some(Span {
        event_type,
        nc,
        id,
        generation: r.generation,
        name,
        done: false,
    })
}

impl Span {
    /// Record the stop of this run with the status of its result.
    pub fn end<T>(mut self, result: &Result<T>) {
        let status = match result {
            Ok(_) => crate::status::nrt_status::NRT_SUCCESS.name(),
            Err(e) => e.status_name(),
        };
        self.record_stop(Some(status), None);
    }

    /// Record the stop of an XU request that wrote `exec_ret`.
    pub fn end_exec_ret(mut self, exec_ret: i32) {
        self.record_stop(None, Some(exec_ret));
    }

    fn record_stop(&mut self, status: Option<&'static str>, exec_ret: Option<i32>) {
        self.done = true;
        let t = now_ns();
        let mut r = RECORDER.lock();
        if r.generation != self.generation {
            return;
        }
        r.push(Event {
            event_type: self.event_type,
            phase: Phase::Stop,
            tracking_id: self.id,
            nc_idx: self.nc,
            timestamp_ns: t,
            data: EventData {
                nc_timestamp_ns: t,
                name: std::mem::take(&mut self.name),
                status,
                exec_ret,
            },
        });
    }
}

impl Drop for Span {
    fn drop(&mut self) {
        if !self.done {
            self.record_stop(Some(crate::status::nrt_status::NRT_FAILURE.name()), None);
        }
    }
}

/// Run `f` as one run of `event_type` on core `nc`, recorded when a capture wants it.
pub fn record<T>(
    event_type: &'static str,
    nc: u32,
    name: impl FnOnce() -> String,
    f: impl FnOnce() -> Result<T>,
) -> Result<T> {
    let span = begin(event_type, nc, name);
    let r = f();
    if let Some(s) = span {
        s.end(&r);
    }
    r
}

#[cfg(test)]
mod tests;

//! Execution units (XUs): the request queues behind the explicit async API, their sequence ids,
//! completion, and the caller's eventfds (docs/design.md §2.4; docs/contract/abi.md §3.6,
//! §5.4–§5.6).
//!
//! An execution unit is one FIFO identified by (logical core, [`XuType`], queue index); per
//! logical core there are 2 tensor-op queues, 1 compute queue and 3 collectives queues (§3.6).
//! Each XU that has ever been submitted to owns one worker thread
//! (`opennrt-xu-<lnc>-<type>-<queue>`, type as its `nrta_xu_t` number) that runs its requests
//! one at a time in submission order; different XUs run concurrently — that is the point of the
//! API (overlap compute, collectives and transfers), and a collectives job blocking on its peer
//! ranks only blocks its own XU. Ordering *across* XUs is the caller's business (§5.4).
//!
//! A request's life (§5.4): [`submit`] checks the core and queue, refuses a dead XU
//! (`ExecUnitUnrecoverable`) or a full compute queue (`QueueFull`), spawns the worker on first
//! use, assigns the next counter (first 1) and returns the encoded [`nrta_seq_t`](encode_seq).
//! The worker runs the [`Job`], writes the status of its result to the caller's `exec_ret` (if
//! non-null), *then* advances the XU's completed counter, *then* signals the registered
//! eventfds. So a caller that sees a request complete (by [`is_completed`], [`last_completed`] or
//! an eventfd) also sees its status.
//!
//! Status numbers: a [`Job`] returns the core's `Result`; this module turns it into the number
//! written to `exec_ret`, with the core's one mapping ([`Error::status`], `crate::status`), as the
//! C boundary does for a call's own status. The one status that is not a job's result is
//! `NRT_EXEC_UNIT_UNRECOVERABLE` (docs/contract/abi.md §2.1), for a job that panicked and for the
//! requests queued behind it.
//!
//! Dead XU: a panicking job is caught on the worker; its XU is marked dead, the job and every
//! request still queued behind it complete with `NRT_EXEC_UNIT_UNRECOVERABLE` (so nothing waiting
//! on them hangs),
//! the worker exits, and every later [`submit`] to that XU fails with `ExecUnitUnrecoverable`
//! until [`shutdown`] (`nrt_close`) forgets it ("restart required", §3.6).
//!
//! Choice (eventfds, §5.6): one seq-fd per sequence id and one XU-fd per XU; registering again
//! replaces the previous fd. Registrations are kept under the XU's lock and signalled under it,
//! so once a deregistration (`fd = -1`) returns the runtime never writes to that fd again and the
//! caller may close it. [`shutdown`] drops every registration.
//!
//! Choice (the core byte, §5.5): the process-relative logical core (`lnc` as the caller passes
//! it), which is what [`is_completed`] needs to find the queue; no known client decodes it.

use std::collections::{BTreeMap, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::error::{Error, ErrorKind, Result};
use crate::runtime::process;
use crate::status::nrt_status;

/// The GEN-B execution-unit types with their `nrta_xu_t` numbers (docs/contract/abi.md §2.2,
/// docs/design.md §2.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum XuType {
    /// `NRTA_XU_TENSOR_OP`: tensor read/write/copy (2 queues).
    TensorOp = 0,
    /// `NRTA_XU_COMPUTE`: model execution (1 queue, bounded).
    Compute = 1,
    /// `NRTA_XU_COLLECTIVES`: host-driven collectives (3 queues).
    Collectives = 2,
}

impl XuType {
    /// Decode an `nrta_xu_t` value; `NRTA_XU_TYPE_NUM` (3) and above are `Invalid`.
    pub fn from_raw(v: u32) -> Result<XuType> {
        match v {
            0 => Ok(XuType::TensorOp),
            1 => Ok(XuType::Compute),
            2 => Ok(XuType::Collectives),
            _ => Err(Error::invalid(format!(
                "nrta_xu_t {v} is not an execution-unit type (0 TENSOR_OP, 1 COMPUTE, 2 COLLECTIVES)"
            ))),
        }
    }

    /// Queues per logical core (docs/contract/abi.md §3.6): tensor-op 2, compute 1, collectives 3.
    pub fn queues(self) -> u32 {
        match self {
            XuType::TensorOp => 2,
            XuType::Compute => 1,
            XuType::Collectives => 3,
        }
    }

    /// The vendor's enumerator name, for messages.
    pub fn name(self) -> &'static str {
        match self {
            XuType::TensorOp => "NRTA_XU_TENSOR_OP",
            XuType::Compute => "NRTA_XU_COMPUTE",
            XuType::Collectives => "NRTA_XU_COLLECTIVES",
        }
    }
}

/// Where a request's own status goes at completion (C's `NRT_STATUS *exec_ret`); may be null.
#[derive(Debug, Clone, Copy)]
pub struct ExecRet(pub *mut i32);

// SAFETY: the pointer is only written once, by the XU worker, when the request completes; the async
// API contract (docs/contract/abi.md §3.6) makes the caller keep `*exec_ret` valid and untouched
// until then, which is what makes handing it to the worker thread sound.
unsafe impl Send for ExecRet {}

impl ExecRet {
    /// No status wanted.
    pub const NONE: ExecRet = ExecRet(std::ptr::null_mut());

    fn store(self, status: i32) {
        if !self.0.is_null() {
            // SAFETY: non-null and aligned (checked by `submit`); valid until completion by the
            // caller's promise (see the `Send` impl). Volatile: C callers may poll it.
            unsafe { self.0.write_volatile(status) }
        }
    }
}

/// A request body: runs on the XU's worker thread; the status of its result ([`exec_ret_of`])
/// is written to the request's `exec_ret`. A job logs its own error (it knows what it was
/// doing); the XU only writes the status.
pub type Job = Box<dyn FnOnce() -> Result<()> + Send + 'static>;

/// The `NRT_STATUS` number a request's result writes to its `exec_ret`: `NRT_SUCCESS`, or the
/// error's status (the core's one mapping, [`Error::status`]).
pub fn exec_ret_of(result: &Result<()>) -> i32 {
    match result {
        Ok(()) => nrt_status::NRT_SUCCESS.code(),
        Err(e) => e.status().code(),
    }
}

/// The `exec_ret` of a request whose job panicked, and of every request queued behind it.
fn unrecoverable() -> i32 {
    nrt_status::NRT_EXEC_UNIT_UNRECOVERABLE.code()
}

/// Bits of the per-XU counter in an `nrta_seq_t` (docs/contract/abi.md §2.3, §5.5).
pub const SEQ_COUNTER_BITS: u32 = 48;
/// Mask of the counter (`NRTA_SEQ_NUM_MASK`).
pub const SEQ_COUNTER_MASK: u64 = (1u64 << SEQ_COUNTER_BITS) - 1;
/// The vendor asserts the counter stays below `2^48 − 2` and never wraps (docs/contract/abi.md
/// §5.5); a submit that would reach it is refused with `Resource`.
const SEQ_COUNTER_LIMIT: u64 = SEQ_COUNTER_MASK - 1;
/// The core byte of the XU id holds 8 bits (docs/contract/abi.md §5.5).
const MAX_ENCODABLE_LNC: u32 = 0xFF;

/// The compute queue's depth variable (docs/contract/abi.md §5.4).
pub const COMPUTE_MAX_QUEUED_ENV: &str = "NEURON_RT_XU_COMPUTE_MAX_QUEUED_REQUESTS";
/// Its default (docs/contract/abi.md §5.4, confidence M).
pub const DEFAULT_COMPUTE_MAX_QUEUED: u64 = 8;

/// The depth limit of the compute queue from `get` (the environment in production): requests
/// submitted and not yet completed, the running one included (Choice: counting outstanding rather
/// than waiting requests makes the limit independent of when the worker picks a request up).
/// Default 8; a value that is not a positive whole number is `Invalid`, naming the variable.
pub fn compute_queue_limit(get: &impl Fn(&str) -> Option<String>) -> Result<u64> {
    match get(COMPUTE_MAX_QUEUED_ENV) {
        None => Ok(DEFAULT_COMPUTE_MAX_QUEUED),
        Some(v) => match v.trim().parse::<u64>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(Error::bad_variable(
                COMPUTE_MAX_QUEUED_ENV,
                &v,
                "not a positive whole number of requests",
            )),
        },
    }
}

/// Encode an `nrta_seq_t` exactly as docs/contract/abi.md §5.5's table:
/// `lnc << 56 | (queue & 0xF) << 52 | (xu & 0xF) << 48 | counter` (counter masked to 48 bits).
pub fn encode_seq(lnc: u32, xu: XuType, queue: u32, counter: u64) -> u64 {
    (u64::from(lnc & MAX_ENCODABLE_LNC) << 56)
        | (u64::from(queue & 0xF) << 52)
        | ((xu as u64 & 0xF) << 48)
        | (counter & SEQ_COUNTER_MASK)
}

/// One execution unit's address, checked against the process's cores and the queue ranges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XuId {
    /// Process-relative logical core.
    pub lnc: u32,
    /// Type.
    pub xu: XuType,
    /// Queue index within the type.
    pub queue: u32,
}

impl XuId {
    /// Check `lnc` against the visible cores (`NRT_INVALID` beyond, and beyond the 8-bit core byte
    /// of docs/contract/abi.md §5.5) and `queue` against the ranges of §3.6.
    pub fn new(lnc: u32, xu: XuType, queue: u32) -> Result<XuId> {
        if queue >= xu.queues() {
            return Err(Error::invalid(format!(
                "queue {queue} is out of range for {} ({} queue{} per logical core: 0..={})",
                xu.name(),
                xu.queues(),
                if xu.queues() == 1 { "" } else { "s" },
                xu.queues() - 1
            ))
            .with_field("queue")
            .with_values(format!("0..={}", xu.queues() - 1), queue));
        }
        let visible = process::visible_cores()?;
        if lnc >= visible || lnc > MAX_ENCODABLE_LNC {
            return Err(Error::invalid(format!(
                "logical core {lnc} is out of range: this process owns {visible} logical cores (0..{visible})"
            ))
            .with_field("lnc")
            .with_values(format!("0..{visible}"), lnc));
        }
        Ok(XuId { lnc, xu, queue })
    }

    /// Split an encoded sequence id into its XU and counter; `Invalid` if it names no XU.
    pub fn decode(seq: u64) -> Result<(XuId, u64)> {
        let id = Self::new(
            (seq >> 56) as u32,
            XuType::from_raw(((seq >> 48) & 0xF) as u32)?,
            ((seq >> 52) & 0xF) as u32,
        )
        .map_err(|e| {
            e.context(format_args!(
                "sequence id {seq:#018x} names no execution unit"
            ))
        })?;
        Ok((id, seq & SEQ_COUNTER_MASK))
    }

    /// The sequence id of this XU's request `counter`.
    pub fn seq(self, counter: u64) -> u64 {
        encode_seq(self.lnc, self.xu, self.queue, counter)
    }

    /// The 16-bit XU id (`NRTA_SEQ_GET_XU_ID`), the registry key.
    fn key(self) -> u16 {
        (self.seq(0) >> SEQ_COUNTER_BITS) as u16
    }

    fn thread_name(self) -> String {
        format!("opennrt-xu-{}-{}-{}", self.lnc, self.xu as u32, self.queue)
    }
}

impl std::fmt::Display for XuId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "XU (lnc {}, {}, queue {})",
            self.lnc,
            self.xu.name(),
            self.queue
        )
    }
}

struct Request {
    counter: u64,
    exec_ret: ExecRet,
    job: Job,
}

/// What one XU's lock protects.
#[derive(Default)]
struct XuState {
    /// Submitted, not yet taken by the worker.
    pending: VecDeque<Request>,
    /// Last counter handed out (0 before any).
    submitted: u64,
    /// Last counter completed (0 before any); `completed <= submitted`.
    completed: u64,
    /// Outstanding-request limit (compute only), fixed when the worker starts.
    limit: Option<u64>,
    worker: Option<JoinHandle<()>>,
    dead: bool,
    stop: bool,
    /// Counter → the fd to signal once when it completes.
    seq_fds: BTreeMap<u64, i32>,
    /// The fd to signal at every completion.
    xu_fd: Option<i32>,
    /// The counter of the request in flight outside the worker ([`begin_inline`]): the worker
    /// starts nothing queued behind it until it completes (FIFO order holds).
    inline: Option<u64>,
}

struct Xu {
    id: XuId,
    state: Mutex<XuState>,
    /// Wakes the worker: a request was queued or `stop` was set.
    work: Condvar,
    /// Wakes drainers: `completed` advanced.
    progress: Condvar,
}

/// Every XU this runtime has touched, by 16-bit XU id.
static XUS: Mutex<BTreeMap<u16, Arc<Xu>>> = Mutex::new(BTreeMap::new());

fn unit(id: XuId) -> Arc<Xu> {
    XUS.lock()
        .entry(id.key())
        .or_insert_with(|| {
            Arc::new(Xu {
                id,
                state: Mutex::new(XuState::default()),
                work: Condvar::new(),
                progress: Condvar::new(),
            })
        })
        .clone()
}

fn existing(id: XuId) -> Option<Arc<Xu>> {
    XUS.lock().get(&id.key()).cloned()
}

/// Enqueue `job` on XU (`lnc`, `xu`, `queue`) and return its encoded sequence id
/// (docs/contract/abi.md §5.4).
///
/// Errors: `Invalid` for a core or queue out of range or a misaligned `exec_ret`;
/// `ExecUnitUnrecoverable` once a job of this XU panicked; `QueueFull` when the compute queue has
/// [`compute_queue_limit`] requests outstanding (tensor-op and collectives queues are unbounded,
/// as the growable queues of 2.31, §5.4); `Closed` while [`shutdown`] stops this XU; `Resource`
/// if the worker thread cannot be spawned. On error `job` is dropped without running.
pub fn submit(lnc: u32, xu: XuType, queue: u32, exec_ret: ExecRet, job: Job) -> Result<u64> {
    let id = XuId::new(lnc, xu, queue)?;
    if !exec_ret.0.is_aligned() {
        return Err(Error::invalid("exec_ret is not aligned for NRT_STATUS"));
    }
    let unit = unit(id);
    let mut st = unit.state.lock();
    if st.dead {
        return Err(Error::new(
            ErrorKind::ExecUnitUnrecoverable,
            format!("{id} is dead (a request failed unrecoverably); restart required: nrt_close, then nrt_init"),
        ));
    }
    if st.stop {
        return Err(Error::new(
            ErrorKind::Closed,
            format!("{id} is shutting down"),
        ));
    }
    ensure_worker(&unit, &mut st)?;
    let outstanding = st.submitted - st.completed;
    if let Some(limit) = st.limit {
        if outstanding >= limit {
            return Err(Error::new(
                ErrorKind::QueueFull,
                format!("{id} has {outstanding} requests outstanding (limit {limit}, {COMPUTE_MAX_QUEUED_ENV}); wait for a completion and retry"),
            )
            .with_field(COMPUTE_MAX_QUEUED_ENV)
            .with_values(limit, outstanding));
        }
    }
    if st.submitted >= SEQ_COUNTER_LIMIT {
        return Err(Error::resource(format!("{id}: sequence counter exhausted")));
    }
    st.submitted += 1;
    let counter = st.submitted;
    st.pending.push_back(Request {
        counter,
        exec_ret,
        job,
    });
    drop(st);
    unit.work.notify_one();
    Ok(id.seq(counter))
}

/// Start `unit`'s worker if it has none (the first request that needs it).
fn ensure_worker(unit: &Arc<Xu>, st: &mut XuState) -> Result<()> {
    if st.worker.is_some() {
        return Ok(());
    }
    st.limit = match unit.id.xu {
        XuType::Compute => Some(crate::runtime::process::config()?.compute_queue_limit),
        XuType::TensorOp | XuType::Collectives => None,
    };
    let worker_unit = unit.clone();
    let handle = std::thread::Builder::new()
        .name(unit.id.thread_name())
        .spawn(move || serve(worker_unit))
        .map_err(|e| Error::resource(format!("cannot start the worker of {}: {e}", unit.id)))?;
    st.worker = Some(handle);
    Ok(())
}

/// A request of an XU that its submitter runs on its own thread instead of the XU's worker
/// ([`begin_inline`]); whoever finishes it calls [`InlineRequest::complete`]. Dropped without
/// completing (a bug, or a panic on the way), it completes with `NRT_EXEC_UNIT_UNRECOVERABLE`,
/// so nothing waiting on it hangs.
pub struct InlineRequest {
    unit: Option<Arc<Xu>>,
    counter: u64,
    exec_ret: ExecRet,
}

impl std::fmt::Debug for InlineRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InlineRequest")
            .field("counter", &self.counter)
            .finish_non_exhaustive()
    }
}

impl InlineRequest {
    /// Write the status of `result` to the request's `exec_ret`, then complete it (the order of
    /// [`submit`]'s worker: a caller that sees it complete also sees its status) and let the
    /// worker go on with what was queued behind it.
    pub fn complete(mut self, result: Result<()>) {
        self.finish(exec_ret_of(&result));
    }

    /// Give the rest of the request to the XU's worker: `job` runs first, before anything
    /// queued behind the request, and completes it as any queued request completes. Why: the
    /// caller started a request it cannot finish without waiting for other processes, and
    /// must not wait in its schedule call (it may be about to schedule what they wait for).
    /// When no worker can be started, the job runs here, on the caller's thread.
    pub fn hand_over(mut self, job: Job) {
        let Some(unit) = self.unit.take() else { return };
        let mut st = unit.state.lock();
        if let Err(e) = ensure_worker(&unit, &mut st) {
            drop(st);
            crate::log_warn!(
                "xu",
                "{e}: request {} runs on the caller's thread",
                self.counter
            );
            self.unit = Some(unit);
            let status = catch_unwind(AssertUnwindSafe(job))
                .map_or_else(|_| unrecoverable(), |r| exec_ret_of(&r));
            self.finish(status);
            return;
        }
        st.inline = None;
        st.pending.push_front(Request {
            counter: self.counter,
            exec_ret: self.exec_ret,
            job,
        });
        drop(st);
        unit.work.notify_one();
    }

    fn finish(&mut self, status: i32) {
        let Some(unit) = self.unit.take() else { return };
        self.exec_ret.store(status);
        let mut st = unit.state.lock();
        complete(&mut st, unit.id, self.counter);
        st.inline = None;
        let queued = !st.pending.is_empty();
        drop(st);
        if queued {
            unit.work.notify_one();
        }
        unit.progress.notify_all();
    }
}

impl Drop for InlineRequest {
    fn drop(&mut self) {
        if self.unit.is_some() {
            crate::log_error!(
                "xu",
                "request {} was dropped without completing; it completes with NRT_EXEC_UNIT_UNRECOVERABLE",
                self.counter
            );
            self.finish(unrecoverable());
        }
    }
}

/// Take the next request of XU (`lnc`, `xu`, `queue`) to run on the caller's thread, if the XU
/// is idle (nothing queued, nothing running, no other inline request): returns it with its
/// encoded sequence id. `None` when the XU is busy — then [`submit`] queues the work behind
/// what is there, as the FIFO requires. Errors as [`submit`]'s.
///
/// Why: a request the caller can finish itself (the last rank of a collective to arrive runs
/// it) would otherwise cost two thread hand-offs on a two-core machine.
pub fn begin_inline(
    lnc: u32,
    xu: XuType,
    queue: u32,
    exec_ret: ExecRet,
) -> Result<Option<(InlineRequest, u64)>> {
    let id = XuId::new(lnc, xu, queue)?;
    if !exec_ret.0.is_aligned() {
        return Err(Error::invalid("exec_ret is not aligned for NRT_STATUS"));
    }
    let unit = unit(id);
    let mut st = unit.state.lock();
    if st.dead {
        return Err(Error::new(
            ErrorKind::ExecUnitUnrecoverable,
            format!("{id} is dead (a request failed unrecoverably); restart required: nrt_close, then nrt_init"),
        ));
    }
    if st.stop {
        return Err(Error::new(
            ErrorKind::Closed,
            format!("{id} is shutting down"),
        ));
    }
    if st.inline.is_some() || !st.pending.is_empty() || st.completed != st.submitted {
        return Ok(None);
    }
    if st.submitted >= SEQ_COUNTER_LIMIT {
        return Err(Error::resource(format!("{id}: sequence counter exhausted")));
    }
    st.submitted += 1;
    let counter = st.submitted;
    st.inline = Some(counter);
    drop(st);
    Ok(Some((
        InlineRequest {
            unit: Some(unit),
            counter,
            exec_ret,
        },
        id.seq(counter),
    )))
}

/// The worker of one XU: serve the FIFO until told to stop (queue empty) or the XU dies.
fn serve(unit: Arc<Xu>) {
    loop {
        let req = {
            let mut st = unit.state.lock();
            loop {
                if st.inline.is_none() {
                    if let Some(r) = st.pending.pop_front() {
                        break r;
                    }
                }
                if st.stop && st.pending.is_empty() {
                    return;
                }
                unit.work.wait(&mut st);
            }
        };
        let span = match unit.id.xu {
            XuType::TensorOp => crate::runtime::sys_trace::begin(
                crate::runtime::sys_trace::TENSOR_OP,
                unit.id.lnc,
                || {
                    format!(
                        "{} queue {} request {}",
                        unit.id.xu.name(),
                        unit.id.queue,
                        req.counter
                    )
                },
            ),
            XuType::Compute | XuType::Collectives => None,
        };
        let outcome = catch_unwind(AssertUnwindSafe(req.job));
        let status = outcome
            .as_ref()
            .map_or_else(|_| unrecoverable(), exec_ret_of);
        if let Some(s) = span {
            s.end_exec_ret(status);
        }
        req.exec_ret.store(status);
        let mut st = unit.state.lock();
        complete(&mut st, unit.id, req.counter);
        if let Err(payload) = outcome {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic payload".into());
            crate::log_error!(
                "xu",
                "{} died: request {} panicked ({what}); it and the {} request(s) queued behind it complete with NRT_EXEC_UNIT_UNRECOVERABLE, later submits are refused until nrt_close",
                unit.id,
                req.counter,
                st.pending.len()
            );
            st.dead = true;
            while let Some(r) = st.pending.pop_front() {
                r.exec_ret.store(unrecoverable());
                complete(&mut st, unit.id, r.counter);
            }
        }
        let dead = st.dead;
        drop(st);
        unit.progress.notify_all();
        if dead {
            return;
        }
    }
}

/// Advance `completed` to `counter` and signal the fds that are due (docs/contract/abi.md §5.6).
fn complete(st: &mut XuState, id: XuId, counter: u64) {
    st.completed = counter;
    if let Some(fd) = st.xu_fd {
        signal(fd, id);
    }
    let later = st.seq_fds.split_off(&(counter + 1));
    for (_, fd) in std::mem::replace(&mut st.seq_fds, later) {
        signal(fd, id);
    }
}

/// `write(fd, &1u64, 8)`: an eventfd counter increment (docs/contract/abi.md §5.6). `EAGAIN` (a
/// saturated non-blocking counter) is fine — the fd is readable already; `EINTR` retries; anything
/// else is logged and otherwise ignored (the fd is the caller's; we never read or close it).
fn signal(fd: i32, id: XuId) {
    let one: u64 = 1;
    loop {
        // SAFETY: writes 8 bytes from a live local; `fd` is only a number to the kernel.
        let n = unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
        if n == 8 {
            return;
        }
        let err = std::io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EAGAIN) => return,
            _ => {
                crate::log_warn!("xu", "{id}: signalling completion fd {fd} failed: {err}");
                return;
            }
        }
    }
}

/// An fd argument of the registration functions: -1 (deregister) or an open descriptor.
fn check_fd(fd: i32) -> Result<()> {
    if fd == -1 {
        return Ok(());
    }
    // SAFETY: F_GETFD only queries the descriptor table.
    if fd < 0 || unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1 {
        return Err(Error::invalid(format!(
            "fd {fd} is not an open file descriptor (pass an eventfd, or -1 to deregister)"
        )));
    }
    Ok(())
}

/// Has request `seq` completed? (docs/contract/abi.md §5.4: its XU's completed counter ≥ its
/// counter.) `Invalid` for a seq that decodes to no XU, and for one whose counter this XU never
/// handed out (a poller would otherwise wait forever for it). Choice: counter 0 of any XU, used or
/// not, has completed (the vendor's per-core XU tables exist from init).
pub fn is_completed(seq: u64) -> Result<bool> {
    let (id, counter) = XuId::decode(seq)?;
    match existing(id) {
        Some(u) => {
            let st = u.state.lock();
            never_submitted(&st, id, counter)?;
            Ok(st.completed >= counter)
        }
        None => never_submitted(&XuState::default(), id, counter).map(|()| true),
    }
}

/// `Invalid` if `counter` is beyond what XU `id` handed out (its state `st`).
fn never_submitted(st: &XuState, id: XuId, counter: u64) -> Result<()> {
    if counter <= st.submitted {
        return Ok(());
    }
    Err(Error::invalid(format!(
        "sequence id {:#018x} was never handed out: {} has submitted {} request(s) since \
         nrt_init, this one would be number {counter}",
        id.seq(counter),
        id,
        st.submitted
    ))
    .with_field("seq")
    .with_step(counter)
    .with_values(format!("<= {}", st.submitted), counter))
}

/// [`is_completed`] for a caller that polls (`nrta_is_completed`): when the request has not
/// completed, the thread gives its CPU away before returning `false` — by a yield while an
/// inline request is young, otherwise by sleeping on the XU's completion (woken at once by it)
/// for at most [`POLL_SLEEP`] per call: at once for a request on the worker thread, after
/// [`POLL_YIELD_FOR`] of polling the same inline request.
///
/// Why: the software device runs on the host's cores, often on the thread of another rank of
/// the same process (the last to arrive runs the collective). A loop polling with nothing in
/// between — the README's example, and many users' — would otherwise compete with it for
/// the machine's cores: measured with `bench/nrt_allreduce.c` (`--wait spin`) before the yield,
/// 8 ranks as threads at 4 KiB took 40 ms per all-reduce against 0.44 ms with it. Yielding
/// alone is not enough with many pollers: 127 ranks yielding in a loop left the one running a
/// 128-rank 16 MiB all-reduce a fraction of the two cores (its first run took 31 s; with the
/// sleep, see the commit that added it).
pub fn poll_completed(seq: u64) -> Result<bool> {
    let (id, counter) = XuId::decode(seq)?;
    let Some(unit) = existing(id) else {
        return is_completed(seq);
    };
    let mut st = unit.state.lock();
    never_submitted(&st, id, counter)?;
    if st.completed >= counter {
        return Ok(true);
    }
    // Only an inline request (another rank of this process runs it on its own thread) is
    // worth a yield while it is young. When the XU's worker thread runs the request (or one
    // before it), this thread can only take a core from it, so it sleeps at once: a yield kept
    // two runnable threads per process of a job of 2 processes on 2 cores, and the scheduler
    // often left both ranks' workers on one core (4 KiB all-reduce: 150-180 µs in such runs
    // against 11-17 µs with the ranks pinned to their own cores).
    if st.inline.is_some_and(|c| c <= counter) && young(seq) {
        drop(st);
        std::thread::yield_now();
        return Ok(unit.state.lock().completed >= counter);
    }
    unit.progress.wait_for(&mut st, POLL_SLEEP);
    Ok(st.completed >= counter)
}

/// Whether this thread has polled `seq` for less than [`POLL_YIELD_FOR`] (its first poll of a
/// new request starts the clock).
fn young(seq: u64) -> bool {
    let now = Instant::now();
    let since = POLLING.with(|p| match p.get() {
        (s, t) if s == seq => t,
        _ => {
            p.set((seq, now));
            now
        }
    });
    now.duration_since(since) < POLL_YIELD_FOR
}

/// How long a thread polls one pending request with yields before [`poll_completed`] sleeps.
/// Choice: a small collective in one process completes well within it (2 ranks at 4 KiB:
/// about 20 µs), so its pollers never sleep.
pub const POLL_YIELD_FOR: Duration = Duration::from_micros(200);

/// The longest one [`poll_completed`] call sleeps (the completion wakes it earlier): short
/// enough that a caller polling several things in one loop still turns around often.
pub const POLL_SLEEP: Duration = Duration::from_millis(1);

thread_local! {
    /// The request this thread last polled while pending, and when it first saw it pending.
    static POLLING: std::cell::Cell<(u64, Instant)> = std::cell::Cell::new((u64::MAX, Instant::now()));
}

/// The last completed request of XU (`lnc`, `xu`, `queue`), encoded with its XU id; counter 0
/// before any completion (docs/contract/abi.md §5.5).
pub fn last_completed(lnc: u32, xu: XuType, queue: u32) -> Result<u64> {
    let id = XuId::new(lnc, xu, queue)?;
    let completed = existing(id).map_or(0, |u| u.state.lock().completed);
    Ok(id.seq(completed))
}

/// Signal `fd` once when `seq` completes — at once if it already has; `fd = -1` deregisters
/// (docs/contract/abi.md §5.6). A later registration for the same `seq` replaces the fd.
pub fn register_seq_fd(seq: u64, fd: i32) -> Result<()> {
    check_fd(fd)?;
    let (id, counter) = XuId::decode(seq)?;
    let unit = unit(id);
    let mut st = unit.state.lock();
    if fd == -1 {
        st.seq_fds.remove(&counter);
        return Ok(());
    }
    never_submitted(&st, id, counter)?;
    if st.completed >= counter {
        signal(fd, id);
    } else {
        st.seq_fds.insert(counter, fd);
    }
    Ok(())
}

/// Signal `fd` at every completion of XU (`lnc`, `xu`, `queue`) (signals may coalesce in the
/// eventfd counter); `fd = -1` deregisters; a later registration replaces the fd
/// (docs/contract/abi.md §5.6).
pub fn register_xu_fd(lnc: u32, xu: XuType, queue: u32, fd: i32) -> Result<()> {
    check_fd(fd)?;
    let id = XuId::new(lnc, xu, queue)?;
    unit(id).state.lock().xu_fd = (fd != -1).then_some(fd);
    Ok(())
}

/// Block until everything submitted so far on every XU has completed (`nrt_close`, tests).
/// Must not be called from a job (it would wait for itself).
pub fn drain_all() {
    let units: Vec<Arc<Xu>> = XUS.lock().values().cloned().collect();
    for unit in units {
        let mut st = unit.state.lock();
        let target = st.submitted;
        while st.completed < target {
            unit.progress.wait(&mut st);
        }
    }
}

/// Stop all workers (after draining them) and forget all XUs, their counters and fd
/// registrations: `nrt_close` calls it, so a later `nrt_init` starts afresh (counters from 1, a
/// dead XU alive again).
pub fn shutdown() {
    let units: Vec<Arc<Xu>> = std::mem::take(&mut *XUS.lock()).into_values().collect();
    for unit in units {
        let handle = {
            let mut st = unit.state.lock();
            while st.completed < st.submitted {
                unit.progress.wait(&mut st);
            }
            st.stop = true;
            st.seq_fds.clear();
            st.xu_fd = None;
            st.worker.take()
        };
        unit.work.notify_all();
        if let Some(h) = handle {
            if h.thread().id() != std::thread::current().id() {
                // The worker catches job panics, so joining only fails if the runtime itself
                // panicked there; that was logged by the panic hook already.
                let _ = h.join();
            }
        }
    }
}

#[cfg(test)]
mod tests;

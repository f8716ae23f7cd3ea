//! Host-driven collectives (docs/contract/abi.md §5.7; docs/design.md §1): prepare lowers and emits the
//! collective once per program key, and a run gathers every rank of the group and executes the
//! emitted program on the software device.
//!
//! * [`prepare`]: the request (built by `lower::request::api` from `nrta_cc_prepare`'s arguments) →
//!   [`Lowered`] (program of every rank, address map, emitted descriptors, cc_op tables and
//!   semaphores), through one cache keyed by the request without the rank, the world and the
//!   lowering variables as `nrt_init` read them (the vendor's "context caching", docs/contract/abi.md §5.7). A cache
//!   miss also runs the symbolic verifier on the program (docs/design.md §2.2);
//!   `OPENNRT_CC_VERIFY=0` skips it.
//! * [`run_user`]: the one entry of every collective a user asked for (a NEFF's, one scheduled
//!   with `nrta_cc_schedule`); [`run`] for the runtime's own (the `nrt_barrier` all-reduce).
//! * [`run`]: one rank's arrival at the k-th collective of its group (`runtime::rendezvous`).
//!   The last rank to arrive checks that every rank prepared the same collective (op, dtype,
//!   count, group, in place, reduce op — a mismatch is an error on every rank naming both
//!   ranks, the field and both values), gathers the inputs, runs the machine
//!   ([`crate::runtime::machine::execute`]) and hands every rank its output.
//!
//! Choice: the device's memory is loaded from the tensors before the run and the results are
//! copied back after it (one copy each way); the device itself only ever sees the emitted
//! bytes. A device fault or hang fails the collective on every rank with the device's report.
//!
//! Children: [`api`], the `nrta_cc_prepare` / `nrta_cc_schedule` path behind the ABI, and
//! [`io`], a rank's tensors as the data of a device collective ([`RankIo`] for `nrta_cc_*`).

pub mod api;
pub mod io;

use std::collections::HashMap;
use std::sync::Arc;

use once_cell::sync::Lazy;
use parking_lot::Mutex;

use crate::error::{Error, ErrorKind, Result};
use crate::lower::addrmap::AddressMap;
use crate::lower::emit::{emit, EmittedProgram};
use crate::lower::pipeline::{address_map, lower, LowerConfig};
use crate::lower::program::Buf;
use crate::lower::program::{Algorithm, Program};
use crate::lower::request::{CollectiveRequest, ReduceOp};
use crate::runtime::rendezvous::{GroupKey, Rendezvous};
use crate::runtime::resident::Resident;

/// A collective lowered and emitted for every rank of its group.
#[derive(Debug)]
pub struct Lowered {
    /// Every rank's program (the request carries rank 0).
    pub program: Program,
    /// Where every buffer, ring and SPAD lives.
    pub map: AddressMap,
    /// The bytes the device runs.
    pub emitted: EmittedProgram,
    /// The world size it was prepared for.
    pub world: u32,
    /// The algorithm it was forced to (a NEFF's), kept for a lowering of the same request
    /// for the job's topology (`runtime::multi_process::run`).
    pub forced: Option<Algorithm>,
    /// What a multi-process run needs, computed on its first run (`runtime::multi_process::run`):
    /// the program's digest and every rank's device-segment layout.
    pub shared: once_cell::sync::OnceCell<crate::runtime::multi_process::run::SharedPlan>,
    /// Loaded machines of this collective between runs (`runtime::resident`): a run takes one
    /// (or loads one) and gives it back only if it succeeded. Several at once only when
    /// several groups run this collective concurrently.
    resident: Mutex<Vec<Resident>>,
    /// The program's algorithms as the flight recorder names them, made on first use.
    algorithm: once_cell::sync::OnceCell<Arc<str>>,
}

impl Lowered {
    /// A lowered collective from its parts.
    pub fn new(program: Program, map: AddressMap, emitted: EmittedProgram, world: u32) -> Lowered {
        Lowered {
            program,
            map,
            emitted,
            world,
            forced: None,
            shared: once_cell::sync::OnceCell::new(),
            resident: Mutex::new(Vec::new()),
            algorithm: once_cell::sync::OnceCell::new(),
        }
    }

    /// The program's algorithms, `+`-joined (`ring`, `hier+ring`): the flight recorder's
    /// `algorithm` (`runtime::flight_recorder::algorithm_label`).
    pub fn algorithm_label(&self) -> &Arc<str> {
        self.algorithm
            .get_or_init(|| crate::runtime::flight_recorder::algorithm_label(self).into())
    }

    /// A loaded machine of this collective: a resident one left by an earlier run, or a new one.
    pub fn take_resident(&self) -> Result<Resident> {
        if let Some(r) = self.resident.lock().pop() {
            Lowered::forget_held(&r);
            return Ok(r);
        }
        Resident::build(&self.program, &self.emitted, &self.map)
    }

    /// Keep `r` (after a successful run) for the next run, within the process's resident
    /// budget (`Config::resident_budget`, `OPENNRT_RESIDENT_BUDGET`).
    pub fn give_resident(&self, r: Resident) {
        let bytes = r.held_bytes();
        let budget = crate::runtime::process::config().map_or(0, |c| c.resident_budget);
        let mut held = RESIDENT_HELD.lock();
        if *held + bytes > budget {
            crate::log_debug!(
                "cc",
                "a machine of {bytes} B is not kept resident: {} B are, of a budget of \
                 {budget} B (OPENNRT_RESIDENT_BUDGET); the next run loads afresh",
                *held
            );
            return;
        }
        *held += bytes;
        let mut pool = self.resident.lock();
        if pool.len() >= MAX_RESIDENT_PER_COLLECTIVE {
            *held -= bytes;
            return;
        }
        pool.push(r);
    }

    /// Remove a kept resident from the budget (taken by a run, or dropped with its collective).
    fn forget_held(r: &Resident) {
        let mut held = RESIDENT_HELD.lock();
        *held = held.saturating_sub(r.held_bytes());
    }
}

impl Drop for Lowered {
    fn drop(&mut self) {
        for r in self.resident.get_mut().drain(..) {
            Lowered::forget_held(&r);
        }
    }
}

/// Loaded machines kept per collective (groups running it at the same time).
const MAX_RESIDENT_PER_COLLECTIVE: usize = 4;

/// Bytes of every resident machine kept now.
static RESIDENT_HELD: Mutex<u64> = Mutex::new(0);

/// Bytes the resident machines of every prepared collective hold now (tests, logs).
pub fn resident_held_bytes() -> u64 {
    *RESIDENT_HELD.lock()
}

/// Capacity of the prepared-collective cache.
const CACHE_CAPACITY: usize = 64;

/// A lowering under way: the ranks that prepare the same collective at once wait for the
/// first one's result instead of each lowering it (128 ranks preparing a 16 MiB all-reduce
/// together lowered it 55 times, 45 s of CPU and 9 GiB of peak RSS, before this).
type InFlight = Arc<once_cell::sync::OnceCell<Result<Arc<Lowered>>>>;

/// The program cache's key: everything that decides the program. The request without its rank
/// (every rank of a group lowers the same program, which covers all ranks), the world, and
/// the lowering variables as `nrt_init` read them (the vendor keys its context cache on a
/// signature of the op, docs/contract/abi.md §5.7). Hashing the fields directly costs far less than
/// building the topology or a serialized signature, which a hit never does.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ProgramKey {
    req: CollectiveRequest,
    world: u32,
    lowering: Arc<crate::runtime::config::LoweringEnv>,
    verify: bool,
    forced: Option<Algorithm>,
}

/// The one cache of prepared collectives: least recently used out when full.
#[derive(Debug, Default)]
struct Cache {
    map: HashMap<ProgramKey, (u64, Arc<Lowered>)>,
    inflight: HashMap<ProgramKey, InFlight>,
    tick: u64,
}

static CACHE: Lazy<Mutex<Cache>> = Lazy::new(|| Mutex::new(Cache::default()));

/// Lower, verify and emit `req` for a world of `world` ranks, or reuse the cached result.
pub fn prepare(req: &CollectiveRequest, world: u32) -> Result<Arc<Lowered>> {
    prepare_with(req, world, None)
}

/// [`prepare`] with the algorithm forced (a NEFF's `opennrt_algorithm`, docs/neff.md §1.2),
/// over whatever `OPENNRT_CC_ALGO` says; an algorithm illegal for the request is an error.
pub fn prepare_with(
    req: &CollectiveRequest,
    world: u32,
    forced: Option<Algorithm>,
) -> Result<Arc<Lowered>> {
    let config = crate::runtime::process::config()?;
    // A job spanning hosts lowers for a topology whose nodes are its hosts.
    match crate::runtime::multi_process::host::job_topology(&config, world)? {
        Some(t) => prepare_for_topology(req, world, forced, &t),
        None => prepare_in(&config, config.lowering.clone(), req, world, forced),
    }
}

/// [`prepare_with`] for topology `topology` (an `OPENNRT_TOPOLOGY` value the runtime derived:
/// the job's hosts as nodes, `runtime::multi_process::host`), whatever the variable says.
pub fn prepare_for_topology(
    req: &CollectiveRequest,
    world: u32,
    forced: Option<Algorithm>,
    topology: &str,
) -> Result<Arc<Lowered>> {
    let config = crate::runtime::process::config()?;
    let lowering = Arc::new(
        config
            .lowering
            .with(crate::lower::topology::TOPOLOGY_ENV, topology),
    );
    prepare_in(&config, lowering, req, world, forced)
}

/// [`prepare_with`] under the lowering variables `lowering` (the configuration's, or a copy
/// with values the runtime derived): the one way into the program cache. Public so that
/// `opennrt lower --bench` times the cache every prepare goes through, not a model of it.
pub fn prepare_in(
    config: &crate::runtime::config::Config,
    lowering: Arc<crate::runtime::config::LoweringEnv>,
    req: &CollectiveRequest,
    world: u32,
    forced: Option<Algorithm>,
) -> Result<Arc<Lowered>> {
    let key = ProgramKey {
        req: CollectiveRequest {
            rank: 0,
            ..req.clone()
        },
        world,
        lowering: lowering.clone(),
        verify: config.verify,
        forced,
    };
    let slot = {
        let mut c = CACHE.lock();
        c.tick += 1;
        let tick = c.tick;
        if let Some((used, l)) = c.map.get_mut(&key) {
            *used = tick;
            return Ok(l.clone());
        }
        c.inflight.entry(key.clone()).or_default().clone()
    };
    let lowered = slot
        .get_or_init(|| {
            let mut cfg = LowerConfig::from_lookup(|k| lowering.get(k), world)?;
            if forced.is_some() {
                cfg.select.forced = forced;
            }
            lower_verify_emit(&key.req, &cfg, world, config.verify, forced)
        })
        .clone();
    let mut c = CACHE.lock();
    if c.inflight.get(&key).is_some_and(|s| Arc::ptr_eq(s, &slot)) {
        c.inflight.remove(&key);
        // An error is not cached: the next prepare lowers again.
        if let Ok(l) = &lowered {
            if c.map.len() >= CACHE_CAPACITY {
                if let Some(k) = c
                    .map
                    .iter()
                    .min_by_key(|(_, (u, _))| *u)
                    .map(|(k, _)| k.clone())
                {
                    c.map.remove(&k);
                }
            }
            let tick = c.tick;
            c.map.insert(key, (tick, l.clone()));
        }
    }
    lowered
}

/// Lower, verify (unless `verify` is off) and emit `req` (a cache miss of [`prepare`]).
fn lower_verify_emit(
    req: &CollectiveRequest,
    cfg: &LowerConfig,
    world: u32,
    verify: bool,
    forced: Option<Algorithm>,
) -> Result<Arc<Lowered>> {
    let mut r = req.clone();
    r.rank = 0;
    let program = lower(&r, cfg)?;
    if verify {
        crate::lower::verify::verify(&program).map_err(|e| {
            Error::failure(format!(
                "the lowered program failed symbolic verification (an OpenNRT bug; \
                 OPENNRT_CC_VERIFY=0 skips the check): {e}"
            ))
        })?;
    }
    let map = address_map(&program, &cfg.topology)?;
    let emitted = emit(&program, &map)?;
    crate::log_debug!(
        "cc",
        "prepared {:?} {:?} count {} on {} ranks: {}",
        r.op,
        r.dtype,
        r.count,
        r.rank_n(),
        program.selection.join("; ")
    );
    let mut l = Lowered::new(program, map, emitted, world);
    l.forced = forced;
    Ok(Arc::new(l))
}

/// Where one rank's data comes from and goes to.
pub trait RankIo: Send {
    /// Write the rank's input, as the program reads it, into `dst` (exactly its bytes).
    fn input_into(&self, dst: &mut [u8]) -> Result<()>;
    /// Store the rank's result (`machine::read_outputs` form).
    fn output(&self, data: &[u8]) -> Result<()>;
    /// The device tensor whose bytes *are* the rank's buffer `buf` laid out as the program
    /// addresses it (its first byte the buffer's first), if there is one: the resident device
    /// then binds it instead of staging (`runtime::resident`). Default: none.
    fn device_tensor(&self, _buf: Buf) -> Option<&crate::runtime::tensor::Tensor> {
        None
    }
}

/// One rank arriving at a collective.
pub struct Arrival {
    /// The rank's own request (its rank set).
    pub req: CollectiveRequest,
    /// The prepared collective.
    pub lowered: Arc<Lowered>,
    /// The rank's data.
    pub io: Box<dyn RankIo>,
}

impl std::fmt::Debug for Arrival {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Arrival")
            .field("rank", &self.req.rank)
            .finish_non_exhaustive()
    }
}

static MEETINGS: Lazy<Rendezvous<Arrival, ()>> = Lazy::new(Rendezvous::new);

/// The rendezvous of device collectives (tickets are taken at submission).
pub fn meetings() -> &'static Rendezvous<Arrival, ()> {
    &MEETINGS
}

/// How the caller of [`run_user`] takes its rank's result.
pub enum Wait {
    /// The caller blocks until the collective ran on every rank, and [`run_user`] returns the
    /// rank's result (a NEFF's execution, an execution unit's worker).
    Block,
    /// The caller must not wait for its peers (an `nrta_cc_schedule` that runs its request on
    /// its own thread): the result goes to the [`Finish`], from whichever thread ends the run.
    NoWait(Box<dyn Finish>),
}

impl std::fmt::Debug for Wait {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Wait::Block => "Block",
            Wait::NoWait(_) => "NoWait",
        })
    }
}

/// Where the result of a [`Wait::NoWait`] collective goes.
pub trait Finish: Send {
    /// The rank's result: the collective ran (or failed). Called exactly once, unless
    /// [`Finish::defer`] is.
    fn done(self: Box<Self>, result: Result<()>);
    /// The rest of the rank's run must wait for peers in other processes: `rest` is to run on a
    /// thread that may wait (the XU's worker), its result being the rank's.
    fn defer(self: Box<Self>, rest: Box<dyn FnOnce() -> Result<()> + Send>);
}

/// Run a collective a user asked for: rank `arrival.req.rank`'s arrival at collective
/// `instance` of `key`. With [`Wait::Block`] this returns the rank's result; with
/// [`Wait::NoWait`] it returns `Ok(())` and the result goes to the [`Finish`] (possibly before
/// this returns, when this rank is the last to arrive and runs the collective here).
///
/// The one place a user's collective runs: a NEFF's collectives (`runtime::model`) and those
/// scheduled with `nrta_cc_schedule` (`runtime::collective::api`) all come here, and only they:
/// the runtime's own collectives (the `nrt_barrier` all-reduce, the NEFF sequence check and
/// all-to-all-v table exchanges of `runtime::model::signature`) call [`run`]. So a switch that
/// acts on user collectives only (such as the vendor's `NEURON_RT_DBG_CC_NOP`) goes here.
///
/// Every rank's arrival and result go into its flight record (`runtime::flight_recorder`).
pub fn run_user(key: &GroupKey, instance: u64, arrival: Arrival, wait: Wait) -> Result<()> {
    use crate::runtime::flight_recorder as fr;
    let token = fr::enter(key, instance, &arrival.req, &arrival.lowered);
    match wait {
        Wait::Block => {
            let r = run(key, instance, arrival);
            fr::finish(token, &r);
            r
        }
        Wait::NoWait(finish) => {
            let finish: Box<dyn Finish> = match token {
                Some(token) => Box::new(Recorded {
                    inner: finish,
                    token,
                }),
                None => finish,
            };
            start(key, instance, arrival, finish);
            Ok(())
        }
    }
}

/// A [`Finish`] that records the rank's result in its flight record first.
struct Recorded {
    inner: Box<dyn Finish>,
    token: crate::runtime::flight_recorder::Token,
}

impl Finish for Recorded {
    fn done(self: Box<Self>, result: Result<()>) {
        crate::runtime::flight_recorder::finish(Some(self.token), &result);
        self.inner.done(result);
    }
    fn defer(self: Box<Self>, rest: Box<dyn FnOnce() -> Result<()> + Send>) {
        let token = self.token;
        self.inner.defer(Box::new(move || {
            let r = rest();
            crate::runtime::flight_recorder::finish(Some(token), &r);
            r
        }));
    }
}

/// [`run_user`] without waiting. In this process the rank arrives at its meeting and the last
/// to arrive runs the collective on its own thread ([`arrive_here`]). Across processes
/// (docs/design.md §2.10) the rank loads and arrives (`multi_process::run::begin`); if every peer
/// arrives within a short wait it runs here, otherwise the rest is deferred to a thread that may
/// wait. The caller never waits for a peer that has not arrived, so a program that schedules on
/// two groups (two queues) before it waits on either cannot deadlock here.
fn start(key: &GroupKey, instance: u64, arrival: Arrival, finish: Box<dyn Finish>) {
    if !crate::runtime::multi_process::run::wanted(&key.group) {
        return arrive_here(key, instance, arrival, Box::new(move |r| finish.done(r)));
    }
    let pending = match crate::runtime::multi_process::run::begin(key, instance, arrival) {
        Ok(pending) => pending,
        Err(e) => return finish.done(Err(e)),
    };
    // The wait every shared-device waiter starts with (spin, then yield): bounded.
    use crate::runtime::multi_process::segment::{oversubscribed, spin_then_yield};
    if spin_then_yield(oversubscribed(key.group.len()), || pending.met()) {
        return finish.done(pending.finish());
    }
    finish.defer(Box::new(move || pending.finish()));
}

/// Arrive at collective `instance` of `key` and wait until it has run on every rank: in a
/// multi-process job each rank runs its own part on shared device segments
/// (`runtime::multi_process::run`); otherwise all ranks meet here and run in one machine
/// ([`meet_here`]). The runtime's own collectives call this directly; a user's go through
/// [`run_user`].
pub fn run(key: &GroupKey, instance: u64, arrival: Arrival) -> Result<()> {
    if crate::runtime::multi_process::run::wanted(&key.group) {
        return crate::runtime::multi_process::run::run(key, instance, arrival);
    }
    meet_here(key, instance, arrival)
}

/// Arrive at a meeting held in this process (single process, or the root of a job).
pub fn meet_here(key: &GroupKey, instance: u64, arrival: Arrival) -> Result<()> {
    let deadline = crate::runtime::process::config()?.exec_timeout();
    let rank = arrival.req.rank;
    MEETINGS.meet(key, instance, rank, arrival, deadline, |all| {
        run_instance(key, instance, all)
    })
}

/// Arrive at a meeting held in this process without waiting (`runtime::collective::api`): `done` gets
/// this rank's result. If this rank is the last to arrive, the collective runs here, on the
/// caller's thread, before this returns.
pub fn arrive_here(
    key: &GroupKey,
    instance: u64,
    arrival: Arrival,
    done: crate::runtime::rendezvous::Done<()>,
) {
    let deadline = match crate::runtime::process::config().map(|c| c.exec_timeout()) {
        Ok(d) => d,
        Err(e) => return done(Err(e)),
    };
    let rank = arrival.req.rank;
    let wait = crate::runtime::rendezvous::NoWait { done, deadline };
    MEETINGS.arrive(key, instance, rank, arrival, wait, |all| {
        run_instance(key, instance, all)
    })
}

/// The fields every rank of a collective must agree on, as (name, value) — compared field by
/// field here and hashed for the shared-memory go meeting (`runtime::multi_process::go_board`).
pub fn agreed_fields(r: &CollectiveRequest) -> [(&'static str, String); 7] {
    [
        ("op", r.op.label().to_string()),
        ("dtype", r.dtype.short_name().to_string()),
        ("count", r.count.to_string()),
        (
            "reduce op",
            r.reduce.map_or("none", ReduceOp::name).to_string(),
        ),
        ("group", format!("{:?}", r.group)),
        ("in place", r.in_place.to_string()),
        ("tensor lists", format!("{:?}", r.io_form)),
    ]
}

/// The first field in which two ranks' requests differ, with both values.
fn difference(
    a: &CollectiveRequest,
    b: &CollectiveRequest,
) -> Option<(&'static str, String, String)> {
    // The common case without formatting anything (it was 4% of a small collective's CPU).
    let same = a.op == b.op
        && a.dtype == b.dtype
        && a.count == b.count
        && a.reduce == b.reduce
        && a.group == b.group
        && a.in_place == b.in_place
        && a.io_form == b.io_form;
    if same {
        return None;
    }
    agreed_fields(a)
        .into_iter()
        .zip(agreed_fields(b))
        .find(|((_, x), (_, y))| x != y)
        .map(|((name, x), (_, y))| (name, x, y))
}

/// Every rank must have prepared the same collective (detected, both values named).
fn check_consistent(key: &GroupKey, instance: u64, all: &[Arrival]) -> Result<()> {
    let reqs: Vec<&CollectiveRequest> = all.iter().map(|a| &a.req).collect();
    check_requests(key, instance, &reqs)
}

/// `check_consistent` over the ranks' requests (also the cross-process check,
/// `runtime::multi_process::run`).
pub fn check_requests(key: &GroupKey, instance: u64, all: &[&CollectiveRequest]) -> Result<()> {
    let first = all[0];
    for a in &all[1..] {
        if let Some((field, x, y)) = difference(first, a) {
            // Fields: the rank that differs from the first, the field, the first rank's value
            // (expected) and its own (actual); the step is the collective's instance.
            return Err(Error::invalid(format!(
                "collective #{instance} of {key}: ranks disagree on the {field}: rank {} \
                 (global id {}) prepared {x}, rank {} (global id {}) prepared {y}",
                first.rank, key.group[first.rank as usize], a.rank, key.group[a.rank as usize]
            ))
            .with_op(first.op.label())
            .with_rank(a.rank)
            .with_step(instance)
            .with_field(field)
            .with_values(x, y));
        }
    }
    Ok(())
}

fn run_instance(key: &GroupKey, instance: u64, all: Vec<Arrival>) -> Vec<Result<()>> {
    let n = all.len();
    let fail_all = |e: Error| (0..n).map(|_| Err(e.clone())).collect::<Vec<_>>();
    if let Err(e) = check_consistent(key, instance, &all) {
        crate::log_error!("cc", "{e}");
        return fail_all(e);
    }
    let l = all[0].lowered.clone();
    let start = std::time::Instant::now();
    let ios: Vec<&dyn RankIo> = all.iter().map(|a| a.io.as_ref()).collect();
    let ran = l.take_resident().and_then(|mut res| {
        let rep = res.run(&ios)?;
        crate::log_debug!(
            "cc",
            "collective #{instance} of {key} ran in {:?} (run {} of its resident machine, {} \
             buffers bound to tensors, {} packets, {} B held by the machine)",
            start.elapsed(),
            res.runs(),
            res.bound_last_run(),
            rep.packets,
            res.held_bytes()
        );
        l.give_resident(res);
        Ok(())
    });
    match ran {
        Ok(()) => (0..n).map(|_| Ok(())).collect(),
        Err(e) => {
            let e = if e.kind() == ErrorKind::Invalid {
                Error::failure(e.message())
            } else {
                e
            };
            let e = e.context(format!(
                "collective #{instance} of {key} on the software device"
            ));
            crate::log_error!("cc", "{e}");
            fail_all(e)
        }
    }
}

/// Fail every pending and later collective with `NRT_CLOSED` (`nrt_close`, before the XU
/// workers are drained), until [`reset`].
pub fn abort() {
    let why = Error::new(
        ErrorKind::Closed,
        "nrt_close while the collective was pending",
    );
    MEETINGS.abort_all(&why);
    crate::runtime::multi_process::run::abort(&why);
}

/// Forget prepared collectives, tickets and meetings, and free the device's recycled buffers
/// (`nrt_close`, after the workers are drained).
pub fn reset() {
    MEETINGS.reset();
    crate::runtime::multi_process::run::reset();
    CACHE.lock().map.clear();
    crate::device::buffer_pool::clear();
}

/// Byte buffers as [`RankIo`] (the barrier, tests).
#[derive(Debug)]
pub struct VecIo {
    /// The input.
    pub input: Vec<u8>,
    /// Where the output lands.
    pub output: Arc<Mutex<Vec<u8>>>,
}

impl RankIo for VecIo {
    fn input_into(&self, dst: &mut [u8]) -> Result<()> {
        if self.input.len() != dst.len() {
            return Err(Error::invalid(format!(
                "the input has {} bytes, the program reads {}",
                self.input.len(),
                dst.len()
            )));
        }
        dst.copy_from_slice(&self.input);
        Ok(())
    }
    fn output(&self, data: &[u8]) -> Result<()> {
        *self.output.lock() = data.to_vec();
        Ok(())
    }
}

#[cfg(test)]
mod tests;

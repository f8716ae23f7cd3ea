//! Where the ranks of one collective meet (docs/design.md §2.6: several ranks in one process).
//!
//! Every rank of a group calls its collectives in the same order (the NCCL contract the
//! vendor's API keeps), so the k-th collective a rank submits on a group is the k-th of every
//! other rank: [`Rendezvous::ticket`] hands out that k per (group, rank) at submission time,
//! and [`Rendezvous::meet`] gathers the arrivals of instance k. The last rank to arrive runs
//! the collective for all of them (on the software device, or a host exchange) and every rank
//! takes its own result. Nothing spins: waiters sleep on a condition variable.
//!
//! A rank that never arrives is reported, not waited for: after the deadline
//! (`NEURON_RT_EXEC_TIMEOUT`) the meeting fails with `NRT_TIMEOUT` naming the missing ranks, on
//! every rank that did arrive and on any that arrives later. [`Rendezvous::abort_all`] fails
//! every open meeting (`nrt_close` while collectives are pending).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::error::{Error, ErrorKind, Result};

/// How an arrival went.
enum Entered<A, R> {
    /// The meeting had failed (or the arrival was refused): the error, and the callbacks to
    /// call with it.
    Failed(Error, Vec<(Done<R>, Error)>),
    /// The last arrival: every rank's payload, in rank order.
    Last(Vec<A>),
    /// Others are still missing.
    Waiting,
}

/// The timeout error of a meeting that ranks never reached.
fn missing_error<A>(key: &GroupKey, instance: u64, arrived: &[Option<A>], d: Duration) -> Error {
    let missing: Vec<String> = arrived
        .iter()
        .enumerate()
        .filter(|(_, a)| a.is_none())
        .map(|(r, _)| format!("rank {r} (global id {})", key.group[r]))
        .collect();
    Error::new(
        ErrorKind::Timeout,
        format!(
            "collective #{instance} of {key}: {} never arrived within \
             NEURON_RT_EXEC_TIMEOUT = {:?}",
            missing.join(", "),
            d
        ),
    )
}

/// A group of ranks that meet: what kind of exchange, in which world, over which global ids
/// (in rank order).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GroupKey {
    /// The kind of exchange ("cc", "barrier", "all_gather"): each kind keeps its own order.
    pub kind: &'static str,
    /// The world slot (docs/contract/abi.md §3.5).
    pub slot: u8,
    /// The participants' global device ids, in rank order.
    pub group: Vec<u32>,
}

impl std::fmt::Display for GroupKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} on group {:?} (world slot {})",
            self.kind, self.group, self.slot
        )
    }
}

/// What a rank that did not wait ([`Rendezvous::arrive`]) is handed its result through.
pub type Done<R> = Box<dyn FnOnce(Result<R>) + Send>;

/// A rank that arrives without waiting: where its result goes, and how long the meeting may
/// wait for the others before the watchdog fails it (`None`: forever).
pub struct NoWait<R> {
    /// Gets the rank's result.
    pub done: Done<R>,
    /// The meeting's deadline.
    pub deadline: Option<Duration>,
}

impl<R> std::fmt::Debug for NoWait<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NoWait")
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

struct Meeting<A, R> {
    arrived: Vec<Option<A>>,
    /// Per rank that arrived without waiting: where its result goes.
    done: Vec<Option<Done<R>>>,
    results: Option<Vec<Option<Result<R>>>>,
    failed: Option<Error>,
    taken: usize,
    /// When the first rank that did not wait arrived, and the deadline then in force: the
    /// watchdog fails the meeting at `since + deadline` ([`Rendezvous::arrive`]).
    watch: Option<(Instant, Duration)>,
}

impl<A, R> std::fmt::Debug for Meeting<A, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Meeting")
            .field(
                "arrived",
                &self.arrived.iter().filter(|a| a.is_some()).count(),
            )
            .field("failed", &self.failed)
            .field("taken", &self.taken)
            .finish_non_exhaustive()
    }
}

impl<A, R> Meeting<A, R> {
    fn new(n: usize) -> Self {
        Meeting {
            arrived: (0..n).map(|_| None).collect(),
            done: (0..n).map(|_| None).collect(),
            results: None,
            failed: None,
            taken: 0,
            watch: None,
        }
    }

    /// Fail the meeting with `e`: drop the arrivals (their buffers) and return the callbacks of
    /// the ranks that did not wait, to call outside the lock.
    fn fail(&mut self, e: &Error) -> Vec<(Done<R>, Error)> {
        self.arrived.iter_mut().for_each(|a| *a = None);
        self.failed = Some(e.clone());
        let calls: Vec<(Done<R>, Error)> = self
            .done
            .iter_mut()
            .filter_map(|d| d.take())
            .map(|d| (d, e.clone()))
            .collect();
        self.taken += calls.len();
        calls
    }
}

/// Call the callbacks a failed meeting returned.
fn call_all<R>(calls: Vec<(Done<R>, Error)>) {
    for (d, e) in calls {
        d(Err(e));
    }
}

#[derive(Debug)]
struct Inner<A, R> {
    closed: Option<Error>,
    dead: HashMap<u32, Error>,
    next: HashMap<(GroupKey, u32), u64>,
    meetings: HashMap<(GroupKey, u64), Meeting<A, R>>,
    /// The watchdog thread runs ([`Rendezvous::arrive`]).
    watchdog: bool,
    /// When the sleeping watchdog wakes by itself (`None`: it sleeps until notified, or has
    /// not slept yet). An arrival wakes it only for an earlier deadline: waking it for every
    /// meeting cost each small collective a futex round trip with the watchdog thread (perf,
    /// 2 ranks as threads at 4 KiB: 9% of all samples in the wake of the unlock after
    /// `arrive`).
    watch_wake: Option<Instant>,
}

/// The meeting place of one kind of payload `A` with per-rank results `R`.
#[derive(Debug)]
pub struct Rendezvous<A, R> {
    inner: Mutex<Inner<A, R>>,
    cv: Condvar,
    /// Wakes the watchdog (a meeting with a deadline it does not know yet).
    watch_cv: Condvar,
}

impl<A, R> Default for Rendezvous<A, R> {
    fn default() -> Self {
        Self::new()
    }
}

impl<A, R> Rendezvous<A, R> {
    /// An empty meeting place.
    pub fn new() -> Self {
        Rendezvous {
            inner: Mutex::new(Inner {
                closed: None,
                dead: HashMap::new(),
                next: HashMap::new(),
                meetings: HashMap::new(),
                watchdog: false,
                watch_wake: None,
            }),
            cv: Condvar::new(),
            watch_cv: Condvar::new(),
        }
    }

    /// The instance number of the next collective `rank` submits on `key` (0, 1, 2, …).
    pub fn ticket(&self, key: &GroupKey, rank: u32) -> u64 {
        let mut g = self.inner.lock();
        let n = g.next.entry((key.clone(), rank)).or_insert(0);
        let t = *n;
        *n += 1;
        t
    }

    /// Give back `ticket` of `rank` on `key` when the collective it was taken for could not be
    /// queued (only the most recent ticket can be given back).
    pub fn untake(&self, key: &GroupKey, rank: u32, ticket: u64) {
        let mut g = self.inner.lock();
        if let Some(n) = g.next.get_mut(&(key.clone(), rank)) {
            if *n == ticket + 1 {
                *n = ticket;
            }
        }
    }

    /// Arrive at instance `instance` of `key` as `rank` with `arrival`. The last arrival runs
    /// `run` over all arrivals (in rank order) outside the lock; `run` returns one result per
    /// rank. Waits at most `deadline` (None: forever) for the others.
    pub fn meet(
        &self,
        key: &GroupKey,
        instance: u64,
        rank: u32,
        arrival: A,
        deadline: Option<Duration>,
        run: impl FnOnce(Vec<A>) -> Vec<Result<R>>,
    ) -> Result<R> {
        let n = key.group.len();
        if rank as usize >= n {
            return Err(Error::invalid(format!(
                "rank {rank} is not in {key} ({n} ranks)"
            )));
        }
        let id = (key.clone(), instance);
        let mut g = self.inner.lock();
        let all = match Self::enter(&mut g, key, instance, rank, arrival, None) {
            Entered::Failed(e, calls) => {
                self.cv.notify_all();
                drop(g);
                call_all(calls);
                return Err(e);
            }
            Entered::Last(all) => all,
            Entered::Waiting => {
                return self.wait_result(g, key, instance, rank, deadline);
            }
        };
        drop(g);
        let own = self.finish(key, &id, rank, all, run).map(|(own, _)| own);
        own.unwrap_or_else(|| {
            Err(Error::new(
                ErrorKind::Closed,
                "nrt_close while the collective ran",
            ))
        })
    }

    /// Arrive at instance `instance` of `key` as `rank` without waiting: `done` is handed the
    /// rank's result when the meeting ends. If this is the last arrival, `run` runs here, on
    /// the caller's thread, and every rank that did not wait gets its result through its own
    /// `done` before this returns. A meeting no waiting rank watches is failed at `deadline`
    /// (naming the missing ranks) by one watchdog thread per meeting place.
    pub fn arrive(
        &'static self,
        key: &GroupKey,
        instance: u64,
        rank: u32,
        arrival: A,
        wait: NoWait<R>,
        run: impl FnOnce(Vec<A>) -> Vec<Result<R>>,
    ) where
        A: Send + 'static,
        R: Send + 'static,
    {
        let NoWait { done, deadline } = wait;
        let n = key.group.len();
        if rank as usize >= n {
            done(Err(Error::invalid(format!(
                "rank {rank} is not in {key} ({n} ranks)"
            ))));
            return;
        }
        let id = (key.clone(), instance);
        let mut g = self.inner.lock();
        match Self::enter(&mut g, key, instance, rank, arrival, Some((done, deadline))) {
            Entered::Failed(_, calls) => {
                self.cv.notify_all();
                drop(g);
                call_all(calls);
            }
            Entered::Waiting => {
                if deadline.is_some() && !g.watchdog {
                    g.watchdog = true;
                    let spawned = std::thread::Builder::new()
                        .name("opennrt-meetings".into())
                        .spawn(move || self.watchdog());
                    if spawned.is_err() {
                        g.watchdog = false;
                        crate::log_warn!(
                            "rendezvous",
                            "cannot start the meeting watchdog: a rank that never arrives is \
                             noticed only by a waiting rank"
                        );
                    }
                }
                let at = deadline.map(|d| Instant::now() + d);
                if at.is_some_and(|at| g.watch_wake.is_none_or(|w| at < w)) {
                    self.watch_cv.notify_one();
                }
            }
            Entered::Last(all) => {
                drop(g);
                // Own result: delivered through `done` like every other non-waiting rank's.
                if let Some((own, Some(d))) = self.finish(key, &id, rank, all, run) {
                    d(own);
                }
            }
        }
    }

    /// Record an arrival. `done`: the rank does not wait (its callback and deadline).
    fn enter(
        g: &mut Inner<A, R>,
        key: &GroupKey,
        instance: u64,
        rank: u32,
        arrival: A,
        done: Option<(Done<R>, Option<Duration>)>,
    ) -> Entered<A, R> {
        let n = key.group.len();
        let id = (key.clone(), instance);
        let m = g
            .meetings
            .entry(id.clone())
            .or_insert_with(|| Meeting::new(n));
        if let Some(e) = &m.failed {
            let e = e.clone();
            let calls = done.map(|(d, _)| vec![(d, e.clone())]).unwrap_or_default();
            return Entered::Failed(e, calls);
        }
        if m.arrived[rank as usize].is_some() || m.results.is_some() {
            let e = Error::failure(format!(
                "rank {rank} arrived twice at collective #{instance} of {key}"
            ));
            let calls = done.map(|(d, _)| vec![(d, e.clone())]).unwrap_or_default();
            return Entered::Failed(e, calls);
        }
        m.arrived[rank as usize] = Some(arrival);
        if let Some((d, deadline)) = done {
            m.done[rank as usize] = Some(d);
            if let (None, Some(dl)) = (m.watch, deadline) {
                m.watch = Some((Instant::now(), dl));
            }
        }
        // A dead peer names the failure even while closing (it is the cause).
        let dead = Self::dead_missing(&g.dead, key, &g.meetings[&id].arrived);
        if let Some(e) = dead.or_else(|| g.closed.clone()) {
            let m = g.meetings.get_mut(&id).expect("just inserted");
            let calls = m.fail(&e);
            return Entered::Failed(e, calls);
        }
        let m = g.meetings.get_mut(&id).expect("just inserted");
        if m.arrived.iter().all(Option::is_some) {
            return Entered::Last(
                m.arrived
                    .iter_mut()
                    .map(|a| a.take().expect("all"))
                    .collect(),
            );
        }
        Entered::Waiting
    }

    /// Run the collective of a complete meeting (outside the lock) and hand out the results:
    /// the ranks that did not wait through their callbacks (except `rank`, the caller), the
    /// waiting ones through the meeting. Returns the caller's own result and its callback (if
    /// it did not wait), or `None` if the meeting was reset meanwhile.
    #[allow(clippy::type_complexity)]
    fn finish(
        &self,
        key: &GroupKey,
        id: &(GroupKey, u64),
        rank: u32,
        all: Vec<A>,
        run: impl FnOnce(Vec<A>) -> Vec<Result<R>>,
    ) -> Option<(Result<R>, Option<Done<R>>)> {
        let n = key.group.len();
        let mut results = run(all);
        results.resize_with(n, || {
            Err(Error::failure("the collective returned no result"))
        });
        let mut g = self.inner.lock();
        let m = g.meetings.get_mut(id)?;
        let mut res: Vec<Option<Result<R>>> = results.into_iter().map(Some).collect();
        let own = res[rank as usize].take().expect("own result");
        let own_done = m.done[rank as usize].take();
        let mut calls = Vec::new();
        for (r, d) in m.done.iter_mut().enumerate() {
            if let Some(d) = d.take() {
                calls.push((d, res[r].take().expect("result once")));
            }
        }
        m.taken += 1 + calls.len();
        m.results = Some(res);
        if m.taken == n {
            g.meetings.remove(id);
        }
        self.cv.notify_all();
        drop(g);
        for (d, r) in calls {
            d(r);
        }
        Some((own, own_done))
    }

    /// A waiting rank's side of [`Rendezvous::meet`]: sleep until the results are there, the
    /// meeting failed or `deadline` passed (then fail it, naming the missing ranks).
    fn wait_result(
        &self,
        mut g: parking_lot::MutexGuard<'_, Inner<A, R>>,
        key: &GroupKey,
        instance: u64,
        rank: u32,
        deadline: Option<Duration>,
    ) -> Result<R> {
        let id = (key.clone(), instance);
        let n = key.group.len();
        let start = Instant::now();
        loop {
            let Some(m) = g.meetings.get_mut(&id) else {
                return Err(Error::new(
                    ErrorKind::Closed,
                    "nrt_close while the collective was pending",
                ));
            };
            if let Some(res) = &mut m.results {
                let own = res[rank as usize].take().expect("own result taken once");
                m.taken += 1;
                if m.taken == n {
                    g.meetings.remove(&id);
                }
                return own;
            }
            if let Some(e) = &m.failed {
                return Err(e.clone());
            }
            match deadline {
                Some(d) if start.elapsed() >= d => {
                    let e = missing_error(key, instance, &m.arrived, d);
                    let calls = m.fail(&e);
                    self.cv.notify_all();
                    drop(g);
                    call_all(calls);
                    return Err(e);
                }
                Some(d) => {
                    let left = d.saturating_sub(start.elapsed());
                    self.cv.wait_for(&mut g, left);
                }
                None => self.cv.wait(&mut g),
            }
        }
    }

    /// The watchdog: fail every meeting whose non-waiting ranks' deadline passed.
    fn watchdog(&self) {
        let mut g = self.inner.lock();
        loop {
            let now = Instant::now();
            let mut next: Option<Instant> = None;
            let mut calls = Vec::new();
            for ((key, instance), m) in g.meetings.iter_mut() {
                let Some((since, d)) = m.watch else { continue };
                if m.results.is_some() || m.failed.is_some() {
                    continue;
                }
                let at = since + d;
                if at <= now {
                    let e = missing_error(key, *instance, &m.arrived, d);
                    crate::log_error!("rendezvous", "{e}");
                    calls.extend(m.fail(&e));
                } else {
                    next = Some(next.map_or(at, |n: Instant| n.min(at)));
                }
            }
            if !calls.is_empty() {
                self.cv.notify_all();
                drop(g);
                call_all(calls);
                g = self.inner.lock();
                continue;
            }
            g.watch_wake = next;
            match next {
                Some(at) => {
                    self.watch_cv.wait_until(&mut g, at);
                }
                None => self.watch_cv.wait(&mut g),
            }
            // Awake: every meeting is scanned again before the next sleep.
            g.watch_wake = Some(Instant::now());
        }
    }

    /// Fail every open meeting with `why` (the waiting ranks return it), and every later
    /// arrival until [`Rendezvous::reset`].
    pub fn abort_all(&self, why: &Error) {
        let mut g = self.inner.lock();
        g.closed = Some(why.clone());
        let Inner { dead, meetings, .. } = &mut *g;
        let mut calls = Vec::new();
        for ((key, _), m) in meetings.iter_mut() {
            if m.results.is_none() && m.failed.is_none() {
                let e = Self::dead_missing(dead, key, &m.arrived).unwrap_or_else(|| why.clone());
                calls.extend(m.fail(&e));
            }
        }
        self.cv.notify_all();
        drop(g);
        call_all(calls);
    }

    /// The error of a dead rank that has not arrived at a meeting, if any.
    fn dead_missing(
        dead: &HashMap<u32, Error>,
        key: &GroupKey,
        arrived: &[Option<A>],
    ) -> Option<Error> {
        // A death names the failure before a rank that merely left (nrt_close) after it.
        let missing = key.group.iter().zip(arrived).filter(|(_, a)| a.is_none());
        let mut gone = missing.filter_map(|(g, _)| dead.get(g));
        let first = gone.next()?;
        Some(
            std::iter::once(first)
                .chain(gone)
                .find(|e| e.kind() == ErrorKind::CollectivesHang)
                .unwrap_or(first)
                .clone(),
        )
    }

    /// Global id `gid` is gone (its process died or left): every open meeting it has not
    /// arrived at fails with `why`, and so does every later meeting of a group holding it.
    pub fn mark_dead(&self, gid: u32, why: &Error) {
        let mut g = self.inner.lock();
        g.dead.insert(gid, why.clone());
        let Inner { dead, meetings, .. } = &mut *g;
        let mut calls = Vec::new();
        for ((key, _), m) in meetings.iter_mut() {
            if m.results.is_none() && m.failed.is_none() {
                if let Some(e) = Self::dead_missing(dead, key, &m.arrived) {
                    calls.extend(m.fail(&e));
                }
            }
        }
        self.cv.notify_all();
        drop(g);
        call_all(calls);
    }

    /// Forget every ticket and meeting (after `nrt_close`).
    pub fn reset(&self) {
        let mut g = self.inner.lock();
        g.closed = None;
        g.dead.clear();
        g.next.clear();
        g.meetings.clear();
        self.cv.notify_all();
    }
}

#[cfg(test)]
mod tests;

//! Where the ranks of one collective meet (design.md §2.6: several ranks in one process).
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

/// A group of ranks that meet: what kind of exchange, in which world, over which global ids
/// (in rank order).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GroupKey {
    /// The kind of exchange ("cc", "barrier", "all_gather"): each kind keeps its own order.
    pub kind: &'static str,
    /// The world slot (spec/nrt-abi.md §3.5).
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

#[derive(Debug)]
struct Meeting<A, R> {
    arrived: Vec<Option<A>>,
    results: Option<Vec<Option<Result<R>>>>,
    failed: Option<Error>,
    taken: usize,
}

#[derive(Debug)]
struct Inner<A, R> {
    closed: Option<Error>,
    dead: HashMap<u32, Error>,
    next: HashMap<(GroupKey, u32), u64>,
    meetings: HashMap<(GroupKey, u64), Meeting<A, R>>,
}

/// The meeting place of one kind of payload `A` with per-rank results `R`.
#[derive(Debug)]
pub struct Rendezvous<A, R> {
    inner: Mutex<Inner<A, R>>,
    cv: Condvar,
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
            }),
            cv: Condvar::new(),
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
        let m = g.meetings.entry(id.clone()).or_insert_with(|| Meeting {
            arrived: (0..n).map(|_| None).collect(),
            results: None,
            failed: None,
            taken: 0,
        });
        if let Some(e) = &m.failed {
            return Err(e.clone());
        }
        if m.arrived[rank as usize].is_some() || m.results.is_some() {
            return Err(Error::failure(format!(
                "rank {rank} arrived twice at collective #{instance} of {key}"
            )));
        }
        m.arrived[rank as usize] = Some(arrival);
        // A dead peer names the failure even while closing (it is the cause).
        let dead = Self::dead_missing(&g.dead, key, &g.meetings[&id].arrived);
        if let Some(e) = dead.or_else(|| g.closed.clone()) {
            let m = g.meetings.get_mut(&id).expect("just inserted");
            m.arrived.iter_mut().for_each(|a| *a = None);
            m.failed = Some(e.clone());
            self.cv.notify_all();
            return Err(e);
        }
        let m = g.meetings.get_mut(&id).expect("just inserted");
        if m.arrived.iter().all(Option::is_some) {
            let all: Vec<A> = m
                .arrived
                .iter_mut()
                .map(|a| a.take().expect("all"))
                .collect();
            drop(g);
            let mut results = run(all);
            results.resize_with(n, || {
                Err(Error::failure("the collective returned no result"))
            });
            let mut g = self.inner.lock();
            let Some(m) = g.meetings.get_mut(&id) else {
                // Reset (nrt_close) while the collective ran.
                return Err(Error::new(
                    ErrorKind::Closed,
                    "nrt_close while the collective ran",
                ));
            };
            let mut res: Vec<Option<Result<R>>> = results.into_iter().map(Some).collect();
            let own = res[rank as usize].take().expect("own result");
            m.results = Some(res);
            m.taken += 1;
            if m.taken == n {
                g.meetings.remove(&id);
            }
            self.cv.notify_all();
            return own;
        }
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
                    let missing: Vec<String> = m
                        .arrived
                        .iter()
                        .enumerate()
                        .filter(|(_, a)| a.is_none())
                        .map(|(r, _)| format!("rank {r} (global id {})", key.group[r]))
                        .collect();
                    let e = Error::new(
                        ErrorKind::Timeout,
                        format!(
                            "collective #{instance} of {key}: {} never arrived within \
                             NEURON_RT_EXEC_TIMEOUT = {:?}",
                            missing.join(", "),
                            d
                        ),
                    );
                    // Drop the arrivals (their buffers) and fail the meeting for everyone.
                    m.arrived.iter_mut().for_each(|a| *a = None);
                    m.failed = Some(e.clone());
                    self.cv.notify_all();
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

    /// Fail every open meeting with `why` (the waiting ranks return it), and every later
    /// arrival until [`Rendezvous::reset`].
    pub fn abort_all(&self, why: &Error) {
        let mut g = self.inner.lock();
        g.closed = Some(why.clone());
        let Inner { dead, meetings, .. } = &mut *g;
        for ((key, _), m) in meetings.iter_mut() {
            if m.results.is_none() && m.failed.is_none() {
                let e = Self::dead_missing(dead, key, &m.arrived).unwrap_or_else(|| why.clone());
                m.arrived.iter_mut().for_each(|a| *a = None);
                m.failed = Some(e);
            }
        }
        self.cv.notify_all();
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
        for ((key, _), m) in meetings.iter_mut() {
            if m.results.is_none() && m.failed.is_none() {
                if let Some(e) = Self::dead_missing(dead, key, &m.arrived) {
                    m.arrived.iter_mut().for_each(|a| *a = None);
                    m.failed = Some(e);
                }
            }
        }
        self.cv.notify_all();
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
mod tests {
    use super::*;
    use std::sync::Arc;

    fn key(n: u32) -> GroupKey {
        GroupKey {
            kind: "test",
            slot: 1,
            group: (10..10 + n).collect(),
        }
    }

    #[test]
    fn all_ranks_meet_and_the_last_runs() {
        let rv: Arc<Rendezvous<u32, u32>> = Arc::new(Rendezvous::new());
        let k = key(5);
        let handles: Vec<_> = (0..5u32)
            .map(|r| {
                let (rv, k) = (rv.clone(), k.clone());
                std::thread::spawn(move || {
                    let t = rv.ticket(&k, r);
                    rv.meet(&k, t, r, r * 10, None, |all| {
                        let sum: u32 = all.iter().sum();
                        all.iter().map(|a| Ok(sum + a)).collect()
                    })
                })
            })
            .collect();
        let got: Vec<u32> = handles
            .into_iter()
            .map(|h| h.join().unwrap().unwrap())
            .collect();
        assert_eq!(got, vec![100, 110, 120, 130, 140]);
        assert!(
            rv.inner.lock().meetings.is_empty(),
            "taken meetings are dropped"
        );
    }

    #[test]
    fn a_missing_rank_is_named_after_the_deadline() {
        let rv: Rendezvous<(), ()> = Rendezvous::new();
        let k = key(3);
        let e = rv
            .meet(&k, 0, 1, (), Some(Duration::from_millis(20)), |_| vec![])
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Timeout);
        assert!(e.message().contains("rank 0 (global id 10)"), "{e}");
        assert!(e.message().contains("rank 2 (global id 12)"), "{e}");
        // A late arrival gets the same failure at once.
        let late = rv.meet(&k, 0, 0, (), None, |_| vec![]).unwrap_err();
        assert_eq!(late.message(), e.message());
    }

    #[test]
    fn abort_wakes_waiters_and_double_arrival_is_refused() {
        let rv: Arc<Rendezvous<(), ()>> = Arc::new(Rendezvous::new());
        let k = key(2);
        let (rv2, k2) = (rv.clone(), k.clone());
        let w = std::thread::spawn(move || rv2.meet(&k2, 0, 0, (), None, |_| vec![]));
        while rv.inner.lock().meetings.is_empty() {
            std::thread::yield_now();
        }
        let twice = rv.meet(&k, 0, 0, (), None, |_| vec![]).unwrap_err();
        assert!(twice.message().contains("twice"), "{twice}");
        rv.abort_all(&Error::new(ErrorKind::Closed, "nrt_close"));
        assert_eq!(w.join().unwrap().unwrap_err().kind(), ErrorKind::Closed);
        // Closed: every later arrival fails at once, until reset.
        let closed = rv.meet(&key(1), 0, 0, (), None, |_| vec![Ok(())]);
        assert_eq!(closed.unwrap_err().kind(), ErrorKind::Closed);
        rv.reset();
        assert_eq!(rv.meet(&key(1), 0, 0, (), None, |_| vec![Ok(())]), Ok(()));
        assert!(rv.meet(&k, 0, 5, (), None, |_| vec![]).is_err());
    }

    #[test]
    fn tickets_count_per_rank_and_group() {
        let rv: Rendezvous<(), ()> = Rendezvous::new();
        assert_eq!(rv.ticket(&key(2), 0), 0);
        assert_eq!(rv.ticket(&key(2), 0), 1);
        assert_eq!(rv.ticket(&key(2), 1), 0);
        assert_eq!(rv.ticket(&key(3), 0), 0);
        rv.untake(&key(2), 0, 0); // not the latest: ignored
        assert_eq!(rv.ticket(&key(2), 0), 2);
        rv.untake(&key(2), 0, 2);
        assert_eq!(rv.ticket(&key(2), 0), 2);
        rv.reset();
        assert_eq!(rv.ticket(&key(2), 0), 0);
    }
}

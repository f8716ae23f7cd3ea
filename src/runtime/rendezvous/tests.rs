use super::*;
use std::sync::Arc;

fn key(n: u32) -> GroupKey {
    GroupKey {
        kind: "test",
        slot: 1,
        group: (10..10 + n).collect(),
    }
}

/// Ranks that do not wait: the last arrival runs on its own thread and hands every rank its
/// result through its callback; a waiting rank can be mixed in.
#[test]
fn ranks_that_do_not_wait_get_their_results_from_the_last_arrival() {
    static RV: once_cell::sync::Lazy<Rendezvous<u32, u32>> =
        once_cell::sync::Lazy::new(Rendezvous::new);
    let k = key(3);
    let got = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let t0 = RV.ticket(&k, 0);
    let g = got.clone();
    RV.arrive(
        &k,
        t0,
        0,
        5,
        NoWait {
            done: Box::new(move |r: Result<u32>| g.lock().push((0, r.unwrap()))),
            deadline: None,
        },
        |_| unreachable!("not the last"),
    );
    let (k2, t1) = (k.clone(), RV.ticket(&k, 1));
    let waiter = std::thread::spawn(move || RV.meet(&k2, t1, 1, 7, None, |_| unreachable!()));
    while RV
        .inner
        .lock()
        .meetings
        .values()
        .all(|m| m.arrived[1].is_none())
    {
        std::thread::yield_now();
    }
    let t2 = RV.ticket(&k, 2);
    let g = got.clone();
    let me = std::thread::current().id();
    RV.arrive(
        &k,
        t2,
        2,
        9,
        NoWait {
            done: Box::new(move |r: Result<u32>| g.lock().push((2, r.unwrap()))),
            deadline: None,
        },
        |all| {
            assert_eq!(std::thread::current().id(), me, "the last arrival runs it");
            all.iter().map(|a| Ok(a * 10)).collect()
        },
    );
    assert_eq!(waiter.join().unwrap().unwrap(), 70);
    let mut v = got.lock().clone();
    v.sort();
    assert_eq!(v, vec![(0, 50), (2, 90)]);
    assert!(
        RV.inner.lock().meetings.is_empty(),
        "the meeting is gone once every rank took"
    );
}

/// A meeting nobody waits on still times out: the watchdog fails it at the deadline,
/// naming the rank that never arrived, and a late arrival gets the same error.
#[test]
fn the_watchdog_fails_a_meeting_no_rank_waits_on() {
    // Checks the report text a user reads, on purpose.
    static RV: once_cell::sync::Lazy<Rendezvous<u32, u32>> =
        once_cell::sync::Lazy::new(Rendezvous::new);
    let k = key(2);
    let (tx, rx) = std::sync::mpsc::channel();
    let t = RV.ticket(&k, 0);
    let start = Instant::now();
    RV.arrive(
        &k,
        t,
        0,
        1,
        NoWait {
            done: Box::new(move |r| tx.send(r).unwrap()),
            deadline: Some(Duration::from_millis(100)),
        },
        |_| unreachable!(),
    );
    let e = rx
        .recv_timeout(Duration::from_secs(10))
        .unwrap()
        .unwrap_err();
    assert!(start.elapsed() >= Duration::from_millis(100));
    assert_eq!(e.kind(), ErrorKind::Timeout);
    assert!(
        e.message().contains("rank 1 (global id 11) never arrived"),
        "{e}"
    );
    let late = RV.meet(&k, RV.ticket(&k, 1), 1, 2, None, |_| unreachable!());
    assert_eq!(late.unwrap_err().kind(), ErrorKind::Timeout);
}

/// The watchdog is woken only for a deadline earlier than the one it sleeps until: with a
/// meeting of a 30 s deadline open, one of 100 ms still fails at 100 ms (and a later
/// meeting with a 60 s deadline does not disturb either).
#[test]
fn an_earlier_deadline_wakes_the_sleeping_watchdog() {
    static RV: once_cell::sync::Lazy<Rendezvous<u32, u32>> =
        once_cell::sync::Lazy::new(Rendezvous::new);
    let arrive = |k: &GroupKey, d: u64| {
        let (tx, rx) = std::sync::mpsc::channel();
        RV.arrive(
            k,
            RV.ticket(k, 0),
            0,
            1,
            NoWait {
                done: Box::new(move |r| tx.send(r).unwrap()),
                deadline: Some(Duration::from_millis(d)),
            },
            |_| unreachable!(),
        );
        rx
    };
    let long = arrive(&key(2), 30_000);
    std::thread::sleep(Duration::from_millis(50)); // the watchdog sleeps until +30 s
    let start = Instant::now();
    let short = arrive(&key(3), 100);
    let later = arrive(&key(4), 60_000);
    let e = short
        .recv_timeout(Duration::from_secs(10))
        .expect("the 100 ms meeting failed well before the 30 s one")
        .unwrap_err();
    assert!(start.elapsed() >= Duration::from_millis(100));
    assert_eq!(e.kind(), ErrorKind::Timeout);
    assert!(long.try_recv().is_err() && later.try_recv().is_err());
    RV.abort_all(&Error::failure("test over"));
    assert!(long.recv_timeout(Duration::from_secs(10)).unwrap().is_err());
    assert!(later
        .recv_timeout(Duration::from_secs(10))
        .unwrap()
        .is_err());
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
    // Checks the report text a user reads, on purpose.
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
    // Checks the message on purpose: it says which check fired; no field carries that.
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

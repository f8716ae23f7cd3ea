//! Tests of the XU model: FIFO order, concurrency across XUs, `exec_ret` at completion, the
//! docs/contract/abi.md §5.5 sequence-id layout, queue and core ranges, compute backpressure, dead
//! XUs and the eventfd registrations of §5.6. The XU registry is process-global, so every test runs
//! under the state machine's test lock (shared with the ABI tests, which may call `nrt_close`) and
//! starts and ends with `shutdown()`.

use super::*;
use crate::runtime::state;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::mpsc;
use std::time::Duration;

/// A guard against a hang if a test's job never gets its message: the job then fails
/// (`NRT_FAILURE`) and the test's status assertion names it. Not a timing assertion — it never fires when the
/// code works.
const NO_HANG: Duration = Duration::from_secs(60);

fn fresh<R>(f: impl FnOnce() -> R) -> R {
    let _serial = state::tests::SERIAL.lock();
    shutdown();
    let r = f();
    shutdown();
    r
}

fn visible() -> u32 {
    process::config().unwrap().visible_cores
}

/// An `NRT_STATUS` slot for `exec_ret`, preset to a sentinel.
struct Slot(Box<AtomicI32>);
impl Slot {
    fn new() -> Slot {
        Slot(Box::new(AtomicI32::new(-7)))
    }
    fn ret(&self) -> ExecRet {
        ExecRet(self.0.as_ptr())
    }
    fn get(&self) -> i32 {
        self.0.load(Ordering::SeqCst)
    }
}

/// A job that waits for one message on the returned sender, then returns `result`.
fn gated(result: Result<()>) -> (mpsc::Sender<()>, Job) {
    let (tx, rx) = mpsc::channel::<()>();
    let job: Job = Box::new(move || match rx.recv_timeout(NO_HANG) {
        Ok(()) => result,
        Err(_) => Err(Error::failure("the gate never opened")),
    });
    (tx, job)
}

/// A failure of `kind`, and the `exec_ret` it writes: the kind's status number.
fn failing(kind: ErrorKind) -> (Result<()>, i32) {
    (Err(Error::new(kind, "test")), kind.status().code())
}

fn eventfd() -> i32 {
    // SAFETY: plain syscall wrapper.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK) };
    assert!(fd >= 0, "eventfd: {}", std::io::Error::last_os_error());
    fd
}

/// Read the eventfd counter: `Some(value)` or `None` if it is 0 (EAGAIN).
fn read_fd(fd: i32) -> Option<u64> {
    let mut v: u64 = 0;
    // SAFETY: reads 8 bytes into a live local.
    let n = unsafe { libc::read(fd, (&mut v as *mut u64).cast(), 8) };
    if n == 8 {
        Some(v)
    } else {
        let e = std::io::Error::last_os_error();
        assert_eq!(e.raw_os_error(), Some(libc::EAGAIN), "read eventfd: {e}");
        None
    }
}

fn close_fd(fd: i32) {
    // SAFETY: closes a descriptor this test created.
    unsafe { libc::close(fd) };
}

#[test]
fn seq_layout_golden_values_spec_5_5() {
    // docs/contract/abi.md §5.5: core << 56 | queue << 52 | type << 48 | counter.
    assert_eq!(encode_seq(0, XuType::TensorOp, 0, 1), 0x0000_0000_0000_0001);
    assert_eq!(encode_seq(1, XuType::Compute, 0, 0), 0x0101_0000_0000_0000);
    assert_eq!(
        encode_seq(3, XuType::Collectives, 1, 5),
        0x0312_0000_0000_0005
    );
    assert_eq!(
        encode_seq(255, XuType::Collectives, 2, (1 << 48) - 1),
        0xFF22_FFFF_FFFF_FFFF
    );
    // The public macros of docs/contract/abi.md §2.3: NRTA_SEQ_GET_XU_ID = seq >> 48, GET_SEQ_NUM =
    // seq & mask.
    let s = encode_seq(7, XuType::TensorOp, 1, 42);
    assert_eq!(s >> 48, 0x0710);
    assert_eq!(s & SEQ_COUNTER_MASK, 42);
    assert_eq!(SEQ_COUNTER_MASK, crate::abi::types::NRTA_SEQ_NUM_MASK);
    // The nrta_xu_t numbers of docs/contract/abi.md §2.2 (GEN-B).
    for (raw, t, q) in [
        (0, XuType::TensorOp, 2),
        (1, XuType::Compute, 1),
        (2, XuType::Collectives, 3),
    ] {
        assert_eq!(XuType::from_raw(raw).unwrap(), t);
        assert_eq!(t as u32, raw);
        assert_eq!(t.queues(), q, "docs/contract/abi.md §3.6 queues of {t:?}");
    }
    assert_eq!(XuType::from_raw(3).unwrap_err().kind(), ErrorKind::Invalid);
    // Decoding inverts encoding.
    let (id, c) = XuId::decode(encode_seq(0, XuType::Collectives, 2, 9)).unwrap();
    assert_eq!((id.lnc, id.xu, id.queue, c), (0, XuType::Collectives, 2, 9));
}

#[test]
fn compute_queue_limit_from_environment() {
    let lim = |v: Option<&str>| {
        compute_queue_limit(&|k: &str| {
            (k == COMPUTE_MAX_QUEUED_ENV)
                .then(|| v.map(String::from))
                .flatten()
        })
    };
    assert_eq!(lim(None).unwrap(), 8, "docs/contract/abi.md §5.4 default");
    assert_eq!(lim(Some("3")).unwrap(), 3);
    for bad in ["0", "-1", "many"] {
        let e = lim(Some(bad)).unwrap_err();
        assert_eq!(e.status_name(), "NRT_INVALID");
        assert_eq!(
            e.fields().field.as_deref(),
            Some(COMPUTE_MAX_QUEUED_ENV),
            "{e:?}"
        );
        assert_eq!(e.fields().actual.as_deref(), Some(bad));
    }
}

/// Request `i`'s result: success, or a failure of each kind in turn.
fn outcome(i: usize) -> Result<()> {
    match i % (ErrorKind::ALL.len() + 1) {
        0 => Ok(()),
        k => Err(Error::new(ErrorKind::ALL[k - 1], format!("request {i}"))),
    }
}

#[test]
fn fifo_order_sequence_and_exec_ret_per_request() {
    fresh(|| {
        let order = Arc::new(Mutex::new(Vec::new()));
        let slots: Vec<Slot> = (0..20).map(|_| Slot::new()).collect();
        let mut seqs = Vec::new();
        for (i, slot) in slots.iter().enumerate() {
            let order = order.clone();
            let job: Job = Box::new(move || {
                order.lock().push(i);
                outcome(i)
            });
            seqs.push(submit(0, XuType::TensorOp, 1, slot.ret(), job).unwrap());
        }
        // Contiguous counters from 1, all with the XU id of (0, TENSOR_OP, 1).
        let want: Vec<u64> = (1..=20)
            .map(|c| encode_seq(0, XuType::TensorOp, 1, c))
            .collect();
        assert_eq!(seqs, want);
        drain_all();
        assert_eq!(*order.lock(), (0..20).collect::<Vec<_>>());
        for (i, slot) in slots.iter().enumerate() {
            assert_eq!(slot.get(), exec_ret_of(&outcome(i)), "request {i}");
        }
        assert!(seqs.iter().all(|&s| is_completed(s).unwrap()));
        assert_eq!(last_completed(0, XuType::TensorOp, 1).unwrap(), seqs[19]);
    });
}

#[test]
fn different_xus_run_concurrently_and_name_their_threads() {
    fresh(|| {
        // A waits for a message only B sends: completes only if A's and B's XUs run at once.
        // Collectives of two cores when the process has two, else two queues of core 0.
        let (lnc_b, queue_b) = if visible() > 1 { (1, 0) } else { (0, 1) };
        let (tx, rx) = mpsc::channel::<()>();
        let a_thread = Arc::new(Mutex::new(None));
        let (a_slot, b_slot) = (Slot::new(), Slot::new());
        let a_name = a_thread.clone();
        let a: Job = Box::new(move || {
            *a_name.lock() = std::thread::current().name().map(String::from);
            rx.recv_timeout(NO_HANG)
                .map_err(|_| Error::failure("B never sent"))
        });
        let b: Job = Box::new(move || tx.send(()).map_err(|_| Error::failure("A is gone")));
        let sa = submit(0, XuType::Collectives, 0, a_slot.ret(), a).unwrap();
        let sb = submit(lnc_b, XuType::Collectives, queue_b, b_slot.ret(), b).unwrap();
        drain_all();
        assert_eq!((a_slot.get(), b_slot.get()), (0, 0));
        assert!(is_completed(sa).unwrap() && is_completed(sb).unwrap());
        assert_eq!(a_thread.lock().as_deref(), Some("opennrt-xu-0-2-0"));
    });
}

#[test]
fn exec_ret_is_written_at_completion_not_before() {
    fresh(|| {
        let slot = Slot::new();
        let (result, want) = failing(ErrorKind::Timeout);
        let (tx, job) = gated(result);
        let before = last_completed(0, XuType::Compute, 0).unwrap();
        assert_eq!(
            before,
            encode_seq(0, XuType::Compute, 0, 0),
            "counter 0 before any"
        );
        let seq = submit(0, XuType::Compute, 0, slot.ret(), job).unwrap();
        assert_eq!(seq, encode_seq(0, XuType::Compute, 0, 1), "first id is 1");
        // The job is blocked: nothing is complete and exec_ret is untouched.
        assert!(!is_completed(seq).unwrap());
        assert_eq!(last_completed(0, XuType::Compute, 0).unwrap(), before);
        assert_eq!(slot.get(), -7);
        tx.send(()).unwrap();
        drain_all();
        assert_eq!(slot.get(), want);
        assert!(is_completed(seq).unwrap());
        assert_eq!(last_completed(0, XuType::Compute, 0).unwrap(), seq);
        // A misaligned exec_ret is refused before anything is queued.
        let odd = ExecRet(slot.0.as_ptr().cast::<u8>().wrapping_add(1).cast());
        let e = submit(0, XuType::Compute, 0, odd, Box::new(|| Ok(()))).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Invalid);
        // A null exec_ret is allowed.
        let s2 = submit(0, XuType::Compute, 0, ExecRet::NONE, Box::new(|| Ok(()))).unwrap();
        drain_all();
        assert_eq!(last_completed(0, XuType::Compute, 0).unwrap(), s2);
    });
}

#[test]
fn queue_and_core_ranges_are_invalid_beyond_spec_3_6() {
    fresh(|| {
        let n = visible();
        for (t, queues) in [
            (XuType::TensorOp, 2),
            (XuType::Compute, 1),
            (XuType::Collectives, 3),
        ] {
            for q in 0..queues {
                assert!(last_completed(0, t, q).is_ok(), "{t:?} queue {q}");
            }
            let kind = |r: Result<u64>| r.unwrap_err().kind();
            assert_eq!(kind(last_completed(0, t, queues)), ErrorKind::Invalid);
            assert_eq!(
                kind(submit(0, t, queues, ExecRet::NONE, Box::new(|| Ok(())))),
                ErrorKind::Invalid
            );
            assert_eq!(kind(last_completed(n, t, 0)), ErrorKind::Invalid);
            assert_eq!(
                kind(submit(n, t, 0, ExecRet::NONE, Box::new(|| Ok(())))),
                ErrorKind::Invalid
            );
            assert!(register_xu_fd(n, t, 0, -1).is_err());
            assert!(register_xu_fd(0, t, queues, -1).is_err());
            assert!(last_completed(n - 1, t, 0).is_ok());
        }
        // Sequence ids naming no XU: type nibble 3, a queue beyond the type, a core beyond.
        let mut bads = vec![3u64 << 48 | 1, encode_seq(0, XuType::Compute, 1, 1)];
        if n <= 255 {
            // The core byte can name a core this process does not own.
            bads.push(encode_seq(n, XuType::TensorOp, 0, 1));
        }
        for bad in bads {
            assert_eq!(is_completed(bad).unwrap_err().kind(), ErrorKind::Invalid);
            assert!(register_seq_fd(bad, -1).is_err());
        }
        // A well-formed id of an unused XU: counter 0 has trivially completed; any other
        // counter was never handed out, which a poller must hear instead of waiting forever.
        let e = is_completed(encode_seq(0, XuType::TensorOp, 0, 1)).unwrap_err();
        assert_eq!(e.status_name(), "NRT_INVALID");
        assert_eq!(e.fields().field.as_deref(), Some("seq"), "{e:?}");
        assert_eq!(
            e.fields().step,
            Some(1),
            "counter 1 of an XU that submitted none"
        );
        assert!(register_seq_fd(encode_seq(0, XuType::TensorOp, 0, 1), 0).is_err());
        assert!(is_completed(encode_seq(0, XuType::TensorOp, 0, 0)).unwrap());
    });
}

#[test]
fn compute_queue_full_at_its_depth_then_accepts_after_completion() {
    fresh(|| {
        let depth = crate::runtime::process::config()
            .unwrap()
            .compute_queue_limit;
        let (tx, first) = gated(Ok(()));
        submit(0, XuType::Compute, 0, ExecRet::NONE, first).unwrap();
        for _ in 1..depth {
            submit(0, XuType::Compute, 0, ExecRet::NONE, Box::new(|| Ok(()))).unwrap();
        }
        let ran = Arc::new(AtomicBool::new(false));
        let r = ran.clone();
        let over: Job = Box::new(move || {
            r.store(true, Ordering::SeqCst);
            Ok(())
        });
        let e = submit(0, XuType::Compute, 0, ExecRet::NONE, over).unwrap_err();
        assert_eq!(e.status_name(), "NRT_QUEUE_FULL", "{e:?}");
        assert_eq!(e.fields().expected, Some(depth.to_string()), "the limit");
        // Tensor-op and collectives queues are unbounded (docs/contract/abi.md §5.4): 2 × depth
        // queue fine.
        let (tx2, blocker) = gated(Ok(()));
        submit(0, XuType::Collectives, 0, ExecRet::NONE, blocker).unwrap();
        for _ in 0..2 * depth {
            submit(
                0,
                XuType::Collectives,
                0,
                ExecRet::NONE,
                Box::new(|| Ok(())),
            )
            .unwrap();
        }
        tx.send(()).unwrap();
        tx2.send(()).unwrap();
        drain_all();
        assert!(!ran.load(Ordering::SeqCst), "a refused job never runs");
        let s = submit(0, XuType::Compute, 0, ExecRet::NONE, Box::new(|| Ok(()))).unwrap();
        assert_eq!(
            s & SEQ_COUNTER_MASK,
            depth + 1,
            "the refused submit used no id"
        );
        drain_all();
    });
}

#[test]
fn a_panicking_job_kills_its_xu_only_until_shutdown() {
    fresh(|| {
        let (tx, rx) = mpsc::channel::<()>();
        let (dead_slot, behind_slot) = (Slot::new(), Slot::new());
        let boom: Job = Box::new(move || {
            let _ = rx.recv_timeout(NO_HANG);
            panic!("deliberate panic of the dead-XU test");
        });
        let ran = Arc::new(AtomicBool::new(false));
        let r = ran.clone();
        let behind: Job = Box::new(move || {
            r.store(true, Ordering::SeqCst);
            Ok(())
        });
        let s1 = submit(0, XuType::TensorOp, 0, dead_slot.ret(), boom).unwrap();
        let s2 = submit(0, XuType::TensorOp, 0, behind_slot.ret(), behind).unwrap();
        tx.send(()).unwrap();
        drain_all();
        // Both complete (nothing hangs) with NRT_EXEC_UNIT_UNRECOVERABLE (101, docs/contract/abi.md
        // §2.1).
        assert_eq!((dead_slot.get(), behind_slot.get()), (101, 101));
        assert_eq!(unrecoverable(), 101);
        assert!(
            !ran.load(Ordering::SeqCst),
            "queued behind a dead job: never run"
        );
        assert!(is_completed(s1).unwrap() && is_completed(s2).unwrap());
        let e = submit(0, XuType::TensorOp, 0, ExecRet::NONE, Box::new(|| Ok(()))).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ExecUnitUnrecoverable);
        // Another queue of the same core is unaffected.
        let slot = Slot::new();
        submit(0, XuType::TensorOp, 1, slot.ret(), Box::new(|| Ok(()))).unwrap();
        drain_all();
        assert_eq!(slot.get(), 0);
        // nrt_close (shutdown) forgets it: counters restart at 1 and the XU works again.
        shutdown();
        assert_eq!(
            last_completed(0, XuType::TensorOp, 0).unwrap(),
            encode_seq(0, XuType::TensorOp, 0, 0)
        );
        let s = submit(0, XuType::TensorOp, 0, ExecRet::NONE, Box::new(|| Ok(()))).unwrap();
        assert_eq!(s, encode_seq(0, XuType::TensorOp, 0, 1));
        drain_all();
        assert!(is_completed(s).unwrap());
    });
}

#[test]
fn xu_eventfd_is_signalled_per_completion_until_deregistered() {
    fresh(|| {
        let fd = eventfd();
        register_xu_fd(0, XuType::Collectives, 2, fd).unwrap();
        assert_eq!(read_fd(fd), None, "registration alone does not signal");
        for _ in 0..3 {
            submit(
                0,
                XuType::Collectives,
                2,
                ExecRet::NONE,
                Box::new(|| Ok(())),
            )
            .unwrap();
        }
        drain_all();
        let v = read_fd(fd).expect("signalled");
        assert!(
            (1..=3).contains(&v),
            "one increment per completion, coalesced: {v}"
        );
        // Deregistered: further completions leave the counter at 0.
        register_xu_fd(0, XuType::Collectives, 2, -1).unwrap();
        submit(
            0,
            XuType::Collectives,
            2,
            ExecRet::NONE,
            Box::new(|| Ok(())),
        )
        .unwrap();
        drain_all();
        assert_eq!(read_fd(fd), None);
        close_fd(fd);
    });
}

#[test]
fn seq_eventfd_fires_once_at_completion_or_at_once_if_already_complete() {
    fresh(|| {
        let fd = eventfd();
        let (tx, job) = gated(Ok(()));
        let seq = submit(0, XuType::TensorOp, 0, ExecRet::NONE, job).unwrap();
        let next = submit(0, XuType::TensorOp, 0, ExecRet::NONE, Box::new(|| Ok(()))).unwrap();
        register_seq_fd(seq, fd).unwrap();
        assert_eq!(read_fd(fd), None, "the job is still blocked");
        tx.send(()).unwrap();
        drain_all();
        assert_eq!(read_fd(fd), Some(1), "fired once for its seq only");
        // Already complete: signalled during the registration itself (docs/contract/abi.md §5.6).
        register_seq_fd(next, fd).unwrap();
        assert_eq!(read_fd(fd), Some(1));
        register_seq_fd(encode_seq(0, XuType::TensorOp, 1, 0), fd).unwrap();
        assert_eq!(read_fd(fd), Some(1), "counter 0 is always complete");
        close_fd(fd);
    });
}

#[test]
fn seq_eventfd_deregistered_with_minus_one_is_never_written() {
    fresh(|| {
        let fd = eventfd();
        let (tx, job) = gated(Ok(()));
        let seq = submit(0, XuType::Compute, 0, ExecRet::NONE, job).unwrap();
        register_seq_fd(seq, fd).unwrap();
        register_seq_fd(seq, -1).unwrap();
        tx.send(()).unwrap();
        drain_all();
        assert!(is_completed(seq).unwrap());
        assert_eq!(read_fd(fd), None);
        close_fd(fd);
    });
}

#[test]
fn bad_fds_are_invalid() {
    fresh(|| {
        let seq = encode_seq(0, XuType::Compute, 0, 1);
        for bad in [-2, i32::MIN] {
            assert_eq!(
                register_seq_fd(seq, bad).unwrap_err().kind(),
                ErrorKind::Invalid
            );
            assert_eq!(
                register_xu_fd(0, XuType::Compute, 0, bad)
                    .unwrap_err()
                    .kind(),
                ErrorKind::Invalid
            );
        }
        let fd = eventfd();
        close_fd(fd);
        // The number is free now (this test holds the serial lock, but other test threads may
        // reuse it; only assert when it is still closed).
        // SAFETY: F_GETFD only queries the descriptor table.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1 {
            assert!(register_xu_fd(0, XuType::Compute, 0, fd).is_err());
        }
    });
}

/// A request begun on the caller's thread and handed to the worker keeps its place: its job
/// runs first on the worker (named as the XU's), then what was submitted behind it; each
/// completes with its own status, in order, and nothing completes before its job ran.
#[test]
fn a_handed_over_request_runs_first_on_the_worker_and_keeps_fifo_order() {
    fresh(|| {
        let order = Arc::new(Mutex::new(Vec::new()));
        let (a, b) = (Slot::new(), Slot::new());
        let (first_result, first_ret) = failing(ErrorKind::CollectivesHang);
        let (behind_result, behind_ret) = failing(ErrorKind::DmaAbort);
        let (request, first) = begin_inline(0, XuType::Collectives, 2, a.ret())
            .unwrap()
            .expect("an idle XU lends its next request");
        // Submitted while the inline request is in flight: queued behind it.
        let o = order.clone();
        let behind = submit(
            0,
            XuType::Collectives,
            2,
            b.ret(),
            Box::new(move || {
                o.lock().push("behind");
                behind_result
            }),
        )
        .unwrap();
        assert!(!is_completed(first).unwrap() && !is_completed(behind).unwrap());
        let (go, gate) = gated(first_result);
        let o = order.clone();
        request.hand_over(Box::new(move || {
            let name = std::thread::current().name().map(str::to_string);
            o.lock().push(
                if name == Some(XuId::new(0, XuType::Collectives, 2).unwrap().thread_name()) {
                    "handed over, on the worker"
                } else {
                    "handed over, elsewhere"
                },
            );
            gate()
        }));
        assert!(!is_completed(first).unwrap(), "its job has not run yet");
        go.send(()).unwrap();
        drain_all();
        assert_eq!(*order.lock(), vec!["handed over, on the worker", "behind"]);
        assert_eq!((a.get(), b.get()), (first_ret, behind_ret));
        assert!(is_completed(first).unwrap() && is_completed(behind).unwrap());
        assert_eq!(last_completed(0, XuType::Collectives, 2).unwrap(), behind);
    });
}

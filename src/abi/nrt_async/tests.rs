use super::*;
use crate::abi::handle::testing;
use std::ptr::{null, null_mut};

#[test]
fn guarded_and_out_params_untouched_on_failure() {
    testing::uninit(|| {
        // SAFETY: NULL arguments are never dereferenced by these entry points.
        unsafe {
            assert_eq!(
                nrta_tensor_write(null_mut(), null(), 0, 0, 0, 0, null_mut(), null_mut()) as i32,
                13
            );
            assert_eq!(nrta_is_completed(1, null_mut()) as i32, 13);
            assert_eq!(nrta_get_sequence(0, 0, 0, null_mut()) as i32, 13);
        }
        assert_eq!(nrta_event_register_xu_completion(0, 0, 0, -1) as i32, 13);
    });
    testing::init(|| {
        let mut seq: nrta_seq_t = 77;
        // SAFETY: as above; `seq` is writable.
        unsafe {
            assert_eq!(
                crate::abi::collective_async::nrta_cc_schedule(null_mut(), 0, null_mut(), &mut seq)
                    as i32,
                2
            );
        }
        assert_eq!(seq, 77, "no out-parameter written on failure");
    });
}

/// The runtime XUs are process-global: start and end with none.
fn with_xus<R>(f: impl FnOnce() -> R) -> R {
    testing::init(|| {
        xu::shutdown();
        let r = f();
        xu::shutdown();
        r
    })
}

fn eventfd_counter(fd: c_int) -> Option<u64> {
    let mut v: u64 = 0;
    // SAFETY: reads 8 bytes into a live local.
    let n = unsafe { libc::read(fd, (&mut v as *mut u64).cast(), 8) };
    (n == 8).then_some(v)
}

#[test]
fn completion_queries_and_eventfds_follow_spec_5_4_to_5_6() {
    with_xus(|| {
        use crate::runtime::xu::{encode_seq, ExecRet};
        let mut seq: nrta_seq_t = 77;
        let mut done = false;
        // SAFETY: out-parameters are live locals or NULL.
        unsafe {
            // Counter 0 before any completion, full XU id in the top bits (docs/contract/abi.md
            // §5.5).
            assert_eq!(nrta_get_sequence(0, 2, 1, &mut seq) as i32, 0);
            assert_eq!(seq, 0x0012_0000_0000_0000);
            // Bad XU type, queue (negative, beyond the type's range), NULL out: NRT_INVALID,
            // nothing written.
            seq = 77;
            assert_eq!(nrta_get_sequence(0, 3, 0, &mut seq) as i32, 2);
            assert_eq!(nrta_get_sequence(0, 1, -1, &mut seq) as i32, 2);
            assert_eq!(nrta_get_sequence(0, 1, 1, &mut seq) as i32, 2);
            assert_eq!(nrta_get_sequence(0, 0, 0, null_mut()) as i32, 2);
            assert_eq!(seq, 77);
            assert_eq!(nrta_is_completed(1, null_mut()) as i32, 2);
            assert_eq!(nrta_is_completed(3 << 48 | 1, &mut done) as i32, 2);
            assert!(!done);
        }
        // SAFETY: plain syscall wrapper.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK) };
        assert!(fd >= 0);
        assert_eq!(nrta_event_register_xu_completion(0, 0, 1, fd) as i32, 0);
        assert_eq!(nrta_event_register_xu_completion(-1, 0, 1, fd) as i32, 2);
        assert_eq!(nrta_event_register_xu_completion(0, 0, 2, fd) as i32, 2);
        assert_eq!(nrta_event_register_seq_id_completion(1, -2) as i32, 2);
        let mut status: i32 = -7;
        let job: xu::Job = Box::new(|| Err(crate::Error::new(crate::ErrorKind::Timeout, "late")));
        let s = xu::submit(0, XuType::TensorOp, 1, ExecRet(&mut status), job).unwrap();
        assert_eq!(s, encode_seq(0, XuType::TensorOp, 1, 1));
        xu::drain_all();
        assert_eq!(
            status, 5,
            "the job's status (NRT_TIMEOUT) lands in exec_ret"
        );
        assert!(eventfd_counter(fd).is_some_and(|v| v >= 1));
        // SAFETY: out-parameters are live locals.
        unsafe {
            assert_eq!(nrta_is_completed(s, &mut done) as i32, 0);
            assert!(done);
            // A counter this XU never handed out: NRT_INVALID, `done` untouched.
            done = false;
            assert_eq!(nrta_is_completed(s + 1, &mut done) as i32, 2);
            assert!(!done);
            assert_eq!(nrta_get_sequence(0, 0, 1, &mut seq) as i32, 0);
            assert_eq!(seq, s);
        }
        // Already complete: signalled at registration; -1 deregisters.
        assert_eq!(nrta_event_register_seq_id_completion(s, fd) as i32, 0);
        assert_eq!(eventfd_counter(fd), Some(1));
        assert_eq!(nrta_event_register_xu_completion(0, 0, 1, -1) as i32, 0);
        // SAFETY: closes the descriptor created above.
        unsafe { libc::close(fd) };
    });
}

use super::*;
use crate::abi::handle::testing;
use crate::abi::tensor::{nrt_tensor_allocate, nrt_tensor_free};
use crate::status::nrt_status::*;
use std::ptr::{null, null_mut};

#[test]
fn guarded_and_out_params_untouched_on_failure() {
    testing::uninit(|| {
        // SAFETY: NULL arguments are never dereferenced by these entry points.
        unsafe {
            assert_eq!(
                nrta_tensor_write(null_mut(), null(), 0, 0, 0, 0, null_mut(), null_mut()),
                NRT_UNINITIALIZED
            );
            assert_eq!(nrta_is_completed(1, null_mut()), NRT_UNINITIALIZED);
            assert_eq!(nrta_get_sequence(0, 0, 0, null_mut()), NRT_UNINITIALIZED);
        }
        assert_eq!(
            nrta_event_register_xu_completion(0, 0, 0, -1),
            NRT_UNINITIALIZED
        );
    });
    testing::init(|| {
        let mut seq: nrta_seq_t = 77;
        // SAFETY: NULL arguments are refused before any dereference; `seq` is a live, writable
        // local.
        unsafe {
            assert_eq!(
                crate::abi::collective_async::nrta_cc_schedule(null_mut(), 0, null_mut(), &mut seq),
                NRT_INVALID
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
            assert_eq!(nrta_get_sequence(0, 2, 1, &mut seq), NRT_SUCCESS);
            assert_eq!(seq, 0x0012_0000_0000_0000);
            // Bad XU type, queue (negative, beyond the type's range), NULL out: NRT_INVALID,
            // nothing written.
            seq = 77;
            assert_eq!(nrta_get_sequence(0, 3, 0, &mut seq), NRT_INVALID);
            assert_eq!(nrta_get_sequence(0, 1, -1, &mut seq), NRT_INVALID);
            assert_eq!(nrta_get_sequence(0, 1, 1, &mut seq), NRT_INVALID);
            assert_eq!(nrta_get_sequence(0, 0, 0, null_mut()), NRT_INVALID);
            assert_eq!(seq, 77);
            assert_eq!(nrta_is_completed(1, null_mut()), NRT_INVALID);
            assert_eq!(nrta_is_completed(3 << 48 | 1, &mut done), NRT_INVALID);
            assert!(!done);
        }
        // SAFETY: plain syscall wrapper.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK) };
        assert!(fd >= 0);
        assert_eq!(nrta_event_register_xu_completion(0, 0, 1, fd), NRT_SUCCESS);
        assert_eq!(nrta_event_register_xu_completion(-1, 0, 1, fd), NRT_INVALID);
        assert_eq!(nrta_event_register_xu_completion(0, 0, 2, fd), NRT_INVALID);
        assert_eq!(nrta_event_register_seq_id_completion(1, -2), NRT_INVALID);
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
            assert_eq!(nrta_is_completed(s, &mut done), NRT_SUCCESS);
            assert!(done);
            // A counter this XU never handed out: NRT_INVALID, `done` untouched.
            done = false;
            assert_eq!(nrta_is_completed(s + 1, &mut done), NRT_INVALID);
            assert!(!done);
            assert_eq!(nrta_get_sequence(0, 0, 1, &mut seq), NRT_SUCCESS);
            assert_eq!(seq, s);
        }
        // Already complete: signalled at registration; -1 deregisters.
        assert_eq!(nrta_event_register_seq_id_completion(s, fd), NRT_SUCCESS);
        assert_eq!(eventfd_counter(fd), Some(1));
        assert_eq!(nrta_event_register_xu_completion(0, 0, 1, -1), NRT_SUCCESS);
        // SAFETY: closes the descriptor created above.
        unsafe { libc::close(fd) };
    });
}

fn alloc(vnc: i32, size: usize) -> *mut nrt_tensor_t {
    let mut t = null_mut();
    // SAFETY: valid out-pointer, NUL-terminated name.
    let st = unsafe { nrt_tensor_allocate(0, vnc, size, c"t".as_ptr(), &mut t) };
    assert_eq!(st, NRT_SUCCESS);
    t
}

#[test]
fn write_copy_read_in_queue_order() {
    testing::init(|| {
        xu::shutdown();
        let (a, b, c) = (alloc(0, 16), alloc(0, 16), alloc(1, 16));
        let data: Vec<u8> = (1..=16).collect();
        let mut back = vec![0u8; 16];
        let mut rets = [NRT_STATUS::NRT_FAILURE; 3];
        let mut seqs = [0u64; 3];
        let [r0, r1, r2] = &mut rets;
        let [s0, s1, s2] = &mut seqs;
        // SAFETY: live tensors, buffers outlive the drain below.
        unsafe {
            assert_eq!(
                nrta_tensor_write(a, data.as_ptr().cast(), 0, 16, 0, 1, r0, s0),
                NRT_SUCCESS
            );
            assert_eq!(nrta_tensor_copy(a, 4, b, 0, 8, 0, 1, r1, s1), NRT_SUCCESS);
            assert_eq!(
                nrta_tensor_read(back.as_mut_ptr().cast(), b, 0, 8, 0, 1, r2, s2),
                NRT_SUCCESS
            );
        }
        xu::drain_all();
        assert!(
            rets.iter().all(|r| *r == NRT_STATUS::NRT_SUCCESS),
            "{rets:?}"
        );
        assert_eq!(&back[..8], &data[4..12]);
        assert_eq!(seqs[1] & 0xFFFF_FFFF_FFFF, (seqs[0] & 0xFFFF_FFFF_FFFF) + 1);
        assert_eq!(
            seqs[0] >> 48,
            (1 << 4) | XuType::TensorOp as u64,
            "queue 1, tensor-op"
        );
        let mut seq = 99u64;
        let mut ret = NRT_STATUS::NRT_SUCCESS;
        // SAFETY: every call below is rejected before anything is queued.
        unsafe {
            assert_eq!(
                nrta_tensor_write(a, data.as_ptr().cast(), 8, 9, 0, 0, &mut ret, &mut seq),
                NRT_INVALID
            );
            assert_eq!(
                nrta_tensor_write(a, std::ptr::null(), 0, 4, 0, 0, &mut ret, &mut seq),
                NRT_INVALID
            );
            assert_eq!(
                nrta_tensor_read(back.as_mut_ptr().cast(), a, 0, 4, 0, 2, &mut ret, &mut seq),
                NRT_INVALID
            );
            assert_eq!(
                nrta_tensor_read(back.as_mut_ptr().cast(), a, 0, 4, -1, 0, &mut ret, &mut seq),
                NRT_INVALID
            );
            assert_eq!(
                nrta_tensor_copy(a, 0, c, 0, 4, 0, 0, &mut ret, &mut seq),
                NRT_INVALID
            );
        }
        assert_eq!(seq, 99, "no sequence written on failure");
        for mut t in [a, b, c] {
            // SAFETY: live handles.
            unsafe { nrt_tensor_free(&mut t) };
        }
        // SAFETY: a freed handle is detected, not dereferenced.
        let st = unsafe {
            nrta_tensor_read(back.as_mut_ptr().cast(), a, 0, 4, 0, 0, &mut ret, &mut seq)
        };
        assert_eq!(st, NRT_INVALID_HANDLE, "NRT_INVALID_HANDLE");
        xu::shutdown();
    });
}

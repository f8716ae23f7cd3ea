//! The tensor entry points through their `extern "C"` signatures: every error path (NULL, freed
//! handle, wrong kind, bounds, overflow, placement and core), aliasing, attached memory,
//! `nrt_memcpy_to_device`, batches, completion and tensor sets (docs/contract/abi.md §3.3, §5.1).

use super::*;
use crate::abi::handle::testing;
use nrt_status::*;
use std::ptr::{null, null_mut};

pub(crate) const DEVICE: RawPlacement = 0;
pub(crate) const HOST: RawPlacement = 1;
const VIRTUAL: RawPlacement = 2;

pub(crate) fn visible() -> u32 {
    process::config().unwrap().visible_cores
}

/// Allocate or panic.
pub(crate) fn alloc(placement: RawPlacement, vnc: c_int, size: usize) -> *mut nrt_tensor_t {
    let mut t = null_mut();
    // SAFETY: `t` is writable; the name is a valid C string.
    let s = unsafe { nrt_tensor_allocate(placement, vnc, size, c"t".as_ptr(), &mut t) };
    assert_eq!(s, NRT_SUCCESS);
    assert!(!t.is_null());
    t
}

/// The tensor behind a handle this test owns.
pub(crate) fn tt(h: *const nrt_tensor_t) -> Tensor {
    // SAFETY: the handle table checks `h`; the tests free handles only on their own thread.
    unsafe { tensor_of(h, "t") }.unwrap()
}

pub(crate) fn free(mut t: *mut nrt_tensor_t) {
    // SAFETY: a slot holding a handle from `alloc`.
    unsafe { nrt_tensor_free(&mut t) };
    assert!(t.is_null());
}

pub(crate) fn write(t: *mut nrt_tensor_t, off: usize, data: &[u8]) -> NRT_STATUS {
    // SAFETY: `data` has `data.len()` bytes; the tensor is checked by the callee.
    unsafe { nrt_tensor_write(t, data.as_ptr().cast(), off, data.len()) }
}

pub(crate) fn read(t: *const nrt_tensor_t, off: usize, n: usize) -> (NRT_STATUS, Vec<u8>) {
    let mut v = vec![0xeeu8; n];
    // SAFETY: `v` has `n` bytes; the tensor is checked by the callee.
    let s = unsafe { nrt_tensor_read(t, v.as_mut_ptr().cast(), off, n) };
    (s, v)
}

#[test]
fn guarded_before_init() {
    testing::uninit(|| {
        let (mut slot, mut set) = (null_mut(), null_mut());
        // SAFETY: the guard runs before any argument is looked at.
        unsafe {
            let mut info = std::mem::zeroed();
            let statuses = [
                nrt_tensor_allocate(DEVICE, 0, 8, null(), &mut slot),
                nrt_tensor_allocate_empty(null(), &mut slot),
                nrt_tensor_read(null(), null_mut(), 0, 0),
                nrt_tensor_write(null_mut(), null(), 0, 0),
                nrt_tensor_read_batch(null(), 0, false),
                nrt_tensor_write_batch(null(), 0, false),
                nrt_tensor_copy(null(), 0, null_mut(), 0, 0),
                nrt_tensor_memset(null_mut(), 0, 0, 0),
                nrt_tensor_attach_buffer(null_mut(), null_mut(), 0),
                nrt_tensor_allocate_slice(null(), 0, 0, null(), &mut slot),
                nrt_tensor_get_device_allocation_info(null(), &mut info),
                nrt_tensor_check_output_completion(null(), 0, 0),
                nrt_tensor_reset_output_completion(null_mut()),
                nrt_memcpy_to_device(null_mut(), null(), 0),
                nrt_allocate_tensor_set(&mut set),
                nrt_add_tensor_to_tensor_set(null_mut(), null(), null_mut()),
                nrt_get_tensor_from_tensor_set(null_mut(), null(), &mut slot),
            ];
            for (i, s) in statuses.into_iter().enumerate() {
                assert_eq!(s, NRT_UNINITIALIZED, "call {i}");
            }
            assert!(
                slot.is_null() && set.is_null(),
                "nothing written before init"
            );
            assert_eq!(nrt_tensor_get_size(null()), 0);
            assert!(nrt_tensor_get_va(null()).is_null());
            nrt_tensor_free(null_mut());
            nrt_destroy_tensor_set(null_mut());
        }
    });
}

#[test]
fn allocate_checks_placement_core_and_out_param() {
    testing::init(|| {
        let n = visible() as c_int;
        let mut t = null_mut();
        // SAFETY: `t` is writable; NULL name is allowed.
        unsafe {
            assert_eq!(
                nrt_tensor_allocate(DEVICE, n, 8, null(), &mut t),
                NRT_INVALID,
                "vnc = visible"
            );
            assert_eq!(
                nrt_tensor_allocate(DEVICE, -1, 8, null(), &mut t),
                NRT_INVALID,
                "device vnc -1"
            );
            assert_eq!(
                nrt_tensor_allocate(VIRTUAL, 0, 8, null(), &mut t),
                NRT_INVALID,
                "removed in 2.32"
            );
            assert_eq!(
                nrt_tensor_allocate(7, 0, 8, null(), &mut t),
                NRT_INVALID,
                "unknown placement"
            );
            assert_eq!(
                nrt_tensor_allocate(DEVICE, 0, 8, null(), null_mut()),
                NRT_INVALID
            );
            assert!(t.is_null(), "out-parameter untouched on failure");
            assert_eq!(
                nrt_tensor_allocate(DEVICE, 0, 1 << 62, null(), &mut t),
                NRT_RESOURCE
            );
            assert_eq!(
                nrt_tensor_allocate(HOST, -1, 1 << 62, null(), &mut t),
                NRT_FAIL_HOST_MEM_ALLOC
            );
            assert!(t.is_null());
            // Host placement ignores vnc (Choice: any value); the last visible core is fine.
            for (p, v) in [(HOST, -1), (HOST, 12345), (DEVICE, n - 1), (DEVICE, 0)] {
                assert_eq!(nrt_tensor_allocate(p, v, 24, null(), &mut t), NRT_SUCCESS);
                assert_eq!(nrt_tensor_get_size(t), 24);
                assert_eq!(read(t, 0, 24), (NRT_SUCCESS, vec![0; 24]), "zero-filled");
                let tt = tt(t);
                let want = if p == DEVICE { Some(v as u32) } else { None };
                assert_eq!(tt.vnc(), want);
                free(t);
            }
        }
    });
}

#[test]
fn free_is_null_safe_and_detects_double_free() {
    testing::init(|| {
        // SAFETY: NULL slot and NULL handle are no-ops.
        unsafe {
            nrt_tensor_free(null_mut());
            let mut none: *mut nrt_tensor_t = null_mut();
            nrt_tensor_free(&mut none);
        }
        let t = alloc(DEVICE, 0, 16);
        let mut stale = t;
        free(t);
        // SAFETY: the freed handle is only looked up in the handle table, never dereferenced.
        unsafe {
            nrt_tensor_free(&mut stale);
            assert_eq!(stale, t, "a failed free leaves the slot untouched");
            assert_eq!(nrt_tensor_get_size(t), 0);
            assert!(nrt_tensor_get_va(t).is_null());
            assert_eq!(nrt_tensor_memset(t, 0, 0, 1), NRT_INVALID_HANDLE);
            assert_eq!(nrt_tensor_reset_output_completion(t), NRT_INVALID_HANDLE);
        }
        assert_eq!(read(t, 0, 1).0, NRT_INVALID_HANDLE);
        assert_eq!(write(t, 0, &[1]), NRT_INVALID_HANDLE);
        assert_eq!(read(null(), 0, 1).0, NRT_INVALID);
    });
}

#[test]
fn read_write_memset_bounds() {
    testing::init(|| {
        let t = alloc(HOST, -1, 16);
        assert_eq!(write(t, 4, &[1, 2, 3, 4]), NRT_SUCCESS);
        // SAFETY: the tensor is live.
        assert_eq!(unsafe { nrt_tensor_memset(t, 12, 0x1ab, 4) }, NRT_SUCCESS);
        let (s, v) = read(t, 0, 16);
        assert_eq!(s, NRT_SUCCESS);
        assert_eq!(
            v,
            [0, 0, 0, 0, 1, 2, 3, 4, 0, 0, 0, 0, 0xab, 0xab, 0xab, 0xab]
        );
        assert_eq!(read(t, 16, 0).0, NRT_SUCCESS, "empty range at the end");
        assert_eq!(read(t, 13, 4).0, NRT_INVALID);
        assert_eq!(
            read(t, usize::MAX, 2).0,
            NRT_INVALID,
            "offset + size overflows"
        );
        assert_eq!(write(t, 15, &[0, 0]), NRT_INVALID);
        // SAFETY: NULL buffers are checked before use; the tensor is live.
        unsafe {
            assert_eq!(nrt_tensor_memset(t, u64::MAX, 0, 2), NRT_INVALID);
            assert_eq!(nrt_tensor_memset(t, 8, 0, 9), NRT_INVALID);
            assert_eq!(nrt_tensor_read(t, null_mut(), 0, 1), NRT_INVALID);
            assert_eq!(nrt_tensor_write(t, null(), 0, 1), NRT_INVALID);
            assert_eq!(nrt_tensor_read(t, null_mut(), 0, 0), NRT_SUCCESS);
            // The tensor's own VA as the host buffer (overlapping): memmove semantics.
            let va = nrt_tensor_get_va(t);
            assert_eq!(nrt_tensor_write(t, va.cast_const(), 2, 8), NRT_SUCCESS);
        }
        assert_eq!(read(t, 0, 12).1, [0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 0, 0]);
        free(t);
    });
}

#[test]
fn copy_rules() {
    testing::init(|| {
        let n = visible() as c_int;
        let a = alloc(DEVICE, 0, 8);
        let b = alloc(DEVICE, 0, 8);
        let h = alloc(HOST, -1, 8);
        assert_eq!(write(a, 0, &[1, 2, 3, 4, 5, 6, 7, 8]), NRT_SUCCESS);
        // SAFETY: all handles are live or checked.
        unsafe {
            assert_eq!(nrt_tensor_copy(a, 2, b, 0, 6), NRT_SUCCESS);
            assert_eq!(nrt_tensor_copy(b, 0, h, 4, 4), NRT_SUCCESS);
            assert_eq!(nrt_tensor_copy(a, 3, b, 0, 6), NRT_INVALID, "source range");
            assert_eq!(
                nrt_tensor_copy(a, 0, b, 3, 6),
                NRT_INVALID,
                "destination range"
            );
            assert_eq!(nrt_tensor_copy(a, usize::MAX, b, 0, 1), NRT_INVALID);
            assert_eq!(nrt_tensor_copy(null(), 0, b, 0, 1), NRT_INVALID);
            assert_eq!(nrt_tensor_copy(a, 0, null_mut(), 0, 1), NRT_INVALID);
        }
        assert_eq!(read(b, 0, 8).1, [3, 4, 5, 6, 7, 8, 0, 0]);
        assert_eq!(read(h, 0, 8).1, [0, 0, 0, 0, 3, 4, 5, 6]);
        if n > 1 {
            let c = alloc(DEVICE, 1, 8);
            // SAFETY: live handles.
            unsafe {
                assert_eq!(
                    nrt_tensor_copy(a, 0, c, 0, 8),
                    NRT_INVALID,
                    "different cores"
                );
                assert_eq!(
                    nrt_tensor_copy(h, 0, c, 0, 8),
                    NRT_SUCCESS,
                    "host to any core"
                );
                assert_eq!(
                    nrt_tensor_copy(c, 0, h, 0, 8),
                    NRT_SUCCESS,
                    "any core to host"
                );
            }
            assert_eq!(read(c, 0, 8).1, [0, 0, 0, 0, 3, 4, 5, 6]);
            free(c);
        }
        for t in [a, b, h] {
            free(t);
        }
    });
}

#[test]
fn slices_alias_and_outlive_their_source() {
    testing::init(|| {
        let t = alloc(DEVICE, 0, 32);
        let mut s = null_mut();
        let mut bad = null_mut();
        // SAFETY: live source; writable slots.
        unsafe {
            assert_eq!(
                nrt_tensor_allocate_slice(t, 8, 16, c"s".as_ptr(), &mut s),
                NRT_SUCCESS
            );
            assert_eq!(nrt_tensor_get_size(s), 16);
            assert_eq!(nrt_tensor_get_va(s).addr(), nrt_tensor_get_va(t).addr() + 8);
            assert_eq!(
                nrt_tensor_allocate_slice(t, 17, 16, null(), &mut bad),
                NRT_INVALID
            );
            assert_eq!(
                nrt_tensor_allocate_slice(t, usize::MAX, 2, null(), &mut bad),
                NRT_INVALID
            );
            assert_eq!(
                nrt_tensor_allocate_slice(null(), 0, 0, null(), &mut bad),
                NRT_INVALID
            );
            assert_eq!(
                nrt_tensor_allocate_slice(t, 0, 0, null(), null_mut()),
                NRT_INVALID
            );
            assert!(bad.is_null());
            assert_eq!(
                nrt_tensor_allocate_slice(t, 32, 0, null(), &mut bad),
                NRT_SUCCESS
            );
            assert!(!nrt_tensor_get_va(bad).is_null(), "size-0 slice has a VA");
            free(bad);
        }
        let (ts, ss) = (tt(t), tt(s));
        assert_eq!(ss.storage_key(), (ts.storage_key().0, 8));
        assert_eq!(ss.vnc(), Some(0));
        assert_eq!(write(s, 0, &[9; 4]), NRT_SUCCESS);
        assert_eq!(read(t, 6, 4).1, [0, 0, 9, 9]);
        drop((ts, ss));
        free(t);
        assert_eq!(
            write(s, 12, &[7; 4]),
            NRT_SUCCESS,
            "source freed: the slice keeps the memory"
        );
        assert_eq!(
            read(s, 0, 16).1,
            [9, 9, 9, 9, 0, 0, 0, 0, 0, 0, 0, 0, 7, 7, 7, 7]
        );
        free(s);
    });
}

#[test]
fn empty_tensor_and_attached_buffer() {
    testing::init(|| {
        let mut t = null_mut();
        let mut buf = vec![0u8; 32];
        // SAFETY: writable slot; `buf` outlives the tensor.
        unsafe {
            assert_eq!(nrt_tensor_allocate_empty(null(), null_mut()), NRT_INVALID);
            assert_eq!(
                nrt_tensor_allocate_empty(c"e".as_ptr(), &mut t),
                NRT_SUCCESS
            );
            assert_eq!(nrt_tensor_get_size(t), 0);
            assert!(nrt_tensor_get_va(t).is_null(), "no storage, no VA");
            assert_eq!(write(t, 0, &[1]), NRT_INVALID);
            assert_eq!(nrt_tensor_attach_buffer(t, null_mut(), 8), NRT_INVALID);
            assert_eq!(
                nrt_tensor_attach_buffer(null_mut(), buf.as_mut_ptr().cast(), 8),
                NRT_INVALID
            );
            assert_eq!(
                nrt_tensor_attach_buffer(t, buf.as_mut_ptr().cast(), 32),
                NRT_SUCCESS
            );
            assert_eq!(nrt_tensor_get_size(t), 32);
            assert_eq!(nrt_tensor_get_va(t), buf.as_mut_ptr().cast(), "zero-copy");
            let mut info = std::mem::zeroed();
            assert_eq!(
                nrt_tensor_get_device_allocation_info(t, &mut info),
                NRT_INVALID,
                "host memory"
            );
            assert_eq!(
                nrt_memcpy_to_device(buf.as_mut_ptr().cast(), [1u8].as_ptr().cast(), 1),
                NRT_INVALID,
                "attached memory is not device memory"
            );
        }
        assert_eq!(write(t, 30, &[5, 6]), NRT_SUCCESS);
        assert_eq!(&buf[30..], &[5, 6]);
        buf[0] = 42;
        assert_eq!(read(t, 0, 1).1, [42]);
        // Attaching to a device tensor replaces its memory; a slice keeps the old memory.
        let d = alloc(DEVICE, 0, 8);
        let mut s = null_mut();
        // SAFETY: live handles; `buf` outlives `d`.
        unsafe {
            assert_eq!(
                nrt_tensor_allocate_slice(d, 0, 8, null(), &mut s),
                NRT_SUCCESS
            );
            assert_eq!(
                nrt_tensor_attach_buffer(d, buf.as_mut_ptr().cast(), 4),
                NRT_SUCCESS
            );
        }
        assert_eq!(tt(d).placement(), Placement::Host);
        assert_eq!(read(d, 0, 4).1, [42, 0, 0, 0]);
        assert_eq!(read(s, 0, 8).1, [0; 8]);
        for x in [t, d, s] {
            free(x);
        }
    });
}

#[test]
fn va_memcpy_to_device_and_allocation_info() {
    testing::init(|| {
        let t = alloc(DEVICE, 0, 64);
        let z = alloc(DEVICE, 0, 0);
        let h = alloc(HOST, -1, 64);
        let data = [0x3cu8; 16];
        let mut info: nrt_tensor_device_allocation_info_t =
            // SAFETY: a plain-data struct; all-zero is valid.
            unsafe { std::mem::zeroed() };
        // SAFETY: VAs come from live tensors; `data` has 16 bytes; the callee checks `dest`.
        unsafe {
            let va = nrt_tensor_get_va(t).cast::<u8>();
            assert!(
                !nrt_tensor_get_va(z).is_null(),
                "size-0 device tensor has a VA"
            );
            assert_eq!(
                nrt_memcpy_to_device(va.add(8).cast(), data.as_ptr().cast(), 16),
                NRT_SUCCESS
            );
            assert_eq!(
                nrt_memcpy_to_device(va.add(48).cast(), data.as_ptr().cast(), 16),
                NRT_SUCCESS
            );
            assert_eq!(
                nrt_memcpy_to_device(va.add(49).cast(), data.as_ptr().cast(), 16),
                NRT_INVALID
            );
            assert_eq!(nrt_memcpy_to_device(va.cast(), null(), 1), NRT_INVALID);
            assert_eq!(
                nrt_memcpy_to_device(null_mut(), data.as_ptr().cast(), 0),
                NRT_INVALID
            );
            assert_eq!(
                nrt_memcpy_to_device(nrt_tensor_get_va(z), null(), 0),
                NRT_SUCCESS
            );
            assert_eq!(
                nrt_memcpy_to_device(nrt_tensor_get_va(h), data.as_ptr().cast(), 1),
                NRT_INVALID,
                "host tensor"
            );
            assert_eq!(
                nrt_tensor_get_device_allocation_info(t, &mut info),
                NRT_SUCCESS
            );
            assert_eq!(info.physical_address, va.addr() as u64);
            assert_eq!((info.size, info.hbm_index), (64, 0));
            assert_eq!(
                nrt_tensor_get_device_allocation_info(t, null_mut()),
                NRT_INVALID
            );
            assert_eq!(
                nrt_tensor_get_device_allocation_info(h, &mut info),
                NRT_INVALID
            );
        }
        let (_, v) = read(t, 0, 64);
        assert_eq!(&v[8..24], &data);
        assert_eq!(&v[48..], &data);
        assert!(v[..8].iter().chain(&v[24..48]).all(|&b| b == 0));
        let va = tt(t).va();
        free(t);
        // SAFETY: the freed range is only looked up, never written.
        let s = unsafe { nrt_memcpy_to_device(va.cast(), data.as_ptr().cast(), 1) };
        assert_eq!(
            s, NRT_INVALID,
            "a freed device tensor is no longer a destination"
        );
        free(z);
        free(h);
    });
}

fn op(offset: u64, buf: &mut [u8]) -> nrt_tensor_batch_op_t {
    nrt_tensor_batch_op_t {
        offset,
        size: buf.len() as u64,
        buffer: buf.as_mut_ptr().cast(),
    }
}

#[test]
fn batches_are_checked_before_anything_moves() {
    testing::init(|| {
        let a = alloc(DEVICE, 0, 8);
        let b = alloc(HOST, -1, 4);
        let (mut x, mut y, mut z) = ([1u8, 2], [3u8, 4, 5], [6u8; 4]);
        let ops_a = [op(0, &mut x), op(5, &mut y)];
        let ops_b = [op(0, &mut z)];
        let w = [
            nrt_tensor_batch_t {
                tensor: a,
                ops: ops_a.as_ptr(),
                num_ops: 2,
            },
            nrt_tensor_batch_t {
                tensor: b,
                ops: ops_b.as_ptr(),
                num_ops: 1,
            },
        ];
        // SAFETY: every descriptor points to live buffers of the stated sizes.
        unsafe {
            assert_eq!(nrt_tensor_write_batch(w.as_ptr(), 2, false), NRT_SUCCESS);
            assert_eq!(
                nrt_tensor_write_batch(null(), 0, true),
                NRT_SUCCESS,
                "no batches"
            );
            assert_eq!(nrt_tensor_write_batch(null(), 1, false), NRT_INVALID);
        }
        assert_eq!(read(a, 0, 8).1, [1, 2, 0, 0, 0, 3, 4, 5]);
        assert_eq!(read(b, 0, 4).1, [6; 4]);

        let (mut r1, mut r2) = ([0u8; 3], [0u8; 5]);
        let mut good = [op(5, &mut r1)];
        let mut past = [op(4, &mut r2)];
        let mut rb = [nrt_tensor_batch_t {
            tensor: a,
            ops: good.as_ptr(),
            num_ops: 1,
        }; 2];
        rb[1].ops = past.as_ptr();
        // SAFETY: `rb` holds 2 descriptors of the live tensor `a`, each pointing to one op whose
        // buffer (`r1`, `r2`) has the op's size in writable bytes.
        unsafe {
            assert_eq!(
                nrt_tensor_read_batch(rb.as_ptr(), 2, true),
                NRT_INVALID,
                "unsafe still checks"
            );
            assert_eq!(good[0].size, 3);
            assert_eq!(r1, [0; 3], "the valid first op did not run either");
            past[0].offset = 3;
            rb[1].ops = past.as_ptr();
            assert_eq!(nrt_tensor_read_batch(rb.as_ptr(), 2, false), NRT_SUCCESS);
            good[0].buffer = null_mut();
            rb[0].ops = good.as_ptr();
            assert_eq!(
                nrt_tensor_read_batch(rb.as_ptr(), 1, false),
                NRT_INVALID,
                "NULL buffer"
            );
            rb[0].ops = null();
            assert_eq!(
                nrt_tensor_read_batch(rb.as_ptr(), 1, false),
                NRT_INVALID,
                "NULL ops"
            );
            rb[0].num_ops = 0;
            assert_eq!(
                nrt_tensor_read_batch(rb.as_ptr(), 1, false),
                NRT_SUCCESS,
                "no ops"
            );
        }
        assert_eq!(r1, [3, 4, 5]);
        assert_eq!(r2, [0, 0, 3, 4, 5]);
        free(b);
        // SAFETY: the freed handle is only looked up.
        let s = unsafe { nrt_tensor_write_batch(w.as_ptr(), 2, false) };
        assert_eq!(s, NRT_INVALID_HANDLE);
        free(a);
    });
}

#[test]
fn output_completion_is_honest() {
    testing::init(|| {
        let t = alloc(DEVICE, 0, 4);
        // SAFETY: live handle; NULL is checked.
        unsafe {
            assert_eq!(nrt_tensor_check_output_completion(t, 0, 0), NRT_SUCCESS);
            assert_eq!(nrt_tensor_check_output_completion(t, 1000, 1), NRT_TIMEOUT);
            assert_eq!(
                nrt_tensor_check_output_completion(null(), 0, 0),
                NRT_INVALID
            );
            assert_eq!(nrt_tensor_reset_output_completion(null_mut()), NRT_INVALID);
            // An execution finishing (what nrt_execute records) satisfies even an unbounded wait.
            tt(t).complete_output();
            assert_eq!(nrt_tensor_check_output_completion(t, -1, 1), NRT_SUCCESS);
            assert_eq!(nrt_tensor_reset_output_completion(t), NRT_SUCCESS);
            assert_eq!(nrt_tensor_check_output_completion(t, 0, 1), NRT_TIMEOUT);
        }
        free(t);
    });
}

#[test]
fn lnc_index_of_device_host_slice_and_bad_input() {
    testing::init(|| {
        let last = visible() as c_int - 1;
        let d0 = alloc(DEVICE, 0, 16);
        let dn = alloc(DEVICE, last, 16);
        let h = alloc(HOST, -1, 16);
        let mut s = null_mut();
        let mut e = null_mut();
        let mut got: c_int = 77;
        // SAFETY: locals are writable; handles are checked by the callee.
        unsafe {
            assert_eq!(
                nrt_tensor_allocate_slice(dn, 4, 8, null(), &mut s),
                NRT_SUCCESS
            );
            assert_eq!(
                nrt_tensor_allocate_empty(c"e".as_ptr(), &mut e),
                NRT_SUCCESS
            );
            for (t, want) in [(d0, 0), (dn, last), (s, last), (h, -1), (e, -1)] {
                assert_eq!(nrt_tensor_get_lnc_index(t, &mut got), NRT_SUCCESS);
                assert_eq!(got, want);
            }
            got = 77;
            assert_eq!(nrt_tensor_get_lnc_index(null(), &mut got), NRT_INVALID);
            assert_eq!(nrt_tensor_get_lnc_index(d0, null_mut()), NRT_INVALID);
            let stale = d0;
            free(d0);
            assert_eq!(
                nrt_tensor_get_lnc_index(stale, &mut got),
                NRT_INVALID_HANDLE
            );
            assert_eq!(got, 77, "written only on success");
        }
        for t in [s, dn, h, e] {
            free(t);
        }
    });
    testing::uninit(|| {
        let mut got: c_int = 5;
        // SAFETY: the guard runs before any argument is looked at.
        let st = unsafe { nrt_tensor_get_lnc_index(null(), &mut got) };
        assert_eq!((st, got), (NRT_UNINITIALIZED, 5));
    });
}

use super::*;
use crate::abi::handle::testing;
use crate::abi::nrt_async::{nrta_tensor_copy, nrta_tensor_read, nrta_tensor_write};
use crate::abi::tensor::{nrt_tensor_allocate, nrt_tensor_free};
use std::ptr::null_mut;

fn alloc(vnc: i32, size: usize) -> *mut nrt_tensor_t {
    let mut t = null_mut();
    // SAFETY: valid out-pointer, NUL-terminated name.
    let st = unsafe { nrt_tensor_allocate(0, vnc, size, c"t".as_ptr(), &mut t) };
    assert_eq!(st as i32, 0);
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
                nrta_tensor_write(a, data.as_ptr().cast(), 0, 16, 0, 1, r0, s0) as i32,
                0
            );
            assert_eq!(nrta_tensor_copy(a, 4, b, 0, 8, 0, 1, r1, s1) as i32, 0);
            assert_eq!(
                nrta_tensor_read(back.as_mut_ptr().cast(), b, 0, 8, 0, 1, r2, s2) as i32,
                0
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
                nrta_tensor_write(a, data.as_ptr().cast(), 8, 9, 0, 0, &mut ret, &mut seq) as i32,
                2
            );
            assert_eq!(
                nrta_tensor_write(a, std::ptr::null(), 0, 4, 0, 0, &mut ret, &mut seq) as i32,
                2
            );
            assert_eq!(
                nrta_tensor_read(back.as_mut_ptr().cast(), a, 0, 4, 0, 2, &mut ret, &mut seq)
                    as i32,
                2
            );
            assert_eq!(
                nrta_tensor_read(back.as_mut_ptr().cast(), a, 0, 4, -1, 0, &mut ret, &mut seq)
                    as i32,
                2
            );
            assert_eq!(
                nrta_tensor_copy(a, 0, c, 0, 4, 0, 0, &mut ret, &mut seq) as i32,
                2
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
        assert_eq!(st as i32, 3, "NRT_INVALID_HANDLE");
        xu::shutdown();
    });
}

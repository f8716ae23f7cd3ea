use super::*;
use std::ptr::{null_mut, NonNull};

#[test]
fn dynamic_sizes_are_bounds_checked() {
    // rank_n = 3: send counts, send offsets, recv offsets, recv counts (elements).
    let mut t: [u64; 12] = [1, 2, 3, 0, 1, 3, 10, 20, 30, 0, 0, 0];
    let mut m = enc_host_mem_t {
        mem_handle: null_mut(),
        va: t.as_mut_ptr().cast(),
        pa: 0,
        size: std::mem::size_of_val(&t),
    };
    // SAFETY: `m` describes the live table `t`; bad inputs are checked.
    unsafe {
        assert_eq!(nec_get_dynamic_send_size_bytes(&mut m, 4, 2, 3), 12);
        assert_eq!(nec_get_dynamic_send_offset_bytes(&mut m, 4, 2, 3), 12);
        assert_eq!(nec_get_dynamic_recv_offset_bytes(&mut m, 2, 1, 3), 40);
        nec_set_recv_size_bytes(&mut m, 16, 4, 1, 3);
        nec_set_recv_size_bytes(&mut m, 15, 4, 2, 3); // not whole elements: ignored
        nec_set_recv_size_bytes(&mut m, 16, 4, 3, 3); // rank out of range: ignored
        assert_eq!(nec_get_dynamic_send_size_bytes(&mut m, 4, 3, 3), 0);
        assert_eq!(nec_get_dynamic_send_size_bytes(&mut m, 4, -1, 3), 0);
        assert_eq!(nec_get_dynamic_send_size_bytes(&mut m, 0, 0, 3), 0);
        assert_eq!(
            nec_get_dynamic_send_size_bytes(&mut m, 4, 0, 4),
            0,
            "table too small for 4 ranks"
        );
        assert_eq!(nec_get_dynamic_send_size_bytes(null_mut(), 4, 0, 3), 0);
        nec_set_recv_size_bytes(null_mut(), 4, 4, 0, 1);
        let mut dangling = enc_host_mem_t {
            va: NonNull::<u64>::dangling().as_ptr().cast(),
            size: 0,
            ..m
        };
        assert_eq!(nec_get_dynamic_send_size_bytes(&mut dangling, 4, 0, 1), 0);
    }
    assert_eq!(t[9..], [0, 4, 0]);
}

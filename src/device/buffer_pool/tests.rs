use super::*;

const MB: usize = 1 << 20;

#[test]
fn recycled_buffers_come_back_zeroed() {
    let n = MIN_POOLED + 4096 * 7;
    let mut v = take(n);
    assert!(v.iter().all(|&b| b == 0));
    v[12345] = 9;
    give(v);
    assert!(take(n).iter().all(|&b| b == 0), "zeroed on reuse, or fresh");
    give(vec![1u8; 10]); // small buffers are not kept
}

#[test]
fn a_repeated_machine_reuses_every_buffer_and_never_holds_more_than_its_peak() {
    let mut p = Pool::new(None);
    // A machine of three 2 MiB regions and one 5 MiB region, twice.
    let sizes = [2 * MB, 2 * MB, 2 * MB, 5 * MB];
    let bufs: Vec<Vec<u8>> = sizes
        .iter()
        .map(|&n| p.take(n).unwrap_or_else(|| vec![0; n]))
        .collect();
    let ptrs: Vec<*const u8> = bufs.iter().map(|b| b.as_ptr()).collect();
    for b in bufs {
        assert!(p.give(b).is_none(), "kept: within the peak");
    }
    assert_eq!(p.bytes, 11 * MB);
    let again: Vec<Vec<u8>> = sizes.iter().map(|&n| p.take(n).expect("a hit")).collect();
    let mut got: Vec<*const u8> = again.iter().map(|b| b.as_ptr()).collect();
    let mut want = ptrs.clone();
    got.sort();
    want.sort();
    assert_eq!(got, want, "the same four buffers");
    again.into_iter().for_each(|b| assert!(p.give(b).is_none()));
    // Another size: held buffers of other sizes are freed so held + live <= peak (11 MiB).
    assert!(p.take(9 * MB).is_none());
    assert!(
        p.bytes + p.live <= p.peak,
        "{} + {} > {}",
        p.bytes,
        p.live,
        p.peak
    );
    assert_eq!(p.peak, 11 * MB);
}

#[test]
fn a_fixed_cap_bounds_what_is_held() {
    let mut p = Pool::new(Some(3 * MB));
    let a = p.take(2 * MB).unwrap_or_else(|| vec![0; 2 * MB]);
    let b = p.take(2 * MB).unwrap_or_else(|| vec![0; 2 * MB]);
    assert!(p.give(a).is_none());
    assert!(p.give(b).is_some(), "beyond the cap: freed");
    assert_eq!(p.bytes, 2 * MB);
    let mut off = Pool::new(Some(0));
    assert!(off.give(vec![0; 2 * MB]).is_some(), "0 disables the pool");
}

#[test]
fn only_the_range_the_caller_writes_is_left_unzeroed() {
    let n = 2 * MB;
    let w = zero_except(vec![7u8; n], 100..n - 50);
    assert!(w[..100].iter().all(|&b| b == 0), "zeroed before the range");
    assert!(
        w[n - 50..].iter().all(|&b| b == 0),
        "zeroed after the range"
    );
    assert!(
        w[100..n - 50].iter().all(|&b| b == 7),
        "the range is left as it is"
    );
    let x = zero_except(vec![7u8; n], n + 5..n + 9);
    assert!(
        x.iter().all(|&b| b == 0),
        "a range beyond the end is clamped"
    );
    #[allow(clippy::reversed_empty_ranges)] // the point of the check
    let y = zero_except(vec![7u8; n], 9..3);
    assert!(y.iter().all(|&b| b == 0), "an empty range leaves nothing");
}

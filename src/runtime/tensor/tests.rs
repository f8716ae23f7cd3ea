//! Tensors and storage: bounds, aliasing, lifetime through clones, the device-range registry
//! behind `nrt_memcpy_to_device`, and the output-completion counter.

use super::*;

fn dev(size: u64) -> Tensor {
    Tensor::allocate(Placement::Device, Some(0), size, "d").unwrap()
}

#[test]
fn allocate_is_zeroed_aligned_and_checked() {
    let t = dev(100);
    assert_eq!(t.size(), 100);
    assert_eq!(t.placement(), Placement::Device);
    assert_eq!(t.vnc(), Some(0));
    assert_eq!(t.name(), "d");
    assert_eq!(t.va().addr() % STORAGE_ALIGN, 0, "64-byte aligned");
    let mut out = [0xffu8; 100];
    t.read(0, &mut out).unwrap();
    assert!(
        out.iter().all(|&b| b == 0),
        "device memory reads as 0 after allocate"
    );

    let h = Tensor::allocate(Placement::Host, None, 8, "h").unwrap();
    assert_eq!((h.placement(), h.vnc()), (Placement::Host, None));
    let e = Tensor::allocate(Placement::Device, None, 8, "x").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid);
    let e = Tensor::allocate(Placement::Host, Some(1), 8, "x").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid);
}

#[test]
fn allocation_failure_is_an_error_not_an_abort() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    // 4 EiB cannot be mapped on any 64-bit host (47- or 56-bit address spaces).
    let e = Tensor::allocate(Placement::Device, Some(0), 1 << 62, "big").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Resource, "{e:?}");
    let e = Tensor::allocate(Placement::Host, None, 1 << 62, "big").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::HostAlloc, "{e:?}");
    // Above isize::MAX: rejected before the allocator is asked.
    let e = Tensor::allocate(Placement::Host, None, u64::MAX, "huge").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::HostAlloc);
    assert!(e.message().contains("isize::MAX"), "{e:?}");
}

#[test]
fn read_write_fill_are_bounds_checked_and_overflow_safe() {
    let t = dev(16);
    t.write(4, &[1, 2, 3, 4]).unwrap();
    t.fill(10, 0xab, 6).unwrap();
    let mut out = [0u8; 16];
    t.read(0, &mut out).unwrap();
    assert_eq!(
        out,
        [0, 0, 0, 0, 1, 2, 3, 4, 0, 0, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab]
    );
    // Exactly at the end: fine, including zero bytes at offset == size.
    t.write(16, &[]).unwrap();
    let mut tail = [0u8; 4];
    t.read(12, &mut tail).unwrap();
    assert_eq!(tail, [0xab; 4]);
    for (off, len) in [(13u64, 4u64), (17, 0), (u64::MAX, 1), (1, u64::MAX)] {
        assert_eq!(
            t.check_range(off, len, "read").unwrap_err().kind(),
            ErrorKind::Invalid,
            "({off}, {len})"
        );
    }
    assert_eq!(t.write(13, &[0; 4]).unwrap_err().kind(), ErrorKind::Invalid);
    assert_eq!(
        t.fill(u64::MAX, 0, 2).unwrap_err().kind(),
        ErrorKind::Invalid
    );
    let mut again = [0u8; 16];
    t.read(0, &mut again).unwrap();
    assert_eq!(again, out, "a rejected access changes nothing");
}

#[test]
fn slices_alias_and_keep_storage_alive() {
    let t = dev(32);
    let s = t.slice(8, 8, "s").unwrap();
    assert_eq!(s.va().addr(), t.va().addr() + 8);
    assert_eq!(s.storage_key(), (t.storage_key().0, 8));
    assert_eq!(s.vnc(), Some(0));
    s.write(0, &[7; 8]).unwrap();
    let mut b = [0u8; 1];
    t.read(8, &mut b).unwrap();
    assert_eq!(b, [7], "a write through the slice is seen by the parent");
    let ss = s.slice(4, 4, "ss").unwrap();
    assert_eq!(ss.storage_key(), (t.storage_key().0, 12));
    assert_eq!(s.slice(4, 5, "x").unwrap_err().kind(), ErrorKind::Invalid);
    assert_eq!(
        s.slice(u64::MAX, 2, "x").unwrap_err().kind(),
        ErrorKind::Invalid
    );
    // The parent goes away; the slice still owns the bytes.
    drop(t);
    ss.write(0, &[9; 4]).unwrap();
    let mut out = [0u8; 8];
    s.read(0, &mut out).unwrap();
    assert_eq!(out, [7, 7, 7, 7, 9, 9, 9, 9]);
}

#[test]
fn copy_checks_both_ranges_and_allows_overlap() {
    let a = dev(8);
    let b = Tensor::allocate(Placement::Host, None, 8, "b").unwrap();
    a.write(0, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
    b.copy_from(2, &a, 0, 6).unwrap();
    let mut out = [0u8; 8];
    b.read(0, &mut out).unwrap();
    assert_eq!(out, [0, 0, 1, 2, 3, 4, 5, 6]);
    assert_eq!(
        b.copy_from(3, &a, 0, 6).unwrap_err().kind(),
        ErrorKind::Invalid
    );
    assert_eq!(
        b.copy_from(0, &a, 3, 6).unwrap_err().kind(),
        ErrorKind::Invalid
    );
    // Overlapping views of one storage behave as memmove.
    let lo = a.slice(0, 6, "lo").unwrap();
    let hi = a.slice(2, 6, "hi").unwrap();
    hi.copy_from(0, &lo, 0, 6).unwrap();
    a.read(0, &mut out).unwrap();
    assert_eq!(out, [1, 2, 1, 2, 3, 4, 5, 6]);
}

#[test]
fn empty_and_attached_storage() {
    let mut t = Tensor::empty("e");
    assert!(!t.has_storage());
    assert!(t.va().is_null());
    assert_eq!((t.size(), t.storage_key()), (0, (0, 0)));
    t.read(0, &mut []).unwrap();
    assert_eq!(t.write(0, &[1]).unwrap_err().kind(), ErrorKind::Invalid);
    let zero_slice = t.slice(0, 0, "z").unwrap();
    assert!(zero_slice.va().is_null());

    let mut buf = vec![0u8; 24];
    // SAFETY: `buf` outlives every use of `t` below.
    unsafe { t.attach(buf.as_mut_ptr(), 24) }.unwrap();
    assert_eq!(
        t.va(),
        buf.as_mut_ptr(),
        "zero-copy: the VA is the caller's buffer"
    );
    assert_eq!((t.size(), t.placement()), (24, Placement::Host));
    t.write(20, &[5, 6, 7, 8]).unwrap();
    drop(t);
    assert_eq!(&buf[20..], &[5, 6, 7, 8]);

    let mut d = dev(8);
    let keep = d.clone();
    // SAFETY: `buf` outlives `d`.
    unsafe { d.attach(buf.as_mut_ptr(), 4) }.unwrap();
    assert_eq!(
        (d.placement(), d.vnc(), d.size()),
        (Placement::Host, None, 4)
    );
    assert_eq!(keep.size(), 8, "other views keep the old storage");
    // SAFETY: NULL is rejected before use.
    let e = unsafe { d.attach(std::ptr::null_mut(), 4) }.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid);
    // SAFETY: rejected before use: the range wraps the address space.
    let e = unsafe { d.attach(buf.as_mut_ptr(), u64::MAX) }.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid);
}

#[test]
fn zero_size_allocations_have_unique_non_null_addresses() {
    let a = dev(0);
    let b = dev(0);
    assert!(!a.va().is_null());
    assert_ne!(a.va(), b.va());
    assert_ne!(a.storage_key(), b.storage_key());
    // SAFETY: zero bytes; `src` is never read.
    unsafe { memcpy_to_device(a.va(), std::ptr::null(), 0) }.unwrap();
    // SAFETY: rejected before `src` is read.
    let e = unsafe { memcpy_to_device(a.va(), [1u8].as_ptr(), 1) }.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid);
}

#[test]
fn memcpy_to_device_accepts_only_live_device_ranges() {
    let t = dev(64);
    let s = t.slice(16, 16, "s").unwrap();
    let data = [0x5au8; 8];
    // SAFETY: `data` has 8 readable bytes; destinations are checked by the function.
    unsafe {
        memcpy_to_device(s.va().add(8), data.as_ptr(), 8).unwrap();
        memcpy_to_device(t.va().add(56), data.as_ptr(), 8).unwrap();
        assert_eq!(
            memcpy_to_device(t.va().add(8), data.as_ptr(), u64::MAX)
                .unwrap_err()
                .kind(),
            ErrorKind::Invalid,
            "a size that would wrap"
        );
        assert_eq!(
            memcpy_to_device(t.va().add(57), data.as_ptr(), 8)
                .unwrap_err()
                .kind(),
            ErrorKind::Invalid,
            "one byte past the end"
        );
    }
    let mut out = [0u8; 64];
    t.read(0, &mut out).unwrap();
    assert_eq!(&out[24..32], &data);
    assert_eq!(&out[56..], &data);
    assert!(out[..24].iter().chain(&out[32..56]).all(|&b| b == 0));

    let h = Tensor::allocate(Placement::Host, None, 64, "h").unwrap();
    let mut plain = [0u8; 8];
    // SAFETY: `data` has 8 readable bytes; both destinations are refused (a host tensor, plain
    // memory) before anything is written.
    unsafe {
        assert!(
            memcpy_to_device(h.va(), data.as_ptr(), 8).is_err(),
            "host tensor"
        );
        assert!(
            memcpy_to_device(plain.as_mut_ptr(), data.as_ptr(), 8).is_err(),
            "plain memory"
        );
    }
    // The storage lives while any view lives; after the last one it is gone.
    let va = t.va();
    let weak = Arc::downgrade(t.storage.as_ref().unwrap());
    drop(t);
    // SAFETY: the slice keeps the storage alive.
    unsafe { memcpy_to_device(va, data.as_ptr(), 8) }.unwrap();
    drop(s);
    // The weak pointer keeps the Arc's allocation, so `ptr_eq` cannot match a newcomer.
    assert!(weak.upgrade().is_none(), "freed with the last view");
    assert!(
        DEVICE_RANGES.lock().values().all(|w| !w.ptr_eq(&weak)),
        "deregistered when freed"
    );
    // SAFETY: rejected: the address is looked up, never written, once the storage is freed.
    let e = unsafe { memcpy_to_device(va, data.as_ptr(), 8) }.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid);
}

#[test]
fn output_completion_counter() {
    let t = dev(4);
    t.wait_output_completions(0, Some(Duration::ZERO)).unwrap();
    let e = t
        .wait_output_completions(1, Some(Duration::from_millis(1)))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Timeout);
    // A completion recorded on another thread (through a clone) releases an unbounded wait.
    let other = t.clone();
    let h = std::thread::spawn(move || other.complete_output());
    t.wait_output_completions(1, None).unwrap();
    h.join().unwrap();
    assert_eq!(t.output_completions(), 1);
    assert_eq!(
        t.slice(0, 4, "s").unwrap().output_completions(),
        0,
        "own counter"
    );
    t.reset_output_completions();
    assert_eq!(t.output_completions(), 0);
}

//! The shared argument helpers on their own: index and core ranges, the probe-then-fill writer,
//! the in/out slot of a free function, NULL and foreign tensor and tensor-set handles.

use super::*;
use crate::error::ErrorKind;
use std::ptr::{null, null_mut};

#[test]
fn index_arg_refuses_negative() {
    assert_eq!(index_arg(0, "queue").unwrap(), 0);
    assert_eq!(index_arg(c_int::MAX, "queue").unwrap(), c_int::MAX as u32);
    let e = index_arg(-1, "queue").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid);
    assert_eq!(e.fields().field.as_deref(), Some("queue"), "{e:?}");
    assert_eq!(e.fields().actual.as_deref(), Some("-1"), "{e:?}");
}

#[test]
fn visible_core_is_relative_to_the_visible_cores() {
    let visible = process::config().unwrap().visible_cores;
    assert_eq!(visible_core(0, "vnc").unwrap(), 0);
    assert_eq!(
        visible_core(i64::from(visible) - 1, "vnc").unwrap(),
        visible - 1
    );
    let e = visible_core(i64::from(visible), "vnc").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid);
    assert_eq!(e.fields().field.as_deref(), Some("vnc"), "{e:?}");
    assert_eq!(e.fields().expected, Some(format!("0..{visible}")), "{e:?}");
    assert_eq!(e.fields().actual, Some(visible.to_string()), "{e:?}");
    assert!(visible_core(-1, "vnc").is_err());
    assert!(
        visible_core(i64::from(u32::MAX) + 1, "vnc").is_err(),
        "no wrap to 0"
    );
}

#[test]
fn fill_prefix_copies_what_fits_and_reports_the_full_size() {
    let full: [u8; 8] = [1, 2, 3, 4, 5, 6, 7, 8];
    let mut dst = [0u8; 12];
    let mut size = 0usize;
    // SAFETY: `dst` has 12 writable bytes, at least each `cap`; `size` is writable.
    unsafe {
        fill_prefix(&full, dst.as_mut_ptr(), 3, &mut size).unwrap();
        assert_eq!(dst, [1, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(size, 8);
        fill_prefix(&full, dst.as_mut_ptr(), 12, null_mut()).unwrap();
    }
    assert_eq!(
        dst,
        [1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0],
        "never past the struct"
    );
}

#[test]
fn freed_slot_reads_the_handle_or_nothing() {
    let mut h = 0x10u64;
    let p: *mut u64 = &mut h;
    let mut slot = p;
    let mut empty: *mut u64 = null_mut();
    // SAFETY: each slot is NULL or a readable, writable local.
    unsafe {
        assert_eq!(freed_slot::<u64>(null_mut(), "s").unwrap(), None);
        assert_eq!(freed_slot(&mut empty, "s").unwrap(), None);
        assert_eq!(freed_slot(&mut slot, "s").unwrap(), Some(p));
    }
}

#[test]
fn tensor_handles_are_checked_before_use() {
    // SAFETY: NULL and a pointer the handle table has never handed out are rejected before any
    // dereference.
    unsafe {
        assert_eq!(
            tensor_of(null(), "t").unwrap_err().kind(),
            ErrorKind::Invalid
        );
        let foreign = std::ptr::NonNull::<nrt_tensor_t>::dangling().as_ptr();
        assert_eq!(
            tensor_of(foreign, "t").unwrap_err().kind(),
            ErrorKind::InvalidHandle
        );
        assert_eq!(
            tensor_set_members(null(), "set").unwrap_err().kind(),
            ErrorKind::Invalid
        );
    }
}

//! The enqueue-time checks of the tensor-op requests: a bad request is the call's own error and
//! reaches no execution unit (queueing itself is tested through the C entries,
//! `abi::nrt_async`).

use super::*;
use crate::error::ErrorKind;

fn at() -> Queue {
    Queue {
        lnc: 0,
        queue: 0,
        exec_ret: ExecRet::NONE,
    }
}

fn tensor(placement: Placement, vnc: Option<u32>) -> Tensor {
    Tensor::allocate(placement, vnc, 16, "t").unwrap()
}

#[test]
fn out_of_range_transfers_are_refused_naming_the_call() {
    let t = tensor(Placement::Device, Some(0));
    let mut buf = [0u8; 32];
    // SAFETY: refused before anything is queued; `buf` is never touched.
    let e = unsafe { write(t.clone(), 8, 9, buf.as_ptr(), at()) }.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid);
    assert_eq!(e.fields().op.as_deref(), Some("nrta_tensor_write"), "{e:?}");
    // SAFETY: the range check refuses `u64::MAX` before anything is queued; `buf` (32 writable
    // bytes) is never touched.
    let e = unsafe { read(t, u64::MAX, 2, buf.as_mut_ptr(), at()) }.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert_eq!(e.fields().op.as_deref(), Some("nrta_tensor_read"), "{e:?}");
}

#[test]
fn copy_needs_two_device_tensors_of_one_core_and_both_ranges() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    let d0 = tensor(Placement::Device, Some(0));
    let host = tensor(Placement::Host, None);
    let e = copy(host, 0, d0.clone(), 0, 4, at()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert!(e.message().contains("needs two device tensors"), "{e}");
    let d1 = tensor(Placement::Device, Some(1));
    let e = copy(d0.clone(), 0, d1, 0, 4, at()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert!(e.message().contains("both must be on the same core"), "{e}");
    let e = copy(d0.clone(), 12, d0.clone(), 0, 8, at()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert_eq!(e.fields().op.as_deref(), Some("nrta_tensor_copy source"));
    let e = copy(d0.clone(), 0, d0, 12, 8, at()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert_eq!(
        e.fields().op.as_deref(),
        Some("nrta_tensor_copy destination")
    );
}

use super::*;
use crate::abi::args::tensor_set_members;
use crate::abi::handle::testing;
use crate::abi::tensor::nrt_tensor_get_size;
use crate::abi::tensor::tests::{alloc, free, DEVICE, HOST};
use nrt_status::*;
use std::ffi::CString;
use std::ptr::{null, null_mut};

#[test]
fn tensor_sets() {
    testing::init(|| {
        let (a, b) = (alloc(DEVICE, 0, 4), alloc(HOST, -1, 4));
        let mut set = null_mut();
        let mut got = null_mut();
        let name = CString::new("output_0").unwrap();
        // SAFETY: live handles and C strings; NULLs and wrong kinds are checked by the callees.
        unsafe {
            assert_eq!(nrt_allocate_tensor_set(null_mut()), NRT_INVALID);
            assert_eq!(nrt_allocate_tensor_set(&mut set), NRT_SUCCESS);
            assert_eq!(
                nrt_get_tensor_from_tensor_set(set, name.as_ptr(), &mut got),
                NRT_INVALID
            );
            assert_eq!(
                nrt_add_tensor_to_tensor_set(set, name.as_ptr(), a),
                NRT_SUCCESS
            );
            assert_eq!(
                nrt_add_tensor_to_tensor_set(set, c"in".as_ptr(), b),
                NRT_SUCCESS
            );
            assert_eq!(
                nrt_get_tensor_from_tensor_set(set, name.as_ptr(), &mut got),
                NRT_SUCCESS
            );
            assert_eq!(got, a);
            assert_eq!(
                nrt_add_tensor_to_tensor_set(set, name.as_ptr(), b),
                NRT_SUCCESS,
                "replace"
            );
            assert_eq!(
                nrt_get_tensor_from_tensor_set(set, name.as_ptr(), &mut got),
                NRT_SUCCESS
            );
            assert_eq!(got, b);
            let members = tensor_set_members(set, "set").unwrap();
            let names: Vec<_> = members
                .iter()
                .map(|(n, t)| (n.as_str(), t.size()))
                .collect();
            assert_eq!(names, [("in", 4), ("output_0", 4)]);
            // NULLs and wrong kinds.
            assert_eq!(nrt_add_tensor_to_tensor_set(set, null(), a), NRT_INVALID);
            assert_eq!(
                nrt_add_tensor_to_tensor_set(set, name.as_ptr(), null_mut()),
                NRT_INVALID
            );
            assert_eq!(
                nrt_add_tensor_to_tensor_set(null_mut(), name.as_ptr(), a),
                NRT_INVALID
            );
            assert_eq!(
                nrt_add_tensor_to_tensor_set(a.cast(), name.as_ptr(), a),
                NRT_INVALID_HANDLE,
                "a tensor is not a set"
            );
            assert_eq!(
                nrt_add_tensor_to_tensor_set(set, name.as_ptr(), set.cast()),
                NRT_INVALID_HANDLE,
                "a set is not a tensor"
            );
            assert_eq!(
                nrt_get_tensor_from_tensor_set(set, name.as_ptr(), null_mut()),
                NRT_INVALID
            );
            assert_eq!(
                nrt_get_tensor_from_tensor_set(set, null(), &mut got),
                NRT_INVALID
            );
            assert_eq!(nrt_tensor_get_size(set.cast()), 0, "a set is not a tensor");
        }
        // Members freed first (the developer-guide order): the set reports them, destroy is fine.
        free(a);
        free(b);
        // SAFETY: `set` is live, `name` a C string, `got` a live local; the freed members are
        // only looked up in the handle table, never dereferenced.
        unsafe {
            assert_eq!(
                nrt_get_tensor_from_tensor_set(set, name.as_ptr(), &mut got),
                NRT_INVALID_HANDLE
            );
            assert_eq!(
                tensor_set_members(set, "set").unwrap_err().kind(),
                crate::error::ErrorKind::InvalidHandle
            );
            assert_eq!(
                nrt_add_tensor_to_tensor_set(set, name.as_ptr(), a),
                NRT_INVALID_HANDLE
            );
            let stale = set;
            nrt_destroy_tensor_set(&mut set);
            assert!(set.is_null());
            let mut again = stale;
            nrt_destroy_tensor_set(&mut again);
            assert_eq!(again, stale, "double destroy: logged, slot untouched");
            assert_eq!(
                nrt_add_tensor_to_tensor_set(stale, name.as_ptr(), a),
                NRT_INVALID_HANDLE
            );
            nrt_destroy_tensor_set(null_mut());
            nrt_destroy_tensor_set(&mut set);
        }
    });
}

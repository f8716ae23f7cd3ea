use super::*;

#[derive(Debug)]
struct Thing(#[allow(dead_code)] u32);
#[derive(Debug)]
struct Other(#[allow(dead_code)] u32);
#[derive(Debug)]
struct ThingHandle;
impl Opaque for Thing {
    type Handle = ThingHandle;
    const KIND: &'static str = "thing";
}
impl Opaque for Other {
    type Handle = ThingHandle;
    const KIND: &'static str = "other";
}

#[test]
fn handles_are_checked_and_freed_once() {
    let h = export(Thing(7));
    // SAFETY: the helpers accept any pointer and check it.
    unsafe {
        assert_eq!(get::<Thing>(h, "h").unwrap().0, 7);
        assert_eq!(
            get::<Other>(h, "h").unwrap_err().kind(),
            ErrorKind::InvalidHandle
        );
        assert_eq!(
            get::<Thing>(std::ptr::null(), "h").unwrap_err().kind(),
            ErrorKind::Invalid
        );
        assert!(release::<Thing>(h, "h").unwrap());
        assert_eq!(
            release::<Thing>(h, "h").unwrap_err().kind(),
            ErrorKind::InvalidHandle
        );
        assert!(!release::<Thing>(std::ptr::null_mut(), "h").unwrap());
    }
}

#[test]
fn lists_and_buffers_round_trip() {
    let (l, n) = export_list(&[], "l").unwrap();
    assert!(!l.is_null());
    assert_eq!(n, 0);
    // SAFETY: l came from export_list; buffers from export_buffer.
    unsafe {
        assert!(l.read().is_null());
        free_list(l, 0, "l").unwrap();
        assert!(free_list(l, 0, "l").is_err(), "double free detected");
        let (l, n) = export_list(&["a", "bc"], "l").unwrap();
        assert_eq!(n, 2);
        assert_eq!(std::ffi::CStr::from_ptr(l.add(1).read()).to_str(), Ok("bc"));
        assert!(free_list(l, 5, "l").is_err(), "count mismatch reported");
        let b = export_buffer("", "b").unwrap();
        assert_eq!(b.read(), 0);
        free_buffer(b, "b").unwrap();
        assert!(free_buffer(b, "b").is_err());
        free_buffer(std::ptr::null_mut(), "b").unwrap();
    }
}

#[test]
fn c_string_output_is_bounded() {
    let mut buf = [1 as c_char; 4];
    // SAFETY: buf has 4 bytes.
    unsafe {
        assert_eq!(
            write_c_string(buf.as_mut_ptr(), 4, "abcd", "buf")
                .unwrap_err()
                .kind(),
            ErrorKind::Resource
        );
        assert_eq!(buf[0], 1, "nothing written on failure");
        write_c_string(buf.as_mut_ptr(), 4, "abc", "buf").unwrap();
    }
    assert_eq!(buf[3], 0);
}

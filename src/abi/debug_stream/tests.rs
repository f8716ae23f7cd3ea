use super::*;
use crate::abi::handle::testing;
use crate::status::nrt_status::*;
use std::ptr::null_mut;

#[test]
fn guarded_before_init() {
    testing::uninit(|| {
        let mut fd = -1;
        // SAFETY: `fd` is writable; NULLs are checked.
        unsafe {
            assert_eq!(nrt_debug_client_connect(0, &mut fd), NRT_UNINITIALIZED);
            assert_eq!(fd, -1);
            assert_eq!(
                nrt_debug_client_read_one_event(0, null_mut(), null_mut()),
                NRT_UNINITIALIZED
            );
        }
        nrt_debug_client_connect_close(12345); // unknown: logged and ignored
    });
}

#[test]
fn connect_read_close() {
    testing::init(|| {
        let mut fd = -1;
        let mut payload: *mut c_void = null_mut();
        let mut header = [0u64; 8];
        let hdr = header.as_mut_ptr().cast::<ndebug_stream_event_header_t>();
        // SAFETY: locals are writable; NULLs are checked; fds are ours.
        unsafe {
            assert_eq!(nrt_debug_client_connect(0, null_mut()), NRT_INVALID);
            assert_eq!(nrt_debug_client_connect(-1, &mut fd), NRT_INVALID);
            assert_eq!(nrt_debug_client_connect(0, &mut fd), NRT_SUCCESS);
            assert!(fd >= 0);
            // Never readable.
            let mut p = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            assert_eq!(libc::poll(&mut p, 1, 0), 0);
            assert_eq!(
                nrt_debug_client_read_one_event(fd, hdr, &mut payload),
                NRT_QUEUE_EMPTY
            );
            assert!(payload.is_null() && header == [0; 8]);
            assert_eq!(
                nrt_debug_client_read_one_event(fd, null_mut(), &mut payload),
                NRT_INVALID
            );
            assert_eq!(
                nrt_debug_client_read_one_event(fd, hdr, null_mut()),
                NRT_INVALID
            );
            assert_eq!(
                nrt_debug_client_read_one_event(fd + 1000, hdr, &mut payload),
                NRT_INVALID
            );
            nrt_debug_client_connect_close(fd);
            assert_eq!(
                nrt_debug_client_read_one_event(fd, hdr, &mut payload),
                NRT_INVALID
            );
            nrt_debug_client_connect_close(fd); // second close: logged and ignored
        }
    });
}

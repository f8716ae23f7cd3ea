use super::*;
use crate::abi::handle::testing;
use crate::status::nrt_status::*;
use std::ptr::{null, null_mut};

#[test]
fn config_objects_allocate_set_free() {
    let (mut c, mut f) = (null_mut(), null_mut());
    // SAFETY: locals are writable; handles are checked; strings NUL-terminated.
    unsafe {
        assert_eq!(nrt_sys_trace_config_allocate(null_mut()), NRT_INVALID);
        assert_eq!(nrt_sys_trace_config_allocate(&mut c), NRT_SUCCESS);
        nrt_sys_trace_config_set_max_events_per_nc(c, 10);
        nrt_sys_trace_config_set_capture_enabled_for_nc(c, 2, true);
        assert_eq!(
            nrt_sys_trace_config_set_capture_enabled_for_event_type(c, c"dma".as_ptr(), false),
            NRT_SUCCESS
        );
        assert_eq!(
            nrt_sys_trace_config_set_capture_enabled_for_event_type(c, null(), false),
            NRT_INVALID
        );
        assert_eq!(
            nrt_sys_trace_config_set_capture_enabled_for_event_type(
                null_mut(),
                c"x".as_ptr(),
                false
            ),
            NRT_INVALID
        );
        {
            let s = handle::get::<SysTraceConfig>(c, "c")
                .unwrap()
                .settings
                .lock()
                .clone();
            assert_eq!(s.max_events_per_nc, 10);
            assert_eq!(s.capture_nc.get(&2), Some(&true));
            assert_eq!(s.event_types.get("dma"), Some(&false));
        }
        nrt_sys_trace_config_set_defaults(c);
        assert_eq!(
            *handle::get::<SysTraceConfig>(c, "c")
                .unwrap()
                .settings
                .lock(),
            CaptureSettings::default()
        );
        let (mut l, mut n) = (null_mut(), 5usize);
        assert_eq!(
            nrt_sys_trace_config_get_enabled_event_types(c, &mut l, &mut n),
            NRT_SUCCESS
        );
        assert_eq!(names(l, n), rt::EVENT_TYPES);
        nrt_sys_trace_free_event_types(l, n);
        assert_eq!(
            nrt_sys_trace_config_set_capture_enabled_for_event_type(
                c,
                c"cc_exec_running".as_ptr(),
                false
            ),
            NRT_SUCCESS
        );
        assert_eq!(
            nrt_sys_trace_config_get_enabled_event_types(c, &mut l, &mut n),
            NRT_SUCCESS
        );
        assert_eq!(names(l, n), ["nc_exec_running", "tensor_op_running"]);
        nrt_sys_trace_free_event_types(l, n);
        // NULL handles in void setters: logged and ignored.
        nrt_sys_trace_config_set_defaults(null_mut());
        nrt_sys_trace_config_set_max_events_per_nc(null_mut(), 1);
        nrt_sys_trace_config_free(c);
        nrt_sys_trace_config_free(c); // double free: logged and ignored
        nrt_sys_trace_config_free(null_mut());

        assert_eq!(nrt_sys_trace_fetch_options_allocate(&mut f), NRT_SUCCESS);
        nrt_sys_trace_fetch_options_set_max_events_per_nc(f, 4);
        nrt_sys_trace_fetch_options_set_nc_idx(f, 1);
        assert_eq!(
            *handle::get::<SysTraceFetchOptions>(f, "f")
                .unwrap()
                .settings
                .lock(),
            FetchSettings {
                max_events_per_nc: 4,
                nc_idx: Some(1)
            }
        );
        nrt_sys_trace_fetch_options_set_defaults(f);
        assert_eq!(
            *handle::get::<SysTraceFetchOptions>(f, "f")
                .unwrap()
                .settings
                .lock(),
            FetchSettings::default()
        );
        nrt_sys_trace_fetch_options_set_nc_idx(null_mut(), 1);
        nrt_sys_trace_fetch_options_free(f);
        nrt_sys_trace_fetch_options_free(null_mut());
    }
}

/// The `n` C strings of a list.
///
/// # Safety
/// `l` must hold `n` NUL-terminated strings.
unsafe fn names(l: *mut *const c_char, n: usize) -> Vec<String> {
    (0..n)
        // SAFETY: `i < n` and `l` holds `n` NUL-terminated strings (this function's contract).
        .map(|i| unsafe { std::ffi::CStr::from_ptr(l.add(i).read()) })
        .map(|c| c.to_str().unwrap().to_string())
        .collect()
}

#[test]
fn event_types_are_the_recorders() {
    let (mut l, mut n) = (null_mut(), 3usize);
    // SAFETY: locals are writable; the list holds `n` strings and a NULL.
    unsafe {
        assert_eq!(nrt_sys_trace_get_event_types(&mut l, &mut n), NRT_SUCCESS);
        assert_eq!(names(l, n), rt::EVENT_TYPES);
        assert_eq!(l.add(n).read(), null());
        nrt_sys_trace_free_event_types(l, n);
        nrt_sys_trace_free_event_types(null_mut(), 0);
        assert_eq!(
            nrt_sys_trace_get_event_types(&mut l, null_mut()),
            NRT_INVALID
        );
    }
}

#[test]
fn start_fetch_stop() {
    testing::uninit(|| {
        assert_eq!(nrt_sys_trace_stop(), NRT_UNINITIALIZED);
        let (mut b, mut w) = (null_mut(), 1usize);
        // SAFETY: locals are writable.
        unsafe {
            assert_eq!(nrt_sys_trace_start(null_mut()), NRT_UNINITIALIZED);
            assert_eq!(
                nrt_sys_trace_fetch_events(&mut b, &mut w, null()),
                NRT_UNINITIALIZED
            );
        }
        assert!(b.is_null());
    });
    testing::init(|| {
        let (mut c, mut f, mut b, mut w) = (null_mut(), null_mut(), null_mut(), 1usize);
        // SAFETY: locals are writable; handles are checked.
        unsafe {
            assert_eq!(nrt_sys_trace_config_allocate(&mut c), NRT_SUCCESS);
            nrt_sys_trace_config_set_capture_enabled_for_nc(c, 950, false);
            assert_eq!(nrt_sys_trace_start(c), NRT_SUCCESS);
            assert_eq!(nrt_sys_trace_start(null_mut()), NRT_SUCCESS);
            assert!(rt::active());
            // Core 950 holds no tensor or model of any test: only this test's events.
            rt::record(rt::NC_EXEC, 950, || "m".into(), || Ok(())).unwrap();
            rt::record(rt::NC_EXEC, 951, || "m".into(), || Ok(())).unwrap();
            assert_eq!(nrt_sys_trace_fetch_options_allocate(&mut f), NRT_SUCCESS);
            nrt_sys_trace_fetch_options_set_nc_idx(f, 950);
            assert_eq!(nrt_sys_trace_fetch_events(&mut b, &mut w, f), NRT_SUCCESS);
            assert!(!b.is_null());
            let text = std::ffi::CStr::from_ptr(b).to_str().unwrap().to_string();
            assert_eq!(w, text.len());
            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
            let ev = v["events"].as_array().unwrap();
            assert_eq!(ev.len(), 2, "a NULL config captures every core: {text}");
            assert_eq!(ev[0]["event_type"], "nc_exec_running");
            assert_eq!(ev[0]["nc_idx"], 950);
            nrt_sys_trace_buffer_free(b);
            assert_eq!(nrt_sys_trace_fetch_events(&mut b, &mut w, f), NRT_SUCCESS);
            assert_eq!(
                std::ffi::CStr::from_ptr(b).to_str().unwrap(),
                r#"{"events":[]}"#,
                "the fetch consumed them"
            );
            assert_eq!(w, 13);
            nrt_sys_trace_buffer_free(b);
            nrt_sys_trace_buffer_free(b); // double free: logged and ignored
            nrt_sys_trace_buffer_free(null_mut());
            assert_eq!(
                nrt_sys_trace_fetch_events(null_mut(), &mut w, null()),
                NRT_INVALID
            );
            assert_eq!(
                nrt_sys_trace_fetch_events(&mut b, null_mut(), null()),
                NRT_INVALID
            );
            // Core 950 disabled by the config: nothing recorded there.
            assert_eq!(nrt_sys_trace_start(c), NRT_SUCCESS);
            assert!(rt::begin(rt::NC_EXEC, 950, String::new).is_none());
            assert_eq!(nrt_sys_trace_stop(), NRT_SUCCESS);
            assert!(!rt::active());
            assert_eq!(nrt_sys_trace_stop(), NRT_SUCCESS, "stop without a capture");
            nrt_sys_trace_config_free(c);
            assert_eq!(
                nrt_sys_trace_start(c),
                NRT_INVALID_HANDLE,
                "freed handle rejected"
            );
            nrt_sys_trace_fetch_options_free(f);
        }
    });
}

use super::*;
use crate::status::nrt_status::*;
use std::ptr::{null, null_mut};

#[test]
fn config_allocate_set_get_free() {
    let mut o = null_mut();
    // SAFETY: locals are writable; strings NUL-terminated; handles are checked.
    unsafe {
        assert_eq!(nrt_inspect_config_allocate(null_mut()), NRT_INVALID);
        assert_eq!(nrt_inspect_config_allocate(&mut o), NRT_SUCCESS);
        assert_eq!(
            nrt_inspect_config_set_output_dir(o, c"/tmp/i".as_ptr()),
            NRT_SUCCESS
        );
        assert_eq!(
            nrt_inspect_config_set_output_dir(o, c"".as_ptr()),
            NRT_INVALID
        );
        assert_eq!(nrt_inspect_config_set_output_dir(o, null()), NRT_INVALID);
        assert_eq!(nrt_inspect_config_set_session_id(o, 7), NRT_SUCCESS);
        assert_eq!(
            nrt_inspect_config_set_activity(o, c"device".as_ptr(), true),
            NRT_SUCCESS
        );
        assert_eq!(
            nrt_inspect_config_set_activity(o, null(), true),
            NRT_INVALID
        );
        assert_eq!(
            nrt_inspect_config_set_capture_enabled_for_nc(o, 3, false),
            NRT_SUCCESS
        );
        assert_eq!(
            nrt_inspect_config_set_capture_enabled_for_event_type_string(o, c"dma".as_ptr(), true),
            NRT_SUCCESS
        );
        assert_eq!(nrt_inspect_config_set_enable_inspect(o, true), NRT_SUCCESS);
        assert_eq!(
            nrt_inspect_config_set_enable_inspect_on_fail(o, true),
            NRT_SUCCESS
        );
        assert_eq!(
            nrt_inspect_config_set_inspect_device_profile_mode(o, 2),
            NRT_SUCCESS
        );
        assert_eq!(
            nrt_inspect_config_set_sys_trace_max_events_per_nc(o, 1000),
            NRT_SUCCESS
        );
        {
            let s = handle::get::<InspectConfig>(o, "o")
                .unwrap()
                .settings
                .lock()
                .clone();
            assert_eq!(s.output_dir.as_deref(), Some("/tmp/i"));
            assert_eq!(
                (
                    s.session_id,
                    s.device_profile_mode,
                    s.sys_trace_max_events_per_nc
                ),
                (7, 2, 1000)
            );
            assert!(s.enable_inspect && s.enable_inspect_on_fail);
            assert_eq!(s.activities.get("device"), Some(&true));
            assert_eq!(s.capture_nc.get(&3), Some(&false));
            assert_eq!(s.capture_event_types.get("dma"), Some(&true));
        }
        assert_eq!(nrt_inspect_config_set_defaults(o), NRT_SUCCESS);
        assert_eq!(
            *handle::get::<InspectConfig>(o, "o")
                .unwrap()
                .settings
                .lock(),
            InspectSettings::default()
        );

        let (mut l, mut n) = (null_mut(), 9usize);
        assert_eq!(
            nrt_inspect_config_get_enabled_activity_types(o, &mut l, &mut n),
            NRT_SUCCESS
        );
        assert!(!l.is_null());
        assert_eq!(n, 0);
        nrt_inspect_config_free_activity_types(l, n);
        assert_eq!(
            nrt_inspect_config_get_all_activity_types(&mut l, &mut n),
            NRT_SUCCESS
        );
        assert_eq!((n, l.read()), (0, null()));
        nrt_inspect_config_free_activity_types(l, n);
        nrt_inspect_config_free_activity_types(null_mut(), 0);
        assert_eq!(
            nrt_inspect_config_get_all_activity_types(null_mut(), &mut n),
            NRT_INVALID
        );
        assert_eq!(
            nrt_inspect_config_get_enabled_activity_types(null_mut(), &mut l, &mut n),
            NRT_INVALID
        );

        assert_eq!(nrt_inspect_config_free(o), NRT_SUCCESS);
        assert_eq!(
            nrt_inspect_config_set_session_id(o, 1),
            NRT_INVALID_HANDLE,
            "freed handle rejected"
        );
        assert_eq!(nrt_inspect_config_free(null_mut()), NRT_SUCCESS);
        assert_eq!(nrt_inspect_config_set_defaults(null_mut()), NRT_INVALID);
    }
}

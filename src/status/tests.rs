use super::*;

#[test]
fn the_table_names_every_status_once_in_value_order() {
    let mut last = -1;
    for (s, name) in nrt_status::ALL {
        assert!(s.code() > last, "{s:?}: the table is in value order");
        last = s.code();
        // The name is the enumerator's own (the header's), ASCII.
        assert_eq!(name.to_str().unwrap(), format!("{s:?}"));
        assert_eq!(s.name(), format!("{s:?}"));
        assert_eq!(s.c_name(), name);
        assert_eq!(nrt_status::from_raw(s.code()), Some(s));
    }
    for unused in [-1, 8, 12, 16, 100, 1001, 1207] {
        assert_eq!(nrt_status::from_raw(unused), None, "{unused}");
        assert_eq!(nrt_status::c_name_of(unused), c"NRT_UNKNOWN_STATUS");
    }
    assert_eq!(nrt_status::c_name_of(101), c"NRT_EXEC_UNIT_UNRECOVERABLE");
}

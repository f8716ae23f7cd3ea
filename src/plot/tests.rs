use super::*;

#[test]
fn sizes_are_labelled_in_binary_units() {
    assert_eq!(size_label(8.0), "8");
    assert_eq!(size_label(65536.0), "64K");
    assert_eq!(size_label(1048576.0), "1M");
    assert_eq!(size_label(3000.0), "3000");
}

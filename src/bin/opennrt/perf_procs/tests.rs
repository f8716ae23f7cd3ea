use super::*;
use opennrt::lower::request::CollectiveOp;

#[test]
fn sizes_and_ratios_print_plainly() {
    assert_eq!(human(64 << 20), "64 MiB (67108864 B)");
    assert_eq!(human(4096), "4 KiB (4096 B)");
    assert_eq!(human(24), "24 B");
    assert_eq!(ratio(Some(2.0), Some(1.0)), "0.500");
    assert_eq!(ratio(None, Some(1.0)), "N/A");
    assert!(CollectiveOp::Permute.nrt_cc_op().is_none());
}

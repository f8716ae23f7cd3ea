use super::*;

#[test]
fn factor_sweeps_multiply_up_to_the_maximum() {
    assert_eq!(
        sizes(1024, 8192, Step::Factor(2)),
        Ok(vec![1024, 2048, 4096, 8192])
    );
    assert_eq!(sizes(4, 100, Step::Factor(4)), Ok(vec![4, 16, 64]));
}

#[test]
fn byte_steps_add_and_the_default_is_a_tenth() {
    assert_eq!(default_step(0, 100), Step::Bytes(10));
    assert_eq!(default_step(5, 8), Step::Bytes(1));
    assert_eq!(sizes(0, 30, Step::Bytes(10)), Ok(vec![0, 10, 20, 30]));
    assert_eq!(
        sizes(32 << 20, 32 << 20, default_step(32 << 20, 32 << 20)),
        Ok(vec![32 << 20])
    );
}

#[test]
fn bad_ranges_say_why() {
    // Checks the message a user reads, on purpose.
    assert!(sizes(10, 5, Step::Bytes(1)).unwrap_err().contains("larger"));
    assert!(sizes(1, 5, Step::Bytes(0)).is_err());
    assert!(sizes(1, 5, Step::Factor(1)).is_err());
    assert!(sizes(0, 5, Step::Factor(2)).is_err());
    assert_eq!(
        sizes(u64::MAX - 1, u64::MAX, Step::Factor(2)),
        Ok(vec![u64::MAX - 1])
    );
}

use super::*;

#[test]
fn table_rows_are_sane() {
    let all = [
        ExtField::CcBufStartAddr,
        ExtField::CcBufSize,
        ExtField::UniqueTensors,
        ExtField::DmaConfigs,
        ExtField::Src1Bitmap,
        ExtField::PermuteChain,
        ExtField::CrossSbOut,
    ];
    for f in all {
        assert_eq!(DA_EXT_FIELDS.iter().filter(|s| s.field == f).count(), 1);
        assert_eq!(da_field(f).field, f);
    }
    let mut seen = [false; 64];
    for s in &DA_EXT_FIELDS {
        assert!((1..=8).contains(&s.width));
        assert!(
            s.offset >= DA_TAIL_START && s.offset + s.width <= 64,
            "{s:?}"
        );
        for (o, slot) in seen.iter_mut().enumerate().skip(s.offset).take(s.width) {
            assert!(!*slot, "byte {o} covered twice");
            *slot = true;
        }
    }
    // docs/contract/isa.md §6 \[H\] rows.
    assert_eq!(da_field(ExtField::DmaConfigs).offset, 41);
    assert_eq!(da_field(ExtField::PermuteChain).offset, 43);
    assert!(da_covers(41) && !da_covers(45));
    assert_eq!(C8_RESERVED.offset + C8_RESERVED.width, 48);
}

#[test]
fn le_helpers() {
    let mut b = [0u8; 64];
    write_le(&mut b, 36, 4, 0xDEAD_BEEF);
    assert_eq!(&b[36..40], &[0xEF, 0xBE, 0xAD, 0xDE]);
    assert_eq!(read_le(&b, 36, 4), 0xDEAD_BEEF);
    assert_eq!(rd_u32(&b, 36), 0xDEAD_BEEF);
    assert_eq!(rd_i16(&b, 38), -8531);
    write_le(&mut b, 0, 8, u64::MAX);
    assert_eq!(rd_u64(&b, 0), u64::MAX);
}

use super::*;

#[test]
fn markers_lnc_opcodes() {
    assert_eq!(Addr8Mode::from_u8(0xA0), None);
    assert_eq!(Addr8Mode::AddrTblShapeReg.as_u8(), 0x60);
    assert_eq!(Addr4Marker::from_u8(0xA0), Some(Addr4Marker::IndirectReg));
    assert_eq!(ADDR8_MOD_VAR_ID & ADDR8_MODE_MASK, 0);
    assert_eq!(
        ADDR8_MODE_MASK | ADDR8_MOD_VAR_ID | ADDR8_MOD_TBL_OFFSET_REG | ADDR8_MOD_WIDE_TBL_OFFSET,
        ADDR8_MARKER_MASK
    );
    assert_eq!(LncSizeFmt::Lnc8.cores(), 8);
    assert_eq!(LncSizeFmt::from_u8(4), None);
    assert!(opcode::is_pseudo(0xC8) && opcode::is_pseudo(0xDF) && !opcode::is_pseudo(0xBF));
    assert!(!opcode::is_pseudo(0xE0));
}

use super::*;
use proptest::prelude::*;

#[test]
fn var_id_split_roundtrip() {
    let a = PseudoAddr8::var(0x1234, 0x00AB_CDEF_0123).unwrap();
    assert_eq!(a.raw >> 56, 0x10);
    assert!(a.is_var_id() && a.has_var_id_modifier());
    assert_eq!(a.mode(), Some(Addr8Mode::Imm));
    assert_eq!(a.var_id(), Some(0x1234));
    assert_eq!(a.var_offset(), Some(0x00AB_CDEF_0123));
    assert!(PseudoAddr8::var(1, 1 << 40).is_none());
    // Low two bits of the marker byte are outside the 0xFC mask (docs/contract/isa.md §7).
    let b = PseudoAddr8 {
        raw: a.raw | (3 << 56),
    };
    assert!(b.is_var_id());
    // A VAR_ID marker with another modifier is not the required form.
    let c = PseudoAddr8 {
        raw: a.raw | (0x08 << 56),
    };
    assert!(!c.is_var_id() && c.table_offset_in_reg());
    assert_eq!(PseudoAddr8::imm(0x40).unwrap().var_id(), None);
    assert_eq!(PseudoAddr8 { raw: 0xA0 << 56 }.mode(), None);
}

/// docs/contract/isa.md §7: `addr = start + (i0·step[0] + i1·step[1])·dtype_size`, i0
/// innermost.
#[test]
fn golden_tensor2d_walk() {
    let t = Tensor2d {
        start: PseudoAddr8::default(),
        step_elem: [2, 10],
        num_elem: [3, 2],
    };
    let v: Vec<i64> = t.element_offsets().collect();
    assert_eq!(v, [0, 2, 4, 10, 12, 14]);
    let b: Vec<i64> = t.byte_offsets(Dtype::Fp32).unwrap().collect();
    assert_eq!(b, [0, 8, 16, 40, 48, 56]);
    assert_eq!(t.num_elements(), 6);
    assert_eq!(t.extent(Axis::Free), 3);
    assert_eq!(t.extent(Axis::Partition), 2);
    assert!(!t.is_one_dimensional());
    assert!(Tensor2d {
        step_elem: [2, 6],
        ..t
    }
    .is_one_dimensional());
}

#[test]
fn addr4_bits() {
    let a = Addr4::sbuf(0x01FF_FFFF).unwrap();
    assert!(a.is_sbuf() && a.is_imm_sbuf());
    assert!(Addr4::sbuf(1 << 25).is_none());
    let hbm = Addr4 { raw: 1 << 25 };
    assert!(!hbm.is_sbuf() && !hbm.is_imm_sbuf());
    let reg = Addr4 { raw: 0xA000_0010 };
    assert_eq!(reg.marker_kind(), Some(Addr4Marker::IndirectReg));
    assert!(reg.is_sbuf() && !reg.is_imm_sbuf());
}

proptest! {
    #[test]
    fn tensor_roundtrip(b in prop::collection::vec(any::<u8>(), 64)) {
        let mut w = [0u8; 64];
        w.copy_from_slice(&b);
        let t2 = Tensor2d::read(&w, 16);
        let t3 = Tensor3d::read(&w, 48);
        let mut out = w;
        t2.write(&mut out, 16);
        t3.write(&mut out, 48);
        prop_assert_eq!(out, w);
        let t3s = Tensor3d { num: t3.num.map(|n| n % 8), ..t3 };
        prop_assert_eq!(t3s.element_offsets().count() as u64, t3s.element_count());
    }
}

use super::*;

/// The vendor's names, `fp8` meaning E4M3, and the printed name of each.
#[test]
fn names_parse_and_print_as_the_vendor_spells_them() {
    let parse = Dtype::from_nccom_name;
    assert_eq!(parse("uint8"), Some(Dtype::Uint8));
    assert_eq!(parse("FP32"), Some(Dtype::Fp32));
    assert_eq!(parse("fp8"), Some(Dtype::Fp8E4));
    assert_eq!(parse("fp8e4"), Some(Dtype::Fp8E4));
    assert_eq!(parse("fp8e5"), Some(Dtype::Fp8E5));
    assert_eq!(parse("float"), None);
    assert_eq!(name(Dtype::Fp8E4), "fp8");
    assert_eq!(name(Dtype::Bf16), "bf16");
    assert_eq!(name(Dtype::Int32), "int32");
    assert_eq!(
        words().join(", "),
        "uint8, int8, fp8, uint16, int16, fp16, bf16, uint32, int32, fp32, fp8e4, fp8e3, fp8e5"
    );
    for w in words() {
        assert!(parse(w).is_some_and(|d| TYPES.contains(&d)), "{w}");
    }
    for d in TYPES {
        assert_eq!(parse(name(d)), Some(d));
    }
    for r in opennrt::dtype::DTYPE_NAMES {
        let named = r.nccom.is_some() || r.nccom_extra.is_some();
        assert_eq!(named, TYPES.contains(&r.dtype), "{:?}", r.dtype);
    }
}

#[test]
fn sizes_masks_and_eps() {
    assert_eq!(size(Dtype::Uint8), 1);
    assert_eq!(size(Dtype::Bf16), 2);
    assert_eq!(size(Dtype::Fp32), 4);
    assert_eq!(mask(Dtype::Int16), 0xFFFF);
    assert_eq!(eps(Dtype::Fp32), f64::from(f32::EPSILON));
    assert_eq!(eps(Dtype::Int32), 0.0);
    assert!(is_float(Dtype::Fp8E5) && !is_float(Dtype::Uint16));
}

/// Quarter steps in [-2, 2] (the check's random values) survive every float type exactly.
#[test]
fn small_quarter_values_round_trip_exactly() {
    for d in TYPES.into_iter().filter(|&d| is_float(d)) {
        for k in -8..=8 {
            let v = f64::from(k) / 4.0;
            let b = encode_float(d, v).unwrap();
            assert_eq!(decode_float(d, b), Some(v), "{d:?} {v}");
        }
    }
    assert_eq!(encode_float(Dtype::Fp32, 1.0), Some(0x3F80_0000));
    assert_eq!(encode_float(Dtype::Bf16, 1.0), Some(0x3F80));
    assert_eq!(encode_float(Dtype::Uint8, 1.0), None);
}

#[test]
fn elements_read_write_and_show() {
    let mut b = vec![0u8; 8];
    write(Dtype::Int16, &mut b, 1, 0xFFFE);
    assert_eq!(read(Dtype::Int16, &b, 1), 0xFFFE);
    assert_eq!(b, [0, 0, 0xFE, 0xFF, 0, 0, 0, 0]);
    assert_eq!(show(Dtype::Int16, 0xFFFE), "-2");
    assert_eq!(show(Dtype::Uint16, 0xFFFE), "65534");
    assert_eq!(show(Dtype::Fp32, 0x3FC0_0000), "1.5");
}

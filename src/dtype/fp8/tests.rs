//! FP8 codec tests: exhaustive against the ml_dtypes reference tables of
//! `testdata/fp8/` (docs/contract/device.md §11.2 says the library is the oracle for the
//! default modes; NaN is compared by class, §11.3 rule 5), plus hand-derived cases for the modes
//! the library does not have (E3M4 extended, E4M3-fn saturating).

use super::*;
use std::path::PathBuf;

/// The reference directory, or `None` after saying why the caller skips (crate::testdata).
fn testdata_dir() -> Option<PathBuf> {
    crate::testdata::file(
        crate::testdata::FP8_TABLES,
        "the exhaustive FP8 table checks",
    )
}

fn hex(s: &str) -> u32 {
    u32::from_str_radix(s.trim_start_matches("0x").trim_start_matches("0X"), 16)
        .unwrap_or_else(|e| panic!("bad hex {s:?}: {e}"))
}

/// The (a, b) hex pairs of the first two columns of a reference table.
fn rows(dir: &std::path::Path, file: &str) -> Vec<(u32, u32)> {
    let path = dir.join(file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let mut cols = l.split('\t');
            let a = hex(cols.next().expect("column 1"));
            let b = hex(cols.next().expect("column 2"));
            (a, b)
        })
        .collect()
}

/// The formats with a reference table, by the table's file-name stem.
const TABLED: [(&str, Fp8Format); 4] = [
    ("e3m4", Fp8Format::E3M4),
    ("e4m3", Fp8Format::E4M3),
    ("e4m3fn", Fp8Format::E4M3FN),
    ("e5m2", Fp8Format::E5M2),
];

#[test]
fn decode_matches_reference_exhaustively() {
    let Some(dir) = testdata_dir() else { return };
    for (name, fmt) in TABLED {
        let rows = rows(&dir, &format!("decode_{name}.tsv"));
        assert_eq!(rows.len(), 256, "{name}: the table lists every code");
        let table = fmt.decode_table();
        for (code, want) in rows {
            let code = code as u8;
            let want = f32::from_bits(want);
            for got in [fmt.decode(code), table[code as usize]] {
                if want.is_nan() {
                    assert!(got.is_nan(), "{name} {code:#04x}: want NaN, got {got}");
                    assert!(fmt.is_nan_code(code), "{name} {code:#04x}");
                } else {
                    assert_eq!(
                        got.to_bits(),
                        want.to_bits(),
                        "{name} {code:#04x}: want {want}, got {got}"
                    );
                    assert!(!fmt.is_nan_code(code), "{name} {code:#04x}");
                }
            }
        }
    }
}

#[test]
fn encode_matches_reference_exhaustively() {
    let Some(dir) = testdata_dir() else { return };
    for (name, fmt) in TABLED {
        let rows = rows(&dir, &format!("encode_{name}.tsv"));
        assert!(rows.len() > 256, "{name}: the table has the rounding cases");
        for (bits, want) in rows {
            let x = f32::from_bits(bits);
            let got = fmt.encode(x);
            let want = want as u8;
            if fmt.is_nan_code(want) {
                assert!(
                    fmt.is_nan_code(got),
                    "{name} {x:e} ({bits:#010x}): want NaN, got {got:#04x}"
                );
                assert_eq!(got, fmt.nan_code(), "{name}: NaN outputs are canonical");
            } else {
                assert_eq!(got, want, "{name} {x:e} ({bits:#010x})");
            }
        }
    }
}

#[test]
fn every_code_round_trips_in_every_mode() {
    for fmt in [
        Fp8Format::E3M4,
        Fp8Format::E3M4_EXT,
        Fp8Format::E4M3,
        Fp8Format::E4M3FN,
        Fp8Format::E4M3FN_SAT,
        Fp8Format::E5M2,
    ] {
        for c in 0..=255u8 {
            let v = fmt.decode(c);
            if fmt.is_nan_code(c) {
                assert!(v.is_nan());
                assert_eq!(fmt.encode(v), fmt.nan_code());
            } else {
                assert_eq!(fmt.encode(v), c, "{fmt:?} {c:#04x} = {v}");
            }
        }
    }
}

#[test]
fn canonical_nan_and_limits() {
    // docs/contract/device.md §11.3 rule 5 and the §11.2 table.
    assert_eq!(Fp8Format::E5M2.encode(f32::NAN), 0x7E);
    assert_eq!(Fp8Format::E4M3.encode(-f32::NAN), 0x7F);
    assert_eq!(Fp8Format::E3M4.encode(f32::NAN), 0x7F);
    assert_eq!(Fp8Format::E4M3FN.encode(f32::NAN), 0x7F);
    assert_eq!(Fp8Format::E3M4.max_finite(), 15.5);
    assert_eq!(Fp8Format::E3M4_EXT.max_finite(), 30.0);
    assert_eq!(Fp8Format::E4M3.max_finite(), 240.0);
    assert_eq!(Fp8Format::E4M3FN.max_finite(), 448.0);
    assert_eq!(Fp8Format::E5M2.max_finite(), 57344.0);
    // Smallest subnormals: 2^-6, 2^-9, 2^-16.
    assert_eq!(Fp8Format::E3M4.decode(1), 2f32.powi(-6));
    assert_eq!(Fp8Format::E4M3.decode(1), 2f32.powi(-9));
    assert_eq!(Fp8Format::E5M2.decode(1), 2f32.powi(-16));
    assert_eq!(Fp8Format::E4M3.decode(0x78), f32::INFINITY);
    assert_eq!(Fp8Format::E4M3.decode(0xF8), f32::NEG_INFINITY);
    assert_eq!(Fp8Format::E3M4.decode(0x70), f32::INFINITY);
}

#[test]
fn overflow_thresholds_round_first() {
    // docs/contract/device.md §11.3 rule 4: thresholds half an ulp above max, ties to even.
    let e4 = Fp8Format::E4M3;
    assert_eq!(e4.encode(247.9), 0x77);
    assert_eq!(e4.encode(248.0), 0x78);
    assert_eq!(e4.encode(-248.0), 0xF8);
    assert_eq!(Fp8Format::E5M2.encode(61439.0), 0x7B);
    assert_eq!(Fp8Format::E5M2.encode(61440.0), 0x7C);
    assert_eq!(Fp8Format::E3M4.encode(15.74), 0x6F);
    assert_eq!(Fp8Format::E3M4.encode(15.75), 0x70);
    let fnf = Fp8Format::E4M3FN;
    assert_eq!(fnf.encode(464.0), 0x7E);
    assert_eq!(fnf.encode(464.1), 0x7F);
    assert_eq!(fnf.encode(f32::NEG_INFINITY), 0x7F);
}

#[test]
fn e4m3fn_saturate_knob() {
    let s = Fp8Format::E4M3FN_SAT;
    assert_eq!(s.encode(464.0), 0x7E);
    assert_eq!(s.encode(500.0), 0x7E);
    assert_eq!(s.encode(-1e30), 0xFE);
    assert_eq!(s.encode(f32::INFINITY), 0x7E);
    assert_eq!(s.encode(f32::NEG_INFINITY), 0xFE);
    assert_eq!(s.encode(f32::NAN), 0x7F);
    assert_eq!(
        s,
        Fp8Format::E4M3FN
            .with_overflow(Fp8Overflow::Saturate)
            .unwrap()
    );
}

#[test]
fn e3m4_extended_mode() {
    let x = Fp8Format::E3M4_EXT;
    assert_eq!(x.decode(0x70), 16.0);
    assert_eq!(x.decode(0x7E), 30.0);
    assert_eq!(x.decode(0xFE), -30.0);
    assert!(x.decode(0x7F).is_nan() && x.decode(0xFF).is_nan());
    assert!((0..=255u8).filter(|c| x.is_nan_code(*c)).count() == 2);
    // ulp at 16..32 is 1: 30.5 is a tie (to even 30 = mantissa 1110), above it overflows.
    assert_eq!(x.encode(30.5), 0x7E);
    assert_eq!(x.encode(30.25), 0x7E);
    assert_eq!(x.encode(30.6), 0x7F);
    assert_eq!(x.encode(29.5), 0x7E); // tie between 29 (odd) and 30 (even)
    assert_eq!(x.encode(f32::INFINITY), 0x7F);
    let sat = x.with_overflow(Fp8Overflow::Saturate).unwrap();
    assert_eq!(sat.encode(31.0), 0x7E);
    assert_eq!(sat.encode(f32::NEG_INFINITY), 0xFE);
}

#[test]
fn subnormals_ties_and_signed_zero() {
    let e4 = Fp8Format::E4M3;
    let tiny = 2f32.powi(-9);
    assert_eq!(e4.encode(tiny * 0.5), 0x00); // tie to even 0
    assert_eq!(e4.encode(tiny * 0.51), 0x01);
    assert_eq!(e4.encode(tiny * 1.5), 0x02); // tie to even 2
    assert_eq!(e4.encode(tiny * 2.5), 0x02);
    assert_eq!(e4.encode(-tiny * 0.25), 0x80); // −0 keeps its sign
    assert_eq!(e4.encode(-0.0), 0x80);
    assert_eq!(e4.encode(f32::from_bits(1)), 0x00); // an f32 subnormal
                                                    // The largest subnormal rounds up into the smallest normal (code 0x08 = 2^-6).
    assert_eq!(e4.encode(2f32.powi(-6) - tiny * 0.5), 0x08);
    assert_eq!(e4.decode(0x80).to_bits(), (-0.0f32).to_bits());
    // Ties in the normal range: 1.0625 is between 1.0 (0x38) and 1.125 (0x39).
    assert_eq!(e4.encode(1.0625), 0x38);
    assert_eq!(e4.encode(1.1875), 0x3A);
}

#[test]
fn bias_is_a_parameter_and_formats_are_validated() {
    let b8 = Fp8Format::E4M3.with_bias(8).unwrap();
    for c in 0..0x78u8 {
        assert_eq!(b8.decode(c), Fp8Format::E4M3.decode(c) * 0.5);
    }
    assert_eq!(b8.max_finite(), 120.0);
    assert!(std::ptr::eq(b8.decode_table(), b8.decode_table()));
    assert!(Fp8Format::new(4, 4, 7, Fp8Special::Ieee, Fp8Overflow::Inf).is_err());
    assert!(Fp8Format::new(4, 3, 7, Fp8Special::Ieee, Fp8Overflow::Nan).is_err());
    assert!(Fp8Format::new(4, 3, 7, Fp8Special::Extended, Fp8Overflow::Inf).is_err());
    assert!(Fp8Format::new(5, 2, -120, Fp8Special::Ieee, Fp8Overflow::Inf).is_err());
    assert!(Fp8Format::new(5, 2, 140, Fp8Special::Ieee, Fp8Overflow::Inf).is_err());
    assert_eq!(
        Fp8Format::new(5, 2, 15, Fp8Special::Ieee, Fp8Overflow::Inf).unwrap(),
        Fp8Format::E5M2
    );
}

//! BF16 / FP16 rounding edge cases (docs/contract/device.md §11.3), the bulk codec paths against
//! the one-element functions, and the dtype errors.

use super::*;
use crate::error::ErrorKind;

fn bf(bits: u32) -> u16 {
    f32_to_bf16(f32::from_bits(bits))
}

#[test]
fn bf16_round_to_nearest_even() {
    assert_eq!(f32_to_bf16(1.0), 0x3F80);
    assert_eq!(bf(0x3F80_8000), 0x3F80); // tie, to even (down)
    assert_eq!(bf(0x3F81_8000), 0x3F82); // tie, to even (up)
    assert_eq!(bf(0x3F80_8001), 0x3F81); // above the tie
    assert_eq!(bf(0x3F80_7FFF), 0x3F80); // below the tie
    assert_eq!(bf(0xBF81_8000), 0xBF82); // negative ties mirror
}

#[test]
fn bf16_overflow_inf_nan_zero_subnormal() {
    assert_eq!(f32_to_bf16(f32::MAX), 0x7F80); // rounds past max → Inf
    assert_eq!(bf(0x7F7F_7FFF), 0x7F7F);
    assert_eq!(bf(0x7F7F_8000), 0x7F80); // tie with odd max → up → Inf
    assert_eq!(bf(0xFF7F_8000), 0xFF80);
    assert_eq!(f32_to_bf16(f32::INFINITY), 0x7F80);
    assert_eq!(f32_to_bf16(f32::NEG_INFINITY), 0xFF80);
    // A NaN whose payload is all below bit 16 would round to Inf with the bare trick.
    assert_eq!(bf(0x7F80_0001), BF16_NAN);
    assert_eq!(bf(0xFFC0_0000), BF16_NAN);
    assert_eq!(bf(0xFFFF_FFFF), BF16_NAN);
    assert_eq!(f32_to_bf16(-0.0), 0x8000);
    assert_eq!(bf(0x0000_8000), 0x0000); // subnormal tie → even 0
    assert_eq!(bf(0x0001_8000), 0x0002);
    assert_eq!(bf(0x0000_8001), 0x0001);
    assert_eq!(bf(0x8000_8000), 0x8000);
    assert_eq!(bf16_to_f32(0x0001).to_bits(), 0x0001_0000);
}

#[test]
fn bf16_and_fp16_every_code_round_trips() {
    for h in 0..=u16::MAX {
        let v = bf16_to_f32(h);
        if v.is_nan() {
            assert_eq!(f32_to_bf16(v), BF16_NAN);
        } else {
            assert_eq!(f32_to_bf16(v), h, "bf16 {h:#06x}");
        }
        let v = fp16_to_f32(h);
        if v.is_nan() {
            assert_eq!(f32_to_fp16(v), FP16_NAN);
        } else {
            assert_eq!(f32_to_fp16(v), h, "fp16 {h:#06x}");
        }
    }
}

#[test]
fn fp16_round_to_nearest_even() {
    let ulp = 2f32.powi(-10);
    assert_eq!(f32_to_fp16(1.0 + ulp / 2.0), 0x3C00); // tie, to even
    assert_eq!(f32_to_fp16(1.0 + 1.5 * ulp), 0x3C02);
    assert_eq!(f32_to_fp16(1.0 + 0.51 * ulp), 0x3C01);
    assert_eq!(f32_to_fp16(65504.0), 0x7BFF);
    assert_eq!(f32_to_fp16(65519.99), 0x7BFF);
    assert_eq!(f32_to_fp16(65520.0), 0x7C00); // tie with odd max → Inf
    assert_eq!(f32_to_fp16(-1e10), 0xFC00);
    assert_eq!(f32_to_fp16(f32::INFINITY), 0x7C00);
    assert_eq!(f32_to_fp16(f32::from_bits(0x7F80_0001)), FP16_NAN);
    assert_eq!(f32_to_fp16(-f32::NAN), FP16_NAN);
    let sub = 2f32.powi(-24);
    assert_eq!(f32_to_fp16(sub), 0x0001);
    assert_eq!(f32_to_fp16(sub / 2.0), 0x0000); // tie → even 0
    assert_eq!(f32_to_fp16(sub * 1.5), 0x0002); // tie → even 2
    assert_eq!(f32_to_fp16(sub * 0.5001), 0x0001);
    assert_eq!(f32_to_fp16(-sub / 4.0), 0x8000);
    assert_eq!(f32_to_fp16(-0.0), 0x8000);
    assert_eq!(fp16_to_f32(0x0001), sub);
}

/// A deterministic spread of f32 values: every exponent, ties, specials.
fn probe_values() -> Vec<f32> {
    let mut v = vec![
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -f32::NAN,
    ];
    let mut x: u32 = 0x1234_5678;
    for _ in 0..3000 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        v.push(f32::from_bits(x));
        v.push(f32::from_bits(x & 0xC7FF_8000)); // small exponents, tie-shaped mantissas
    }
    v
}

#[test]
fn bulk_paths_match_one_element_functions() {
    let n = Numerics::default().with_e4m3_fn(true);
    let vals = probe_values(); // not a multiple of the scratch block
    for d in crate::dtype::CCE_IO_DTYPES {
        let c = FloatCodec::new(d, &n).unwrap();
        assert_eq!(c.dtype(), d);
        assert_eq!(c.size(), d.size_bytes().unwrap());
        let mut bytes = vec![0u8; vals.len() * c.size()];
        c.narrow(&vals, &mut bytes);
        let mut back = vec![0f32; vals.len()];
        c.widen(&bytes, &mut back);
        for (i, v) in vals.iter().enumerate() {
            let e = &bytes[i * c.size()..(i + 1) * c.size()];
            let want: Vec<u8> = match d {
                Dtype::Bf16 => f32_to_bf16(*v).to_le_bytes().to_vec(),
                Dtype::Fp16 => f32_to_fp16(*v).to_le_bytes().to_vec(),
                Dtype::Fp32 if v.is_nan() => FP32_NAN.to_le_bytes().to_vec(),
                Dtype::Fp32 => v.to_le_bytes().to_vec(),
                _ => vec![n.fp8(d).unwrap().encode(*v)],
            };
            assert_eq!(e, &want[..], "{d} narrow {v:e}");
            let mut one = vec![0u8; c.size()];
            c.narrow_one(*v, &mut one);
            assert_eq!(one, want);
            let w = c.widen_one(e);
            assert!(w.to_bits() == back[i].to_bits() || (w.is_nan() && back[i].is_nan()));
        }
    }
}

#[test]
fn non_float_io_types_are_rejected() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    let n = Numerics::default();
    for d in Dtype::ALL {
        let r = FloatCodec::new(*d, &n);
        assert_eq!(r.is_ok(), d.is_cce_reducible(), "{d}");
    }
    let e = FloatCodec::new(Dtype::Fp32r, &n).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert!(e.message().contains("accumulation type"), "{e}");
    assert_eq!(size_bytes(Dtype::Uint64).unwrap(), 8);
    assert!(size_bytes(Dtype::Invalid).is_err());
}

#[test]
fn numerics_switches() {
    let n = Numerics::default();
    assert_eq!(n, Numerics::IEEE);
    assert_eq!(n.fp8(Dtype::Fp8E4), Some(Fp8Format::E4M3));
    assert_eq!(n.fp8(Dtype::Bf16), None);
    let f = n.with_e4m3_fn(false).with_e3m4_extended(true);
    assert_eq!(f.e4m3, Fp8Format::E4M3FN);
    assert_eq!(f.e3m4.overflow(), Fp8Overflow::Saturate);
    assert_eq!(f.e3m4.special(), Fp8Special::Extended);
    assert_eq!(n.with_e4m3_fn(true).e4m3, Fp8Format::E4M3FN_SAT);
}

/// The grouped BF16 store equals the scalar rule element by element, at every length (groups of
/// 8 and the remainder), for ties, NaN, infinities and subnormals.
#[test]
fn bf16_slice_narrow_matches_the_scalar_rule() {
    let specials = [
        0.0f32,
        -0.0,
        1.0,
        f32::from_bits(0x3F80_8000), // tie, even below: stays 0x3F80
        f32::from_bits(0x3F81_8000), // tie, odd below: rounds up to 0x3F82
        f32::from_bits(0x3F80_8001),
        f32::NAN,
        -f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::MAX,
        f32::from_bits(1),
        -3.140_625,
    ];
    let codec = FloatCodec::new(Dtype::Bf16, &Numerics::default()).unwrap();
    for len in 0..=25 {
        let src: Vec<f32> = (0..len).map(|i| specials[i % specials.len()]).collect();
        let mut got = vec![0u8; 2 * len];
        codec.narrow(&src, &mut got);
        let want: Vec<u8> = src
            .iter()
            .flat_map(|v| f32_to_bf16(*v).to_le_bytes())
            .collect();
        assert_eq!(got, want, "length {len}");
    }
    assert_eq!(f32_to_bf16(f32::from_bits(0x3F81_8000)), 0x3F82);
    assert_eq!(f32_to_bf16(f32::NAN), BF16_NAN);
}

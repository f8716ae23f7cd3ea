//! Element types the collectives move, and the conversions the CCE needs
//! (docs/contract/device.md §11, docs/contract/isa.md §10).
//!
//! The type tag is the wire enum [`Dtype`] of [`crate::isa::enums`] (one enum for the whole
//! crate). This module adds what the rest of the crate needs on top of it:
//!
//! * byte sizes ([`size_bytes`]);
//! * every spelling of a type but the wire name: the tools', the NEFF's ([`names`]);
//! * exact widening to binary32 and round-to-nearest-even narrowing from it for the float I/O
//!   types: BF16 (the docs/contract/device.md §11.3 rule 7 bit trick, NaN handled apart), FP16 (the
//!   `half` crate), FP32, and the three FP8 formats of [`fp8`] (E3M4 = FP8_EXP3, E4M3 = FP8_EXP4,
//!   E5M2 = FP8_EXP5);
//! * the FP8 mode switches of docs/contract/device.md §11.2 ([`Numerics`]): IEEE-like defaults
//!   (docs/design.md §2.9), the E4M3 "fn" variant (with or without the OCP-saturate knob) and the
//!   E3M4 extended mode;
//! * [`FloatCodec`]: a conversion resolved once per (dtype, numerics), with bulk slice methods
//!   whose loops the compiler vectorizes, so that hot paths never dispatch per element.
//!
//! NaN outputs are canonical quiet NaNs (docs/contract/device.md §11.3 rule 5): BF16 0x7FC0, FP16
//! 0x7E00, FP8 per [`Fp8Format::nan_code`], and — our choice, the spec lists no FP32 pattern — FP32
//! 0x7FC00000, so that every reduced NaN has one bit pattern whatever the order of the sources.
//! Signed zeros are kept by every conversion.

// Pure computation on bytes and numbers: no unsafe code, and none may creep in.
#![forbid(unsafe_code)]

pub mod fp8;
pub mod names;

use crate::error::{Error, Result};
use half::f16;
use half::slice::{HalfBitsSliceExt, HalfFloatSliceExt};

pub use crate::isa::enums::Dtype;
pub use fp8::{Fp8Format, Fp8Overflow, Fp8Special};
pub use names::{DtypeNames, DTYPE_NAMES};

/// Canonical BF16 NaN (docs/contract/device.md §11.3 rule 5).
pub const BF16_NAN: u16 = 0x7FC0;
/// Canonical FP16 NaN (docs/contract/device.md §11.3 rule 5).
pub const FP16_NAN: u16 = 0x7E00;
/// Canonical FP32 NaN of our reduce outputs (the IEEE default quiet NaN).
pub const FP32_NAN: u32 = 0x7FC0_0000;

/// The I/O dtypes the CCE reduces (docs/contract/device.md §11.1), narrowest-exponent FP8 last.
pub const CCE_IO_DTYPES: [Dtype; 6] = [
    Dtype::Bf16,
    Dtype::Fp16,
    Dtype::Fp32,
    Dtype::Fp8E3,
    Dtype::Fp8E4,
    Dtype::Fp8E5,
];

/// Bytes per element in memory (docs/contract/isa.md §10); an error for INVALID.
pub fn size_bytes(d: Dtype) -> Result<usize> {
    d.size_bytes()
        .ok_or_else(|| Error::invalid(format!("dtype {d} has no element size")))
}

/// BF16 → f32, exact (the upper half of a binary32).
#[inline]
pub fn bf16_to_f32(h: u16) -> f32 {
    f32::from_bits(u32::from(h) << 16)
}

/// f32 → BF16 with round-to-nearest-even: add `0x7FFF + ((bits >> 16) & 1)`, keep the top 16
/// bits (docs/contract/device.md §11.3 rule 7). Overflow carries into the Inf pattern by itself,
/// subnormals round like any other value; NaN gives [`BF16_NAN`].
#[inline]
pub fn f32_to_bf16(x: f32) -> u16 {
    let b = x.to_bits();
    let r = (b.wrapping_add(0x7FFF + ((b >> 16) & 1)) >> 16) as u16;
    if x.is_nan() {
        BF16_NAN
    } else {
        r
    }
}

/// FP16 → f32, exact.
#[inline]
pub fn fp16_to_f32(h: u16) -> f32 {
    f16::from_bits(h).to_f32()
}

/// f32 → FP16 with round-to-nearest-even (the `half` crate), overflow to ±Inf, subnormals;
/// NaN gives [`FP16_NAN`].
#[inline]
pub fn f32_to_fp16(x: f32) -> u16 {
    if x.is_nan() {
        FP16_NAN
    } else {
        f16::from_f32(x).to_bits()
    }
}

/// The FP8 modes of docs/contract/device.md §11.2: one format per FP8 dtype. `Default` is the
/// IEEE-like set the hardware generations we simulate use (docs/design.md §2.9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Numerics {
    /// FP8_EXP3.
    pub e3m4: Fp8Format,
    /// FP8_EXP4.
    pub e4m3: Fp8Format,
    /// FP8_EXP5.
    pub e5m2: Fp8Format,
}

impl Default for Numerics {
    fn default() -> Self {
        Numerics::IEEE
    }
}

impl Numerics {
    /// E3M4 IEEE-style (max 15.5), E4M3 IEEE-style (max 240), E5M2 IEEE.
    pub const IEEE: Numerics = Numerics {
        e3m4: Fp8Format::E3M4,
        e4m3: Fp8Format::E4M3,
        e5m2: Fp8Format::E5M2,
    };

    /// Switch FP8_EXP4 to the "fn" variant (max 448, one NaN); overflow gives NaN, or ±448 when
    /// `ocp_saturate` is set.
    pub fn with_e4m3_fn(mut self, ocp_saturate: bool) -> Self {
        self.e4m3 = if ocp_saturate {
            Fp8Format::E4M3FN_SAT
        } else {
            Fp8Format::E4M3FN
        };
        self
    }

    /// Switch FP8_EXP3 to the extended mode (max 30, only S.111.1111 is NaN); overflow gives
    /// NaN, or ±30 when `saturate` is set.
    pub fn with_e3m4_extended(mut self, saturate: bool) -> Self {
        self.e3m4 = if saturate {
            Fp8Format::E3M4_EXT
                .with_overflow(Fp8Overflow::Saturate)
                .expect("extended + saturate is valid")
        } else {
            Fp8Format::E3M4_EXT
        };
        self
    }

    /// The format of an FP8 dtype, `None` for any other dtype.
    pub fn fp8(&self, d: Dtype) -> Option<Fp8Format> {
        match d {
            Dtype::Fp8E3 => Some(self.e3m4),
            Dtype::Fp8E4 => Some(self.e4m3),
            Dtype::Fp8E5 => Some(self.e5m2),
            _ => None,
        }
    }
}

/// Elements per stack scratch block in the bulk FP16 paths.
const SCRATCH: usize = 512;

/// A float I/O type's conversion, resolved once (dtype and FP8 mode), with bulk slice methods.
#[derive(Debug, Clone, Copy)]
pub enum FloatCodec {
    /// BFLOAT16.
    Bf16,
    /// FP16.
    Fp16,
    /// FP32.
    Fp32,
    /// One of the FP8 dtypes, with its format and decode table.
    Fp8(Dtype, Fp8Format, &'static [f32; 256]),
}

impl FloatCodec {
    /// The codec of a float I/O dtype: BF16, FP16, FP32, FP8 E3/E4/E5. Integer dtypes, FP32R (an
    /// accumulation type, never an I/O type, docs/contract/device.md §11.1) and INVALID are errors.
    pub fn new(d: Dtype, numerics: &Numerics) -> Result<Self> {
        Ok(match d {
            Dtype::Bf16 => FloatCodec::Bf16,
            Dtype::Fp16 => FloatCodec::Fp16,
            Dtype::Fp32 => FloatCodec::Fp32,
            Dtype::Fp8E3 | Dtype::Fp8E4 | Dtype::Fp8E5 => {
                let f = numerics.fp8(d).expect("an FP8 dtype");
                FloatCodec::Fp8(d, f, f.decode_table())
            }
            Dtype::Fp32r => {
                return Err(Error::invalid(format!(
                    "dtype {d} is an accumulation type, not an I/O type (docs/contract/device.md §11.1)"
                )))
            }
            _ => {
                return Err(Error::invalid(format!(
                    "dtype {d} is not a floating-point I/O type"
                )))
            }
        })
    }

    /// The dtype.
    pub fn dtype(&self) -> Dtype {
        match self {
            FloatCodec::Bf16 => Dtype::Bf16,
            FloatCodec::Fp16 => Dtype::Fp16,
            FloatCodec::Fp32 => Dtype::Fp32,
            FloatCodec::Fp8(d, ..) => *d,
        }
    }

    /// Bytes per element.
    pub fn size(&self) -> usize {
        match self {
            FloatCodec::Bf16 | FloatCodec::Fp16 => 2,
            FloatCodec::Fp32 => 4,
            FloatCodec::Fp8(..) => 1,
        }
    }

    /// Widen one element (`bytes` holds exactly [`FloatCodec::size`] little-endian bytes).
    pub fn widen_one(&self, bytes: &[u8]) -> f32 {
        let mut v = [0f32];
        self.widen(bytes, &mut v);
        v[0]
    }

    /// Narrow one element into `out` ([`FloatCodec::size`] bytes).
    pub fn narrow_one(&self, v: f32, out: &mut [u8]) {
        self.narrow(&[v], out);
    }

    /// Widen `dst.len()` elements from `src` (exactly `dst.len() · size` bytes), exactly.
    ///
    /// # Panics
    /// If the lengths disagree (a caller bug: the CCE checks lengths before it converts).
    pub fn widen(&self, src: &[u8], dst: &mut [f32]) {
        assert_eq!(src.len(), dst.len() * self.size(), "widen: length mismatch");
        match self {
            FloatCodec::Bf16 => {
                for (d, c) in dst.iter_mut().zip(src.chunks_exact(2)) {
                    *d = bf16_to_f32(u16::from_le_bytes([c[0], c[1]]));
                }
            }
            FloatCodec::Fp32 => {
                for (d, c) in dst.iter_mut().zip(src.chunks_exact(4)) {
                    *d = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                }
            }
            FloatCodec::Fp16 => {
                let mut bits = [0u16; SCRATCH];
                for (d, s) in dst.chunks_mut(SCRATCH).zip(src.chunks(SCRATCH * 2)) {
                    let bits = &mut bits[..d.len()];
                    for (b, c) in bits.iter_mut().zip(s.chunks_exact(2)) {
                        *b = u16::from_le_bytes([c[0], c[1]]);
                    }
                    bits.reinterpret_cast::<f16>().convert_to_f32_slice(d);
                }
            }
            FloatCodec::Fp8(_, _, table) => {
                for (d, c) in dst.iter_mut().zip(src) {
                    *d = table[usize::from(*c)];
                }
            }
        }
    }

    /// Narrow `src` into `dst` (exactly `src.len() · size` bytes) with round-to-nearest-even,
    /// canonical NaNs and the overflow rule of the format.
    ///
    /// # Panics
    /// If the lengths disagree.
    pub fn narrow(&self, src: &[f32], dst: &mut [u8]) {
        assert_eq!(
            dst.len(),
            src.len() * self.size(),
            "narrow: length mismatch"
        );
        match self {
            FloatCodec::Bf16 => {
                // Branch-free RNE (the same rule as `f32_to_bf16`) in groups of 8, so the
                // compiler vectorizes it: this loop is the store of every BF16 reduce.
                let mut dc = dst.chunks_exact_mut(16);
                let mut sc = src.chunks_exact(8);
                for (d, v) in (&mut dc).zip(&mut sc) {
                    let mut h = [0u16; 8];
                    for (o, x) in h.iter_mut().zip(v) {
                        let b = x.to_bits();
                        let r = (b.wrapping_add(0x7FFF + ((b >> 16) & 1)) >> 16) as u16;
                        *o = if x.is_nan() { BF16_NAN } else { r };
                    }
                    for (c, o) in d.chunks_exact_mut(2).zip(h) {
                        c.copy_from_slice(&o.to_le_bytes());
                    }
                }
                for (c, v) in dc.into_remainder().chunks_exact_mut(2).zip(sc.remainder()) {
                    c.copy_from_slice(&f32_to_bf16(*v).to_le_bytes());
                }
            }
            FloatCodec::Fp32 => {
                for (c, v) in dst.chunks_exact_mut(4).zip(src) {
                    let b = if v.is_nan() { FP32_NAN } else { v.to_bits() };
                    c.copy_from_slice(&b.to_le_bytes());
                }
            }
            FloatCodec::Fp16 => {
                let mut h = [f16::ZERO; SCRATCH];
                for (s, d) in src.chunks(SCRATCH).zip(dst.chunks_mut(SCRATCH * 2)) {
                    let h = &mut h[..s.len()];
                    h.convert_from_f32_slice(s);
                    for (c, x) in d.chunks_exact_mut(2).zip(h.reinterpret_cast()) {
                        let b = if x & 0x7FFF > 0x7C00 { FP16_NAN } else { *x };
                        c.copy_from_slice(&b.to_le_bytes());
                    }
                }
            }
            FloatCodec::Fp8(_, f, _) => {
                for (c, v) in dst.iter_mut().zip(src) {
                    *c = f.encode(*v);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;

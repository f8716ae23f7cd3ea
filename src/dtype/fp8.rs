//! The FP8 codecs (docs/contract/device.md §11.2–§11.3): one generic sign | exponent | mantissa
//! implementation, parameterised by exponent bits, mantissa bits, bias and the special-value
//! variant, with the three collective formats as constants.
//!
//! * [`Fp8Special::Ieee`]: the all-ones exponent is reserved — mantissa 0 is ±Inf, anything
//!   else NaN (E3M4 "cFP8" default, E4M3 default on trn1–trn3, E5M2).
//! * [`Fp8Special::Extended`]: the all-ones exponent holds finite values; only S.1…1 is NaN and
//!   there is no Inf (E4M3 "fn", max 448; E3M4 extended, max 30).
//!
//! Narrowing rounds to nearest, ties to even, "as if the exponent were unbounded", and only then
//! checks for overflow (§11.3 rule 4), so the overflow threshold is half an ulp above the largest
//! finite value (248 for E4M3, 464 for E4M3-fn, 61440 for E5M2, 15.75 for E3M4) and a tie there
//! goes to even. What an overflow produces is [`Fp8Overflow`]. Subnormals are supported in every
//! format (exponent field 0 means 0.m × 2^(1−bias)). NaN outputs are the canonical code of
//! [`Fp8Format::nan_code`] (§11.3 rule 5); signed zeros are kept.

use crate::error::{Error, Result};
use once_cell::sync::Lazy;
use parking_lot::RwLock;

/// Which codes are special (docs/contract/device.md §11.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fp8Special {
    /// The all-ones exponent is reserved: mantissa 0 = ±Inf, otherwise NaN.
    Ieee,
    /// Only S.1…1 (all exponent and mantissa bits set) is NaN; no Inf.
    Extended,
}

/// What a finite value beyond the largest finite one (after rounding) narrows to
/// (docs/contract/device.md §11.3 rule 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fp8Overflow {
    /// ±Inf (only for [`Fp8Special::Ieee`] formats).
    Inf,
    /// The canonical NaN (only for [`Fp8Special::Extended`]: the ml_dtypes behaviour of e4m3fn).
    Nan,
    /// ±max finite (the OCP "saturate" knob). An infinite input to a format without Inf also
    /// saturates; a format with Inf keeps an infinite input infinite (it is exact).
    Saturate,
}

/// One FP8 format. Build it with [`Fp8Format::new`] or take one of the constants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fp8Format {
    exp_bits: u8,
    man_bits: u8,
    bias: i32,
    special: Fp8Special,
    overflow: Fp8Overflow,
    nan_code: u8,
}

impl Fp8Format {
    /// FP8_EXP3 default: E3M4, bias 3, IEEE-style (exp 7 reserved), max 15.5, overflow → Inf.
    pub const E3M4: Fp8Format = Fp8Format::raw(3, 4, 3, Fp8Special::Ieee, Fp8Overflow::Inf);
    /// FP8_EXP3 extended mode: exp 7 holds values, max 30, only S.111.1111 is NaN, overflow → NaN.
    pub const E3M4_EXT: Fp8Format = Fp8Format::raw(3, 4, 3, Fp8Special::Extended, Fp8Overflow::Nan);
    /// FP8_EXP4 default (trn1–trn3, docs/design.md §2.9): E4M3, bias 7, IEEE-style, max 240, Inf.
    pub const E4M3: Fp8Format = Fp8Format::raw(4, 3, 7, Fp8Special::Ieee, Fp8Overflow::Inf);
    /// FP8_EXP4 "fn" variant: max 448, single NaN S.1111.111, overflow → NaN (ml_dtypes).
    pub const E4M3FN: Fp8Format = Fp8Format::raw(4, 3, 7, Fp8Special::Extended, Fp8Overflow::Nan);
    /// FP8_EXP4 "fn" with the OCP-saturate knob: overflow → ±448.
    pub const E4M3FN_SAT: Fp8Format =
        Fp8Format::raw(4, 3, 7, Fp8Special::Extended, Fp8Overflow::Saturate);
    /// FP8_EXP5: E5M2, bias 15, IEEE (the top byte of binary16), max 57344.
    pub const E5M2: Fp8Format = Fp8Format::raw(5, 2, 15, Fp8Special::Ieee, Fp8Overflow::Inf);

    /// The canonical NaN (docs/contract/device.md §11.3 rule 5): 0x7F — every exponent and mantissa
    /// bit set, a NaN in both the IEEE-style and the extended variant — except for E5M2, which
    /// follows the binary16 canonical NaN 0x7E00 it is the top byte of (0x7E).
    const fn raw(e: u8, m: u8, bias: i32, special: Fp8Special, overflow: Fp8Overflow) -> Self {
        let nan_code = if e == 5 && m == 2 { 0x7E } else { 0x7F };
        Fp8Format {
            exp_bits: e,
            man_bits: m,
            bias,
            special,
            overflow,
            nan_code,
        }
    }

    /// A format with `exp_bits + man_bits == 7`. The bias is a parameter (NC-v3 has an adjustable
    /// cFP8 bias, docs/contract/device.md §11.2); it must keep every value a binary32 normal number
    /// so that widening is exact. `Inf` overflow needs the IEEE variant, `Nan` the extended one.
    pub fn new(
        exp_bits: u8,
        man_bits: u8,
        bias: i32,
        special: Fp8Special,
        overflow: Fp8Overflow,
    ) -> Result<Self> {
        if exp_bits < 2 || man_bits < 1 || exp_bits + man_bits != 7 {
            return Err(Error::invalid(format!(
                "FP8 format E{exp_bits}M{man_bits}: need exponent ≥ 2, mantissa ≥ 1, 7 bits in all"
            )));
        }
        let f = Fp8Format::raw(exp_bits, man_bits, bias, special, overflow);
        // Smallest subnormal ≥ 2^-125 (so every f32 subnormal rounds to zero) and largest
        // exponent ≤ 127 (so every value is an f32 normal).
        if f.emin() - i32::from(man_bits) < -125 || f.max_exp_field() - bias > 127 {
            return Err(Error::invalid(format!(
                "FP8 format E{exp_bits}M{man_bits}: bias {bias} puts values outside binary32"
            )));
        }
        match (special, overflow) {
            (Fp8Special::Ieee, Fp8Overflow::Nan) | (Fp8Special::Extended, Fp8Overflow::Inf) => {
                Err(Error::invalid(format!(
                    "FP8 format E{exp_bits}M{man_bits}: overflow {overflow:?} needs the other \
                     variant than {special:?}"
                )))
            }
            _ => Ok(f),
        }
    }

    /// The same format with another overflow mode (validated as in [`Fp8Format::new`]).
    pub fn with_overflow(self, overflow: Fp8Overflow) -> Result<Self> {
        Fp8Format::new(
            self.exp_bits,
            self.man_bits,
            self.bias,
            self.special,
            overflow,
        )
    }

    /// The same format with another exponent bias (validated as in [`Fp8Format::new`]).
    pub fn with_bias(self, bias: i32) -> Result<Self> {
        Fp8Format::new(
            self.exp_bits,
            self.man_bits,
            bias,
            self.special,
            self.overflow,
        )
    }

    /// Exponent bits.
    pub fn exp_bits(&self) -> u8 {
        self.exp_bits
    }
    /// Mantissa bits.
    pub fn man_bits(&self) -> u8 {
        self.man_bits
    }
    /// Exponent bias.
    pub fn bias(&self) -> i32 {
        self.bias
    }
    /// The special-value variant.
    pub fn special(&self) -> Fp8Special {
        self.special
    }
    /// The overflow mode.
    pub fn overflow(&self) -> Fp8Overflow {
        self.overflow
    }
    /// The canonical NaN code every NaN output uses.
    pub fn nan_code(&self) -> u8 {
        self.nan_code
    }

    fn max_exp_field(&self) -> i32 {
        (1 << self.exp_bits) - 1
    }
    fn emin(&self) -> i32 {
        1 - self.bias
    }
    fn man_mask(&self) -> u8 {
        (1u8 << self.man_bits) - 1
    }
    /// Magnitude (7-bit) code of ±Inf; only meaningful for the IEEE variant.
    fn inf_mag(&self) -> u8 {
        (self.max_exp_field() as u8) << self.man_bits
    }
    /// Magnitude code of the largest finite value.
    pub fn max_finite_code(&self) -> u8 {
        match self.special {
            Fp8Special::Ieee => self.inf_mag() - 1,
            Fp8Special::Extended => 0x7E,
        }
    }
    /// The largest finite value.
    pub fn max_finite(&self) -> f32 {
        self.decode(self.max_finite_code())
    }
    /// `code` (either sign) is a NaN.
    pub fn is_nan_code(&self, code: u8) -> bool {
        let mag = code & 0x7F;
        match self.special {
            Fp8Special::Ieee => mag > self.inf_mag(),
            Fp8Special::Extended => mag == 0x7F,
        }
    }

    /// Exact widening to binary32 (docs/contract/device.md §11.3 rule 1). NaN codes give a quiet
    /// f32 NaN of the code's sign. Computed arithmetically; bulk paths use
    /// [`Fp8Format::decode_table`].
    pub fn decode(&self, code: u8) -> f32 {
        let mag = code & 0x7F;
        let e = i32::from(mag >> self.man_bits);
        let mant = u32::from(mag & self.man_mask());
        let v = if self.is_nan_code(code) {
            f32::NAN
        } else if self.special == Fp8Special::Ieee && e == self.max_exp_field() {
            f32::INFINITY
        } else if e == 0 {
            // Subnormal: mant × 2^(emin − m), exact (mant < 2^m, result ≥ 2^-125).
            mant as f32 * pow2(self.emin() - i32::from(self.man_bits))
        } else {
            let exp32 = (e - self.bias + 127) as u32;
            f32::from_bits((exp32 << 23) | (mant << (23 - self.man_bits)))
        };
        if code & 0x80 != 0 {
            -v
        } else {
            v
        }
    }

    /// Narrowing from binary32 with round-to-nearest-even, then overflow per
    /// [`Fp8Format::overflow`] (docs/contract/device.md §11.3 rules 3–5). NaN →
    /// [`Fp8Format::nan_code`].
    pub fn encode(&self, x: f32) -> u8 {
        let bits = x.to_bits();
        let sign = ((bits >> 24) & 0x80) as u8;
        let abs = bits & 0x7FFF_FFFF;
        if abs > 0x7F80_0000 {
            return self.nan_code;
        }
        if abs == 0x7F80_0000 {
            return match (self.special, self.overflow) {
                (Fp8Special::Ieee, _) => sign | self.inf_mag(),
                (Fp8Special::Extended, Fp8Overflow::Saturate) => sign | self.max_finite_code(),
                (Fp8Special::Extended, _) => self.nan_code,
            };
        }
        let exp32 = (abs >> 23) as i32;
        if exp32 == 0 {
            // ±0 or an f32 subnormal: far below half the smallest FP8 subnormal (checked in new).
            return sign;
        }
        let m = i32::from(self.man_bits);
        let ea = exp32 - 127;
        let sig = (abs & 0x7F_FFFF) | 0x80_0000;
        // The quantum (ulp) of the target at this magnitude, then RNE of |x| / 2^q.
        let q = ea.max(self.emin()) - m;
        let shift = (q - (ea - 23)) as u32; // ≥ 23 − m ≥ 18
        let n = if shift >= 32 {
            0
        } else {
            let kept = sig >> shift;
            let rem = sig & ((1u32 << shift) - 1);
            let half = 1u32 << (shift - 1);
            kept + u32::from(rem > half || (rem == half && kept & 1 == 1))
        };
        // In the subnormal range the code is n itself (n = 2^m carries into the smallest
        // normal); above it, a carry of n into 2^(m+1) bumps the exponent field by itself.
        let mag = if ea < self.emin() {
            n
        } else {
            (((ea + self.bias) as u32) << m) + n - (1u32 << m)
        };
        if mag > u32::from(self.max_finite_code()) {
            match self.overflow {
                Fp8Overflow::Inf => sign | self.inf_mag(),
                Fp8Overflow::Nan => self.nan_code,
                Fp8Overflow::Saturate => sign | self.max_finite_code(),
            }
        } else {
            sign | mag as u8
        }
    }

    /// The 256-entry decode table of this format, built on first use and kept for the life of
    /// the process (one 1 KiB table per distinct format: a handful in practice).
    pub fn decode_table(&self) -> &'static [f32; 256] {
        static TABLES: Lazy<RwLock<Vec<(Fp8Format, &'static Table)>>> =
            Lazy::new(|| RwLock::new(Vec::new()));
        if let Some((_, t)) = TABLES.read().iter().find(|(f, _)| f == self) {
            return t;
        }
        let mut w = TABLES.write();
        if let Some((_, t)) = w.iter().find(|(f, _)| f == self) {
            return t;
        }
        let mut t = Box::new([0f32; 256]);
        for (c, v) in t.iter_mut().enumerate() {
            *v = self.decode(c as u8);
        }
        let t: &'static [f32; 256] = Box::leak(t);
        w.push((*self, t));
        t
    }
}

/// A decode table: code → binary32 value.
type Table = [f32; 256];

/// 2^k as an f32 normal (−126 ≤ k ≤ 127).
fn pow2(k: i32) -> f32 {
    f32::from_bits(((k + 127) as u32) << 23)
}

#[cfg(test)]
mod tests;

//! The element types of `-d/--datatype`, as nccom-test spells them, and what the golden check
//! needs of each: the byte width, whether it is a float, its rounding unit, and exact
//! conversions between a value and its little-endian bits.
//!
//! Names are the vendor's (uint8, int8, fp8, uint16, int16, fp16, bf16, uint32, int32, fp32;
//! `fp8` is FP8 E4M3). OpenNRT also accepts `fp8e4` (the same type), `fp8e3` and `fp8e5` (the
//! software device's other FP8 formats); the type column prints `fp8` for E4M3. The words are
//! the `nccom` columns of [`opennrt::dtype::DTYPE_NAMES`] ([`Dtype::from_nccom_name`],
//! [`Dtype::nccom_name`]); this module only orders them as the vendor's usage does.

use opennrt::dtype::{FloatCodec, Numerics};
use opennrt::isa::enums::Dtype;

/// The types of `-d`, in the order of the vendor's usage text (which is not the order of
/// [`opennrt::dtype::DTYPE_NAMES`]), then the ones only OpenNRT's nccom-test has.
pub const TYPES: [Dtype; 12] = [
    Dtype::Uint8,
    Dtype::Int8,
    Dtype::Fp8E4,
    Dtype::Uint16,
    Dtype::Int16,
    Dtype::Fp16,
    Dtype::Bf16,
    Dtype::Uint32,
    Dtype::Int32,
    Dtype::Fp32,
    Dtype::Fp8E3,
    Dtype::Fp8E5,
];

/// Every `-d` word, as a refusal lists them: the vendor's words in the vendor's order, then
/// OpenNRT's (`fp8e4`, `fp8e3`, `fp8e5`).
pub fn words() -> Vec<&'static str> {
    let rows = TYPES.iter().map(|d| d.names());
    rows.clone()
        .filter_map(|r| r.nccom)
        .chain(rows.filter_map(|r| r.nccom_extra))
        .collect()
}

/// The name printed in the type column and the JSON report ([`Dtype::nccom_name`]: `fp8` for
/// E4M3); `?` for a type `-d` does not name.
pub fn name(d: Dtype) -> &'static str {
    d.nccom_name().unwrap_or("?")
}

/// Bytes per element (every type of [`TYPES`] has a size).
pub fn size(d: Dtype) -> u64 {
    d.size_bytes().unwrap_or(1) as u64
}

/// A floating-point type: checked with a tolerance after a reduction.
pub fn is_float(d: Dtype) -> bool {
    matches!(
        d,
        Dtype::Fp32 | Dtype::Fp16 | Dtype::Bf16 | Dtype::Fp8E3 | Dtype::Fp8E4 | Dtype::Fp8E5
    )
}

/// The distance from 1 to the next representable value (2^-mantissa bits): a reduction of `g`
/// values rounded in any order after each partial sum is within `g · eps · Σ|x|` of the exact
/// sum, the bound the check uses. 0 for integers (exact).
pub fn eps(d: Dtype) -> f64 {
    let mantissa_bits = match d {
        Dtype::Fp32 => 23,
        Dtype::Fp16 => 10,
        Dtype::Bf16 => 7,
        Dtype::Fp8E3 => 4,
        Dtype::Fp8E4 => 3,
        Dtype::Fp8E5 => 2,
        _ => return 0.0,
    };
    (-(mantissa_bits as f64)).exp2()
}

/// The mask of an element's bits (the low `8 · size` bits of a u64).
pub fn mask(d: Dtype) -> u64 {
    match size(d) {
        8 => u64::MAX,
        s => (1u64 << (8 * s)) - 1,
    }
}

/// The float codec of a float type (IEEE FP8 formats, the software device's defaults).
fn codec(d: Dtype) -> Option<FloatCodec> {
    FloatCodec::new(d, &Numerics::IEEE).ok()
}

/// The bits of `v` in float type `d`, rounded to nearest even (through binary32, exact for the
/// small values the check generates). `None` for an integer type.
pub fn encode_float(d: Dtype, v: f64) -> Option<u64> {
    let c = codec(d)?;
    let mut out = [0u8; 8];
    c.narrow_one(v as f32, &mut out[..c.size()]);
    Some(u64::from_le_bytes(out))
}

/// The value of the bits `b` of float type `d`, exactly. `None` for an integer type.
pub fn decode_float(d: Dtype, b: u64) -> Option<f64> {
    let c = codec(d)?;
    let bytes = b.to_le_bytes();
    Some(f64::from(c.widen_one(&bytes[..c.size()])))
}

/// An element as a person reads it: the value of a float, the integer of an integer type
/// (signed types as signed).
pub fn show(d: Dtype, b: u64) -> String {
    if let Some(v) = decode_float(d, b) {
        return format!("{v}");
    }
    let bits = 8 * size(d) as u32;
    let signed = matches!(d, Dtype::Int8 | Dtype::Int16 | Dtype::Int32 | Dtype::Int64);
    if signed && bits < 64 {
        let shift = 64 - bits;
        format!("{}", ((b << shift) as i64) >> shift)
    } else if signed {
        format!("{}", b as i64)
    } else {
        format!("{b}")
    }
}

/// Element `i` of little-endian `bytes` of type `d`, as bits.
pub fn read(d: Dtype, bytes: &[u8], i: usize) -> u64 {
    let s = size(d) as usize;
    let mut b = [0u8; 8];
    b[..s].copy_from_slice(&bytes[i * s..(i + 1) * s]);
    u64::from_le_bytes(b)
}

/// Store `bits` as element `i` of little-endian `bytes` of type `d`.
pub fn write(d: Dtype, bytes: &mut [u8], i: usize, bits: u64) {
    let s = size(d) as usize;
    bytes[i * s..(i + 1) * s].copy_from_slice(&bits.to_le_bytes()[..s]);
}

#[cfg(test)]
mod tests;

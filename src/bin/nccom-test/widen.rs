//! Integer reductions as the Neuron compiler makes them: widen to FP32, reduce on the CCE,
//! narrow back. The CCE reduces floats only (docs/design.md §2.9), so an all-reduce or a
//! reduce-scatter of `-d uint8` … `-d int32` runs an **fp32** collective: the NEFF of the size
//! is built for fp32 (the same element count), every worker converts its integer input to fp32
//! on the host before the first execution, the fp32 collective really runs on the software
//! device, and the worker converts the fp32 output back to the user's type after the last one.
//! The conversions stay outside the timed executions. Only nccom-test widens: the C API's
//! `nrta_cc_prepare` keeps refusing integer reductions, the hardware's rule.
//!
//! The numeric rule, in one place ([`widen_one`], [`narrow_one`]):
//! * **Widening** is `value as f32`: exact for every 8- and 16-bit value and every 32-bit value
//!   of magnitude at most 2^24; above that it rounds to nearest, ties to even.
//! * **Reduction** is the CCE's fp32 sum, rounded to nearest-even once per hop. A sum whose
//!   exact value and partial sums stay within ±2^24 is therefore exact, whatever the order.
//! * **Narrowing saturates**: the fp32 result (always an integer, since fp32 values above 2^23
//!   are integers and the inputs are) is clamped to the type's range, NaN gives 0. Saturation
//!   and not wrapping because once the sum left the type's range the fp32 value no longer
//!   holds its low bits (above 2^24), so a wrapped result would be noise; the clamped one is
//!   the nearest value the type holds, which is what a float-to-integer conversion gives
//!   (Rust's `as`, the compiler's convert). A `uint8` all-reduce of 200 and 100 is 255.
//!
//! Sizes, counts and bandwidths are reported in the user's type (size(B) = elements × its
//! width), as the vendor's table of a uint8 all-reduce does.

use opennrt::isa::enums::Dtype;

use crate::dtypes;
use crate::ops::Op;

/// The type the widened collective runs in.
pub const WIRE: Dtype = Dtype::Fp32;

/// Bytes of a [`WIRE`] element.
pub const WIRE_SIZE: u64 = 4;

/// An integer type of at most 32 bits (the types widened for a reduction).
pub fn is_integer(d: Dtype) -> bool {
    matches!(
        d,
        Dtype::Uint8 | Dtype::Int8 | Dtype::Uint16 | Dtype::Int16 | Dtype::Uint32 | Dtype::Int32
    )
}

/// `op` on `d` runs as a widened fp32 collective.
pub fn applies(op: Op, d: Dtype) -> bool {
    op.is_reducing() && is_integer(d)
}

/// The type the collective of `op` on `d` runs in: [`WIRE`] when widened, else `d`.
pub fn wire_dtype(op: Op, d: Dtype) -> Dtype {
    if applies(op, d) {
        WIRE
    } else {
        d
    }
}

/// The smallest and largest value of integer type `d`.
pub fn range(d: Dtype) -> (i64, i64) {
    match d {
        Dtype::Uint8 => (0, u8::MAX.into()),
        Dtype::Int8 => (i8::MIN.into(), i8::MAX.into()),
        Dtype::Uint16 => (0, u16::MAX.into()),
        Dtype::Int16 => (i16::MIN.into(), i16::MAX.into()),
        Dtype::Uint32 => (0, u32::MAX.into()),
        Dtype::Int32 => (i32::MIN.into(), i32::MAX.into()),
        _ => (0, 0),
    }
}

/// The integer value of the bits `b` of integer type `d` (sign-extended for signed types).
pub fn value_of(d: Dtype, b: u64) -> i64 {
    let bits = 8 * dtypes::size(d) as u32;
    let (lo, _) = range(d);
    if lo < 0 {
        let shift = 64 - bits;
        ((b << shift) as i64) >> shift
    } else {
        b as i64
    }
}

/// The bits of integer value `v` in type `d` (which must hold it).
pub fn bits_of(d: Dtype, v: i64) -> u64 {
    (v as u64) & dtypes::mask(d)
}

/// One element widened: the bits `b` of `d` as fp32 (nearest-even above 2^24).
pub fn widen_one(d: Dtype, b: u64) -> f32 {
    value_of(d, b) as f32
}

/// One element narrowed: fp32 `v` as the bits of `d`, saturated to its range (NaN is 0).
pub fn narrow_one(d: Dtype, v: f32) -> u64 {
    let (lo, hi) = range(d);
    let x = if v.is_nan() {
        0
    } else {
        (f64::from(v).round_ties_even() as i64).clamp(lo, hi)
    };
    bits_of(d, x)
}

/// A little-endian buffer of `d` widened to fp32.
pub fn widen(d: Dtype, bytes: &[u8]) -> Vec<u8> {
    let n = bytes.len() / dtypes::size(d) as usize;
    let mut out = Vec::with_capacity(n * WIRE_SIZE as usize);
    for i in 0..n {
        out.extend_from_slice(&widen_one(d, dtypes::read(d, bytes, i)).to_le_bytes());
    }
    out
}

/// A little-endian fp32 buffer narrowed to `d`.
pub fn narrow(d: Dtype, fp32: &[u8]) -> Vec<u8> {
    let n = fp32.len() / WIRE_SIZE as usize;
    let mut out = vec![0u8; n * dtypes::size(d) as usize];
    for (i, c) in fp32.chunks_exact(WIRE_SIZE as usize).enumerate() {
        let v = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        dtypes::write(d, &mut out, i, narrow_one(d, v));
    }
    out
}

/// The largest magnitude `--check` data of a widened type takes on groups of `g`, so that
/// every partial sum of the group stays within ±2^24, where fp32 is exact: the full range of
/// the 8- and 16-bit types (for groups below 256), less for the 32-bit ones.
pub fn check_limit(d: Dtype, g: u32) -> i64 {
    let (lo, hi) = range(d);
    let exact = ((1i64 << 24) / i64::from(g.max(1))).max(1);
    hi.max(-lo).min(exact)
}

#[cfg(test)]
mod tests;

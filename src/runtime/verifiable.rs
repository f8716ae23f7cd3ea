//! Verifiable collectives, nccl-tests style: input data whose exact result every dtype can
//! represent ([`inputs`]), that result computed independently of the lowering and the device
//! ([`expected`], [`check`]), element-wise comparison with a readable first mismatch
//! ([`count_wrong`], [`first_mismatch`]), and the staging of in-place buffers in the NCCL
//! convention ([`load_staged`], [`read_results`], [`execute_staged`]).
//!
//! # Exact-integer budgets ([`exact_budget`])
//!
//! The CCE widens every source to FP32, adds in source order, and narrows the result to the
//! I/O type with round-to-nearest-even after each hop (docs/contract/device.md §2.3, §11.3 rules 1–3);
//! a ring or tree stores every partial sum in the I/O type. So a reduction is bit-exact in any
//! order iff **every partial sum** is representable. A binary format with `p` significand bits
//! (mantissa bits + 1) holds every integer of magnitude ≤ `2^p`; one whose largest finite value
//! is below that holds the integers up to `floor(max finite)`. The budget `B` is the smaller of
//! the two, read off the formats of [`crate::dtype`]: BF16 `2^8 = 256`, FP16 `2^11 = 2048`,
//! FP32 `2^24`, FP8 E4M3 `2^4 = 16`, E5M2 `2^3 = 8`, E3M4 `min(2^5, 15.5) = 15` (the IEEE-like
//! defaults of [`Numerics`]). Integer types: their range (`B` = the largest value; signed
//! values stay in `[-B, B]`, so `i8` never uses -128).
//!
//! # Values
//!
//! Every value is a function of (rank, input element index) through a fixed 64-bit hash
//! (splitmix64), so runs are reproducible and any two ranks' data differ.
//!
//! * **Reducing ops** (all-reduce, reduce-scatter, implicit permute-reduce): the input elements
//!   that meet in one output element form a *set* of `T` terms (T = N ranks; 2 for the
//!   permute-reduce's `src0 ⊕ src1`). `K` of them *contribute*: term `slot` of set `s` does iff
//!   `(slot + s) mod T < K`, so which ranks contribute rotates from element to element and every
//!   rank's data decides some elements. ADD: `K = min(T, B)` contributors draw from `[-m, m]`,
//!   `m = floor(B / K)` (unsigned: `[0, m]`), the others hold 0, so the sum of magnitudes — and
//!   hence every partial sum, in any order and association — stays within `B` (e.g. BF16 on 64
//!   ranks: all 64 contribute −4..4; E5M2 on 64 ranks: 8 contribute −1..1). MAX / MIN (Choice:
//!   three contributors): `K = min(T, 3)` contributors draw from the whole `[-B, B]` and the
//!   others hold the neutral `-B` (MAX) or `B` (MIN), so the result is the extreme of a few
//!   random values rather than almost always the budget's edge. Negative values are included
//!   wherever the type is signed.
//! * **Copy ops** (all-gather, all-to-all(-v), permutes, send/recv): copies move raw bytes
//!   (docs/contract/device.md §11.1), so no budget applies. Choice: every element is a hashed bit pattern of its
//!   width; for float types a non-finite pattern gets its top exponent bit cleared (finite
//!   values only, so that even a copy that went through the CCE must be exact).
//!
//! **Misplaced data.** A copy element from the wrong rank or offset matches by chance with
//! probability `2^-bits` (1/256 for one byte). For an ADD reduction a wrong or duplicated term
//! changes the sum unless the two values are equal: ≤ 1/9 per element when `m ≥ 4`, 1/3 for
//! `m = 1`; in the narrowest case (E5M2 on 64 ranks, 8 contributors) only where a contributor
//! is involved, about 1 element in 12. For MAX / MIN a term decides an element only where it is
//! the extreme, about 1 element in N. So a single element of a narrow type can be unlucky, but a
//! misplaced chunk of a few hundred elements gives wrong results with near certainty; the unit
//! tests measure these rates on deliberately misplaced chunks.
//!
//! # In place
//!
//! The input is the rank's logical input ([`CollectiveRequest::input_elems`] elements) and the
//! result its logical output. In place, input and output are one storage and the lowering
//! follows NCCL ([`in_place_bases`]): all-gather reads rank r's input at element `r·count`,
//! reduce-scatter leaves rank r's result at `r·count`; [`crate::runtime::machine`] places
//! and reads the data there. [`load_staged`] also writes the all-gather input at byte 0 of the
//! storage (stale bytes the collective must overwrite). Output elements an op leaves
//! untouched (all-to-all-v gaps, a permute's non-targets, the sender of send/recv) hold, in
//! place, the rank's own input (where the input reaches) and, out of place, zero. Choice: the
//! reference checks them (the device maps fresh buffers zero-filled, `device::memory`), so a
//! stray write is caught too.

mod reference;

use crate::device::executor::Machine;
use crate::dtype::{FloatCodec, Numerics};
use crate::error::{Error, Result};
use crate::isa::enums::Dtype;
use crate::lower::addrmap::AddressMap;
use crate::lower::emit::EmittedProgram;
use crate::lower::program::{Buf, Program};
use crate::lower::request::{CollectiveOp, CollectiveRequest, ReduceOp};
use crate::lower::verify::expect::in_place_bases;
use crate::runtime::machine;

pub use reference::{check, count_wrong, expected, expected_of, first_mismatch, Checked, Mismatch};

/// Elements per block of the bulk conversion loops (keeps scratch on the stack-sized side).
const BLOCK: usize = 4096;

/// Seed of the value hash (any constant; fixed so that runs are reproducible).
const SEED: u64 = 0x6F70_656E_6E72_7421;
const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// The splitmix64 finaliser (a bijection on u64).
#[inline]
fn fmix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The hash key of a rank's data.
fn rank_key(rank: u32) -> u64 {
    fmix(SEED ^ u64::from(rank).wrapping_mul(GOLDEN))
}

/// Hash word `idx` of a key: distinct for distinct `idx` (splitmix64's state walk).
#[inline]
fn word(key: u64, idx: u64) -> u64 {
    fmix(key.wrapping_add(idx.wrapping_mul(GOLDEN)))
}

/// The float codec of a dtype (IEEE-like FP8 defaults, as the device runs them), `None` for
/// integer types.
fn codec(d: Dtype) -> Result<Option<FloatCodec>> {
    if d.is_integer() {
        return Ok(None);
    }
    FloatCodec::new(d, &Numerics::default()).map(Some)
}

/// Element bytes of a dtype (an error for INVALID).
fn elem_size(d: Dtype) -> Result<usize> {
    d.size_bytes()
        .ok_or_else(|| Error::invalid(format!("dtype {d} has no element size")))
}

/// Signed integer or float: values may be negative.
fn is_signed(d: Dtype) -> bool {
    !matches!(
        d,
        Dtype::Uint8 | Dtype::Uint16 | Dtype::Uint32 | Dtype::Uint64
    )
}

/// The exact-integer budget `B` of a dtype (see the module doc): every integer in `[-B, B]`
/// (unsigned: `[0, B]`) is exact, and so is every partial sum whose magnitudes add up to at
/// most `B`.
pub fn exact_budget(d: Dtype) -> Result<u64> {
    let float = |man_bits: u32, max_finite: f64| (1u64 << (man_bits + 1)).min(max_finite as u64);
    Ok(match d {
        Dtype::Int8 => i8::MAX as u64,
        Dtype::Uint8 => u8::MAX.into(),
        Dtype::Int16 => i16::MAX as u64,
        Dtype::Uint16 => u16::MAX.into(),
        Dtype::Int32 => i32::MAX as u64,
        Dtype::Uint32 => u32::MAX.into(),
        Dtype::Int64 => i64::MAX as u64,
        Dtype::Uint64 => u64::MAX,
        // The largest finite BF16 (0x7F7F) and FP16 (0x7BFF) codes.
        Dtype::Bf16 => float(7, f64::from(crate::dtype::bf16_to_f32(0x7F7F))),
        Dtype::Fp16 => float(10, f64::from(crate::dtype::fp16_to_f32(0x7BFF))),
        Dtype::Fp32 => float(23, f64::from(f32::MAX)),
        Dtype::Fp8E3 | Dtype::Fp8E4 | Dtype::Fp8E5 => {
            let f = Numerics::default().fp8(d).expect("an FP8 dtype");
            float(u32::from(f.man_bits()), f64::from(f.max_finite()))
        }
        Dtype::Fp32r | Dtype::Invalid => {
            return Err(Error::invalid(format!(
                "dtype {d} is not an I/O type: no verifiable data (docs/contract/device.md §11.1)"
            )))
        }
    })
}

/// How the terms of a reducing op's values are drawn (module doc, "Values").
#[derive(Debug, Clone, Copy)]
struct ReducePlan {
    /// Terms per output element.
    terms: u64,
    /// Contributing terms per set.
    contributors: u64,
    /// Range of a contributor's value.
    lo: i128,
    hi: i128,
    /// A non-contributor's value.
    neutral: i128,
}

impl ReducePlan {
    fn new(req: &CollectiveRequest, op: ReduceOp) -> Result<ReducePlan> {
        let b = i128::from(exact_budget(req.dtype)?);
        let signed = is_signed(req.dtype);
        let terms = match req.op {
            CollectiveOp::PermuteReduceImplicit => 2,
            _ => u64::from(req.rank_n().max(1)),
        };
        let floor = if signed { -b } else { 0 };
        Ok(match op {
            ReduceOp::Add => {
                let k = terms.min(b as u64);
                let m = b / i128::from(k);
                ReducePlan {
                    terms,
                    contributors: k,
                    lo: if signed { -m } else { 0 },
                    hi: m,
                    neutral: 0,
                }
            }
            ReduceOp::Max | ReduceOp::Min => ReducePlan {
                terms,
                contributors: terms.min(3),
                lo: floor,
                hi: b,
                neutral: if op == ReduceOp::Max { floor } else { b },
            },
        })
    }

    /// A term's value: drawn from `[lo, hi]` with hash word `h` (Lemire's multiply-shift, no
    /// division) when it contributes, else the neutral value.
    #[inline]
    fn draw(&self, contributes: bool, h: u64) -> i128 {
        if contributes {
            let span = (self.hi - self.lo + 1) as u128;
            self.lo + ((u128::from(h) * span) >> 64) as i128
        } else {
            self.neutral
        }
    }
}

/// Little-endian two's-complement bytes of `v`, truncated to `out.len()`.
#[inline]
fn put_int(v: i128, out: &mut [u8]) {
    let n = out.len();
    out.copy_from_slice(&(v as u128).to_le_bytes()[..n]);
}

/// Every rank's input bytes for `req` (rank r: `req.input_elems()` elements of `req.dtype`),
/// drawn as the module doc says. An error for dtypes without data (FP32R, INVALID) and for a
/// reducing op without a reduce op.
pub fn inputs(req: &CollectiveRequest) -> Result<Vec<Vec<u8>>> {
    let esz = elem_size(req.dtype)?;
    let codec = codec(req.dtype)?;
    exact_budget(req.dtype)?;
    let elems = usize::try_from(req.input_elems())
        .map_err(|_| Error::resource("input larger than the address space"))?;
    let plan = if req.op.is_reducing() {
        let op = req
            .reduce
            .ok_or_else(|| Error::invalid("a reducing op needs a reduce op (add, max or min)"))?;
        Some(ReducePlan::new(req, op)?)
    } else {
        None
    };
    (0..req.rank_n())
        .map(|r| {
            let mut out = vec![0u8; elems * esz];
            match &plan {
                Some(p) => fill_reduce_input(req, p, codec.as_ref(), esz, r, &mut out),
                None => fill_copy_input(req.dtype, codec.as_ref(), esz, r, &mut out),
            }
            Ok(out)
        })
        .collect()
}

/// The runs of a rank's input along which `(slot + set) mod T` steps by one per element:
/// `(first element, elements, position of the first)`. Permute-reduce: the two operands
/// `src0[e]` (slot `rank`) and `src1[e] = in[count + e]` (slot `rank + 1`), set `e`; every
/// other op: slot `rank`, set = the element index (the ranks' elements at one index meet).
fn input_runs(req: &CollectiveRequest, rank: u32, elems: u64, terms: u64) -> Vec<(u64, u64, u64)> {
    let r = u64::from(rank);
    if req.op == CollectiveOp::PermuteReduceImplicit {
        let c = req.count;
        vec![(0, c, r % terms), (c, c, (r + 1) % terms)]
    } else {
        vec![(0, elems, r % terms)]
    }
}

fn fill_reduce_input(
    req: &CollectiveRequest,
    p: &ReducePlan,
    codec: Option<&FloatCodec>,
    esz: usize,
    rank: u32,
    out: &mut [u8],
) {
    let key = rank_key(rank);
    let elems = (out.len() / esz) as u64;
    for (first, len, pos0) in input_runs(req, rank, elems, p.terms) {
        let mut pos = pos0;
        let mut next = |i: u64| {
            let v = p.draw(pos < p.contributors, word(key, i));
            pos += 1;
            if pos == p.terms {
                pos = 0;
            }
            v
        };
        let bytes = &mut out[(first as usize) * esz..((first + len) as usize) * esz];
        match codec {
            Some(c) => {
                let mut vals = [0f32; BLOCK];
                for (b, chunk) in bytes.chunks_mut(BLOCK * esz).enumerate() {
                    let n = chunk.len() / esz;
                    let at = first + (b * BLOCK) as u64;
                    for (j, v) in vals[..n].iter_mut().enumerate() {
                        // |value| ≤ B ≤ 2^24: exact in f32.
                        *v = next(at + j as u64) as i64 as f32;
                    }
                    c.narrow(&vals[..n], chunk);
                }
            }
            None => {
                for (j, e) in bytes.chunks_exact_mut(esz).enumerate() {
                    put_int(next(first + j as u64), e);
                }
            }
        }
    }
}

/// The exponent field mask of a float I/O type (IEEE-like defaults) and its top bit.
fn exponent_mask(d: Dtype) -> (u32, u32) {
    let mask = match d {
        Dtype::Bf16 => 0xFF << 7,
        Dtype::Fp16 => 0x1F << 10,
        Dtype::Fp32 => 0xFF << 23,
        _ => match Numerics::default().fp8(d) {
            Some(f) => ((1u32 << f.exp_bits()) - 1) << f.man_bits(),
            None => 0,
        },
    };
    (
        mask,
        if mask == 0 {
            0
        } else {
            1 << (31 - mask.leading_zeros())
        },
    )
}

fn fill_copy_input(d: Dtype, codec: Option<&FloatCodec>, esz: usize, rank: u32, out: &mut [u8]) {
    let key = rank_key(rank);
    for (w, chunk) in out.chunks_mut(8).enumerate() {
        let n = chunk.len();
        chunk.copy_from_slice(&word(key, w as u64).to_le_bytes()[..n]);
    }
    if codec.is_some() {
        let (mask, top) = exponent_mask(d);
        for e in out.chunks_exact_mut(esz) {
            let mut b = [0u8; 4];
            b[..esz].copy_from_slice(e);
            let bits = u32::from_le_bytes(b);
            if bits & mask == mask {
                e.copy_from_slice(&(bits ^ top).to_le_bytes()[..esz]);
            }
        }
    }
}

/// Whether every rank's result of `op` is the same (all-reduce, all-gather), so the ranks can
/// also be compared with each other bit for bit.
pub fn same_on_every_rank(op: CollectiveOp) -> bool {
    matches!(op, CollectiveOp::AllReduce | CollectiveOp::AllGather)
}

/// Where rank `rank`'s input and result sit in its buffers, in bytes (non-zero only in place,
/// see the module doc).
fn byte_bases(req: &CollectiveRequest, rank: u32) -> Result<(u64, u64)> {
    let esz = elem_size(req.dtype)? as u64;
    let (i, o) = in_place_bases(req, rank);
    Ok((i * esz, o * esz))
}

/// [`machine::load`] (which places in-place data by the NCCL convention), plus stale bytes
/// where the collective must write: in-place all-gather also gets rank r's input at element 0 of
/// its storage, which the collective must overwrite with rank 0's block.
pub fn load_staged(
    p: &Program,
    e: &EmittedProgram,
    map: &AddressMap,
    inputs: &[Vec<u8>],
) -> Result<Machine> {
    let mut m = machine::load(p, e, map, inputs)?;
    for r in 0..map.ranks() {
        let (at, _) = byte_bases(&p.request, r)?;
        if at > 0 {
            let chip = map.chip_id(r)?;
            m.mem.write(
                chip,
                map.buf_on_chip(r, Buf::Input, 0)?,
                &inputs[r as usize],
            )?;
        }
    }
    Ok(m)
}

/// Every rank's result after a run ([`machine::read_outputs`]).
pub fn read_results(m: &Machine, p: &Program, map: &AddressMap) -> Result<Vec<Vec<u8>>> {
    machine::read_outputs(m, p, map)
}

/// Load with [`load_staged`], run, and read with [`read_results`].
pub fn execute_staged(
    p: &Program,
    e: &EmittedProgram,
    map: &AddressMap,
    inputs: &[Vec<u8>],
) -> Result<Vec<Vec<u8>>> {
    let mut m = load_staged(p, e, map, inputs)?;
    m.run()?;
    read_results(&m, p, map)
}

#[cfg(test)]
mod tests;

//! The CCE: the compute block in the SDMA data path that reduces up to 32 source streams while
//! the data moves (docs/contract/device.md §2.1, §2.3, §11).
//!
//! Semantics (docs/contract/device.md §2.3, §11.3), for each element e:
//!
//! ```text
//! acc = widen(src[0][e])                      exact, to binary32
//! for s in 1..n: x = widen(src[s][e])
//!     ADD: acc = acc + x                      rounded (RNE) after each binary add, in SOURCE ORDER
//!     MAX: acc = max(acc, x)   MIN: acc = min(acc, x)
//!     FMA: acc = acc + scale[s]·x             fused: one rounding
//! out[e] = narrow(acc)                        once, RNE, canonical NaN, the format's overflow rule
//! ```
//!
//! Choices where the spec leaves one:
//! * **FMA's first source is scaled too** (every compute descriptor carries its source's scale in
//!   W3, §2.1): acc starts as `scale[0]·x0`, the same as a fused `x0·scale[0] + (−0)`.
//! * **MAX/MIN propagate NaN** (§11.3 rule 5, an **\[L\]** choice made easy to flip in
//!   `max_nan` / `min_nan`) and order zeros as IEEE 754-2019 maximum/minimum do:
//!   max(−0, +0) = +0, min(−0, +0) = −0, whatever the source order.
//! * A FP32 NaN result is written as 0x7FC00000 ([`crate::dtype::FP32_NAN`]), like the canonical
//!   NaNs the spec lists for the narrower types.
//! * Errors are `ErrorKind::DmaAbort` (`NRT_EXEC_HW_ERR_DMA_ABORT`) with a message that says "DMA abort": an integer, FP32R or
//!   INVALID dtype, EXT/GCE, FMA without scales, more than [`MAX_SOURCES`] sources or mismatched
//!   lengths. The calling DMA engine reports them as `NRT_EXEC_HW_ERR_DMA_ABORT` (§11.4, §12.2).
//!
//! Speed: elements are processed in blocks of [`BLOCK`]. Each source block is widened into an
//! f32 scratch array (one conversion dispatch per block, not per element), combined by a tight
//! loop over f32 slices that the compiler vectorizes, and the accumulator is narrowed once. FP32
//! and BF16 ADD/MAX/MIN skip the scratch copy: their widening is a load (and a shift), fused into
//! the combine loop that reads the source bytes directly.

use crate::dtype::{Dtype, FloatCodec, Numerics};
use crate::error::{Error, Result};
use crate::isa::udma::CceOp;

/// Most sources one CCE packet reduces (docs/contract/device.md §2.1).
pub const MAX_SOURCES: usize = 32;

/// Elements per processing block: the f32 scratch of one source fits in L1.
pub const BLOCK: usize = 1024;

/// The f32 accumulator and widening scratch of one [`Plan::run`].
type Scratch = (Vec<f32>, Vec<f32>);

/// Scratch pairs not in use, shared by the process's threads: a run takes one and gives it
/// back, so there are as many as reduces ever ran at once. Not one per thread: a collective's
/// reduces run on the batch's workers and on the thread that runs the machine, which with
/// ranks as threads is whichever rank arrives last — per-thread scratch was two fresh zeroed
/// pages (page faults) on each rank thread's first run, long after a warm-up (issue 26).
static SCRATCH: parking_lot::Mutex<Vec<Scratch>> = parking_lot::Mutex::new(Vec::new());

/// Most scratch pairs [`SCRATCH`] keeps (512 KiB).
const MAX_IDLE_SCRATCH: usize = 64;

/// Reduce `sources` element-wise into `out` with `op` ∈ {ADD, MAX, MIN} in the default FP8 modes
/// ([`Numerics::default`]). FMA needs scales: use [`reduce_fma`] or [`reduce_with`].
pub fn reduce(op: CceOp, dtype: Dtype, sources: &[&[u8]], out: &mut [u8]) -> Result<()> {
    reduce_with(&Numerics::default(), op, dtype, sources, None, out)
}

/// FMA: `acc = acc + scale[s]·src[s]`, with one FP32 scale per source (W3 of its compute
/// descriptor, docs/contract/device.md §2.1).
pub fn reduce_fma(dtype: Dtype, sources: &[&[u8]], scales: &[f32], out: &mut [u8]) -> Result<()> {
    reduce_with(
        &Numerics::default(),
        CceOp::Fma,
        dtype,
        sources,
        Some(scales),
        out,
    )
}

/// The general form: FP8 modes from `numerics`, `scales` for FMA (and only for FMA), the result
/// into `out`, which must not be one of the sources (see [`reduce_in_place_with`]).
pub fn reduce_with(
    numerics: &Numerics,
    op: CceOp,
    dtype: Dtype,
    sources: &[&[u8]],
    scales: Option<&[f32]>,
    out: &mut [u8],
) -> Result<()> {
    let plan = Plan::new(numerics, op, dtype, sources.len(), scales)?;
    for (i, s) in sources.iter().enumerate() {
        check_len(i, s.len(), out.len())?;
    }
    plan.run(sources, None, out)
}

/// Like [`reduce_with`], but `inout` is both the source at position `inout_pos` in source order
/// (the other sources, `others`, fill the remaining positions in their order) and the
/// destination — the in-place reduce of a ring step (local chunk + incoming chunk → local chunk).
/// Each block of `inout` is read before it is overwritten, so the result equals the out-of-place
/// reduce.
pub fn reduce_in_place_with(
    numerics: &Numerics,
    op: CceOp,
    dtype: Dtype,
    inout: &mut [u8],
    inout_pos: usize,
    others: &[&[u8]],
    scales: Option<&[f32]>,
) -> Result<()> {
    let n = others.len() + 1;
    let plan = Plan::new(numerics, op, dtype, n, scales)?;
    if inout_pos >= n {
        return Err(abort(format!(
            "in-place source position {inout_pos} is past the {n} sources"
        )));
    }
    for (i, s) in others.iter().enumerate() {
        let pos = if i < inout_pos { i } else { i + 1 };
        check_len(pos, s.len(), inout.len())?;
    }
    plan.run(others, Some(inout_pos), inout)
}

/// The checks [`reduce_with`] makes before touching data (dtype, op, number of sources,
/// scales), alone: the DMA engine runs them when it accepts a packet whose reduce it defers.
pub fn check(
    numerics: &Numerics,
    op: CceOp,
    dtype: Dtype,
    n_sources: usize,
    scales: Option<&[f32]>,
) -> Result<()> {
    Plan::new(numerics, op, dtype, n_sources, scales).map(|_| ())
}

/// A CCE error: the engine aborts the transfer.
fn abort(msg: String) -> Error {
    Error::new(
        crate::error::ErrorKind::DmaAbort,
        format!("CCE: {msg} (DMA abort, docs/contract/device.md §11.4)"),
    )
}

fn check_len(i: usize, got: usize, want: usize) -> Result<()> {
    if got == want {
        Ok(())
    } else {
        Err(abort(format!(
            "source {i} is {got} bytes but the output is {want}: every source has the \
             destination's length (docs/contract/device.md §2.1)"
        )))
    }
}

/// A checked reduce: the codec and the op, resolved once.
struct Plan<'s> {
    codec: FloatCodec,
    op: CceOp,
    scales: Option<&'s [f32]>,
    n_sources: usize,
}

impl<'s> Plan<'s> {
    fn new(
        numerics: &Numerics,
        op: CceOp,
        dtype: Dtype,
        n_sources: usize,
        scales: Option<&'s [f32]>,
    ) -> Result<Self> {
        if !dtype.is_cce_reducible() {
            let why = if dtype.is_integer() {
                "the CCE has no integer datapath (the compiler converts integer reductions to FP32)"
            } else if dtype == Dtype::Fp32r {
                "FP32R is an accumulation type, not an I/O type (docs/contract/device.md §11.1)"
            } else {
                "not a CCE dtype"
            };
            return Err(abort(format!("dtype {dtype} cannot be reduced: {why}")));
        }
        let codec = FloatCodec::new(dtype, numerics).map_err(|e| abort(e.message().into()))?;
        match op {
            CceOp::Add | CceOp::Max | CceOp::Min | CceOp::Fma => {}
            CceOp::Ext | CceOp::Gce => {
                return Err(abort(format!(
                    "op {op:?} is a device-only mode, not a reduce"
                )))
            }
        }
        if n_sources == 0 || n_sources > MAX_SOURCES {
            return Err(abort(format!(
                "{n_sources} sources; a packet reduces 1 to {MAX_SOURCES} (docs/contract/device.md §2.1)"
            )));
        }
        match (op, scales) {
            (CceOp::Fma, None) => return Err(abort("FMA needs one scale per source".into())),
            (CceOp::Fma, Some(s)) if s.len() != n_sources => {
                return Err(abort(format!(
                    "FMA has {} scales for {n_sources} sources",
                    s.len()
                )))
            }
            (CceOp::Fma, _) | (_, None) => {}
            (_, Some(_)) => return Err(abort(format!("op {op:?} takes no scales"))),
        }
        Ok(Plan {
            codec,
            op,
            scales,
            n_sources,
        })
    }

    /// Run over `dst`: the sources are `others` with, if `inout` is `Some(pos)`, `dst` itself
    /// inserted at position `pos`.
    fn run(&self, others: &[&[u8]], inout: Option<usize>, dst: &mut [u8]) -> Result<()> {
        let size = self.codec.size();
        if dst.len() % size != 0 {
            return Err(abort(format!(
                "{} bytes is not a whole number of {} elements",
                dst.len(),
                self.codec.dtype()
            )));
        }
        let n = dst.len() / size;
        // Recycled scratch: zeroing two blocks per call would cost as much as reducing a
        // small packet.
        let mut scratch = SCRATCH
            .lock()
            .pop()
            .unwrap_or_else(|| (vec![0.0; BLOCK], vec![0.0; BLOCK]));
        let (acc, x) = &mut scratch;
        let r = self.run_blocks(others, inout, dst, n, acc, x);
        let mut idle = SCRATCH.lock();
        if idle.len() < MAX_IDLE_SCRATCH {
            idle.push(scratch);
        }
        r
    }

    /// [`Plan::run`] over caller-provided scratch of [`BLOCK`] elements each.
    fn run_blocks(
        &self,
        others: &[&[u8]],
        inout: Option<usize>,
        dst: &mut [u8],
        n: usize,
        acc: &mut [f32],
        x: &mut [f32],
    ) -> Result<()> {
        let size = self.codec.size();
        let mut start = 0;
        while start < n {
            let len = BLOCK.min(n - start);
            let r = start * size..(start + len) * size;
            let acc = &mut acc[..len];
            {
                let dst_ro: &[u8] = dst;
                let src = |i: usize| -> &[u8] {
                    match inout {
                        Some(p) if i == p => &dst_ro[r.clone()],
                        Some(p) if i > p => &others[i - 1][r.clone()],
                        _ => &others[i][r.clone()],
                    }
                };
                match (self.codec, self.op) {
                    (_, CceOp::Fma) => self.combine_block(acc, &mut x[..len], src),
                    (FloatCodec::Fp32, op) => fused_block::<LaneF32>(acc, op, self.n_sources, src),
                    (FloatCodec::Bf16, op) => fused_block::<LaneBf16>(acc, op, self.n_sources, src),
                    _ => self.combine_block(acc, &mut x[..len], src),
                }
            }
            self.store(acc, &mut dst[r]);
            start += len;
        }
        Ok(())
    }

    /// Widen each source block, combine into `acc` (one op dispatch per source block).
    fn combine_block<'a>(&self, acc: &mut [f32], x: &mut [f32], src: impl Fn(usize) -> &'a [u8]) {
        self.codec.widen(src(0), acc);
        if let Some(s) = self.scales {
            let s0 = s[0];
            acc.iter_mut().for_each(|a| *a *= s0);
        }
        for i in 1..self.n_sources {
            self.codec.widen(src(i), x);
            match self.op {
                CceOp::Add => acc.iter_mut().zip(&*x).for_each(|(a, b)| *a += *b),
                CceOp::Max => acc
                    .iter_mut()
                    .zip(&*x)
                    .for_each(|(a, b)| *a = max_nan(*a, *b)),
                CceOp::Min => acc
                    .iter_mut()
                    .zip(&*x)
                    .for_each(|(a, b)| *a = min_nan(*a, *b)),
                CceOp::Fma => {
                    let s = self.scales.expect("checked in Plan::new")[i];
                    acc.iter_mut()
                        .zip(&*x)
                        .for_each(|(a, b)| *a = b.mul_add(s, *a));
                }
                CceOp::Ext | CceOp::Gce => unreachable!("rejected in Plan::new"),
            }
        }
    }

    fn store(&self, acc: &[f32], out: &mut [u8]) {
        self.codec.narrow(acc, out);
    }
}

/// An element type whose widening is a load and a shift: fused into the combine loop.
trait Lane {
    const SIZE: usize;
    fn load(c: &[u8]) -> f32;
}

struct LaneF32;
impl Lane for LaneF32 {
    const SIZE: usize = 4;
    #[inline(always)]
    fn load(c: &[u8]) -> f32 {
        f32::from_le_bytes([c[0], c[1], c[2], c[3]])
    }
}

struct LaneBf16;
impl Lane for LaneBf16 {
    const SIZE: usize = 2;
    #[inline(always)]
    fn load(c: &[u8]) -> f32 {
        f32::from_bits(u32::from(u16::from_le_bytes([c[0], c[1]])) << 16)
    }
}

/// ADD/MAX/MIN straight from the source bytes, without the scratch copy (FP32 and BF16, whose
/// widening is free). One op dispatch per block; the loops are monomorphic.
fn fused_block<'a, L: Lane>(acc: &mut [f32], op: CceOp, n: usize, src: impl Fn(usize) -> &'a [u8]) {
    match op {
        CceOp::Add => fused::<L>(acc, n, src, |a, b| a + b),
        CceOp::Max => fused::<L>(acc, n, src, max_nan),
        CceOp::Min => fused::<L>(acc, n, src, min_nan),
        _ => unreachable!("FMA takes the scratch path"),
    }
}

#[inline(always)]
fn fused<'a, L: Lane>(
    acc: &mut [f32],
    n: usize,
    src: impl Fn(usize) -> &'a [u8],
    f: impl Fn(f32, f32) -> f32 + Copy,
) {
    if n == 1 {
        acc.iter_mut()
            .zip(src(0).chunks_exact(L::SIZE))
            .for_each(|(a, c)| *a = L::load(c));
        return;
    }
    acc.iter_mut()
        .zip(
            src(0)
                .chunks_exact(L::SIZE)
                .zip(src(1).chunks_exact(L::SIZE)),
        )
        .for_each(|(a, (c0, c1))| *a = f(L::load(c0), L::load(c1)));
    for i in 2..n {
        acc.iter_mut()
            .zip(src(i).chunks_exact(L::SIZE))
            .for_each(|(a, c)| *a = f(*a, L::load(c)));
    }
}

/// NaN-propagating maximum with −0 < +0 (IEEE 754-2019 `maximum`). Branch-free shape so the
/// loop vectorizes; equal operands (including ±0) combine by AND of the bits, which picks +0.
#[inline(always)]
fn max_nan(a: f32, b: f32) -> f32 {
    let m = if a > b {
        a
    } else if b > a {
        b
    } else {
        f32::from_bits(a.to_bits() & b.to_bits())
    };
    if a.is_nan() || b.is_nan() {
        f32::NAN
    } else {
        m
    }
}

/// NaN-propagating minimum with −0 < +0 (IEEE 754-2019 `minimum`): equal operands combine by OR
/// of the bits, which picks −0.
#[inline(always)]
fn min_nan(a: f32, b: f32) -> f32 {
    let m = if a < b {
        a
    } else if b < a {
        b
    } else {
        f32::from_bits(a.to_bits() | b.to_bits())
    };
    if a.is_nan() || b.is_nan() {
        f32::NAN
    } else {
        m
    }
}

#[cfg(test)]
mod tests;

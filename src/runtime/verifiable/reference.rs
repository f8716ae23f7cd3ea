//! The reference result of a collective, computed from the request and the inputs alone —
//! never from the program — following each op's definition (docs/contract/lowering.md §4; the request
//! conventions of `CollectiveRequest`), in f64 (floats, exact for verifiable data) or i128
//! (integers), then encoded with the dtype's codec.
//!
//! With `c = count`, N ranks, `pred(r) = r − 1 mod N` in group order:
//! * all-reduce: `out_r[e] = ⊕_q in_q[e]`; reduce-scatter: `out_r[e] = ⊕_q in_q[r·c + e]`;
//! * all-gather: `out_r[k·c + e] = in_k[e]`; all-to-all: `out_r[i·c + e] = in_i[r·c + e]`;
//! * all-to-all-v (its resolved table): `out_r[recv_displs[r][q] + e] =
//!   in_q[send_displs[q][r] + e]` for `e < send_counts[q][r]`, the rest untouched;
//! * permute and send/recv with pairs `(s → t)`: `out_t = in_s`, a non-target untouched;
//!   send/recv without pairs: rank 0 sends to rank 1 (the 2-rank leg of the point-to-point
//!   composer), rank 0's output untouched;
//! * implicit permute: `out_r = in_pred(r)`; implicit permute-reduce: `out_r[e] =
//!   in_pred(r)[e] ⊕ in_pred(r)[c + e]`;
//! * barrier: no data.
//!
//! "Untouched" is zero out of place and the rank's own input in place (module doc of
//! [`super`]).

use std::fmt;

use super::{codec, elem_size, is_signed, same_on_every_rank, BLOCK};
use crate::dtype::FloatCodec;
use crate::error::{Error, Result};
use crate::isa::enums::Dtype;
use crate::lower::request::{CollectiveOp, CollectiveRequest, ReduceOp};

/// Where a run of output elements comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Src {
    /// Copied from rank `.0`'s input, from input element `.1` on.
    Copy(u32, u64),
    /// Element-wise reduction of these (rank, first input element) terms.
    Reduce(Vec<(u32, u64)>),
    /// Not written by the op.
    Untouched,
}

/// Output elements `[start, start + len)` of one rank.
#[derive(Debug, Clone)]
struct Run {
    start: u64,
    len: u64,
    src: Src,
}

fn run(start: u64, len: u64, src: Src) -> Run {
    Run { start, len, src }
}

/// The runs covering rank `rank`'s whole output, in order.
fn runs(req: &CollectiveRequest, rank: u32) -> Result<Vec<Run>> {
    let n = req.rank_n();
    let c = req.count;
    let pred = (rank + n - 1) % n;
    let all = |at: u64| (0..n).map(|q| (q, at)).collect::<Vec<_>>();
    let from = |s: Option<u32>| match s {
        Some(s) => vec![run(0, c, Src::Copy(s, 0))],
        None => vec![run(0, c, Src::Untouched)],
    };
    let mut v = match req.op {
        CollectiveOp::AllReduce => vec![run(0, c, Src::Reduce(all(0)))],
        CollectiveOp::ReduceScatter => vec![run(0, c, Src::Reduce(all(u64::from(rank) * c)))],
        CollectiveOp::AllGather => (0..n)
            .map(|k| run(u64::from(k) * c, c, Src::Copy(k, 0)))
            .collect(),
        CollectiveOp::AllToAll => (0..n)
            .map(|i| run(u64::from(i) * c, c, Src::Copy(i, u64::from(rank) * c)))
            .collect(),
        CollectiveOp::AllToAllV => a2av_runs(req, rank)?,
        CollectiveOp::Permute | CollectiveOp::Send | CollectiveOp::Recv
            if !req.pairs.is_empty() =>
        {
            from(req.pairs.iter().find(|p| p.1 == rank).map(|p| p.0))
        }
        CollectiveOp::Send | CollectiveOp::Recv => from((rank == 1).then_some(0)),
        CollectiveOp::Permute => from(None),
        CollectiveOp::PermuteImplicit => from(Some(pred)),
        CollectiveOp::PermuteReduceImplicit => {
            vec![run(0, c, Src::Reduce(vec![(pred, 0), (pred, c)]))]
        }
        CollectiveOp::Barrier => Vec::new(),
    };
    v.retain(|r| r.len > 0);
    Ok(v)
}

/// All-to-all-v runs from the resolved table, gaps untouched.
fn a2av_runs(req: &CollectiveRequest, rank: u32) -> Result<Vec<Run>> {
    let t = req
        .a2av
        .as_ref()
        .and_then(|m| m.table.as_ref())
        .ok_or_else(|| {
            Error::invalid("all-to-all-v without a resolved table has no reference result")
        })?;
    let r = rank as usize;
    let mut got: Vec<Run> = (0..req.rank_n() as usize)
        .map(|q| {
            let len = t.send_counts[q][r];
            run(
                t.recv_displs[r][q],
                len,
                Src::Copy(q as u32, t.send_displs[q][r]),
            )
        })
        .filter(|w| w.len > 0)
        .collect();
    got.sort_by_key(|w| w.start);
    let mut v = Vec::with_capacity(2 * got.len() + 1);
    let mut pos = 0;
    for w in got {
        if w.start < pos {
            return Err(Error::invalid(format!(
                "all-to-all-v: rank {rank}'s receive windows overlap at element {}",
                w.start
            )));
        }
        v.push(run(pos, w.start - pos, Src::Untouched));
        pos = w.start + w.len;
        v.push(w);
    }
    v.push(run(
        pos,
        req.output_elems().saturating_sub(pos),
        Src::Untouched,
    ));
    Ok(v)
}

/// The inputs and what it takes to combine them.
struct Reference<'a> {
    req: &'a CollectiveRequest,
    inputs: &'a [Vec<u8>],
    esz: usize,
    codec: Option<FloatCodec>,
}

impl<'a> Reference<'a> {
    fn new(req: &'a CollectiveRequest, inputs: &'a [Vec<u8>]) -> Result<Self> {
        let esz = elem_size(req.dtype)?;
        let want = req.input_elems() * esz as u64;
        if inputs.len() != req.rank_n() as usize {
            return Err(Error::invalid(format!(
                "reference: {} inputs for {} ranks",
                inputs.len(),
                req.rank_n()
            )));
        }
        if let Some(r) = inputs.iter().position(|i| i.len() as u64 != want) {
            return Err(Error::invalid(format!(
                "reference: rank {r}'s input has {} bytes, the request needs {want}",
                inputs[r].len()
            )));
        }
        if req.op.is_reducing() && req.reduce.is_none() {
            return Err(Error::invalid(
                "reference: a reducing op without a reduce op",
            ));
        }
        Ok(Reference {
            req,
            inputs,
            esz,
            codec: codec(req.dtype)?,
        })
    }

    fn bytes(&self, rank: u32, elem: u64, len: usize) -> &[u8] {
        let a = elem as usize * self.esz;
        &self.inputs[rank as usize][a..a + len]
    }

    /// The expected bytes of output elements `[start, start + out.len() / esz)` of `rank`.
    fn fill(&self, rank: u32, runs: &[Run], start: u64, out: &mut [u8]) {
        let esz = self.esz as u64;
        let end = start + out.len() as u64 / esz;
        for r in runs {
            let (a, b) = (r.start.max(start), (r.start + r.len).min(end));
            if a >= b {
                continue;
            }
            let dst = &mut out[((a - start) * esz) as usize..((b - start) * esz) as usize];
            let off = a - r.start;
            match &r.src {
                Src::Copy(q, at) => dst.copy_from_slice(self.bytes(*q, at + off, dst.len())),
                Src::Untouched => {
                    let own = self.req.input_elems();
                    let kept = if self.req.in_place {
                        own.clamp(a, b) - a
                    } else {
                        0
                    };
                    let k = (kept * esz) as usize;
                    if k > 0 {
                        dst[..k].copy_from_slice(self.bytes(rank, a, k));
                    }
                    dst[k..].fill(0);
                }
                Src::Reduce(terms) => self.reduce_into(terms, off, dst),
            }
        }
    }

    /// `dst` = the element-wise reduction of `terms`, each from its element `off` on.
    fn reduce_into(&self, terms: &[(u32, u64)], off: u64, dst: &mut [u8]) {
        let op = self.req.reduce.unwrap_or(ReduceOp::Add);
        let esz = self.esz;
        match &self.codec {
            Some(c) => {
                let mut acc = [0f64; BLOCK];
                let mut tmp = [0f32; BLOCK];
                for (b, chunk) in dst.chunks_mut(BLOCK * esz).enumerate() {
                    let n = chunk.len() / esz;
                    let first = off + (b * BLOCK) as u64;
                    for (k, &(q, at)) in terms.iter().enumerate() {
                        c.widen(self.bytes(q, at + first, n * esz), &mut tmp[..n]);
                        for (a, &x) in acc[..n].iter_mut().zip(&tmp[..n]) {
                            let x = f64::from(x);
                            *a = if k == 0 { x } else { fold(op, *a, x) };
                        }
                    }
                    for (t, a) in tmp[..n].iter_mut().zip(&acc[..n]) {
                        *t = *a as f32;
                    }
                    c.narrow(&tmp[..n], chunk);
                }
            }
            None => {
                let signed = is_signed(self.req.dtype);
                for (j, e) in dst.chunks_exact_mut(esz).enumerate() {
                    let mut v = 0i128;
                    for (k, &(q, at)) in terms.iter().enumerate() {
                        let x = get_int(self.bytes(q, at + off + j as u64, esz), signed);
                        v = if k == 0 { x } else { fold_int(op, v, x) };
                    }
                    super::put_int(v, e);
                }
            }
        }
    }
}

fn fold(op: ReduceOp, a: f64, b: f64) -> f64 {
    match op {
        ReduceOp::Add => a + b,
        ReduceOp::Max => a.max(b),
        ReduceOp::Min => a.min(b),
    }
}

fn fold_int(op: ReduceOp, a: i128, b: i128) -> i128 {
    match op {
        ReduceOp::Add => a + b,
        ReduceOp::Max => a.max(b),
        ReduceOp::Min => a.min(b),
    }
}

/// An integer element (little-endian, sign-extended when `signed`).
fn get_int(bytes: &[u8], signed: bool) -> i128 {
    let neg = signed && bytes.last().is_some_and(|b| b & 0x80 != 0);
    let mut b = [if neg { 0xFF } else { 0 }; 16];
    b[..bytes.len()].copy_from_slice(bytes);
    i128::from_le_bytes(b)
}

/// The exact result of `req` on `inputs` for every rank (`req.output_elems()` elements each;
/// empty for a barrier).
pub fn expected(req: &CollectiveRequest, inputs: &[Vec<u8>]) -> Result<Vec<Vec<u8>>> {
    expected_of(req, inputs, 0..req.rank_n())
}

/// [`expected`] for the ranks in `ranks` only (a process of a multi-process job holds a few
/// of the world's ranks: the others' results would cost it world × size bytes).
pub fn expected_of(
    req: &CollectiveRequest,
    inputs: &[Vec<u8>],
    ranks: std::ops::Range<u32>,
) -> Result<Vec<Vec<u8>>> {
    let rf = Reference::new(req, inputs)?;
    let one = |r: u32| -> Result<Vec<u8>> {
        let mut out = vec![0u8; req.output_elems() as usize * rf.esz];
        rf.fill(r, &runs(req, r)?, 0, &mut out);
        Ok(out)
    };
    if same_on_every_rank(req.op) && !ranks.is_empty() {
        let out = one(ranks.start)?;
        return Ok(vec![out; ranks.len()]);
    }
    ranks.map(one).collect()
}

/// The outcome of [`check`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    /// Elements that differ from the reference, over every rank.
    pub wrong: u64,
    /// The first of them (lowest rank, then element).
    pub first: Option<Mismatch>,
}

/// Compare every rank's result `got` with the reference of `req` on `inputs` without
/// materialising it: blocks of 64 Ki elements, computed once per block for the ops whose
/// result is the same on every rank. An error if a result has the wrong size.
pub fn check(req: &CollectiveRequest, inputs: &[Vec<u8>], got: &[Vec<u8>]) -> Result<Checked> {
    const CHUNK: u64 = 1 << 16;
    let rf = Reference::new(req, inputs)?;
    let esz = rf.esz;
    let out_bytes = req.output_elems() as usize * esz;
    if got.len() != req.rank_n() as usize {
        return Err(Error::invalid(format!(
            "check: {} results for {} ranks",
            got.len(),
            req.rank_n()
        )));
    }
    if let Some(r) = got.iter().position(|g| g.len() != out_bytes) {
        return Err(Error::invalid(format!(
            "check: rank {r}'s result has {} bytes, the request gives {out_bytes}",
            got[r].len()
        )));
    }
    let mut res = Checked {
        wrong: 0,
        first: None,
    };
    let shared = same_on_every_rank(req.op);
    let mut buf = vec![0u8; (CHUNK as usize).min(req.output_elems() as usize) * esz];
    let groups: Vec<Vec<u32>> = if shared {
        vec![(0..req.rank_n()).collect()]
    } else {
        (0..req.rank_n()).map(|r| vec![r]).collect()
    };
    for ranks in groups {
        let rs = runs(req, ranks[0])?;
        let mut start = 0;
        while start < req.output_elems() {
            let n = CHUNK.min(req.output_elems() - start) as usize;
            let want = &mut buf[..n * esz];
            rf.fill(ranks[0], &rs, start, want);
            for &r in &ranks {
                let g = &got[r as usize][start as usize * esz..(start as usize + n) * esz];
                if g != want {
                    tally(&mut res, req.dtype, r, start, g, want, esz);
                }
            }
            start += n as u64;
        }
    }
    Ok(res)
}

/// Count the differing elements of `g` against `w` (element `start` on) into `res`.
fn tally(res: &mut Checked, d: Dtype, rank: u32, start: u64, g: &[u8], w: &[u8], esz: usize) {
    for (i, (a, b)) in g.chunks_exact(esz).zip(w.chunks_exact(esz)).enumerate() {
        if a != b {
            res.wrong += 1;
            let m = Mismatch {
                rank,
                elem: start + i as u64,
                dtype: d,
                expected: b.to_vec(),
                got: a.to_vec(),
            };
            if res
                .first
                .as_ref()
                .is_none_or(|f| (rank, m.elem) < (f.rank, f.elem))
            {
                res.first = Some(m);
            }
        }
    }
}

/// One element that differs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// Rank.
    pub rank: u32,
    /// Output element index.
    pub elem: u64,
    /// The dtype (for display).
    pub dtype: Dtype,
    /// Expected bytes.
    pub expected: Vec<u8>,
    /// Bytes found (empty: the result is shorter).
    pub got: Vec<u8>,
}

/// An element's value and bytes, e.g. `-3 (0xc040)`.
fn show(d: Dtype, b: &[u8]) -> String {
    if b.is_empty() {
        return "nothing (result too short)".into();
    }
    let hex: String = b.iter().rev().map(|x| format!("{x:02x}")).collect();
    let v = match codec(d) {
        Ok(Some(c)) if b.len() == c.size() => c.widen_one(b).to_string(),
        Ok(None) if b.len() <= 16 => get_int(b, is_signed(d)).to_string(),
        _ => "?".into(),
    };
    format!("{v} (0x{hex})")
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "rank {} element {}: expected {}, got {}",
            self.rank,
            self.elem,
            show(self.dtype, &self.expected),
            show(self.dtype, &self.got)
        )
    }
}

/// Walk every element of `got` against `want` (ranks and elements in order); elements present
/// on one side only differ. Calls `on` for each difference until it returns false.
fn walk(
    req: &CollectiveRequest,
    got: &[Vec<u8>],
    want: &[Vec<u8>],
    mut on: impl FnMut(Mismatch) -> bool,
) {
    let esz = req.elem_bytes().unwrap_or(1).max(1) as usize;
    let empty = Vec::new();
    for r in 0..got.len().max(want.len()) {
        let (g, w) = (got.get(r).unwrap_or(&empty), want.get(r).unwrap_or(&empty));
        if g == w {
            continue;
        }
        for e in 0..g.len().max(w.len()).div_ceil(esz) {
            let part = |v: &'_ [u8]| -> std::ops::Range<usize> {
                (e * esz).min(v.len())..((e + 1) * esz).min(v.len())
            };
            let (a, b) = (&g[part(g)], &w[part(w)]);
            if a != b {
                let m = Mismatch {
                    rank: r as u32,
                    elem: e as u64,
                    dtype: req.dtype,
                    expected: b.to_vec(),
                    got: a.to_vec(),
                };
                if !on(m) {
                    return;
                }
            }
        }
    }
}

/// Elements of `got` that differ bitwise from `want` (every rank; an element missing on
/// either side counts).
pub fn count_wrong(req: &CollectiveRequest, got: &[Vec<u8>], want: &[Vec<u8>]) -> u64 {
    let mut n = 0;
    walk(req, got, want, |_| {
        n += 1;
        true
    });
    n
}

/// The first element (lowest rank, then element) where `got` differs from `want`.
pub fn first_mismatch(
    req: &CollectiveRequest,
    got: &[Vec<u8>],
    want: &[Vec<u8>],
) -> Option<Mismatch> {
    let mut first = None;
    walk(req, got, want, |m| {
        first = Some(m);
        false
    });
    first
}

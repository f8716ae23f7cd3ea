//! Deferred, parallel execution of a DMA engine's bulk data movement (issue 4 item 5: "bulk data
//! movement spread over the machine's cores"; design.md §2).
//!
//! The engine still walks its rings strictly in order and checks every packet when it reaches
//! it (framing, lengths, addresses, CCE dtype/op: an abort is reported exactly as before). What
//! it defers is only the byte work of plain memory-to-memory copies and CCE reduces: each is an
//! `Op` on resolved region spans, collected in a `Batch` and executed later by
//! `Batch::flush`, split over the machine's cores.
//!
//! **Why the result cannot change.** Pending ops sit in dependency *levels*: an op goes one
//! level above the highest level holding an op it conflicts with — one that writes bytes it
//! reads or writes, or reads bytes it writes (reads may overlap reads) — so the ops of a level
//! are pairwise independent and every op runs after each earlier op it conflicts with.
//! `Batch::flush` runs the levels in order, each level's ops in parallel. Independent ops
//! commute, and each element of each op is computed exactly as the in-order engine computes
//! it (the same CCE kernels, source order kept), so the bytes after a flush are those of
//! in-order execution, whatever the split and the thread timing. (A ring step that reduces a
//! chunk and then forwards it becomes two levels: every reduce, then every copy.) The batch is
//! flushed before anything could observe the pending bytes:
//! * before any semaphore write — the DMB-ordered "data then signal" of device.md §6.4 — and
//!   any access to an EVT_SEM window, executed in order right after;
//! * before an op that writes the engine's own rings (the only memory the engine itself reads
//!   while the batch is pending), or a same-region copy whose ranges overlap (`memmove`);
//! * when an op would need more than [`MAX_LEVELS`] levels;
//! * (not a flush) outside a bulk run (fewer than `dma::BULK_DESCS` TX descriptors posted),
//!   an op under [`DEFER_MIN_BYTES`] that depends on nothing pending runs at once, in order:
//!   it commutes with the pending ops, and deferring it would cost more than its bytes;
//! * before the engine returns, whether it stalled, finished or aborted — so sequencers and
//!   other engines only ever see flushed memory.
//!
//! **Split.** `Batch::flush` carves every region into disjoint destination slices and shared
//! gaps (safe `split_at_mut`, no `unsafe`), cuts large ops into element-aligned pieces of
//! [`PIECE_BYTES`], and per level hands contiguous runs of pieces of about equal bytes to
//! `threads` workers (`std::thread::scope`). Levels under [`PARALLEL_MIN_BYTES`] run on the
//! calling thread: spawning costs more than it saves. The thread count is
//! [`device_threads`]: `OPENNRT_DEVICE_THREADS` if set (1 = everything on the calling thread),
//! else the machine's available parallelism, at most [`MAX_THREADS`].

use std::sync::Arc;

use super::cce;
use super::memory::Memory;
use crate::dtype::{Dtype, Numerics};
use crate::isa::udma::CceOp;

/// Largest piece one worker takes at a time (elements are never split).
pub const PIECE_BYTES: usize = 256 << 10;

/// Ops smaller than this that depend on nothing pending run at once instead of being deferred.
pub const DEFER_MIN_BYTES: u64 = 16 << 10;

/// Levels smaller than this run on the calling thread.
pub const PARALLEL_MIN_BYTES: u64 = 1 << 20;

/// Most dependency levels a batch holds before it is flushed.
pub const MAX_LEVELS: usize = 64;

/// Most worker threads a flush uses.
pub const MAX_THREADS: usize = 16;

/// Worker threads for bulk data: `OPENNRT_DEVICE_THREADS` (1..=16) or the available parallelism.
pub fn device_threads() -> usize {
    static N: once_cell::sync::Lazy<usize> = once_cell::sync::Lazy::new(|| {
        std::env::var("OPENNRT_DEVICE_THREADS")
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .filter(|&n| n >= 1)
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            .min(MAX_THREADS)
    });
    *N
}

/// Bytes `off .. off + len` of region `region`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    pub region: usize,
    pub off: usize,
    pub len: usize,
}

impl Span {
    fn end(&self) -> usize {
        self.off + self.len
    }
}

/// A reduce source: bytes elsewhere, or the destination itself (in place).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SrcSpan {
    Mem(Span),
    Dst,
}

/// The CCE parameters of a reduce op (checked with [`cce::check`] before it is deferred).
#[derive(Debug, Clone)]
pub(crate) struct ReduceSpec {
    pub numerics: Numerics,
    pub op: CceOp,
    pub dtype: Dtype,
    pub scales: Option<Arc<[f32]>>,
}

/// One deferred data operation.
#[derive(Debug, Clone)]
pub(crate) enum Op {
    Copy {
        dst: Span,
        src: Span,
    },
    Reduce {
        dst: Span,
        srcs: Vec<SrcSpan>,
        spec: Arc<ReduceSpec>,
    },
}

impl Op {
    /// Bytes written.
    pub fn bytes(&self) -> u64 {
        self.dst().len as u64
    }
    fn dst(&self) -> Span {
        match self {
            Op::Copy { dst, .. } | Op::Reduce { dst, .. } => *dst,
        }
    }
    fn reads(&self) -> impl Iterator<Item = Span> + '_ {
        let (copy, red) = match self {
            Op::Copy { src, .. } => (Some(*src), &[][..]),
            Op::Reduce { srcs, .. } => (None, &srcs[..]),
        };
        copy.into_iter().chain(red.iter().filter_map(|s| match s {
            SrcSpan::Mem(m) => Some(*m),
            SrcSpan::Dst => None,
        }))
    }
    /// Element size: pieces never split an element.
    fn grain(&self) -> usize {
        match self {
            Op::Copy { .. } => 1,
            Op::Reduce { spec, .. } => spec.dtype.size_bytes().unwrap_or(1),
        }
    }
}

/// Union of byte ranges, kept merged and sorted: `(region, start, end)`. A sorted vector, not
/// a tree: a step's streams are contiguous, so the union stays a handful of ranges.
#[derive(Debug, Default)]
struct Ranges(Vec<(usize, usize, usize)>);

impl Ranges {
    /// Index of the first range that starts at or after `(region, off)`.
    fn after(&self, region: usize, off: usize) -> usize {
        self.0.partition_point(|&(r, a, _)| (r, a) < (region, off))
    }
    fn overlaps(&self, s: Span) -> bool {
        if s.len == 0 {
            return false;
        }
        // The last range starting before the span's end is the only candidate.
        let k = self.after(s.region, s.end());
        k > 0 && {
            let (r, _, end) = self.0[k - 1];
            r == s.region && end > s.off
        }
    }
    fn insert(&mut self, s: Span) {
        if s.len == 0 {
            return;
        }
        let (mut lo, mut hi) = (s.off, s.end());
        // Every range touching [lo, hi] is absorbed: they are consecutive, ending at `k`.
        let k = self.after(s.region, hi + 1);
        let mut first = k;
        while first > 0 {
            let (r, a, b) = self.0[first - 1];
            if r != s.region || b < lo {
                break;
            }
            lo = lo.min(a);
            hi = hi.max(b);
            first -= 1;
        }
        self.0.splice(first..k, [(s.region, lo, hi)]);
    }
}

/// The ops of one level: pairwise independent.
#[derive(Debug, Default)]
struct Level {
    ops: Vec<Op>,
    writes: Ranges,
    reads: Ranges,
}

impl Level {
    /// Would `op` read or write bytes an op of this level writes, or write bytes one reads?
    fn conflicts(&self, op: &Op) -> bool {
        let d = op.dst();
        self.writes.overlaps(d)
            || self.reads.overlaps(d)
            || op.reads().any(|s| self.writes.overlaps(s))
    }
}

/// Pending ops of one engine in dependency levels (module doc).
#[derive(Debug, Default)]
pub(crate) struct Batch {
    levels: Vec<Level>,
}

impl Batch {
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.levels.is_empty()
    }

    /// The level `op` would take: one above the highest level holding an op it conflicts
    /// with (0 if none). Every conflicting op is then in a lower level, so it runs first.
    pub fn level_for(&self, op: &Op) -> usize {
        self.levels
            .iter()
            .rposition(|l| l.conflicts(op))
            .map_or(0, |l| l + 1)
    }

    /// Defer `op` behind everything it depends on. Gives `op` back (deferring nothing) when
    /// that would need more than [`MAX_LEVELS`] levels: flush, then push again.
    pub fn push(&mut self, op: Op) -> Result<(), Op> {
        let at = self.level_for(&op);
        if at >= MAX_LEVELS {
            return Err(op);
        }
        if at == self.levels.len() {
            self.levels.push(Level::default());
        }
        let l = &mut self.levels[at];
        l.writes.insert(op.dst());
        for s in op.reads() {
            l.reads.insert(s);
        }
        l.ops.push(op);
        Ok(())
    }

    /// Execute every pending op, level by level (module doc), and empty the batch.
    pub fn flush(&mut self, mem: &mut Memory, threads: usize) {
        for level in std::mem::take(&mut self.levels) {
            // Spread only a level with enough bytes to pay for the workers.
            let bytes: u64 = level.ops.iter().map(Op::bytes).sum();
            let t = if bytes < PARALLEL_MIN_BYTES {
                1
            } else {
                threads.max(1)
            };
            run_level(mem, &level.ops, t);
        }
    }
}

/// Run independent ops on `threads` workers.
fn run_level(mem: &mut Memory, ops: &[Op], threads: usize) {
    let jobs = carve(mem, ops);
    if threads == 1 {
        jobs.into_iter().for_each(Job::run);
        return;
    }
    let mut pieces = Vec::with_capacity(jobs.len());
    jobs.into_iter().for_each(|j| j.cut_into(&mut pieces));
    if pieces.len() == 1 {
        pieces.into_iter().for_each(Job::run);
        return;
    }
    let total: usize = pieces.iter().map(|p| p.dst.len()).sum();
    let share = total.div_ceil(threads);
    let mut groups: Vec<Vec<Job<'_>>> = vec![Vec::new()];
    let mut acc = 0;
    for p in pieces {
        if acc >= share && groups.len() < threads {
            groups.push(Vec::new());
            acc = 0;
        }
        acc += p.dst.len();
        groups.last_mut().expect("one group").push(p);
    }
    std::thread::scope(|sc| {
        let mut rest = groups.into_iter();
        let mine = rest.next().unwrap_or_default();
        for g in rest {
            sc.spawn(move || g.into_iter().for_each(Job::run));
        }
        mine.into_iter().for_each(Job::run);
    });
}

/// A source of a carved job.
#[derive(Clone, Copy)]
enum JobSrc<'a> {
    Bytes(&'a [u8]),
    Dst,
}

/// An op with its bytes borrowed.
struct Job<'a> {
    dst: &'a mut [u8],
    srcs: Vec<JobSrc<'a>>,
    op: &'a Op,
}

impl<'a> Job<'a> {
    /// Cut into element-aligned pieces of at most [`PIECE_BYTES`], appended to `out`.
    fn cut_into(self, out: &mut Vec<Job<'a>>) {
        let g = self.op.grain();
        let step = (PIECE_BYTES / g).max(1) * g;
        if self.dst.len() <= step {
            out.push(self);
            return;
        }
        let Job { dst, srcs, op } = self;
        let mut at = 0;
        for d in dst.chunks_mut(step) {
            let n = d.len();
            let srcs = srcs
                .iter()
                .map(|s| match *s {
                    JobSrc::Bytes(b) => JobSrc::Bytes(&b[at..at + n]),
                    JobSrc::Dst => JobSrc::Dst,
                })
                .collect();
            out.push(Job { dst: d, srcs, op });
            at += n;
        }
    }

    fn run(self) {
        match self.op {
            Op::Copy { .. } => {
                if let [JobSrc::Bytes(b)] = self.srcs[..] {
                    self.dst.copy_from_slice(b);
                }
            }
            Op::Reduce { spec, .. } => reduce(spec, self.dst, &self.srcs),
        }
    }
}

/// One reduce job: out of place, in place, or through a copy when several sources are the
/// destination — as the in-order engine does it.
fn reduce(spec: &ReduceSpec, dst: &mut [u8], srcs: &[JobSrc<'_>]) {
    let at_dst: Vec<usize> = (0..srcs.len())
        .filter(|&i| matches!(srcs[i], JobSrc::Dst))
        .collect();
    let scales = spec.scales.as_deref();
    fn bytes<'b>(s: &JobSrc<'b>) -> Option<&'b [u8]> {
        match *s {
            JobSrc::Bytes(b) => Some(b),
            JobSrc::Dst => None,
        }
    }
    // The parameters were checked by `cce::check` when the op was deferred and every span has
    // the destination's length, so the kernels cannot fail here.
    let r = match at_dst[..] {
        [] => {
            let v: Vec<&[u8]> = srcs.iter().filter_map(bytes).collect();
            cce::reduce_with(&spec.numerics, spec.op, spec.dtype, &v, scales, dst)
        }
        [p] => {
            let v: Vec<&[u8]> = srcs.iter().filter_map(bytes).collect();
            cce::reduce_in_place_with(&spec.numerics, spec.op, spec.dtype, dst, p, &v, scales)
        }
        _ => {
            let copy = dst.to_vec();
            let v: Vec<&[u8]> = srcs.iter().map(|s| bytes(s).unwrap_or(&copy)).collect();
            cce::reduce_with(&spec.numerics, spec.op, spec.dtype, &v, scales, dst)
        }
    };
    debug_assert!(r.is_ok(), "deferred reduce failed after its checks: {r:?}");
}

/// Borrow every op's destination mutably and its sources shared, all at once: in each region
/// an op touches, the destinations (disjoint within a level, see [`Batch::push`]) are split
/// out and the bytes between them are shared gaps; a source lies inside one gap (it overlaps
/// no destination of its level).
fn carve<'a>(mem: &'a mut Memory, ops: &'a [Op]) -> Vec<Job<'a>> {
    let mut involved: Vec<usize> = ops
        .iter()
        .flat_map(|op| std::iter::once(op.dst()).chain(op.reads()))
        .map(|s| s.region)
        .collect();
    involved.sort_unstable();
    involved.dedup();
    let mut order: Vec<usize> = (0..ops.len()).collect();
    order.sort_by_key(|&i| (ops[i].dst().region, ops[i].dst().off));
    let mut dsts: Vec<Option<&'a mut [u8]>> = (0..ops.len()).map(|_| None).collect();
    // (region, start offset, shared gap bytes), sorted.
    let mut gaps: Vec<(usize, usize, &'a [u8])> = Vec::with_capacity(involved.len() + ops.len());
    let mut k = 0;
    for (r, data) in mem.regions_bytes_mut(&involved) {
        let mut rest: &'a mut [u8] = data;
        let mut pos = 0;
        while k < order.len() && ops[order[k]].dst().region == r {
            let d = ops[order[k]].dst();
            let (gap, tail) = rest.split_at_mut(d.off - pos);
            let (mine, tail) = tail.split_at_mut(d.len);
            gaps.push((r, pos, gap));
            dsts[order[k]] = Some(mine);
            rest = tail;
            pos = d.end();
            k += 1;
        }
        gaps.push((r, pos, rest));
    }
    let find = |s: Span| -> &'a [u8] {
        let at = gaps.partition_point(|&(r, start, _)| (r, start) <= (s.region, s.off)) - 1;
        let (_, start, bytes) = gaps[at];
        &bytes[s.off - start..s.off - start + s.len]
    };
    ops.iter()
        .zip(dsts)
        .map(|(op, dst)| {
            let dst = dst.expect("every op has its destination");
            let srcs = match op {
                Op::Copy { src, .. } => vec![JobSrc::Bytes(find(*src))],
                Op::Reduce { srcs, .. } => srcs
                    .iter()
                    .map(|s| match s {
                        SrcSpan::Mem(m) => JobSrc::Bytes(find(*m)),
                        SrcSpan::Dst => JobSrc::Dst,
                    })
                    .collect(),
            };
            Job { dst, srcs, op }
        })
        .collect()
}

#[cfg(test)]
#[path = "batch_tests.rs"]
mod tests;

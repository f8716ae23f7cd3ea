//! Deferred, parallel execution of the DMA engines' bulk data movement (bulk data movement
//! spread over the machine's cores; docs/design.md §2).
//!
//! The engines still walk their rings strictly in order and check every packet when they reach
//! it (framing, lengths, addresses, CCE dtype/op: an abort is reported exactly as before). What
//! they defer is only the byte work of plain memory-to-memory copies and CCE reduces: each is an
//! `Op` on resolved region spans, collected in a `Batch` and executed later by `Batch::flush`,
//! split over the machine's cores. In a [`super::executor::Machine`] run one batch serves every
//! engine of the machine (`dma::RunCx`), so the data of many steps and ranks is executed
//! together instead of one engine step at a time: per-step control (a flush, a wake-up) would
//! otherwise cost more than the bytes of a step.
//!
//! **Why the result cannot change.** Pending ops sit in dependency *levels*: an op goes one
//! level above the highest level holding an op it conflicts with — one that writes bytes it
//! reads or writes, or reads bytes it writes (reads may overlap reads) — so the ops of a level
//! are pairwise independent and every op runs after each earlier op it conflicts with.
//! `Batch::flush` runs the levels in order, each level's ops in parallel. Independent ops
//! commute, and each element of each op is computed exactly as the in-order engines compute
//! it (the same CCE kernels, source order kept), so the bytes after a flush are those of
//! in-order execution — in the order the executor ran the packets — whatever the split and the
//! thread timing. (A ring step that reduces a chunk and then forwards it becomes two levels:
//! every reduce, then every copy.)
//!
//! **Coalescing.** The emitter cuts a step into CCE packets of a few KiB (1024 or 2048
//! elements) and copy descriptors of at most 64 KiB, so a step arrives as a stream of adjacent
//! pieces. The batch keeps the
//! last op *open*: a piece that continues it (same kind and CCE parameters, destination and
//! every source adjacent to the open op's, and independent of it) extends it instead of
//! becoming an op of its own. The open op is placed in its level only when something else
//! comes; it is one op over the union of its pieces, which are pairwise independent, so this
//! is the same as placing each piece (its level is the highest any piece would need, and any
//! level at or above an op's needed level is free of ops it conflicts with). One level
//! placement per step instead of one per packet keeps the dependency bookkeeping off the
//! per-packet path.
//!
//! **When the batch is flushed** (what the engines do, `dma::exec`): before anything could
//! observe pending bytes other than through the batch's own ordering:
//! * before an op that cannot be deferred touches memory: a read or write of a region holding
//!   an engine's ring (the engines read their rings directly and the producer writes them), a
//!   same-region copy whose ranges overlap (`memmove`), an address that is not plain memory, a
//!   reduce with a partly overlapping source — all executed in order right after;
//! * before a semaphore write (the DMB-ordered "data then signal" of docs/contract/lowering.md
//!   §6.4) when another executor may read the signalled data (a shared run, `Machine::peers`), or
//!   when the write's source bytes are pending; inside one machine every reader of data is an
//!   engine op that goes through this batch, so a signal needs no flush there;
//! * when an op would need more than [`MAX_LEVELS`] levels;
//! * when the machine's run ends, however it ends, before a hang report and when it waits for
//!   its peers — so the host, reports and other processes only ever see flushed memory;
//! * (not a flush) outside a bulk run (fewer than `dma::BULK_DESCS` TX descriptors posted),
//!   an op under [`DEFER_MIN_BYTES`] that conflicts with nothing pending runs at once, in order:
//!   it commutes with the pending ops, and deferring it would cost more than its bytes.
//!
//! **Split.** `Batch::flush` carves every region into disjoint destination slices and shared
//! gaps (safe `split_at_mut`), cuts large ops into element-aligned pieces of [`PIECE_BYTES`],
//! and runs each level's pieces on a persistent pool of worker threads (created lazily once
//! per process, at most [`device_threads`] − 1 workers plus the calling thread): a worker takes
//! the next piece until none is left, so a slow or descheduled thread does not hold a level
//! up. An idle worker spins briefly ([`SPIN`]) and then sleeps on a condition variable, so a
//! level costs a wake-up, not a thread spawn. Levels under [`PARALLEL_MIN_BYTES`] run on the
//! calling thread. The thread count is [`device_threads`]: `OPENNRT_DEVICE_THREADS` if set (1 =
//! everything on the calling thread), else the machine's available parallelism, at most
//! [`MAX_THREADS`]. When another machine of the process is using the pool, a flush runs on its
//! own thread rather than waiting.
//!
//! **Kernels.** A copy piece is one `copy_from_slice` (the C library's vectorised `memcpy`);
//! a reduce piece is one call of the CCE kernels, which work on blocks of `cce::BLOCK`
//! contiguous elements with vectorised loops (FP32 ADD compiles to `addps` over 16-byte
//! loads, the FP32 narrow to compare-and-select; checked with `perf annotate`). Ops that run at
//! once (`copy_now`, `reduce_now`) use the same kernels on the region bytes directly.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

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

/// Most source lists of executed reduces a batch keeps for the next ones.
const MAX_SPARE_SRCS: usize = 4096;

/// Most worker threads a flush uses.
pub const MAX_THREADS: usize = 16;

/// How long an idle worker spins for the next level before it sleeps (and how long a flush
/// spins for its workers to finish before it sleeps): about the time between two levels of a
/// flush, far below a timeslice.
pub const SPIN: Duration = Duration::from_micros(20);

/// Worker threads for bulk data ([`crate::device::settings::threads`]).
pub fn device_threads() -> usize {
    crate::device::settings::threads()
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
    /// Do the two spans share a byte? (An empty span shares none.)
    pub(crate) fn overlaps(&self, o: &Span) -> bool {
        self.region == o.region
            && self.len > 0
            && o.len > 0
            && self.off < o.end()
            && o.off < self.end()
    }
    /// Does `o` start where this span ends, in the same region?
    fn followed_by(&self, o: &Span) -> bool {
        self.region == o.region && self.end() == o.off
    }
}

/// A reduce source: bytes elsewhere, or the destination itself (in place).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SrcSpan {
    Mem(Span),
    Dst,
}

/// The CCE parameters of a reduce op (checked with [`cce::check`] before it is deferred).
#[derive(Debug, Clone, PartialEq)]
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

/// The memory spans a reduce reads (its in-place source is its destination).
fn mem_srcs(srcs: &[SrcSpan]) -> impl Iterator<Item = Span> + Clone + '_ {
    srcs.iter().filter_map(|s| match s {
        SrcSpan::Mem(m) => Some(*m),
        SrcSpan::Dst => None,
    })
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
    fn reads(&self) -> impl Iterator<Item = Span> + Clone + '_ {
        let (copy, red) = match self {
            Op::Copy { src, .. } => (Some(*src), &[][..]),
            Op::Reduce { srcs, .. } => (None, &srcs[..]),
        };
        copy.into_iter().chain(mem_srcs(red))
    }
    /// Element size: pieces never split an element.
    fn grain(&self) -> usize {
        match self {
            Op::Copy { .. } => 1,
            Op::Reduce { spec, .. } => spec.dtype.size_bytes().unwrap_or(1),
        }
    }
    /// Would an op writing `dst` and reading `reads` conflict with this one?
    fn conflicts(&self, dst: Span, reads: impl Iterator<Item = Span> + Clone) -> bool {
        let d = self.dst();
        d.overlaps(&dst)
            || self.reads().any(|r| r.overlaps(&dst))
            || reads.into_iter().any(|r| r.overlaps(&d))
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
    /// Empty, keeping the capacity of its lists; the reduces' source lists go to `spare`.
    fn clear(&mut self, spare: &mut Vec<Vec<SrcSpan>>) {
        for op in self.ops.drain(..) {
            if let (Op::Reduce { srcs, .. }, true) = (op, spare.len() < MAX_SPARE_SRCS) {
                spare.push(srcs);
            }
        }
        self.writes.0.clear();
        self.reads.0.clear();
    }

    /// Would an op writing `dst` and reading `reads` read or write bytes an op of this level
    /// writes, or write bytes one reads?
    fn conflicts(&self, dst: Span, mut reads: impl Iterator<Item = Span>) -> bool {
        self.writes.overlaps(dst)
            || self.reads.overlaps(dst)
            || reads.any(|s| self.writes.overlaps(s))
    }
}

/// Pending ops of the engines in dependency levels, plus the open op (module doc).
#[derive(Debug)]
pub(crate) struct Batch {
    levels: Vec<Level>,
    /// Emptied levels kept for the next ones: a batch lives as long as its machine's run
    /// context (a resident machine's, across runs), and its levels' lists then stop growing
    /// after the first run instead of being allocated, grown and freed at every flush.
    spare: Vec<Level>,
    /// Source lists of executed reduces, for the next ones (as `spare`: a 64 MiB all-reduce
    /// defers hundreds of reduces per run).
    spare_srcs: Vec<Vec<SrcSpan>>,
    /// The op later pieces may still extend; not in a level yet.
    open: Option<Op>,
    /// Threads a flush may use (the caller's included).
    threads: usize,
    /// What a level's run allocates, kept for the next level.
    bufs: LevelBufs,
}

impl Default for Batch {
    fn default() -> Self {
        Batch::new(device_threads())
    }
}

impl Batch {
    /// An empty batch whose flushes use up to `threads` threads.
    pub fn new(threads: usize) -> Batch {
        Batch {
            levels: Vec::new(),
            spare: Vec::new(),
            spare_srcs: Vec::new(),
            open: None,
            threads: threads.clamp(1, MAX_THREADS),
            bufs: LevelBufs::default(),
        }
    }

    /// Nothing pending?
    pub fn is_empty(&self) -> bool {
        self.levels.is_empty() && self.open.is_none()
    }

    /// Would an op writing `dst` and reading `reads` commute with everything pending (no
    /// pending op writes what it reads or writes, or reads what it writes)?
    pub fn independent(&self, dst: Span, reads: impl Iterator<Item = Span> + Clone) -> bool {
        self.open
            .as_ref()
            .is_none_or(|o| !o.conflicts(dst, reads.clone()))
            && self.levels.iter().all(|l| !l.conflicts(dst, reads.clone()))
    }

    /// Does a pending op write a byte of `s`?
    pub fn writes_overlap(&self, s: Span) -> bool {
        self.open.as_ref().is_some_and(|o| o.dst().overlaps(&s))
            || self.levels.iter().any(|l| l.writes.overlaps(s))
    }

    /// The level `op` would take among the placed levels: one above the highest level holding
    /// an op it conflicts with (0 if none). Every conflicting op is then in a lower level, so
    /// it runs first. (The open op is not in a level: see [`Batch::push`].)
    pub fn level_for(&self, op: &Op) -> usize {
        self.levels
            .iter()
            .rposition(|l| l.conflicts(op.dst(), op.reads()))
            .map_or(0, |l| l + 1)
    }

    /// Place `op` in its level, behind everything placed it depends on. Gives `op` back
    /// (placing nothing) when that would need more than [`MAX_LEVELS`] levels: flush, then
    /// push again. The open op must have been placed first (it is earlier).
    pub fn push(&mut self, op: Op) -> Result<(), Op> {
        debug_assert!(self.open.is_none(), "the open op is placed first");
        let at = self.level_for(&op);
        if at >= MAX_LEVELS {
            return Err(op);
        }
        if at == self.levels.len() {
            self.levels.push(self.spare.pop().unwrap_or_default());
        }
        let l = &mut self.levels[at];
        l.writes.insert(op.dst());
        for s in op.reads() {
            l.reads.insert(s);
        }
        l.ops.push(op);
        Ok(())
    }

    /// Place the open op (flushing the levels first when they are full).
    fn close(&mut self, mem: &mut Memory) {
        if let Some(o) = self.open.take() {
            if let Err(o) = self.push(o) {
                self.run_levels(mem);
                let placed = self.push(o);
                debug_assert!(placed.is_ok(), "an empty batch takes any op");
            }
        }
    }

    /// Defer the copy `src → dst` (disjoint plain-memory spans): it extends the open op when it
    /// continues it (module doc), else the open op is placed and this one opens.
    pub fn add_copy(&mut self, mem: &mut Memory, dst: Span, src: Span) {
        if let Some(Op::Copy { dst: d, src: s }) = &mut self.open {
            if d.followed_by(&dst) && s.followed_by(&src) && !dst.overlaps(s) && !src.overlaps(d) {
                d.len += dst.len;
                s.len += src.len;
                return;
            }
        }
        self.close(mem);
        self.open = Some(Op::Copy { dst, src });
    }

    /// Defer the reduce of `srcs` into `dst` with `spec` (every memory source disjoint from
    /// `dst`), extending the open op when it continues it.
    pub fn add_reduce(
        &mut self,
        mem: &mut Memory,
        spec: &Arc<ReduceSpec>,
        dst: Span,
        srcs: &[SrcSpan],
    ) {
        if let Some(Op::Reduce {
            dst: d,
            srcs: ss,
            spec: sp,
        }) = &mut self.open
        {
            let continues = (Arc::ptr_eq(sp, spec) || **sp == **spec)
                && d.followed_by(&dst)
                && ss.len() == srcs.len()
                && ss.iter().zip(srcs).all(|(a, b)| match (a, b) {
                    (SrcSpan::Dst, SrcSpan::Dst) => true,
                    (SrcSpan::Mem(a), SrcSpan::Mem(b)) => a.followed_by(b),
                    _ => false,
                })
                // The new piece must not read what the open op writes, nor write what it reads.
                && !mem_srcs(srcs).any(|b| b.overlaps(d))
                && !mem_srcs(ss).any(|a| a.overlaps(&dst));
            if continues {
                d.len += dst.len;
                for (a, b) in ss.iter_mut().zip(srcs) {
                    if let (SrcSpan::Mem(a), SrcSpan::Mem(b)) = (a, b) {
                        a.len += b.len;
                    }
                }
                return;
            }
        }
        self.close(mem);
        let mut list = self.spare_srcs.pop().unwrap_or_default();
        list.clear();
        list.extend_from_slice(srcs);
        self.open = Some(Op::Reduce {
            dst,
            srcs: list,
            spec: Arc::clone(spec),
        });
    }

    /// Execute every pending op, level by level (module doc), and empty the batch.
    pub fn flush(&mut self, mem: &mut Memory) {
        self.close(mem);
        self.run_levels(mem);
    }

    fn run_levels(&mut self, mem: &mut Memory) {
        let mut levels = std::mem::take(&mut self.levels);
        for mut level in levels.drain(..) {
            // Spread only a level with enough bytes to pay for the workers.
            let bytes: u64 = level.ops.iter().map(Op::bytes).sum();
            let t = if bytes < PARALLEL_MIN_BYTES {
                1
            } else {
                self.threads
            };
            run_level(mem, &level.ops, t, &mut self.bufs);
            level.clear(&mut self.spare_srcs);
            self.spare.push(level);
        }
        self.levels = levels;
    }
}

/// The lists [`run_level`] fills, kept by the batch from one level (and run) to the next: the
/// carved jobs' sources (one flat list), the jobs, and the pieces the threads take. A level of
/// a 64 MiB collective is hundreds of pieces; allocated and freed per level they were the
/// page faults that remained per run once the machine was resident (issue 26): the run
/// happens on whichever rank thread arrives last, whose malloc arena had not grown to them
/// yet. Empty between levels: their elements borrow a level's memory, so they are kept with
/// the `'static` lifetime and lent to each level through [`recycle`].
#[derive(Default)]
struct LevelBufs {
    srcs: Vec<JobSrc<'static>>,
    jobs: Vec<Job<'static>>,
    slots: Vec<Mutex<Option<Job<'static>>>>,
    carve: CarveBufs<'static>,
}

/// [`carve`]'s working lists (part of [`LevelBufs`]).
#[derive(Default)]
struct CarveBufs<'a> {
    involved: Vec<usize>,
    order: Vec<usize>,
    regions: Vec<(usize, &'a mut [u8])>,
    dsts: Vec<Option<&'a mut [u8]>>,
    gaps: Vec<(usize, usize, &'a [u8])>,
}

impl CarveBufs<'_> {
    /// The same lists, empty, for borrows of another lifetime ([`recycle`]).
    fn recycle<'b>(self) -> CarveBufs<'b> {
        let CarveBufs {
            mut involved,
            mut order,
            regions,
            dsts,
            gaps,
        } = self;
        involved.clear();
        order.clear();
        CarveBufs {
            involved,
            order,
            regions: recycle(regions),
            dsts: recycle(dsts),
            gaps: recycle(gaps),
        }
    }
}

impl std::fmt::Debug for LevelBufs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LevelBufs")
            .field("srcs", &self.srcs.capacity())
            .field("jobs", &self.jobs.capacity())
            .field("slots", &self.slots.capacity())
            .field("gaps", &self.carve.gaps.capacity())
            .finish()
    }
}

/// `v`'s buffer, emptied, as a vector of `U`: a type that differs only in lifetimes has the
/// same size and alignment, so the standard library's in-place collection keeps the
/// allocation (and its capacity; `tests::recycle_keeps_the_buffer`). Were it not to, the
/// result is a new empty vector — slower, never wrong. Safe code: nothing is transmuted, the
/// vector holds no element while its type changes.
fn recycle<T, U>(mut v: Vec<T>) -> Vec<U> {
    v.clear();
    v.into_iter()
        .map(|_| unreachable!("an empty vector"))
        .collect()
}

/// Run independent ops on up to `threads` threads (the caller's included), with the lists of
/// `bufs`.
fn run_level(mem: &mut Memory, ops: &[Op], threads: usize, bufs: &mut LevelBufs) {
    let mut srcs: Vec<JobSrc<'_>> = recycle(std::mem::take(&mut bufs.srcs));
    let mut jobs: Vec<Job<'_>> = recycle(std::mem::take(&mut bufs.jobs));
    let mut slots: Vec<Mutex<Option<Job<'_>>>> = recycle(std::mem::take(&mut bufs.slots));
    let mut cb = std::mem::take(&mut bufs.carve).recycle();
    carve(mem, ops, &mut cb, &mut srcs, &mut jobs);
    if threads <= 1 {
        jobs.drain(..).for_each(|j| j.run(&srcs));
    } else {
        // Each piece is taken by exactly one thread: the next index, then its slot.
        jobs.drain(..)
            .for_each(|j| j.cut(|p| slots.push(Mutex::new(Some(p)))));
        if slots.len() == 1 {
            if let Some(j) = slots[0].get_mut().take() {
                j.run(&srcs);
            }
        } else {
            let helpers = (threads - 1).min(slots.len().saturating_sub(1));
            let next = AtomicUsize::new(0);
            let work = || {
                while let Some(slot) = slots.get(next.fetch_add(1, Ordering::Relaxed)) {
                    if let Some(j) = slot.lock().take() {
                        j.run(&srcs);
                    }
                }
            };
            Pool::get().run(helpers, &work);
        }
        slots.clear();
    }
    bufs.srcs = recycle(srcs);
    bufs.jobs = recycle(jobs);
    bufs.slots = recycle(slots);
    bufs.carve = cb.recycle();
}

/// The work of one level, as the pool's threads see it: a shared closure every participant
/// calls once (it takes pieces until none is left).
#[derive(Clone, Copy)]
struct Task(*const (dyn Fn() + Sync + 'static));

// SAFETY: the pointee is `Sync`, and `Pool::run` does not return (nor unwind) before every
// worker that took the pointer has finished calling it (`Retire`).
unsafe impl Send for Task {}

/// The persistent worker threads of the process (module doc, "Split").
struct Pool {
    /// One level at a time; a second machine flushing meanwhile runs on its own thread.
    turn: Mutex<()>,
    state: Mutex<PoolState>,
    /// Workers sleep here for the next task.
    work: Condvar,
    /// The submitter sleeps here for the workers to finish.
    done: Condvar,
    /// `PoolState::gen`, readable without the lock (what idle workers spin on).
    gen: AtomicU64,
    /// Workers inside the current task.
    active: AtomicUsize,
    /// A worker's call of a task panicked (re-raised by the submitter).
    panicked: AtomicBool,
}

struct PoolState {
    /// Bumped for every task.
    gen: u64,
    /// The current task, while its submitter still accepts helpers.
    task: Option<Task>,
    /// How many more workers may join it.
    seats: usize,
    /// Worker threads spawned so far.
    workers: usize,
}

impl Pool {
    fn get() -> &'static Pool {
        static POOL: std::sync::OnceLock<Pool> = std::sync::OnceLock::new();
        POOL.get_or_init(|| Pool {
            turn: Mutex::new(()),
            state: Mutex::new(PoolState {
                gen: 0,
                task: None,
                seats: 0,
                workers: 0,
            }),
            work: Condvar::new(),
            done: Condvar::new(),
            gen: AtomicU64::new(0),
            active: AtomicUsize::new(0),
            panicked: AtomicBool::new(false),
        })
    }

    /// Call `f` on this thread and on up to `helpers` workers at once; return when every call
    /// has returned. Workers are spawned on first need, at most [`device_threads`] − 1.
    fn run(&'static self, helpers: usize, f: &(dyn Fn() + Sync)) {
        // At most `device_threads()` threads in all, the caller's included.
        let helpers = helpers.min(device_threads() - 1);
        let turn = if helpers == 0 {
            None
        } else {
            self.turn.try_lock()
        };
        let Some(_turn) = turn else {
            f();
            return;
        };
        // SAFETY: only the lifetime is erased. The pointer is published below and withdrawn
        // by `Retire` (on return and on unwind) before this function ends; `Retire` then waits
        // until no worker is inside the call (`active == 0`), and a worker can only take the
        // pointer while it is published (under `state`). So every use ends before `f` dies.
        let task = Task(unsafe {
            std::mem::transmute::<&(dyn Fn() + Sync + '_), &'static (dyn Fn() + Sync + 'static)>(f)
        });
        {
            let mut s = self.state.lock();
            self.spawn_workers(&mut s, helpers);
            s.gen += 1;
            s.task = Some(task);
            s.seats = helpers;
            self.gen.store(s.gen, Ordering::Release);
        }
        self.work.notify_all();
        let retire = Retire(self);
        f();
        drop(retire);
        if self.panicked.swap(false, Ordering::AcqRel) {
            panic!("a device worker thread panicked while executing deferred DMA data");
        }
    }

    /// Spawn workers until there are `n` (fewer if the system refuses threads).
    fn spawn_workers(&'static self, s: &mut PoolState, n: usize) {
        while s.workers < n {
            let seen = s.gen;
            let spawned = std::thread::Builder::new()
                .name(format!("opennrt-dma-{}", s.workers + 1))
                .spawn(move || self.worker(seen));
            if spawned.is_err() {
                break;
            }
            s.workers += 1;
        }
    }

    fn worker(&'static self, mut seen: u64) {
        loop {
            // Spin briefly: the next level of a flush usually follows within microseconds.
            let start = Instant::now();
            let mut k = 0u32;
            while self.gen.load(Ordering::Acquire) == seen {
                std::hint::spin_loop();
                k = k.wrapping_add(1);
                if k % 64 == 0 && start.elapsed() >= SPIN {
                    break;
                }
            }
            let task = {
                let mut s = self.state.lock();
                while s.gen == seen {
                    self.work.wait(&mut s);
                }
                seen = s.gen;
                match s.task {
                    Some(t) if s.seats > 0 => {
                        s.seats -= 1;
                        self.active.fetch_add(1, Ordering::AcqRel);
                        t
                    }
                    _ => continue,
                }
            };
            // SAFETY: `task` was taken while published and `active` counts this call, so the
            // submitter's `Retire` keeps the closure alive until the decrement below.
            let f = unsafe { &*task.0 };
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).is_err() {
                self.panicked.store(true, Ordering::Release);
            }
            if self.active.fetch_sub(1, Ordering::AcqRel) == 1 {
                let _s = self.state.lock();
                self.done.notify_all();
            }
        }
    }
}

/// Withdraws the current task and waits until no worker is inside it (also on unwind).
struct Retire(&'static Pool);

impl Drop for Retire {
    fn drop(&mut self) {
        let p = self.0;
        {
            let mut s = p.state.lock();
            s.task = None;
            s.seats = 0;
        }
        let start = Instant::now();
        while p.active.load(Ordering::Acquire) != 0 && start.elapsed() < SPIN {
            std::hint::spin_loop();
        }
        let mut s = p.state.lock();
        while p.active.load(Ordering::Acquire) != 0 {
            p.done.wait(&mut s);
        }
    }
}

/// A source of a carved job.
#[derive(Clone, Copy)]
enum JobSrc<'a> {
    Bytes(&'a [u8]),
    Dst,
}

/// An op, or a piece of one, with its bytes borrowed: `dst` is bytes `at .. at + dst.len()` of
/// the op's destination, and its sources are the same bytes of the op's sources, which are
/// `srcs` of the level's flat source list (whole, as carved).
struct Job<'a> {
    dst: &'a mut [u8],
    srcs: Range<usize>,
    at: usize,
    op: &'a Op,
}

impl<'a> Job<'a> {
    /// Cut into element-aligned pieces of at most [`PIECE_BYTES`], each handed to `out`.
    fn cut(self, mut out: impl FnMut(Job<'a>)) {
        let g = self.op.grain();
        let step = (PIECE_BYTES / g).max(1) * g;
        if self.dst.len() <= step {
            out(self);
            return;
        }
        let Job { dst, srcs, at, op } = self;
        let mut off = at;
        for d in dst.chunks_mut(step) {
            let n = d.len();
            out(Job {
                dst: d,
                srcs: srcs.clone(),
                at: off,
                op,
            });
            off += n;
        }
    }

    /// Execute it; `all` is the level's flat source list.
    fn run(self, all: &[JobSrc<'a>]) {
        let (at, n) = (self.at, self.dst.len());
        let piece = |s: &JobSrc<'a>| match *s {
            JobSrc::Bytes(b) => JobSrc::Bytes(&b[at..at + n]),
            JobSrc::Dst => JobSrc::Dst,
        };
        let srcs = &all[self.srcs];
        match self.op {
            Op::Copy { .. } => {
                if let [JobSrc::Bytes(b)] = srcs {
                    self.dst.copy_from_slice(&b[at..at + n]);
                }
            }
            Op::Reduce { spec, .. } => {
                let mut js = [JobSrc::Dst; cce::MAX_SOURCES];
                for (j, s) in js.iter_mut().zip(srcs) {
                    *j = piece(s);
                }
                reduce(spec, self.dst, &js[..srcs.len().min(cce::MAX_SOURCES)]);
            }
        }
    }
}

/// One reduce job: out of place, in place, or through a copy when several sources are the
/// destination — as the in-order engine does it.
fn reduce(spec: &ReduceSpec, dst: &mut [u8], srcs: &[JobSrc<'_>]) {
    let scales = spec.scales.as_deref();
    // The sources that are not the destination, in order, and where the destination is.
    let mut v: [&[u8]; cce::MAX_SOURCES] = [&[]; cce::MAX_SOURCES];
    let (mut n, mut in_place, mut at) = (0, 0, 0);
    for (i, s) in srcs.iter().take(cce::MAX_SOURCES).enumerate() {
        match *s {
            JobSrc::Bytes(b) => {
                v[n] = b;
                n += 1;
            }
            JobSrc::Dst => {
                in_place += 1;
                at = i;
            }
        }
    }
    // The parameters were checked by `cce::check` when the op was deferred and every span has
    // the destination's length, so the kernels cannot fail here.
    let (nm, op, dt) = (&spec.numerics, spec.op, spec.dtype);
    let r = match in_place {
        0 => cce::reduce_with(nm, op, dt, &v[..n], scales, dst),
        1 => cce::reduce_in_place_with(nm, op, dt, dst, at, &v[..n], scales),
        _ => {
            let copy = dst.to_vec();
            for (slot, s) in v.iter_mut().zip(srcs) {
                *slot = match *s {
                    JobSrc::Bytes(b) => b,
                    JobSrc::Dst => &copy[..],
                };
            }
            cce::reduce_with(nm, op, dt, &v[..srcs.len()], scales, dst)
        }
    };
    debug_assert!(r.is_ok(), "deferred reduce failed after its checks: {r:?}");
}

/// Execute the copy `src → dst` (plain memory; same-region ranges may overlap, as
/// `memmove`) now, on this thread: an op the engine runs in order. One borrow of the one or
/// two regions, no address lookup.
pub(crate) fn copy_now(mem: &mut Memory, dst: Span, src: Span) {
    if dst.region == src.region {
        let mut r = mem.regions_bytes_mut(&[dst.region]);
        r[0].1.copy_within(src.off..src.end(), dst.off);
        return;
    }
    let lo_first = dst.region < src.region;
    let pair = if lo_first {
        [dst.region, src.region]
    } else {
        [src.region, dst.region]
    };
    let mut r = mem.regions_bytes_mut(&pair);
    let (a, b) = r.split_at_mut(1);
    let (d, s): (&mut [u8], &[u8]) = if lo_first {
        (&mut *a[0].1, &*b[0].1)
    } else {
        (&mut *b[0].1, &*a[0].1)
    };
    d[dst.off..dst.end()].copy_from_slice(&s[src.off..src.end()]);
}

/// Region bytes as [`Memory::regions_bytes_mut`] lends them: `(region, bytes)`.
type Borrowed<'a> = [(usize, &'a mut [u8])];

/// Execute the reduce of `srcs` into `dst` with `spec` (checked; every memory source disjoint
/// from `dst`) now, on this thread, with the kernels a flush uses.
pub(crate) fn reduce_now(mem: &mut Memory, spec: &ReduceSpec, dst: Span, srcs: &[SrcSpan]) {
    let mut regions = [0usize; cce::MAX_SOURCES + 1];
    let mut k = 1;
    regions[0] = dst.region;
    for s in mem_srcs(srcs).take(cce::MAX_SOURCES) {
        regions[k] = s.region;
        k += 1;
    }
    let regions = &mut regions[..k];
    regions.sort_unstable();
    let mut n = 1;
    for i in 1..regions.len() {
        if regions[i] != regions[n - 1] {
            regions[n] = regions[i];
            n += 1;
        }
    }
    let mut r = mem.regions_bytes_mut(&regions[..n]);
    let di = r
        .binary_search_by_key(&dst.region, |(i, _)| *i)
        .expect("the destination's region is borrowed");
    let (before, rest) = r.split_at_mut(di);
    let (own, after) = rest.split_first_mut().expect("the destination's region");
    let (lo, tail) = own.1.split_at_mut(dst.off);
    let (d, hi) = tail.split_at_mut(dst.len);
    let (before, after, lo, hi): (&Borrowed<'_>, &Borrowed<'_>, &[u8], &[u8]) =
        (before, after, lo, hi);
    let find = |s: &Span| -> &[u8] {
        match s.region.cmp(&dst.region) {
            std::cmp::Ordering::Less => {
                let i = before.partition_point(|(r, _)| *r < s.region);
                &before[i].1[s.off..s.end()]
            }
            std::cmp::Ordering::Greater => {
                let i = after.partition_point(|(r, _)| *r < s.region);
                &after[i].1[s.off..s.end()]
            }
            std::cmp::Ordering::Equal if s.end() <= dst.off => &lo[s.off..s.end()],
            std::cmp::Ordering::Equal => &hi[s.off - dst.end()..s.end() - dst.end()],
        }
    };
    let mut js = [JobSrc::Dst; cce::MAX_SOURCES];
    for (j, s) in js.iter_mut().zip(srcs) {
        if let SrcSpan::Mem(m) = s {
            *j = JobSrc::Bytes(find(m));
        }
    }
    reduce(spec, d, &js[..srcs.len().min(cce::MAX_SOURCES)]);
}

/// Borrow every op's destination mutably and its sources shared, all at once: in each region
/// an op touches, the destinations (disjoint within a level, see [`Batch::push`]) are split
/// out and the bytes between them are shared gaps; a source lies inside one gap (it overlaps
/// no destination of its level).
///
/// The jobs go to `jobs` (one per op, in order), their sources to `srcs`.
fn carve<'a>(
    mem: &'a mut Memory,
    ops: &'a [Op],
    bufs: &mut CarveBufs<'a>,
    srcs: &mut Vec<JobSrc<'a>>,
    jobs: &mut Vec<Job<'a>>,
) {
    let CarveBufs {
        involved,
        order,
        regions,
        dsts,
        gaps,
    } = bufs;
    involved.extend(
        ops.iter()
            .flat_map(|op| std::iter::once(op.dst()).chain(op.reads()))
            .map(|s| s.region),
    );
    involved.sort_unstable();
    involved.dedup();
    order.extend(0..ops.len());
    order.sort_by_key(|&i| (ops[i].dst().region, ops[i].dst().off));
    dsts.extend((0..ops.len()).map(|_| None));
    // (region, start offset, shared gap bytes), sorted.
    gaps.reserve(involved.len() + ops.len());
    mem.regions_bytes_mut_into(involved, regions);
    let mut k = 0;
    for (r, data) in regions.drain(..) {
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
    for (op, dst) in ops.iter().zip(dsts.drain(..)) {
        let dst = dst.expect("every op has its destination");
        let first = srcs.len();
        match op {
            Op::Copy { src, .. } => srcs.push(JobSrc::Bytes(find(*src))),
            Op::Reduce { srcs: ss, .. } => srcs.extend(ss.iter().map(|s| match s {
                SrcSpan::Mem(m) => JobSrc::Bytes(find(*m)),
                SrcSpan::Dst => JobSrc::Dst,
            })),
        }
        jobs.push(Job {
            dst,
            srcs: first..srcs.len(),
            at: 0,
            op,
        });
    }
}

#[cfg(test)]
mod tests;

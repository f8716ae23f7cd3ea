//! The EVT_SEM blocks: semaphores, events and the exact wait comparisons (docs/contract/device.md §5).
//!
//! Every TOP_SP hosts one block of 256 signed 32-bit semaphores and 256 one-bit events (§5.1); so
//! does every per-TPB (compute engine) block. This module holds the state and the pure
//! semantics; it never blocks and owns no threads — the executor decides who runs when, and the
//! router in [`super::memory`] turns window writes into the calls below.
//!
//! **Arithmetic** wraps (two's complement, §5.1). **Comparisons** are signed 32-bit: a wire
//! threshold (u32) is reinterpreted as `i32`. The firmware leaf's unsigned ">" (§5.3) is recorded
//! there for fidelity only and deliberately not offered here.
//!
//! **Which wait uses which comparison** (§5.3 rule for the simulator):
//! * TOP_SP / barrier records and ring steps: [`SemBlock::wait_ge_and_dec`] — `≥ target`, then −1;
//! * mesh events: [`SemBlock::wait_ge_and_sub`] — `≥ wait_val`, then −wait_val (docs/contract/lowering.md §4.6);
//! * compute-stream EVENTS fields: [`satisfied`] / [`SemBlock::try_wait`] per WAIT_MODE, where
//!   0x04 is strictly greater and 0x05 is greater-or-equal.

use std::fmt;
use std::sync::atomic::{
    AtomicI32, AtomicU64,
    Ordering::{Relaxed, SeqCst},
};
use std::sync::Arc;

use crate::isa::enums::{UpdateMode, WaitMode};
use crate::isa::evtsem::{SemWindow, MAX_TOPSPS, SEMS_PER_TOPSP};
use crate::isa::memmap::MAX_TPBS;

/// Semaphores (and events) per block.
pub const SEMS: usize = SEMS_PER_TOPSP as usize;

/// Does WAIT_MODE `mode` hold for `value` against `target` (docs/contract/isa.md §2, docs/contract/device.md §5.2)?
///
/// For the `*_IMM` forms `target` is the instruction's immediate; for the `*_REG` forms (0x8x)
/// it is the register's value, which the caller reads. For the event forms `value` is the event
/// bit (0 or 1) and `target` is ignored: EVT_SET / EVT_SET_THEN_CLEAR hold when the bit is set,
/// EVT_CLEAR / EVT_CLEAR_THEN_SET when it is clear. `None` always holds.
pub fn satisfied(mode: WaitMode, value: i32, target: i32) -> bool {
    use WaitMode as W;
    match mode {
        W::None => true,
        W::SemEqImm | W::SemEqReg => value == target,
        W::SemLtImm | W::SemLtReg => value < target,
        W::SemLeImm | W::SemLeReg => value <= target,
        W::SemGtImm | W::SemGtReg => value > target,
        W::SemGeImm | W::SemGeReg => value >= target,
        W::EvtSet | W::EvtSetThenClear => value != 0,
        W::EvtClear | W::EvtClearThenSet => value == 0,
    }
}

/// Is `mode` one of the event forms (its index names an event, not a semaphore)?
pub fn is_event_wait(mode: WaitMode) -> bool {
    matches!(
        mode,
        WaitMode::EvtSet
            | WaitMode::EvtSetThenClear
            | WaitMode::EvtClear
            | WaitMode::EvtClearThenSet
    )
}

/// The words of one EVT_SEM block as they sit in memory: 256 × i32 semaphores and 256 event
/// bits (docs/contract/device.md §5.1). Atomic because a block may live in shared memory that another
/// process's DMA engine increments while this one's sequencer waits on it (docs/design.md §2.7);
/// every access is `SeqCst`, which also orders the data a DMA wrote before its semaphore
/// write ("data then signal", docs/contract/lowering.md §6.4) before the waiter's reads.
#[repr(C)]
pub struct SemWords {
    values: [AtomicI32; SEMS],
    events: [AtomicU64; SEMS / 64],
}

impl fmt::Debug for SemWords {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SemWords").finish_non_exhaustive()
    }
}

/// Bytes of one [`SemWords`] (the size a shared-memory layout reserves per block).
pub const SEM_WORDS_BYTES: usize = std::mem::size_of::<SemWords>();

/// Memory owned outside the simulated device — a shared-memory mapping — in which regions and
/// semaphore blocks can live (`runtime::multi_process::run` implements it for its segments).
///
/// # Safety
/// `base_ptr()` must stay valid for `len()` bytes, readable and writable, for as long as the
/// value lives, and be aligned to at least 8 bytes.
pub unsafe trait ExternalBytes: Send + Sync + fmt::Debug {
    /// The first byte.
    fn base_ptr(&self) -> *mut u8;
    /// Bytes.
    fn len(&self) -> usize;
    /// Whether there are no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Called after a write into a block that another executor (process or thread) waits on: the
/// owner of the block must be woken (`runtime::multi_process::run` bumps the run's futex word),
/// or, when the owner is on another host, told exactly what changed (the block here is a
/// shadow, and `op` is what the network proxy applies to the real one).
pub trait SemNotify: Send + Sync + fmt::Debug {
    /// Semaphore or event `idx` of the block changed by `op`.
    fn changed(&self, idx: u8, op: SemOp);
}

/// One change to one semaphore or event of a block, as a write or a wait applied it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SemOp {
    /// Semaphore := value.
    Set(i32),
    /// Semaphore += value (wrapping).
    Add(i32),
    /// Semaphore −= value (wrapping).
    Sub(i32),
    /// Event := on.
    Event(bool),
}

enum Store {
    Own(Box<SemWords>),
    External {
        words: *const SemWords,
        _keep: Arc<dyn ExternalBytes>,
        notify: Option<Arc<dyn SemNotify>>,
    },
}

// SAFETY: the pointer targets memory kept alive by `_keep` (ExternalBytes: Send + Sync) and is
// only accessed through atomics.
unsafe impl Send for Store {}
// SAFETY: `&Store` reads `words` only through its atomics, in memory `_keep` keeps alive;
// `notify` is `Send + Sync`.
unsafe impl Sync for Store {}

/// One EVT_SEM block: 256 × i32 semaphores and 256 event bits (docs/contract/device.md §5.1), owned by the
/// machine or living in shared memory ([`SemBlock::external`]).
pub struct SemBlock {
    store: Store,
}

impl Default for SemBlock {
    fn default() -> Self {
        SemBlock {
            store: Store::Own(Box::new(SemWords {
                values: std::array::from_fn(|_| AtomicI32::new(0)),
                events: std::array::from_fn(|_| AtomicU64::new(0)),
            })),
        }
    }
}

impl Clone for SemBlock {
    /// A private copy of the current values (never shared).
    fn clone(&self) -> Self {
        let b = SemBlock::new();
        for i in 0..SEMS {
            b.words().values[i].store(self.words().values[i].load(SeqCst), SeqCst);
        }
        for i in 0..SEMS / 64 {
            b.words().events[i].store(self.words().events[i].load(SeqCst), SeqCst);
        }
        b
    }
}

impl PartialEq for SemBlock {
    fn eq(&self, o: &Self) -> bool {
        (0..=255u8).all(|i| self.value(i) == o.value(i) && self.event(i) == o.event(i))
    }
}

impl Eq for SemBlock {}

impl fmt::Debug for SemBlock {
    /// Only the non-zero semaphores and the set events: a block is mostly zeros.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let events: Vec<u8> = (0..=255u8).filter(|&i| self.event(i)).collect();
        f.debug_struct("SemBlock")
            .field("nonzero", &self.nonzero().collect::<Vec<_>>())
            .field("events", &events)
            .field("shared", &matches!(self.store, Store::External { .. }))
            .finish()
    }
}

impl SemBlock {
    /// A block with every semaphore 0 and every event clear.
    pub fn new() -> Self {
        Self::default()
    }

    /// The block whose words sit at byte `off` of `mem` (a shared-memory segment), with
    /// `notify` called after every change made through this handle (`None` for the owner's
    /// own blocks, whose waiters are in the same executor). The words are used as they are.
    pub fn external(
        mem: Arc<dyn ExternalBytes>,
        off: usize,
        notify: Option<Arc<dyn SemNotify>>,
    ) -> Result<SemBlock, String> {
        if off % 8 != 0
            || off
                .checked_add(SEM_WORDS_BYTES)
                .is_none_or(|e| e > mem.len())
        {
            return Err(format!(
                "EVT_SEM block at byte {off} does not fit an 8-aligned {SEM_WORDS_BYTES}-byte \
                 slot of a {}-byte mapping",
                mem.len()
            ));
        }
        // SAFETY: in bounds and aligned (checked above; base_ptr is 8-aligned by contract);
        // atomics have the layout of their integers, so any bytes are valid words.
        let words = unsafe { mem.base_ptr().add(off) } as *const SemWords;
        Ok(SemBlock {
            store: Store::External {
                words,
                _keep: mem,
                notify,
            },
        })
    }

    fn words(&self) -> &SemWords {
        match &self.store {
            Store::Own(b) => b,
            // SAFETY: see `external`; `_keep` holds the mapping.
            Store::External { words, .. } => unsafe { &**words },
        }
    }

    fn changed(&self, idx: u8, op: SemOp) {
        if let Store::External {
            notify: Some(n), ..
        } = &self.store
        {
            n.changed(idx, op);
        }
    }

    /// Apply `op` to index `idx` (what a peer's write did, received over the network).
    pub fn apply(&mut self, idx: u8, op: SemOp) {
        match op {
            SemOp::Set(v) => self.set(idx, v),
            SemOp::Add(v) => self.add(idx, v),
            SemOp::Sub(v) => self.sub(idx, v),
            SemOp::Event(on) => self.set_event(idx, on),
        }
    }

    /// Every semaphore 0 and every event clear (a reused block before a run). Relaxed stores
    /// and one fence: a `SeqCst` store per word is an `xchg` each (264 of them a block), and
    /// nothing may run on the block until the caller has published the re-armed machine, which
    /// orders these stores before any waiter's loads.
    pub fn clear(&self) {
        let w = self.words();
        w.values.iter().for_each(|v| v.store(0, Relaxed));
        w.events.iter().for_each(|v| v.store(0, Relaxed));
        std::sync::atomic::fence(SeqCst);
    }
    /// Semaphore `idx`.
    pub fn value(&self, idx: u8) -> i32 {
        self.words().values[usize::from(idx)].load(SeqCst)
    }
    /// Event `idx`.
    pub fn event(&self, idx: u8) -> bool {
        (self.words().events[usize::from(idx) / 64].load(SeqCst) >> (idx % 64)) & 1 == 1
    }
    /// Semaphore `idx` := `v`.
    pub fn set(&mut self, idx: u8, v: i32) {
        self.words().values[usize::from(idx)].store(v, SeqCst);
        self.changed(idx, SemOp::Set(v));
    }
    /// Semaphore `idx` += `v`, wrapping.
    pub fn add(&mut self, idx: u8, v: i32) {
        self.words().values[usize::from(idx)].fetch_add(v, SeqCst);
        self.changed(idx, SemOp::Add(v));
    }
    /// Semaphore `idx` −= `v`, wrapping.
    pub fn sub(&mut self, idx: u8, v: i32) {
        self.words().values[usize::from(idx)].fetch_sub(v, SeqCst);
        self.changed(idx, SemOp::Sub(v));
    }
    /// Event `idx` := `on`.
    pub fn set_event(&mut self, idx: u8, on: bool) {
        let (w, b) = (usize::from(idx) / 64, idx % 64);
        let word = &self.words().events[w];
        if on {
            word.fetch_or(1 << b, SeqCst);
        } else {
            word.fetch_and(!(1 << b), SeqCst);
        }
        self.changed(idx, SemOp::Event(on));
    }
    /// If semaphore `idx` ≥ `target`, subtract `by` atomically (another process may be adding
    /// to it at the same moment) and return true.
    fn take_if_ge(&mut self, idx: u8, target: i32, by: i32) -> bool {
        let ok = self.words().values[usize::from(idx)]
            .fetch_update(SeqCst, SeqCst, |v| {
                (v >= target).then(|| v.wrapping_sub(by))
            })
            .is_ok();
        if ok {
            self.changed(idx, SemOp::Sub(by));
        }
        ok
    }
    /// The non-zero semaphores `(idx, value)`, for hang reports.
    pub fn nonzero(&self) -> impl Iterator<Item = (u8, i32)> + '_ {
        (0..=255u8)
            .map(|i| (i, self.value(i)))
            .filter(|&(_, v)| v != 0)
    }

    /// A 4-byte store of `raw` into `window` slot `idx` (docs/contract/device.md §5.1). Returns whether state
    /// changed its meaning: READ is read-only and the write is **ignored** (as the spec's table
    /// says) — returning `false` lets the caller trace it. EVENT: non-zero sets, zero clears.
    pub fn store(&mut self, window: SemWindow, idx: u8, raw: u32) -> bool {
        let v = raw as i32;
        match window {
            SemWindow::Event => self.set_event(idx, raw != 0),
            SemWindow::Read => return false,
            SemWindow::Set => self.set(idx, v),
            SemWindow::Inc => self.add(idx, v),
            SemWindow::Dec => self.sub(idx, v),
        }
        true
    }

    /// A 4-byte load from `window` slot `idx`. Our choice: every semaphore window reads the
    /// current value (loads have no side effects); EVENT reads 1 or 0.
    pub fn load(&self, window: SemWindow, idx: u8) -> u32 {
        match window {
            SemWindow::Event => u32::from(self.event(idx)),
            _ => self.value(idx) as u32,
        }
    }

    /// `wait_ge_and_dec` (docs/contract/device.md §5.3): if semaphore `idx` ≥ `target`, decrement
    /// it **by one** and return true; otherwise leave it and return false (the caller stays
    /// blocked).
    pub fn wait_ge_and_dec(&mut self, idx: u8, target: i32) -> bool {
        self.take_if_ge(idx, target, 1)
    }

    /// The mesh-event wait (docs/contract/lowering.md §4.6): if semaphore `idx` ≥ `wait_val`, subtract
    /// `wait_val` and return true.
    pub fn wait_ge_and_sub(&mut self, idx: u8, wait_val: i32) -> bool {
        self.take_if_ge(idx, wait_val, wait_val)
    }

    /// A compute-stream wait (docs/contract/device.md §5.2) on index `idx` with WAIT_MODE `mode`:
    /// true when it holds. Semaphore forms only compare (the word's UPDATE_MODE is separate,
    /// [`Self::update`]); EVT_SET_THEN_CLEAR clears and EVT_CLEAR_THEN_SET sets the event when they
    /// pass.
    pub fn try_wait(&mut self, mode: WaitMode, idx: u8, target: i32) -> bool {
        let value = if is_event_wait(mode) {
            i32::from(self.event(idx))
        } else {
            self.value(idx)
        };
        let ok = satisfied(mode, value, target);
        if ok {
            match mode {
                WaitMode::EvtSetThenClear => self.set_event(idx, false),
                WaitMode::EvtClearThenSet => self.set_event(idx, true),
                _ => {}
            }
        }
        ok
    }

    /// Apply UPDATE_MODE `mode` to index `idx` with immediate `value` (docs/contract/isa.md §2). The
    /// read/complete split (0x0x vs 0x1x) is *when* the executor calls this, not what it does.
    /// `SEM_WR_REG_COMPLETE` takes the register's value as `value`.
    pub fn update(&mut self, mode: UpdateMode, idx: u8, value: i32) {
        use UpdateMode as U;
        match mode {
            U::None => {}
            U::EvtSetRead | U::EvtSetComplete => self.set_event(idx, true),
            U::EvtClearRead | U::EvtClearComplete => self.set_event(idx, false),
            U::SemIncRead | U::SemIncComplete => self.add(idx, 1),
            U::SemDecRead | U::SemDecComplete => self.sub(idx, 1),
            U::SemAddImmRead | U::SemAddImmComplete => self.add(idx, value),
            U::SemSubImmRead | U::SemSubImmComplete => self.sub(idx, value),
            U::SemWrImmRead | U::SemWrImmComplete | U::SemWrRegComplete => self.set(idx, value),
        }
    }
}

/// Names one EVT_SEM block of a chip.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BlockId {
    /// TOP_SP `i`'s block (device TOP_SP index 0..16).
    TopSp(u8),
    /// Per-TPB block `i` (0..[`MAX_TPBS`]).
    Tpb(u8),
}

impl fmt::Display for BlockId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BlockId::TopSp(i) => write!(f, "TOP_SP {i}"),
            BlockId::Tpb(i) => write!(f, "TPB {i}"),
        }
    }
}

/// Every EVT_SEM block of one chip: [`MAX_TOPSPS`] TOP_SP blocks (v2 uses the first 6) and
/// [`MAX_TPBS`] per-TPB blocks.
///
/// The chip remembers which blocks were handed out mutably since the last
/// [`ChipSems::clear_dirty`] (every change goes through [`ChipSems::block_mut`]), so a persistent
/// machine re-arms only the blocks a run used — a few of the 32 — instead of every word.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChipSems {
    topsp: Vec<SemBlock>,
    tpb: Vec<SemBlock>,
    /// Bit `i`: TOP_SP block `i`; bit `32 + i`: TPB block `i`.
    dirty: u64,
}

impl Default for ChipSems {
    fn default() -> Self {
        ChipSems {
            // Each a fresh zeroed block: `vec![x; n]` would clone, reading and writing every
            // atomic word of every block (a tenth of a small collective's time).
            topsp: (0..MAX_TOPSPS).map(|_| SemBlock::new()).collect(),
            tpb: (0..MAX_TPBS).map(|_| SemBlock::new()).collect(),
            dirty: 0,
        }
    }
}

/// The dirty bit of block `id` ([`ChipSems`]).
fn dirty_bit(id: BlockId) -> u64 {
    match id {
        BlockId::TopSp(i) => 1u64 << (i % 32),
        BlockId::Tpb(i) => 1u64 << (32 + i % 32),
    }
}

impl ChipSems {
    /// All blocks zero.
    pub fn new() -> Self {
        Self::default()
    }
    /// A block, `None` for an index beyond the chip's blocks.
    pub fn block(&self, id: BlockId) -> Option<&SemBlock> {
        match id {
            BlockId::TopSp(i) => self.topsp.get(usize::from(i)),
            BlockId::Tpb(i) => self.tpb.get(usize::from(i)),
        }
    }
    /// A block, mutably (marks it dirty, [`ChipSems::clear_dirty`]).
    pub fn block_mut(&mut self, id: BlockId) -> Option<&mut SemBlock> {
        self.dirty |= dirty_bit(id);
        match id {
            BlockId::TopSp(i) => self.topsp.get_mut(usize::from(i)),
            BlockId::Tpb(i) => self.tpb.get_mut(usize::from(i)),
        }
    }
    /// Zero every block changed since the last call (every semaphore 0, every event clear):
    /// what re-arming a persistent machine resets (the hardware's semaphores are reset per
    /// execution, the program stays loaded). Blocks in shared memory are cleared too.
    pub fn clear_dirty(&mut self) {
        let dirty = std::mem::take(&mut self.dirty);
        for (i, b) in self.topsp.iter().enumerate() {
            if dirty & (1u64 << i) != 0 {
                b.clear();
            }
        }
        for (i, b) in self.tpb.iter().enumerate() {
            if dirty & (1u64 << (32 + i)) != 0 {
                b.clear();
            }
        }
    }

    /// Whether every semaphore and event of every block is zero (tests of re-arming).
    pub fn all_zero(&self) -> bool {
        self.topsp
            .iter()
            .chain(&self.tpb)
            .all(|b| b.nonzero().next().is_none() && (0..=255u8).all(|i| !b.event(i)))
    }

    /// Replace block `id` with `b` (a block in shared memory, [`SemBlock::external`]); false
    /// if the chip has no such block.
    pub fn attach(&mut self, id: BlockId, b: SemBlock) -> bool {
        match self.block_mut(id) {
            Some(slot) => {
                *slot = b;
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests;

//! Simulated device memory for every chip of the process, addressed by SoC address
//! (docs/design.md §2.7 "simulated memory is real memory"; docs/contract/device.md §1.4, §5.1, §13
//! item 1).
//!
//! **Routing.** Every access names the *issuing* chip: an address without the id-valid bit
//! (bit 54) targets the issuer, one with it targets chip bits 53:48. The remaining bits 47:0 (die
//! bit included) are the on-chip address. Neighbour routing (bit 52) is not used by our lowering
//! and is an error here.
//!
//! **Backing.** Host memory is allocated per region when the loader [`Memory::map`]s it, zero
//! filled (`vec![0; n]`, which the allocator serves from fresh zero pages, so a mapped but
//! untouched GiB costs address space, not RAM). Regions sit in one `Vec` sorted by
//! `(chip, base)`; a lookup is one binary search — accesses are per descriptor, not per element.
//!
//! **EVT_SEM windows are not memory.** Addresses inside a TOP_SP EVT_SEM block
//! ([`crate::isa::evtsem::topsp_base`]) or a per-TPB block ([`memmap::tpb_evt_sem_base`]) go to
//! [`super::sema`]: 4-byte aligned words, one window per access, each word applied in turn
//! (INC adds, DEC subtracts, SET sets, EVENT sets on non-zero and clears on zero, READ ignores
//! writes as §5.1 says — the returned [`Touched`] reports it so the executor can trace it). Loads
//! from any semaphore window return the value. A write reports what it touched so the executor
//! can wake the waiters of exactly that semaphore.
//!
//! **Errors** ([`MemError`]) carry the address as issued; the DMA engine reports them as an
//! engine abort (`NRT_EXEC_HW_ERR_DMA_ABORT` class, §12) with the descriptor. Nothing here
//! panics on a bad address.
//!
//! Children: `error` ([`MemError`]) and `region` (one mapped region and where its bytes live).

mod error;
mod region;

use std::sync::Arc;

use super::peers::WriteLog;
use super::sema::{BlockId, ChipSems, ExternalBytes, SemBlock};
use crate::isa::evtsem::{Route, SemWindow, SocAddr};
use crate::isa::memmap;

/// Top of the on-chip address space (bits 47:0).
const ON_CHIP_END: u64 = 1 << 48;

/// Largest single region (64 GiB). A zeroed allocation this size succeeds lazily on an
/// overcommitting host; far larger requests are loader bugs, and failing the map beats the
/// process abort a failed allocation would be. Raise it here if a real workload needs more.
pub const MAX_REGION_BYTES: u64 = 1 << 36;

pub use error::MemError;

/// What a write touched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Touched {
    /// Plain memory (or nothing, for an empty write).
    Memory,
    /// EVT_SEM slots `first .. first + count` of one window of one block.
    Sem(SemTouch),
}

/// The semaphore slots a write reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SemTouch {
    /// Chip.
    pub chip: u8,
    /// Block.
    pub block: BlockId,
    /// Window.
    pub window: SemWindow,
    /// First index.
    pub first: u8,
    /// Number of consecutive indices (1 for a 4-byte write).
    pub count: u16,
}

impl SemTouch {
    /// Did the write change state? (A READ-window write is ignored, docs/contract/device.md §5.1.)
    pub fn changed(&self) -> bool {
        self.window != SemWindow::Read
    }
}

/// One side of a [`Memory::split`]: a source's bytes, or "the same bytes as the destination"
/// (an in-place operand, e.g. the local chunk of an in-place reduce).
#[derive(Debug, PartialEq, Eq)]
pub enum Src<'a> {
    /// The source bytes.
    Bytes(&'a [u8]),
    /// The source is exactly the destination range.
    Dst,
}

/// A destination borrowed mutably together with its sources, all zero-copy.
#[derive(Debug)]
pub struct Split<'a> {
    /// Destination bytes.
    pub dst: &'a mut [u8],
    /// The sources, in request order.
    pub srcs: Vec<Src<'a>>,
}

/// Where a bulk access lands ([`Memory::place`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    /// A zero-length access (routed, touches nothing).
    Empty,
    /// An EVT_SEM window: a semaphore access, never deferred.
    Sem,
    /// Plain memory: region index and offset in it.
    Mem {
        /// Region index.
        region: usize,
        /// Offset in the region.
        off: usize,
    },
}

use region::{Backing, Region};

/// The sort key of an on-chip address (bits 47:0) of `chip`: the chip above bit 48.
fn key(chip: u8, on_chip: u64) -> u64 {
    (u64::from(chip) << 48) | on_chip
}

/// Where an address lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// Region index and offset in it.
    Mem(usize, usize),
    /// A semaphore window run.
    Sem(SemTouch),
}

/// The memory of every simulated chip of the process.
#[derive(Debug)]
pub struct Memory {
    /// `key(chip, base)` of every region, sorted: dense u64s keep the binary search in cache.
    keys: Vec<u64>,
    /// The regions, parallel to `keys`.
    regions: Vec<Region>,
    sems: Vec<ChipSems>,
    /// The last plain-memory lookup: `(issuer, SoC bits 63:48, target chip, region)`. Bits
    /// 63:48 are the whole route, so an address with the same issuer and bits lands on the same
    /// chip; a hit inside that region skips decoding and the search. Cleared by map/unmap.
    last: std::cell::Cell<Option<(u8, u64, u8, usize)>>,
}

impl Memory {
    /// A machine of `chips` chips (ids `0..chips`), nothing mapped, every semaphore 0.
    pub fn new(chips: u8) -> Memory {
        Memory {
            keys: Vec::new(),
            regions: Vec::new(),
            sems: (0..chips).map(|_| ChipSems::new()).collect(),
            last: std::cell::Cell::new(None),
        }
    }

    /// Number of chips.
    pub fn chips(&self) -> u8 {
        self.sems.len() as u8
    }

    /// Map `len` zeroed bytes at on-chip address `base` (bits 47:0) of `chip`.
    pub fn map(&mut self, chip: u8, base: u64, len: u64) -> Result<(), MemError> {
        self.map_written(chip, base, len, 0..0)
    }

    /// [`Memory::map`] for a region whose bytes `written` (offsets into the region) the caller
    /// writes before anything reads them (the loader writing a rank's input): a recycled
    /// buffer is zeroed only outside them.
    pub fn map_written(
        &mut self,
        chip: u8,
        base: u64,
        len: u64,
        written: std::ops::Range<u64>,
    ) -> Result<(), MemError> {
        let at = self.free_slot(chip, base, len)?;
        // Zeroed: fresh pages committed only when touched, or a recycled buffer of this size
        // zeroed again (`device::buffer_pool`).
        let written = written.start as usize..written.end as usize;
        let data = Backing::Heap(super::buffer_pool::take_except(len as usize, written));
        let log = None;
        self.insert(
            at,
            Region {
                chip,
                base,
                data,
                log,
            },
        );
        Ok(())
    }

    /// Map the `len` bytes at byte `off` of `mem` (a shared-memory segment, used as it is, not
    /// zeroed) at on-chip address `base` of `chip`: what this machine writes there, every
    /// other mapping of `mem` sees (docs/design.md §2.7).
    pub fn map_external(
        &mut self,
        chip: u8,
        base: u64,
        mem: Arc<dyn ExternalBytes>,
        off: usize,
        len: u64,
    ) -> Result<(), MemError> {
        self.map_shadow(chip, base, mem, off, len, None)
    }

    /// [`Memory::map_external`], with every write into the region recorded in `log` (as
    /// offsets into `mem`): the region is the shadow of another host's HBM, whose written bytes
    /// the runtime sends before the semaphore that signals them (`device::peers`).
    pub fn map_shadow(
        &mut self,
        chip: u8,
        base: u64,
        mem: Arc<dyn ExternalBytes>,
        off: usize,
        len: u64,
        log: Option<Arc<dyn WriteLog>>,
    ) -> Result<(), MemError> {
        let at = self.free_slot(chip, base, len)?;
        let n = len as usize;
        if off.checked_add(n).is_none_or(|e| e > mem.len()) {
            return Err(MemError::BadMapping {
                chip,
                base,
                len,
                reason: "beyond the end of the external memory",
            });
        }
        // SAFETY: in bounds (checked above) of a mapping valid while `mem` lives.
        let ptr = unsafe { mem.base_ptr().add(off) };
        let data = Backing::External {
            ptr,
            len: n,
            _keep: mem,
        };
        let log = log.map(|l| (l, off));
        self.insert(
            at,
            Region {
                chip,
                base,
                data,
                log,
            },
        );
        Ok(())
    }

    fn insert(&mut self, at: usize, r: Region) {
        self.last.set(None);
        self.keys.insert(at, key(r.chip, r.base));
        self.regions.insert(at, r);
    }

    /// Where a new region `(chip, base, len)` goes in the sorted table, after the checks every
    /// mapping passes.
    fn free_slot(&self, chip: u8, base: u64, len: u64) -> Result<usize, MemError> {
        let bad = |reason| MemError::BadMapping {
            chip,
            base,
            len,
            reason,
        };
        if chip >= self.chips() {
            return Err(bad("no such chip"));
        }
        let end = base
            .checked_add(len)
            .filter(|&e| len > 0 && e <= ON_CHIP_END);
        let end = end.ok_or_else(|| bad("empty or beyond the 48-bit on-chip space"))?;
        if memmap::overlaps_sem_block(base, end) {
            return Err(bad("overlaps an EVT_SEM block"));
        }
        let at = self.keys.partition_point(|&k| k < key(chip, base));
        let prev_clash = at > 0 && {
            let p = &self.regions[at - 1];
            p.chip == chip && p.end() > base
        };
        let next_clash = self
            .regions
            .get(at)
            .is_some_and(|n| n.chip == chip && n.base < end);
        if prev_clash || next_clash {
            return Err(bad("overlaps a mapped region"));
        }
        if len > MAX_REGION_BYTES {
            return Err(bad("larger than MAX_REGION_BYTES"));
        }
        usize::try_from(len).map_err(|_| bad("larger than host memory"))?;
        Ok(at)
    }

    /// Index of the region mapped at exactly `base` on `chip`.
    fn index_of(&self, chip: u8, base: u64) -> Result<usize, MemError> {
        self.keys
            .binary_search(&key(chip, base))
            .map_err(|_| MemError::BadMapping {
                chip,
                base,
                len: 0,
                reason: "nothing mapped",
            })
    }

    /// Remove the region mapped at exactly `base` on `chip`.
    pub fn unmap(&mut self, chip: u8, base: u64) -> Result<(), MemError> {
        let at = self.index_of(chip, base)?;
        self.last.set(None);
        self.regions.remove(at);
        self.keys.remove(at);
        Ok(())
    }

    /// Commit every page of the region mapped at exactly `base` on `chip` now (write a zero
    /// into each page), so that the first DMA into it does not pay the host's page faults.
    /// Device HBM is physically present; the loader prefaults data buffers, not rings (a ring
    /// is mapped for its whole capacity but touched only as far as its stream).
    pub fn prefault(&mut self, chip: u8, base: u64) -> Result<(), MemError> {
        let at = self.index_of(chip, base)?;
        // `black_box`: the compiler may not assume the zeroed allocation's contents, so the
        // zero written over a zero really reaches each page.
        let data = std::hint::black_box(&mut self.regions[at].data[..]);
        for i in (0..data.len()).step_by(4096) {
            data[i] = 0;
        }
        Ok(())
    }

    /// The mapped regions as `(chip, on-chip base, len)`, sorted.
    pub fn regions(&self) -> impl Iterator<Item = (u8, u64, u64)> + '_ {
        self.regions
            .iter()
            .map(|r| (r.chip, r.base, r.data.len() as u64))
    }

    /// Total mapped bytes.
    pub fn mapped_bytes(&self) -> u64 {
        self.regions.iter().map(|r| r.data.len() as u64).sum()
    }

    /// The EVT_SEM blocks of `chip`.
    pub fn sems(&self, chip: u8) -> Option<&ChipSems> {
        self.sems.get(usize::from(chip))
    }

    /// The EVT_SEM blocks of `chip`, mutably (the sequencer's waits and direct updates).
    pub fn sems_mut(&mut self, chip: u8) -> Option<&mut ChipSems> {
        self.sems.get_mut(usize::from(chip))
    }

    /// Zero the semaphores and events of every block a run changed, on every chip
    /// ([`ChipSems::clear_dirty`]): a persistent machine's re-arm before its next run.
    pub fn clear_dirty_sems(&mut self) {
        self.sems.iter_mut().for_each(ChipSems::clear_dirty);
    }

    /// Whether the region mapped at exactly `base` on `chip` lives in external memory
    /// ([`Memory::map_external`]).
    pub fn is_external(&self, chip: u8, base: u64) -> Result<bool, MemError> {
        let at = self.index_of(chip, base)?;
        Ok(matches!(self.regions[at].data, Backing::External { .. }))
    }

    /// Put EVT_SEM block `id` of `chip` in shared memory (`b`, [`SemBlock::external`]).
    pub fn attach_sem_block(&mut self, chip: u8, id: BlockId, b: SemBlock) -> Result<(), MemError> {
        let done = self
            .sems
            .get_mut(usize::from(chip))
            .is_some_and(|c| c.attach(id, b));
        match done {
            true => Ok(()),
            false => Err(MemError::BadMapping {
                chip,
                base: 0,
                len: 0,
                reason: "no such EVT_SEM block",
            }),
        }
    }

    /// One block.
    pub fn sem_block_mut(&mut self, chip: u8, id: BlockId) -> Option<&mut SemBlock> {
        self.sems_mut(chip)?.block_mut(id)
    }

    /// Route a SoC address issued by `issuer`: `(target chip, on-chip address)`.
    pub fn route(&self, issuer: u8, addr: u64) -> Result<(u8, u64), MemError> {
        let soc = SocAddr::decode(addr).map_err(|e| MemError::BadAddress {
            addr,
            reason: e.message().to_string(),
        })?;
        let chip = match soc.route {
            Route::Local => issuer,
            Route::Chip(c) => c,
            Route::Neighbor { .. } => {
                return Err(MemError::BadAddress {
                    addr,
                    reason: "neighbour routing (bit 52) is not modelled".into(),
                })
            }
        };
        for c in [issuer, chip] {
            if c >= self.chips() {
                return Err(MemError::NoChip { addr, chip: c });
            }
        }
        Ok((chip, soc.on_chip()))
    }

    fn target(&self, issuer: u8, addr: u64, len: usize) -> Result<Target, MemError> {
        if let Some((i, hi, _, r)) = self.last.get() {
            let a = addr & (ON_CHIP_END - 1);
            let reg = &self.regions[r];
            if i == issuer && hi == addr >> 48 && a >= reg.base && a + len as u64 <= reg.end() {
                return Ok(Target::Mem(r, (a - reg.base) as usize));
            }
        }
        let t = self.target_slow(issuer, addr, len)?;
        if let Target::Mem(r, _) = t {
            let chip = self.regions[r].chip;
            self.last.set(Some((issuer, addr >> 48, chip, r)));
        }
        Ok(t)
    }

    fn target_slow(&self, issuer: u8, addr: u64, len: usize) -> Result<Target, MemError> {
        let (chip, a) = self.route(issuer, addr)?;
        let len64 = len as u64;
        if a.checked_add(len64).is_none_or(|e| e > ON_CHIP_END) {
            return Err(MemError::OutOfRange { addr, len: len64 });
        }
        let block = memmap::topsp_block_of(a)
            .map(|(t, off)| (BlockId::TopSp(t), off))
            .or_else(|| memmap::tpb_block_of(a).map(|(t, off)| (BlockId::Tpb(t), off)));
        if let Some((block, off)) = block {
            let bad = MemError::SemAccess { addr, len: len64 };
            if len == 0 || len % 4 != 0 {
                return Err(bad);
            }
            let (window, first) = memmap::sem_window_at(off).ok_or(bad.clone())?;
            match memmap::sem_window_at(off + len64 - 4) {
                Some((w, last)) if w == window && last >= first => {
                    let count = u16::from(last - first) + 1;
                    return Ok(Target::Sem(SemTouch {
                        chip,
                        block,
                        window,
                        first,
                        count,
                    }));
                }
                _ => return Err(bad),
            }
        }
        let at = self.keys.partition_point(|&k| k <= key(chip, a));
        let r = match at.checked_sub(1).map(|i| (i, &self.regions[i])) {
            Some((i, r)) if r.chip == chip && a < r.end() => (i, r),
            _ => return Err(MemError::Unmapped { addr, chip }),
        };
        if a + len64 > r.1.end() {
            return Err(MemError::CrossesEnd {
                addr,
                len: len64,
                chip,
                base: r.1.base,
                region_len: r.1.data.len() as u64,
            });
        }
        Ok(Target::Mem(r.0, (a - r.1.base) as usize))
    }

    /// Record a write of `len` bytes at offset `off` of region `region` if the region is a
    /// logged shadow ([`Memory::map_shadow`]); every path that writes plain memory calls it
    /// (the DMA engines' deferred ops when they place their destination).
    #[inline]
    pub(crate) fn note_write(&self, region: usize, off: usize, len: usize) {
        if let Some((log, at)) = &self.regions[region].log {
            log.wrote(at + off, len);
        }
    }

    /// Read `buf.len()` bytes at `addr` as issued by `issuer`.
    pub fn read(&self, issuer: u8, addr: u64, buf: &mut [u8]) -> Result<(), MemError> {
        if buf.is_empty() {
            return self.route(issuer, addr).map(|_| ());
        }
        let t = self.target(issuer, addr, buf.len())?;
        self.load_at(t, buf);
        Ok(())
    }

    /// Read a resolved target (its length is `buf.len()`).
    fn load_at(&self, t: Target, buf: &mut [u8]) {
        match t {
            Target::Mem(i, off) => buf.copy_from_slice(&self.regions[i].data[off..off + buf.len()]),
            Target::Sem(t) => {
                let b = self.sems[usize::from(t.chip)]
                    .block(t.block)
                    .expect("checked block");
                for (k, w) in buf.chunks_exact_mut(4).enumerate() {
                    w.copy_from_slice(&b.load(t.window, t.first + k as u8).to_le_bytes());
                }
            }
        }
    }

    /// Write `data` at `addr` as issued by `issuer`; reports what was touched.
    pub fn write(&mut self, issuer: u8, addr: u64, data: &[u8]) -> Result<Touched, MemError> {
        if data.is_empty() {
            return self.route(issuer, addr).map(|_| Touched::Memory);
        }
        let t = self.target(issuer, addr, data.len())?;
        Ok(self.store_at(t, data))
    }

    /// Write a resolved target (its length is `data.len()`).
    fn store_at(&mut self, t: Target, data: &[u8]) -> Touched {
        match t {
            Target::Mem(i, off) => {
                self.note_write(i, off, data.len());
                self.regions[i].data[off..off + data.len()].copy_from_slice(data);
                Touched::Memory
            }
            Target::Sem(t) => {
                let b = self.sem_block_mut(t.chip, t.block).expect("checked block");
                for (k, w) in data.chunks_exact(4).enumerate() {
                    let v = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
                    b.store(t.window, t.first + k as u8, v);
                }
                Touched::Sem(t)
            }
        }
    }

    /// Where a bulk access of `len` bytes at `addr` lands, checked exactly as [`Memory::copy`]
    /// checks it: the deferred execution of [`super::batch`] resolves its operands here.
    pub(crate) fn place(&self, issuer: u8, addr: u64, len: usize) -> Result<Place, MemError> {
        if len == 0 {
            return self.route(issuer, addr).map(|_| Place::Empty);
        }
        Ok(match self.target(issuer, addr, len)? {
            Target::Mem(region, off) => Place::Mem { region, off },
            Target::Sem(_) => Place::Sem,
        })
    }

    /// Every region's bytes, mutably, by region index (the index [`Memory::place`] returns;
    /// stable until the next map or unmap).
    #[cfg(test)]
    pub(crate) fn region_bytes_mut(&mut self) -> Vec<&mut [u8]> {
        self.regions.iter_mut().map(|r| &mut r.data[..]).collect()
    }

    /// The bytes of the regions `sorted` (ascending, distinct indices), mutably, with their
    /// indices.
    pub(crate) fn regions_bytes_mut(&mut self, sorted: &[usize]) -> Vec<(usize, &mut [u8])> {
        let mut out = Vec::with_capacity(sorted.len());
        self.regions_bytes_mut_into(sorted, &mut out);
        out
    }

    /// [`Memory::regions_bytes_mut`] appended to `out` (a list the caller keeps).
    pub(crate) fn regions_bytes_mut_into<'a>(
        &'a mut self,
        sorted: &[usize],
        out: &mut Vec<(usize, &'a mut [u8])>,
    ) {
        out.reserve(sorted.len());
        let mut rest = &mut self.regions[..];
        let mut base = 0;
        for &i in sorted {
            let (_, tail) = rest.split_at_mut(i - base);
            let (r, tail) = tail.split_first_mut().expect("a mapped region index");
            out.push((i, &mut r.data[..]));
            rest = tail;
            base = i + 1;
        }
    }

    /// The bytes of region `i` (a [`Place::Mem`] index).
    pub(crate) fn region_bytes(&self, i: usize) -> &[u8] {
        &self.regions[i].data
    }

    /// Zero-copy view of `len` bytes of memory (EVT_SEM windows are [`MemError::NotMemory`]).
    pub fn slice(&self, issuer: u8, addr: u64, len: usize) -> Result<&[u8], MemError> {
        match self.mem_target(issuer, addr, len)? {
            Some((i, off)) => Ok(&self.regions[i].data[off..off + len]),
            None => Ok(&[]),
        }
    }

    /// Zero-copy mutable view of `len` bytes of memory.
    pub fn slice_mut(&mut self, issuer: u8, addr: u64, len: usize) -> Result<&mut [u8], MemError> {
        match self.mem_target(issuer, addr, len)? {
            Some((i, off)) => {
                self.note_write(i, off, len);
                Ok(&mut self.regions[i].data[off..off + len])
            }
            None => Ok(&mut []),
        }
    }

    /// `Some((region, offset))`, or `None` for an empty access (which only has to route).
    fn mem_target(
        &self,
        issuer: u8,
        addr: u64,
        len: usize,
    ) -> Result<Option<(usize, usize)>, MemError> {
        if len == 0 {
            return self.route(issuer, addr).map(|_| None);
        }
        match self.target(issuer, addr, len)? {
            Target::Mem(i, off) => Ok(Some((i, off))),
            Target::Sem(_) => Err(MemError::NotMemory { addr }),
        }
    }

    /// Copy `len` bytes from `src` to `dst` (both issued by `issuer`, possibly on different
    /// chips) without an intermediate buffer; overlapping ranges in one region behave as
    /// `memmove`. A copy into an EVT_SEM window (the DMA semaphore increment, docs/contract/device.md §1.2)
    /// reads the source and applies the words; its [`Touched`] names the semaphores.
    pub fn copy(
        &mut self,
        issuer: u8,
        dst: u64,
        src: u64,
        len: usize,
    ) -> Result<Touched, MemError> {
        if len == 0 {
            self.route(issuer, src)?;
            return self.route(issuer, dst).map(|_| Touched::Memory);
        }
        let s = self.target(issuer, src, len)?;
        match (self.target(issuer, dst, len)?, s) {
            (Target::Mem(di, doff), Target::Mem(si, soff)) if di == si => {
                self.note_write(di, doff, len);
                self.regions[di].data.copy_within(soff..soff + len, doff);
                Ok(Touched::Memory)
            }
            (Target::Mem(..), Target::Mem(..)) => {
                let sp = self.split(issuer, (dst, len), &[(src, len)])?;
                if let [Src::Bytes(b)] = sp.srcs[..] {
                    sp.dst.copy_from_slice(b);
                }
                Ok(Touched::Memory)
            }
            (d, s) => {
                // Semaphore words on either side: usually one word, so a stack buffer.
                let mut small = [0u8; 64];
                let mut big = Vec::new();
                let buf = if len <= small.len() {
                    &mut small[..len]
                } else {
                    big.resize(len, 0);
                    &mut big[..]
                };
                self.load_at(s, buf);
                Ok(self.store_at(d, buf))
            }
        }
    }

    /// Borrow the destination `dst = (addr, len)` mutably and every source immutably at once,
    /// zero-copy, for the DMA engine and the CCE (one reduced stream from up to 32 sources). A
    /// source equal to the destination range comes back as [`Src::Dst`]; a partial overlap with
    /// it is [`MemError::Overlap`]. Sources may overlap each other.
    pub fn split(
        &mut self,
        issuer: u8,
        dst: (u64, usize),
        srcs: &[(u64, usize)],
    ) -> Result<Split<'_>, MemError> {
        let (di, doff) = self
            .mem_target(issuer, dst.0, dst.1)?
            .unwrap_or((usize::MAX, 0));
        let mut places = Vec::with_capacity(srcs.len());
        for &(a, len) in srcs {
            places.push(self.mem_target(issuer, a, len)?);
        }
        if di == usize::MAX {
            // Empty destination: every source is a plain shared borrow.
            let this: &Self = self;
            let srcs = places
                .iter()
                .zip(srcs)
                .map(|(p, &(_, len))| match *p {
                    Some((i, off)) => Src::Bytes(&this.regions[i].data[off..off + len]),
                    None => Src::Bytes(&[]),
                })
                .collect();
            return Ok(Split { dst: &mut [], srcs });
        }
        self.note_write(di, doff, dst.1);
        let (before, rest) = self.regions.split_at_mut(di);
        let (dreg, after) = rest.split_first_mut().expect("dst region exists");
        let (lo, tail) = dreg.data.split_at_mut(doff);
        let (d, hi) = tail.split_at_mut(dst.1);
        let (before, after, lo, hi): (&[Region], &[Region], &[u8], &[u8]) = (before, after, lo, hi);
        let dend = doff + dst.1;
        let mut out = Vec::with_capacity(srcs.len());
        for (p, &(addr, len)) in places.iter().zip(srcs) {
            out.push(match *p {
                None => Src::Bytes(&[]),
                Some((i, off)) if i < di => Src::Bytes(&before[i].data[off..off + len]),
                Some((i, off)) if i > di => Src::Bytes(&after[i - di - 1].data[off..off + len]),
                Some((_, off)) if off == doff && len == dst.1 => Src::Dst,
                Some((_, off)) if off + len <= doff => Src::Bytes(&lo[off..off + len]),
                Some((_, off)) if off >= dend => Src::Bytes(&hi[off - dend..off - dend + len]),
                Some(_) => return Err(MemError::Overlap { addr }),
            });
        }
        Ok(Split { dst: d, srcs: out })
    }
}

#[cfg(test)]
mod tests;

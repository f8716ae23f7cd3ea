//! The UDMA engine of one (chip, TOP_SP): an M2S (TX) and an S2M (RX) queue over the rings the
//! emitter laid out, executing whole packets (docs/contract/device.md §1–§4, §11.4, §12).
//!
//! **Queues** (§3.1–§3.3). A [`Queue`] has a ring base (on-chip address of the issuing chip,
//! 64-byte aligned), a power-of-two length in descriptors, and monotonic `head` / `tail`
//! counters: stream index `i` sits in slot `i % len` and carries the RING_ID
//! [`ring_id_at`]`(i, len)` (§1.3: 1 on the first lap, +1 mod 4 per wrap). A doorbell
//! ([`Queue::tail_inc`]) makes `n` more descriptors valid. Choices:
//! * an increment of 0 is a no-op (the emitter writes zero increments for steps without data;
//!   the real register rejects 0, §3.2, but the sequencer never writes it there);
//! * an increment above `len − 16` (the guard gap, §3.2) is an abort, and so is one that would
//!   make more than `len` descriptors outstanding (the producer would have overwritten slots the
//!   engine has not read).
//!
//! **Packets** (§1.2, §2.1). [`QueuePair::run`] consumes whole packets while both queues hold a
//! complete one (FIRST .. LAST, all within the tail): first the TX packet, then the RX packet.
//! * A *copy* TX packet is TX data descriptors with the CME meta_ctrl; its bytes, concatenated,
//!   go to the RX packet's destinations, concatenated. Each piece is one [`Memory::copy`]
//!   (zero-copy; cross-chip routing is the memory's business, the issuer is always this chip).
//!   A copy into an EVT_SEM window is a semaphore write: its [`SemTouch`] is reported.
//! * A *CCE* TX packet is, per source, a compute descriptor (META, CCE meta_ctrl) followed by
//!   that source's data descriptors (W1 = 0); only the final compute descriptor has "last", only
//!   the final data descriptor has LAST. All sources have the compute descriptor's length; the
//!   RX packet receives that many bytes, the element-wise reduction of the sources in source
//!   order ([`super::cce`]), with op, output dtype and (FMA) scales from the compute
//!   descriptors. The accumulation nibble (10 or 11) means binary32 either way (§11.1). Pieces
//!   are borrowed with [`Memory::split`], never copied; an in-place source (the destination
//!   itself) uses [`crate::device::cce::reduce_in_place_with`].
//! * DMB / write barriers need no action: the engine executes packets strictly in order, so
//!   every earlier write is visible before a later descriptor runs.
//!
//! A TX packet without a complete RX partner (or an incomplete TX packet) is a **stall**, not an
//! error: `run` returns with [`Progress::stalled`] and resumes on the next call.
//!
//! **Deferred data.** The byte work of plain copies and reduces goes through a
//! [`crate::device::batch`] (the engine checks every packet when it reaches it; only the bytes
//! move later, in an order that gives the same result). [`QueuePair::run`] has a batch of its
//! own and flushes it before every semaphore write and before it returns, so a caller sees the
//! memory of in-order execution. Inside an executor run all engines of the machine share one
//! batch, flushed when the run ends (`RunCx`, `QueuePair::run_in`). Per run the engines also
//! keep the plain-memory regions they resolved (`RunCx::place`: one binary search over a few
//! cached regions instead of routing the address again) and reuse their packet buffers, so a
//! small packet costs its decoding and its bytes, not allocations.
//!
//! **Replay.** A pair keeps every packet pair it checked, with the ring bytes it came from,
//! and executes a kept one again without reading, decoding or parsing it while every slot of
//! it still holds those bytes (compared when the engine reaches it) and it is wholly posted:
//! a resident machine's repeated runs walk the same descriptors (`dma/replay.rs` says why
//! this is exact whoever writes the rings).
//!
//! **Abort** (§3.3, §11.4, §12.2). A stale RING_ID, an undecodable descriptor, a framing error
//! (FIRST/LAST, a META where data was expected, a copy descriptor in a CCE packet, …), a TX/RX
//! length mismatch, a bad address, an invalid or non-reducible dtype or an op the CCE does not
//! implement put the pair in ABORT: [`DmaError`] names chip, TOP_SP, queue, stream index, the
//! descriptor bytes and the reason, and converts to [`Error`] of kind [`ErrorKind::DmaAbort`]
//! (`NRT_EXEC_HW_ERR_DMA_ABORT`). Once aborted, a pair stays aborted: every later `run` and
//! doorbell returns the same error.

use std::fmt;
use std::sync::Arc;

use super::batch::{Batch, ReduceSpec, SrcSpan};
use super::memory::{Memory, Place, SemTouch};
use crate::dtype::{Dtype, Numerics};
use crate::error::{Error, ErrorKind};
use crate::isa::memmap::{self, MAX_RING_DESCS};
use crate::isa::udma::{ring_id_at, CceOp, Descriptor, Direction, DESC_BYTES};

/// Posted TX descriptors from which a run counts as bulk work (its small ops are deferred and
/// spread over cores, [`crate::device::batch`]).
pub const BULK_DESCS: u64 = 64;

/// The permanent guard gap between producer and consumer (docs/contract/device.md §3.2).
pub const RING_GUARD: u64 = 16;

/// Why and where an engine aborted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DmaError {
    /// Issuing chip.
    pub chip: u8,
    /// Rank-local TOP_SP index of the pair.
    pub topsp: u8,
    /// The queue holding the offending descriptor.
    pub queue: Direction,
    /// Its stream index (monotonic; the ring slot is `index % len`).
    pub index: u64,
    /// Its 16 bytes as read from the ring (zero if it could not be read).
    pub desc: [u8; DESC_BYTES],
    /// What was wrong.
    pub reason: String,
}

impl fmt::Display for DmaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "DMA abort: chip {} TOP_SP {} {:?} queue descriptor {} [",
            self.chip, self.topsp, self.queue, self.index
        )?;
        for b in self.desc {
            write!(f, "{b:02x}")?;
        }
        write!(f, "]: {}", self.reason)
    }
}

impl std::error::Error for DmaError {}

impl From<DmaError> for Error {
    fn from(e: DmaError) -> Self {
        Error::new(ErrorKind::DmaAbort, e.to_string())
    }
}

/// A fault before the pair's identity is attached.
#[derive(Debug)]
struct Fault {
    queue: Direction,
    index: u64,
    desc: [u8; DESC_BYTES],
    reason: String,
}

fn fault(r: &Raw, queue: Direction, reason: impl Into<String>) -> Fault {
    Fault {
        queue,
        index: r.index,
        desc: r.bytes,
        reason: reason.into(),
    }
}

/// What one [`QueuePair::run`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Progress {
    /// Packet pairs executed.
    pub packets_done: u64,
    /// Posted descriptors remain that cannot run yet (an incomplete packet or a packet whose
    /// partner is not posted). RX posted ahead of TX (the normal doorbell order) counts too.
    pub stalled: bool,
    /// Semaphore writes, in execution order (the executor wakes their waiters).
    pub touched_sems: Vec<SemTouch>,
    /// Bytes the executed RX packets wrote (data and semaphore words).
    pub bytes: u64,
}

/// The producer side of a ring shorter than its descriptor stream (docs/contract/device.md §3.2, §4): the
/// host copy of the whole stream (the vring), and how far it has been written into the ring.
/// Before a doorbell makes stream indices valid, [`QueuePair::refill`] writes every one of them
/// not yet written into its slot (`index % len`): a slot is reused only after the engine read
/// it, since a doorbell never leaves more than `len` descriptors outstanding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Feed {
    stream: std::sync::Arc<[[u8; DESC_BYTES]]>,
    written: u64,
}

/// One queue: a ring and its head/tail counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queue {
    dir: Direction,
    base: u64,
    len: u64,
    head: u64,
    tail: u64,
    feed: Option<Feed>,
}

impl Queue {
    /// A queue over the ring at on-chip `base` (64-byte aligned, docs/contract/device.md §3.1 DRBP)
    /// of `len` descriptors (a power of two above the guard gap, at most 2^24).
    pub fn new(dir: Direction, base: u64, len: u64) -> crate::error::Result<Queue> {
        if !len.is_power_of_two() || len <= RING_GUARD || len > MAX_RING_DESCS || base % 64 != 0 {
            return Err(Error::invalid(format!(
                "DMA {dir:?} ring {base:#x} x {len}: the length must be a power of two in \
                 {}..=2^24 and the base 64-byte aligned (docs/contract/device.md §3.1)",
                2 * RING_GUARD
            )));
        }
        Ok(Queue {
            dir,
            base,
            len,
            head: 0,
            tail: 0,
            feed: None,
        })
    }

    /// Attach the whole descriptor `stream` of which the loader wrote the first `written`
    /// (at most the ring's length) into the ring: the rest is written as doorbells need it.
    pub fn with_feed(mut self, stream: std::sync::Arc<[[u8; DESC_BYTES]]>, written: u64) -> Queue {
        self.feed = Some(Feed {
            written: written.min(stream.len() as u64),
            stream,
        });
        self
    }

    /// The same ring at stream indices `head .. tail`, as another executor published them (a
    /// shared run's hang report reads that executor's descriptors from shared memory).
    pub fn at(mut self, head: u64, tail: u64) -> Queue {
        self.head = head;
        self.tail = tail.max(head);
        self
    }

    /// Direction.
    pub fn dir(&self) -> Direction {
        self.dir
    }
    /// Ring base (on-chip).
    pub fn base(&self) -> u64 {
        self.base
    }
    /// Ring length in descriptors.
    pub fn len(&self) -> u64 {
        self.len
    }
    /// Always false: a ring has at least 32 slots (clippy's `len` companion).
    pub fn is_empty(&self) -> bool {
        false
    }
    /// Next stream index the engine reads.
    pub fn head(&self) -> u64 {
        self.head
    }
    /// One past the last posted stream index.
    pub fn tail(&self) -> u64 {
        self.tail
    }
    /// Posted, not yet executed descriptors: stream indices `head .. tail`.
    pub fn pending(&self) -> std::ops::Range<u64> {
        self.head..self.tail
    }
    /// On-chip address of stream index `i`'s slot.
    pub fn slot_addr(&self, i: u64) -> u64 {
        self.base + (i % self.len) * DESC_BYTES as u64
    }
    /// The RING_ID stream index `i` must carry.
    pub fn expected_ring_id(&self, i: u64) -> u8 {
        ring_id_at(i, self.len)
    }

    /// The doorbell (DRTP_inc): `n` more descriptors are valid. 0 is a no-op.
    pub fn tail_inc(&mut self, n: u64) -> Result<(), String> {
        if n == 0 {
            return Ok(());
        }
        if n > self.len - RING_GUARD {
            return Err(format!(
                "tail increment {n} exceeds the ring length {} minus the {RING_GUARD}-descriptor \
                 guard gap (docs/contract/device.md §3.2)",
                self.len
            ));
        }
        let outstanding = self.tail + n - self.head;
        if outstanding > self.len {
            return Err(format!(
                "tail increment {n} makes {outstanding} descriptors outstanding in a ring of {}: \
                 unread slots would have been overwritten",
                self.len
            ));
        }
        self.tail += n;
        Ok(())
    }

    /// Read and check the complete packet at `head` into `out`; false if LAST is not posted
    /// yet. `ring` is the ring's bytes when it lies in one mapped region (read directly), else
    /// each slot is read through the memory (and a bad slot address aborts).
    fn packet(
        &self,
        mem: &Memory,
        chip: u8,
        ring: Option<(usize, usize)>,
        out: &mut Vec<Raw>,
        mut memo: Option<&mut DecodeMemo>,
        memo_all: bool,
    ) -> Result<bool, Fault> {
        out.clear();
        let direct = ring.map(|(region, off)| &mem.region_bytes(region)[off..]);
        // The length is a power of two: slot and lap by mask and shift, not division.
        let (mask, shift) = (self.len - 1, self.len.trailing_zeros());
        let mut i = self.head;
        while i < self.tail {
            let mut bytes = [0u8; DESC_BYTES];
            // What an error names: the index and the bytes (the descriptor is not decoded).
            let unread = |bytes| Raw {
                index: i,
                bytes,
                desc: Descriptor::RxData {
                    ctrl: Default::default(),
                    addr: 0,
                },
            };
            match direct {
                Some(r) => {
                    let at = ((i & mask) as usize) * DESC_BYTES;
                    bytes.copy_from_slice(&r[at..at + DESC_BYTES]);
                }
                None => {
                    if let Err(e) = mem.read(chip, self.slot_addr(i), &mut bytes) {
                        let f = format!("reading the ring: {e}");
                        return Err(fault(&unread(bytes), self.dir, f));
                    }
                }
            }
            let tag = bytes[3] & 3;
            // `ring_id_at(i, len)`: 1 on the first lap, +1 mod 4 per lap.
            let want = ((1 + (i >> shift)) & 3) as u8;
            if tag != want {
                return Err(fault(
                    &unread(bytes),
                    self.dir,
                    format!(
                        "stale descriptor: RING_ID {tag}, expected {want} for lap {} of a \
                         {}-slot ring (docs/contract/device.md §1.3)",
                        i >> shift,
                        self.len
                    ),
                ));
            }
            // Memoized: every descriptor of a small run (the same bytes come back when the
            // collective runs again), the META ones of a bulk run (compute descriptors carry no
            // address, so a step repeats a few of them: len_ctrl bit 23, byte 2 bit 7). The
            // descriptor is written into its place in `out` (one copy, no intermediate value).
            let memo = memo
                .as_deref_mut()
                .filter(|_| memo_all || bytes[2] & 0x80 != 0);
            out.push(unread(bytes));
            let raw = out.last_mut().expect("just pushed");
            match memo.as_ref().and_then(|m| m.get(&bytes, self.dir)) {
                Some(d) => raw.desc = *d,
                None => match Descriptor::decode(&bytes, self.dir) {
                    Ok(d) => {
                        raw.desc = d;
                        if let Some(m) = memo {
                            m.insert(&bytes, self.dir, d);
                        }
                    }
                    Err(e) => {
                        out.pop();
                        return Err(fault(&unread(bytes), self.dir, e.message().to_string()));
                    }
                },
            }
            let ctrl = raw.desc.ctrl();
            if (out.len() == 1) != ctrl.first {
                let raw = out.pop().expect("just pushed");
                return Err(fault(
                    &raw,
                    self.dir,
                    if ctrl.first {
                        "FIRST inside a packet (no LAST before)"
                    } else {
                        "packet does not start with FIRST"
                    },
                ));
            }
            if ctrl.last {
                return Ok(true);
            }
            i += 1;
        }
        Ok(false)
    }

    /// `(region, offset)` of the whole ring if it lies in one mapped region.
    fn ring_place(&self, mem: &Memory, chip: u8) -> Option<(usize, usize)> {
        match mem.place(chip, self.base, (self.len as usize) * DESC_BYTES) {
            Ok(Place::Mem { region, off }) => Some((region, off)),
            _ => None,
        }
    }
}

/// One descriptor as read.
#[derive(Debug, Clone, Copy)]
struct Raw {
    index: u64,
    bytes: [u8; DESC_BYTES],
    desc: Descriptor,
}

/// A data piece of a packet: address, bytes, and the descriptor it came from (its index in
/// the packet's descriptors, [`Packet::tx`] or [`Packet::rx`]).
#[derive(Debug, Clone, Copy)]
struct Seg {
    addr: u64,
    len: u64,
    at: usize,
}

/// A checked TX packet; its data segments are in [`Packet::txsegs`].
#[derive(Debug, Clone, Copy, Default)]
enum TxPacket {
    /// A copy: the segments in order.
    #[default]
    Copy,
    /// A reduce: source `k` is `txsegs[bounds[k]..bounds[k + 1]]` ([`Packet::bounds`]).
    Cce {
        op: CceOp,
        dtype: Dtype,
        /// FMA: the per-source scales are in [`Scratch::scales`].
        fma: bool,
        /// Bytes of every source (and of the result).
        len: u64,
        /// Index of the first compute descriptor in the packet (errors of the reduce point at
        /// it).
        head: usize,
    },
}

/// The buffers one packet is parsed into, kept between packets and runs.
#[derive(Debug, Default)]
struct Scratch {
    pkt: Packet,
    cuts: Vec<u64>,
}

/// A plain-memory region resolved during one run: an access whose [`key`] lies in `lo..hi`
/// (with its end) lands in `region` at offset `key − lo`. The key holds the whole route (SoC
/// bits 63:48, and the issuer when the route depends on it), so this is what [`Memory::place`]
/// answered for an address of the same route (regions never overlap EVT_SEM blocks), for as
/// long as nothing is mapped or unmapped: one run.
#[derive(Debug, Clone, Copy)]
struct Known {
    /// [`key`] of the region's first byte.
    lo: u64,
    /// [`key`] one past its last byte.
    hi: u64,
    region: usize,
    /// The region holds a ring of the run (ops on it are not deferred).
    ring: bool,
}

/// Where an operand lands, as the engines need to know it: plain memory (and whether that
/// region holds a ring), an EVT_SEM window, or anything else (nothing, or an address the memory
/// rejects: the in-order access that follows reports it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Loc {
    Mem {
        region: usize,
        off: usize,
        ring: bool,
    },
    Sem,
    Other,
}

/// The regions resolved so far in a run, sorted by key (dense keys, so the search stays in
/// cache): an operand is found by its last hit (`hint`, per operand position) or one binary
/// search, instead of decoding and routing its address again.
#[derive(Debug, Default)]
struct Regions {
    keys: Vec<u64>,
    known: Vec<Known>,
}

/// Bits 47:0 of a SoC address: the on-chip address (die bit included).
const ON_CHIP_MASK: u64 = (1 << 48) - 1;

/// The cache key of `addr` issued by `issuer`: the address itself when it names its chip (the
/// id-valid bit 54 set: the route does not depend on the issuer), else the issuer above the
/// 55 address bits a valid SoC address has. Keys are `addr + constant` per route, so a region's
/// addresses form one key range. `None` for an address with bits 63:55 set (invalid: the
/// memory reports it).
fn key(issuer: u8, addr: u64) -> Option<u64> {
    match addr >> 54 {
        0 => Some((u64::from(issuer) << 55) | addr),
        1 => Some(addr),
        _ => None,
    }
}

impl Regions {
    /// Where `(addr, len)` issued by `issuer` lands ([`Memory::place`], with the ring flag from
    /// `rings`, sorted).
    fn place(
        &mut self,
        mem: &Memory,
        rings: &[usize],
        issuer: u8,
        addr: u64,
        len: usize,
        hint: &mut usize,
    ) -> Loc {
        let Some(k) = key(issuer, addr).filter(|_| len > 0) else {
            return Loc::Other;
        };
        let end = k + len as u64;
        let found = |e: &Known| Loc::Mem {
            region: e.region,
            off: (k - e.lo) as usize,
            ring: e.ring,
        };
        if let Some(e) = self.known.get(*hint).filter(|e| e.lo <= k && end <= e.hi) {
            return found(e);
        }
        // An EVT_SEM window (bits 47:0 decide it, once the route is valid): never plain
        // memory, and not worth a lookup here — the in-order access that follows routes and
        // checks the address itself.
        let a = addr & ON_CHIP_MASK;
        if memmap::topsp_block_of(a).is_some() || memmap::tpb_block_of(a).is_some() {
            return Loc::Sem;
        }
        let at = self.keys.partition_point(|&lo| lo <= k);
        if let Some(j) = at.checked_sub(1) {
            let e = &self.known[j];
            if end <= e.hi {
                *hint = j;
                return found(e);
            }
        }
        match mem.place(issuer, addr, len) {
            Ok(Place::Mem { region, off }) => {
                let lo = k - off as u64;
                let e = Known {
                    lo,
                    hi: lo + mem.region_bytes(region).len() as u64,
                    region,
                    ring: rings.binary_search(&region).is_ok(),
                };
                let at = self.keys.partition_point(|&l| l < lo);
                self.keys.insert(at, lo);
                self.known.insert(at, e);
                *hint = at;
                found(&e)
            }
            Ok(Place::Sem) => Loc::Sem,
            _ => Loc::Other,
        }
    }

    fn clear(&mut self) {
        self.keys.clear();
        self.known.clear();
    }

    /// Know every mapped region from the start, under both routes that reach it (docs/contract/device.md
    /// §1.4, as [`Memory::route`] resolves them): an address without the id-valid bit targets
    /// the issuing chip (so region `r` of chip `c` is reached by issuer `c`), one with it the
    /// chip in bits 53:48 whoever issues it. Any other address (a neighbour route, a chip id
    /// without the valid bit, a missing chip) has a key outside these ranges and goes to the
    /// memory, as does anything not found. A small collective touches each region a few
    /// times, so resolving them one by one on first use would cost more than this table.
    fn fill(&mut self, mem: &Memory, rings: &[usize]) {
        // The tables keep their capacity: a resident machine refills them every run.
        self.clear();
        self.known.reserve(2 * mem.regions().size_hint().0);
        for (region, (chip, base, len)) in mem.regions().enumerate() {
            let ring = rings.binary_search(&region).is_ok();
            let (c, base) = (u64::from(chip), base & ON_CHIP_MASK);
            for lo in [(c << 55) | base, (1 << 54) | (c << 48) | base] {
                self.known.push(Known {
                    lo,
                    hi: lo + len,
                    region,
                    ring,
                });
            }
        }
        self.known.sort_unstable_by_key(|e| e.lo);
        self.keys.extend(self.known.iter().map(|e| e.lo));
    }
}

/// What the engines of one machine share during a run (module doc, "Deferred data"): the
/// batch of deferred data, the regions holding rings, when to flush, the semaphore writes
/// executed (in order), and per-run caches.
#[derive(Debug)]
pub(crate) struct RunCx {
    pub(crate) batch: Batch,
    /// Regions holding a ring of any engine of the run, sorted: ops touching them run in order
    /// (the engines read their rings and the producer writes them directly).
    rings: Vec<usize>,
    /// Flush before every semaphore write (another executor may read the signalled data).
    flush_at_signal: bool,
    /// Flush whenever an engine returns (nothing stays pending between engine runs).
    flush_at_return: bool,
    /// Semaphore writes of the engines, in execution order, for the executor to wake waiters.
    pub(crate) touched: Vec<SemTouch>,
    /// The checked reduce parameters of the last CCE packet and its number of sources
    /// (consecutive packets share them).
    last_spec: Option<(Arc<ReduceSpec>, usize)>,
    regions: Regions,
    /// Buffers of a CCE piece's operands (reused: no per-packet allocation).
    addrs: Vec<u64>,
    at: Vec<usize>,
    spans: Vec<SrcSpan>,
    /// Per operand position (destination, then sources) the last region it hit.
    hints: [usize; HINTS],
    scratch: Scratch,
    /// The decoded-descriptor memo of the run (taken by [`RunCx::start`], back to [`MEMOS`] on
    /// drop).
    memo: Option<DecodeMemo>,
}

impl Drop for RunCx {
    fn drop(&mut self) {
        if let Some(m) = self.memo.take() {
            DecodeMemo::put(m);
        }
    }
}

/// Operand positions with a region hint: the destination and up to 32 CCE sources.
const HINTS: usize = 33;

impl Default for RunCx {
    fn default() -> Self {
        RunCx {
            batch: Batch::default(),
            rings: Vec::new(),
            flush_at_signal: true,
            flush_at_return: true,
            touched: Vec::new(),
            last_spec: None,
            regions: Regions::default(),
            addrs: Vec::new(),
            at: Vec::new(),
            spans: Vec::new(),
            hints: [0; HINTS],
            scratch: Scratch::default(),
            memo: None,
        }
    }
}

impl RunCx {
    /// Prepare for a run on `mem` (as mapped now) whose rings lie in `rings` (region indices).
    /// `flush_at_signal`: flush before each semaphore write; `flush_at_return`: flush whenever
    /// an engine returns.
    pub(crate) fn start(
        &mut self,
        mem: &Memory,
        rings: impl IntoIterator<Item = usize>,
        flush_at_signal: bool,
        flush_at_return: bool,
    ) {
        // Every run ends flushed; only a panic can leave ops behind, and their regions may
        // be gone: drop them.
        if !self.batch.is_empty() {
            self.batch = Batch::default();
        }
        self.rings.clear();
        self.rings.extend(rings);
        self.rings.sort_unstable();
        self.rings.dedup();
        self.flush_at_signal = flush_at_signal;
        self.flush_at_return = flush_at_return;
        self.touched.clear();
        self.last_spec = None;
        self.regions.fill(mem, &self.rings);
        if self.memo.is_none() {
            self.memo = Some(DecodeMemo::take());
        }
    }

    /// Where `(addr, n)` issued by `chip` lands, through the run's region cache with the hint
    /// of operand position `pos`.
    fn place(&mut self, mem: &Memory, chip: u8, addr: u64, n: usize, pos: usize) -> Loc {
        let hint = &mut self.hints[pos.min(HINTS - 1)];
        let at = self.regions.place(mem, &self.rings, chip, addr, n, hint);
        if let (0, Loc::Mem { region, off, .. }) = (pos, at) {
            // A destination: the bytes another host must receive if the region shadows its HBM.
            mem.note_write(region, off, n);
        }
        at
    }
}

/// `(region, offset)` of a whole ring lying in one mapped region ([`QueuePair::ring_places`]).
pub(crate) type RingPlace = Option<(usize, usize)>;

/// An M2S + S2M queue pair of one TOP_SP, with its abort state.
#[derive(Debug, Clone)]
pub struct QueuePair {
    /// Rank-local TOP_SP index (for error reports).
    pub topsp: u8,
    /// TX queue.
    pub m2s: Queue,
    /// RX queue.
    pub s2m: Queue,
    aborted: Option<DmaError>,
    /// The packet pairs checked so far, shared with this pair's clones ([`replay`]).
    replay: SharedReplay,
}

impl QueuePair {
    /// A pair in NORMAL state.
    pub fn new(topsp: u8, m2s: Queue, s2m: Queue) -> QueuePair {
        QueuePair {
            topsp,
            m2s,
            s2m,
            aborted: None,
            replay: SharedReplay::default(),
        }
    }

    /// Packet pairs this pair and its clones took from their replay cache ([`replay`]).
    #[cfg(test)]
    pub(crate) fn replay_hits(&self) -> u64 {
        self.replay.handle().lock().hits
    }

    /// The abort, if the pair is in ABORT.
    pub fn aborted(&self) -> Option<&DmaError> {
        self.aborted.as_ref()
    }

    /// The queue of `dir`.
    pub fn queue(&self, dir: Direction) -> &Queue {
        match dir {
            Direction::M2S => &self.m2s,
            Direction::S2M => &self.s2m,
        }
    }

    fn abort(&mut self, chip: u8, f: Fault) -> DmaError {
        let e = DmaError {
            chip,
            topsp: self.topsp,
            queue: f.queue,
            index: f.index,
            desc: f.desc,
            reason: f.reason,
        };
        self.aborted = Some(e.clone());
        e
    }

    /// Ring the doorbell of `dir` (`chip` only names the abort). An increment the queue
    /// rejects aborts the pair; its report names the queue's tail index.
    pub fn tail_inc(&mut self, chip: u8, dir: Direction, n: u64) -> Result<(), DmaError> {
        if let Some(e) = &self.aborted {
            return Err(e.clone());
        }
        let q = match dir {
            Direction::M2S => &mut self.m2s,
            Direction::S2M => &mut self.s2m,
        };
        let index = q.tail;
        q.tail_inc(n).map_err(|reason| {
            let f = Fault {
                queue: dir,
                index,
                desc: [0; DESC_BYTES],
                reason,
            };
            self.abort(chip, f)
        })
    }

    /// The producer's writes for the doorbells rung so far: every stream index below a queue's
    /// tail that is not in its ring yet is written into its slot ([`Feed`]). A tail past the
    /// end of the stream leaves those slots as they are (the engine then finds stale or empty
    /// descriptors and aborts, as hardware would).
    pub fn refill(&mut self, mem: &mut Memory, chip: u8) -> Result<(), DmaError> {
        for dir in [Direction::M2S, Direction::S2M] {
            let q = match dir {
                Direction::M2S => &mut self.m2s,
                Direction::S2M => &mut self.s2m,
            };
            let Some(f) = &mut q.feed else { continue };
            let upto = q.tail.min(f.stream.len() as u64);
            while f.written < upto {
                let i = f.written;
                let slot = q.base + (i % q.len) * DESC_BYTES as u64;
                if let Err(e) = mem.write(chip, slot, &f.stream[i as usize]) {
                    let f = Fault {
                        queue: dir,
                        index: i,
                        desc: f.stream[i as usize],
                        reason: format!("writing the ring: {e}"),
                    };
                    return Err(self.abort(chip, f));
                }
                f.written += 1;
            }
        }
        Ok(())
    }

    /// Where the rings lie: per queue (M2S, S2M) `(region, offset)` of the whole ring if it lies
    /// in one mapped region (then the engine reads it directly), and the region holding its
    /// first slot (the region an op must not defer into).
    pub(crate) fn ring_places(
        &self,
        mem: &Memory,
        chip: u8,
    ) -> ([RingPlace; 2], [Option<usize>; 2]) {
        let places = [
            self.m2s.ring_place(mem, chip),
            self.s2m.ring_place(mem, chip),
        ];
        let region = |q: &Queue, at: Option<(usize, usize)>| {
            at.map(|(r, _)| r)
                .or_else(|| match mem.place(chip, q.base, DESC_BYTES) {
                    Ok(Place::Mem { region, .. }) => Some(region),
                    _ => None,
                })
        };
        let regions = [region(&self.m2s, places[0]), region(&self.s2m, places[1])];
        (places, regions)
    }

    /// Execute every packet pair that is fully posted; stop at the first that is not. Bulk
    /// data of the packets is deferred and executed in parallel ([`crate::device::batch`]);
    /// it is flushed before every semaphore write and before this returns, on every path.
    pub fn run(
        &mut self,
        mem: &mut Memory,
        chip: u8,
        numerics: &Numerics,
    ) -> Result<Progress, DmaError> {
        let (places, rings) = self.ring_places(mem, chip);
        let mut cx = RunCx::default();
        cx.start(mem, rings.into_iter().flatten(), true, true);
        let mut p = self.run_in(mem, chip, numerics, &mut cx, places)?;
        p.touched_sems = std::mem::take(&mut cx.touched);
        Ok(p)
    }

    /// [`QueuePair::run`] inside a machine's run: the deferred data goes to `cx.batch`, which
    /// is flushed as `cx` says (and always before an abort is returned), semaphore writes are
    /// appended to `cx.touched` (not to [`Progress::touched_sems`]). `places` is
    /// [`QueuePair::ring_places`]'s first half for the current mapping.
    pub(crate) fn run_in(
        &mut self,
        mem: &mut Memory,
        chip: u8,
        numerics: &Numerics,
        cx: &mut RunCx,
        places: [Option<(usize, usize)>; 2],
    ) -> Result<Progress, DmaError> {
        if let Some(e) = &self.aborted {
            return Err(e.clone());
        }
        let mut p = Progress::default();
        let mut scratch = std::mem::take(&mut cx.scratch);
        let bulk = self.m2s.tail - self.m2s.head >= BULK_DESCS;
        let mut memo = cx.memo.take();
        let replay = self.replay.handle();
        let mut replay = replay.try_lock();
        let end = {
            let mut sink = Sink {
                mem: &mut *mem,
                chip,
                cx: &mut *cx,
                bulk,
            };
            loop {
                match self.step(
                    &mut sink,
                    numerics,
                    places,
                    &mut scratch,
                    memo.as_mut(),
                    replay.as_deref_mut(),
                    &mut p,
                ) {
                    Ok(true) => p.packets_done += 1,
                    Ok(false) => break Ok(()),
                    Err(f) => break Err(f),
                }
            }
        };
        drop(replay);
        cx.scratch = scratch;
        cx.memo = memo;
        if end.is_err() || cx.flush_at_return {
            cx.batch.flush(mem);
        }
        if let Err(f) = end {
            return Err(self.abort(chip, f));
        }
        p.stalled = !self.m2s.pending().is_empty() || !self.s2m.pending().is_empty();
        Ok(p)
    }

    /// Read and check the packet pair at the heads into `pkt`: `Ok(false)` when it is not
    /// wholly posted yet.
    fn parse(
        &self,
        mem: &Memory,
        chip: u8,
        places: [Option<(usize, usize)>; 2],
        pkt: &mut Packet,
        mut memo: Option<&mut DecodeMemo>,
        memo_all: bool,
    ) -> Result<bool, Fault> {
        if !self.m2s.packet(
            mem,
            chip,
            places[0],
            &mut pkt.tx,
            memo.as_deref_mut(),
            memo_all,
        )? {
            return Ok(false);
        }
        if !self
            .s2m
            .packet(mem, chip, places[1], &mut pkt.rx, memo, memo_all)?
        {
            return Ok(false);
        }
        pkt.kind = parse_tx(&pkt.tx, &mut pkt.txsegs, &mut pkt.bounds, &mut pkt.scales)?;
        parse_rx(&pkt.rx, &mut pkt.rxsegs);
        pkt.rx_bytes = pkt.rxsegs.iter().map(|g| g.len).sum();
        let tx_bytes = match &pkt.kind {
            TxPacket::Copy => pkt.txsegs.iter().map(|g| g.len).sum(),
            TxPacket::Cce { len, .. } => *len,
        };
        if tx_bytes != pkt.rx_bytes {
            return Err(fault(
                &pkt.rx[0],
                Direction::S2M,
                format!(
                    "length mismatch: the TX packet at M2S index {} carries {tx_bytes} bytes, this \
                     RX packet takes {} (docs/contract/device.md §1.2)",
                    self.m2s.head, pkt.rx_bytes,
                ),
            ));
        }
        Ok(true)
    }

    /// One packet pair: `Ok(false)` when none is ready. The pair comes from the replay cache
    /// when the rings still hold its bytes ([`replay`]), else it is read and checked (and
    /// kept).
    #[allow(clippy::too_many_arguments)]
    fn step(
        &mut self,
        sink: &mut Sink<'_>,
        numerics: &Numerics,
        places: [Option<(usize, usize)>; 2],
        s: &mut Scratch,
        memo: Option<&mut DecodeMemo>,
        mut replay: Option<&mut Replay>,
        p: &mut Progress,
    ) -> Result<bool, Fault> {
        let (mem, chip, bulk) = (&*sink.mem, sink.chip, sink.bulk);
        let hit = match replay.as_deref_mut() {
            Some(r) => r.find(mem, &self.m2s, &self.s2m, places),
            None => None,
        };
        let pkt: &Packet = if let (Some(at), Some(r)) = (hit, replay.as_deref()) {
            r.packet(at)
        } else {
            if !self.parse(mem, chip, places, &mut s.pkt, memo, !bulk)? {
                return Ok(false);
            }
            if let Some(r) = replay {
                r.keep(&self.m2s, &self.s2m, &s.pkt);
            }
            &s.pkt
        };
        match &pkt.kind {
            TxPacket::Copy => exec_copy(sink, &pkt.txsegs, &pkt.rxsegs, &pkt.tx, &pkt.rx)?,
            TxPacket::Cce {
                op,
                dtype,
                fma,
                len,
                head,
            } => {
                let red = Reduce {
                    numerics,
                    op: *op,
                    dtype: *dtype,
                    scales: fma.then_some(&pkt.scales[..]),
                    head: pkt.tx[*head],
                };
                let cce = CcePacket {
                    len: *len,
                    segs: &pkt.txsegs,
                    bounds: &pkt.bounds,
                    dst: &pkt.rxsegs,
                    tx: &pkt.tx,
                    rx: &pkt.rx,
                };
                exec_cce(sink, &red, &cce, &mut s.cuts)?
            }
        }
        self.m2s.head += pkt.tx.len() as u64;
        self.s2m.head += pkt.rx.len() as u64;
        p.bytes += pkt.rx_bytes;
        Ok(true)
    }
}

mod exec;
use exec::{exec_cce, exec_copy, parse_rx, parse_tx, CcePacket, Reduce, Sink};

mod memo;
use memo::DecodeMemo;

mod replay;
use replay::{Packet, Replay, SharedReplay};

#[cfg(test)]
mod tests;

//! The UDMA engine of one (chip, TOP_SP): an M2S (TX) and an S2M (RX) queue over the rings the
//! emitter laid out, executing whole packets (spec/device.md §1–§4, §11.4, §12).
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
//! **Abort** (§3.3, §11.4, §12.2). A stale RING_ID, an undecodable descriptor, a framing error
//! (FIRST/LAST, a META where data was expected, a copy descriptor in a CCE packet, …), a TX/RX
//! length mismatch, a bad address, an invalid or non-reducible dtype or an op the CCE does not
//! implement put the pair in ABORT: [`DmaError`] names chip, TOP_SP, queue, stream index, the
//! descriptor bytes and the reason, and converts to [`Error`] of kind [`ErrorKind::DmaAbort`]
//! (`NRT_EXEC_HW_ERR_DMA_ABORT`). Once aborted, a pair stays aborted: every later `run` and
//! doorbell returns the same error.

use std::fmt;

use super::batch::{device_threads, Batch};
use super::memory::{Memory, Place, SemTouch};
use crate::dtype::{Dtype, Numerics};
use crate::error::{Error, ErrorKind};
use crate::isa::memmap::MAX_RING_DESCS;
use crate::isa::udma::{ring_id_at, CceOp, Descriptor, Direction, DESC_BYTES};

/// Posted TX descriptors from which a run counts as bulk work (its small ops are deferred and
/// spread over cores, [`crate::device::batch`]).
pub const BULK_DESCS: u64 = 64;

/// The permanent guard gap between producer and consumer (device.md §3.2).
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

/// The producer side of a ring shorter than its descriptor stream (device.md §3.2, §4): the
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
    /// A queue over the ring at on-chip `base` (64-byte aligned, §3.1 DRBP) of `len`
    /// descriptors (a power of two above the guard gap, at most 2^24).
    pub fn new(dir: Direction, base: u64, len: u64) -> crate::error::Result<Queue> {
        if !len.is_power_of_two() || len <= RING_GUARD || len > MAX_RING_DESCS || base % 64 != 0 {
            return Err(Error::invalid(format!(
                "DMA {dir:?} ring {base:#x} x {len}: the length must be a power of two in \
                 {}..=2^24 and the base 64-byte aligned (device.md §3.1)",
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
                 guard gap (device.md §3.2)",
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
    ) -> Result<bool, Fault> {
        out.clear();
        let direct = ring.map(|(region, off)| &mem.region_bytes(region)[off..]);
        let mut i = self.head;
        while i < self.tail {
            let mut bytes = [0u8; DESC_BYTES];
            let unread = Raw {
                index: i,
                bytes,
                desc: Descriptor::RxData {
                    ctrl: Default::default(),
                    addr: 0,
                },
            };
            match direct {
                Some(r) => {
                    let at = ((i % self.len) as usize) * DESC_BYTES;
                    bytes.copy_from_slice(&r[at..at + DESC_BYTES]);
                }
                None => mem
                    .read(chip, self.slot_addr(i), &mut bytes)
                    .map_err(|e| fault(&unread, self.dir, format!("reading the ring: {e}")))?,
            }
            let raw = Raw { bytes, ..unread };
            let tag = bytes[3] & 3;
            let want = self.expected_ring_id(i);
            if tag != want {
                return Err(fault(
                    &raw,
                    self.dir,
                    format!(
                        "stale descriptor: RING_ID {tag}, expected {want} for lap {} of a \
                         {}-slot ring (device.md §1.3)",
                        i / self.len,
                        self.len
                    ),
                ));
            }
            let desc = Descriptor::decode(&bytes, self.dir)
                .map_err(|e| fault(&raw, self.dir, e.message().to_string()))?;
            let raw = Raw { desc, ..raw };
            let ctrl = desc.ctrl();
            if out.is_empty() && !ctrl.first {
                return Err(fault(&raw, self.dir, "packet does not start with FIRST"));
            }
            if !out.is_empty() && ctrl.first {
                return Err(fault(
                    &raw,
                    self.dir,
                    "FIRST inside a packet (no LAST before)",
                ));
            }
            out.push(raw);
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

/// A data piece of a packet: address, bytes, and the descriptor it came from.
#[derive(Debug, Clone, Copy)]
struct Seg {
    addr: u64,
    len: u64,
    raw: Raw,
}

/// A checked TX packet.
#[derive(Debug)]
enum TxPacket {
    Copy(Vec<Seg>),
    Cce {
        op: CceOp,
        dtype: Dtype,
        scales: Option<Vec<f32>>,
        /// Bytes of every source (and of the result).
        len: u64,
        sources: Vec<Vec<Seg>>,
        /// The first compute descriptor (errors of the reduce point at it).
        head: Raw,
    },
}

impl TxPacket {
    fn bytes(&self) -> u64 {
        match self {
            TxPacket::Copy(s) => s.iter().map(|s| s.len).sum(),
            TxPacket::Cce { len, .. } => *len,
        }
    }
}

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
}

impl QueuePair {
    /// A pair in NORMAL state.
    pub fn new(topsp: u8, m2s: Queue, s2m: Queue) -> QueuePair {
        QueuePair {
            topsp,
            m2s,
            s2m,
            aborted: None,
        }
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

    /// Execute every packet pair that is fully posted; stop at the first that is not. Bulk
    /// data of the packets is deferred and executed in parallel ([`crate::device::batch`]);
    /// everything is flushed before this returns, on every path.
    pub fn run(
        &mut self,
        mem: &mut Memory,
        chip: u8,
        numerics: &Numerics,
    ) -> Result<Progress, DmaError> {
        if let Some(e) = &self.aborted {
            return Err(e.clone());
        }
        let mut p = Progress::default();
        let places = [
            self.m2s.ring_place(mem, chip),
            self.s2m.ring_place(mem, chip),
        ];
        let ring_region = |q: &Queue, at: Option<(usize, usize)>| {
            at.map(|(r, _)| r)
                .or(match mem.place(chip, q.base, DESC_BYTES) {
                    Ok(Place::Mem { region, .. }) => Some(region),
                    _ => None,
                })
        };
        let rings = [
            ring_region(&self.m2s, places[0]),
            ring_region(&self.s2m, places[1]),
        ];
        let mut batch = Batch::default();
        let mut sink = Sink {
            mem,
            chip,
            batch: &mut batch,
            rings,
            bulk: self.m2s.tail - self.m2s.head >= BULK_DESCS,
            last_spec: None,
            threads: device_threads(),
        };
        let mut bufs = (Vec::new(), Vec::new());
        let end = loop {
            match self.step(&mut sink, numerics, places, &mut bufs, &mut p) {
                Ok(true) => p.packets_done += 1,
                Ok(false) => break Ok(()),
                Err(f) => break Err(f),
            }
        };
        sink.flush();
        if let Err(f) = end {
            return Err(self.abort(chip, f));
        }
        p.stalled = !self.m2s.pending().is_empty() || !self.s2m.pending().is_empty();
        Ok(p)
    }

    /// One packet pair: `Ok(false)` when none is ready.
    fn step(
        &mut self,
        sink: &mut Sink<'_>,
        numerics: &Numerics,
        places: [Option<(usize, usize)>; 2],
        (tx, rx): &mut (Vec<Raw>, Vec<Raw>),
        p: &mut Progress,
    ) -> Result<bool, Fault> {
        if !self.m2s.packet(sink.mem, sink.chip, places[0], tx)? {
            return Ok(false);
        }
        if !self.s2m.packet(sink.mem, sink.chip, places[1], rx)? {
            return Ok(false);
        }
        let (n_tx, n_rx) = (tx.len() as u64, rx.len() as u64);
        let tx = parse_tx(tx)?;
        let dst = parse_rx(rx);
        let rx_bytes: u64 = dst.iter().map(|s| s.len).sum();
        if tx.bytes() != rx_bytes {
            return Err(fault(
                &rx[0],
                Direction::S2M,
                format!(
                    "length mismatch: the TX packet at M2S index {} carries {} bytes, this RX \
                     packet takes {rx_bytes} (device.md §1.2)",
                    self.m2s.head,
                    tx.bytes()
                ),
            ));
        }
        match &tx {
            TxPacket::Copy(src) => exec_copy(sink, src, &dst, &mut p.touched_sems)?,
            TxPacket::Cce {
                op,
                dtype,
                scales,
                len,
                sources,
                head,
            } => {
                let red = Reduce {
                    numerics,
                    op: *op,
                    dtype: *dtype,
                    scales: scales.as_deref(),
                    head: *head,
                };
                exec_cce(sink, &red, *len, sources, &dst)?
            }
        }
        self.m2s.head += n_tx;
        self.s2m.head += n_rx;
        p.bytes += rx_bytes;
        Ok(true)
    }
}

#[path = "dma_exec.rs"]
mod exec;
use exec::{exec_cce, exec_copy, parse_rx, parse_tx, Reduce, Sink};

#[cfg(test)]
#[path = "dma_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "dma_e2e_tests.rs"]
mod e2e_tests;

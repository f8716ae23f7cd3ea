//! Packet replay for [`super::QueuePair`]: what the engine read, decoded and checked for a
//! packet pair, kept with the exact ring bytes it came from and reused while those bytes stay
//! the same.
//!
//! **Why.** A resident machine (`runtime::resident`) runs the same collective again and again:
//! every run walks the same descriptors at the same stream indices. At 4 KiB (2 ranks, 30
//! descriptors in 12 packets) reading, decoding (even through the [`super::DecodeMemo`]),
//! framing and parsing those packets was about a sixth of `Machine::run`'s instructions, spent
//! again on every run to find the same answer.
//!
//! **Why it is exact.** Everything [`super::QueuePair`] derives from a packet pair before it
//! touches data — the descriptors, the RING_ID and FIRST/LAST checks, the parsed TX packet
//! (copy or CCE, its segments, sources, scales) and the RX destinations, the TX/RX length
//! check — is a pure function of the ring bytes at stream indices `head ..` of both queues,
//! the two head indices and the ring lengths (the RING_ID a slot must carry depends on the
//! index and the length). An entry is keyed on the two heads and holds every descriptor's
//! 16 bytes; it is used only when the ring lengths are those it was made with, both packets
//! are wholly posted (below their tails: otherwise the engine stalls or faults before their
//! end) and **every byte in the ring equals the kept bytes** — compared slot by slot at the
//! moment the engine reads the packet, as the engine itself would read them. So no write path
//! has to announce itself: a new lap, a feed refilling slots, a re-armed ring, a test that
//! corrupts a descriptor, another process writing a ring in shared memory (`Machine::peers`)
//! all change the bytes, and a changed byte is decoded again by the ordinary path, which
//! faults, stalls or runs exactly as without a cache. Only packets that parsed successfully
//! are kept: a bad packet is decoded (and rejected) every time.
//!
//! The compare costs a 16-byte equality per descriptor; a ring that does not lie in one
//! mapped region (read slot by slot through the memory) is never replayed. Executing the
//! packet — resolving its operands in the current mapping, moving its bytes, writing
//! semaphores — is not replayed: it happens every run.
//!
//! **Where it lives.** The cache is shared by the clones of a queue pair (a resident machine
//! starts every run from clones of the pairs it loaded), behind a mutex the engine only
//! `try_lock`s: a pair whose cache is busy (two machines running clones at once) runs
//! without it. It holds at most [`MAX_DESCS`] descriptors per pair; packets past that are
//! decoded every time, as before.

use std::sync::Arc;

use parking_lot::Mutex;

use super::{Queue, Raw, RingPlace, Seg, TxPacket};
use crate::device::memory::Memory;
use crate::isa::udma::DESC_BYTES;

/// Descriptors one pair's cache keeps at most (about 100 bytes each with their parsed form):
/// the whole program of a small collective, a bounded prefix of a large one.
pub(super) const MAX_DESCS: usize = 1024;

/// A checked packet pair: its descriptors as read and what the engine parsed from them.
#[derive(Debug, Clone, Default)]
pub(super) struct Packet {
    /// The TX packet's descriptors (stream index, bytes, decoded).
    pub(super) tx: Vec<Raw>,
    /// The RX packet's descriptors.
    pub(super) rx: Vec<Raw>,
    /// Data segments of the TX packet.
    pub(super) txsegs: Vec<Seg>,
    /// Destinations of the RX packet.
    pub(super) rxsegs: Vec<Seg>,
    /// CCE: where each source's segments start in `txsegs` (closed by its length).
    pub(super) bounds: Vec<usize>,
    /// CCE FMA: the per-source scales.
    pub(super) scales: Vec<f32>,
    /// Copy or CCE, with the reduce parameters.
    pub(super) kind: TxPacket,
    /// Bytes the RX packet receives (= the TX packet's).
    pub(super) rx_bytes: u64,
}

/// One kept packet pair and the queue heads it starts at.
#[derive(Debug)]
struct Entry {
    heads: (u64, u64),
    pkt: Packet,
}

/// The packet pairs a queue pair checked, by their heads (module doc).
#[derive(Debug, Default)]
pub(super) struct Replay {
    /// Ring lengths (M2S, S2M) the entries were made with.
    lens: (u64, u64),
    /// Sorted by heads.
    entries: Vec<Entry>,
    /// Where the next lookup looks first (packets run in order).
    next: usize,
    /// Descriptors held.
    descs: usize,
    /// Lookups answered from the cache (tests).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(super) hits: u64,
}

/// A pair's cache as its clones share it.
#[derive(Debug, Clone, Default)]
pub(super) struct SharedReplay(Arc<Mutex<Replay>>);

impl SharedReplay {
    /// The cache itself (an engine run `try_lock`s it for its length).
    pub(super) fn handle(&self) -> Arc<Mutex<Replay>> {
        Arc::clone(&self.0)
    }
}

/// Do the ring's slots hold exactly the bytes of `raws` (each at its own stream index)?
fn same(ring: &[u8], len: u64, raws: &[Raw]) -> bool {
    let mask = len - 1;
    raws.iter().all(|r| {
        let at = ((r.index & mask) as usize) * DESC_BYTES;
        ring.get(at..at + DESC_BYTES) == Some(&r.bytes[..])
    })
}

impl Replay {
    /// Where the kept packet pair at the queues' heads is ([`Replay::packet`]) if the rings
    /// still hold its bytes and both packets are posted (module doc); `places` are the rings'
    /// places in `mem`.
    pub(super) fn find(
        &mut self,
        mem: &Memory,
        m2s: &Queue,
        s2m: &Queue,
        places: [RingPlace; 2],
    ) -> Option<usize> {
        let [Some((rm, om)), Some((rs, os))] = places else {
            return None;
        };
        if self.lens != (m2s.len, s2m.len) {
            return None;
        }
        let heads = (m2s.head, s2m.head);
        let at = match self.entries.get(self.next) {
            Some(e) if e.heads == heads => self.next,
            _ => self
                .entries
                .binary_search_by_key(&heads, |e| e.heads)
                .ok()?,
        };
        let p = &self.entries[at].pkt;
        let posted =
            m2s.head + p.tx.len() as u64 <= m2s.tail && s2m.head + p.rx.len() as u64 <= s2m.tail;
        if !posted
            || !same(&mem.region_bytes(rm)[om..], m2s.len, &p.tx)
            || !same(&mem.region_bytes(rs)[os..], s2m.len, &p.rx)
        {
            return None;
        }
        self.next = at + 1;
        self.hits += 1;
        Some(at)
    }

    /// The packet pair [`Replay::find`] found at `at`.
    pub(super) fn packet(&self, at: usize) -> &Packet {
        &self.entries[at].pkt
    }

    /// Keep `pkt`, just checked at the queues' heads (replacing what was kept there), if the
    /// cache has room.
    pub(super) fn keep(&mut self, m2s: &Queue, s2m: &Queue, pkt: &Packet) {
        if self.lens != (m2s.len, s2m.len) {
            *self = Replay {
                lens: (m2s.len, s2m.len),
                ..Replay::default()
            };
        }
        let heads = (m2s.head, s2m.head);
        let n = pkt.tx.len() + pkt.rx.len();
        match self.entries.binary_search_by_key(&heads, |e| e.heads) {
            Ok(at) => {
                let e = &mut self.entries[at];
                self.descs = self.descs - e.pkt.tx.len() - e.pkt.rx.len() + n;
                e.pkt.clone_from(pkt);
                self.next = at + 1;
            }
            Err(at) if self.descs + n <= MAX_DESCS => {
                self.descs += n;
                let pkt = pkt.clone();
                self.entries.insert(at, Entry { heads, pkt });
                self.next = at + 1;
            }
            Err(_) => {}
        }
    }
}

#[cfg(test)]
mod tests;

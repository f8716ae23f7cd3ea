//! The decode memo of [`super::Queue::packet`]: descriptors decoded in earlier runs, by
//! their bytes, pooled per process.

use super::{Descriptor, Direction, DESC_BYTES};

/// Slots of a [`DecodeMemo`] (a power of two, in sets of two): several times the descriptors
/// of a small collective's rings (256 KiB per memo).
const MEMO_SLOTS: usize = 4096;

/// Descriptors decoded before, by their bytes: a decoded-instruction cache as emulators
/// keep one. Decoding is a pure function of the 16 bytes and the queue's direction, so a hit
/// — all 16 bytes and the direction equal — is exactly what [`Descriptor::decode`] returns;
/// only successful decodes are kept (a bad descriptor is decoded, and rejected, every time).
/// A collective executed again (the next iteration, the next training step) walks the same
/// bytes, and its small packets then cost a lookup instead of a decode. Direct-mapped; bulk
/// runs use it for their META descriptors only (the others differ by address and are few per
/// byte moved).
///
/// One per machine run, not per thread: a run's [`RunCx`] takes one from the process's
/// [`MEMOS`] when it starts and gives it back when it is dropped (a resident machine keeps its
/// context, and so its memo, between runs). A per-thread memo missed whenever a different
/// thread ran the collective — with ranks as threads the last rank to arrive runs the machine,
/// a different one almost every time — and each new thread paid 256 KiB of fresh zeroed pages
/// (64 page faults, issue 26) on its first run, well after any warm-up.
#[derive(Debug)]
pub(super) struct DecodeMemo(Box<[MemoSlot]>);

/// One slot of a [`DecodeMemo`]: the bytes, the direction, what they decode to.
type MemoSlot = Option<([u8; DESC_BYTES], Direction, Descriptor)>;

/// Memos not in use by a run, last returned on top (its entries are the most recent).
static MEMOS: parking_lot::Mutex<Vec<DecodeMemo>> = parking_lot::Mutex::new(Vec::new());

/// Most memos [`MEMOS`] keeps (4 MiB): as many machines as ever ran at once, up to this.
const MAX_IDLE_MEMOS: usize = 16;

impl DecodeMemo {
    /// A memo for a run: the last one given back, or a new one.
    pub(super) fn take() -> DecodeMemo {
        MEMOS
            .lock()
            .pop()
            .unwrap_or_else(|| DecodeMemo(vec![None; MEMO_SLOTS].into_boxed_slice()))
    }

    /// Give a run's memo back (freed when enough are idle already).
    pub(super) fn put(m: DecodeMemo) {
        let mut idle = MEMOS.lock();
        if idle.len() < MAX_IDLE_MEMOS {
            idle.push(m);
        }
    }

    /// The set of two slots `bytes` and `dir` map to.
    fn set(bytes: &[u8; DESC_BYTES], dir: Direction) -> usize {
        let lo = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"));
        let hi = u64::from_le_bytes(bytes[8..].try_into().expect("8 bytes"));
        let h = (lo ^ hi.rotate_left(29) ^ dir as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        (h >> (64 - MEMO_SLOTS.trailing_zeros())) as usize & !1
    }

    /// What [`Descriptor::decode`] returned for these bytes and direction, if remembered.
    #[inline]
    pub(super) fn get(&self, bytes: &[u8; DESC_BYTES], dir: Direction) -> Option<&Descriptor> {
        let i = Self::set(bytes, dir);
        self.0[i..i + 2].iter().find_map(|slot| match slot {
            Some((b, d, desc)) if *d == dir && b == bytes => Some(desc),
            _ => None,
        })
    }

    /// Remember a successful decode: it takes the set's first slot, the old first moves to
    /// the second.
    #[inline]
    pub(super) fn insert(&mut self, bytes: &[u8; DESC_BYTES], dir: Direction, desc: Descriptor) {
        let i = Self::set(bytes, dir);
        self.0[i + 1] = self.0[i];
        self.0[i] = Some((*bytes, dir, desc));
    }
}

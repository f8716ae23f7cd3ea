//! The decode memo of [`super::Queue::packet`]: descriptors this thread decoded, by their
//! bytes.

use super::{Descriptor, Direction, DESC_BYTES};

/// Slots of a [`DecodeMemo`] (a power of two, in sets of two): several times the descriptors
/// of a small collective's rings (256 KiB per thread).
const MEMO_SLOTS: usize = 4096;

/// Descriptors this thread decoded, by their bytes: a decoded-instruction cache as emulators
/// keep one. Decoding is a pure function of the 16 bytes and the queue's direction, so a hit
/// — all 16 bytes and the direction equal — is exactly what [`Descriptor::decode`] returns;
/// only successful decodes are kept (a bad descriptor is decoded, and rejected, every time).
/// A collective executed again (the next iteration, the next training step) walks the same
/// bytes, and its small packets then cost a lookup instead of a decode. Direct-mapped, one
/// per thread (taken out of its thread-local home for the length of an engine run); bulk runs
/// do not use it (their descriptors differ by address and are few per byte moved).
#[derive(Debug)]
pub(super) struct DecodeMemo(Box<[MemoSlot]>);

/// One slot of a [`DecodeMemo`]: the bytes, the direction, what they decode to.
type MemoSlot = Option<([u8; DESC_BYTES], Direction, Descriptor)>;

thread_local! {
    static MEMO: std::cell::Cell<Option<Box<DecodeMemo>>> = const { std::cell::Cell::new(None) };
}

impl DecodeMemo {
    /// This thread's memo (a new one the first time).
    #[inline]
    pub(super) fn take() -> Box<DecodeMemo> {
        MEMO.take()
            .unwrap_or_else(|| Box::new(DecodeMemo(vec![None; MEMO_SLOTS].into_boxed_slice())))
    }

    /// Give the memo back to this thread.
    #[inline]
    pub(super) fn put(m: Box<DecodeMemo>) {
        MEMO.set(Some(m));
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

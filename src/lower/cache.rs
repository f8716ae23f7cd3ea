//! The signature cache: lowering the same request on the same communicator reuses the prepared
//! program (issue item 8; docs/contract/abi.md §5.7, where the vendor's `nrt_cc_prepare` keys its
//! context cache on an MD5 signature of the op).
//!
//! * **Key.** A [`Signature`] is the request's canonical serialized form *minus the caller's
//!   rank* (every rank of a communicator lowers the same program, which covers all ranks; the
//!   rank is set to 0 before serializing), plus a topology/config key string the caller
//!   supplies (instance, placement, forced algorithm, chunk size: whatever else decides the
//!   program). The canonical form is the request's JSON in field declaration order, so it is
//!   stable across runs.
//! * **Digest.** 128 bits from two independent 64-bit lanes over the key bytes: FNV-1a, and a
//!   multiply–rotate lane with a different seed and prime, each finished with a splitmix64
//!   avalanche that also folds in the length. It is **not cryptographic** and needs not be: it
//!   only picks the bucket. The full key is stored with the entry and compared on every hit, so
//!   a digest collision can only cost a miss, never return the wrong program.
//! * **Bound.** At most `capacity` programs; inserting into a full cache evicts the **least
//!   recently used** entry (every hit refreshes its entry). Eviction scans the entries (O(n));
//!   with the default capacity of [`DEFAULT_CAPACITY`] that is far below the cost of a lowering.
//! * **Threads.** One `parking_lot::Mutex` around the map; counters are atomics. The builder
//!   runs *outside* the lock, so a slow lowering never blocks lookups of other signatures. Two
//!   threads missing on the same signature at once both build; the first insert wins and the
//!   second thread gets (and returns) the winner's program, so all callers share one `Arc`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::error::Result;
use crate::lower::program::Program;
use crate::lower::request::CollectiveRequest;

/// Default number of cached programs.
pub const DEFAULT_CAPACITY: usize = 256;

/// A 128-bit digest (two 64-bit lanes).
pub type Digest = u128;

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;
const LANE2_SEED: u64 = 0x9e37_79b9_7f4a_7c15;
const LANE2_PRIME: u64 = 0xff51_afd7_ed55_8ccd;

fn splitmix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The 128-bit digest of `bytes` (see the module doc; not cryptographic).
pub fn digest(bytes: &[u8]) -> Digest {
    let (mut a, mut b) = (FNV_OFFSET, LANE2_SEED);
    for &x in bytes {
        a = (a ^ u64::from(x)).wrapping_mul(FNV_PRIME);
        b = (b ^ u64::from(x)).wrapping_mul(LANE2_PRIME).rotate_left(31);
    }
    let len = bytes.len() as u64;
    let hi = splitmix64(a ^ len);
    let lo = splitmix64(b.wrapping_add(len.rotate_left(32)));
    (u128::from(hi) << 64) | u128::from(lo)
}

/// A cache key: the canonical text and its digest.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Signature {
    /// The digest of `key`.
    pub digest: Digest,
    /// The full key (canonical request form without the rank, a NUL, the topology key).
    pub key: Arc<str>,
}

impl Signature {
    /// The signature of `req` under `topology` (see the module doc).
    pub fn of(req: &CollectiveRequest, topology: &str) -> Signature {
        // The rank is neutralised (set to 0) rather than removed: same effect on equality,
        // and serializing the struct directly is about twice as fast as going through a
        // `serde_json::Value` (the cached path is dominated by this).
        let neutral = CollectiveRequest {
            rank: 0,
            ..req.clone()
        };
        let mut key = serde_json::to_string(&neutral).expect("requests always serialize");
        key.push('\0');
        key.push_str(topology);
        Signature::from_key(key)
    }

    /// A signature over an arbitrary key string (tests, and callers with their own key form).
    pub fn from_key(key: impl Into<Arc<str>>) -> Signature {
        let key = key.into();
        Signature {
            digest: digest(key.as_bytes()),
            key,
        }
    }
}

#[derive(Debug)]
struct Slot {
    key: Arc<str>,
    program: Arc<Program>,
    last_used: u64,
}

#[derive(Debug, Default)]
struct Inner {
    buckets: HashMap<Digest, Vec<Slot>>,
    len: usize,
    tick: u64,
}

impl Inner {
    fn lookup(&mut self, sig: &Signature) -> Option<Arc<Program>> {
        self.tick += 1;
        let tick = self.tick;
        let slot = self
            .buckets
            .get_mut(&sig.digest)?
            .iter_mut()
            .find(|s| *s.key == *sig.key)?;
        slot.last_used = tick;
        Some(slot.program.clone())
    }

    fn evict_lru(&mut self) {
        let victim = self
            .buckets
            .iter()
            .flat_map(|(d, v)| v.iter().enumerate().map(move |(i, s)| (s.last_used, *d, i)))
            .min();
        if let Some((_, d, i)) = victim {
            let v = self.buckets.get_mut(&d).expect("victim bucket exists");
            v.swap_remove(i);
            if v.is_empty() {
                self.buckets.remove(&d);
            }
            self.len -= 1;
        }
    }
}

/// Hit / miss / eviction counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CacheStats {
    /// Lookups that found the program.
    pub hits: u64,
    /// Lookups that had to build it.
    pub misses: u64,
    /// Entries dropped to make room.
    pub evictions: u64,
    /// Entries now held.
    pub len: usize,
}

/// A bounded, thread-safe map from [`Signature`] to a prepared [`Program`] (LRU eviction).
#[derive(Debug)]
pub struct SignatureCache {
    inner: Mutex<Inner>,
    capacity: usize,
    hits: AtomicU64,
    misses: AtomicU64,
    evictions: AtomicU64,
}

impl Default for SignatureCache {
    fn default() -> Self {
        Self::new(DEFAULT_CAPACITY)
    }
}

impl SignatureCache {
    /// A cache holding at most `capacity` programs (at least 1).
    pub fn new(capacity: usize) -> Self {
        SignatureCache {
            inner: Mutex::new(Inner::default()),
            capacity: capacity.max(1),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
        }
    }

    /// The bound.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The cached program for `sig`, if any (counts a hit or a miss, refreshes recency).
    pub fn get(&self, sig: &Signature) -> Option<Arc<Program>> {
        let r = self.inner.lock().lookup(sig);
        let c = if r.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        c.fetch_add(1, Ordering::Relaxed);
        r
    }

    /// The cached program for `sig`, or build it with `build`, cache it and return it. A build
    /// error is returned and nothing is cached.
    pub fn get_or_insert_with(
        &self,
        sig: &Signature,
        build: impl FnOnce() -> Result<Program>,
    ) -> Result<Arc<Program>> {
        if let Some(p) = self.get(sig) {
            return Ok(p);
        }
        let program = Arc::new(build()?);
        let mut inner = self.inner.lock();
        if let Some(p) = inner.lookup(sig) {
            return Ok(p); // another thread inserted it while we built
        }
        if inner.len >= self.capacity {
            inner.evict_lru();
            self.evictions.fetch_add(1, Ordering::Relaxed);
        }
        inner.tick += 1;
        let last_used = inner.tick;
        inner.buckets.entry(sig.digest).or_default().push(Slot {
            key: sig.key.clone(),
            program: program.clone(),
            last_used,
        });
        inner.len += 1;
        Ok(program)
    }

    /// Drop every entry (the counters are kept).
    pub fn clear(&self) {
        let mut inner = self.inner.lock();
        inner.buckets.clear();
        inner.len = 0;
    }

    /// The counters and the current size.
    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
            len: self.inner.lock().len,
        }
    }
}

#[cfg(test)]
mod tests;

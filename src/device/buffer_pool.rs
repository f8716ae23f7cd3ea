//! Recycled host memory for large device regions.
//!
//! A machine is built per collective run (`runtime::machine`), and a fresh `vec![0; n]` of
//! 64 MiB costs its page faults when first touched (the loader prefaults data buffers) and a
//! `munmap` when dropped — on the C API path that was ~40% of a 64 MiB collective, far more than
//! the device's own work. Regions of at least [`MIN_POOLED`] bytes are therefore handed back here
//! when their machine drops and reused by the next machine that maps the same size, zeroed with
//! a `memset` (already-resident pages), so a region still reads as zero when mapped, exactly as
//! a fresh one.
//!
//! How much the pool keeps: by default, at most the peak of pooled-size bytes that were in use
//! at once so far — what the process already needed while its largest machine ran, so keeping
//! it never raises the peak memory; a repeated collective of any size then always finds its
//! buffers (a fixed 1 GiB cap missed most of an 8-rank 64 MiB all-reduce's 1 GiB of regions:
//! 0.92 s through the C API, 0.66 s with them all recycled). A fixed cap in MiB
//! (`OPENNRT_DEVICE_POOL_MB`, applied through `device::settings`; `0` disables the pool)
//! replaces that rule. `nrt_close` empties it.
//!
//! Zeroing: a caller that writes a range of the buffer before anything reads it (the loader
//! writing a rank's input) says so ([`take_except`]), and only the rest is zeroed again.

use std::collections::HashMap;
use std::ops::Range;

use once_cell::sync::Lazy;
use parking_lot::Mutex;

/// Smallest region worth recycling.
pub const MIN_POOLED: usize = 1 << 20;

#[derive(Debug, Default)]
struct Pool {
    by_len: HashMap<usize, Vec<Vec<u8>>>,
    /// Bytes held here.
    bytes: usize,
    /// Bytes of pooled-size buffers handed out and not yet given back.
    live: usize,
    /// Highest `live` seen.
    peak: usize,
    /// A fixed cap on `bytes` (`OPENNRT_DEVICE_POOL_MB`), or `None`: held plus live bytes stay
    /// within the peak.
    cap: Option<usize>,
}

impl Pool {
    fn new(cap: Option<usize>) -> Pool {
        Pool {
            cap,
            ..Pool::default()
        }
    }

    /// A recycled buffer of `n` bytes, if one is held (dirty), counted as live either way.
    fn take(&mut self, n: usize) -> Option<Vec<u8>> {
        self.live += n;
        self.peak = self.peak.max(self.live);
        if let Some(v) = self.by_len.get_mut(&n).and_then(Vec::pop) {
            self.bytes -= n;
            return Some(v);
        }
        if self.cap.is_none() {
            // A miss: the caller allocates `n` fresh bytes. Free held buffers of other sizes
            // first, so held plus live never exceed the peak of what was live at once.
            while self.bytes + self.live > self.peak {
                let Some(&len) = self.by_len.keys().next() else {
                    break;
                };
                let list = self.by_len.get_mut(&len).expect("a key just seen");
                list.pop();
                self.bytes -= len;
                if list.is_empty() {
                    self.by_len.remove(&len);
                }
            }
        }
        None
    }

    /// Keep `v` if within the limit (module doc); else it is dropped (freed) by the caller.
    fn give(&mut self, v: Vec<u8>) -> Option<Vec<u8>> {
        let n = v.len();
        self.live = self.live.saturating_sub(n);
        let keep = match self.cap {
            Some(c) => self.bytes + n <= c,
            None => self.bytes + n + self.live <= self.peak,
        };
        if !keep {
            return Some(v);
        }
        self.bytes += n;
        self.by_len.entry(n).or_default().push(v);
        None
    }

    fn clear(&mut self) {
        self.by_len.clear();
        self.bytes = 0;
        self.peak = self.live;
    }
}

static POOL: Lazy<Mutex<Pool>> = Lazy::new(|| Mutex::new(Pool::new(None)));

/// Set the fixed cap (`DeviceSettings::pool_cap`); buffers held beyond a new cap are freed.
pub fn set_cap(cap: Option<usize>) {
    let mut p = POOL.lock();
    if p.cap != cap {
        p.cap = cap;
        p.clear();
    }
}

/// `n` zeroed bytes: a recycled buffer of that size if the pool has one, else a fresh one.
pub fn take(n: usize) -> Vec<u8> {
    take_except(n, 0..0)
}

/// `n` bytes, zero outside `written`: the caller writes every byte of `written` before
/// anything reads the buffer (a fresh buffer is all zero anyway).
pub fn take_except(n: usize, written: Range<usize>) -> Vec<u8> {
    if n < MIN_POOLED {
        return vec![0u8; n];
    }
    let got = POOL.lock().take(n);
    match got {
        Some(v) => zero_except(v, written),
        None => vec![0u8; n],
    }
}

fn zero_except(mut v: Vec<u8>, written: Range<usize>) -> Vec<u8> {
    let n = v.len();
    let start = written.start.min(n);
    let end = written.end.clamp(start, n);
    v[..start].fill(0);
    v[end..].fill(0);
    v
}

/// Hand back a buffer a dropped region no longer needs.
pub fn give(v: Vec<u8>) {
    if v.len() < MIN_POOLED {
        return;
    }
    // Freed (if not kept) after the lock is released.
    let _freed = POOL.lock().give(v);
}

/// Free everything the pool holds (`nrt_close`); the peak starts again.
pub fn clear() {
    let held = {
        let mut p = POOL.lock();
        let held = std::mem::take(&mut p.by_len);
        p.clear();
        held
    };
    drop(held);
}

/// Bytes held by the pool now.
pub fn held_bytes() -> usize {
    POOL.lock().bytes
}

#[cfg(test)]
mod tests;

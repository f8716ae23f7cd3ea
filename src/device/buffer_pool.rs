//! Recycled host memory for large device regions.
//!
//! A machine is built per collective run (`runtime::device_run`), and a fresh `vec![0; n]` of
//! 64 MiB costs its page faults when first touched (the loader prefaults data buffers) and a
//! `munmap` when dropped — on the C API path that was ~40% of a 64 MiB collective, far more than
//! the device's own work. Regions of at least [`MIN_POOLED`] bytes are therefore handed back here
//! when their machine drops and reused by the next machine that maps the same size, zeroed with
//! a `memset` (already-resident pages), so a region still reads as zero when mapped, exactly as
//! a fresh one.
//!
//! The pool keeps at most `OPENNRT_DEVICE_POOL_MB` MiB (default 1024; `0` disables it), read
//! once; beyond that a returned buffer is simply freed. `nrt_close` empties it.

use std::collections::HashMap;

use once_cell::sync::Lazy;
use parking_lot::Mutex;

/// Smallest region worth recycling.
pub const MIN_POOLED: usize = 1 << 20;

const DEFAULT_POOL_MB: usize = 1024;

#[derive(Debug, Default)]
struct Pool {
    by_len: HashMap<usize, Vec<Vec<u8>>>,
    bytes: usize,
}

static POOL: Lazy<Mutex<Pool>> = Lazy::new(|| Mutex::new(Pool::default()));

static CAP: Lazy<usize> = Lazy::new(|| {
    std::env::var("OPENNRT_DEVICE_POOL_MB")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(DEFAULT_POOL_MB)
        .saturating_mul(1 << 20)
});

/// `n` zeroed bytes: a recycled buffer of that size if the pool has one, else a fresh one.
pub fn take(n: usize) -> Vec<u8> {
    if n >= MIN_POOLED {
        let got = {
            let mut p = POOL.lock();
            let v = p.by_len.get_mut(&n).and_then(Vec::pop);
            if v.is_some() {
                p.bytes -= n;
            }
            v
        };
        if let Some(mut v) = got {
            v.fill(0);
            return v;
        }
    }
    vec![0u8; n]
}

/// Hand back a buffer a dropped region no longer needs.
pub fn give(v: Vec<u8>) {
    let n = v.len();
    if n < MIN_POOLED {
        return;
    }
    let mut p = POOL.lock();
    if p.bytes + n > *CAP {
        return;
    }
    p.bytes += n;
    p.by_len.entry(n).or_default().push(v);
}

/// Free everything the pool holds (`nrt_close`).
pub fn clear() {
    let mut p = POOL.lock();
    p.by_len.clear();
    p.bytes = 0;
}

/// Bytes held by the pool now.
pub fn held_bytes() -> usize {
    POOL.lock().bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recycled_buffers_come_back_zeroed() {
        let n = MIN_POOLED + 4096 * 7; // a size no other test uses
        let mut v = take(n);
        assert!(v.iter().all(|&b| b == 0));
        let p = v.as_ptr();
        v[12345] = 9;
        give(v);
        let w = take(n);
        if *CAP >= n {
            assert_eq!(w.as_ptr(), p, "the same buffer is reused");
        }
        assert!(w.iter().all(|&b| b == 0), "zeroed on reuse");
        give(vec![1u8; 10]); // small buffers are not kept
    }
}

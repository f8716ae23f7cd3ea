//! The device's knobs, given to it by whoever drives it: `nrt_init` applies the ones it parsed
//! from the environment (`runtime::config`), the `opennrt` tool applies its own. The device
//! never reads the environment itself, so a knob has one parser and one error message.
//!
//! Until something applies settings, the defaults hold (all `None`).

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;

/// What the device can be told.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceSettings {
    /// Worker threads for bulk data (1..=[`crate::device::batch::MAX_THREADS`]); `None`: the
    /// available parallelism.
    pub threads: Option<usize>,
    /// A fixed cap in bytes on the recycled-buffer pool (`Some(0)` disables it); `None`: the
    /// pool keeps at most the peak in use (`device::buffer_pool`).
    pub pool_cap: Option<usize>,
    /// A directory where a hang writes its CC-context dumps; `None`: the report says how to
    /// get them instead.
    pub hang_dump_dir: Option<PathBuf>,
}

/// `threads`, 0 = unset (read on every flush, so an atomic).
static THREADS: AtomicUsize = AtomicUsize::new(0);
static HANG_DUMP_DIR: Mutex<Option<PathBuf>> = Mutex::new(None);

/// Apply `s` to the device of this process.
pub fn apply(s: &DeviceSettings) {
    THREADS.store(s.threads.unwrap_or(0), Ordering::Relaxed);
    crate::device::buffer_pool::set_cap(s.pool_cap);
    *HANG_DUMP_DIR.lock() = s.hang_dump_dir.clone();
}

/// The bulk-data worker threads in force (see [`DeviceSettings::threads`]).
pub fn threads() -> usize {
    match THREADS.load(Ordering::Relaxed) {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
    .min(crate::device::batch::MAX_THREADS)
}

/// The hang-dump directory in force (see [`DeviceSettings::hang_dump_dir`]).
pub fn hang_dump_dir() -> Option<PathBuf> {
    HANG_DUMP_DIR.lock().clone()
}

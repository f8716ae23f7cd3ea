//! The device's knobs, given to it by whoever drives it: `nrt_init` applies the ones it parsed
//! from the environment (`runtime::config`), the `opennrt` tool applies its own. The device
//! never reads the environment itself, so a knob has one parser and one error message.
//!
//! Until something applies settings, the defaults hold (all `None`).
//!
//! The firmware carrier is set the same way ([`set_carrier`]): `nrt_init` installs the
//! `libncfw.so` it loaded, and from then on every machine's firmware image comes from that
//! carrier's `libncfw_get_image` and every CC-context dump from its `libncfw_ctx_log`
//! (docs/contract/carrier.md §1.2). So pairing another carrier (`OPENNRT_NCFW_PATH`) changes
//! what the device runs and dumps. Without one (the `opennrt` tool, unit tests) the device uses
//! OpenNRT's own images and writer, the same code `libncfw.so` is built from.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::error::Result;
use crate::ncfw::{Arch, FirmwareImage, LogStatus};

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
    // Read on every flush: the available parallelism is asked once, because the standard
    // library reads the cgroup CPU quota files each time (tens of µs; a 4 KiB collective of 2
    // ranks took 44 µs instead of 6 while this was asked per flush).
    static AVAILABLE: once_cell::sync::Lazy<usize> =
        once_cell::sync::Lazy::new(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    match THREADS.load(Ordering::Relaxed) {
        0 => *AVAILABLE,
        n => n,
    }
    .min(crate::device::batch::MAX_THREADS)
}

/// The hang-dump directory in force (see [`DeviceSettings::hang_dump_dir`]).
pub fn hang_dump_dir() -> Option<PathBuf> {
    HANG_DUMP_DIR.lock().clone()
}

/// What the device needs of a firmware carrier.
pub trait FirmwareCarrier: Send + Sync + std::fmt::Debug {
    /// The carrier's name (what it was opened as), for messages.
    fn name(&self) -> &str;
    /// The parsed firmware image of `arch` (`libncfw_get_image`).
    fn image(&self, arch: Arch) -> Result<FirmwareImage>;
    /// The dump of the CC context `ctx` (`libncfw_ctx_log`), and whether it fit 1 MiB.
    fn ctx_log(&self, ctx: &[u8], arch: Arch, model_name: &[u8]) -> Result<(String, LogStatus)>;
}

static CARRIER: RwLock<Option<Arc<dyn FirmwareCarrier>>> = RwLock::new(None);

/// Install the carrier the device uses (`None`: OpenNRT's built-in images and writer).
pub fn set_carrier(c: Option<Arc<dyn FirmwareCarrier>>) {
    *CARRIER.write() = c;
}

/// The firmware image of `arch`: the installed carrier's, else OpenNRT's own.
pub fn firmware_image(arch: Arch) -> Result<FirmwareImage> {
    let carrier = CARRIER.read().clone();
    match carrier {
        Some(c) => c.image(arch),
        None => {
            let (iram, dram) = crate::ncfw::image_for(arch);
            FirmwareImage::parse(iram, dram)
        }
    }
}

/// The `ctx_log` text of the CC context `ctx`: the installed carrier's, else OpenNRT's own.
pub fn ctx_log(ctx: &[u8], arch: Arch, model_name: &[u8]) -> Result<(String, LogStatus)> {
    let carrier = CARRIER.read().clone();
    match carrier {
        Some(c) => c.ctx_log(ctx, arch, model_name),
        None => crate::ncfw::ctx_log_string(ctx, arch, model_name),
    }
}

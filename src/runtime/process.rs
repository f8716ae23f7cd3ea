//! The initialised runtime of this process: what `nrt_init` builds and `nrt_close` tears down.

use std::sync::Arc;

use parking_lot::RwLock;

use crate::error::Result;
use crate::runtime::config::Config;
use crate::runtime::firmware::Carrier;
use crate::runtime::{log, state};

/// Everything `nrt_init` brought up.
#[derive(Debug)]
pub struct Runtime {
    /// The environment as read at `nrt_init` (shared: [`config`] is on every request's path).
    pub config: Arc<Config>,
    /// The firmware carrier, loaded and version-checked; also the device's
    /// (`device::settings::set_carrier`).
    pub carrier: Arc<Carrier>,
    /// The framework the caller named (`nrt_framework_type_t`).
    pub framework: u32,
}

static RUNTIME: RwLock<Option<Arc<Runtime>>> = RwLock::new(None);

/// The visible core count of the initialised runtime, 0 while there is none: read on every
/// poll of a sequence id ([`visible_cores`]), where the lock and reference count of
/// [`config`] bounced a cache line between the polling threads (perf, 2 ranks as threads at
/// 4 KiB: 2.8% of all samples in `config`).
static VISIBLE_CORES: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// `nrt_init`: read the environment, load the carrier, enter INIT. Idempotent while initialised.
pub fn init(framework: u32, fw_version: &str, fal_version: &str) -> Result<()> {
    init_with(
        framework,
        fw_version,
        fal_version,
        crate::runtime::config::env_lookup,
    )
}

/// [`init`] with the variables `lookup` answers instead of the process environment: the seam
/// for testing behaviour a variable drives, in a unit test, without `std::env::set_var` (which
/// races with every other thread of the test binary). `testing::with_runtime` in
/// src/abi/handle.rs wraps it for the ABI's tests.
pub fn init_with(
    framework: u32,
    fw_version: &str,
    fal_version: &str,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<()> {
    state::init(|| {
        let config = Config::from_lookup(lookup)?;
        log::set_level(config.log_level);
        let carrier = Arc::new(Carrier::load(&config.ncfw_path)?);
        crate::device::settings::apply(&config.device);
        crate::runtime::multi_process::segment::set_waits(config.waits);
        crate::runtime::fault_injection::arm(&config);
        crate::runtime::flight_recorder::configure(
            config.flight_recorder_entries,
            config.flight_recorder_dir.clone(),
        );
        crate::device::settings::set_carrier(Some(carrier.clone()));
        crate::log_info!(
            "nrt_init",
            "framework {framework} ({fw_version:?}, {fal_version:?}); instance {} LNC {}; cores {}..{} of {}; carrier {}",
            config.instance.name,
            config.lnc,
            config.first_core,
            config.first_core + config.visible_cores,
            config.total_cores(),
            carrier.name
        );
        if let Some(v) = &config.ignored_async_inflight {
            crate::log_warn!(
                "nrt_init",
                "{}={v} ignored: implicit async mode was removed in runtime 2.34",
                crate::runtime::config::ASYNC_INFLIGHT_ENV
            );
        }
        VISIBLE_CORES.store(config.visible_cores, std::sync::atomic::Ordering::Release);
        *RUNTIME.write() = Some(Arc::new(Runtime { config: Arc::new(config), carrier, framework }));
        Ok(())
    })
    .map(|_| ())
}

/// `nrt_close`: only in INIT; afterwards the state is START and `nrt_init` may run again.
///
/// The teardown order, inside the teardown window (calls racing with it get `NRT_CLOSED`):
/// pending collectives fail with `NRT_CLOSED` before the execution units drain; send/recv
/// services still running stop (with a warning); the units stop;
/// the flight recorder writes its files (`OPENNRT_FLIGHT_RECORDER_DIR`); the job's bootstrap
/// link closes; the prepared collectives, host collectives and worlds are
/// forgotten; then `abi_teardown` releases what the ABI layer keeps per initialised runtime
/// (its handles, which queued requests no longer reference); last the runtime itself goes.
pub fn close(abi_teardown: impl FnOnce()) {
    state::close(|| {
        crate::runtime::collective::abort();
        crate::runtime::host_collective::abort();
        crate::runtime::sendrecv::shutdown_all();
        crate::runtime::xu::drain_all();
        crate::runtime::xu::shutdown();
        // Every rank's flight record, while the job's tag (the file names) is still known.
        crate::runtime::flight_recorder::on_close();
        crate::runtime::multi_process::bootstrap::shutdown();
        crate::runtime::collective::reset();
        crate::runtime::host_collective::reset();
        crate::runtime::comm::reset();
        crate::runtime::sys_trace::reset();
        abi_teardown();
        RUNTIME.write().take();
        crate::device::settings::set_carrier(None);
        crate::runtime::fault_injection::disarm();
        VISIBLE_CORES.store(0, std::sync::atomic::Ordering::Release);
    });
}

/// The initialised runtime, if any.
pub fn get() -> Option<Arc<Runtime>> {
    RUNTIME.read().clone()
}

/// `config()?.visible_cores` without the lock (module statics above).
pub fn visible_cores() -> Result<u32> {
    match VISIBLE_CORES.load(std::sync::atomic::Ordering::Acquire) {
        0 => Ok(config()?.visible_cores),
        n => Ok(n),
    }
}

/// The configuration in force: the cached one after `nrt_init`, else freshly derived from the
/// environment (the count getters are legal before `nrt_init`, docs/contract/abi.md §3.2).
pub fn config() -> Result<Arc<Config>> {
    match get() {
        Some(rt) => Ok(rt.config.clone()),
        None => Config::from_env().map(Arc::new),
    }
}

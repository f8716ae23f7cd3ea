//! Fault injection for the tests: faults the runtime brings on itself when asked, so that the
//! C multi-process tests (`capi-tests/mp`, group `kill`) can check how the other processes of a
//! job fail when one dies mid-collective.
//!
//! Choice: compiled into every build, release included, because those tests load the release
//! library; and kept off the production path's cost. The variable is parsed and checked once,
//! with the others, at `nrt_init` (`Config::kill_in_run`), which arms the trigger here;
//! `nrt_close` disarms it. The hook a run calls is one relaxed load of a static and a compare,
//! inlined; what the fault does lives in a cold function the run never enters unless armed.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// The variable naming the global id whose process SIGKILLs itself inside its first
/// `nrta_cc_*` collective (not a barrier) on the shared device: after the go meeting, once
/// every peer's executor is stepping (so each has mapped every segment) and before its own
/// TOP_SPs step, so its peers are mid-collective, waiting on semaphores only it would raise.
pub const KILL_IN_RUN_ENV: &str = "OPENNRT_TEST_KILL_IN_RUN";

/// How long the victim waits for its peers to step before it dies anyway.
const PEERS_STEPPING_WAIT: Duration = Duration::from_secs(10);

/// A global id to fire for, or none. `u64` so that no `u32` id doubles as "none".
struct Trigger(AtomicU64);

impl Trigger {
    const NONE: u64 = u64::MAX;

    const fn unarmed() -> Trigger {
        Trigger(AtomicU64::new(Self::NONE))
    }

    fn set(&self, gid: Option<u32>) {
        self.0.store(gid.map_or(Self::NONE, u64::from), Relaxed);
    }

    #[inline(always)]
    fn fires_for(&self, gid: u32) -> bool {
        self.0.load(Relaxed) == u64::from(gid)
    }
}

/// [`KILL_IN_RUN_ENV`] as `nrt_init` read it.
static KILL_IN_RUN: Trigger = Trigger::unarmed();

/// Arm the faults `config` asks for (`nrt_init`).
pub(crate) fn arm(config: &crate::runtime::config::Config) {
    KILL_IN_RUN.set(config.kill_in_run);
}

/// Disarm every fault (`nrt_close`).
pub(crate) fn disarm() {
    KILL_IN_RUN.set(None);
}

/// Whether the process holding global id `gid` is to die inside this run: the check on the
/// run path.
#[inline(always)]
pub fn kills_in_run(gid: u32) -> bool {
    KILL_IN_RUN.fires_for(gid)
}

/// SIGKILL this process (global id `gid`) inside a run, once `peers_stepping` (given how long
/// it may wait) says every peer's executor is stepping, or after 10 s.
#[cold]
#[inline(never)]
pub fn kill_in_run(gid: u32, peers_stepping: impl FnOnce(Duration) -> bool) -> ! {
    if !peers_stepping(PEERS_STEPPING_WAIT) {
        crate::log_warn!(
            "cc",
            "{KILL_IN_RUN_ENV}={gid}: peers not all stepping after {} s",
            PEERS_STEPPING_WAIT.as_secs()
        );
    }
    crate::log_warn!(
        "cc",
        "{KILL_IN_RUN_ENV}={gid}: killing this process inside the run"
    );
    // SAFETY: raising a signal in our own process.
    unsafe { libc::raise(libc::SIGKILL) };
    unreachable!("SIGKILL cannot be caught")
}

#[cfg(test)]
mod tests;

//! Stopping a tool's workers on SIGINT or SIGTERM: the tool calls [`stop_on_signals`] once; the
//! handler only records the signal (an atomic store, async-signal-safe), and [`super::run`]'s
//! wait loop, which polls every few milliseconds, sees it, kills every worker still running and
//! returns; the tool then removes its temporary files and exits with 128 + the signal, as a
//! shell reports a process ended by it. Without this, a SIGTERM to the tool left its workers
//! spinning on peers that would never come, and their files in the temp directory.

use std::sync::atomic::{AtomicI32, Ordering};

/// The signal received (0: none).
static SIGNAL: AtomicI32 = AtomicI32::new(0);

/// The handler: record the signal, nothing else.
extern "C" fn record(sig: libc::c_int) {
    SIGNAL.store(sig, Ordering::SeqCst);
}

/// Route SIGINT and SIGTERM to the recording handler (for the rest of the process).
pub fn stop_on_signals() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction is a valid value to fill in; the handler only performs an
        // atomic store, which is async-signal-safe; the pointers are to live locals.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = record as extern "C" fn(libc::c_int) as libc::sighandler_t;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// The signal that asked this process to stop, if one did.
pub fn requested() -> Option<i32> {
    match SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// The name of a stop signal, for messages.
pub fn name(sig: i32) -> &'static str {
    match sig {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        _ => "a signal",
    }
}

//! The process-global lifecycle state machine and its guard (docs/contract/abi.md §5.1).
//!
//! | value | state | set by |
//! |---|---|---|
//! | 0 | START | zero-initialised; also the last step of `nrt_close` |
//! | 1 | INIT | the end of a successful `nrt_init` |
//! | 2 | CHILD | the `pthread_atfork` child handler (registered by the first `nrt_init`) |
//! | 3 | CLOSED | the start of the `nrt_close` teardown |
//!
//! Guard: INIT → proceed; START → `NRT_UNINITIALIZED` (13); CLOSED → `NRT_CLOSED` (14); CHILD →
//! `NRT_FAILURE` (1). Because a finished `nrt_close` returns to START, a call made after
//! `nrt_close` has returned gets 13, and 14 is only seen during the teardown (docs/contract/abi.md
//! §5.1 and §10 item 7; docs/design.md §4). Re-initialisation after close is allowed; CHILD is
//! terminal.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Once;

use parking_lot::Mutex;

use crate::error::{Error, ErrorKind, Result};

/// The four lifecycle states, with the vendor's numeric values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum State {
    /// 0: not initialised (initial, and again after `nrt_close`).
    Start = 0,
    /// 1: initialised.
    Init = 1,
    /// 2: in a child forked after `nrt_init` (terminal).
    Child = 2,
    /// 3: `nrt_close` is tearing down.
    Closed = 3,
}

static STATE: AtomicU32 = AtomicU32::new(State::Start as u32);
/// Serialises `nrt_init` and `nrt_close` against each other.
static LIFECYCLE: Mutex<()> = Mutex::new(());
static ATFORK: Once = Once::new();

/// The current state.
pub fn current() -> State {
    match STATE.load(Ordering::Acquire) {
        0 => State::Start,
        1 => State::Init,
        2 => State::Child,
        _ => State::Closed,
    }
}

fn set(s: State) {
    STATE.store(s as u32, Ordering::Release);
}

/// The error the guard returns in state `s`, or `None` if calls may proceed.
pub fn guard_error(s: State) -> Option<Error> {
    match s {
        State::Init => None,
        State::Start => Some(Error::new(
            ErrorKind::Uninitialized,
            "the runtime is not initialized: call nrt_init first (or again after nrt_close)",
        )),
        State::Closed => Some(Error::new(ErrorKind::Closed, "nrt_close is in progress")),
        State::Child => Some(Error::new(
            ErrorKind::Failure,
            "incompatible runtime state: this process was forked after nrt_init; a forked child cannot use or re-initialize the runtime",
        )),
    }
}

/// The guard every stateful entry point runs first.
pub fn guard() -> Result<()> {
    match guard_error(current()) {
        None => Ok(()),
        Some(e) => Err(e),
    }
}

extern "C" fn atfork_child() {
    // Only an atomic store: async-signal-safe, as a fork handler must be.
    STATE.store(State::Child as u32, Ordering::Release);
}

/// Run `nrt_init`'s state logic around `bring_up` (docs/contract/abi.md §5.1): INIT → `Ok(false)`
/// at once (already initialised, nothing done); CLOSED → 14; CHILD → 1; START → run `bring_up`, and
/// on success register the fork handler (once per process) and enter INIT. A failed bring-up leaves
/// START so the call can be retried. Returns `Ok(true)` when it initialised.
pub fn init(bring_up: impl FnOnce() -> Result<()>) -> Result<bool> {
    if current() == State::Init {
        return Ok(false);
    }
    let _lock = LIFECYCLE.lock();
    match current() {
        State::Init => return Ok(false),
        State::Start => {}
        s => return Err(guard_error(s).expect("non-INIT state has a guard error")),
    }
    bring_up()?;
    ATFORK.call_once(|| {
        // SAFETY: registering a handler with no prepare/parent hooks; the child hook only
        // stores to an atomic.
        let rc = unsafe { libc::pthread_atfork(None, None, Some(atfork_child)) };
        if rc != 0 {
            crate::log_warn!(
                "state",
                "pthread_atfork failed ({rc}); fork detection disabled"
            );
        }
    });
    set(State::Init);
    Ok(true)
}

/// Run `nrt_close`'s state logic around `teardown`: only in INIT, INIT → CLOSED → teardown →
/// START; in any other state nothing happens. Returns whether it closed.
pub fn close(teardown: impl FnOnce()) -> bool {
    let _lock = LIFECYCLE.lock();
    if current() != State::Init {
        return false;
    }
    set(State::Closed);
    teardown();
    set(State::Start);
    true
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Tests that drive the global state machine take this lock so they do not interleave.
    pub(crate) static SERIAL: Mutex<()> = Mutex::new(());

    #[test]
    fn guard_codes_follow_spec_5_1() {
        assert!(guard_error(State::Init).is_none());
        assert_eq!(
            guard_error(State::Start).unwrap().kind(),
            ErrorKind::Uninitialized
        );
        assert_eq!(
            guard_error(State::Closed).unwrap().kind(),
            ErrorKind::Closed
        );
        assert_eq!(
            guard_error(State::Child).unwrap().kind(),
            ErrorKind::Failure
        );
    }

    #[test]
    fn init_close_reinit_cycle() {
        let _s = SERIAL.lock();
        assert_eq!(current(), State::Start);
        // A failed bring-up leaves START.
        assert!(init(|| Err(Error::invalid("no device"))).is_err());
        assert_eq!(current(), State::Start);
        assert!(init(|| Ok(())).unwrap());
        assert_eq!(current(), State::Init);
        // Idempotent while initialised: the bring-up does not run again.
        assert!(!init(|| panic!("must not run")).unwrap());
        // During teardown the guard says CLOSED (14).
        let mut seen = None;
        assert!(close(|| seen = guard().err().map(|e| e.kind())));
        assert_eq!(seen, Some(ErrorKind::Closed));
        // After close: START again, guard says UNINITIALIZED (13), re-init allowed.
        assert_eq!(current(), State::Start);
        assert_eq!(guard().unwrap_err().kind(), ErrorKind::Uninitialized);
        assert!(!close(|| panic!("close outside INIT does nothing")));
        assert!(init(|| Ok(())).unwrap());
        assert!(close(|| {}));
    }
}

//! Logging to stderr under `NEURON_RT_LOG_LEVEL` (ERROR, WARNING, INFO, DEBUG, TRACE; default
//! ERROR), as the vendor runtime does (docs/contract/abi.md §5.10).
//!
//! The level is read from the environment on first use and again by `nrt_init` (which is where
//! the vendor parses its environment), so a program that sets the variable before `nrt_init`
//! gets what it asked for, and calls made before `nrt_init` still log sensibly.
//!
//! Line format: `<UTC time> <pid>:<tid> <LEVEL> OPENNRT:<target> <message>`.

use std::collections::HashSet;
use std::io::Write as _;
use std::sync::atomic::{AtomicU8, Ordering};

use parking_lot::Mutex;

/// Severity, most severe first. The numeric order is the filter order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Level {
    /// Failures the caller sees as an error status.
    Error = 1,
    /// Surprising but survivable: unimplemented entry points, ignored settings.
    Warning = 2,
    /// Decisions worth knowing (algorithm choice and its reason).
    Info = 3,
    /// Detail for debugging the pipeline.
    Debug = 4,
    /// Every C entry and exit.
    Trace = 5,
}

impl Level {
    /// The vendor's spelling.
    pub fn name(self) -> &'static str {
        match self {
            Level::Error => "ERROR",
            Level::Warning => "WARNING",
            Level::Info => "INFO",
            Level::Debug => "DEBUG",
            Level::Trace => "TRACE",
        }
    }

    /// Parse a `NEURON_RT_LOG_LEVEL` value (case-insensitive; `WARN` accepted for `WARNING`).
    pub fn parse(s: &str) -> Option<Level> {
        match s.trim().to_ascii_uppercase().as_str() {
            "ERROR" => Some(Level::Error),
            "WARNING" | "WARN" => Some(Level::Warning),
            "INFO" => Some(Level::Info),
            "DEBUG" => Some(Level::Debug),
            "TRACE" => Some(Level::Trace),
            _ => None,
        }
    }
}

const UNSET: u8 = 0;
static LEVEL: AtomicU8 = AtomicU8::new(UNSET);
static ONCE_KEYS: Mutex<Option<HashSet<String>>> = Mutex::new(None);

/// Set the level in force (`nrt_init`, from its parsed configuration).
pub fn set_level(l: Level) {
    LEVEL.store(l as u8, Ordering::Relaxed);
}

/// The level in force.
pub fn level() -> Level {
    let mut v = LEVEL.load(Ordering::Relaxed);
    if v == UNSET {
        // A line before `nrt_init`: the variable as it stands (`nrt_init` sets it for good).
        set_level(crate::runtime::config::log_level_from_env());
        v = LEVEL.load(Ordering::Relaxed);
    }
    match v {
        1 => Level::Error,
        2 => Level::Warning,
        3 => Level::Info,
        4 => Level::Debug,
        _ => Level::Trace,
    }
}

/// Would a message at `l` be written?
pub fn enabled(l: Level) -> bool {
    l <= level()
}

/// Write one line if `l` is enabled. Prefer the `log_*!` macros.
pub fn write(l: Level, target: &str, args: std::fmt::Arguments<'_>) {
    if !enabled(l) {
        return;
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs();
    let (h, m, s) = ((secs / 3600) % 24, (secs / 60) % 60, secs % 60);
    // SAFETY: getpid and gettid have no preconditions.
    let (pid, tid) = unsafe { (libc::getpid(), libc::gettid()) };
    let mut err = std::io::stderr().lock();
    let _ = writeln!(
        err,
        "{h:02}:{m:02}:{s:02}.{:06} {pid}:{tid} {:<7} OPENNRT:{target} {args}",
        now.subsec_micros(),
        l.name()
    );
}

/// Write a line only the first time `key` is seen in this process (e.g. "X is not implemented").
pub fn write_once(l: Level, key: &str, target: &str, args: std::fmt::Arguments<'_>) {
    {
        let mut keys = ONCE_KEYS.lock();
        if !keys
            .get_or_insert_with(HashSet::new)
            .insert(key.to_string())
        {
            return;
        }
    }
    write(l, target, args);
}

/// Log at ERROR: `log_error!("target", "fmt", args...)`.
#[macro_export]
macro_rules! log_error { ($t:expr, $($a:tt)*) => { $crate::runtime::log::write($crate::runtime::log::Level::Error, $t, format_args!($($a)*)) } }
/// Log at WARNING.
#[macro_export]
macro_rules! log_warn { ($t:expr, $($a:tt)*) => { $crate::runtime::log::write($crate::runtime::log::Level::Warning, $t, format_args!($($a)*)) } }
/// Log at INFO.
#[macro_export]
macro_rules! log_info { ($t:expr, $($a:tt)*) => { $crate::runtime::log::write($crate::runtime::log::Level::Info, $t, format_args!($($a)*)) } }
/// Log at DEBUG.
#[macro_export]
macro_rules! log_debug { ($t:expr, $($a:tt)*) => { $crate::runtime::log::write($crate::runtime::log::Level::Debug, $t, format_args!($($a)*)) } }
/// Log at TRACE.
#[macro_export]
macro_rules! log_trace { ($t:expr, $($a:tt)*) => { $crate::runtime::log::write($crate::runtime::log::Level::Trace, $t, format_args!($($a)*)) } }

#[cfg(test)]
mod tests;

//! For the CLIs only (`opennrt verify`, `opennrt perf`, `nccom-test`): one updating progress
//! line on stderr for work that takes minutes, so a person at a terminal sees it move.
//!
//! The line is drawn only when stderr is a terminal (`isatty(2)`): piped or redirected output
//! (CI logs, `2>file`, tests) gets no progress bytes at all, so what a script reads is exactly
//! what it read before. On a terminal the line is rewritten in place with `\r`, at most ten
//! times a second (a fast loop does not flood the terminal), and erased when the work ends or
//! the [`Progress`] is dropped, so the tool's own output lines are never interleaved with it.
//! It writes to stderr only: stdout (the tables) stays clean even on a terminal.

use std::io::Write as _;
use std::time::{Duration, Instant};

/// Least time between two redraws.
const REDRAW: Duration = Duration::from_millis(100);

/// A progress line (see the module doc). Inert when stderr is not a terminal.
#[derive(Debug)]
pub struct Progress {
    on: bool,
    label: String,
    total: u64,
    started: Instant,
    last: Option<Instant>,
    /// Characters of the line now on the screen (to erase it).
    shown: usize,
}

/// True when file descriptor 2 is a terminal.
pub fn stderr_is_terminal() -> bool {
    // SAFETY: isatty only inspects the descriptor number; any value is allowed.
    unsafe { libc::isatty(2) == 1 }
}

impl Progress {
    /// A line for `total` units of work, prefixed with `label` (e.g. `verify`).
    pub fn new(label: &str, total: u64) -> Progress {
        Progress {
            on: stderr_is_terminal(),
            label: label.to_string(),
            total,
            started: Instant::now(),
            last: None,
            shown: 0,
        }
    }

    /// A line that is never drawn, whatever stderr is (a tool's `--non-interactive`).
    pub fn off(label: &str, total: u64) -> Progress {
        let mut p = Progress::new(label, total);
        p.on = false;
        p
    }

    /// Whether anything will be drawn.
    pub fn is_on(&self) -> bool {
        self.on
    }

    /// `done` of the total units are finished; `what` names the current one.
    pub fn update(&mut self, done: u64, what: &str) {
        if !self.on || self.last.is_some_and(|t| t.elapsed() < REDRAW) {
            return;
        }
        self.last = Some(Instant::now());
        let line = line(&self.label, done, self.total, self.started.elapsed(), what);
        self.draw(&line);
    }

    /// Erase the line (also done on drop); the next [`update`](Self::update) draws at once.
    pub fn finish(&mut self) {
        self.last = None;
        if self.on && self.shown > 0 {
            let blank = " ".repeat(self.shown);
            let _ = write!(std::io::stderr(), "\r{blank}\r");
            let _ = std::io::stderr().flush();
            self.shown = 0;
        }
    }

    fn draw(&mut self, line: &str) {
        let n = line.chars().count();
        let pad = " ".repeat(self.shown.saturating_sub(n));
        let _ = write!(std::io::stderr(), "\r{line}{pad}");
        let _ = std::io::stderr().flush();
        self.shown = n;
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

/// The text of the line: `label [done/total] pct% elapsed: what`, cut to 100 characters so it
/// never wraps on an ordinary terminal (a wrapped line cannot be rewritten with `\r`).
pub fn line(label: &str, done: u64, total: u64, elapsed: Duration, what: &str) -> String {
    let pct = (done.min(total) * 100).checked_div(total).unwrap_or(0);
    let s = format!(
        "{label} [{done}/{total}] {pct:>3}% {:.0}s: {what}",
        elapsed.as_secs_f64()
    );
    s.chars().take(100).collect()
}

#[cfg(test)]
mod tests;

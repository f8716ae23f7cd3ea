//! The verifier (docs/design.md §2.2, "verify before running", as MSCCLang does): execute the step
//! program of every rank on symbolic chunks and prove that it computes the collective.
//!
//! What [`verify`] proves:
//! * **(a) exact contributions.** Every output element holds exactly what the op requires,
//!   derived from the request alone ([`expect`]): each rank's input once for a reduce, the
//!   right block for gather, scatter, all-to-all and permute. Duplicated, missing, misplaced
//!   and foreign contributions are reported with the output rank, the element range, the
//!   expected and the found term, and the step that last wrote it.
//! * **(b) matched sends and satisfiable waits.** A deterministic scheduler (`schedule`)
//!   runs every rank; if every unfinished tape blocks, the deadlock report names, per blocked
//!   tape, the step, the semaphore, its value and target, and the steps that could still signal
//!   it ("no one signals it" when none). At the end every semaphore any step waits on must be
//!   back at 0, and no Remote/Credit increment may be left unconsumed (Local increments that
//!   nobody waits on are exempt). Structural rules are checked before running: waits only on
//!   the waiting rank's own semaphores, every location inside its buffer (in place: input and
//!   output are one storage of the larger size), reduces of 2..=32 sources with the request's
//!   op and only in reducing ops, no partly overlapping source and destination. Reading
//!   elements never written (scratch or output) is an error. For a barrier, no rank may
//!   complete before every rank has started (tracked with "rank reached" sets that travel with
//!   the semaphore signals).
//! * **(c) descriptor decode-back** (every emitted descriptor decodes back to the step it came
//!   from) is not done here: it lives with the emitter, in `src/lower/emit.rs`, which owns the
//!   byte formats. This module checks the step program only.
//!
//! What is not checked: the content of an all-to-all-v output whose request carries no
//! resolved counts table (with a table it is checked exactly, see [`expect`]), the output of
//! send/recv without pairs, and data races beyond what the greedy schedule exposes (see
//! `schedule`). An implicit permute-reduce is checked exactly: its input buffer is
//! `[src0 | src1]`, so both operands of the predecessor are named contributions.
//!
//! Cost: memory is a per-storage interval map of affine terms ([`symbolic`]), so the work
//! grows with the number of transfers and ranks, not with the element count. Reduces are
//! memoised on their sources' terms (every loop of a ring reuses one result) and neighbouring
//! segments with the same term merge. A 64-rank ring all-reduce of 1 Mi elements in 8 loops
//! (131 072 steps) verifies in about 120 ms in a release build
//! (`cargo test --release -p opennrt bench_64_ranks -- --ignored --nocapture`).

pub mod error;
pub mod expect;
pub(crate) mod lanes;
pub(crate) mod schedule;
pub mod symbolic;

#[cfg(test)]
pub(crate) mod testprog;
#[cfg(test)]
mod tests;

use std::fmt;

use serde::Serialize;

pub use error::{At, Blocked, Mismatch, OutputProblem, VerifyError};
pub use expect::{expected_output, expected_term, Expect, ExpectedSeg};
pub use symbolic::{Contrib, Term};

use crate::lower::program::Program;

/// What a successful verification ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VerifyReport {
    /// Ranks.
    pub ranks: u32,
    /// cc_op entries over all ranks.
    pub entries: usize,
    /// Steps executed.
    pub steps: u64,
    /// Transfers executed.
    pub transfers: u64,
    /// Bytes written by the transfers each rank's steps issue (elements × dtype size).
    pub bytes_per_rank: Vec<u64>,
    /// Highest value any semaphore reached.
    pub max_sem_value: u64,
    /// Scheduler rounds (each round runs every rank until it blocks).
    pub rounds: u64,
}

impl fmt::Display for VerifyReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let max_bytes = self.bytes_per_rank.iter().max().copied().unwrap_or(0);
        write!(
            f,
            "{} ranks, {} entries, {} steps, {} transfers, up to {} bytes per rank, max semaphore {}, {} rounds",
            self.ranks,
            self.entries,
            self.steps,
            self.transfers,
            max_bytes,
            self.max_sem_value,
            self.rounds
        )
    }
}

/// Verify `p` against its request: (a) exact contributions and (b) matched sends and
/// satisfiable waits (see the module doc). Returns what ran, or the first failure found.
pub fn verify(p: &Program) -> Result<VerifyReport, VerifyError> {
    let n = p.request.rank_n();
    schedule::check_structure(p)?;
    // A request the expectations cannot describe is reported before anything runs.
    for r in 0..n {
        expected_output(&p.request, r)?;
    }
    let mut run = schedule::Run::new(p);
    run.run()?;
    run.check_semaphores()?;
    run.check_barrier()?;
    for r in 0..n {
        expect::check_output(&run.mem, &p.request, r, &|w| run.at_of(w))?;
    }
    Ok(run.report)
}

//! The other executors of a run (docs/design.md §2.7): when the ranks of one
//! collective run in several executors — one per rank, in several processes — each
//! [`super::executor::Machine`] steps only its own TOP_SPs, while the other ranks' HBM and
//! EVT_SEM blocks are shared memory it maps. What it needs from the others is this trait,
//! which the runtime implements over the run's shared segments (`runtime::multi_process::run`); the
//! device stays independent of how processes meet.
//!
//! **Waiting.** A sequencer whose semaphore only a peer can raise does not make the machine
//! spin: when nothing local can progress, the machine reads the run's *epoch* (a counter every
//! write into another executor's semaphore block bumps, [`super::sema::SemNotify`]), rechecks
//! its waits once, publishes "blocked at epoch e" ([`Peers::blocked`]) and sleeps until the epoch
//! moves ([`Peers::wait`], a futex), for at most [`POLL`] so that a dead peer and the execution
//! timeout are noticed.
//!
//! **Job-wide hang.** The run hangs exactly when every executor is blocked at the current
//! epoch or done: nobody is running, so nobody can write a semaphore again
//! ([`Peers::all_blocked`]). Each executor then fails with its own hang report (its stuck
//! TOP_SPs, semaphores and pending signals) plus the state of every rank.

use std::time::Duration;

use crate::error::Result;

/// Longest sleep between checks for a dead or failed peer and the execution timeout.
pub const POLL: Duration = Duration::from_millis(50);

/// The other executors of the run, as one executor sees them (module doc).
pub trait Peers: Send + Sync + std::fmt::Debug {
    /// The run's epoch: how many writes into another executor's semaphores there have been.
    fn epoch(&self) -> u32;
    /// Sleep until the epoch differs from `seen`, at most `max`.
    fn wait(&self, seen: u32, max: Duration);
    /// This executor is running (it saw the epoch move).
    fn running(&self);
    /// This executor cannot progress with everything written up to epoch `seen`.
    fn blocked(&self, seen: u32);
    /// This executor's TOP_SPs are all done.
    fn done(&self);
    /// This executor failed with `e` (the others stop waiting for it).
    fn failed(&self, e: &crate::error::Error);
    /// `Some(state of every rank)` when every executor is blocked at `seen` or done and the
    /// epoch is still `seen`: a hang of the whole run.
    fn all_blocked(&self, seen: u32) -> Option<String>;
    /// An error if a peer failed or its process died.
    fn check(&self) -> Result<()>;
    /// Every rank's state (for the timeout report).
    fn states(&self) -> String;
    /// Publish the queue indices of local TOP_SP `topsp` on `chip` (`[M2S head, M2S tail,
    /// S2M head, S2M tail]`), so that a peer's hang report can walk its rings.
    fn publish_queues(&self, chip: u8, topsp: u8, idx: [u64; 4]);
    /// The other executors' S2M rings with their last published indices.
    fn remote_rings(&self) -> Vec<RemoteRing>;
}

/// Where an executor records the bytes it writes into a peer that lives on another host. Such a
/// peer's regions are mapped as a *shadow* (local memory with the peer's layout,
/// `Memory::map_shadow`): the DMA engines write into it as into any peer's HBM, and every write
/// is recorded here; before the semaphore write that signals the data reaches the peer (the
/// [`super::sema::SemNotify`] of its shadow blocks), the runtime's network proxy sends the
/// recorded bytes, so the peer sees data then signal, as the program orders them.
pub trait WriteLog: Send + Sync + std::fmt::Debug {
    /// `len` bytes at offset `off` of the shadow were (or are about to be) written.
    fn wrote(&self, off: usize, len: usize);
}

/// An S2M ring of another executor, as its owner last published it (hang reports: who should
/// have signalled a semaphore).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteRing {
    /// The owning rank.
    pub rank: u32,
    /// Its chip.
    pub chip: u8,
    /// Its device TOP_SP.
    pub topsp: u8,
    /// On-chip base of the ring.
    pub base: u64,
    /// Descriptors in the ring.
    pub len: u64,
    /// Stream index of the next descriptor the engine consumes.
    pub head: u64,
    /// Stream index one past the last posted descriptor.
    pub tail: u64,
}

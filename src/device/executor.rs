//! The executor: one deterministic scheduler for every simulated TOP_SP of the process
//! (docs/contract/device.md §8–§10, §12).
//!
//! A [`Machine`] owns the [`Memory`] (with every chip's EVT_SEM blocks) and, per (chip, device
//! TOP_SP), one [`QueuePair`] and one [`Sequencer`]. [`Machine::run`] repeats *passes* over the
//! agents that may progress, in (chip, TOP_SP) order:
//!
//! 1. every *ready* sequencer steps until it is [`Action::Blocked`] or [`Action::Done`]; each
//!    [`Action::TailInc`] rings its pair's doorbells, S2M first, then M2S (docs/contract/device.md §1.2: RX
//!    posted before TX) and makes that pair ready;
//! 2. every ready pair runs until it stalls ([`QueuePair::run`]'s loop; its bulk data is
//!    deferred into the machine's one batch, [`super::batch`]).
//!
//! **Deferred data.** Every engine of the machine defers the bytes of its plain copies and
//! reduces into one batch for the whole run; the batch orders them by their byte ranges, so the
//! memory after a flush is that of executing every packet in the order this scheduler ran them
//! (the same bits on every run and thread count). Inside one machine only those ops read data
//! (sequencers read semaphores, engines read rings, which the batch never defers), so a
//! semaphore write needs no flush and the data of many steps and ranks runs together, spread
//! over the cores. The batch is flushed when the run ends (success, hang, abort, timeout),
//! before this machine waits for its peers, and — with [`Machine::peers`], where another
//! process reads the data a semaphore signals — before every semaphore write, as a standalone
//! [`QueuePair::run`] does. A sequencer increment that lands in plain memory flushes first. A
//! ring that does not lie in one region makes every engine flush whenever it returns.
//!
//! **No busy-waiting.** A blocked sequencer is not retried: it becomes ready again only when a
//! semaphore of the block it waits on changes — a DMA write reported in
//! [`super::dma::Progress::touched_sems`], or an increment by a sequencer. A stalled pair
//! becomes ready only when its sequencer releases descriptors. When nothing is ready the run
//! is over: if every sequencer is done and every ring drained it succeeded, otherwise it is a
//! **hang**. The order never depends on timing, so results and reports are the same bits on
//! every run.
//!
//! **Timeout.** What in-process detection cannot see (a run that keeps moving but never ends;
//! with several processes, a peer that never signals) is bounded by [`Machine::timeout`]
//! (`NEURON_RT_EXEC_TIMEOUT`, default [`DEFAULT_EXEC_TIMEOUT_S`] s, read by the runtime): a run
//! past it fails with `NRT_EXEC_HW_ERR_COLLECTIVES` and the hang report of that moment
//! (docs/contract/device.md §12.2: 1200 when a collective is in flight).
//!
//! **Hang report** (`NRT_EXEC_HW_ERR_COLLECTIVES`, [`ErrorKind::CollectivesHang`]): per blocked
//! sequencer its chip, device TOP_SP (and rank, when known), cc_op entry and CTRL slot, SLOT
//! SPAD record, the semaphore it waits (SoC address of its READ window, index), value and
//! target, and every not-yet-executed S2M descriptor in any ring whose destination is that
//! semaphore (any writable window: SET, INC, DEC) — i.e. who should have signalled it — or "no
//! pending descriptor signals it". Per signalling ring the report names the next such
//! descriptor (the one that should have fired) and counts the later ones ("+N later"). Descriptors not yet posted (beyond the tail) are found by
//! walking the ring from the head while the RING_ID matches the lap (unwritten slots hold 0,
//! never a valid lap-1 tag); those are marked "not posted".
//!
//! The report ends with one line per stuck TOP_SP offering its CC-context dump
//! ([`Machine::ctx_log`]; `OPENNRT_HANG_DUMP=<dir>` writes the files, see [`super::cc_context`]).
//!
//! **Abort**: a DMA abort stops the run at once with the abort error ([`ErrorKind::DmaAbort`]).
//!
//! Choice: rank-local TOP_SP `t` of a sequencer lives at device TOP_SP
//! `device_topsp − config.topsp + t` (a rank's TOP_SPs are consecutive, as `lower::addrmap`
//! places them: `core · per_rank + t`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::batch::Batch;
use super::cc_context::{cc_context_image, dump_file_stem, model_name, LiveTopsp, HANG_DUMP_ENV};
use super::dma::{QueuePair, RingPlace, RunCx, RING_GUARD};
use super::memory::{Memory, Touched};
use super::peers::{Peers, POLL};
use super::sema::BlockId;
use super::topsp::{Action, SemAccess, Sequencer, Stage};
use crate::dtype::Numerics;
use crate::error::{Error, ErrorKind, Result};
use crate::isa::evtsem::{SemAddr, SemWindow};
use crate::isa::udma::{Descriptor, Direction, DESC_BYTES};
use crate::ncfw::{Arch, LogStatus};

/// What a successful [`Machine::run`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunReport {
    /// Scheduler rounds (the last one changed nothing).
    pub rounds: u64,
    /// Packet pairs executed.
    pub packets: u64,
    /// Bytes written by executed RX packets (data and semaphore writes).
    pub bytes: u64,
}

/// One (chip, device TOP_SP).
#[derive(Debug)]
struct Agent {
    chip: u8,
    topsp: u8,
    rank: Option<u32>,
    pair: QueuePair,
    seq: Sequencer,
    /// Tail increments the sequencer issued that wait for ring space: `(m2s, s2m)` still to
    /// ring (S2M first). The producer rule of docs/contract/device.md §3.2 — at most `len − 16` descriptors
    /// outstanding — makes the TOP_SP wait here, not abort.
    doorbell: Option<(u64, u64)>,
}

impl Agent {
    /// Device TOP_SP of rank-local TOP_SP `t`.
    fn device(&self, t: u8) -> u8 {
        self.topsp
            .wrapping_sub(self.seq.config().topsp)
            .wrapping_add(t)
    }

    fn name(&self) -> String {
        match self.rank {
            Some(r) => format!("rank {r} (chip {} TOP_SP {})", self.chip, self.topsp),
            None => format!("chip {} TOP_SP {}", self.chip, self.topsp),
        }
    }
}

/// The TOP_SP semaphore blocks written in one scheduler pass: one bit per (chip, device
/// TOP_SP), so marking and testing are constant time (no sorting per pass).
#[derive(Debug, Default)]
struct TouchedBlocks {
    bits: Vec<u64>,
    any: bool,
}

impl TouchedBlocks {
    fn mark(&mut self, chip: u8, topsp: u8) {
        let i = usize::from(chip) * 256 + usize::from(topsp);
        if self.bits.len() <= i / 64 {
            self.bits.resize(i / 64 + 1, 0);
        }
        self.bits[i / 64] |= 1 << (i % 64);
        self.any = true;
    }
    fn has(&self, chip: u8, topsp: u8) -> bool {
        let i = usize::from(chip) * 256 + usize::from(topsp);
        self.bits
            .get(i / 64)
            .is_some_and(|w| w & (1 << (i % 64)) != 0)
    }
    fn clear(&mut self) {
        if std::mem::take(&mut self.any) {
            self.bits.iter_mut().for_each(|w| *w = 0);
        }
    }
}

/// The semaphores as one sequencer's rank sees them.
struct Sems<'a> {
    mem: &'a mut Memory,
    /// The machine's deferred data: flushed before an increment that lands in plain memory.
    batch: &'a mut Batch,
    chip: u8,
    base: u8,
    /// (chip, device TOP_SP) of every block whose semaphores the sequencer raised.
    touched: &'a mut TouchedBlocks,
}

impl Sems<'_> {
    fn block(&self, t: u8) -> Option<&super::sema::SemBlock> {
        self.mem
            .sems(self.chip)?
            .block(BlockId::TopSp(self.base.wrapping_add(t)))
    }
    fn block_mut(&mut self, t: u8) -> Option<&mut super::sema::SemBlock> {
        self.mem
            .sem_block_mut(self.chip, BlockId::TopSp(self.base.wrapping_add(t)))
    }
}

impl SemAccess for Sems<'_> {
    fn value(&self, topsp: u8, id: u8) -> i32 {
        self.block(topsp).map_or(0, |b| b.value(id))
    }
    fn try_wait(&mut self, topsp: u8, id: u8, target: i32, consume: i32) -> bool {
        match self.block_mut(topsp) {
            Some(b) if b.value(id) >= target => {
                b.sub(id, consume);
                true
            }
            _ => false,
        }
    }
    fn inc(&mut self, topsp: u8, id: u8, by: i32) {
        if let Some(b) = self.block_mut(topsp) {
            b.add(id, by);
            self.touched.mark(self.chip, self.base.wrapping_add(topsp));
        }
    }
    fn inc_addr(&mut self, addr: u64, by: u32) -> Result<()> {
        // Data then signal: the increment may reach a peer's block (another process's, or
        // another host's through its shadow, whose signal sends the bytes written before it),
        // so nothing deferred may still be pending when it lands.
        if !self.batch.is_empty() {
            self.batch.flush(self.mem);
        }
        if let Touched::Sem(t) = self.mem.write(self.chip, addr, &by.to_le_bytes())? {
            if let (true, BlockId::TopSp(d)) = (t.changed(), t.block) {
                self.touched.mark(t.chip, d);
            }
        }
        Ok(())
    }
}

/// The simulated devices of one process.
#[derive(Debug)]
pub struct Machine {
    /// Memory and semaphores of every chip.
    pub mem: Memory,
    /// FP8 modes etc. of the CCE.
    pub numerics: Numerics,
    /// Arch of the TOP_SPs: selects the CC-context layout of [`Machine::cc_context`]. Default
    /// [`Arch::V3`] (cayman, whose EVT_SEM map docs/contract/device.md §5.1 gives); `runtime::machine`
    /// sets it from the topology's generation.
    pub arch: Arch,
    /// The execution timeout ([`DEFAULT_EXEC_TIMEOUT_S`] unless the runtime sets it from
    /// `NEURON_RT_EXEC_TIMEOUT`; `None`: none).
    pub timeout: Option<std::time::Duration>,
    /// The other executors of the run when the ranks run in several (`None`: this machine
    /// holds every TOP_SP of the run; [`super::peers`]).
    pub peers: Option<std::sync::Arc<dyn Peers>>,
    agents: Vec<Agent>,
    /// The engines' shared state during a run (deferred data, caches, buffers).
    cx: RunCx,
}

/// Default execution timeout in seconds (docs/contract/abi.md environment table; docs/contract/device.md §12.2
/// "30 s observed").
pub const DEFAULT_EXEC_TIMEOUT_S: u64 = 30;

/// The variable that sets [`Machine::timeout`] (read by the runtime, not here).
const TIMEOUT_ENV: &str = "NEURON_RT_EXEC_TIMEOUT";

impl Machine {
    /// A machine of `chips` chips with nothing mapped.
    pub fn new(chips: u8) -> Machine {
        Machine {
            mem: Memory::new(chips),
            numerics: Numerics::default(),
            arch: Arch::V3,
            timeout: Some(std::time::Duration::from_secs(DEFAULT_EXEC_TIMEOUT_S)),
            peers: None,
            agents: Vec::new(),
            cx: RunCx::default(),
        }
    }

    /// Add the queue pair and sequencer of device TOP_SP `topsp` on `chip`.
    pub fn add_topsp(&mut self, chip: u8, topsp: u8, pair: QueuePair, seq: Sequencer) {
        self.add(chip, topsp, None, pair, seq);
    }

    /// Same, naming the rank it belongs to (for hang reports).
    pub fn add_rank_topsp(
        &mut self,
        rank: u32,
        chip: u8,
        topsp: u8,
        pair: QueuePair,
        seq: Sequencer,
    ) {
        self.add(chip, topsp, Some(rank), pair, seq);
    }

    fn add(&mut self, chip: u8, topsp: u8, rank: Option<u32>, pair: QueuePair, seq: Sequencer) {
        let a = Agent {
            chip,
            topsp,
            rank,
            pair,
            seq,
            doorbell: None,
        };
        let at = self
            .agents
            .partition_point(|b| (b.chip, b.topsp) <= (chip, topsp));
        self.agents.insert(at, a);
    }

    /// Remove every TOP_SP, keeping the memory and the engines' run context (their caches
    /// and buffers, the batch's lists): a persistent machine (`runtime::resident`) does so
    /// after each run and adds its TOP_SPs again for the next, which then allocates nothing
    /// the last one had.
    pub fn clear_topsps(&mut self) {
        self.agents.clear();
    }

    /// Number of TOP_SPs added.
    pub fn topsps(&self) -> usize {
        self.agents.len()
    }

    /// The queue pair of (chip, device TOP_SP).
    pub fn pair(&self, chip: u8, topsp: u8) -> Option<&QueuePair> {
        self.agents
            .iter()
            .find(|a| (a.chip, a.topsp) == (chip, topsp))
            .map(|a| &a.pair)
    }

    /// Run until every sequencer is done and every ring drained (module doc). With
    /// [`Machine::peers`], the peers hear how it ended ([`Peers::done`] / [`Peers::failed`]).
    pub fn run(&mut self) -> Result<RunReport> {
        let r = self.run_agents();
        // Every path out of the run leaves flushed memory (the reports flushed already).
        self.settle();
        if let Some(p) = &self.peers {
            match &r {
                Ok(_) => p.done(),
                Err(e) => p.failed(e),
            }
        }
        r
    }

    /// Execute the deferred data of the engines (module doc).
    fn settle(&mut self) {
        self.cx.batch.flush(&mut self.mem);
    }

    /// Where every ring lies for this run, and the engines' context set up for it.
    fn ring_places(&mut self) -> Vec<[RingPlace; 2]> {
        let mut places = Vec::with_capacity(self.agents.len());
        let mut regions = Vec::with_capacity(2 * self.agents.len());
        let mut contained = true;
        for a in &self.agents {
            let (p, r) = a.pair.ring_places(&self.mem, a.chip);
            contained &= p.iter().all(Option::is_some);
            regions.extend(r.into_iter().flatten());
            places.push(p);
        }
        let shared = self.peers.is_some();
        self.cx
            .start(&self.mem, regions, shared || !contained, !contained);
        places
    }

    fn run_agents(&mut self) -> Result<RunReport> {
        let started = std::time::Instant::now();
        let mut rep = RunReport::default();
        let n = self.agents.len();
        let places = self.ring_places();
        // Who may progress: every sequencer at first (the host trigger), no engine.
        let mut seq_ready = vec![true; n];
        let mut pair_ready = vec![false; n];
        let mut touched = TouchedBlocks::default();
        // The peers' epoch this machine has caught up with (shared runs only).
        let mut seen: Option<u32> = None;
        let mut job_hang: Option<String> = None;
        loop {
            if !seq_ready.iter().chain(&pair_ready).any(|&r| r) {
                let Some(p) = self.peers.clone() else { break };
                if self.finished() {
                    break;
                }
                // Only a peer can unblock us: catch up with its writes once, then sleep.
                let e = p.epoch();
                if seen != Some(e) {
                    seen = Some(e);
                    p.running();
                    for (k, a) in self.agents.iter().enumerate() {
                        seq_ready[k] =
                            a.seq.position().waiting_on.is_some() || a.doorbell.is_some();
                    }
                    continue;
                }
                // Our peers may read what we wrote while we sleep.
                self.settle();
                for a in &self.agents {
                    let (m, r) = (&a.pair.m2s, &a.pair.s2m);
                    p.publish_queues(a.chip, a.topsp, [m.head(), m.tail(), r.head(), r.tail()]);
                }
                p.blocked(e);
                if let Some(states) = p.all_blocked(e) {
                    job_hang = Some(states);
                    break;
                }
                // A dead or failed peer: say so, with where this rank is stuck.
                p.check().map_err(|e| {
                    let why = format!(
                        "{}; this rank is stuck: {}\n{}",
                        e.message(),
                        self.stuck_summary(),
                        self.hang_report()
                    );
                    Error::new(e.kind(), why)
                })?;
                self.check_timeout(started)?;
                p.wait(e, POLL);
                continue;
            }
            rep.rounds += 1;
            self.check_timeout(started)?;
            for k in 0..n {
                if !std::mem::take(&mut seq_ready[k]) {
                    continue;
                }
                let a = &mut self.agents[k];
                if step_sequencer(a, &mut self.mem, &mut self.cx.batch, &mut touched)? {
                    pair_ready[k] = true;
                }
            }
            for (k, a) in self.agents.iter_mut().enumerate() {
                if !std::mem::take(&mut pair_ready[k]) {
                    continue;
                }
                let p = a
                    .pair
                    .run_in(
                        &mut self.mem,
                        a.chip,
                        &self.numerics,
                        &mut self.cx,
                        places[k],
                    )
                    .map_err(Error::from)?;
                // Consumed slots may let a waiting doorbell through.
                if p.packets_done > 0 && a.doorbell.is_some() {
                    seq_ready[k] = true;
                }
                rep.packets += p.packets_done;
                rep.bytes += p.bytes;
                for t in self.cx.touched.drain(..).filter(|t| t.changed()) {
                    if let BlockId::TopSp(d) = t.block {
                        touched.mark(t.chip, d);
                    }
                }
            }
            // A semaphore change wakes the sequencers waiting in that block.
            for (k, a) in self.agents.iter().enumerate() {
                if let Some(w) = a.seq.position().waiting_on {
                    if touched.has(a.chip, a.device(w.topsp)) {
                        seq_ready[k] = true;
                    }
                }
            }
            touched.clear();
        }
        self.settle();
        if self.finished() {
            return Ok(rep);
        }
        let mut report = self.hang_report();
        if let Some(states) = job_hang {
            report.push_str(&format!(
                "\n* every rank of the run is blocked or done, none can signal again: {states}"
            ));
        }
        Err(self.with_first_stuck(Error::new(ErrorKind::CollectivesHang, report)))
    }

    /// `e` with the structured fields of the first stuck sequencer: its rank, its cc_op entry
    /// (the step), and the semaphore it waits on (the field, with its target as expected).
    fn with_first_stuck(&self, mut e: Error) -> Error {
        let Some(a) = self.agents.iter().find(|a| !a.seq.is_done()) else {
            return e;
        };
        let pos = a.seq.position();
        e = e.with_step(pos.entry as u64);
        if let Some(r) = a.rank {
            e = e.with_rank(r);
        }
        if let Some(w) = pos.waiting_on {
            let mut f = e.fields().clone();
            f.field = Some(format!("TOP_SP {} semaphore {}", w.topsp, w.sem));
            f.expected = Some(format!(">= {}", w.target));
            e = e.with_fields(f);
        }
        e
    }

    /// Every sequencer done and every ring drained.
    fn finished(&self) -> bool {
        let done = self
            .agents
            .iter()
            .all(|a| a.seq.is_done() && a.doorbell.is_none());
        let drained = self
            .agents
            .iter()
            .all(|a| a.pair.m2s.pending().is_empty() && a.pair.s2m.pending().is_empty());
        done && drained
    }

    /// The execution timeout (module doc): a run still going after [`Machine::timeout`] fails
    /// with the hang report of the moment.
    fn check_timeout(&mut self, started: std::time::Instant) -> Result<()> {
        match self.timeout {
            Some(t) if started.elapsed() >= t => Err(self.timed_out(t, started)),
            _ => Ok(()),
        }
    }

    /// The timeout error, with the state of the moment (the deferred data flushed first).
    fn timed_out(&mut self, t: std::time::Duration, started: std::time::Instant) -> Error {
        self.settle();
        Error::new(
            ErrorKind::CollectivesHang,
            format!(
                "execution timeout: the collective ran {:.1} s, longer than {} s \
                     ({TIMEOUT_ENV}); state now: {}{}",
                started.elapsed().as_secs_f64(),
                t.as_secs_f64(),
                self.hang_report(),
                self.peers
                    .as_ref()
                    .map(|p| format!("\n* every rank: {}", p.states()))
                    .unwrap_or_default()
            ),
        )
    }
}

/// Step one sequencer until it blocks or finishes; true if it released descriptors (its
/// engine has new work). Semaphores it changed itself are added to `touched`. A tail
/// increment that does not fit its ring's free slots is kept in [`Agent::doorbell`] and the
/// sequencer waits until its engine has consumed enough.
fn step_sequencer(
    a: &mut Agent,
    mem: &mut Memory,
    batch: &mut Batch,
    touched: &mut TouchedBlocks,
) -> Result<bool> {
    let base = a.device(0);
    let mut released = false;
    loop {
        if let Some((m2s, s2m)) = a.doorbell {
            let rest = ring_doorbell(a, mem, m2s, s2m)?;
            released |= rest != (m2s, s2m);
            if rest != (0, 0) {
                a.doorbell = Some(rest);
                return Ok(released);
            }
            a.doorbell = None;
        }
        if a.seq.is_done() {
            return Ok(released);
        }
        let mut sems = Sems {
            mem: &mut *mem,
            batch: &mut *batch,
            chip: a.chip,
            base,
            touched: &mut *touched,
        };
        match a.seq.step(&mut sems)? {
            Action::TailInc { m2s, s2m } => a.doorbell = Some((u64::from(m2s), u64::from(s2m))),
            Action::Blocked { .. } | Action::Done => return Ok(released),
        }
    }
}

/// Ring what fits of `(m2s, s2m)`, S2M first (RX before TX); returns what is left.
fn ring_doorbell(a: &mut Agent, mem: &mut Memory, m2s: u64, s2m: u64) -> Result<(u64, u64)> {
    let mut left = (m2s, s2m);
    for dir in [Direction::S2M, Direction::M2S] {
        let n = match dir {
            Direction::S2M => left.1,
            Direction::M2S => left.0,
        };
        let q = a.pair.queue(dir);
        let free = q.len().saturating_sub(RING_GUARD + (q.tail() - q.head()));
        if n == 0 {
            continue;
        }
        // An increment larger than a whole ring can never fit: the doorbell rejects it.
        if n <= free || n > q.len() - RING_GUARD {
            a.pair.tail_inc(a.chip, dir, n).map_err(Error::from)?;
            match dir {
                Direction::S2M => left.1 = 0,
                Direction::M2S => left.0 = 0,
            }
        } else {
            break;
        }
    }
    a.pair.refill(mem, a.chip).map_err(Error::from)?;
    Ok(left)
}

mod report;

#[cfg(test)]
mod tests;

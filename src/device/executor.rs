//! The executor: one deterministic scheduler for every simulated TOP_SP of the process
//! (spec/device.md §8–§10, §12; issue 4 item 5).
//!
//! A [`Machine`] owns the [`Memory`] (with every chip's EVT_SEM blocks) and, per (chip, device
//! TOP_SP), one [`QueuePair`] and one [`Sequencer`]. [`Machine::run`] repeats *passes* over the
//! agents that may progress, in (chip, TOP_SP) order:
//!
//! 1. every *ready* sequencer steps until it is [`Action::Blocked`] or [`Action::Done`]; each
//!    [`Action::TailInc`] rings its pair's doorbells, S2M first, then M2S (device.md §1.2: RX
//!    posted before TX) and makes that pair ready;
//! 2. every ready pair runs until it stalls ([`QueuePair::run`]; its bulk data is spread over
//!    the machine's cores by [`super::batch`]).
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
//! (device.md §12.2: 1200 when a collective is in flight).
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

use super::cc_context::{cc_context_image, dump_file_stem, model_name, LiveTopsp, HANG_DUMP_ENV};
use super::dma::{QueuePair, RING_GUARD};
use super::memory::{Memory, Touched};
use super::peers::{Peers, POLL};
use super::sema::BlockId;
use super::topsp::{Action, SemAccess, Sequencer, Stage};
use crate::dtype::Numerics;
use crate::error::{Error, ErrorKind, Result};
use crate::isa::evtsem::{SemAddr, SemWindow};
use crate::isa::udma::{Descriptor, Direction, DESC_BYTES};
use crate::ncfw::{ctx_log_string, Arch, LogStatus};

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
    /// ring (S2M first). The producer rule of device.md §3.2 — at most `len − 16` descriptors
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

/// The semaphores as one sequencer's rank sees them.
struct Sems<'a> {
    mem: &'a mut Memory,
    chip: u8,
    base: u8,
    /// (chip, device TOP_SP) of every block whose semaphores the sequencer raised.
    touched: &'a mut Vec<(u8, u8)>,
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
            self.touched
                .push((self.chip, self.base.wrapping_add(topsp)));
        }
    }
    fn inc_addr(&mut self, addr: u64, by: u32) -> Result<()> {
        if let Touched::Sem(t) = self.mem.write(self.chip, addr, &by.to_le_bytes())? {
            if let (true, BlockId::TopSp(d)) = (t.changed(), t.block) {
                self.touched.push((t.chip, d));
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
    /// [`Arch::V3`] (cayman, whose EVT_SEM map device.md §5.1 gives); `runtime::device_run`
    /// sets it from the topology's generation.
    pub arch: Arch,
    /// The execution timeout ([`DEFAULT_EXEC_TIMEOUT_S`] unless the runtime sets it from
    /// `NEURON_RT_EXEC_TIMEOUT`; `None`: none).
    pub timeout: Option<std::time::Duration>,
    /// The other executors of the run when the ranks run in several (`None`: this machine
    /// holds every TOP_SP of the run; [`super::peers`]).
    pub peers: Option<std::sync::Arc<dyn Peers>>,
    agents: Vec<Agent>,
}

/// Default execution timeout in seconds (spec/nrt-abi.md environment table; device.md §12.2
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
        if let Some(p) = &self.peers {
            match &r {
                Ok(_) => p.done(),
                Err(e) => p.failed(e.message()),
            }
        }
        r
    }

    fn run_agents(&mut self) -> Result<RunReport> {
        let started = std::time::Instant::now();
        let mut rep = RunReport::default();
        let n = self.agents.len();
        // Who may progress: every sequencer at first (the host trigger), no engine.
        let mut seq_ready = vec![true; n];
        let mut pair_ready = vec![false; n];
        let mut touched: Vec<(u8, u8)> = Vec::new();
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
                p.blocked(e);
                if let Some(states) = p.all_blocked(e) {
                    job_hang = Some(states);
                    break;
                }
                p.check()?;
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
                if step_sequencer(a, &mut self.mem, &mut touched)? {
                    pair_ready[k] = true;
                }
            }
            for (k, a) in self.agents.iter_mut().enumerate() {
                if !std::mem::take(&mut pair_ready[k]) {
                    continue;
                }
                let p = a
                    .pair
                    .run(&mut self.mem, a.chip, &self.numerics)
                    .map_err(Error::from)?;
                // Consumed slots may let a waiting doorbell through.
                if p.packets_done > 0 && a.doorbell.is_some() {
                    seq_ready[k] = true;
                }
                rep.packets += p.packets_done;
                rep.bytes += p.bytes;
                touched.extend(
                    p.touched_sems
                        .iter()
                        .filter(|t| t.changed())
                        .filter_map(|t| match t.block {
                            BlockId::TopSp(d) => Some((t.chip, d)),
                            BlockId::Tpb(_) => None,
                        }),
                );
            }
            // A semaphore change wakes the sequencers waiting in that block.
            touched.sort_unstable();
            touched.dedup();
            for (k, a) in self.agents.iter().enumerate() {
                if let Some(w) = a.seq.position().waiting_on {
                    if touched.binary_search(&(a.chip, a.device(w.topsp))).is_ok() {
                        seq_ready[k] = true;
                    }
                }
            }
            touched.clear();
        }
        if self.finished() {
            return Ok(rep);
        }
        let mut report = self.hang_report();
        if let Some(states) = job_hang {
            report.push_str(&format!(
                "\n* every rank of the run is blocked or done, none can signal again: {states}"
            ));
        }
        Err(Error::new(ErrorKind::CollectivesHang, report))
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
    fn check_timeout(&self, started: std::time::Instant) -> Result<()> {
        match self.timeout {
            Some(t) if started.elapsed() >= t => Err(Error::new(
                ErrorKind::CollectivesHang,
                format!(
                    "execution timeout: the collective ran {:.1} s, longer than {} s \
                     ({TIMEOUT_ENV}); state now: {}",
                    started.elapsed().as_secs_f64(),
                    t.as_secs_f64(),
                    self.hang_report()
                ),
            )),
            _ => Ok(()),
        }
    }

    /// The diagnosis of a round that changed nothing (module doc).
    pub fn hang_report(&self) -> String {
        let mut s = String::from("collective hang: no TOP_SP or DMA queue can progress");
        for a in &self.agents {
            if let Some((m2s, s2m)) = a.doorbell {
                let (m, r) = (&a.pair.m2s, &a.pair.s2m);
                let _ = write!(
                    s,
                    "\n* {}: waits for ring space to release M2S {m2s} / S2M {s2m} descriptors \
                     (outstanding M2S {} of {}, S2M {} of {}, guard {RING_GUARD}); the engine \
                     cannot consume M2S {:?} / S2M {:?}",
                    a.name(),
                    m.tail() - m.head(),
                    m.len(),
                    r.tail() - r.head(),
                    r.len(),
                    m.pending(),
                    r.pending()
                );
                continue;
            }
            if a.seq.is_done() {
                let (m, r) = (a.pair.m2s.pending(), a.pair.s2m.pending());
                if !m.is_empty() || !r.is_empty() {
                    let _ = write!(
                        s,
                        "\n* {}: sequencer done, but M2S {m:?} / S2M {r:?} posted descriptors \
                         cannot pair",
                        a.name()
                    );
                }
                continue;
            }
            let p = a.seq.position();
            let _ = write!(
                s,
                "\n* {}: cc_op entry {} (CTRL slot {}), {}",
                a.name(),
                p.entry,
                p.slot,
                match (p.stage, p.record) {
                    (Stage::Records, Some(r)) => format!("SLOT SPAD record {r}"),
                    (Stage::Start, _) => "entry start (trigger)".into(),
                    (Stage::Completions, _) => "collecting completions".into(),
                    _ => "no record".into(),
                }
            );
            let Some(w) = p.waiting_on else {
                s.push_str(": blocked without a wait (internal)");
                continue;
            };
            let dev = a.device(w.topsp);
            let read = SemAddr {
                topsp: dev,
                window: SemWindow::Read,
                idx: w.sem,
            }
            .encode();
            let value = self
                .mem
                .sems(a.chip)
                .and_then(|c| c.block(BlockId::TopSp(dev)))
                .map_or(0, |b| b.value(w.sem));
            let _ = write!(
                s,
                ": waits semaphore {} of TOP_SP {dev} (READ {read:#x}) >= {}, value {value}",
                w.sem, w.target
            );
            let signals = self.signallers(a.chip, dev, w.sem);
            if signals.is_empty() {
                s.push_str("; no pending descriptor signals it");
            }
            // Per signalling ring, the next descriptor (the one that should have fired) and
            // how many later ones also target it.
            let mut k = 0;
            while k < signals.len() {
                let (b, i, posted) = signals[k];
                let same = signals[k..]
                    .iter()
                    .take_while(|x| std::ptr::eq(x.0, b))
                    .count();
                let _ = write!(
                    s,
                    "; pending signal: chip {} TOP_SP {} S2M index {i}{}",
                    b.chip,
                    b.topsp,
                    if posted { "" } else { " (not posted)" }
                );
                if let Some(r) = b.rank {
                    let _ = write!(s, " of rank {r}");
                }
                if same > 1 {
                    let _ = write!(s, " (+{} later)", same - 1);
                }
                k += same;
            }
        }
        s.push_str(&self.ctx_dump_offer());
        s
    }

    /// Not-yet-executed S2M descriptors (any ring) writing semaphore `idx` of `(chip, topsp)`.
    fn signallers(&self, chip: u8, topsp: u8, idx: u8) -> Vec<(&Agent, u64, bool)> {
        let mut out = Vec::new();
        for b in &self.agents {
            let q = &b.pair.s2m;
            for i in q.head()..q.head() + q.len() {
                let Some(Descriptor::RxData { addr, .. }) = ring_desc(&self.mem, b, i) else {
                    if i >= q.tail() {
                        break;
                    }
                    continue;
                };
                let Ok((c, on)) = self.mem.route(b.chip, addr) else {
                    continue;
                };
                let hit = SemAddr::decode(on).is_some_and(|sa| {
                    sa.topsp == topsp
                        && sa.idx == idx
                        && !matches!(sa.window, SemWindow::Read | SemWindow::Event)
                });
                if c == chip && hit {
                    out.push((b, i, i < q.tail()));
                }
            }
        }
        out
    }

    fn live(&self, chip: u8, topsp: u8) -> Option<(LiveTopsp<'_>, Option<u32>)> {
        let a = self
            .agents
            .iter()
            .find(|a| (a.chip, a.topsp) == (chip, topsp))?;
        let live = LiveTopsp {
            arch: self.arch,
            chip,
            topsp,
            seq: &a.seq,
            pair: &a.pair,
        };
        Some((live, a.rank))
    }

    /// The live CC context of device TOP_SP `topsp` on `chip`, in the spec/ncfw.md §3 layout of
    /// [`Machine::arch`] (built on demand, [`super::cc_context`]); `None` if no such TOP_SP.
    pub fn cc_context(&self, chip: u8, topsp: u8) -> Option<Vec<u8>> {
        self.live(chip, topsp).map(|(l, _)| cc_context_image(&l))
    }

    /// [`Machine::cc_context`] dumped by `ctx_log` (the text `libncfw_ctx_log` gives for that
    /// image; its `%p` fields print addresses inside the image buffer, as the vendor's do).
    pub fn ctx_log(&self, chip: u8, topsp: u8) -> Result<String> {
        let (live, rank) = self
            .live(chip, topsp)
            .ok_or_else(|| Error::invalid(format!("no TOP_SP {topsp} on chip {chip}")))?;
        let name = model_name(chip, topsp, rank);
        let (text, st) = ctx_log_string(&cc_context_image(&live), self.arch, name.as_bytes())?;
        match st {
            LogStatus::Complete => Ok(text),
            LogStatus::Truncated => Err(Error::resource(format!(
                "ctx_log of chip {chip} TOP_SP {topsp} does not fit 1 MiB"
            ))),
        }
    }

    /// `(chip, device TOP_SP)` of every sequencer that has not finished, in agent order.
    pub fn stuck_topsps(&self) -> Vec<(u8, u8)> {
        let stuck = self.agents.iter().filter(|a| !a.seq.is_done());
        stuck.map(|a| (a.chip, a.topsp)).collect()
    }

    /// Write, for every stuck TOP_SP, `<dir>/chip<C>_topsp<T>.json` (its [`Machine::ctx_log`])
    /// and `.ctx` (the raw image); returns the `.json` paths.
    pub fn write_ctx_dumps(&self, dir: &Path) -> Result<Vec<PathBuf>> {
        let io = |p: &Path, e: std::io::Error| Error::failure(format!("{}: {e}", p.display()));
        std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
        let mut out = Vec::new();
        for (chip, t) in self.stuck_topsps() {
            let stem = dir.join(dump_file_stem(chip, t));
            let (json, ctx) = (stem.with_extension("json"), stem.with_extension("ctx"));
            let image = self.cc_context(chip, t).unwrap_or_default();
            std::fs::write(&ctx, image).map_err(|e| io(&ctx, e))?;
            std::fs::write(&json, self.ctx_log(chip, t)?).map_err(|e| io(&json, e))?;
            out.push(json);
        }
        Ok(out)
    }

    /// The hang report's closing lines: per stuck TOP_SP how to get its CC-context dump, and
    /// with `OPENNRT_HANG_DUMP=<dir>` the files just written there ([`Machine::write_ctx_dumps`]).
    pub fn ctx_dump_offer(&self) -> String {
        let mut s = String::new();
        let arch = self.arch.id();
        match std::env::var_os(HANG_DUMP_ENV) {
            Some(dir) if !dir.is_empty() => match self.write_ctx_dumps(Path::new(&dir)) {
                Ok(files) => {
                    for f in files {
                        let _ = write!(
                            s,
                            "\n* CC context dump: {} (raw image beside it: opennrt ctx-log \
                             --arch {arch} --ctx <file>.ctx)",
                            f.display()
                        );
                    }
                }
                Err(e) => {
                    let _ = write!(s, "\n* CC context dumps not written: {e}");
                }
            },
            _ => {
                for (chip, t) in self.stuck_topsps() {
                    let _ = write!(
                        s,
                        "\n* CC context of chip {chip} TOP_SP {t} (arch {arch}): \
                         Machine::ctx_log({chip}, {t}), or set {HANG_DUMP_ENV}=<dir> to write \
                         {}.json",
                        dump_file_stem(chip, t)
                    );
                }
            }
        }
        s
    }
}

/// The descriptor at S2M stream index `i` if its slot holds that lap's RING_ID.
fn ring_desc(mem: &Memory, a: &Agent, i: u64) -> Option<Descriptor> {
    let q = &a.pair.s2m;
    let mut b = [0u8; DESC_BYTES];
    mem.read(a.chip, q.slot_addr(i), &mut b).ok()?;
    if b[3] & 3 != q.expected_ring_id(i) {
        return None;
    }
    Descriptor::decode(&b, Direction::S2M).ok()
}

/// Step one sequencer until it blocks or finishes; true if it released descriptors (its
/// engine has new work). Semaphores it changed itself are added to `touched`. A tail
/// increment that does not fit its ring's free slots is kept in [`Agent::doorbell`] and the
/// sequencer waits until its engine has consumed enough.
fn step_sequencer(a: &mut Agent, mem: &mut Memory, touched: &mut Vec<(u8, u8)>) -> Result<bool> {
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

#[cfg(test)]
#[path = "executor_tests.rs"]
mod tests;

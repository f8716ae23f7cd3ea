//! Executing `neff_barrier_config`s on the software device: the device barrier (4 steps ×
//! 4 slots, docs/contract/device.md §7.1) and the host barrier (§7.2), over the machine's EVT_SEM blocks
//! (§5). The configs are [`crate::isa::barrier_cfg`] values decoded from their 0x128 bytes; the
//! lowering that builds them (`lower::barrier_cfg`) documents the protocol they encode.
//!
//! # What a TOP_SP does with its device view
//!
//! It walks steps 0..3 and in each step its active slots 0..3 (a slot is active when its address
//! or target is non-zero). Choice (docs/contract/device.md §7.1 is \[M\] flow), decided per slot from the
//! address alone:
//! * a semaphore of another TOP_SP → **ENTRY**: a 4-byte store of 1 to its INC window (the stored
//!   READ address + 0x800, §9.2), routed by the memory like the DMA's broadcast write; target 0;
//! * a semaphore of the TOP_SP itself → **EXIT**: `wait_ge_and_dec(sem, target)`, then
//!   `(target − 1)`, …, `(1)` (§5.3): it blocks until `sem ≥ target` and consumes exactly
//!   `target`, so a barrier leaves every semaphore where it found it.
//!
//! Only the `{1,4,4,1}` entries are walked; an active slot outside them, a non-READ-window or
//! unrouteable address, an EXIT with target 0, an ENTRY with a target, and any non-zero DMA field
//! (`m2s_val`/`s2m_val`, `dma_sync_sema`, the descriptor ring, `dma_apb_bcast`,
//! `start_network_proxy`) are rejected as [`ErrorKind::Invalid`] before anything runs: our ENTRY
//! is a direct semaphore store, and a config that asks for the DMA path is refused rather than
//! half-executed.
//!
//! # Host barrier (§7.2)
//!
//! A view with `barrier_start != 0` is a rank leader's: both addresses must be its own. The host
//! arms every leader (+1 on `barrier_start`); the leader waits for it (≥ 1, consume 1), then adds
//! 1 to its `barrier_done` once per party waiting on it — the host, and every non-leader whose view
//! names that semaphore (Choice: the count is not in the 16 bytes; the firmware knows its VNC's
//! TOP_SPs, here it is counted from the configs of the run). The host and the non-leaders wait
//! `barrier_done ≥ 1` and consume 1; once the host has it, the leader's
//! `neff_ctx.barrier_completed` (docs/contract/carrier.md §3.3, +0x5C) is 1 ([`write_barrier_completed`]).
//!
//! # Scheduling
//!
//! One deterministic single-threaded scheduler: a ready queue in configuration order; an agent
//! runs until it blocks on a semaphore or finishes; a blocked agent is parked on that semaphore
//! and is run again only when a store reaches it — no polling, no busy-waiting. When the queue is
//! empty and an agent has not finished, the barrier hangs: [`ErrorKind::CollectivesHang`]
//! (`NRT_EXEC_HW_ERR_COLLECTIVES`) with a report naming per blocked TOP_SP the step and slot, the
//! semaphore (chip, TOP_SP, index, READ address), its value and the remaining target, which
//! running TOP_SPs still owe it a signal, and every TOP_SP that a config signals but that runs no
//! barrier (the missing participant).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write as _;

use super::executor::Machine;
use super::memory::Touched;
use super::sema::BlockId;
use crate::error::{Error, ErrorKind, Result};
use crate::isa::barrier_cfg::{BarrierConfig, DeviceBarrier, HostBarrier, StepShape};
use crate::isa::evtsem::{SemAddr, SemWindow};
use crate::ncfw::ctx_layout::{runtime_neff, CtxLayout};

/// What a completed barrier did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BarrierReport {
    /// TOP_SPs that ran it.
    pub topsps: usize,
    /// Semaphore increments stored (ENTRY, host arm, done).
    pub signals: u64,
    /// `wait_ge_and_dec` operations that passed.
    pub decrements: u64,
    /// Times a blocked agent was woken by a store to its semaphore.
    pub wakeups: u64,
}

/// What a completed host barrier did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostBarrierReport {
    /// The run.
    pub run: BarrierReport,
    /// Per rank leader `(chip, TOP_SP, barrier_completed)`, as the host saw it.
    pub barrier_completed: Vec<(u8, u8, u8)>,
}

/// A semaphore: `(chip, device TOP_SP, index)`.
type Key = (u8, u8, u8);

#[derive(Debug, Clone, Copy)]
enum Kind {
    /// +`by` through the INC window.
    Inc { by: u32 },
    /// `wait_ge_and_dec` from `target` down to 1.
    Wait { target: u32 },
}

#[derive(Debug, Clone, Copy)]
struct Op {
    kind: Kind,
    /// Semaphore, and the READ address as stored (issued by the agent's chip).
    key: Key,
    read: u64,
    /// `(step, slot)` of the device view; `None` for host-barrier operations.
    at: Option<(usize, usize)>,
    /// The host leader whose `barrier_completed` this wait sets.
    completes: Option<usize>,
}

#[derive(Debug)]
struct Agent {
    /// `None`: the host.
    who: Option<(u8, u8)>,
    ops: Vec<Op>,
    pc: usize,
    /// Decrements still due by the current wait.
    left: u32,
}

impl Agent {
    fn name(&self) -> String {
        match self.who {
            Some((c, t)) => format!("chip {c} TOP_SP {t}"),
            None => "host".into(),
        }
    }
    fn issuer(&self, op: &Op) -> u8 {
        self.who.map_or(op.key.0, |w| w.0)
    }
}

/// Resolve a READ-window semaphore address stored in a config of `(chip, topsp)`.
fn resolve(m: &Machine, chip: u8, topsp: u8, addr: u64, what: &str) -> Result<Key> {
    let bad = |why: String| {
        Error::invalid(format!(
            "barrier config of chip {chip} TOP_SP {topsp}: {what} {addr:#x} {why} (docs/contract/device.md §9.2)"
        ))
    };
    let (c, on) = m.mem.route(chip, addr).map_err(|e| bad(e.to_string()))?;
    match SemAddr::decode(on) {
        Some(s) if s.window == SemWindow::Read => Ok((c, s.topsp, s.idx)),
        _ => Err(bad("is not a TOP_SP semaphore READ-window address".into())),
    }
}

fn check_no_dma(d: &DeviceBarrier, chip: u8, topsp: u8) -> Result<()> {
    let dma = d.steps.iter().any(|s| s.m2s_val != 0 || s.s2m_val != 0)
        || d.dma_sync_sema != [0; 4]
        || d.dma_apb_bcast != Default::default()
        || d.start_network_proxy != 0
        || d.dma_sync_sema_value != 0
        || (d.tdrbp_low, d.tdrbp_high, d.desc_count, d.total_desc_n) != (0, 0, 0, 0)
        || d.dma_engines_bitmap != 0
        || d.queue_id != 0;
    if dma {
        return Err(Error::invalid(format!(
            "barrier config of chip {chip} TOP_SP {topsp}: DMA/descriptor-ring fields are set; \
             the software device performs ENTRY as direct semaphore stores and does not model \
             the barrier descriptor ring"
        )));
    }
    Ok(())
}

/// The operations of one device view (module doc).
fn device_ops(m: &Machine, chip: u8, topsp: u8, d: &DeviceBarrier) -> Result<Vec<Op>> {
    check_no_dma(d, chip, topsp)?;
    let shape = StepShape::STANDARD;
    let mut ops = Vec::new();
    for (s, st) in d.steps.iter().enumerate() {
        for (k, addr, target) in st.active() {
            let what = format!("step {s} slot {k} barrier_sema");
            let fail = |why: &str| {
                Error::invalid(format!(
                    "barrier config of chip {chip} TOP_SP {topsp}: {what} {addr:#x} target \
                     {target}: {why} (docs/contract/device.md §7.1)"
                ))
            };
            if k >= shape.slots(s) {
                return Err(fail("slot beyond the {1,4,4,1} step shape"));
            }
            if addr == 0 {
                return Err(fail("a target without a semaphore"));
            }
            let key = resolve(m, chip, topsp, addr, &what)?;
            let own = (key.0, key.1) == (chip, topsp);
            let kind = match (own, target) {
                (true, 0) => return Err(fail("EXIT on an own semaphore with target 0")),
                (true, t) if t > i32::MAX as u32 => return Err(fail("target above i32::MAX")),
                (true, t) => Kind::Wait { target: t },
                (false, 0) => Kind::Inc { by: 1 },
                (false, _) => return Err(fail("ENTRY on a peer's semaphore carries a target")),
            };
            ops.push(Op {
                kind,
                key,
                read: addr,
                at: Some((s, k)),
                completes: None,
            });
        }
    }
    Ok(ops)
}

fn check_unique(cfgs: &[(u8, u8, BarrierConfig)]) -> Result<()> {
    let mut seen = BTreeSet::new();
    for &(c, t, _) in cfgs {
        if !seen.insert((c, t)) {
            return Err(Error::invalid(format!(
                "barrier: chip {c} TOP_SP {t} has two configs"
            )));
        }
    }
    Ok(())
}

/// Run the device view of every `(chip, device TOP_SP, config)` on `machine` (module doc).
pub fn run_device_barrier(
    machine: &mut Machine,
    cfgs: &[(u8, u8, BarrierConfig)],
) -> Result<BarrierReport> {
    check_unique(cfgs)?;
    let mut agents = Vec::new();
    for &(chip, topsp, ref cfg) in cfgs {
        let BarrierConfig::Device(d) = cfg else {
            return Err(Error::invalid(format!(
                "barrier config of chip {chip} TOP_SP {topsp}: execute_device_barrier is 0 (the \
                 host view is live, docs/contract/carrier.md §3.2.8)"
            )));
        };
        agents.push(Agent {
            who: Some((chip, topsp)),
            ops: device_ops(machine, chip, topsp, d)?,
            pc: 0,
            left: 0,
        });
    }
    let (report, _) = schedule(machine, &mut agents, 0)?;
    Ok(report)
}

/// Run the host barrier over the host views of `cfgs` (module doc).
pub fn run_host_barrier(
    machine: &mut Machine,
    cfgs: &[(u8, u8, BarrierConfig)],
) -> Result<HostBarrierReport> {
    check_unique(cfgs)?;
    let mut views: Vec<(u8, u8, HostBarrier, Key)> = Vec::new();
    for &(chip, topsp, ref cfg) in cfgs {
        let BarrierConfig::Host(h) = *cfg else {
            return Err(Error::invalid(format!(
                "barrier config of chip {chip} TOP_SP {topsp}: execute_device_barrier is 1 (the \
                 device view is live, docs/contract/carrier.md §3.2.8)"
            )));
        };
        let done = resolve(machine, chip, topsp, h.barrier_done, "barrier_done")?;
        views.push((chip, topsp, h, done));
    }
    let mut agents = Vec::new();
    let mut host = Vec::new();
    let mut host_waits = Vec::new();
    let mut leaders = Vec::new();
    for &(chip, topsp, h, done) in &views {
        let own_done = (done.0, done.1) == (chip, topsp);
        let op = |kind, key, read| Op {
            kind,
            key,
            read,
            at: None,
            completes: None,
        };
        if h.barrier_start == 0 {
            if own_done {
                return Err(Error::invalid(format!(
                    "host barrier of chip {chip} TOP_SP {topsp}: barrier_done is its own \
                     semaphore but nobody arms it (barrier_start is 0)"
                )));
            }
            let wait = op(Kind::Wait { target: 1 }, done, h.barrier_done);
            agents.push((Some((chip, topsp)), vec![wait]));
            continue;
        }
        let start = resolve(machine, chip, topsp, h.barrier_start, "barrier_start")?;
        if (start.0, start.1) != (chip, topsp) || !own_done || start == done {
            return Err(Error::invalid(format!(
                "host barrier of chip {chip} TOP_SP {topsp}: a leader's barrier_start and \
                 barrier_done must be two of its own semaphores"
            )));
        }
        let waiters = views
            .iter()
            .filter(|v| v.2.barrier_start == 0 && v.3 == done);
        let by = 1 + waiters.count() as u32;
        let ops = vec![
            op(Kind::Wait { target: 1 }, start, h.barrier_start),
            op(Kind::Inc { by }, done, h.barrier_done),
        ];
        agents.push((Some((chip, topsp)), ops));
        host.push(op(Kind::Inc { by: 1 }, start, h.barrier_start));
        let mut w = op(Kind::Wait { target: 1 }, done, h.barrier_done);
        w.completes = Some(leaders.len());
        host_waits.push(w);
        leaders.push((chip, topsp));
    }
    host.extend(host_waits);
    let mut all: Vec<Agent> = vec![Agent {
        who: None,
        ops: host,
        pc: 0,
        left: 0,
    }];
    all.extend(agents.into_iter().map(|(who, ops)| Agent {
        who,
        ops,
        pc: 0,
        left: 0,
    }));
    let (run, completed) = schedule(machine, &mut all, leaders.len())?;
    let barrier_completed = leaders
        .iter()
        .zip(completed)
        .map(|(&(c, t), v)| (c, t, v))
        .collect();
    Ok(HostBarrierReport {
        run,
        barrier_completed,
    })
}

/// Set `neff_ctx.barrier_completed` (u8 at runtime NEFF context + 0x5C, docs/contract/carrier.md §3.3) in an
/// NCFW context image of `layout`.
pub fn write_barrier_completed(ctx: &mut [u8], layout: &CtxLayout, value: u8) -> Result<()> {
    let at = layout.neff_off + runtime_neff::BARRIER_COMPLETED;
    let len = ctx.len();
    let b = ctx.get_mut(at).ok_or_else(|| {
        Error::invalid(format!(
            "NCFW context of {len} bytes has no barrier_completed byte at {at:#x}"
        ))
    })?;
    *b = value;
    Ok(())
}

/// Run `agents` to completion or to a hang (module doc, "Scheduling"); returns the report and
/// the `barrier_completed` byte of each of `leaders` host leaders.
fn schedule(
    m: &mut Machine,
    agents: &mut [Agent],
    leaders: usize,
) -> Result<(BarrierReport, Vec<u8>)> {
    let mut rep = BarrierReport {
        topsps: agents.iter().filter(|a| a.who.is_some()).count(),
        ..Default::default()
    };
    let mut completed = vec![0u8; leaders];
    let mut ready: VecDeque<usize> = (0..agents.len()).collect();
    let mut parked: BTreeMap<Key, Vec<usize>> = BTreeMap::new();
    while let Some(i) = ready.pop_front() {
        let a = &mut agents[i];
        while let Some(op) = a.ops.get(a.pc).copied() {
            match op.kind {
                Kind::Inc { by } => {
                    let inc = op.read + (SemWindow::Inc.offset() - SemWindow::Read.offset());
                    let issuer = a.issuer(&op);
                    for _ in 0..by {
                        let t = m.mem.write(issuer, inc, &1u32.to_le_bytes())?;
                        rep.signals += 1;
                        if let Touched::Sem(t) = t {
                            let BlockId::TopSp(sp) = t.block else {
                                continue;
                            };
                            for w in parked.remove(&(t.chip, sp, t.first)).unwrap_or_default() {
                                rep.wakeups += 1;
                                ready.push_back(w);
                            }
                        }
                    }
                    a.pc += 1;
                }
                Kind::Wait { target } => {
                    if a.left == 0 {
                        a.left = target;
                    }
                    let (chip, sp, idx) = op.key;
                    let block = m
                        .mem
                        .sem_block_mut(chip, BlockId::TopSp(sp))
                        .ok_or_else(|| Error::invalid(format!("no chip {chip} TOP_SP {sp}")))?;
                    while a.left > 0 && block.wait_ge_and_dec(idx, a.left as i32) {
                        a.left -= 1;
                        rep.decrements += 1;
                    }
                    if a.left > 0 {
                        parked.entry(op.key).or_default().push(i);
                        break;
                    }
                    if let Some(l) = op.completes {
                        completed[l] = 1;
                    }
                    a.pc += 1;
                }
            }
        }
    }
    if agents.iter().all(|a| a.pc == a.ops.len()) {
        return Ok((rep, completed));
    }
    Err(Error::new(
        ErrorKind::CollectivesHang,
        hang_report(m, agents),
    ))
}

fn at_text(op: &Op) -> String {
    match op.at {
        Some((s, k)) => format!("step {s} slot {k}"),
        None => "host barrier".into(),
    }
}

/// The diagnosis of a barrier that cannot finish (module doc).
fn hang_report(m: &Machine, agents: &[Agent]) -> String {
    let stuck = agents.iter().filter(|a| a.pc < a.ops.len()).count();
    let mut s = format!(
        "barrier hang (NRT_EXEC_HW_ERR_COLLECTIVES): {stuck} of {} agents cannot finish",
        agents.len()
    );
    for a in agents.iter().filter(|a| a.pc < a.ops.len()) {
        let op = &a.ops[a.pc];
        let (chip, sp, idx) = op.key;
        let value = m
            .mem
            .sems(chip)
            .and_then(|c| c.block(BlockId::TopSp(sp)))
            .map_or(0, |b| b.value(idx));
        let _ = write!(
            s,
            "\n* {}: {} waits semaphore {idx} of chip {chip} TOP_SP {sp} (READ {:#x}) >= {}, \
             value {value}",
            a.name(),
            at_text(op),
            op.read,
            a.left
        );
        let owed: Vec<String> = agents
            .iter()
            .flat_map(|b| b.ops[b.pc.min(b.ops.len())..].iter().map(move |o| (b, o)))
            .filter(|(_, o)| matches!(o.kind, Kind::Inc { .. }) && o.key == op.key)
            .map(|(b, o)| format!("{} ({})", b.name(), at_text(o)))
            .collect();
        if owed.is_empty() {
            s.push_str("; no running TOP_SP will signal it");
        } else {
            let _ = write!(s, "; still to signal it: {}", owed.join(", "));
        }
    }
    let running: BTreeSet<(u8, u8)> = agents.iter().filter_map(|a| a.who).collect();
    let mut missing: BTreeMap<(u8, u8), Vec<String>> = BTreeMap::new();
    for a in agents {
        for o in &a.ops {
            if matches!(o.kind, Kind::Inc { .. }) && !running.contains(&(o.key.0, o.key.1)) {
                let by = format!("semaphore {} by {} {}", o.key.2, a.name(), at_text(o));
                missing.entry((o.key.0, o.key.1)).or_default().push(by);
            }
        }
    }
    for ((c, t), by) in missing {
        let _ = write!(
            s,
            "\n* missing participant: chip {c} TOP_SP {t} runs no barrier, but is signalled \
             ({})",
            by.join("; ")
        );
    }
    s
}

#[cfg(test)]
mod tests;

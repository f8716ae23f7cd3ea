//! The structural rules and the deterministic scheduler (docs/design.md §2 item 2: verify before running).
//!
//! Scheduling (program.rs semantics, the device's order): every rank runs one **lane** per TOP_SP
//! it uses ([`lanes`](super::lanes)): the lane runs its tapes one after the other — entry by entry,
//! the entries that TOP_SP drives, and inside an entry in channel order — and lanes and ranks run
//! concurrently. Entries are not a rank-wide barrier: the only order between lanes besides
//! semaphores is the reporter's completion wait at the end of an entry with several TOP_SPs
//! (docs/contract/lowering.md §6.3). A step runs when its wait holds (`sem >= target`, then
//! `sem -= consume`; ring steps consume 1, docs/contract/device.md §5.3; mesh events consume
//! `wait_val`, docs/contract/lowering.md §4.6); then its transfers, in order; then its signals.
//!
//! The scheduler is greedy: in each round it visits ranks in order and runs every lane until
//! it blocks. Running ahead as far as the semaphores allow is a legal interleaving, and the
//! one most likely to expose a missing flow-control wait (a sender that overwrites a slot its
//! receiver has not read yet shows up as a wrong contribution) or a missing order between
//! TOP_SPs (a lane that reads what another lane has not written yet is an uninitialised read
//! or a wrong contribution). It does not prove freedom from every data race: that would need
//! happens-before tracking per element run, which this verifier does not do.
//!
//! Causality: every lane carries the set of ranks whose start it depends on ("rank reached"
//! bits). A signal adds the lane's set to the semaphore's; a satisfied wait adds the
//! semaphore's set to the lane's (over-approximate: every increment seen so far, which in this
//! schedule did happen before the wait). The reporter's completion wait joins the other
//! lanes' sets into the reporter's. The barrier rule needs every rank's final set (all its
//! lanes joined) to be the whole group.

use std::collections::HashMap;

use crate::isa::slot::CHAIN_SEM;
use crate::lower::program::{Buf, Loc, Program, Sem, SignalKind, Step, Transfer};
use crate::lower::request::CollectiveOp;
use crate::lower::verify::error::{At, Blocked, VerifyError};
use crate::lower::verify::lanes::{reporter_waits, RankLanes};
use crate::lower::verify::symbolic::{Memory, Piece, Writer};
use crate::lower::verify::VerifyReport;

/// Name the step `(rank, entry, tape, step)` of `p`.
pub(crate) fn at(p: &Program, rank: u32, entry: usize, tape: usize, step: usize) -> At {
    let e = &p.ranks[rank as usize].entries[entry];
    let t = &e.tapes[tape];
    let s = &t.steps[step];
    At {
        rank,
        entry,
        leg: e.leg.clone(),
        channel: t.channel,
        step,
        primitive: s.primitive,
        chunk: s.chunk,
    }
}

/// Every step of `p` as `(rank, entry, tape, step, &Step)`.
fn all_steps(p: &Program) -> impl Iterator<Item = (u32, usize, usize, usize, &Step)> {
    p.ranks.iter().enumerate().flat_map(|(r, rp)| {
        rp.entries.iter().enumerate().flat_map(move |(e, en)| {
            en.tapes.iter().enumerate().flat_map(move |(t, tp)| {
                tp.steps
                    .iter()
                    .enumerate()
                    .map(move |(s, st)| (r as u32, e, t, s, st))
            })
        })
    })
}

/// Elements of `(rank, buf)`: in place, input and output are one storage of the larger size.
fn buffer_elems(p: &Program, rank: u32, buf: Buf) -> u64 {
    let req = &p.request;
    let (i, o) = (req.input_elems(), req.output_elems());
    match buf {
        Buf::Input if req.in_place => i.max(o),
        Buf::Output if req.in_place => i.max(o),
        Buf::Input => i,
        Buf::Output => o,
        Buf::Scratch => p.ranks[rank as usize].scratch_elems,
    }
}

/// True if the op reduces (only these may contain reduce steps).
fn is_reducing(op: CollectiveOp) -> bool {
    matches!(
        op,
        CollectiveOp::AllReduce | CollectiveOp::ReduceScatter | CollectiveOp::PermuteReduceImplicit
    )
}

/// The static rules: shape, waits on one's own semaphores, bounds, reduce rules, overlaps.
pub(crate) fn check_structure(p: &Program) -> Result<(), VerifyError> {
    let req = &p.request;
    let n = req.rank_n();
    if p.ranks.len() != n as usize {
        return Err(VerifyError::Shape(format!(
            "{} rank programs for a group of {n}",
            p.ranks.len()
        )));
    }
    if let Some((i, rp)) = p
        .ranks
        .iter()
        .enumerate()
        .find(|(i, rp)| rp.rank as usize != *i)
    {
        return Err(VerifyError::Shape(format!(
            "rank program {i} says it is rank {}",
            rp.rank
        )));
    }
    let reducing = is_reducing(req.op);
    let same_store = |a: Loc, b: Loc| {
        a.rank == b.rank
            && (a.buf == b.buf || (req.in_place && a.buf != Buf::Scratch && b.buf != Buf::Scratch))
    };
    let overlaps = |a: Loc, b: Loc, len: u64| {
        len > 0 && same_store(a, b) && a.offset != b.offset && a.offset.abs_diff(b.offset) < len
    };
    for (r, e, t, s, step) in all_steps(p) {
        let here = || at(p, r, e, t, s);
        let bad = |problem: String| VerifyError::BadReduce {
            at: here(),
            problem,
        };
        if !reducing && (step.primitive.is_reduce() || step.reduction.is_some()) {
            return Err(bad(format!("reduce step in a copy-only op ({:?})", req.op)));
        }
        if let Some((op, _)) = step.reduction {
            if Some(op) != req.reduce {
                return Err(bad(format!(
                    "step reduces with {op:?} but the request's op is {:?}",
                    req.reduce
                )));
            }
        }
        if let Some(w) = step.wait {
            if w.sem.rank >= n {
                return Err(VerifyError::NoSuchRank {
                    at: here(),
                    sem: w.sem,
                });
            }
            if w.sem.rank != r {
                return Err(VerifyError::ForeignWait {
                    at: here(),
                    sem: w.sem,
                });
            }
        }
        if let Some(sig) = step.signals.iter().find(|g| g.sem.rank >= n) {
            return Err(VerifyError::NoSuchRank {
                at: here(),
                sem: sig.sem,
            });
        }
        for (k, tr) in step.transfers.iter().enumerate() {
            let len = tr.len();
            let locs: Vec<Loc> = match tr {
                Transfer::Copy { src, dst, .. } => vec![*src, *dst],
                Transfer::Reduce { srcs, dst, .. } => {
                    srcs.iter().copied().chain(std::iter::once(*dst)).collect()
                }
            };
            for loc in &locs {
                if loc.rank >= n {
                    return Err(VerifyError::Shape(format!(
                        "{}: transfer {k} names rank {} outside the group of {n}",
                        here(),
                        loc.rank
                    )));
                }
                let size = buffer_elems(p, loc.rank, loc.buf);
                if loc.offset.checked_add(len).is_none_or(|end| end > size) {
                    return Err(VerifyError::OutOfBounds {
                        at: here(),
                        loc: *loc,
                        len,
                        buffer_elems: size,
                    });
                }
            }
            match tr {
                Transfer::Copy { src, dst, len } => {
                    if overlaps(*src, *dst, *len) {
                        return Err(VerifyError::Overlap {
                            at: here(),
                            transfer: k,
                        });
                    }
                }
                Transfer::Reduce {
                    op, srcs, dst, len, ..
                } => {
                    if !reducing {
                        return Err(bad(format!("reduce in a copy-only op ({:?})", req.op)));
                    }
                    if !(2..=32).contains(&srcs.len()) {
                        return Err(bad(format!(
                            "reduce with {} sources (a CCE reduce takes 2..=32)",
                            srcs.len()
                        )));
                    }
                    if Some(*op) != req.reduce {
                        return Err(bad(format!(
                            "reduce with {op:?} but the request's op is {:?}",
                            req.reduce
                        )));
                    }
                    if srcs.iter().any(|s| overlaps(*s, *dst, *len)) {
                        return Err(VerifyError::Overlap {
                            at: here(),
                            transfer: k,
                        });
                    }
                }
            }
        }
    }
    Ok(())
}

/// Set `dst |= src` on rank bitsets.
fn join(dst: &mut Vec<u64>, src: &[u64]) {
    if dst.len() < src.len() {
        dst.resize(src.len(), 0);
    }
    for (d, s) in dst.iter_mut().zip(src) {
        *d |= s;
    }
}

#[derive(Debug, Default)]
struct SemState {
    value: u64,
    waited: bool,
    nonlocal: u64,
    know: Vec<u64>,
}

/// One symbolic execution of a program.
#[derive(Debug)]
pub(crate) struct Run<'p> {
    p: &'p Program,
    pub mem: Memory,
    sems: HashMap<Sem, SemState>,
    ranks: Vec<RankLanes>,
    pub report: VerifyReport,
    elem_bytes: u64,
    buf: Vec<Piece>,
}

impl<'p> Run<'p> {
    /// Fresh state: inputs hold themselves, everything else is uninitialised.
    pub fn new(p: &'p Program) -> Run<'p> {
        let req = &p.request;
        let n = req.rank_n();
        let words = (n as usize).div_ceil(64);
        let ranks = (0..n)
            .map(|r| {
                let mut know = vec![0u64; words];
                know[r as usize / 64] |= 1u64 << (r % 64);
                RankLanes::new(&p.ranks[r as usize], &know)
            })
            .collect();
        Run {
            p,
            mem: Memory::with_input_bases(n, req.input_elems(), req.in_place, |q| {
                crate::lower::verify::expect::in_place_bases(req, q).0
            }),
            sems: HashMap::new(),
            ranks,
            report: VerifyReport {
                ranks: n,
                entries: p.ranks.iter().map(|r| r.entries.len()).sum(),
                steps: 0,
                transfers: 0,
                bytes_per_rank: vec![0; n as usize],
                max_sem_value: 0,
                rounds: 0,
            },
            elem_bytes: req.dtype.size_bytes().unwrap_or(0) as u64,
            buf: Vec::new(),
        }
    }

    /// Name the step that wrote a segment.
    pub fn at_of(&self, w: Writer) -> Option<At> {
        (w != Writer::INITIAL).then(|| {
            at(
                self.p,
                w.rank,
                w.entry as usize,
                w.tape as usize,
                w.step as usize,
            )
        })
    }

    /// Run step `(r, e, t, s)` if its wait holds; false if blocked.
    fn step(
        &mut self,
        r: u32,
        e: usize,
        t: usize,
        s: usize,
        know: &mut Vec<u64>,
    ) -> Result<bool, VerifyError> {
        let p = self.p;
        let step = &p.ranks[r as usize].entries[e].tapes[t].steps[s];
        if let Some(w) = step.wait {
            let st = self.sems.entry(w.sem).or_default();
            st.waited = true;
            if st.value < u64::from(w.target) {
                return Ok(false);
            }
            if st.value < u64::from(w.consume) {
                return Err(VerifyError::Underflow {
                    at: at(p, r, e, t, s),
                    sem: w.sem,
                    value: st.value,
                    consume: w.consume,
                });
            }
            st.value -= u64::from(w.consume);
            join(know, &st.know);
        }
        let writer = Writer {
            rank: r,
            entry: e as u32,
            tape: t as u32,
            step: s as u32,
        };
        for tr in &step.transfers {
            let mem = &mut self.mem;
            let uninit = |l: Loc, g: crate::lower::verify::symbolic::Gap| VerifyError::UninitRead {
                at: at(p, r, e, t, s),
                rank: l.rank,
                buf: l.buf,
                start: g.start,
                end: g.end,
            };
            match tr {
                Transfer::Copy { src, dst, len } => {
                    let (a, b) = (mem.store(src.rank, src.buf), mem.store(dst.rank, dst.buf));
                    mem.copy(
                        (a, src.offset),
                        (b, dst.offset),
                        *len,
                        writer,
                        &mut self.buf,
                    )
                    .map_err(|g| uninit(*src, g))?;
                }
                Transfer::Reduce { srcs, dst, len, .. } => {
                    let ss: Vec<(usize, u64)> = srcs
                        .iter()
                        .map(|l| (mem.store(l.rank, l.buf), l.offset))
                        .collect();
                    let d = (mem.store(dst.rank, dst.buf), dst.offset);
                    mem.reduce(&ss, d, *len, writer)
                        .map_err(|(j, g)| uninit(srcs[j], g))?;
                }
            }
            self.report.transfers += 1;
            self.report.bytes_per_rank[r as usize] += tr.len() * self.elem_bytes;
        }
        for sig in &step.signals {
            let st = self.sems.entry(sig.sem).or_default();
            st.value += u64::from(sig.amount);
            if sig.kind != SignalKind::Local {
                st.nonlocal += u64::from(sig.amount);
            }
            join(&mut st.know, know);
            self.report.max_sem_value = self.report.max_sem_value.max(st.value);
        }
        self.report.steps += 1;
        Ok(true)
    }

    /// Run every lane of rank `r` until it blocks; true if anything ran.
    fn advance(&mut self, r: u32) -> Result<bool, VerifyError> {
        let p = self.p;
        let entries = &p.ranks[r as usize].entries;
        let mut rs = std::mem::take(&mut self.ranks[r as usize]);
        let mut progress = false;
        let result = (|| {
            for l in 0..rs.lanes.len() {
                loop {
                    if let Some(e) = rs.lanes[l].report {
                        if !rs.unfinished_peers(&entries[e], e, l).is_empty() {
                            break;
                        }
                        let parts = crate::lower::spad::participants(&entries[e]);
                        for o in 0..rs.lanes.len() {
                            if o != l && parts.contains(&rs.lanes[o].topsp) {
                                let k = rs.lanes[o].know.clone();
                                join(&mut rs.lanes[l].know, &k);
                            }
                        }
                        rs.lanes[l].report = None;
                        progress = true;
                    }
                    let lane = &mut rs.lanes[l];
                    let Some(&(e, t)) = lane.items.get(lane.pos) else {
                        break;
                    };
                    let tape = &entries[e].tapes[t];
                    while lane.pc < tape.steps.len() {
                        if !self.step(r, e, t, lane.pc, &mut lane.know)? {
                            break;
                        }
                        lane.pc += 1;
                        progress = true;
                    }
                    if lane.pc < tape.steps.len() {
                        break;
                    }
                    lane.pos += 1;
                    lane.pc = 0;
                    progress = true;
                    if lane.entry() != Some(e) && reporter_waits(&entries[e], lane.topsp) {
                        lane.report = Some(e);
                    }
                }
            }
            Ok(())
        })();
        self.ranks[r as usize] = rs;
        result.map(|()| progress)
    }

    fn finished(&self, r: u32) -> bool {
        self.ranks[r as usize].done()
    }

    /// Run every rank to completion, or report the deadlock.
    pub fn run(&mut self) -> Result<(), VerifyError> {
        let n = self.p.request.rank_n();
        loop {
            self.report.rounds += 1;
            let mut progress = false;
            for r in 0..n {
                progress |= self.advance(r)?;
            }
            if (0..n).all(|r| self.finished(r)) {
                return Ok(());
            }
            if !progress {
                return Err(self.deadlock());
            }
        }
    }

    /// True if step `(q, e, t, s)` has not run yet.
    fn pending(&self, q: u32, e: usize, t: usize, s: usize) -> bool {
        self.ranks[q as usize].pending(e, t, s)
    }

    /// Describe every blocked tape, with the signals that could still release it.
    fn deadlock(&self) -> VerifyError {
        let p = self.p;
        let mut future: HashMap<Sem, Vec<At>> = HashMap::new();
        for (q, e, t, s, step) in all_steps(p) {
            if !self.pending(q, e, t, s) {
                continue;
            }
            let mut sems: Vec<Sem> = step.signals.iter().map(|g| g.sem).collect();
            sems.sort_unstable();
            sems.dedup();
            for sem in sems {
                future.entry(sem).or_default().push(at(p, q, e, t, s));
            }
        }
        let mut blocked = Vec::new();
        for (r, rs) in self.ranks.iter().enumerate() {
            let entries = &p.ranks[r].entries;
            for (l, lane) in rs.lanes.iter().enumerate() {
                if let Some(e) = lane.report {
                    blocked.extend(self.reporter_blocked(r as u32, rs, l, e));
                    continue;
                }
                let Some(&(e, t)) = lane.items.get(lane.pos) else {
                    continue;
                };
                let Some(step) = entries[e].tapes[t].steps.get(lane.pc) else {
                    continue;
                };
                let Some(w) = step.wait else { continue };
                blocked.push(Blocked {
                    at: at(p, r as u32, e, t, lane.pc),
                    sem: w.sem,
                    value: self.sems.get(&w.sem).map_or(0, |s| s.value),
                    target: w.target,
                    pending: future.get(&w.sem).cloned().unwrap_or_default(),
                });
            }
        }
        VerifyError::Deadlock { blocked }
    }

    /// A reporter lane stuck in its completion wait of entry `e`, named by its last step of
    /// that entry and the completion semaphore (`CHAIN_SEM`, counted as lanes that passed
    /// `e`); pending: where each unfinished peer lane stands. `None` if it has no step to name.
    fn reporter_blocked(&self, r: u32, rs: &RankLanes, l: usize, e: usize) -> Option<Blocked> {
        let p = self.p;
        let entry = &p.ranks[r as usize].entries[e];
        let lane = &rs.lanes[l];
        let (t, s) = lane
            .items
            .iter()
            .rev()
            .filter(|&&(ei, t)| ei == e && !entry.tapes[t].steps.is_empty())
            .map(|&(_, t)| (t, entry.tapes[t].steps.len() - 1))
            .next()?;
        let waiting = rs.unfinished_peers(entry, e, l);
        let peers = crate::lower::spad::participants(entry).len() as u32 - 1;
        let pending = waiting
            .iter()
            .filter_map(|&o| {
                let ol = &rs.lanes[o];
                let &(oe, ot) = ol.items.get(ol.pos)?;
                let os = ol.pc.min(
                    p.ranks[r as usize].entries[oe].tapes[ot]
                        .steps
                        .len()
                        .checked_sub(1)?,
                );
                Some(at(p, r, oe, ot, os))
            })
            .collect();
        Some(Blocked {
            at: at(p, r, e, t, s),
            sem: Sem {
                rank: r,
                topsp: lane.topsp,
                id: CHAIN_SEM,
            },
            value: u64::from(peers) - waiting.len() as u64,
            target: peers,
            pending,
        })
    }

    /// Every waited-on semaphore must be back at 0; a Remote/Credit increment nobody waits for
    /// is an error too (Local increments nobody waits on are exempt).
    pub fn check_semaphores(&self) -> Result<(), VerifyError> {
        let mut sems: Vec<(&Sem, &SemState)> = self.sems.iter().collect();
        sems.sort_by_key(|(s, _)| **s);
        for (sem, st) in sems {
            let bad = if st.waited {
                st.value != 0
            } else {
                st.nonlocal > 0
            };
            if bad {
                let signallers = all_steps(self.p)
                    .filter(|(.., step)| step.signals.iter().any(|g| g.sem == *sem))
                    .map(|(q, e, t, s, _)| at(self.p, q, e, t, s))
                    .collect();
                return Err(VerifyError::Leftover {
                    sem: *sem,
                    value: if st.waited { st.value } else { st.nonlocal },
                    waited: st.waited,
                    signallers,
                });
            }
        }
        Ok(())
    }

    /// Barrier: no rank may complete before every rank has started.
    pub fn check_barrier(&self) -> Result<(), VerifyError> {
        if self.p.request.op != CollectiveOp::Barrier {
            return Ok(());
        }
        let n = self.p.request.rank_n();
        for (r, rs) in self.ranks.iter().enumerate() {
            let know = rs.know();
            let missing: Vec<u32> = (0..n)
                .filter(|&q| {
                    know.get(q as usize / 64)
                        .is_none_or(|w| w & (1u64 << (q % 64)) == 0)
                })
                .collect();
            if !missing.is_empty() {
                return Err(VerifyError::Barrier {
                    rank: r as u32,
                    missing,
                });
            }
        }
        Ok(())
    }
}

//! Test-only concrete evaluator of step programs (not the verifier): integer-valued buffers,
//! every step executed as the IR module doc says (wait: block until `sem >= target`, then
//! `sem -= consume`; transfers in order; then signals), tapes of one entry interleaved by a
//! chosen schedule, entries of a rank one after another, deadlock detected when no tape can
//! move. Plus direct oracles for the collectives, so composers are tested by their results.

use std::collections::{BTreeMap, HashMap};

use crate::isa::enums::Dtype;
use crate::lower::compose::{ComposedLeg, Leg, SemPlan, Window};
use crate::lower::program::{Buf, Entry, Loc, Sem, Transfer};
use crate::lower::request::{CollectiveOp, CollectiveRequest, ReduceOp};

/// Value a buffer holds before anyone writes it: reading it shows up in the result.
pub const POISON: i64 = -7_777_777;

/// How runnable tapes are interleaved.
#[derive(Debug, Clone, Copy)]
pub enum Sched {
    /// One step per tape per round, ranks in order.
    RoundRobin,
    /// One step per tape per round, ranks in reverse order.
    Reverse,
    /// Pseudo-random tape each time, run until it blocks (lets one rank run far ahead).
    Greedy(u64),
}

/// The schedules the tests run every program under.
pub const SCHEDS: [Sched; 4] = [
    Sched::RoundRobin,
    Sched::Reverse,
    Sched::Greedy(1),
    Sched::Greedy(0x5eed),
];

/// Every rank's buffers (input and output share storage when in place).
#[derive(Debug, Clone)]
pub struct Memory {
    pub in_place: bool,
    pub bufs: HashMap<(u32, Buf), Vec<i64>>,
}

impl Memory {
    /// Buffers of `ranks` ranks: inputs given, outputs and scratch poisoned.
    pub fn new(inputs: &[Vec<i64>], out_elems: u64, scratch: u64, in_place: bool) -> Memory {
        Self::new_at(inputs, |_| 0, out_elems, scratch, in_place)
    }
    /// As [`Memory::new`], with rank r's input at `at(r)` of the shared storage when in place.
    pub fn new_at(
        inputs: &[Vec<i64>],
        at: impl Fn(u32) -> u64,
        out_elems: u64,
        scratch: u64,
        in_place: bool,
    ) -> Memory {
        let mut bufs = HashMap::new();
        for (r, inp) in inputs.iter().enumerate() {
            let r = r as u32;
            if in_place {
                let a = at(r) as usize;
                let mut o = vec![POISON; (a + inp.len()).max(out_elems as usize)];
                o[a..a + inp.len()].copy_from_slice(inp);
                bufs.insert((r, Buf::Output), o);
            } else {
                bufs.insert((r, Buf::Input), inp.clone());
                bufs.insert((r, Buf::Output), vec![POISON; out_elems as usize]);
            }
            bufs.insert((r, Buf::Scratch), vec![POISON; scratch as usize]);
        }
        Memory { in_place, bufs }
    }
    fn key(&self, l: Loc) -> (u32, Buf) {
        match l.buf {
            Buf::Input if self.in_place => (l.rank, Buf::Output),
            b => (l.rank, b),
        }
    }
    fn read(&self, l: Loc, len: u64) -> Result<Vec<i64>, String> {
        let b = self
            .bufs
            .get(&self.key(l))
            .ok_or(format!("no buffer {l:?}"))?;
        let (s, e) = (l.offset as usize, (l.offset + len) as usize);
        b.get(s..e)
            .map(|x| x.to_vec())
            .ok_or(format!("read {l:?}+{len} beyond {}", b.len()))
    }
    fn write(&mut self, l: Loc, v: &[i64]) -> Result<(), String> {
        let k = self.key(l);
        let b = self.bufs.get_mut(&k).ok_or(format!("no buffer {l:?}"))?;
        let s = l.offset as usize;
        let n = b.len();
        b.get_mut(s..s + v.len())
            .ok_or(format!("write {l:?}+{} beyond {n}", v.len()))?
            .copy_from_slice(v);
        Ok(())
    }
    /// A rank's output buffer.
    pub fn output(&self, r: u32) -> &[i64] {
        &self.bufs[&(r, Buf::Output)]
    }
}

fn apply(op: ReduceOp, a: i64, b: i64) -> i64 {
    match op {
        ReduceOp::Add => a + b,
        ReduceOp::Max => a.max(b),
        ReduceOp::Min => a.min(b),
    }
}

fn transfer(mem: &mut Memory, t: &Transfer) -> Result<(), String> {
    match t {
        Transfer::Copy { src, dst, len } => {
            let v = mem.read(*src, *len)?;
            mem.write(*dst, &v)
        }
        Transfer::Reduce {
            op, srcs, dst, len, ..
        } => {
            if srcs.len() > 32 {
                return Err(format!("CCE reduce with {} sources", srcs.len()));
            }
            let mut acc = mem.read(srcs[0], *len)?;
            for s in &srcs[1..] {
                for (a, b) in acc.iter_mut().zip(mem.read(*s, *len)?) {
                    *a = apply(*op, *a, b);
                }
            }
            mem.write(*dst, &acc)
        }
    }
}

/// Run every rank's entries to completion; `Err` names the deadlock or the bad access. On
/// success every semaphore must be back at zero (nothing left over for the next op).
pub fn run(
    programs: &BTreeMap<u32, Vec<Entry>>,
    mem: &mut Memory,
    sched: Sched,
) -> Result<(), String> {
    let mut sems: HashMap<Sem, i64> = HashMap::new();
    // (rank, entry index, per-tape pc)
    let mut state: BTreeMap<u32, (usize, Vec<usize>)> = programs
        .iter()
        .map(|(&r, es)| {
            (
                r,
                (0, es.first().map_or(vec![], |e| vec![0; e.tapes.len()])),
            )
        })
        .collect();
    let mut rng = match sched {
        Sched::Greedy(s) => s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407),
        _ => 1,
    };
    loop {
        // Advance finished entries.
        for (r, (ei, pcs)) in state.iter_mut() {
            let es = &programs[r];
            while *ei < es.len()
                && pcs
                    .iter()
                    .zip(&es[*ei].tapes)
                    .all(|(&pc, t)| pc >= t.steps.len())
            {
                *ei += 1;
                *pcs = es.get(*ei).map_or(vec![], |e| vec![0; e.tapes.len()]);
            }
        }
        let mut live: Vec<(u32, usize)> = state
            .iter()
            .filter(|(r, (ei, _))| *ei < programs[*r].len())
            .flat_map(|(r, (ei, pcs))| {
                let tapes = &programs[r][*ei].tapes;
                (0..tapes.len())
                    .filter(move |&t| pcs[t] < tapes[t].steps.len())
                    .map(move |t| (*r, t))
            })
            .collect();
        if live.is_empty() {
            break;
        }
        match sched {
            Sched::RoundRobin => {}
            Sched::Reverse => live.reverse(),
            Sched::Greedy(_) => {
                rng = rng
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let k = ((rng >> 33) as usize) % live.len();
                live.rotate_left(k);
            }
        }
        let mut progressed = false;
        for (r, t) in live {
            loop {
                let (ei, pcs) = state.get_mut(&r).unwrap();
                let tape = &programs[&r][*ei].tapes[t];
                let Some(step) = tape.steps.get(pcs[t]) else {
                    break;
                };
                if let Some(w) = step.wait {
                    if w.sem.rank != r {
                        return Err(format!("rank {r} waits on another rank's semaphore {w:?}"));
                    }
                    let v = sems.entry(w.sem).or_default();
                    if *v < i64::from(w.target) {
                        break;
                    }
                    *v -= i64::from(w.consume);
                }
                for tr in &step.transfers {
                    transfer(mem, tr).map_err(|e| format!("rank {r} step {}: {e}", pcs[t]))?;
                }
                for s in &step.signals {
                    *sems.entry(s.sem).or_default() += i64::from(s.amount);
                }
                pcs[t] += 1;
                progressed = true;
                if !matches!(sched, Sched::Greedy(_)) {
                    break;
                }
            }
            if progressed && !matches!(sched, Sched::Greedy(_)) {
                continue;
            }
            if progressed {
                break;
            }
        }
        if !progressed {
            let stuck: Vec<String> = state
                .iter()
                .filter(|(r, (ei, _))| *ei < programs[*r].len())
                .map(|(r, (ei, pcs))| {
                    let e = &programs[r][*ei];
                    let waits: Vec<String> = e
                        .tapes
                        .iter()
                        .zip(pcs)
                        .filter_map(|(t, &pc)| t.steps.get(pc))
                        .filter_map(|s| s.wait)
                        .map(|w| {
                            format!(
                                "{:?}={} (need {})",
                                w.sem,
                                sems.get(&w.sem).copied().unwrap_or(0),
                                w.target
                            )
                        })
                        .collect();
                    format!("rank {r} entry {ei} ({}) waits {waits:?}", e.leg)
                })
                .collect();
            return Err(format!("deadlock: {stuck:?}"));
        }
    }
    let left: Vec<_> = sems.iter().filter(|(_, &v)| v != 0).collect();
    if !left.is_empty() {
        return Err(format!("semaphores not back at zero: {left:?}"));
    }
    Ok(())
}

/// Programs of one composed leg (one entry per rank).
pub fn programs_of(legs: &[&ComposedLeg]) -> BTreeMap<u32, Vec<Entry>> {
    let mut out: BTreeMap<u32, Vec<Entry>> = BTreeMap::new();
    for l in legs {
        for (r, e) in &l.entries {
            out.entry(*r).or_default().push(e.clone());
        }
    }
    out
}

/// A request for tests.
pub fn request(op: CollectiveOp, n: u32, count: u64, in_place: bool) -> CollectiveRequest {
    let reduces = matches!(op, CollectiveOp::AllReduce | CollectiveOp::ReduceScatter);
    {
        let mut r = CollectiveRequest::new(
            op,
            Dtype::Fp32,
            reduces.then_some(ReduceOp::Add),
            count,
            (0..n).collect(),
            0,
        );
        r.in_place = in_place;
        r
    }
}

fn topsp0(c: u8) -> u8 {
    c
}

/// The flat leg of a request over all its ranks (identity order unless `order` is given), with
/// the block layout of the [`Leg`] doc. In place, all-gather reads its block from its output
/// slot and reduce-scatter writes into input block 0's storage (output = the first `count`).
pub fn flat_leg(req: &CollectiveRequest, order: Option<Vec<u32>>) -> Leg<'_> {
    let n = req.rank_n();
    let c = req.count;
    let (src_block, dst_block, src) = match req.op {
        CollectiveOp::AllReduce => {
            let b = super::split_even(c, n);
            (b.clone(), b, Buf::Input)
        }
        CollectiveOp::ReduceScatter if req.in_place => {
            let b: Vec<_> = (0..u64::from(n)).map(|k| (k * c, c)).collect();
            (b.clone(), b, Buf::Input)
        }
        CollectiveOp::ReduceScatter => (
            (0..u64::from(n)).map(|k| (k * c, c)).collect(),
            vec![(0, c); n as usize],
            Buf::Input,
        ),
        CollectiveOp::AllGather if req.in_place => {
            let b: Vec<_> = (0..u64::from(n)).map(|k| (k * c, c)).collect();
            (b.clone(), b, Buf::Output)
        }
        CollectiveOp::AllGather => (
            vec![(0, c); n as usize],
            (0..u64::from(n)).map(|k| (k * c, c)).collect(),
            Buf::Input,
        ),
        _ => {
            let b: Vec<_> = (0..u64::from(n)).map(|k| (k * c, c)).collect();
            (b.clone(), b, Buf::Input)
        }
    };
    Leg {
        request: req,
        op: req.op,
        order: order.unwrap_or_else(|| (0..n).collect()),
        src: Window {
            buf: src,
            offset: 0,
        },
        dst: Window {
            buf: Buf::Output,
            offset: 0,
        },
        src_block,
        dst_block,
        scratch_base: 0,
        channels: 1,
        chunk_elems: 64,
        topsp_of_channel: topsp0,
        sems: SemPlan::new(8),
    }
}

/// Integer-valued input of rank r (distinct per rank and element, small enough to add exactly).
pub fn inputs(n: u32, elems: u64) -> Vec<Vec<i64>> {
    (0..n)
        .map(|r| {
            (0..elems)
                .map(|i| (i as i64 % 1000) * 37 + i64::from(r) * 1_000_003 + 1)
                .collect()
        })
        .collect()
}

/// What every rank's output must hold for the flat collective (first `output_elems`).
pub fn oracle(req: &CollectiveRequest, input: &[Vec<i64>]) -> Vec<Vec<i64>> {
    let n = req.rank_n() as usize;
    let c = req.count as usize;
    let sum = |range: std::ops::Range<usize>| -> Vec<i64> {
        range.map(|i| input.iter().map(|x| x[i]).sum()).collect()
    };
    (0..n)
        .map(|r| match req.op {
            CollectiveOp::AllReduce => sum(0..c),
            CollectiveOp::ReduceScatter => sum(r * c..(r + 1) * c),
            CollectiveOp::AllGather => (0..n).flat_map(|k| input[k][..c].to_vec()).collect(),
            CollectiveOp::AllToAll => (0..n)
                .flat_map(|k| input[k][r * c..(r + 1) * c].to_vec())
                .collect(),
            other => panic!("no oracle for {other:?}"),
        })
        .collect()
}

/// Run `programs` on the inputs of `req` under every schedule and compare with the oracle.
pub fn check(req: &CollectiveRequest, programs: &BTreeMap<u32, Vec<Entry>>, scratch: u64) {
    let n = req.rank_n();
    let input = inputs(n, req.input_elems());
    let want = oracle(req, &input);
    for sched in SCHEDS {
        let c = req.count;
        let at = |r: u32| match req.op {
            CollectiveOp::AllGather => u64::from(r) * c,
            _ => 0,
        };
        let mut mem = Memory::new_at(&input, at, req.output_elems(), scratch, req.in_place);
        run(programs, &mut mem, sched)
            .unwrap_or_else(|e| panic!("{:?} n={n} count={} {sched:?}: {e}", req.op, req.count));
        for r in 0..n {
            // In place, reduce-scatter leaves rank r's result at block r (NCCL's convention).
            let base = if req.in_place && req.op == CollectiveOp::ReduceScatter {
                (u64::from(r) * c) as usize
            } else {
                0
            };
            let got = &mem.output(r)[base..base + req.output_elems() as usize];
            assert_eq!(
                got,
                &want[r as usize][..],
                "{:?} n={n} count={} in_place={} rank {r} {sched:?}",
                req.op,
                req.count,
                req.in_place
            );
        }
    }
}

//! Test-only concrete evaluator for composed legs, and the harness the composer tests share.
//!
//! The evaluator runs every tape of a leg on integer data, honouring the IR semantics of
//! [`program`](crate::lower::program): a step whose wait is not met blocks its tape; otherwise
//! it consumes, runs its transfers in order (a reduce reads all sources before writing) and then
//! applies its signals. Tapes run concurrently: either round-robin (seed 0) or in a
//! pseudo-random interleaving (any other seed) that picks a runnable tape and runs a few of its
//! steps. When no tape can run and some are unfinished the run reports a deadlock. Out-of-range
//! accesses, waits on another rank's semaphore and semaphores left non-zero (an arrival nobody
//! consumed) are errors. It is deliberately independent of the symbolic verifier (verify.rs).

use std::collections::{BTreeMap, HashMap};

use crate::isa::enums::Dtype;
use crate::lower::compose::{split_even, ComposedLeg, Leg, SemPlan, Window};
use crate::lower::program::{Buf, Entry, Loc, Sem, Transfer};
use crate::lower::request::{CollectiveOp, CollectiveRequest, ReduceOp};

/// Value of never-written memory.
pub const POISON: i64 = -7_777_777;

/// Every rank's buffers. With `in_place`, input and output are one storage (kept as `Output`).
#[derive(Debug, Clone, Default)]
pub struct Memory {
    in_place: bool,
    bufs: HashMap<(u32, Buf), Vec<i64>>,
}

impl Memory {
    /// Empty memory.
    pub fn new(in_place: bool) -> Self {
        Memory {
            in_place,
            bufs: HashMap::new(),
        }
    }
    fn key(&self, rank: u32, buf: Buf) -> (u32, Buf) {
        match buf {
            Buf::Input if self.in_place => (rank, Buf::Output),
            b => (rank, b),
        }
    }
    /// Set a buffer.
    pub fn set(&mut self, rank: u32, buf: Buf, data: Vec<i64>) {
        let k = self.key(rank, buf);
        self.bufs.insert(k, data);
    }
    /// A buffer's contents.
    pub fn get(&self, rank: u32, buf: Buf) -> &[i64] {
        self.bufs.get(&self.key(rank, buf)).map_or(&[], |v| v)
    }
    fn read(&self, l: Loc, len: u64) -> Result<Vec<i64>, String> {
        let b = self.get(l.rank, l.buf);
        let (s, e) = (l.offset as usize, (l.offset + len) as usize);
        if len > 0 && e > b.len() {
            return Err(format!("read {l:?} +{len} past {} elements", b.len()));
        }
        Ok(if len == 0 { vec![] } else { b[s..e].to_vec() })
    }
    fn write(&mut self, l: Loc, vals: &[i64]) -> Result<(), String> {
        if vals.is_empty() {
            return Ok(());
        }
        let k = self.key(l.rank, l.buf);
        let b = self.bufs.entry(k).or_default();
        let (s, e) = (l.offset as usize, l.offset as usize + vals.len());
        if e > b.len() {
            return Err(format!(
                "write {l:?} +{} past {} elements",
                vals.len(),
                b.len()
            ));
        }
        b[s..e].copy_from_slice(vals);
        Ok(())
    }
}

/// Apply a reduce op to integers.
pub fn apply(op: ReduceOp, a: i64, b: i64) -> i64 {
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
            let mut acc: Option<Vec<i64>> = None;
            for s in srcs {
                let v = mem.read(*s, *len)?;
                acc = Some(match acc {
                    None => v,
                    Some(a) => a.iter().zip(&v).map(|(&x, &y)| apply(*op, x, y)).collect(),
                });
            }
            mem.write(*dst, &acc.unwrap_or_default())
        }
    }
}

/// Run every tape of `entries` (one entry per rank) to completion.
pub fn run(entries: &BTreeMap<u32, Entry>, mem: &mut Memory, seed: u64) -> Result<(), String> {
    let tapes: Vec<(u32, &crate::lower::program::Tape)> = entries
        .iter()
        .flat_map(|(&r, e)| e.tapes.iter().map(move |t| (r, t)))
        .collect();
    let mut pc = vec![0usize; tapes.len()];
    let mut sems: HashMap<Sem, i64> = HashMap::new();
    let mut waited: Vec<Sem> = Vec::new();
    let mut rng = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let ready = |i: usize, pc: &[usize], sems: &HashMap<Sem, i64>| {
        let (_, t) = tapes[i];
        match t.steps.get(pc[i]) {
            None => false,
            Some(s) => s
                .wait
                .is_none_or(|w| sems.get(&w.sem).copied().unwrap_or(0) >= i64::from(w.target)),
        }
    };
    loop {
        let runnable: Vec<usize> = (0..tapes.len()).filter(|&i| ready(i, &pc, &sems)).collect();
        if runnable.is_empty() {
            let stuck: Vec<String> = (0..tapes.len())
                .filter(|&i| pc[i] < tapes[i].1.steps.len())
                .map(|i| {
                    let (r, t) = tapes[i];
                    let s = &t.steps[pc[i]];
                    format!(
                        "rank {r} ch {} step {} {:?} waits {:?}",
                        t.channel, pc[i], s.primitive, s.wait
                    )
                })
                .collect();
            if stuck.is_empty() {
                break;
            }
            return Err(format!("deadlock: {}", stuck.join("; ")));
        }
        let (pick, burst) = if seed == 0 {
            (runnable.clone(), 1)
        } else {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let i = runnable[((rng >> 33) as usize) % runnable.len()];
            (vec![i], 1 + ((rng >> 20) % 4) as usize)
        };
        for i in pick {
            for _ in 0..burst {
                if !ready(i, &pc, &sems) {
                    break;
                }
                let (rank, t) = tapes[i];
                let step = &t.steps[pc[i]];
                if let Some(w) = step.wait {
                    if w.sem.rank != rank {
                        return Err(format!("rank {rank} waits on another rank's {:?}", w.sem));
                    }
                    *sems.entry(w.sem).or_default() -= i64::from(w.consume);
                    waited.push(w.sem);
                }
                for tr in &step.transfers {
                    transfer(mem, tr)
                        .map_err(|e| format!("rank {rank} ch {} step {}: {e}", t.channel, pc[i]))?;
                }
                for s in &step.signals {
                    *sems.entry(s.sem).or_default() += i64::from(s.amount);
                }
                pc[i] += 1;
            }
        }
    }
    for s in waited {
        let v = sems[&s];
        if v != 0 {
            return Err(format!("{s:?} ends at {v}: an arrival was never consumed"));
        }
    }
    Ok(())
}

/// One test case.
#[derive(Debug, Clone)]
pub struct Case {
    /// The collective.
    pub op: CollectiveOp,
    /// Ranks.
    pub n: u32,
    /// Elements per rank block (`CollectiveRequest::count`).
    pub count: u64,
    /// In place.
    pub in_place: bool,
    /// Reduce op.
    pub reduce: Option<ReduceOp>,
    /// Channels.
    pub channels: u8,
    /// Chunk elements.
    pub chunk: u64,
    /// Ring order (a permutation of 0..n).
    pub order: Vec<u32>,
    /// Permute pairs.
    pub pairs: Vec<(u32, u32)>,
}

impl Case {
    /// A case with the identity ring, 3 channels, 64-element chunks.
    pub fn new(op: CollectiveOp, n: u32, count: u64) -> Case {
        Case {
            op,
            n,
            count,
            in_place: false,
            reduce: None,
            channels: 3,
            chunk: 64,
            order: (0..n).collect(),
            pairs: Vec::new(),
        }
    }
}

/// A deterministic non-identity ring order of `n` ranks.
pub fn shuffled(n: u32) -> Vec<u32> {
    let mut v: Vec<u32> = (0..n).collect();
    let mut x = 0x9e37_79b9_u64;
    for i in (1..v.len()).rev() {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        v.swap(i, ((x >> 33) as usize) % (i + 1));
    }
    v
}

/// Input element `i` of rank `r` (integer-valued, signed, rank-dependent).
pub fn input(r: u32, i: u64) -> i64 {
    ((i64::from(r) * 1_000_003 + i as i64 * 7919) % 2001) - 1000
}

/// The request of a case.
pub fn request(c: &Case) -> CollectiveRequest {
    {
        let mut r =
            CollectiveRequest::new(c.op, Dtype::Bf16, c.reduce, c.count, (0..c.n).collect(), 0);
        r.in_place = c.in_place;
        r.pairs = c.pairs.clone();
        r
    }
}

fn topsp(c: u8) -> u8 {
    c % 2
}

/// Scratch elements before the leg's own (to check offsets are honoured).
pub const SCRATCH_BASE: u64 = 5;

/// The flat leg of a case (block layouts of `Leg`'s doc; in-place layouts follow NCCL: an
/// all-gather's input is its own output block, a reduce-scatter's output its own input block).
pub fn leg<'a>(c: &Case, req: &'a CollectiveRequest) -> Leg<'a> {
    let (n, cnt) = (c.n as u64, c.count);
    let each = |b: (u64, u64)| vec![b; c.n as usize];
    let own = (0..n).map(|k| (k * cnt, cnt)).collect::<Vec<_>>();
    let (src_block, dst_block) = match c.op {
        CollectiveOp::AllReduce => (split_even(cnt, c.n), split_even(cnt, c.n)),
        CollectiveOp::ReduceScatter if c.in_place => (own.clone(), own),
        CollectiveOp::ReduceScatter => (own, each((0, cnt))),
        CollectiveOp::AllGather if c.in_place => (own.clone(), own),
        CollectiveOp::AllGather => (each((0, cnt)), own),
        _ => (each((0, cnt)), each((0, cnt))),
    };
    Leg {
        request: req,
        op: c.op,
        order: c.order.clone(),
        src: Window {
            buf: Buf::Input,
            offset: 0,
        },
        dst: Window {
            buf: Buf::Output,
            offset: 0,
        },
        src_block,
        dst_block,
        scratch_base: SCRATCH_BASE,
        channels: c.channels,
        chunk_elems: c.chunk,
        topsp_of_channel: topsp,
        sems: SemPlan::new(8),
    }
}

fn input_len(c: &Case) -> u64 {
    match c.op {
        CollectiveOp::ReduceScatter => c.count * u64::from(c.n),
        CollectiveOp::PermuteReduceImplicit => 2 * c.count,
        _ => c.count,
    }
}

/// The source of each rank's output for the permute family (`None`: left alone).
fn permute_source(c: &Case, r: u32) -> Option<u32> {
    let pos = |r: u32| c.order.iter().position(|&x| x == r).unwrap() as u32;
    match c.op {
        CollectiveOp::Permute => c.pairs.iter().find(|p| p.1 == r).map(|p| p.0),
        CollectiveOp::PermuteImplicit | CollectiveOp::PermuteReduceImplicit => {
            Some(c.order[((pos(r) + c.n - 1) % c.n) as usize])
        }
        CollectiveOp::Send | CollectiveOp::Recv => (r == c.order[1]).then_some(c.order[0]),
        _ => None,
    }
}

/// Initialise memory, run (with `seed`), and compare every rank's output storage with the
/// direct oracle.
pub fn check(c: &Case, composed: &ComposedLeg, seed: u64) -> Result<(), String> {
    let (n, cnt) = (u64::from(c.n), c.count);
    let out_len = match c.op {
        CollectiveOp::AllGather => n * cnt,
        CollectiveOp::ReduceScatter if c.in_place => n * cnt,
        CollectiveOp::PermuteReduceImplicit if c.in_place => 2 * cnt,
        CollectiveOp::Barrier => 0,
        _ => cnt,
    };
    let mut mem = Memory::new(c.in_place);
    for r in 0..c.n {
        let x: Vec<i64> = (0..input_len(c)).map(|i| input(r, i)).collect();
        if c.in_place {
            let mut s = vec![POISON; out_len as usize];
            let at = if c.op == CollectiveOp::AllGather {
                u64::from(r) * cnt
            } else {
                0
            };
            s[at as usize..at as usize + x.len()].copy_from_slice(&x);
            mem.set(r, Buf::Output, s);
        } else {
            mem.set(r, Buf::Input, x);
            mem.set(r, Buf::Output, vec![POISON; out_len as usize]);
        }
        let scratch = SCRATCH_BASE + composed.scratch_elems;
        mem.set(r, Buf::Scratch, vec![POISON; scratch as usize]);
    }
    let before = mem.clone();
    run(&composed.entries, &mut mem, seed)?;
    let op = c.reduce.unwrap_or(ReduceOp::Add);
    let reduce_all = |i: u64| (1..c.n).fold(input(0, i), |a, r| apply(op, a, input(r, i)));
    for r in 0..c.n {
        let got = mem.get(r, Buf::Output);
        let old = before.get(r, Buf::Output);
        let want: Vec<Option<i64>> = (0..out_len)
            .map(|i| match c.op {
                CollectiveOp::AllReduce => Some(reduce_all(i)),
                CollectiveOp::ReduceScatter => {
                    let base = if c.in_place { u64::from(r) * cnt } else { 0 };
                    (i >= base && i < base + cnt).then(|| reduce_all(u64::from(r) * cnt + i - base))
                }
                CollectiveOp::AllGather => Some(input((i / cnt.max(1)) as u32, i % cnt.max(1))),
                CollectiveOp::PermuteReduceImplicit if i >= cnt => None,
                CollectiveOp::PermuteReduceImplicit => {
                    permute_source(c, r).map(|s| apply(op, input(s, i), input(s, cnt + i)))
                }
                _ => Some(match permute_source(c, r) {
                    Some(s) => input(s, i),
                    None => old[i as usize],
                }),
            })
            .collect();
        for (i, w) in want.iter().enumerate() {
            if let Some(w) = w {
                if got.get(i) != Some(w) {
                    return Err(format!(
                        "rank {r} output[{i}] = {:?}, want {w} ({c:?})",
                        got.get(i)
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Compose `c` with `compose` and check it under round-robin and two random interleavings.
pub fn check_all(c: &Case, compose: impl Fn(&Leg) -> crate::Result<ComposedLeg>) {
    let req = request(c);
    let l = leg(c, &req);
    let composed = compose(&l).unwrap_or_else(|e| panic!("compose {c:?}: {e}"));
    for seed in [0, 1, 2] {
        if let Err(e) = check(c, &composed, seed) {
            panic!("seed {seed}: {e}\ncase {c:?}");
        }
    }
}

/// Number of steps with each primitive over all ranks' tapes.
pub fn census(composed: &ComposedLeg) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for e in composed.entries.values() {
        for t in &e.tapes {
            for s in &t.steps {
                *m.entry(format!("{:?}", s.primitive)).or_default() += 1;
            }
        }
    }
    m
}

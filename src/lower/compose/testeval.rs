//! Test-only concrete evaluator of composed step programs, and the harness every composer test
//! shares. It is deliberately independent of the symbolic verifier (lower/verify): composers are
//! tested by the integers their programs leave in the output buffers, compared with a direct
//! oracle of the collective, not by a second reading of the rules the verifier encodes.
//!
//! Semantics, on integer-valued buffers (the IR of [`program`](crate::lower::program)):
//! * a step whose wait is not met (`sem < target`) blocks its tape; otherwise it consumes
//!   (`sem -= consume`), runs its transfers in order (a reduce reads all its sources, at most the
//!   32 a CCE takes, before it writes) and then applies its signals;
//! * all tapes of an entry run concurrently, whichever TOP_SP drives them: more interleavings
//!   than the device's per-TOP_SP order, so a composer cannot lean on the order of its channels;
//! * the entries of a rank run one after another (a rank starts its next leg once every tape of
//!   the current one has finished); the joins that give this order on the device are checked in
//!   `compose::leg_join` and by the verifier, not here;
//! * a [`Sched`] picks the interleaving; a correct program gives the same result under each.
//!
//! Errors: a deadlock (no tape can move and some are unfinished; the message names every blocked
//! tape), a wait on another rank's semaphore, an access outside a buffer (even of no elements),
//! a reduce of no or more than 32 sources, and a semaphore not back at zero once every tape has
//! finished (an arrival nobody consumed would satisfy a wait of the next op). Exempt from that
//! last check are semaphores that no step waits on and only LOCAL signals raise: the
//! source-reuse completions of docs/contract/lowering.md §6.4, which the ring composers signal on
//! every send but need not wait for, since no source is reused inside the op. Memory nobody
//! wrote holds [`POISON`], so reading it shows in the result.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::isa::enums::Dtype;
use crate::lower::compose::{split_even, ComposedLeg, Leg, SemPlan, Window};
use crate::lower::program::{Buf, Entry, Loc, Sem, SignalKind, Step, Tape, Transfer};
use crate::lower::request::{CollectiveOp, CollectiveRequest, ReduceOp};

/// Value of never-written memory: reading it shows up in the result.
pub const POISON: i64 = -7_777_777;

/// Most sources one CCE reduce takes (docs/contract/lowering.md §4.6).
const CCE_MAX_SOURCES: usize = 32;

/// Every rank's entries, in the order the rank runs them.
pub type Programs = BTreeMap<u32, Vec<Entry>>;

/// Every rank's buffers. In place, input and output are one storage (kept as `Output`).
#[derive(Debug, Clone, Default)]
pub struct Memory {
    in_place: bool,
    bufs: HashMap<(u32, Buf), Vec<i64>>,
}

impl Memory {
    /// No buffers yet.
    pub fn new(in_place: bool) -> Memory {
        Memory {
            in_place,
            bufs: HashMap::new(),
        }
    }

    /// Rank r holds `inputs[r]`; outputs (`out_elems`) and scratch (`scratch_elems`) are
    /// poisoned. In place, rank r's input sits at `at(r)` of its storage, which is long enough
    /// for both the input and the output.
    pub fn from_inputs(
        inputs: &[Vec<i64>],
        at: impl Fn(u32) -> u64,
        out_elems: u64,
        scratch_elems: u64,
        in_place: bool,
    ) -> Memory {
        let mut mem = Memory::new(in_place);
        for (r, x) in (0u32..).zip(inputs) {
            if in_place {
                let a = at(r) as usize;
                let mut s = vec![POISON; (a + x.len()).max(out_elems as usize)];
                s[a..a + x.len()].copy_from_slice(x);
                mem.set(r, Buf::Output, s);
            } else {
                mem.set(r, Buf::Input, x.clone());
                mem.set(r, Buf::Output, vec![POISON; out_elems as usize]);
            }
            mem.set(r, Buf::Scratch, vec![POISON; scratch_elems as usize]);
        }
        mem
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

    /// A buffer's contents (empty if it was never set).
    pub fn get(&self, rank: u32, buf: Buf) -> &[i64] {
        self.bufs.get(&self.key(rank, buf)).map_or(&[], |v| v)
    }

    fn read(&self, l: Loc, len: u64) -> Result<Vec<i64>, String> {
        let b = self
            .bufs
            .get(&self.key(l.rank, l.buf))
            .ok_or_else(|| format!("no buffer {l:?}"))?;
        let s = l.offset as usize;
        b.get(s..s + len as usize)
            .map(<[i64]>::to_vec)
            .ok_or_else(|| format!("read {l:?} +{len} beyond {} elements", b.len()))
    }

    fn write(&mut self, l: Loc, vals: &[i64]) -> Result<(), String> {
        let k = self.key(l.rank, l.buf);
        let b = self
            .bufs
            .get_mut(&k)
            .ok_or_else(|| format!("no buffer {l:?}"))?;
        let (s, n) = (l.offset as usize, b.len());
        b.get_mut(s..s + vals.len())
            .ok_or_else(|| format!("write {l:?} +{} beyond {n} elements", vals.len()))?
            .copy_from_slice(vals);
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
            if srcs.is_empty() || srcs.len() > CCE_MAX_SOURCES {
                return Err(format!(
                    "CCE reduce of {} sources (1..={CCE_MAX_SOURCES})",
                    srcs.len()
                ));
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

/// How the tapes that can move are interleaved. Each round of the evaluator runs one of these
/// policies over the unfinished tapes, listed in (rank, tape) order.
#[derive(Debug, Clone, Copy)]
pub enum Sched {
    /// Every tape that can move at the start of a round takes one step: a step that another
    /// step of the round unblocks waits for the next round.
    LockStep,
    /// Each tape in turn takes one step if it can, so a step unblocked earlier in the round
    /// runs in it.
    RoundRobin,
    /// As `RoundRobin`, in reverse order.
    Reverse,
    /// A pseudo-random tape (from this seed) runs until it blocks: one rank runs far ahead.
    Greedy(u64),
    /// A pseudo-random tape (from this seed) that can move takes 1 to 4 steps.
    Bursts(u64),
}

/// The schedules every checked program runs under.
pub const SCHEDS: [Sched; 7] = [
    Sched::LockStep,
    Sched::RoundRobin,
    Sched::Reverse,
    Sched::Greedy(1),
    Sched::Greedy(0x5eed),
    Sched::Bursts(1),
    Sched::Bursts(2),
];

/// The pseudo-random sequence of the seeded schedules (Knuth's MMIX LCG).
struct Lcg(u64);

impl Lcg {
    fn new(seed: u64) -> Lcg {
        let mut g = Lcg(seed);
        g.next();
        g
    }
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0
    }
}

/// A tape of a rank's current entry: (rank, tape index).
type TapeId = (u32, usize);

/// One run: the programs, the memory and semaphores they act on, and where every rank is.
struct Machine<'a> {
    programs: &'a Programs,
    mem: &'a mut Memory,
    sems: BTreeMap<Sem, i64>,
    /// Per rank: the entry it runs and the next step of each of that entry's tapes.
    at: BTreeMap<u32, (usize, Vec<usize>)>,
}

impl<'a> Machine<'a> {
    fn entry(&self, r: u32) -> Option<&'a Entry> {
        let programs = self.programs;
        programs[&r].get(self.at[&r].0)
    }
    fn tape(&self, (r, t): TapeId) -> &'a Tape {
        &self.entry(r).expect("a live tape's entry").tapes[t]
    }
    fn pc(&self, (r, t): TapeId) -> usize {
        self.at[&r].1[t]
    }
    fn next_step(&self, id: TapeId) -> Option<&'a Step> {
        self.tape(id).steps.get(self.pc(id))
    }
    fn sem(&self, s: Sem) -> i64 {
        self.sems.get(&s).copied().unwrap_or(0)
    }
    fn can_move(&self, id: TapeId) -> bool {
        self.next_step(id).is_some_and(|s| {
            s.wait
                .is_none_or(|w| self.sem(w.sem) >= i64::from(w.target))
        })
    }

    /// Run the tape's next step if it can move; whether it did.
    fn step(&mut self, id: TapeId) -> Result<bool, String> {
        if !self.can_move(id) {
            return Ok(false);
        }
        let (r, t) = id;
        let (tape, pc) = (self.tape(id), self.pc(id));
        let step = &tape.steps[pc];
        if let Some(w) = step.wait {
            *self.sems.entry(w.sem).or_default() -= i64::from(w.consume);
        }
        for tr in &step.transfers {
            transfer(self.mem, tr)
                .map_err(|e| format!("rank {r} ch {} step {pc}: {e}", tape.channel))?;
        }
        for s in &step.signals {
            *self.sems.entry(s.sem).or_default() += i64::from(s.amount);
        }
        self.at.get_mut(&r).expect("a live rank").1[t] += 1;
        Ok(true)
    }

    /// Move every rank whose current entry has finished on to its next one.
    fn enter_next_entries(&mut self) {
        let programs = self.programs;
        for (r, (ei, pcs)) in self.at.iter_mut() {
            let es = &programs[r];
            while es.get(*ei).is_some_and(|e| {
                e.tapes
                    .iter()
                    .zip(&*pcs)
                    .all(|(t, &pc)| pc >= t.steps.len())
            }) {
                *ei += 1;
                *pcs = es.get(*ei).map_or(vec![], |e| vec![0; e.tapes.len()]);
            }
        }
    }

    /// The unfinished tapes, in (rank, tape) order.
    fn live(&self) -> Vec<TapeId> {
        let mut out = Vec::new();
        for &r in self.at.keys() {
            if let Some(e) = self.entry(r) {
                out.extend(
                    (0..e.tapes.len())
                        .map(|t| (r, t))
                        .filter(|&id| self.next_step(id).is_some()),
                );
            }
        }
        out
    }

    fn deadlock(&self, live: &[TapeId]) -> String {
        let stuck: Vec<String> = live
            .iter()
            .map(|&id| {
                let (r, e, tape) = (id.0, self.entry(id.0).expect("live"), self.tape(id));
                let s = &tape.steps[self.pc(id)];
                let wait = s.wait.map_or("nothing".to_string(), |w| {
                    format!("{:?} = {} (needs {})", w.sem, self.sem(w.sem), w.target)
                });
                format!(
                    "rank {r} ch {} step {} of entry {} ({}) {:?} waits for {wait}",
                    tape.channel,
                    self.pc(id),
                    self.at[&r].0,
                    e.leg,
                    s.primitive
                )
            })
            .collect();
        format!("deadlock: {}", stuck.join("; "))
    }
}

/// Run every rank's entries to completion under `sched`; `Err` names the deadlock, the bad
/// access or the semaphores left over.
pub fn run(programs: &Programs, mem: &mut Memory, sched: Sched) -> Result<(), String> {
    // Semaphores that must end at zero: those some step waits on or a non-LOCAL signal raises.
    let mut must_drain = BTreeSet::new();
    for (&r, es) in programs {
        for t in es.iter().flat_map(|e| &e.tapes) {
            for s in &t.steps {
                if let Some(w) = s.wait {
                    if w.sem.rank != r {
                        return Err(format!(
                            "rank {r} ch {} waits on another rank's {:?}",
                            t.channel, w.sem
                        ));
                    }
                    must_drain.insert(w.sem);
                }
                let raised = s.signals.iter().filter(|g| g.kind != SignalKind::Local);
                must_drain.extend(raised.map(|g| g.sem));
            }
        }
    }
    let at = programs
        .iter()
        .map(|(&r, es)| {
            (
                r,
                (0, es.first().map_or(vec![], |e| vec![0; e.tapes.len()])),
            )
        })
        .collect();
    let mut m = Machine {
        programs,
        mem,
        sems: BTreeMap::new(),
        at,
    };
    let mut rng = Lcg::new(match sched {
        Sched::Greedy(s) | Sched::Bursts(s) => s,
        _ => 0,
    });
    loop {
        m.enter_next_entries();
        let live = m.live();
        if live.is_empty() {
            break;
        }
        let ready: Vec<TapeId> = live.iter().copied().filter(|&id| m.can_move(id)).collect();
        if ready.is_empty() {
            return Err(m.deadlock(&live));
        }
        match sched {
            Sched::LockStep => {
                for id in ready {
                    m.step(id)?;
                }
            }
            Sched::RoundRobin => {
                for id in live {
                    m.step(id)?;
                }
            }
            Sched::Reverse => {
                for id in live.into_iter().rev() {
                    m.step(id)?;
                }
            }
            Sched::Greedy(_) => {
                let k = (rng.next() >> 33) as usize % live.len();
                let id = live[k..]
                    .iter()
                    .chain(&live[..k])
                    .copied()
                    .find(|&id| m.can_move(id))
                    .expect("some tape is ready");
                while m.step(id)? {}
            }
            Sched::Bursts(_) => {
                let x = rng.next();
                let id = ready[(x >> 33) as usize % ready.len()];
                for _ in 0..1 + (x >> 20) % 4 {
                    if !m.step(id)? {
                        break;
                    }
                }
            }
        }
    }
    let left: Vec<String> = m
        .sems
        .iter()
        .filter(|&(s, &v)| v != 0 && must_drain.contains(s))
        .map(|(s, v)| format!("{s:?} = {v}"))
        .collect();
    if !left.is_empty() {
        return Err(format!("semaphores not back at zero: {}", left.join(", ")));
    }
    Ok(())
}

/// The programs of composed legs run one after another: each rank runs its entry of every leg
/// it takes part in, in the order given.
pub fn programs_of(legs: &[&ComposedLeg]) -> Programs {
    let mut out = Programs::new();
    for l in legs {
        for (r, e) in &l.entries {
            out.entry(*r).or_default().push(e.clone());
        }
    }
    out
}

/// One test case: a collective over `n` ranks and the flat leg that composes it.
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
    /// Out of place, the identity ring, 3 channels, 64-element chunks, and `Add` for the ops
    /// that reduce.
    pub fn new(op: CollectiveOp, n: u32, count: u64) -> Case {
        let reduces = matches!(
            op,
            CollectiveOp::AllReduce
                | CollectiveOp::ReduceScatter
                | CollectiveOp::PermuteReduceImplicit
        );
        Case {
            op,
            n,
            count,
            in_place: false,
            reduce: reduces.then_some(ReduceOp::Add),
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

/// Input element `i` of rank `r`. The high part is signed and not monotonic in the rank, so a
/// max or min is not decided by the rank id; the low 31 bits hold `(r, i)`, so every element of
/// every rank is distinct (and none is [`POISON`]) and data from the wrong rank or offset
/// shows. Sums stay exact.
pub fn input(r: u32, i: u64) -> i64 {
    assert!(
        r < 1 << 8 && i < 1 << 22,
        "input({r}, {i}) out of the tagged range"
    );
    let mixed = ((i64::from(r) * 1_000_003 + i as i64 * 7919) % 2001) - 1000;
    (mixed << 31) + (i64::from(r) << 22) + i as i64
}

/// The inputs of `n` ranks, `elems` elements each.
pub fn inputs(n: u32, elems: u64) -> Vec<Vec<i64>> {
    (0..n)
        .map(|r| (0..elems).map(|i| input(r, i)).collect())
        .collect()
}

/// The request of a case.
pub fn request(c: &Case) -> CollectiveRequest {
    let mut r = CollectiveRequest::new(c.op, Dtype::Bf16, c.reduce, c.count, (0..c.n).collect(), 0);
    r.in_place = c.in_place;
    r.pairs = c.pairs.clone();
    r
}

fn topsp(c: u8) -> u8 {
    c % 2
}

/// Scratch elements before the leg's own (to check offsets are honoured).
pub const SCRATCH_BASE: u64 = 5;

/// The flat leg of a case (block layouts of `Leg`'s doc; in-place layouts follow NCCL: an
/// all-gather's input is its own output block, a reduce-scatter's output its own input block).
pub fn leg<'a>(c: &Case, req: &'a CollectiveRequest) -> Leg<'a> {
    let (n, cnt) = (u64::from(c.n), c.count);
    let each = |b: (u64, u64)| vec![b; c.n as usize];
    let own = (0..n).map(|k| (k * cnt, cnt)).collect::<Vec<_>>();
    let (src_block, dst_block) = match c.op {
        CollectiveOp::AllReduce => (split_even(cnt, c.n), split_even(cnt, c.n)),
        CollectiveOp::ReduceScatter if c.in_place => (own.clone(), own),
        CollectiveOp::ReduceScatter => (own, each((0, cnt))),
        CollectiveOp::AllGather if c.in_place => (own.clone(), own),
        CollectiveOp::AllGather => (each((0, cnt)), own),
        CollectiveOp::AllToAll | CollectiveOp::AllToAllV => (own.clone(), own),
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

/// The oracle: what each element of rank `r`'s output storage must hold once the collective ran
/// on [`input`]s (`None`: anything, e.g. the rest of an in-place reduce-scatter's storage).
/// `before` is that storage before the run: what a rank the op leaves alone must still hold.
fn oracle(c: &Case, r: u32, before: &[i64]) -> Vec<Option<i64>> {
    let (cnt, blk) = (c.count, c.count.max(1));
    let op = c.reduce.unwrap_or(ReduceOp::Add);
    let reduce_all = |i: u64| (1..c.n).fold(input(0, i), |a, k| apply(op, a, input(k, i)));
    let r64 = u64::from(r);
    (0..before.len() as u64)
        .map(|i| match c.op {
            CollectiveOp::AllReduce => Some(reduce_all(i)),
            CollectiveOp::ReduceScatter => {
                let base = if c.in_place { r64 * cnt } else { 0 };
                (i >= base && i < base + cnt).then(|| reduce_all(r64 * cnt + i - base))
            }
            CollectiveOp::AllGather => Some(input((i / blk) as u32, i % blk)),
            CollectiveOp::AllToAll => Some(input((i / blk) as u32, r64 * cnt + i % blk)),
            CollectiveOp::PermuteReduceImplicit if i >= cnt => None,
            CollectiveOp::PermuteReduceImplicit => {
                permute_source(c, r).map(|s| apply(op, input(s, i), input(s, cnt + i)))
            }
            CollectiveOp::Permute
            | CollectiveOp::PermuteImplicit
            | CollectiveOp::Send
            | CollectiveOp::Recv
            | CollectiveOp::Barrier => Some(match permute_source(c, r) {
                Some(s) => input(s, i),
                None => before[i as usize],
            }),
            CollectiveOp::AllToAllV => panic!("no oracle for all-to-all-v (it needs a layout)"),
        })
        .collect()
}

/// Run `programs` once on the case's inputs and compare every rank's output storage with the
/// oracle. `scratch_elems`: every rank's scratch buffer.
fn check_once(
    c: &Case,
    programs: &Programs,
    scratch_elems: u64,
    sched: Sched,
) -> Result<(), String> {
    let req = request(c);
    let at = |r: u32| match c.op {
        CollectiveOp::AllGather => u64::from(r) * c.count,
        _ => 0,
    };
    let input = inputs(c.n, req.input_elems());
    let mut mem = Memory::from_inputs(&input, at, req.output_elems(), scratch_elems, c.in_place);
    let before = mem.clone();
    run(programs, &mut mem, sched)?;
    for r in 0..c.n {
        let got = mem.get(r, Buf::Output);
        for (i, want) in oracle(c, r, before.get(r, Buf::Output)).iter().enumerate() {
            if let Some(w) = want {
                if got.get(i) != Some(w) {
                    return Err(format!("rank {r} output[{i}] = {:?}, want {w}", got.get(i)));
                }
            }
        }
    }
    Ok(())
}

/// Check `programs` (one or more legs; `scratch_elems` of scratch per rank) against the oracle
/// under every schedule of [`SCHEDS`].
pub fn check_programs(c: &Case, programs: &Programs, scratch_elems: u64) {
    for sched in SCHEDS {
        if let Err(e) = check_once(c, programs, scratch_elems, sched) {
            panic!("{sched:?}: {e}\ncase {c:?}");
        }
    }
}

/// Check a composed flat leg of the case (its scratch starts at [`SCRATCH_BASE`]).
pub fn check_leg(c: &Case, composed: &ComposedLeg) {
    check_programs(
        c,
        &programs_of(&[composed]),
        SCRATCH_BASE + composed.scratch_elems,
    );
}

/// Compose the case's flat leg with `compose` and check it under every schedule.
pub fn check_all(c: &Case, compose: impl Fn(&Leg) -> crate::Result<ComposedLeg>) {
    let req = request(c);
    let composed = compose(&leg(c, &req)).unwrap_or_else(|e| panic!("compose {c:?}: {e}"));
    check_leg(c, &composed);
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

//! RDH — recursive halving / doubling (docs/contract/lowering.md §4.8) for reduce-scatter,
//! all-gather and all-reduce on a power-of-two group (rank_n = 2^k; position p in the leg's order
//! is the group index r of §4.8, and chunk c is the block of rank id `order[c]`).
//!
//! **Step count** per rank (one tape, channel 0): reduce-scatter: for each of the k exchange
//! steps b, 2^(k−b−1) `Send` steps (one per chunk sent) and 2^(k−b−1) `RecvReduceCopy` steps (one
//! per chunk kept), 2·(2^k − 1) in all. All-gather: one `DirectCopy` (own block to own output;
//! omitted in place), then per step b: 2^b `Send` steps and one `DirectRecv` (the wait for the
//! partner's blocks): 2^k − 1 + k, plus the DirectCopy out of place (2^k + k, as the cost index
//! measured it). All-reduce: both (no DirectCopy). k = 0 is a single
//! local copy.
//!
//! **Bytes on the wire per rank** (S = block bytes): reduce-scatter (2^k − 1)·S, all-gather
//! (2^k − 1)·S, all-reduce 2·(2^k − 1)·S — bandwidth-optimal like the ring, in k steps instead of
//! 2^k − 1.
//!
//! Reduce-scatter step b: partner p XOR 2^b; the send set is `base(1) + i·2^(b+1)` and the keep
//! set `base(0) + i·2^(b+1)`, i < 2^(k−b−1), with `base(s) = ((s << b) XOR (p & 2^b)) +
//! (p & (2^b − 1))` ([`rdh_sets`]); the receiver reduces the partner's partial into its own with
//! `recv_reduce_copy` (SDMA op, RING_2R1W). After k steps position p holds the reduction of
//! chunk p. All-gather step b: partner p XOR 2^(k−1−b); send every chunk owned so far, receive
//! the partner's. All-reduce = reduce-scatter then all-gather.
//!
//! **Memory**: partials live in a working slot per chunk (scratch, `2^k` slots of the largest
//! block), received partials in a receive area per step (`2^k − 1` slots in all), so no area is
//! ever rewritten within one op. **Semaphores**: one receive semaphore per exchange step, ids
//! `leg.sems.base + s` (s = 0..k for reduce-scatter or all-gather, 0..2k for all-reduce), so a
//! partner that runs ahead to a later step can never satisfy an earlier wait; every wait is
//! `wait_ge_and_dec` (target 1, consume 1). No LOCAL or credit increments: no step waits for a
//! source to be reusable, since no area is reused within the op, and the partner of a later op
//! reaches a receive area only after this rank has passed the steps that read it.
//!
//! **Intra RDH** ([`compose_intra_rdh`]): the vendor's intra-RDH planner (per-device-count
//! schedules following physical hops, RDH mesh events 23..52) was not transcribed (§4.8
//! \[OPEN\]). This project gives it result-equivalent semantics: the same XOR scheme, on a
//! power-of-two group, tagged `Algorithm::IntraRdh`. It does not reproduce the vendor's transfer
//! pattern.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::lower::compose::{ComposedLeg, Leg};
use crate::lower::program::{
    Algorithm, Buf, Entry, Half, Loc, Primitive, RingShape, Sem, Signal, SignalKind, Step, Tape,
    Transfer, Wait,
};
use crate::lower::request::{CollectiveOp, ReduceOp};

/// The reduce-scatter send and keep sets of position `r` at step `b` of a 2^k group
/// (docs/contract/lowering.md §4.8).
pub fn rdh_sets(k: u32, r: u32, b: u32) -> (Vec<u32>, Vec<u32>) {
    let span = 1u32 << (k - (b + 1));
    let base = |is_send: u32| ((is_send << b) ^ (r & (1 << b))) + (r & ((1 << b) - 1));
    let set = |s: u32| (0..span).map(|i| base(s) + i * (1 << (b + 1))).collect();
    (set(1), set(0))
}

/// Inter RDH (`Algorithm::InterRdh`).
pub fn compose_inter_rdh(leg: &Leg) -> Result<ComposedLeg> {
    compose_rdh(leg, Algorithm::InterRdh)
}

/// Intra RDH (`Algorithm::IntraRdh`): result-equivalent XOR scheme (see the module doc).
pub fn compose_intra_rdh(leg: &Leg) -> Result<ComposedLeg> {
    compose_rdh(leg, Algorithm::IntraRdh)
}

struct Rank<'l, 'a> {
    leg: &'l Leg<'a>,
    me: u32,
    p: u32,
    k: u32,
    topsp: u8,
    slot: u64,
    steps: Vec<Step>,
}

impl Rank<'_, '_> {
    fn sem(&self, rank: u32, s: u32) -> Sem {
        Sem {
            rank,
            topsp: self.topsp,
            id: self.leg.sems.base + s as u8,
        }
    }
    fn step(&self, primitive: Primitive, chunk: u32) -> Step {
        Step {
            primitive,
            half: Half::H0,
            chunk: self.leg.order[chunk as usize],
            reduction: None,
            wait: None,
            transfers: Vec::new(),
            signals: Vec::new(),
            event_type: None,
        }
    }
    fn len(&self, c: u32) -> u64 {
        self.leg.src_block[self.leg.order[c as usize] as usize].1
    }
    fn src(&self, rank: u32, c: u32) -> Loc {
        let off = self.leg.src_block[self.leg.order[c as usize] as usize].0;
        Loc {
            rank,
            buf: self.leg.src.buf,
            offset: self.leg.src.offset + off,
        }
    }
    fn dst(&self, rank: u32, c: u32) -> Loc {
        let off = self.leg.dst_block[self.leg.order[c as usize] as usize].0;
        Loc {
            rank,
            buf: self.leg.dst.buf,
            offset: self.leg.dst.offset + off,
        }
    }
    fn scratch(&self, rank: u32, slot: u64) -> Loc {
        Loc {
            rank,
            buf: Buf::Scratch,
            offset: self.leg.scratch_base + slot * self.slot,
        }
    }
    fn copy(&self, src: Loc, dst: Loc, len: u64) -> Vec<Transfer> {
        let same = super::mesh::same_place(self.leg, src, dst);
        if len == 0 || same {
            Vec::new()
        } else {
            vec![Transfer::Copy { src, dst, len }]
        }
    }
    /// Push `chunks` (read by `from`) to the partner's `to`, +1 on its semaphore `s` at the end.
    fn push(&mut self, partner: u32, s: u32, chunks: &[(u32, Loc, Loc)]) {
        let n = chunks.len();
        for (i, &(c, from, to)) in chunks.iter().enumerate() {
            let mut st = self.step(Primitive::Send, c);
            st.transfers = self.copy(from, to, self.len(c));
            if i + 1 == n {
                st.signals = vec![Signal {
                    sem: self.sem(partner, s),
                    amount: 1,
                    kind: SignalKind::Remote,
                }];
            }
            self.steps.push(st);
        }
    }
    fn wait(&self, s: u32) -> Option<Wait> {
        Some(Wait {
            sem: self.sem(self.me, s),
            target: 1,
            consume: 1,
        })
    }

    fn reduce_scatter(&mut self, op: ReduceOp) {
        let k = self.k;
        let work = |c: u32| u64::from(c);
        let mut recv_base = 1u64 << k;
        for b in 0..k {
            let partner = self.leg.order[(self.p ^ (1 << b)) as usize];
            let (send, keep) = rdh_sets(k, self.p, b);
            let partial = |me: &Self, c: u32| {
                if b == 0 {
                    me.src(me.me, c)
                } else {
                    me.scratch(me.me, work(c))
                }
            };
            let chunks: Vec<_> = send
                .iter()
                .enumerate()
                .map(|(i, &c)| {
                    (
                        c,
                        partial(self, c),
                        self.scratch(partner, recv_base + i as u64),
                    )
                })
                .collect();
            self.push(partner, b, &chunks);
            for (i, &c) in keep.iter().enumerate() {
                let mut st = self.step(Primitive::RecvReduceCopy, c);
                st.reduction = Some((op, RingShape::Ring2R1W));
                if i == 0 {
                    st.wait = self.wait(b);
                }
                let dst = if b + 1 == k {
                    self.dst(self.me, c)
                } else {
                    self.scratch(self.me, work(c))
                };
                let len = self.len(c);
                if len > 0 {
                    st.transfers = vec![Transfer::Reduce {
                        op,
                        shape: RingShape::Ring2R1W,
                        srcs: vec![
                            partial(self, c),
                            self.scratch(self.me, recv_base + i as u64),
                        ],
                        dst,
                        len,
                    }];
                }
                self.steps.push(st);
            }
            recv_base += keep.len() as u64;
        }
    }

    fn all_gather(&mut self, s0: u32) {
        let k = self.k;
        for b in 0..k {
            let bit = 1u32 << (k - 1 - b);
            let partner = self.leg.order[(self.p ^ bit) as usize];
            // Owned so far: agree with p outside the bits already exchanged (k−1 .. k−b).
            let mask = ((1u32 << k) - 1) & !(((1u32 << b) - 1) << (k - b));
            let owned: Vec<u32> = (0..1u32 << k)
                .filter(|c| (c ^ self.p) & mask == 0)
                .collect();
            let me = self.me;
            let chunks: Vec<_> = owned
                .iter()
                .map(|&c| (c, self.dst(me, c), self.dst(partner, c)))
                .collect();
            self.push(partner, s0 + b, &chunks);
            let mut st = self.step(Primitive::DirectRecv, self.p ^ bit);
            st.wait = self.wait(s0 + b);
            self.steps.push(st);
        }
    }
}

/// Compose an RDH leg (reduce-scatter, all-gather or all-reduce) tagged `algorithm`.
pub fn compose_rdh(leg: &Leg, algorithm: Algorithm) -> Result<ComposedLeg> {
    let n = leg.n();
    if n == 0 || !n.is_power_of_two() {
        return Err(Error::invalid(format!(
            "RDH needs a power-of-two group (rank_n = 2^k, docs/contract/lowering.md §4.8); this \
             leg has {n} ranks"
        )));
    }
    if leg
        .order
        .iter()
        .any(|&r| r as usize >= leg.src_block.len() || r as usize >= leg.dst_block.len())
    {
        return Err(Error::invalid(
            "RDH leg: some rank has no source/destination block",
        ));
    }
    let k = n.trailing_zeros();
    let slot = leg
        .order
        .iter()
        .map(|&r| leg.src_block[r as usize].1)
        .max()
        .unwrap_or(0);
    let op = || {
        leg.request.reduce.ok_or_else(|| {
            Error::invalid(format!(
                "{:?} needs a reduce op; the request has none",
                leg.op
            ))
        })
    };
    let (scratch, sems) = match leg.op {
        CollectiveOp::ReduceScatter => ((2u64 << k) - 1, k),
        CollectiveOp::AllReduce => ((2u64 << k) - 1, 2 * k),
        CollectiveOp::AllGather => (0, k),
        other => {
            return Err(Error::invalid(format!(
                "RDH composes all-gather, reduce-scatter and all-reduce, not {other:?}"
            )))
        }
    };
    let topsp = (leg.topsp_of_channel)(0);
    let mut entries = BTreeMap::new();
    for (p, &me) in leg.order.iter().enumerate() {
        let mut r = Rank {
            leg,
            me,
            p: p as u32,
            k,
            topsp,
            slot,
            steps: Vec::new(),
        };
        match leg.op {
            CollectiveOp::ReduceScatter | CollectiveOp::AllReduce => {
                if k == 0 {
                    let mut st = r.step(Primitive::DirectCopy, 0);
                    st.transfers = r.copy(r.src(me, 0), r.dst(me, 0), r.len(0));
                    r.steps.push(st);
                } else {
                    r.reduce_scatter(op()?);
                }
                if leg.op == CollectiveOp::AllReduce {
                    r.all_gather(k);
                }
            }
            _ => {
                let mut st = r.step(Primitive::DirectCopy, p as u32);
                st.transfers = r.copy(r.src(me, p as u32), r.dst(me, p as u32), r.len(p as u32));
                if !st.transfers.is_empty() {
                    r.steps.push(st);
                }
                r.all_gather(0);
            }
        }
        let entry = Entry {
            leg: format!("{} {:?}", algorithm.name(), leg.op),
            algorithm,
            mesh_sub_type: None,
            ranks: leg.order.clone(),
            tapes: vec![Tape {
                channel: 0,
                topsp,
                steps: r.steps,
            }],
        };
        entries.insert(me, entry);
    }
    Ok(ComposedLeg {
        entries,
        scratch_elems: scratch * slot,
        sems_used: sems as u8,
    })
}

#[cfg(test)]
mod tests;

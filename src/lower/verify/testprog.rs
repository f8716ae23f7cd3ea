//! Hand-built programs for the verifier's tests (independent of the composers): a ring all-reduce
//! per docs/contract/lowering.md §4.2 (partials pushed into the receiver's scratch, one receive
//! semaphore per (rank, channel) as in `compose::SemPlan`), a ring all-gather (§4.3), a mesh
//! all-reduce (§4.6: broadcast to scratch, one G-source reduce, broadcast of the result; waits
//! consume `wait_val`), an implicit permute, a barrier, and two-entry programs for the order
//! between TOP_SPs across entries (`verify::lanes`).

use crate::isa::enums::Dtype;
use crate::lower::compose::{loc, split_even, ChunkPlan, SemPlan};
use crate::lower::program::{
    Algorithm, Buf, Entry, Half, Loc, Primitive, Program, RankProgram, RingShape, Sem, Signal,
    SignalKind, Step, Tape, Transfer, Wait,
};
use crate::lower::request::{CollectiveOp, CollectiveRequest, ReduceOp};

/// A request over `n` ranks.
pub fn request(op: CollectiveOp, n: u32, count: u64) -> CollectiveRequest {
    let reducing = matches!(
        op,
        CollectiveOp::AllReduce | CollectiveOp::ReduceScatter | CollectiveOp::PermuteReduceImplicit
    );
    CollectiveRequest::new(
        op,
        Dtype::Bf16,
        reducing.then_some(ReduceOp::Add),
        count,
        (0..n).collect(),
        0,
    )
}

/// A step with no wait, transfers or signals.
pub fn step(primitive: Primitive, chunk: u32) -> Step {
    Step {
        primitive,
        half: Half::H0,
        chunk,
        reduction: primitive
            .is_reduce()
            .then_some((ReduceOp::Add, RingShape::Ring2R1W)),
        wait: None,
        transfers: Vec::new(),
        signals: Vec::new(),
        event_type: None,
    }
}

/// One entry per rank, each with the given tapes.
pub fn program(
    request: CollectiveRequest,
    algorithm: Algorithm,
    scratch_elems: u64,
    tapes: Vec<Vec<Tape>>,
) -> Program {
    let n = request.rank_n();
    let leg = format!("{:?}", request.op);
    Program {
        request,
        selection: Vec::new(),
        ranks: tapes
            .into_iter()
            .enumerate()
            .map(|(r, tapes)| RankProgram {
                rank: r as u32,
                scratch_elems,
                entries: vec![Entry {
                    leg: leg.clone(),
                    algorithm,
                    mesh_sub_type: None,
                    ranks: (0..n).collect(),
                    tapes,
                }],
            })
            .collect(),
    }
}

const SEMS: SemPlan = SemPlan { base: 8 };

fn reduce(
    srcs: Vec<crate::lower::program::Loc>,
    dst: crate::lower::program::Loc,
    len: u64,
) -> Transfer {
    Transfer::Reduce {
        op: ReduceOp::Add,
        shape: RingShape::Ring2R1W,
        srcs,
        dst,
        len,
    }
}

/// Ring all-reduce (docs/contract/lowering.md §4.2) over the ring `order` with `channels` channels
/// and chunks of `chunk` elements. Blocks are the near-equal split of `count`; every block is cut
/// at the offsets of the largest one (shorter blocks clip, possibly to empty transfers).
pub fn ring_all_reduce(order: &[u32], count: u64, channels: u8, chunk: u64) -> Program {
    let n = order.len() as u32;
    let req = request(CollectiveOp::AllReduce, n, count);
    let blocks = split_even(count, n);
    let plan = ChunkPlan::new(blocks[0].1, channels, chunk).unwrap();
    let mut tapes = vec![Vec::new(); n as usize];
    for (p, &r) in order.iter().enumerate() {
        let na = |i: u32| order[(p + i as usize) % n as usize];
        let next = na(1);
        for c in 0..plan.channels {
            let mut steps = Vec::new();
            if n == 1 {
                let mut s = step(Primitive::DirectCopy, r);
                s.transfers.push(Transfer::Copy {
                    src: loc(r, Buf::Input, 0),
                    dst: loc(r, Buf::Output, 0),
                    len: count,
                });
                if c == 0 {
                    steps.push(s);
                }
            }
            for (j, &(po, pl)) in plan.pieces(c).iter().enumerate() {
                if n == 1 {
                    break;
                }
                // Elements [start, start + len) of chunk k's block for this piece.
                let piece = |k: u32| {
                    let (off, blen) = blocks[k as usize];
                    let a = po.min(blen);
                    let b = (po + pl).min(blen);
                    (off + a, b - a)
                };
                let half = if j % 2 == 0 { Half::H0 } else { Half::H1 };
                let wait = Some(SEMS.wait_recv(r, c, 0));
                let legs = SEMS.leg_signals(r, next, c, 0);
                let mut push = |mut s: Step| {
                    s.half = half;
                    steps.push(s);
                };
                // s = 1: raw local data to NEXT's scratch.
                let k = na(n - 1);
                let (a, len) = piece(k);
                let mut s = step(Primitive::Send, k);
                s.transfers.push(Transfer::Copy {
                    src: loc(r, Buf::Input, a),
                    dst: loc(next, Buf::Scratch, a),
                    len,
                });
                s.signals = legs.clone();
                push(s);
                // s = 2 .. N-1: incoming ⊕ local → NEXT's scratch.
                for st in 2..n {
                    let k = na(n - st);
                    let (a, len) = piece(k);
                    let mut s = step(Primitive::RecvReduceSend, k);
                    s.wait = wait;
                    s.transfers.push(reduce(
                        vec![loc(r, Buf::Input, a), loc(r, Buf::Scratch, a)],
                        loc(next, Buf::Scratch, a),
                        len,
                    ));
                    s.signals = legs.clone();
                    push(s);
                }
                // s = N: finish the own block, then send it on.
                let (a, len) = piece(r);
                let mut s = step(Primitive::RecvReduceCopy, r);
                s.wait = wait;
                s.transfers.push(reduce(
                    vec![loc(r, Buf::Input, a), loc(r, Buf::Scratch, a)],
                    loc(r, Buf::Output, a),
                    len,
                ));
                s.signals = vec![legs[0]];
                push(s);
                let mut s = step(Primitive::DirectCopySend, r);
                s.transfers.push(Transfer::Copy {
                    src: loc(r, Buf::Output, a),
                    dst: loc(next, Buf::Output, a),
                    len,
                });
                s.signals = legs.clone();
                push(s);
                // t = 1 .. N-2: store (already landed) and forward.
                for t in 1..n - 1 {
                    let k = na(n - t);
                    let (a, len) = piece(k);
                    let mut s = step(Primitive::DirectRecvSend, k);
                    s.wait = wait;
                    s.transfers.push(Transfer::Copy {
                        src: loc(r, Buf::Output, a),
                        dst: loc(next, Buf::Output, a),
                        len,
                    });
                    s.signals = legs.clone();
                    push(s);
                }
                // t = N-1: the last block lands; nothing to forward.
                let mut s = step(Primitive::DirectRecv, na(1));
                s.wait = wait;
                push(s);
            }
            tapes[r as usize].push(Tape {
                channel: c,
                topsp: 0,
                steps,
            });
        }
    }
    program(req, Algorithm::Ring, count, tapes)
}

/// Ring all-gather (docs/contract/lowering.md §4.3), identity ring, one piece per block.
pub fn ring_all_gather(n: u32, count: u64) -> Program {
    let req = request(CollectiveOp::AllGather, n, count);
    let mut tapes = Vec::new();
    for r in 0..n {
        let na = |i: u32| (r + i) % n;
        let next = na(1);
        let wait = Some(SEMS.wait_recv(r, 0, 0));
        let legs = SEMS.leg_signals(r, next, 0, 0);
        let mut steps = Vec::new();
        let mut s = step(Primitive::DirectCopySend, r);
        s.transfers = vec![
            Transfer::Copy {
                src: loc(r, Buf::Input, 0),
                dst: loc(r, Buf::Output, u64::from(r) * count),
                len: count,
            },
            Transfer::Copy {
                src: loc(r, Buf::Input, 0),
                dst: loc(next, Buf::Output, u64::from(r) * count),
                len: count,
            },
        ];
        s.signals = legs.clone();
        steps.push(s);
        for t in 1..n - 1 {
            let k = na(n - t);
            let mut s = step(Primitive::DirectRecvSend, k);
            s.wait = wait;
            s.transfers.push(Transfer::Copy {
                src: loc(r, Buf::Output, u64::from(k) * count),
                dst: loc(next, Buf::Output, u64::from(k) * count),
                len: count,
            });
            s.signals = legs.clone();
            steps.push(s);
        }
        let mut s = step(Primitive::DirectRecv, na(1));
        s.wait = wait;
        steps.push(s);
        tapes.push(vec![Tape {
            channel: 0,
            topsp: 0,
            steps,
        }]);
    }
    program(req, Algorithm::Ring, 0, tapes)
}

/// Semaphore `id` of `rank`'s TOP_SP 0.
pub fn sem(rank: u32, id: u8) -> Sem {
    Sem { rank, topsp: 0, id }
}

fn remote(rank: u32, id: u8) -> Signal {
    Signal {
        sem: sem(rank, id),
        amount: 1,
        kind: SignalKind::Remote,
    }
}

/// Mesh all-reduce (docs/contract/lowering.md §4.6): every rank broadcasts its input into slot `r`
/// of every peer's scratch (event 0), reduces the `n` copies of its own slice in one n-source
/// reduce and writes the result to every peer's output (event 1), then waits for every peer's slice
/// (event 2). Waits are "≥ wait_val, then subtract wait_val" with wait_val = n − 1.
pub fn mesh_all_reduce(n: u32, count: u64) -> Program {
    let req = request(CollectiveOp::AllReduce, n, count);
    let slices = split_even(count, n);
    let wait = |r: u32, id: u8| Wait {
        sem: sem(r, id),
        target: n - 1,
        consume: n - 1,
    };
    let mut tapes = Vec::new();
    for r in 0..n {
        let peers: Vec<u32> = (0..n).filter(|&q| q != r).collect();
        let mut e0 = step(Primitive::MeshEvent, r);
        e0.event_type = Some(7);
        for &q in &peers {
            e0.transfers.push(Transfer::Copy {
                src: loc(r, Buf::Input, 0),
                dst: loc(q, Buf::Scratch, u64::from(r) * count),
                len: count,
            });
            e0.signals.push(remote(q, 8));
        }
        let (off, len) = slices[r as usize];
        let mut e1 = step(Primitive::MeshEvent, r);
        e1.event_type = Some(10);
        e1.reduction = Some((ReduceOp::Add, RingShape::KangaringNR1W));
        e1.wait = Some(wait(r, 8));
        let mut srcs = vec![loc(r, Buf::Input, off)];
        srcs.extend(
            peers
                .iter()
                .map(|&q| loc(r, Buf::Scratch, u64::from(q) * count + off)),
        );
        e1.transfers.push(Transfer::Reduce {
            op: ReduceOp::Add,
            shape: RingShape::KangaringNR1W,
            srcs,
            dst: loc(r, Buf::Output, off),
            len,
        });
        for &q in &peers {
            e1.transfers.push(Transfer::Copy {
                src: loc(r, Buf::Output, off),
                dst: loc(q, Buf::Output, off),
                len,
            });
            e1.signals.push(remote(q, 9));
        }
        let mut e2 = step(Primitive::MeshEvent, r);
        e2.event_type = Some(0);
        e2.wait = Some(wait(r, 9));
        tapes.push(vec![Tape {
            channel: 0,
            topsp: 0,
            steps: vec![e0, e1, e2],
        }]);
    }
    program(req, Algorithm::Mesh, u64::from(n) * count, tapes)
}

/// Implicit permute: every rank writes its input into its successor's output, then waits
/// for its predecessor's.
pub fn permute_implicit(n: u32, count: u64) -> Program {
    let req = request(CollectiveOp::PermuteImplicit, n, count);
    let tapes = (0..n)
        .map(|r| {
            let next = (r + 1) % n;
            let mut s = step(Primitive::Send, r);
            s.transfers.push(Transfer::Copy {
                src: loc(r, Buf::Input, 0),
                dst: loc(next, Buf::Output, 0),
                len: count,
            });
            s.signals.push(remote(next, 8));
            let mut w = step(Primitive::DirectRecv, (r + n - 1) % n);
            w.wait = Some(Wait {
                sem: sem(r, 8),
                target: 1,
                consume: 1,
            });
            vec![Tape {
                channel: 0,
                topsp: 0,
                steps: vec![s, w],
            }]
        })
        .collect();
    program(req, Algorithm::Ring, 0, tapes)
}

/// Barrier: every rank signals every peer, then waits for all of them.
pub fn barrier(n: u32) -> Program {
    let req = request(CollectiveOp::Barrier, n, 0);
    let tapes = (0..n)
        .map(|r| {
            let mut s = step(Primitive::MeshEvent, r);
            s.signals = (0..n).filter(|&q| q != r).map(|q| remote(q, 8)).collect();
            let mut w = step(Primitive::MeshEvent, r);
            w.wait = Some(Wait {
                sem: sem(r, 8),
                target: n - 1,
                consume: n - 1,
            });
            vec![Tape {
                channel: 0,
                topsp: 0,
                steps: vec![s, w],
            }]
        })
        .collect();
    program(req, Algorithm::Mesh, 0, tapes)
}

/// A tape of `steps` on `channel`, driven by TOP_SP `channel % 2` (the pipeline's map).
fn tape(channel: u8, steps: Vec<Step>) -> Tape {
    Tape {
        channel,
        topsp: channel % 2,
        steps,
    }
}

/// A two-entry rank program of all-gather over ranks {0, 1}.
fn two_entries(rank: u32, count: u64, first: Vec<Tape>, second: Vec<Tape>) -> RankProgram {
    let entry = |leg: &str, tapes| Entry {
        leg: leg.into(),
        algorithm: Algorithm::Ring,
        mesh_sub_type: None,
        ranks: vec![0, 1],
        tapes,
    };
    RankProgram {
        rank,
        scratch_elems: count,
        entries: vec![entry("stage", first), entry("deliver", second)],
    }
}

/// Rank `r` of two: send the input to the peer's scratch (data-ready semaphore `id` on the
/// peer's TOP_SP `topsp`), then wait for the peer's.
fn stage_steps(r: u32, count: u64, topsp: u8, id: u8) -> Vec<Step> {
    let q = 1 - r;
    let mut send = step(Primitive::Send, r);
    send.transfers = vec![Transfer::Copy {
        src: loc(r, Buf::Input, 0),
        dst: loc(q, Buf::Scratch, 0),
        len: count,
    }];
    send.signals = vec![Signal {
        sem: Sem { rank: q, topsp, id },
        amount: 1,
        kind: SignalKind::Remote,
    }];
    let mut recv = step(Primitive::DirectRecv, q);
    recv.wait = Some(Wait {
        sem: Sem { rank: r, topsp, id },
        target: 1,
        consume: 1,
    });
    vec![send, recv]
}

/// `rank`'s copy of `src` into its output block `block`.
fn deliver(rank: u32, src: Loc, block: u32, count: u64) -> Step {
    let mut s = step(Primitive::DirectCopy, block);
    s.transfers = vec![Transfer::Copy {
        src,
        dst: loc(rank, Buf::Output, u64::from(block) * count),
        len: count,
    }];
    s
}

/// HIER-2CH's shape on two ranks (all-gather of `count`): entry 0 ("stage") runs on channel 0
/// only (TOP_SP 0) and leaves the peer's input in scratch; entry 1 ("deliver") copies the own
/// input on channel 0 (TOP_SP 0) and the staged peer input on channel 1 (TOP_SP 1). Channel
/// 1 reads what another TOP_SP's earlier entry wrote, which the device orders only with a
/// join (`compose::leg_join`, added when `join`).
pub fn staged_all_gather(count: u64, join: bool) -> Program {
    let req = request(CollectiveOp::AllGather, 2, count);
    let ranks = (0..2u32)
        .map(|r| {
            let q = 1 - r;
            let mut rp = two_entries(
                r,
                count,
                vec![tape(0, stage_steps(r, count, 0, 8))],
                vec![
                    tape(0, vec![deliver(r, loc(r, Buf::Input, 0), r, count)]),
                    tape(1, vec![deliver(r, loc(r, Buf::Scratch, 0), q, count)]),
                ],
            );
            if join {
                let (a, b) = rp.entries.split_at_mut(1);
                crate::lower::compose::leg_join::join_entries(&mut a[0], &mut b[0], r, 9);
            }
            rp
        })
        .collect();
    Program {
        request: req,
        selection: Vec::new(),
        ranks,
    }
}

/// The order the device does give between entries (docs/contract/lowering.md §6.3), on two ranks:
/// entry 0 ("stage") on channel 0 (TOP_SP 0, the reporter: copies the own input) and channel 1
/// (TOP_SP 1: stages the peer's input in scratch); entry 1 ("deliver") on channel 0 only copies the
/// staged input. No join: TOP_SP 0, reporter of entry 0, waits for TOP_SP 1's completion before it
/// starts entry 1.
pub fn reporter_ordered_all_gather(count: u64) -> Program {
    let req = request(CollectiveOp::AllGather, 2, count);
    let ranks = (0..2u32)
        .map(|r| {
            let q = 1 - r;
            two_entries(
                r,
                count,
                vec![
                    tape(0, vec![deliver(r, loc(r, Buf::Input, 0), r, count)]),
                    tape(1, stage_steps(r, count, 1, 8)),
                ],
                vec![tape(0, vec![deliver(r, loc(r, Buf::Scratch, 0), q, count)])],
            )
        })
        .collect();
    Program {
        request: req,
        selection: Vec::new(),
        ranks,
    }
}

//! Golden and property tests of the emitter and the decode-back check.

use super::*;
use crate::isa::ccop::SPAD_SLOT_CONTINUE_MARK;
use crate::isa::enums::Dtype;
use crate::lower::addrmap::{BufferSizes, Generation, RankPlace};
use crate::lower::emit::check::decode_back;
use crate::lower::program::{
    Algorithm, Buf, Entry, Half, Loc, Primitive, RankProgram, RingShape, Signal, SignalKind, Tape,
    Transfer, Wait,
};
use crate::lower::request::{CollectiveOp, CollectiveRequest, ReduceOp};

fn request(n: u32, count: u64, dtype: Dtype) -> CollectiveRequest {
    CollectiveRequest::new(
        CollectiveOp::AllReduce,
        dtype,
        Some(ReduceOp::Add),
        count,
        (0..n).collect(),
        0,
    )
}

fn step(
    primitive: Primitive,
    wait: Option<Wait>,
    transfers: Vec<Transfer>,
    signals: Vec<Signal>,
) -> Step {
    let reduction = transfers.iter().find_map(|t| match t {
        Transfer::Reduce { op, shape, .. } => Some((*op, *shape)),
        _ => None,
    });
    Step {
        primitive,
        half: Half::H0,
        chunk: 0,
        reduction,
        wait,
        transfers,
        signals,
        event_type: None,
    }
}

/// One entry, one tape (channel 0 on TOP_SP 0) per rank.
fn program(req: CollectiveRequest, tapes: Vec<Vec<Step>>) -> Program {
    let n = tapes.len() as u32;
    let ranks = tapes
        .into_iter()
        .enumerate()
        .map(|(r, steps)| RankProgram {
            rank: r as u32,
            scratch_elems: 0,
            entries: vec![Entry {
                leg: "test".into(),
                algorithm: Algorithm::Ring,
                mesh_sub_type: None,
                ranks: (0..n).collect(),
                tapes: vec![Tape {
                    channel: 0,
                    topsp: 0,
                    steps,
                }],
            }],
        })
        .collect();
    Program {
        request: req,
        selection: vec![],
        ranks,
    }
}

fn map(n: u32, gen: Generation, bytes: u64) -> AddressMap {
    // One rank per chip: every peer address is routed.
    let places = (0..n)
        .map(|d| RankPlace {
            node: 0,
            device: d,
            core: 0,
        })
        .collect();
    AddressMap::new(
        places,
        1,
        gen,
        BufferSizes {
            input: bytes,
            output: bytes,
            scratch: bytes,
            in_place: false,
        },
    )
    .unwrap()
}

fn sem(rank: u32, id: u8) -> Sem {
    Sem { rank, topsp: 0, id }
}
fn sig(rank: u32, id: u8, kind: SignalKind) -> Signal {
    Signal {
        sem: sem(rank, id),
        amount: 1,
        kind,
    }
}
fn loc(rank: u32, buf: Buf, offset: u64) -> Loc {
    Loc { rank, buf, offset }
}

/// 2 ranks, 1 channel: step 0 copies 8 bf16 input elements to the peer's scratch (LOCAL +1 on
/// own sem 9, REMOTE +1 on the peer's sem 8); step 1 waits sem 8 ≥ 1 (−1), reduces
/// input + scratch → output with ADD, then LOCAL +1 on sem 9.
fn tiny() -> (Program, AddressMap) {
    let tapes = (0..2u32)
        .map(|r| {
            let q = 1 - r;
            vec![
                step(
                    Primitive::DirectCopySend,
                    None,
                    vec![Transfer::Copy {
                        src: loc(r, Buf::Input, 0),
                        dst: loc(q, Buf::Scratch, 0),
                        len: 8,
                    }],
                    vec![sig(r, 9, SignalKind::Local), sig(q, 8, SignalKind::Remote)],
                ),
                step(
                    Primitive::RecvReduceCopy,
                    Some(Wait {
                        sem: sem(r, 8),
                        target: 1,
                        consume: 1,
                    }),
                    vec![Transfer::Reduce {
                        op: ReduceOp::Add,
                        shape: RingShape::Ring2R1W,
                        srcs: vec![loc(r, Buf::Input, 0), loc(r, Buf::Scratch, 0)],
                        dst: loc(r, Buf::Output, 0),
                        len: 8,
                    }],
                    vec![sig(r, 9, SignalKind::Local)],
                ),
            ]
        })
        .collect();
    (
        program(request(2, 8, Dtype::Bf16), tapes),
        map(2, Generation::V3, 16),
    )
}

/// (W0, W1, W2 | W3 << 32) of a descriptor.
fn words(b: &[u8; 16]) -> (u32, u32, u64) {
    let w = |i: usize| u32::from_le_bytes(b[4 * i..4 * i + 4].try_into().unwrap());
    (w(0), w(1), u64::from(w(2)) | (u64::from(w(3)) << 32))
}

// Rank 0's addresses (addrmap.rs doc): window 0x1000_0000_0000 (2^44), data at +2^36; input,
// output and scratch 4 KiB apart; constant u32 1 at +4. Rank 1 is chip 1: routed addresses
// carry (1 << 54) | (1 << 48) (docs/contract/device.md §1.4).
const IN0: u64 = 0x1010_0000_0000;
const OUT0: u64 = 0x1010_0000_1000;
const SCR0: u64 = 0x1010_0000_2000;
const ONE0: u64 = 0x1000_0000_0004;
const TO_CHIP1: u64 = (1 << 54) | (1 << 48);

#[test]
fn golden_tiny_program_rank0() {
    let (p, m) = tiny();
    let e = emit(&p, &m).unwrap();
    assert_eq!(e.ranks.len(), 2);
    let t = &e.ranks[0].topsps[0];
    assert_eq!(t.topsp, 0);
    let m2s: Vec<_> = t.m2s.iter().map(words).collect();
    assert_eq!(
        m2s,
        vec![
            // step 0, copy: TX data, 16 B, RING_ID 1, FIRST|LAST
            // (docs/contract/device.md §1.1, §1.3); CME default meta_ctrl.
            (0x0D00_0010, 0x0108_0003, IN0),
            // step 0, LOCAL signal: 4-byte copy of the constant 1 (docs/contract/device.md §1.2,
            // docs/contract/lowering.md §6.4).
            (0x0D00_0004, 0x0108_0003, ONE0),
            // step 0, REMOTE signal: same source.
            (0x0D00_0004, 0x0108_0003, ONE0),
            // step 1, CCE source 0: META|RING_ID 1|FIRST; ADD bf16 accum FP32R, not last; 16 B
            // (docs/contract/device.md §2.1, §2.2).
            (0x0580_0000, 0x020B_6000, 16),
            // step 1, source 0 data: 16 B of the input, W1 = 0 (class from the compute descriptor).
            (0x0100_0010, 0, IN0),
            // step 1, CCE source 1: "last" (bit 7) set on the final source only
            // (docs/contract/device.md §2.1).
            (0x0180_0000, 0x020B_6080, 16),
            // step 1, source 1 data: scratch, LAST ends the packet.
            (0x0900_0010, 0, SCR0),
            // step 1, LOCAL signal.
            (0x0D00_0004, 0x0108_0003, ONE0),
        ]
    );
    let s2m: Vec<_> = t.s2m.iter().map(words).collect();
    assert_eq!(
        s2m,
        vec![
            // step 0: RX data into rank 1's scratch, routed to chip 1
            // (docs/contract/device.md §1.4).
            (0x0D00_0010, 0, TO_CHIP1 | SCR0),
            // step 0: INC of own TOP_SP 0 sem 9 = 0x8280000000 + 0x1800 + 4·9, DMB set
            // (docs/contract/device.md §5.1, §1.1).
            (0x4D00_0004, 0, 0x82_8000_1824),
            // step 0: INC of rank 1's sem 8, routed to chip 1
            // (docs/contract/lowering.md §6.4 REMOTE).
            (0x4D00_0004, 0, TO_CHIP1 | 0x82_8000_1820),
            // step 1: the reduced stream into the output (docs/contract/device.md §2.1 item 3).
            (0x0D00_0010, 0, OUT0),
            // step 1: INC of own sem 9.
            (0x4D00_0004, 0, 0x82_8000_1824),
        ]
    );
    // Rings: next power of two ≥ n + 16, at least 32 (docs/contract/device.md §3.1–§3.2).
    assert_eq!((t.m2s_ring_len, t.s2m_ring_len), (32, 32));
    // CTRL SPAD (docs/contract/lowering.md §6.1, seed 003): cc_op=1; RING (0); no trigger_next
    // (last entry); reporter (channel 0); no chaining (one TOP_SP); channel_list = 1 << 0.
    assert_eq!(
        t.ctrl_spad,
        vec![0x01, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x00]
    );
    // SLOT SPAD (emit_slot.rs format): step 0 releases 3/3, no wait; step 1 waits sem 8 ≥ 1
    // then −1 (docs/contract/device.md §5.3), releases 5/2, END.
    assert_eq!(t.slot_spad.len(), 1024);
    assert_eq!(
        &t.slot_spad[..16],
        &[3, 0, 3, 0, 1, 0, 0xFF, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    );
    assert_eq!(
        &t.slot_spad[16..32],
        &[5, 0, 2, 0, 1, 0, 8, 0x10, 1, 0, 0, 0, 1, 0, 0, 0]
    );
    assert!(t.slot_spad[32..].iter().all(|&b| b == 0));
    assert_eq!(t.steps[0].m2s, 0..3);
    assert_eq!(t.steps[1].s2m, 3..5);
    // neff_configs values (docs/contract/lowering.md §6.3), semaphores in READ form
    // (docs/contract/device.md §9.2).
    let n = t.neff;
    assert_eq!(n.trigger, 0x82_8000_1000); // id 0
    assert_eq!(n.trigger_next, 0x82_8000_13F4); // id 253
    assert_eq!(
        (n.complete, n.complete_prev, n.op_num, n.leader),
        (0, 0, 1, true)
    );
    assert_eq!(n.ctrl_spad_base, 0x1000_1000_0000);
    assert_eq!(n.slot_spad_base, 0x1000_1000_1000);
    assert_eq!(n.m2s_ring_base, 0x1000_1010_0000);
    assert_eq!(n.s2m_ring_base, 0x1000_3000_0000);
    assert_eq!(e.descriptor_counts(), (16, 10));
    decode_back(&e, &p, &m).unwrap();
}

#[test]
fn golden_tiny_program_rank1_routes_back_to_chip0() {
    let (p, m) = tiny();
    let e = emit(&p, &m).unwrap();
    let t = &e.ranks[1].topsps[0];
    const TO_CHIP0: u64 = 1 << 54; // chip id 0 with id-valid (docs/contract/device.md §1.4)
    assert_eq!(words(&t.m2s[0]).2, IN0); // rank 1's own input: same on-chip offsets, unrouted
    assert_eq!(words(&t.s2m[0]).2, TO_CHIP0 | SCR0);
    assert_eq!(words(&t.s2m[2]).2, TO_CHIP0 | 0x82_8000_1820);
}

#[test]
fn decode_back_catches_corruption() {
    // Checks the report text a user reads, on purpose.
    let (p, m) = tiny();
    let good = emit(&p, &m).unwrap();
    // Point the CCE source 1 data descriptor two bytes into the scratch.
    let mut e = good.clone();
    e.ranks[0].topsps[0].m2s[6][8] += 2;
    let err = decode_back(&e, &p, &m).unwrap_err().to_string();
    assert!(
        err.contains("rank 0 TOP_SP 0")
            && err.contains("M2S descriptor #6")
            && err.contains("resolves to"),
        "{err}"
    );
    // Output dtype nibble bf16 (6) → fp16 (7) on the last compute descriptor.
    let mut e = good.clone();
    e.ranks[1].topsps[0].m2s[5][5] = 0x70;
    let err = decode_back(&e, &p, &m).unwrap_err().to_string();
    assert!(
        err.contains("rank 1 TOP_SP 0")
            && err.contains("M2S descriptor #5")
            && err.contains("dtype 7"),
        "{err}"
    );
    // A stale generation tag.
    let mut e = good.clone();
    e.ranks[0].topsps[0].s2m[4][3] ^= 0x03;
    let err = decode_back(&e, &p, &m).unwrap_err().to_string();
    assert!(
        err.contains("S2M descriptor #4") && err.contains("RING_ID"),
        "{err}"
    );
    // A wait record that no longer matches the step.
    let mut e = good.clone();
    e.ranks[0].topsps[0].slot_spad[16 + 8] = 2;
    let err = decode_back(&e, &p, &m).unwrap_err().to_string();
    assert!(err.contains("SLOT record 1"), "{err}");
    // The LOCAL increment sent to the wrong semaphore.
    let mut e = good;
    e.ranks[0].topsps[0].s2m[1][8] = 0x28;
    let err = decode_back(&e, &p, &m).unwrap_err().to_string();
    assert!(err.contains("S2M descriptor #1"), "{err}");
}

fn reduce_step(r: u32, len: u64) -> Step {
    step(
        Primitive::RecvReduceCopy,
        None,
        vec![Transfer::Reduce {
            op: ReduceOp::Max,
            shape: RingShape::Ring2R1W,
            srcs: vec![loc(r, Buf::Input, 0), loc(r, Buf::Scratch, 0)],
            dst: loc(r, Buf::Output, 0),
            len,
        }],
        vec![],
    )
}

/// docs/contract/lowering.md §5.1–§5.2: 2048 CCE elements per packet on v3/v4, 1024 on v2.
#[test]
fn cce_tiling_caps() {
    for (gen, dtype, len, pkts) in [
        (
            Generation::V3,
            Dtype::Bf16,
            5000u64,
            vec![2048u32, 2048, 904],
        ),
        (
            Generation::V2,
            Dtype::Bf16,
            5000,
            vec![1024, 1024, 1024, 1024, 904],
        ),
        (Generation::V3, Dtype::Fp32, 2049, vec![2048, 1]),
        (Generation::V4, Dtype::Fp8E4, 2048, vec![2048]),
        (Generation::V3, Dtype::Fp16, 7, vec![7]),
    ] {
        let esz = dtype.size_bytes().unwrap() as u64;
        let p = program(request(1, len, dtype), vec![vec![reduce_step(0, len)]]);
        let m = map(1, gen, len * esz);
        let e = emit(&p, &m).unwrap();
        let t = &e.ranks[0].topsps[0];
        let rx: Vec<u32> = t
            .s2m
            .iter()
            .map(|b| words(b).0 & 0xFFFF)
            .map(|l| l / esz as u32)
            .collect();
        assert_eq!(rx, pkts, "{gen:?} {dtype:?} {len}");
        assert_eq!(t.m2s.len(), 4 * pkts.len());
        decode_back(&e, &p, &m).unwrap();
    }
}

/// docs/contract/lowering.md §5.2: ≤ 64 KiB per data descriptor (LENGTH 0 = 65536), ≤ 60 per v3
/// packet.
#[test]
fn copy_tiling_caps() {
    let elems = (61 * 65536 + 100) / 2; // 61 full descriptors and a 100-byte tail, bf16
    let copy = step(
        Primitive::DirectCopy,
        None,
        vec![Transfer::Copy {
            src: loc(0, Buf::Input, 0),
            dst: loc(0, Buf::Output, 0),
            len: elems,
        }],
        vec![],
    );
    let p = program(request(1, elems, Dtype::Bf16), vec![vec![copy]]);
    let m = map(1, Generation::V3, elems * 2);
    let e = emit(&p, &m).unwrap();
    let t = &e.ranks[0].topsps[0];
    assert_eq!(t.m2s.len(), 62);
    assert_eq!(words(&t.m2s[0]).0, 0x0500_0000); // 65536 B, FIRST
    assert_eq!(words(&t.m2s[59]).0, 0x0900_0000); // packet 1 ends after 60 descriptors
    assert_eq!(words(&t.m2s[60]).0, 0x0500_0000); // packet 2
    assert_eq!(words(&t.m2s[61]).0, 0x0900_0064); // 100-byte tail, LAST
    decode_back(&e, &p, &m).unwrap();
    // Zero-length transfers emit no data descriptors.
    let z = step(
        Primitive::DirectCopy,
        None,
        vec![Transfer::Copy {
            src: loc(0, Buf::Input, 0),
            dst: loc(0, Buf::Output, 0),
            len: 0,
        }],
        vec![],
    );
    let p = program(request(1, 0, Dtype::Bf16), vec![vec![z, reduce_step(0, 0)]]);
    let e = emit(&p, &m).unwrap();
    assert_eq!(e.descriptor_counts(), (0, 0));
    decode_back(&e, &p, &m).unwrap();
}

/// docs/contract/device.md §1.3 / §3.2: a stream longer than the ring wraps; tags go 1, 2, 3, 0; a
/// step with more descriptors than ring − 16 is released by several records.
#[test]
fn ring_wrap_tags_and_release_split() {
    // Checks the report text a user reads, on purpose.
    let elems = 20 * 65536 / 2;
    let big = step(
        Primitive::DirectCopy,
        None,
        vec![Transfer::Copy {
            src: loc(0, Buf::Input, 0),
            dst: loc(0, Buf::Output, 0),
            len: elems,
        }],
        vec![sig(0, 9, SignalKind::Local)],
    );
    let steps = vec![big.clone(), big.clone(), big.clone(), big.clone(), big];
    let p = program(request(1, elems, Dtype::Bf16), vec![steps]);
    let m = map(1, Generation::V3, elems * 2);
    let e = emit_with(&p, &m, &EmitOptions { max_ring: 32 }).unwrap();
    let t = &e.ranks[0].topsps[0];
    assert_eq!((t.m2s.len(), t.m2s_ring_len), (105, 32));
    let tags: Vec<u32> = [0usize, 31, 32, 64, 96, 104]
        .iter()
        .map(|&i| (words(&t.m2s[i]).0 >> 24) & 3)
        .collect();
    assert_eq!(tags, vec![1, 1, 2, 3, 0, 0]);
    assert_eq!(t.steps[0].records.len(), 2); // 21 descriptors > 32 − 16
    decode_back(&e, &p, &m).unwrap();
    let mut bad = e.clone();
    bad.ranks[0].topsps[0].m2s[40][3] = (bad.ranks[0].topsps[0].m2s[40][3] & !3) | 1;
    let err = decode_back(&bad, &p, &m).unwrap_err().to_string();
    assert!(
        err.contains("M2S descriptor #40") && err.contains("lap tag 2"),
        "{err}"
    );
}

/// docs/contract/lowering.md §6.2: a cc_op whose records overflow a slot continues in the next,
/// marked.
#[test]
fn slot_continuation() {
    let one = step(
        Primitive::DirectCopy,
        None,
        vec![Transfer::Copy {
            src: loc(0, Buf::Input, 0),
            dst: loc(0, Buf::Output, 0),
            len: 1,
        }],
        vec![],
    );
    let p = program(request(1, 1, Dtype::Bf16), vec![vec![one; 70]]);
    let m = map(1, Generation::V3, 2);
    let e = emit(&p, &m).unwrap();
    let t = &e.ranks[0].topsps[0];
    assert_eq!(t.ctrl_spad.len(), 16);
    assert_eq!(&t.ctrl_spad[8..], &SPAD_SLOT_CONTINUE_MARK.to_le_bytes());
    assert_eq!(t.slot_spad.len(), 2048);
    assert_eq!(t.neff.op_num, 1);
    decode_back(&e, &p, &m).unwrap();
}

/// docs/contract/lowering.md §6.1/§6.3: two TOP_SPs in one entry: reporter on channel 0's TOP_SP,
/// which waits for the other's completion; trigger_next on all but the last entry.
#[test]
fn two_topsps_two_entries() {
    let mut p = program(request(1, 1, Dtype::Bf16), vec![vec![]]);
    let e0 = &mut p.ranks[0].entries[0];
    e0.tapes.push(Tape {
        channel: 1,
        topsp: 1,
        steps: vec![],
    });
    let e1 = e0.clone();
    p.ranks[0].entries.push(e1);
    let m = map(1, Generation::V3, 2);
    let e = emit(&p, &m).unwrap();
    let ts = &e.ranks[0].topsps;
    assert_eq!(ts.len(), 2);
    // TOP_SP 0: entry 0 = trigger_next | reporter | ring_wait_complete, channel_list 0b01.
    assert_eq!(
        &ts[0].ctrl_spad[..8],
        &[0x01, 0x80, 0x03, 0x00, 0x01, 0x00, 0x00, 0x00]
    );
    assert_eq!(
        &ts[0].ctrl_spad[8..],
        &[0x01, 0x00, 0x03, 0x00, 0x01, 0x00, 0x00, 0x00]
    );
    // TOP_SP 1: ring_send_complete, channel_list 0b10.
    assert_eq!(
        &ts[1].ctrl_spad[8..],
        &[0x01, 0x00, 0x04, 0x00, 0x02, 0x00, 0x00, 0x00]
    );
    assert_eq!(ts[1].neff.complete, 0x82_8000_13F8); // reporter's sem 254, READ form
    assert_eq!(
        (ts[0].neff.complete_prev, ts[0].neff.complete_prev_target),
        (0x82_8000_13F8, 1)
    );
    decode_back(&e, &p, &m).unwrap();
}

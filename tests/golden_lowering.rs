//! Golden tests: the bytes of four small programs made by
//! the real pipeline (`lower` → `emit`), every descriptor, cc_op entry, SLOT record and semaphore
//! address compared word by word with values derived by hand from the spec — never from the
//! code's own output. The spec formulas and the expected-program models live in
//! `common/golden_lowering_spec.rs` (each with its section); where the vendor spec leaves a layout open, the OpenNRT module doc that fixes it is
//! cited instead.
//!
//! Setting shared by every case (all from documented choices):
//! * `trn2.48xlarge`, LNC 2 by default (src/lower/topology.rs module doc): 8 physical / 2 =
//!   4 logical cores per device; global rank g sits on node 0, device g / 4, core g % 4
//!   ("numbered node-major, then device, then core"). So ranks 0..3 share chip 0 and their
//!   addresses carry no routing bits (device.md §1.4: the plain local address on the same
//!   chip); case 4 puts its two ranks on chips 0 and 1 to pin the routed form.
//! * A rank's TOP_SP t is device TOP_SP `core · 4 + t` (src/lower/addrmap.rs doc: per_rank =
//!   lnc · 16 / 8 = 4); channel c is driven by TOP_SP `c mod 2` (src/lower/pipeline.rs
//!   `topsp_of_channel`), so the single channel 0 of rank r runs on device TOP_SP 4r.
//! * Semaphores of channel 0 (src/lower/compose.rs `SemPlan`, base 8 = first id after the
//!   reserved 0..7 of lowering.md §6.4): receive = 8, local completion = 9, credit = 10.
//!   Ring steps wait `wait_ge_and_dec(recv, 1)` (device.md §5.3; compose/ring_common.rs doc).

#[path = "common/golden_lowering_spec.rs"]
mod spec;

use opennrt::isa::enums::Dtype;
use opennrt::lower::addrmap::AddressMap;
use opennrt::lower::emit::{decode_back, emit, EmittedProgram};
use opennrt::lower::pipeline::{address_map, lower, ChunkSize, LowerConfig};
use opennrt::lower::program::{Algorithm, Half, Primitive, Program, RingShape};
use opennrt::lower::request::{CollectiveOp, CollectiveRequest, ReduceOp};
use opennrt::lower::select::SelectConfig;
use opennrt::lower::topology::Topology;
use opennrt::lower::verify::verify;
use spec::*;

struct Lowered {
    p: Program,
    map: AddressMap,
    e: EmittedProgram,
}

/// Lower, verify, emit and decode back one case: bf16 over the global ids `group` (ring order = group order, the first one is "this rank"), forced ring, 1 channel,
/// chunk 64 elements, trn2.48xlarge.
fn lower_case(op: CollectiveOp, group: &[u32], count: u64) -> Lowered {
    let n = group.len() as u32;
    let reduce = (op == CollectiveOp::AllReduce).then_some(ReduceOp::Add);
    let req = CollectiveRequest::new(op, Dtype::Bf16, reduce, count, group.to_vec(), group[0]);
    let cfg = LowerConfig {
        topology: Topology::parse("trn2.48xlarge", n).expect("topology"),
        select: SelectConfig {
            forced: Some(Algorithm::Ring),
            ..SelectConfig::default()
        },
        channels: 1,
        chunk: ChunkSize::Elems(64),
    };
    let p = lower(&req, &cfg).expect("lower");
    verify(&p).unwrap_or_else(|e| panic!("verify: {e:?}"));
    let map = address_map(&p, &cfg.topology).expect("address map");
    let e = emit(&p, &map).expect("emit");
    decode_back(&e, &p, &map).expect("decode_back");
    Lowered { p, map, e }
}

/// The one ring cc_op of a flat single-channel leg (lowering.md §6.1, seed 003; field choices
/// from src/lower/spad.rs module doc): algo_type RING = 0 (device pattern, design.md §2.5),
/// algo_sub_type 0 (ring leg), trigger_next 0 (the TOP_SP's only entry), reporter 1 (the TOP_SP
/// driving channel 0; the packer asserts `channel id != 0 || reporter`), ring_wait/send_complete
/// 0 (a lone TOP_SP), safe_mode/unique 0, channel_list = 1 << 0.
fn ring_cc_op() -> [u8; 8] {
    let want = cc_op(CcOp {
        reporter: true,
        union: 1,
        ..CcOp::default()
    });
    // By hand: header cc_op = 1; algo byte 0; flags 0b001; pad; channel_list = 1 (LE u32).
    assert_eq!(want, [0x01, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x00]);
    want
}

/// Compare every byte the emitter produced for every rank with the model.
fn check_images(l: &Lowered, group: &[u64], want: &[RankStreams]) {
    let one_chip = group.iter().all(|&g| place(g).chip == place(group[0]).chip);
    assert_eq!(l.e.ranks.len(), want.len());
    for (r, w) in want.iter().enumerate() {
        let er = &l.e.ranks[r];
        assert_eq!(er.rank as usize, r);
        // One TOP_SP per rank: channel 0 → rank-local TOP_SP 0 (pipeline.rs).
        assert_eq!(er.topsps.len(), 1, "rank {r}: TOP_SP images");
        let img = &er.topsps[0];
        assert_eq!(img.topsp, 0);
        check_stream(&format!("rank {r} M2S"), &img.m2s, &w.m2s_bytes());
        check_stream(&format!("rank {r} S2M"), &img.s2m, &w.s2m_bytes());
        // emit.rs doc: ring = smallest power of two ≥ descriptors + 16.
        assert_eq!(img.m2s_ring_len as usize, ring_len(w.m2s.len()), "rank {r}");
        assert_eq!(img.s2m_ring_len as usize, ring_len(w.s2m.len()), "rank {r}");
        // emit_slot.rs doc: the step records of slot 0, END on the last.
        assert_eq!(img.slot_spad, w.slot_spad(), "rank {r} SLOT SPAD");
        assert_eq!(img.ctrl_spad, ring_cc_op(), "rank {r} CTRL SPAD");
        // emit.rs `NeffConfigs` doc: semaphore fields in READ-window form; trigger = own id 0
        // (lowering.md §6.4 TRIGGER), trigger_next = own id 253 (emit.rs NEXT_SEM); a lone
        // reporter TOP_SP has no `complete` / `complete_prev`. Bases: addrmap.rs doc.
        let (t, c) = (place(group[r]).topsp, place(group[r]).core);
        let n = &img.neff;
        assert_eq!(n.trigger, sem_addr(t, WIN_READ, 0), "rank {r} trigger");
        assert_eq!(n.trigger_next, sem_addr(t, WIN_READ, 253), "rank {r}");
        assert_eq!(
            (n.complete, n.complete_prev, n.complete_prev_target),
            (0, 0, 0)
        );
        assert_eq!((n.op_num, n.leader), (1, true), "rank {r}");
        assert_eq!(n.ctrl_spad_base, program(c, 0), "rank {r}");
        assert_eq!(n.slot_spad_base, program(c, 0) + 0x1000, "rank {r}");
        assert_eq!(n.m2s_ring_base, program(c, 0) + 0x10_0000, "rank {r}");
        assert_eq!(n.s2m_ring_base, program(c, 0) + 0x2000_0000, "rank {r}");
        // Same chip everywhere: no address carries chip-id / valid bits (device.md §1.4).
        for d in img.s2m.iter().chain(&img.m2s).filter(|_| one_chip) {
            assert_eq!(d[14..16], [0, 0], "rank {r}: routing bits in {}", words(d));
        }
    }
}

/// Flip one bit of one emitted descriptor; decode_back must fail naming the rank and the
/// descriptor (and `why`).
fn corrupt(l: &Lowered, rank: usize, m2s: bool, idx: usize, byte: usize, bit: u8, why: &str) {
    // Checks the report text a user reads, on purpose.
    let mut e = l.e.clone();
    let img = &mut e.ranks[rank].topsps[0];
    let d = if m2s {
        &mut img.m2s[idx]
    } else {
        &mut img.s2m[idx]
    };
    d[byte] ^= 1 << bit;
    let msg = decode_back(&e, &l.p, &l.map)
        .expect_err("a flipped bit must not decode back")
        .to_string();
    eprintln!("corrupted rank {rank} descriptor #{idx}: {msg}");
    let dir = if m2s { "M2S" } else { "S2M" };
    for part in [format!("rank {rank} "), format!("{dir} descriptor #{idx}")] {
        assert!(msg.contains(&part), "{msg:?} does not name {part:?}");
    }
    assert!(msg.contains(why), "{msg:?} does not say {why:?}");
}

// ---------------------------------------------------------------------------------------------
// Case 1: 2-rank ring all-reduce of 8 bf16 (ADD).
// ---------------------------------------------------------------------------------------------

/// Rank 0 of case 1, every word written out by hand (then the model must agree with it, and
/// the emitter with the model). Addresses (addrmap.rs doc; buffers of 16 bytes each take one
/// 4 KiB page): rank 0 window 2^44 = 0x1000_0000_0000, data at +2^36: input 0x1010_0000_0000,
/// output +0x1000, scratch +0x2000; rank 1 window 0x1100_0000_0000. Constant word 1 of rank 0
/// at window + 4. Semaphores (device.md §5.1): rank 0 = device TOP_SP 0, base 0x82_8000_0000;
/// rank 1 = TOP_SP 4, base 0x82_8000_0000 + (4 << 30) = 0x83_8000_0000; INC window +0x1800.
/// Words (device.md §1.1 len_ctrl, RING_ID 1 = first lap §1.3): a 4-byte FIRST|LAST data
/// descriptor 0x0D00_0004; the same with DMB 0x4D00_0004; CCE compute W0 META|FIRST
/// 0x0580_0000, META only 0x0180_0000; CCE source data 0x0100_0004, LAST 0x0900_0004;
/// CCE ADD meta (§2.2: out BF16 6 << 12, accum FP32R 11 << 16, bit 25) 0x020B_6000, last
/// (bit 7) 0x020B_6080; copy meta 0x0108_0003 (§1.1).
fn case1_rank0_literal() -> (Vec<[u8; 16]>, Vec<[u8; 16]>) {
    const CP: u32 = 0x0108_0003;
    const IN0: u64 = 0x1010_0000_0000;
    const OUT0: u64 = 0x1010_0000_1000;
    const SCR0: u64 = 0x1010_0000_2000;
    const OUT1: u64 = 0x1110_0000_1000;
    const SCR1: u64 = 0x1110_0000_2000;
    const ONE0: u64 = 0x1000_0000_0004; // rank 0's constant word 1
    const LOC0: u64 = 0x82_8000_1824; // INC of rank 0 sem 9 (LOCAL)
    const RCV1: u64 = 0x83_8000_1820; // INC of rank 1 sem 8 (REMOTE)
    let m2s: [(u32, u32, u64); 22] = [
        (0x0D00_0004, CP, IN0 + 8),  // s=1 send chunk 1 H0: input elements 4..6
        (0x0D00_0004, CP, ONE0),     //   LOCAL increment source
        (0x0D00_0004, CP, ONE0),     //   REMOTE increment source
        (0x0D00_0004, CP, IN0 + 12), // send chunk 1 H1: elements 6..8
        (0x0D00_0004, CP, ONE0),
        (0x0D00_0004, CP, ONE0),
        (0x0580_0000, 0x020B_6000, 4), // s=2 recv_reduce_copy chunk 0 H0: compute, source 0
        (0x0100_0004, 0, IN0),         //   source 0 = own input elements 0..2
        (0x0180_0000, 0x020B_6080, 4), //   compute, source 1 (last)
        (0x0900_0004, 0, SCR0),        //   source 1 = scratch slot of chunk 0 (LAST)
        (0x0D00_0004, CP, ONE0),       //   LOCAL only
        (0x0580_0000, 0x020B_6000, 4), // recv_reduce_copy chunk 0 H1
        (0x0100_0004, 0, IN0 + 4),
        (0x0180_0000, 0x020B_6080, 4),
        (0x0900_0004, 0, SCR0 + 4),
        (0x0D00_0004, CP, ONE0),
        (0x0D00_0004, CP, OUT0), // direct_copy_send chunk 0 H0: own output 0..2
        (0x0D00_0004, CP, ONE0),
        (0x0D00_0004, CP, ONE0),
        (0x0D00_0004, CP, OUT0 + 4), // direct_copy_send chunk 0 H1
        (0x0D00_0004, CP, ONE0),
        (0x0D00_0004, CP, ONE0),
        // t=1 direct_recv chunk 1 H0/H1: no descriptor.
    ];
    let s2m: [(u32, u64); 16] = [
        (0x0D00_0004, SCR1 + 8), // send H0 → rank 1 scratch slot of chunk 1 (4·2 bytes in)
        (0x4D00_0004, LOC0),
        (0x4D00_0004, RCV1),
        (0x0D00_0004, SCR1 + 12), // send H1
        (0x4D00_0004, LOC0),
        (0x4D00_0004, RCV1),
        (0x0D00_0004, OUT0), // recv_reduce_copy H0 → own output
        (0x4D00_0004, LOC0),
        (0x0D00_0004, OUT0 + 4), // H1
        (0x4D00_0004, LOC0),
        (0x0D00_0004, OUT1), // direct_copy_send H0 → rank 1 output 0..2
        (0x4D00_0004, LOC0),
        (0x4D00_0004, RCV1),
        (0x0D00_0004, OUT1 + 4), // H1
        (0x4D00_0004, LOC0),
        (0x4D00_0004, RCV1),
    ];
    let m = m2s.iter();
    let m = m.map(|&(w0, w1, a)| desc_bytes(w0, w1, a as u32, (a >> 32) as u32));
    let s = s2m.iter();
    let s = s.map(|&(w0, a)| desc_bytes(w0, 0, a as u32, (a >> 32) as u32));
    (m.collect(), s.collect())
}

#[test]
fn case1_two_rank_ring_all_reduce() {
    let l = lower_case(CollectiveOp::AllReduce, &[0, 1], 8);
    let want = ring_all_reduce_model(&[0, 1], 8);
    // The model reproduces the hand-written words of rank 0.
    let (m, s) = case1_rank0_literal();
    check_stream("model rank 0 M2S", &want[0].m2s_bytes(), &m);
    check_stream("model rank 0 S2M", &want[0].s2m_bytes(), &s);
    // Rank 1 by hand, spot words: its send H0 reads its input 0..2 (chunk 0 = na[1]) into
    // rank 0's scratch slot of chunk 0; the REMOTE increment goes to rank 0's sem 8 on TOP_SP 0.
    let r1 = want[1].m2s_bytes();
    assert_eq!(r1[0], desc_bytes(0x0D00_0004, 0x0108_0003, 0, 0x1110));
    assert_eq!(
        want[1].s2m_bytes()[0][8..],
        [0, 0x20, 0, 0, 0x10, 0x10, 0, 0]
    );
    assert_eq!(want[1].s2m_bytes()[2][8..], 0x82_8000_1820u64.to_le_bytes());
    assert_eq!(want[1].s2m_bytes()[1][8..], 0x83_8000_1824u64.to_le_bytes());
    // SLOT records of rank 0 (emit_slot.rs doc), by hand: send ×2 release 3/3, no wait;
    // recv_reduce_copy ×2 release 5/2 after wait(sem 8 ≥ 1, −1); direct_copy_send ×2 3/3;
    // direct_recv ×2 0/0 after the wait, the last one END (flags 0x10).
    let nw = |m: u8, s: u8| [m, 0, s, 0, 1, 0, 0xFF, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    let wt = |m: u8, s: u8, f: u8| [m, 0, s, 0, 1, 0, 8, f, 1, 0, 0, 0, 1, 0, 0, 0];
    let recs = [
        nw(3, 3),
        nw(3, 3),
        wt(5, 2, 0),
        wt(5, 2, 0),
        nw(3, 3),
        nw(3, 3),
        wt(0, 0, 0),
        wt(0, 0, 0x10),
    ];
    let slot = want[0].slot_spad();
    assert_eq!(slot.len(), 1024, "one 1 KiB slot");
    assert_eq!(slot[..128], recs.concat()[..]);
    assert!(slot[128..].iter().all(|&b| b == 0));
    // Ring lengths: 22 + 16 → 64, 16 + 16 → 32 (all in lap 1, so every RING_ID is 1).
    assert_eq!((ring_len(22), ring_len(16)), (64, 32));
    // neff of rank 0 by hand: trigger = READ of sem 0 on TOP_SP 0; CTRL SPAD at window +
    // 0x1000_0000.
    assert_eq!(sem_addr(0, WIN_READ, 0), 0x82_8000_1000);
    assert_eq!(program(0, 0), 0x1000_1000_0000);
    check_images(&l, &[0, 1], &want);
    // Negative: flip buf_ptr bit 3 of rank 1's first S2M descriptor (its send H0 now names
    // rank 0's scratch byte 8, not 0).
    corrupt(&l, 1, false, 0, 8, 3, "resolves to");
}

// ---------------------------------------------------------------------------------------------
// Case 2: 4-rank ring all-reduce of 8 bf16 (ADD).
// ---------------------------------------------------------------------------------------------

#[test]
fn case2_four_rank_ring_all_reduce() {
    let l = lower_case(CollectiveOp::AllReduce, &[0, 1, 2, 3], 8);
    // lowering.md §4.2 worked check (N = 4, identity ring), copied from the spec's table: the
    // chunk each rank handles at s = 1..4 and t = 1..3; s = 4 is recv_reduce_copy then
    // direct_copy_send of the same chunk.
    const TABLE: [[u32; 7]; 4] = [
        [3, 2, 1, 0, 3, 2, 1],
        [0, 3, 2, 1, 0, 3, 2],
        [1, 0, 3, 2, 1, 0, 3],
        [2, 1, 0, 3, 2, 1, 0],
    ];
    use Primitive::*;
    for (r, row) in TABLE.iter().enumerate() {
        let want: Vec<(Primitive, u32)> = vec![
            (Send, row[0]),
            (RecvReduceSend, row[1]),
            (RecvReduceSend, row[2]),
            (RecvReduceCopy, row[3]),
            (DirectCopySend, row[3]),
            (DirectRecvSend, row[4]),
            (DirectRecvSend, row[5]),
            (DirectRecv, row[6]),
        ];
        let rp = &l.p.ranks[r];
        assert_eq!(rp.entries.len(), 1, "rank {r}: one flat entry");
        let tapes = &rp.entries[0].tapes;
        assert_eq!(tapes.len(), 1, "rank {r}: one channel");
        assert_eq!((tapes[0].channel, tapes[0].topsp), (0, 0));
        let steps = &tapes[0].steps;
        assert_eq!(steps.len(), 16, "rank {r}: 8 lines × (H0, H1)");
        for (i, st) in steps.iter().enumerate() {
            let (prim, chunk) = want[i / 2];
            let half = if i % 2 == 0 { Half::H0 } else { Half::H1 };
            assert_eq!(
                (st.primitive, st.chunk, st.half),
                (prim, chunk, half),
                "rank {r} step {i}"
            );
            // Reduce steps carry (ADD, RING_2R1W) as two separate arguments (§4.0, seed 001 §5).
            let red = prim
                .is_reduce()
                .then_some((ReduceOp::Add, RingShape::Ring2R1W));
            assert_eq!(st.reduction, red, "rank {r} step {i}");
        }
    }
    let want = ring_all_reduce_model(&[0, 1, 2, 3], 8);
    // Semaphore INC addresses by hand (device.md §5.1; TOP_SPs 8..15 add bit 47): rank r's
    // LOCAL (sem 9 on TOP_SP 4r) and the REMOTE on NEXT (sem 8 on TOP_SP 4(r+1 mod 4)).
    let sems: [(u64, u64); 4] = [
        (0x0000_0082_8000_1824, 0x0000_0083_8000_1820),
        (0x0000_0083_8000_1824, 0x0000_8082_8000_1820),
        (0x0000_8082_8000_1824, 0x0000_8083_8000_1820),
        (0x0000_8083_8000_1824, 0x0000_0082_8000_1820),
    ];
    for (r, &(loc, rem)) in sems.iter().enumerate() {
        assert_eq!(
            (
                sem_inc(4 * r as u64, 9),
                sem_inc(4 * ((r as u64 + 1) % 4), 8)
            ),
            (loc, rem)
        );
        // Per rank: 14 data-moving steps signal LOCAL; 12 of them (all but recv_reduce_copy)
        // signal REMOTE too; every increment is a DMB S2M write to one of the two addresses.
        let img = &l.e.ranks[r].topsps[0];
        let incs: Vec<u64> = img
            .s2m
            .iter()
            .filter(|d| d[3] & 0x40 != 0) // len_ctrl bit 30 (DMB)
            .map(|d| u64::from_le_bytes(d[8..16].try_into().unwrap()))
            .collect();
        assert_eq!(incs.iter().filter(|&&a| a == loc).count(), 14, "rank {r}");
        assert_eq!(incs.iter().filter(|&&a| a == rem).count(), 12, "rank {r}");
        assert_eq!(incs.len(), 26, "rank {r}");
    }
    // Counts by hand: send 2 × 3, rrs 4 × 6, rrc 2 × 5, dcs 2 × 3, drs 4 × 3 = 58 M2S (ring
    // 128); 2 × 3 + 4 × 3 + 2 × 2 + 2 × 3 + 4 × 3 = 40 S2M (ring 64).
    assert_eq!((want[0].m2s.len(), want[0].s2m.len()), (58, 40));
    assert_eq!((ring_len(58), ring_len(40)), (128, 64));
    // Rank 0's first recv_reduce_send (s = 2, chunk 2, H0) by hand: M2S #6..#11 = compute
    // (FIRST), input element 2·2 = 4 (byte 8), compute (last), scratch slot of chunk 2
    // (element 4, byte 8), LOCAL, REMOTE; its RX (S2M #6) writes rank 1's scratch byte 8.
    // Blocks are 2 elements, halves 1 element = 2 bytes (len_ctrl 0x0D00_0002 / 0x0100_0002).
    let m = want[0].m2s_bytes();
    assert_eq!(m[6], desc_bytes(0x0580_0000, 0x020B_6000, 2, 0));
    assert_eq!(m[7], desc_bytes(0x0100_0002, 0, 0x0000_0008, 0x1010));
    assert_eq!(m[8], desc_bytes(0x0180_0000, 0x020B_6080, 2, 0));
    assert_eq!(m[9], desc_bytes(0x0900_0002, 0, 0x0000_2008, 0x1010));
    assert_eq!(
        want[0].s2m_bytes()[6],
        desc_bytes(0x0D00_0002, 0, 0x0000_2008, 0x1110)
    );
    check_images(&l, &[0, 1, 2, 3], &want);
    // Negative: set the CCE "last" bit (meta_ctrl bit 7, byte 4) on the compute descriptor of
    // source 0 of rank 2's first recv_reduce_send (M2S #6).
    corrupt(&l, 2, true, 6, 4, 7, "CCE");
}

// ---------------------------------------------------------------------------------------------
// Case 3: 2-rank ring all-gather of 8 bf16 per rank.
// ---------------------------------------------------------------------------------------------

#[test]
fn case3_two_rank_ring_all_gather() {
    let l = lower_case(CollectiveOp::AllGather, &[0, 1], 8);
    let want = ring_all_gather_model(&[0, 1], 8);
    // Seed 001 §5 census / lowering.md §4.3: the all-gather calls no reducing primitive, so no
    // step reduces and no M2S descriptor is META (a CCE compute descriptor, bit 23).
    for rp in &l.p.ranks {
        for st in rp
            .entries
            .iter()
            .flat_map(|e| &e.tapes)
            .flat_map(|t| &t.steps)
        {
            assert!(!st.primitive.is_reduce() && st.reduction.is_none());
        }
    }
    for img in l.e.ranks.iter().flat_map(|r| &r.topsps) {
        assert!(
            img.m2s.iter().all(|d| d[2] & 0x80 == 0),
            "a META descriptor"
        );
        // Every TX descriptor carries the copy meta_ctrl 0x01080003 (§1.1).
        assert!(img.m2s.iter().all(|d| d[4..8] == [0x03, 0x00, 0x08, 0x01]));
    }
    // By hand, rank 0 (input 16 B → output page at +0x1000, 32 B): direct_copy_send H0 =
    // input 0..4 → own output block 0, input → rank 1's output block 0, LOCAL, REMOTE.
    // 8-byte FIRST|LAST data words are 0x0D00_0008.
    let m = want[0].m2s_bytes();
    let s = want[0].s2m_bytes();
    let (in0, out0, out1) = (
        0x1010_0000_0000u64,
        0x1010_0000_1000u64,
        0x1110_0000_1000u64,
    );
    let d = |w0: u32, w1: u32, a: u64| desc_bytes(w0, w1, a as u32, (a >> 32) as u32);
    assert_eq!(m[0], d(0x0D00_0008, 0x0108_0003, in0));
    assert_eq!(m[1], d(0x0D00_0008, 0x0108_0003, in0));
    assert_eq!(m[2], d(0x0D00_0004, 0x0108_0003, 0x1000_0000_0004));
    assert_eq!(s[0], d(0x0D00_0008, 0, out0));
    assert_eq!(s[1], d(0x0D00_0008, 0, out1));
    assert_eq!(s[2], d(0x4D00_0004, 0, 0x82_8000_1824));
    assert_eq!(s[3], d(0x4D00_0004, 0, 0x83_8000_1820));
    // H1: elements 4..8, i.e. byte 8.
    assert_eq!(m[4], d(0x0D00_0008, 0x0108_0003, in0 + 8));
    assert_eq!(s[5], d(0x0D00_0008, 0, out1 + 8));
    // Rank 1 writes its block 1 = output bytes 16..32.
    let s1 = want[1].s2m_bytes();
    assert_eq!(s1[0], d(0x0D00_0008, 0, 0x1110_0000_1010));
    assert_eq!(s1[1], d(0x0D00_0008, 0, 0x1010_0000_1010));
    assert_eq!(s1[3], d(0x4D00_0004, 0, 0x82_8000_1820));
    // 8 + 8 descriptors per rank; records: 4/4 ×2 without wait, then 0/0 ×2 with it.
    assert_eq!((want[0].m2s.len(), want[0].s2m.len()), (8, 8));
    let recs: Vec<_> = want[0].records.iter().map(|x| (x.0, x.1, x.2)).collect();
    assert_eq!(
        recs,
        vec![
            (4, 4, None),
            (4, 4, None),
            (0, 0, WAIT_RECV),
            (0, 0, WAIT_RECV)
        ]
    );
    check_images(&l, &[0, 1], &want);
    // Negative: flip RING_ID bit 24 (byte 3, bit 0) of rank 1's S2M #5: tag 1 becomes 0.
    corrupt(&l, 1, false, 5, 3, 0, "RING_ID");
}

// ---------------------------------------------------------------------------------------------
// Case 4 (extra): the case-1 all-reduce across two chips, for the §1.4 routing bits.
// ---------------------------------------------------------------------------------------------

/// Group {0, 4}: global 4 is device 1, core 0 (topology.rs numbering), so the two ranks sit on
/// chips 0 and 1 (addrmap.rs doc: routed chip id = node · devices + device) with the same core
/// window and the same device TOP_SP 0. Every address one rank issues into the other's memory
/// or semaphores carries chip id (bits 53:48) and id-valid (bit 54); its own stay plain.
#[test]
fn case4_two_chip_ring_all_reduce_routing() {
    let l = lower_case(CollectiveOp::AllReduce, &[0, 4], 8);
    let want = ring_all_reduce_model(&[0, 4], 8);
    // By hand: rank 0's send H0 lands in rank 1's scratch slot of chunk 1 (byte 8) on chip 1:
    // 0x1010_0000_2008 | 1 << 48 | 1 << 54 = 0x0041_1010_0000_2008; its REMOTE increment hits
    // sem 8 of TOP_SP 0 on chip 1: 0x0041_0082_8000_1820; its LOCAL one stays 0x82_8000_1824.
    let s0 = want[0].s2m_bytes();
    assert_eq!(s0[0][8..], 0x0041_1010_0000_2008u64.to_le_bytes());
    assert_eq!(s0[1][8..], 0x0000_0082_8000_1824u64.to_le_bytes());
    assert_eq!(s0[2][8..], 0x0041_0082_8000_1820u64.to_le_bytes());
    // Rank 1 → chip 0: id 0 with the valid bit, 0x0040_…; its reads stay local.
    let s1 = want[1].s2m_bytes();
    assert_eq!(s1[0][8..], 0x0040_1010_0000_2000u64.to_le_bytes());
    assert_eq!(s1[2][8..], 0x0040_0082_8000_1820u64.to_le_bytes());
    assert_eq!(
        want[1].m2s_bytes()[0][8..],
        0x1010_0000_0000u64.to_le_bytes()
    );
    check_images(&l, &[0, 4], &want);
    // Negative: clear the id-valid bit (bit 54 = byte 14, bit 6) of rank 0's REMOTE increment.
    corrupt(&l, 0, false, 2, 14, 6, "id-valid");
}

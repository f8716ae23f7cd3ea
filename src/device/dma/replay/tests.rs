//! Replay tests: a kept packet pair is used only while the ring holds its bytes and both
//! packets are posted; anything else runs, stalls or aborts exactly as a pair without a cache.

use super::super::*;
use crate::isa::memmap::{program_area, DATA_OFF, HBM_BASE, M2S_RING_OFF, S2M_RING_OFF};
use crate::isa::udma::{CopyMeta, LenCtrl};

const DATA: u64 = HBM_BASE + DATA_OFF;
const RING: u64 = 32;

fn ctrl(length: u32, first: bool, last: bool) -> LenCtrl {
    LenCtrl {
        length,
        first,
        last,
        ring_id: 1,
        ..Default::default()
    }
}

fn tx(addr: u64, len: u32, first: bool, last: bool) -> [u8; 16] {
    Descriptor::TxData {
        ctrl: ctrl(len, first, last),
        meta: Some(CopyMeta::default()),
        addr,
    }
    .encode()
}

fn rx(addr: u64, len: u32) -> [u8; 16] {
    Descriptor::RxData {
        ctrl: ctrl(len, true, true),
        addr,
    }
    .encode()
}

/// Memory with one pair's rings and a data buffer: a two-descriptor copy packet of 64 + 64
/// bytes from `DATA` to `DATA + 4096`, written at stream index 0 of both rings (not posted).
fn rig() -> (Memory, QueuePair) {
    let mut mem = Memory::new(1);
    let area = program_area(0, 0);
    mem.map(0, area + M2S_RING_OFF, RING * 16).unwrap();
    mem.map(0, area + S2M_RING_OFF, RING * 16).unwrap();
    mem.map(0, DATA, 1 << 16).unwrap();
    let src: Vec<u8> = (0..128u8).map(|i| i.wrapping_mul(7) | 1).collect();
    mem.write(0, DATA, &src).unwrap();
    let m2s = Queue::new(Direction::M2S, area + M2S_RING_OFF, RING).unwrap();
    let s2m = Queue::new(Direction::S2M, area + S2M_RING_OFF, RING).unwrap();
    let pair = QueuePair::new(0, m2s, s2m);
    let mut descs = tx(DATA, 64, true, false).to_vec();
    descs.extend(tx(DATA + 64, 64, false, true));
    mem.write(0, area + M2S_RING_OFF, &descs).unwrap();
    mem.write(0, area + S2M_RING_OFF, &rx(DATA + 4096, 128))
        .unwrap();
    (mem, pair)
}

/// Run a clone of `pair` (as a resident machine runs a clone of the pair it loaded) with
/// `m2s` and `s2m` descriptors posted; what it returned and the 8 KiB it may have written.
fn run(
    mem: &mut Memory,
    pair: &QueuePair,
    m2s: u64,
    s2m: u64,
) -> (Result<(u64, bool), DmaError>, Vec<u8>) {
    let mut p = pair.clone();
    let rung = p
        .tail_inc(0, Direction::S2M, s2m)
        .and_then(|()| p.tail_inc(0, Direction::M2S, m2s));
    let got = rung
        .and_then(|()| p.run(mem, 0, &Numerics::default()))
        .map(|p| (p.packets_done, p.stalled));
    let out = mem.slice(0, DATA + 4096, 8192).unwrap().to_vec();
    mem.slice_mut(0, DATA + 4096, 8192).unwrap().fill(0);
    (got, out)
}

/// The same run on a pair with an empty cache over the same bytes.
fn fresh(
    mem: &mut Memory,
    pair: &QueuePair,
    m2s: u64,
    s2m: u64,
) -> (Result<(u64, bool), DmaError>, Vec<u8>) {
    let cold = QueuePair::new(0, pair.m2s.clone(), pair.s2m.clone());
    run(mem, &cold, m2s, s2m)
}

#[test]
fn a_kept_packet_is_replayed_only_while_the_ring_holds_its_bytes() {
    // Checks the report text a user reads, on purpose.
    let (mut mem, pair) = rig();
    let first = run(&mut mem, &pair, 2, 1);
    assert_eq!(first.0, Ok((1, false)));
    assert_eq!(&first.1[..128], mem.slice(0, DATA, 128).unwrap());
    assert_eq!(pair.replay_hits(), 0);
    assert_eq!(run(&mut mem, &pair, 2, 1), first);
    assert_eq!(
        pair.replay_hits(),
        1,
        "the second run replays the packet pair"
    );
    // A valid RX descriptor with another destination: decoded again, and it lands there.
    let s2m = pair.s2m.slot_addr(0);
    mem.write(0, s2m, &rx(DATA + 8192 - 128, 128)).unwrap();
    let moved = run(&mut mem, &pair, 2, 1);
    assert_eq!(moved, fresh(&mut mem, &pair, 2, 1));
    assert_eq!(&moved.1[8192 - 4096 - 128..8192 - 4096], &first.1[..128]);
    assert!(moved.1[..128].iter().all(|&b| b == 0));
    let hits = pair.replay_hits();
    assert_eq!(run(&mut mem, &pair, 2, 1), moved);
    assert_eq!(
        pair.replay_hits(),
        hits + 1,
        "the new bytes are kept in turn"
    );
    // The second TX descriptor with another lap's RING_ID: the same abort as without replay.
    let m2s = pair.m2s.slot_addr(1);
    let mut stale = tx(DATA + 64, 64, false, true);
    stale[3] ^= 3;
    mem.write(0, m2s, &stale).unwrap();
    let (got, _) = run(&mut mem, &pair, 2, 1);
    let e = got.unwrap_err();
    assert!(e.reason.contains("stale descriptor"), "{e}");
    assert_eq!(Err(e), fresh(&mut mem, &pair, 2, 1).0);
}

#[test]
fn a_kept_packet_not_wholly_posted_stalls_as_without_replay() {
    let (mut mem, pair) = rig();
    assert_eq!(run(&mut mem, &pair, 2, 1).0, Ok((1, false)));
    let half = run(&mut mem, &pair, 1, 1);
    assert_eq!(half.0, Ok((0, true)));
    assert_eq!(half, fresh(&mut mem, &pair, 1, 1));
    assert_eq!(pair.replay_hits(), 0);
}

#[test]
fn a_kept_packet_is_not_replayed_on_another_lap() {
    // Checks the report text a user reads, on purpose.
    // The packet pair at stream 0 is kept; the same bytes at stream RING (the same slots, the
    // next lap) carry the wrong RING_ID there: the engine must abort, as it does uncached.
    let (mut mem, pair) = rig();
    assert_eq!(run(&mut mem, &pair, 2, 1).0, Ok((1, false)));
    let lap = pair.clone();
    let at = |q: &Queue| q.clone().at(RING, RING);
    let lap = QueuePair {
        m2s: at(&lap.m2s),
        s2m: at(&lap.s2m),
        ..lap
    };
    let (got, _) = run(&mut mem, &lap, 2, 1);
    let e = got.unwrap_err();
    assert!(e.reason.contains("stale descriptor"), "{e}");
    assert_eq!(Err(e), fresh(&mut mem, &lap, 2, 1).0);
    assert_eq!(pair.replay_hits(), 0);
}

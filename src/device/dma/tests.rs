//! DMA engine tests (docs/contract/device.md §1–§3, §11.4, §12): copy and CCE packets built with the
//! `isa::udma` encoders on rings at the memmap ring bases, doorbells, stalls, ring laps and every
//! abort.

use super::*;
use crate::device::cce;
use crate::device::sema::BlockId;
use crate::isa::evtsem::{SemAddr, SemWindow};
use crate::isa::memmap::{
    core_window, program_area, DATA_OFF, HBM_BASE, M2S_RING_OFF, S2M_RING_OFF,
};
use crate::isa::udma::{CceCompute, CceMeta, CopyMeta, LenCtrl};

const VALID: u64 = 1 << 54;
const DATA: u64 = HBM_BASE + DATA_OFF;
const DATA_BYTES: u64 = 1 << 20;

/// A machine with one queue pair on `chip`, TOP_SP 0, rings of `ring` slots, a 1 MiB data
/// buffer and the constant page on every chip.
struct Rig {
    mem: Memory,
    pair: QueuePair,
    chip: u8,
    /// Next stream index to write, per direction.
    next: [u64; 2],
}

fn di(d: Direction) -> usize {
    match d {
        Direction::M2S => 0,
        Direction::S2M => 1,
    }
}

impl Rig {
    fn new(chips: u8, chip: u8, ring: u64) -> Rig {
        let mut mem = Memory::new(chips);
        let area = program_area(0, 0);
        for c in 0..chips {
            mem.map(c, area + M2S_RING_OFF, ring * 16).unwrap();
            mem.map(c, area + S2M_RING_OFF, ring * 16).unwrap();
            mem.map(c, DATA, DATA_BYTES).unwrap();
            mem.map(c, core_window(0), 4096).unwrap();
            for v in 0..1024u32 {
                mem.write(c, core_window(0) + 4 * u64::from(v), &v.to_le_bytes())
                    .unwrap();
            }
        }
        let m2s = Queue::new(Direction::M2S, area + M2S_RING_OFF, ring).unwrap();
        let s2m = Queue::new(Direction::S2M, area + S2M_RING_OFF, ring).unwrap();
        Rig {
            mem,
            pair: QueuePair::new(0, m2s, s2m),
            chip,
            next: [0, 0],
        }
    }

    /// Write `descs` at the next stream indices, tagged for their lap (not posted).
    fn write(&mut self, dir: Direction, descs: &[Descriptor]) {
        for d in descs {
            let i = self.next[di(dir)];
            let q = self.pair.queue(dir);
            let tag = q.expected_ring_id(i);
            self.write_at(dir, i, *d, tag);
            self.next[di(dir)] += 1;
        }
    }

    fn write_at(&mut self, dir: Direction, i: u64, mut d: Descriptor, tag: u8) {
        match &mut d {
            Descriptor::TxData { ctrl, .. }
            | Descriptor::RxData { ctrl, .. }
            | Descriptor::CopyMetaDesc { ctrl, .. } => ctrl.ring_id = tag,
            Descriptor::Cce(c) => c.ctrl.ring_id = tag,
        }
        let a = self.pair.queue(dir).slot_addr(i);
        self.mem.write(self.chip, a, &d.encode()).unwrap();
    }

    fn post(&mut self, dir: Direction, n: u64) {
        self.pair.tail_inc(self.chip, dir, n).unwrap();
    }

    /// Write and post a whole packet pair, RX first.
    fn submit(&mut self, tx: &[Descriptor], rx: &[Descriptor]) {
        self.write(Direction::S2M, rx);
        self.write(Direction::M2S, tx);
        self.post(Direction::S2M, rx.len() as u64);
        self.post(Direction::M2S, tx.len() as u64);
    }

    fn run(&mut self) -> Result<Progress, DmaError> {
        self.pair
            .run(&mut self.mem, self.chip, &Numerics::default())
    }

    fn fill(&mut self, addr: u64, bytes: &[u8]) {
        self.mem.write(self.chip, addr, bytes).unwrap();
    }

    fn get(&self, addr: u64, len: usize) -> Vec<u8> {
        self.mem.slice(self.chip, addr, len).unwrap().to_vec()
    }
}

fn ctrl(len: u32, first: bool, last: bool) -> LenCtrl {
    LenCtrl {
        length: len,
        first,
        last,
        ..Default::default()
    }
}

fn tx(addr: u64, len: u32, first: bool, last: bool) -> Descriptor {
    Descriptor::TxData {
        ctrl: ctrl(len, first, last),
        meta: Some(CopyMeta::default()),
        addr,
    }
}

fn rx(addr: u64, len: u32, first: bool, last: bool) -> Descriptor {
    Descriptor::RxData {
        ctrl: ctrl(len, first, last),
        addr,
    }
}

/// Split `len` bytes at `addr` into descriptors of at most `piece` bytes.
fn run_of(
    addr: u64,
    len: u64,
    piece: u64,
    mk: fn(u64, u32, bool, bool) -> Descriptor,
) -> Vec<Descriptor> {
    let n = len.div_ceil(piece);
    (0..n)
        .map(|i| {
            let l = (len - i * piece).min(piece) as u32;
            mk(addr + i * piece, l, i == 0, i + 1 == n)
        })
        .collect()
}

/// A CCE TX packet: per source a compute descriptor then one data descriptor.
fn cce_packet(op: CceOp, out: u8, srcs: &[u64], len: u32) -> Vec<Descriptor> {
    let n = srcs.len();
    let mut v = Vec::new();
    for (i, &a) in srcs.iter().enumerate() {
        let last = i + 1 == n;
        let mut meta = CceMeta::for_reduce(op, Dtype::Bf16, last);
        meta.out = out;
        v.push(Descriptor::Cce(CceCompute {
            ctrl: LenCtrl {
                meta: true,
                first: i == 0,
                ..Default::default()
            },
            meta,
            length: len,
            w2_hi: CceCompute::default_w2_hi(op),
            scale: 0,
        }));
        v.push(Descriptor::TxData {
            ctrl: ctrl(len, false, last),
            meta: None,
            addr: a,
        });
    }
    v
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn bf16s(vals: impl Iterator<Item = f32>) -> Vec<u8> {
    vals.flat_map(|v| crate::dtype::f32_to_bf16(v).to_le_bytes())
        .collect()
}

#[test]
fn single_copy() {
    let mut r = Rig::new(1, 0, 64);
    let src = pattern(100, 7);
    r.fill(DATA, &src);
    r.submit(
        &[tx(DATA, 100, true, true)],
        &[rx(DATA + 4096, 100, true, true)],
    );
    let p = r.run().unwrap();
    assert_eq!((p.packets_done, p.stalled), (1, false));
    assert!(p.touched_sems.is_empty());
    assert_eq!(r.get(DATA + 4096, 100), src);
    assert_eq!((r.pair.m2s.head(), r.pair.s2m.head()), (1, 1));
}

/// 200 000 bytes: TX in 64 KiB pieces (LENGTH 0 = 65536), RX cut differently.
#[test]
fn multi_descriptor_copy() {
    let mut r = Rig::new(1, 0, 64);
    let len = 200_000u64;
    let src = pattern(len as usize, 3);
    r.fill(DATA, &src);
    let t = run_of(DATA, len, 65536, tx);
    assert_eq!(t.len(), 4);
    assert_eq!(t[0].encode()[0..2], [0, 0], "65536 encodes as LENGTH 0");
    let dst = DATA + 0x8_0000;
    let mut rxs = vec![rx(dst, 1000, true, false)];
    rxs.extend(run_of(dst + 1000, len - 1000, 60000, |a, l, _, last| {
        rx(a, l, false, last)
    }));
    r.submit(&t, &rxs);
    let p = r.run().unwrap();
    assert_eq!(p.packets_done, 1);
    assert_eq!(r.get(dst, len as usize), src);
}

fn cce_check(n_src: usize, in_place: bool) {
    let mut r = Rig::new(1, 0, 64);
    let elems = 1000usize;
    let len = (2 * elems) as u32;
    let srcs: Vec<u64> = (0..n_src as u64).map(|i| DATA + i * 0x1_0000).collect();
    let inputs: Vec<Vec<u8>> = (0..n_src)
        .map(|s| bf16s((0..elems).map(|e| (e as f32) * 0.37 - (s as f32) * 11.5 + 0.001)))
        .collect();
    for (a, b) in srcs.iter().zip(&inputs) {
        r.fill(*a, b);
    }
    let dst = if in_place { srcs[0] } else { DATA + 0x8_0000 };
    let refs: Vec<&[u8]> = inputs.iter().map(|v| &v[..]).collect();
    let mut want = vec![0u8; len as usize];
    cce::reduce(CceOp::Add, Dtype::Bf16, &refs, &mut want).unwrap();
    let t = cce_packet(CceOp::Add, Dtype::Bf16.as_u8(), &srcs, len);
    r.submit(&t, &[rx(dst, len, true, true)]);
    let p = r.run().unwrap();
    assert_eq!((p.packets_done, p.stalled), (1, false));
    assert_eq!(r.get(dst, len as usize), want);
}

#[test]
fn cce_two_sources_in_place() {
    cce_check(2, true);
}

#[test]
fn cce_three_sources() {
    cce_check(3, false);
}

/// A semaphore increment into another chip's TOP_SP INC window (routed), docs/contract/device.md
/// §1.2.
#[test]
fn semaphore_increment_routed() {
    let mut r = Rig::new(2, 0, 64);
    let inc = SemAddr {
        topsp: 3,
        window: SemWindow::Inc,
        idx: 7,
    }
    .encode()
        | VALID
        | (1 << 48);
    let mut rxd = rx(inc, 4, true, true);
    if let Descriptor::RxData { ctrl, .. } = &mut rxd {
        ctrl.dmb = true;
    }
    for _ in 0..2 {
        r.submit(&[tx(core_window(0) + 4 * 2, 4, true, true)], &[rxd]);
    }
    let p = r.run().unwrap();
    assert_eq!(p.packets_done, 2);
    let t = SemTouch {
        chip: 1,
        block: BlockId::TopSp(3),
        window: SemWindow::Inc,
        first: 7,
        count: 1,
    };
    assert_eq!(p.touched_sems, vec![t, t]);
    let v = r
        .mem
        .sems(1)
        .unwrap()
        .block(BlockId::TopSp(3))
        .unwrap()
        .value(7);
    assert_eq!(v, 4);
    let v0 = r
        .mem
        .sems(0)
        .unwrap()
        .block(BlockId::TopSp(3))
        .unwrap()
        .value(7);
    assert_eq!(v0, 0, "chip 0's own semaphore is untouched");
}

#[test]
fn zero_tail_increments_are_no_ops() {
    let mut r = Rig::new(1, 0, 32);
    r.post(Direction::S2M, 0);
    r.post(Direction::M2S, 0);
    let p = r.run().unwrap();
    assert_eq!(p, Progress::default());
    assert_eq!(r.pair.m2s.tail(), 0);
}

#[test]
fn stall_until_rx_posted() {
    let mut r = Rig::new(1, 0, 64);
    r.fill(DATA, &[9; 8]);
    r.write(Direction::M2S, &[tx(DATA, 8, true, true)]);
    r.write(Direction::S2M, &[rx(DATA + 64, 8, true, true)]);
    r.post(Direction::M2S, 1);
    let p = r.run().unwrap();
    assert_eq!((p.packets_done, p.stalled), (0, true));
    assert_eq!(r.get(DATA + 64, 8), [0; 8]);
    r.post(Direction::S2M, 1);
    let p = r.run().unwrap();
    assert_eq!((p.packets_done, p.stalled), (1, false));
    assert_eq!(r.get(DATA + 64, 8), [9; 8]);
}

/// A TX packet whose LAST is not posted yet is a stall too.
#[test]
fn stall_on_partial_packet() {
    let mut r = Rig::new(1, 0, 64);
    let t = run_of(DATA, 8, 4, tx);
    r.write(Direction::M2S, &t);
    r.write(Direction::S2M, &[rx(DATA + 64, 8, true, true)]);
    r.post(Direction::S2M, 1);
    r.post(Direction::M2S, 1);
    assert!(r.run().unwrap().stalled);
    r.post(Direction::M2S, 1);
    assert_eq!(r.run().unwrap().packets_done, 1);
}

/// Four laps of a 32-slot ring: RING_ID 1, 2, 3, 0.
#[test]
fn ring_wrap_through_four_laps() {
    let mut r = Rig::new(1, 0, 32);
    let tags: Vec<u8> = (0..4)
        .map(|lap| r.pair.m2s.expected_ring_id(lap * 32))
        .collect();
    assert_eq!(tags, [1, 2, 3, 0]);
    let mut done = 0;
    for batch in 0..8u64 {
        for k in 0..16u64 {
            let i = batch * 16 + k;
            r.fill(DATA + 8 * i, &[i as u8; 8]);
            r.submit(
                &[tx(DATA + 8 * i, 8, true, true)],
                &[rx(DATA + 0x1000 + 8 * i, 8, true, true)],
            );
        }
        done += r.run().unwrap().packets_done;
    }
    assert_eq!(done, 128);
    for i in 0..128u64 {
        assert_eq!(r.get(DATA + 0x1000 + 8 * i, 8), [i as u8; 8]);
    }
}

fn abort_of(r: &mut Rig) -> DmaError {
    // Checks the report text a user reads, on purpose.
    let e = r.run().unwrap_err();
    assert_eq!(r.run().unwrap_err(), e, "the pair stays aborted");
    assert_eq!(r.pair.aborted(), Some(&e));
    let core: Error = e.clone().into();
    assert_eq!(core.kind(), ErrorKind::DmaAbort);
    assert!(core.message().contains("chip 0 TOP_SP 0"), "{core:?}");
    e
}

/// A descriptor from the previous lap (not rewritten) is stale.
#[test]
fn abort_on_stale_tag() {
    // Checks the report text a user reads, on purpose.
    let mut r = Rig::new(1, 0, 32);
    for _ in 0..2 {
        r.submit(&[tx(DATA, 8, true, true)], &[rx(DATA + 64, 8, true, true)]);
    }
    // Slot 2 carries a tag for lap 1 (3) instead of lap 0 (1).
    r.write_at(Direction::S2M, 2, rx(DATA + 64, 8, true, true), 3);
    r.write(Direction::M2S, &[tx(DATA, 8, true, true)]);
    r.post(Direction::S2M, 1);
    r.post(Direction::M2S, 1);
    let e = abort_of(&mut r);
    assert_eq!((e.queue, e.index), (Direction::S2M, 2));
    assert!(
        e.reason.contains("stale") && e.reason.contains("RING_ID 3, expected 1"),
        "{e}"
    );
    assert_eq!(r.pair.s2m.head(), 2, "the good packets ran");
}

#[test]
fn abort_on_length_mismatch() {
    // Checks the report text a user reads, on purpose.
    let mut r = Rig::new(1, 0, 32);
    r.submit(&[tx(DATA, 8, true, true)], &[rx(DATA + 64, 12, true, true)]);
    let e = abort_of(&mut r);
    assert_eq!(e.queue, Direction::S2M);
    assert!(
        e.to_string().contains("length mismatch") && e.reason.contains("8 bytes"),
        "{e}"
    );
}

#[test]
fn abort_on_unmapped_address() {
    // Checks the report text a user reads, on purpose.
    let mut r = Rig::new(1, 0, 32);
    let hole = DATA + DATA_BYTES + 0x1000;
    r.submit(&[tx(hole, 8, true, true)], &[rx(DATA, 8, true, true)]);
    let e = abort_of(&mut r);
    assert_eq!((e.queue, e.index), (Direction::M2S, 0));
    assert!(e.reason.contains("nothing mapped"), "{e}");
    assert_eq!(
        e.desc[8..16],
        hole.to_le_bytes(),
        "the report carries the descriptor"
    );
    assert!(
        e.to_string().contains(&format!("{:02x}", hole >> 40)),
        "{e}"
    );
}

/// Output dtype nibble 0 (INVALID) does not decode; INT32 (8) decodes but cannot be reduced.
#[test]
fn abort_on_bad_dtype_nibble() {
    // Checks the report text a user reads, on purpose.
    for (nibble, why) in [(0u8, "not a dtype"), (8, "cannot be reduced")] {
        let mut r = Rig::new(1, 0, 32);
        let t = cce_packet(CceOp::Add, nibble, &[DATA, DATA + 64], 8);
        r.submit(&t, &[rx(DATA + 128, 8, true, true)]);
        let e = abort_of(&mut r);
        assert_eq!((e.queue, e.index), (Direction::M2S, 0));
        assert!(e.reason.contains(why), "{e}");
    }
}

/// A CCE op the device does not implement (EXT) aborts.
#[test]
fn abort_on_unimplemented_cce_op() {
    // Checks the report text a user reads, on purpose.
    let mut r = Rig::new(1, 0, 32);
    let mut t = cce_packet(CceOp::Add, Dtype::Bf16.as_u8(), &[DATA, DATA + 64], 8);
    for d in &mut t {
        if let Descriptor::Cce(c) = d {
            c.meta.op = CceOp::Ext;
            c.meta.op_sel = CceOp::Ext.op_selector();
        }
    }
    r.submit(&t, &[rx(DATA + 128, 8, true, true)]);
    let e = abort_of(&mut r);
    assert!(e.reason.contains("Ext"), "{e}");
}

/// Framing: a copy descriptor inside a CCE packet, a META in a copy packet, a missing FIRST.
#[test]
fn abort_on_bad_framing() {
    // Checks the report text a user reads, on purpose.
    let cce = cce_packet(CceOp::Add, Dtype::Bf16.as_u8(), &[DATA, DATA + 64], 8);
    let cases: Vec<(Vec<Descriptor>, &str)> = vec![
        (
            vec![cce[0], tx(DATA, 8, false, true)],
            "copy descriptor inside a CCE",
        ),
        (
            vec![tx(DATA, 8, true, false), cce[2], cce[3]],
            "META descriptor where copy data",
        ),
        (vec![tx(DATA, 8, false, true)], "does not start with FIRST"),
        (
            cce[..2]
                .iter()
                .map(|d| match *d {
                    Descriptor::TxData { meta, addr, .. } => Descriptor::TxData {
                        ctrl: ctrl(8, false, true),
                        meta,
                        addr,
                    },
                    d => d,
                })
                .map(|d| match d {
                    Descriptor::Cce(mut c) => {
                        c.meta.last = false;
                        Descriptor::Cce(c)
                    }
                    d => d,
                })
                .collect(),
            "not flagged last",
        ),
    ];
    for (t, why) in cases {
        let mut r = Rig::new(1, 0, 32);
        r.submit(&t, &[rx(DATA + 128, 8, true, true)]);
        let e = abort_of(&mut r);
        assert_eq!(e.queue, Direction::M2S);
        assert!(e.reason.contains(why), "{why}: {e}");
    }
}

/// A doorbell above the ring length minus the guard gap aborts the pair (docs/contract/device.md
/// §3.2).
#[test]
fn abort_on_oversized_doorbell() {
    // Checks the report text a user reads, on purpose.
    let mut r = Rig::new(1, 0, 32);
    r.post(Direction::S2M, 16);
    let e = r.pair.tail_inc(0, Direction::S2M, 17).unwrap_err();
    assert!(e.reason.contains("guard gap"), "{e}");
    assert_eq!(e.index, 16);
    assert_eq!(r.run().unwrap_err(), e);
}

/// Throughput of one 64 MiB copy packet (1024 × 64 KiB) and of 8 KiB BF16 2-source CCE packets
/// over 16 MiB. `cargo test --release --lib dma_throughput -- --ignored --nocapture`.
#[test]
#[ignore]
fn dma_throughput() {
    let mut r = Rig::new(1, 0, 8192);
    let big = 64u64 << 20;
    let (src, dst) = (HBM_BASE + (1 << 37), HBM_BASE + (1 << 38));
    r.mem.map(0, src, big).unwrap();
    r.mem.map(0, dst, big).unwrap();
    r.fill(src, &pattern(big as usize, 1));
    let t = run_of(src, big, 65536, tx);
    let x = run_of(dst, big, 65536, rx);
    for pass in ["cold (first touch of dst)", "warm"] {
        r.submit(&t, &x);
        let t0 = std::time::Instant::now();
        assert_eq!(r.run().unwrap().packets_done, 1);
        let dt = t0.elapsed().as_secs_f64();
        eprintln!("copy {pass}: {:.2} GB/s", big as f64 / dt / 1e9);
    }
    let pkt = 8192u64;
    let total = 16u64 << 20;
    let mut done = 0;
    let t0 = std::time::Instant::now();
    for k in 0..total / pkt {
        let off = k * pkt;
        let c = cce_packet(
            CceOp::Add,
            Dtype::Bf16.as_u8(),
            &[src + off, dst + off],
            pkt as u32,
        );
        r.submit(&c, &[rx(src + off, pkt as u32, true, true)]);
        if k % 512 == 511 {
            done += r.run().unwrap().packets_done;
        }
    }
    let dt = t0.elapsed().as_secs_f64();
    assert_eq!(done, total / pkt);
    eprintln!(
        "cce: {:.2} GB/s of result ({} packets)",
        total as f64 / dt / 1e9,
        done
    );
}

mod cce_packets;
mod e2e;

//! The spec's formulas, and the expected per-rank programs built from them (lowering.md §4.2,
//! §4.3), re-implemented independently of `src/` for the golden lowering tests
//! (`tests/golden_lowering.rs` includes this file as its `spec` module, and runs the self-checks
//! below, which pin every formula against a worked constant the spec itself states).
//!
//! Nothing here calls into `opennrt`: every value is computed from the vendor spec
//! (docs/contract/device.md, lowering.md, carrier.md; the seeds these pages name as sources) or, where the vendor spec leaves
//! a choice open, from OpenNRT's own documented layout (the module docs cited at each item).
#![allow(dead_code)]

// ---------------------------------------------------------------------------------------------
// device.md §1.1 — the 16-byte UDMA descriptor.
// ---------------------------------------------------------------------------------------------

/// len_ctrl (device.md §1.1): LENGTH 15:0 (0 = 65536), META 23, RING_ID 25:24, FIRST 26,
/// LAST 27, DMB 30; bits 22:16 reserved = 0. A META word carries no data, so LENGTH is 0.
pub fn len_ctrl(len: u32, meta: bool, ring_id: u32, first: bool, last: bool, dmb: bool) -> u32 {
    assert!(len <= 65536 && ring_id < 4);
    let length = if meta { 0 } else { len & 0xFFFF }; // 65536 & 0xFFFF == 0: "0 means 65536"
    length
        | (u32::from(meta) << 23)
        | (ring_id << 24)
        | (u32::from(first) << 26)
        | (u32::from(last) << 27)
        | (u32::from(dmb) << 30)
}

/// Default TX meta_ctrl of a copy (CME) descriptor (device.md §1.1 **\[H\]**): class 2 in bits
/// 25:23 (bit 24), copy_source_data bit 19, block_attr 3 in bits 1:0.
pub const META_CTRL_COPY: u32 = 0x0108_0003;

/// SDMA_DTYPE codes (lowering.md §1.10 / §2.10).
pub const DTYPE_BF16: u32 = 6;
/// FP32R: what OpenNRT writes in the CCE accumulation nibble (device.md §11.1 "our encoder
/// writes 11").
pub const DTYPE_FP32R: u32 = 11;
/// SDMA_CCETYPE ADD (lowering.md §2.10).
pub const CCE_ADD: u32 = 0;

/// The ADD builder's CCE meta_ctrl (device.md §2.2):
/// `(sub & 7) | (out << 12) | (accum << 16) | (last << 7) | (wb << 6) | (flag << 4) | 0x02000000`
/// (the input nibble 11:8 is left 0), with wb = flag = 0.
pub fn cce_add_meta(out: u32, accum: u32, last: bool) -> u32 {
    (CCE_ADD & 7) | (out << 12) | (accum << 16) | (u32::from(last) << 7) | 0x0200_0000
}

/// The four little-endian words of a descriptor as its 16 bytes (device.md §1.1: W0 @0, W1 @4,
/// buf_ptr u64 @8).
pub fn desc_bytes(w0: u32, w1: u32, w2: u32, w3: u32) -> [u8; 16] {
    let mut b = [0u8; 16];
    for (i, w) in [w0, w1, w2, w3].into_iter().enumerate() {
        b[4 * i..4 * i + 4].copy_from_slice(&w.to_le_bytes());
    }
    b
}

/// Split a 64-bit buf_ptr into W2 (low) and W3 (high).
pub fn split(addr: u64) -> (u32, u32) {
    (addr as u32, (addr >> 32) as u32)
}

/// device.md §1.3: the producer's phase starts at 1 and goes +1 mod 4 each time the producer
/// index wraps to 0, so stream position `i` of a ring of `len` slots carries `(1 + i / len) % 4`.
pub fn ring_id(i: usize, len: usize) -> u32 {
    ((1 + i / len) % 4) as u32
}

/// Ring length (src/lower/emit.rs module doc: "smallest power of two ≥ descriptors + 16 (guard
/// gap, device.md §3.2)"; src/lower/emit/desc.rs `MIN_RING`: never below 32).
pub fn ring_len(n: usize) -> usize {
    (n + 16).next_power_of_two().max(32)
}

// ---------------------------------------------------------------------------------------------
// device.md §5.1 — EVT_SEM; §1.4 — routing bits.
// ---------------------------------------------------------------------------------------------

/// Base of device TOP_SP `i`'s EVT_SEM block (device.md §5.1 **\[H\]**).
pub fn evt_sem_base(i: u64) -> u64 {
    0x82_8000_0000 + ((i & 7) << 30) + (u64::from(i > 7) << 47)
}
/// device.md §5.1 windows.
pub const WIN_READ: u64 = 0x1000;
/// INC window (value += written).
pub const WIN_INC: u64 = 0x1800;

/// A semaphore window address: base + window + 4·idx (device.md §5.1).
pub fn sem_addr(topsp: u64, window: u64, idx: u64) -> u64 {
    evt_sem_base(topsp) + window + 4 * idx
}
/// The INC address of semaphore `idx` of device TOP_SP `topsp` (device.md §1.2, §5.1, §6.4).
pub fn sem_inc(topsp: u64, idx: u64) -> u64 {
    sem_addr(topsp, WIN_INC, idx)
}

/// device.md §1.4: chip id in bits 53:48, id-valid bit 54 (`None` = the issuing chip: no
/// routing bits).
pub fn routed(addr: u64, chip: Option<u64>) -> u64 {
    match chip {
        None => addr,
        Some(c) => addr | (c << 48) | (1 << 54),
    }
}

// ---------------------------------------------------------------------------------------------
// lowering.md §6.1 / carrier.md §3.5 / seed 003 — the 8-byte spad_ctrl_entry.
// ---------------------------------------------------------------------------------------------

/// The cc_op fields (lowering.md §6.1).
#[derive(Debug, Clone, Copy, Default)]
pub struct CcOp {
    pub algo_type: u16,
    pub algo_sub_type: u16,
    pub trigger_next: bool,
    pub reporter: bool,
    pub ring_wait_complete: bool,
    pub ring_send_complete: bool,
    pub safe_mode: bool,
    pub unique_tensors: bool,
    /// Ring: channel_list; mesh: sema_shift_offset | sema_mask << 16.
    pub union: u32,
}

/// Pack one slot (seed 003 / carrier.md §3.5): first u16 =
/// `(trigger_next << 15) | (algo_sub_type << 12) | (algo_type << 8) | 1`; byte 2 = `reporter |
/// ring_wait << 1 | ring_send << 2 | safe_mode << 3 | unique << 4` (5 bits); byte 3 padding;
/// bytes 4..8 the union as two u16 stores.
pub fn cc_op(f: CcOp) -> [u8; 8] {
    let w = (u16::from(f.trigger_next) << 15) | (f.algo_sub_type << 12) | (f.algo_type << 8) | 1;
    let flag = (u8::from(f.reporter)
        | (u8::from(f.ring_wait_complete) << 1)
        | (u8::from(f.ring_send_complete) << 2)
        | (u8::from(f.safe_mode) << 3)
        | (u8::from(f.unique_tensors) << 4))
        & 0x1F;
    let mut b = [0u8; 8];
    b[0..2].copy_from_slice(&w.to_le_bytes());
    b[2] = flag;
    b[4..6].copy_from_slice(&(f.union as u16).to_le_bytes());
    b[6..8].copy_from_slice(&((f.union >> 16) as u16).to_le_bytes());
    b
}

// ---------------------------------------------------------------------------------------------
// src/lower/emit_slot.rs module doc — OpenNRT's SLOT SPAD record (the vendor's is not recovered).
// ---------------------------------------------------------------------------------------------

/// A record's wait: (rank-local TOP_SP, sem id, target, consume); `None` = no wait.
pub type SlotWait = Option<(u8, u8, u32, u32)>;

/// Records per SLOT SPAD slot (emit_slot.rs: 1 KiB slots of 16-byte records).
pub const SLOT_RECORDS: usize = 64;

/// One 16-byte record: u16 m2s @0, u16 s2m @2, u16 repeat @4, u8 wait_sem @6 (0xFF = none),
/// u8 flags @7 (bits 3:0 waited TOP_SP, bit 4 END), u32 wait_target @8, u32 wait_consume @12.
/// `wait` = (rank-local TOP_SP, sem id, target, consume).
pub fn slot_record(
    m2s: u16,
    s2m: u16,
    repeat: u16,
    wait: Option<(u8, u8, u32, u32)>,
    end: bool,
) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[0..2].copy_from_slice(&m2s.to_le_bytes());
    b[2..4].copy_from_slice(&s2m.to_le_bytes());
    b[4..6].copy_from_slice(&repeat.to_le_bytes());
    let end = if end { 0x10 } else { 0 };
    match wait {
        None => {
            b[6] = 0xFF;
            b[7] = end;
        }
        Some((topsp, sem, target, consume)) => {
            b[6] = sem;
            b[7] = (topsp & 0xF) | end;
            b[8..12].copy_from_slice(&target.to_le_bytes());
            b[12..16].copy_from_slice(&consume.to_le_bytes());
        }
    }
    b
}

// ---------------------------------------------------------------------------------------------
// src/lower/addrmap.rs module doc — OpenNRT's HBM windows (the spec gives none).
// ---------------------------------------------------------------------------------------------

/// `HBM_BASE = 2^44`; every logical core owns a 1 TiB window at `HBM_BASE + core · 2^40`.
pub fn window(core: u64) -> u64 {
    (1 << 44) + core * (1 << 40)
}
/// The constant page at window offset 0: u32 `v` at `4·v`.
pub fn const_word(core: u64, v: u64) -> u64 {
    window(core) + 4 * v
}
/// Data buffers start at window offset `2^36`: input, then output, then scratch, each 4 KiB
/// aligned (an empty buffer still takes one 4 KiB page: addrmap.rs `align(v.max(1))`).
pub fn align4k(bytes: u64) -> u64 {
    bytes.max(1).div_ceil(0x1000) * 0x1000
}
/// (input, output, scratch) base addresses of a core's buffers (not in place).
pub fn buffers(core: u64, input: u64, output: u64) -> (u64, u64, u64) {
    let inp = window(core) + (1 << 36);
    let out = inp + align4k(input);
    let scr = out + align4k(output);
    (inp, out, scr)
}
/// TOP_SP `t`'s program area: window + 0x1000_0000 + t · 2^30; CTRL SPAD @+0, SLOT SPAD
/// @+0x1000, M2S pring @+0x10_0000, S2M pring @+0x2000_0000.
pub fn program(core: u64, t: u64) -> u64 {
    window(core) + 0x1000_0000 + t * (1 << 30)
}

// ---------------------------------------------------------------------------------------------
// The expected streams of one rank, built step by step from the tiling rules.
// ---------------------------------------------------------------------------------------------

/// One rank's expected M2S / S2M streams (untagged words, RING_ID added by [`stamp`]) and SLOT
/// records, built step by step.
///
/// Tiling rules used (every transfer here is far below 64 KiB and below the per-packet
/// descriptor caps of lowering.md §5.2, so each data run is one descriptor):
/// * copy: device.md §1.2 — one TX packet and one RX packet; a one-descriptor packet is FIRST and
///   LAST (§1.2 "a packet runs from the FIRST descriptor to the LAST one"); TX W1 = the default
///   copy meta_ctrl (§1.1; v3 has no notification bit), RX W1 = 0 (§1.1 "unused").
/// * reduce: device.md §2.1 — source by source, a compute descriptor (META; W1 the CCE meta_ctrl
///   with "last" on the final source only; W2 = byte length, ADD puts no high bits; W3 = 0 for
///   non-FMA) then that source's TX data descriptor (W1 = 0: src/isa/udma.rs module doc, "W1 of a
///   TX data descriptor inside a CCE packet is 0"); the packet is FIRST on its first descriptor
///   and LAST on its last (§1.2). The reduced stream is one RX packet. Packet size: lowering.md
///   §5.1 rounds `min(2·len, cap)` down to 32 bytes, which is 0 for these tiny transfers; the
///   src/lower/emit/desc.rs doc of `reduce_packet_elems` says the whole transfer is then one
///   packet (OpenNRT's choice).
/// * signal: device.md §1.2 / lowering.md §6.4 — a 4-byte copy from the issuing rank's constant
///   word 1 (addrmap.rs doc: u32 `v` at `4·v`) to the semaphore's INC window; the RX descriptor
///   sets DMB (src/lower/emit/desc.rs module doc: the data-then-signal order).
/// * records: src/lower/emit.rs module doc — one SLOT record per step carrying the step's wait and
///   releasing exactly the step's descriptors; END on the cc_op's last record.
#[derive(Debug, Default, Clone)]
pub struct RankStreams {
    /// Logical core of the issuing rank (its constant page).
    pub core: u64,
    /// M2S words, RING_ID 0.
    pub m2s: Vec<[u32; 4]>,
    /// S2M words, RING_ID 0.
    pub s2m: Vec<[u32; 4]>,
    /// SLOT records (END not yet set).
    pub records: Vec<(u16, u16, SlotWait)>,
    mark: (usize, usize),
}

impl RankStreams {
    /// A rank on logical core `core`.
    pub fn new(core: u64) -> Self {
        RankStreams {
            core,
            ..Default::default()
        }
    }
    fn tx(&mut self, w0: u32, w1: u32, addr: u64) {
        let (lo, hi) = split(addr);
        self.m2s.push([w0, w1, lo, hi]);
    }
    fn rx(&mut self, w0: u32, addr: u64) {
        let (lo, hi) = split(addr);
        self.s2m.push([w0, 0, lo, hi]);
    }
    /// A plain copy of `bytes` (device.md §1.2).
    pub fn copy(&mut self, src: u64, dst: u64, bytes: u32) {
        let fl = len_ctrl(bytes, false, 0, true, true, false);
        self.tx(fl, META_CTRL_COPY, src);
        self.rx(fl, dst);
    }
    /// A CCE ADD of `srcs` into `dst`, bf16 out, FP32R accumulation (device.md §2.1–§2.2).
    pub fn reduce(&mut self, srcs: &[u64], dst: u64, bytes: u32) {
        for (i, &s) in srcs.iter().enumerate() {
            let last = i + 1 == srcs.len();
            let w0 = len_ctrl(0, true, 0, i == 0, false, false);
            self.m2s
                .push([w0, cce_add_meta(DTYPE_BF16, DTYPE_FP32R, last), bytes, 0]);
            self.tx(len_ctrl(bytes, false, 0, false, last, false), 0, s);
        }
        self.rx(len_ctrl(bytes, false, 0, true, true, false), dst);
    }
    /// One semaphore increment by 1 at INC address `inc` (device.md §1.2, lowering.md §6.4).
    pub fn signal(&mut self, inc: u64) {
        self.tx(
            len_ctrl(4, false, 0, true, true, false),
            META_CTRL_COPY,
            const_word(self.core, 1),
        );
        self.rx(len_ctrl(4, false, 0, true, true, true), inc);
    }
    /// Close a step: its SLOT record (emit.rs doc).
    pub fn end_step(&mut self, wait: SlotWait) {
        let (m, s) = self.mark;
        let rec = (
            (self.m2s.len() - m) as u16,
            (self.s2m.len() - s) as u16,
            wait,
        );
        self.records.push(rec);
        self.mark = (self.m2s.len(), self.s2m.len());
    }
    /// The M2S stream as stamped bytes.
    pub fn m2s_bytes(&self) -> Vec<[u8; 16]> {
        stamp(&self.m2s)
    }
    /// The S2M stream as stamped bytes.
    pub fn s2m_bytes(&self) -> Vec<[u8; 16]> {
        stamp(&self.s2m)
    }
    /// The SLOT SPAD: the records (repeat 1, END on the last), padded to whole 1 KiB slots.
    pub fn slot_spad(&self) -> Vec<u8> {
        let n = self.records.len();
        let mut out = Vec::new();
        for (i, &(m, s, w)) in self.records.iter().enumerate() {
            out.extend_from_slice(&slot_record(m, s, 1, w, i + 1 == n));
        }
        out.resize(n.div_ceil(SLOT_RECORDS).max(1) * SLOT_RECORDS * 16, 0);
        out
    }
}

/// Put each descriptor's RING_ID (device.md §1.3) for a ring of [`ring_len`] slots.
pub fn stamp(words: &[[u32; 4]]) -> Vec<[u8; 16]> {
    let len = ring_len(words.len());
    words
        .iter()
        .enumerate()
        .map(|(i, w)| desc_bytes(w[0] | (ring_id(i, len) << 24), w[1], w[2], w[3]))
        .collect()
}

/// The four words of a descriptor, in hex, for failure messages.
pub fn words(b: &[u8; 16]) -> String {
    let w = |i: usize| u32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]]);
    format!(
        "[{:#010x} {:#010x} {:#010x} {:#010x}]",
        w(0),
        w(1),
        w(2),
        w(3)
    )
}

/// Compare a stream word by word; the message names the stream, the index and both values.
pub fn check_stream(what: &str, got: &[[u8; 16]], want: &[[u8; 16]]) {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(
            g,
            w,
            "{what} descriptor #{i}: expected {} found {}",
            words(w),
            words(g)
        );
    }
    assert_eq!(got.len(), want.len(), "{what}: descriptor count");
}

// ---------------------------------------------------------------------------------------------
// The expected programs: lowering.md §4.2 / §4.3 on trn2.48xlarge (see golden_lowering.rs doc).
// ---------------------------------------------------------------------------------------------

/// Element bytes of bf16 (lowering.md §1.10).
pub const ESZ: u64 = 2;
/// The wait every receiving ring step carries: (TOP_SP 0, recv sem 8, target 1, consume 1).
pub const WAIT_RECV: SlotWait = Some((0, 8, 1, 1));

/// Where a rank sits: its logical core (HBM window), its chip and the device TOP_SP of its
/// channel 0.
#[derive(Debug, Clone, Copy)]
pub struct Place {
    pub core: u64,
    pub chip: u64,
    pub topsp: u64,
}

/// trn2.48xlarge, LNC 2, one node (golden_lowering.rs module doc): global id g → chip g / 4, core g % 4,
/// channel-0 TOP_SP 4 · core.
pub fn place(g: u64) -> Place {
    Place {
        core: g % 4,
        chip: g / 4,
        topsp: 4 * (g % 4),
    }
}

/// An address on `to`'s chip as `from` issues it (device.md §1.4: chip id 53:48 + valid 54
/// when it is another chip; src/lower/addrmap.rs doc: the plain local address otherwise).
pub fn seen(from: Place, to: Place, addr: u64) -> u64 {
    routed(addr, (from.chip != to.chip).then_some(to.chip))
}

/// §4.2 (ring all-reduce) for N ranks in identity order, `count` elements split evenly, one
/// loop (block ≤ chunk 64) in two halves, as the expected per-rank streams.
pub fn ring_all_reduce_model(group: &[u64], count: u64) -> Vec<RankStreams> {
    let n = group.len() as u64;
    // compose.rs `split_even` (n divides count here): block k = [k·b, (k+1)·b).
    let b = count / n;
    // compose.rs `ChunkPlan::pieces`: one loop of min(chunk, b) = b elements, H0 = ceil(b/2).
    let halves = [(0, b.div_ceil(2)), (b.div_ceil(2), b / 2)];
    let bytes = count * ESZ; // input = output = count elements (all-reduce)
    let mut out = Vec::new();
    for r in 0..n {
        let next = (r + 1) % n;
        let na = |i: u64| (r + i) % n; // lowering.md §4.1, identity ring
        let (me, nx) = (place(group[r as usize]), place(group[next as usize]));
        let (inp, outp, scr) = buffers(me.core, bytes, bytes);
        let (_, out_n, scr_n) = buffers(nx.core, bytes, bytes);
        let (out_n, scr_n) = (seen(me, nx, out_n), seen(me, nx, scr_n));
        // Chunk k's element `off` of its block: input/output at k·b + off; the scratch slot of
        // chunk k is Σ of the blocks before k in ring order = k·b (compose/ring.rs doc).
        let at = |base: u64, k: u64, off: u64| base + (k * b + off) * ESZ;
        let local = sem_inc(me.topsp, 9); // LOCAL on the sender (§6.4)
        let remote = seen(me, nx, sem_inc(nx.topsp, 8)); // REMOTE on NEXT's receive sem (§6.4)
        let mut s = RankStreams::new(me.core);
        // The §4.2 lines; "each line runs for H0 then H1" (compose/ring.rs: H0, H1 per line).
        let mut lines = vec![('s', na(n - 1))];
        lines.extend((2..n).map(|st| ('r', na(n - st))));
        lines.extend([('c', na(0)), ('f', na(0))]);
        lines.extend((1..n - 1).map(|t| ('d', na(n - t))));
        lines.push(('v', na(1)));
        for (line, k) in lines {
            for (off, len) in halves {
                let by = (len * ESZ) as u32;
                let srcs = [at(inp, k, off), at(scr, k, off)];
                match line {
                    // send: raw local block → NEXT's scratch slot; no wait.
                    's' => s.copy(at(inp, k, off), at(scr_n, k, off), by),
                    // recv_reduce_send: local ⊕ incoming → NEXT's scratch slot.
                    'r' => s.reduce(&srcs, at(scr_n, k, off), by),
                    // recv_reduce_copy: local ⊕ incoming → own output; LOCAL only
                    // (compose/ring_common.rs doc: no receiver to notify).
                    'c' => s.reduce(&srcs, at(outp, k, off), by),
                    // direct_copy_send / direct_recv_send: own output → NEXT's output.
                    'f' | 'd' => s.copy(at(outp, k, off), at(out_n, k, off), by),
                    // direct_recv: the data already landed; only the wait.
                    _ => {}
                }
                match line {
                    'c' => s.signal(local),
                    'v' => {}
                    _ => {
                        s.signal(local);
                        s.signal(remote);
                    }
                }
                s.end_step(if matches!(line, 's' | 'f') {
                    None
                } else {
                    WAIT_RECV
                });
            }
        }
        out.push(s);
    }
    out
}

/// §4.3 (ring all-gather) for N ranks, `count` elements per rank: direct_copy_send of the own
/// block, N−2 × direct_recv_send, direct_recv; each for H0 then H1.
pub fn ring_all_gather_model(group: &[u64], count: u64) -> Vec<RankStreams> {
    let n = group.len() as u64;
    let halves = [(0, count.div_ceil(2)), (count.div_ceil(2), count / 2)];
    let (ibytes, obytes) = (count * ESZ, n * count * ESZ);
    let mut out = Vec::new();
    for r in 0..n {
        let next = (r + 1) % n;
        let (me, nx) = (place(group[r as usize]), place(group[next as usize]));
        let (inp, outp, _) = buffers(me.core, ibytes, obytes);
        let (_, out_n, _) = buffers(nx.core, ibytes, obytes);
        let out_n = seen(me, nx, out_n);
        // Output block k at k·count (pipeline.rs `flat_leg`: dst_block k = (k·count, count)).
        let blk = |base: u64, k: u64, off: u64| base + (k * count + off) * ESZ;
        let local = sem_inc(me.topsp, 9);
        let remote = seen(me, nx, sem_inc(nx.topsp, 8));
        let mut s = RankStreams::new(me.core);
        for (off, len) in halves {
            let by = (len * ESZ) as u32;
            // direct_copy_send: input → own output block r, and input → NEXT's block r.
            s.copy(inp + off * ESZ, blk(outp, r, off), by);
            s.copy(inp + off * ESZ, blk(out_n, r, off), by);
            s.signal(local);
            s.signal(remote);
            s.end_step(None);
        }
        for t in 1..n - 1 {
            let k = (r + n - t) % n;
            for (off, len) in halves {
                s.copy(blk(outp, k, off), blk(out_n, k, off), (len * ESZ) as u32);
                s.signal(local);
                s.signal(remote);
                s.end_step(WAIT_RECV);
            }
        }
        for _ in halves {
            s.end_step(WAIT_RECV); // direct_recv of chunk na[1]
        }
        out.push(s);
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Self-checks: each formula against a constant the spec states in its own words.
// ---------------------------------------------------------------------------------------------

#[test]
fn spec_worked_constants() {
    // device.md §1.1: a copy-class meta descriptor's W0 is `(idx << 24) | 0x04800000`, i.e.
    // META (bit 23) plus FIRST (bit 26).
    assert_eq!(len_ctrl(0, true, 0, true, false, false), 0x0480_0000);
    // §1.1: LENGTH 0 means 65536.
    assert_eq!(len_ctrl(65536, false, 0, false, false, false), 0);
    // §1.1: the default copy meta_ctrl has class 2 in bits 25:23 (bit 24), bit 19, bits 1:0 = 3.
    assert_eq!(META_CTRL_COPY, (2 << 23) | (1 << 19) | 3);
    // §2.2: bit 25 (0x02000000) is the CCE-valid bit = SDMAOP 4 in bits 25:23.
    assert_eq!((cce_add_meta(0, 0, false) >> 23) & 7, 4);
    // §2.2: "last" is bit 7 in the ADD builder.
    assert_eq!(cce_add_meta(0, 0, true) ^ cce_add_meta(0, 0, false), 0x80);
    // §1.3: the phase starts at 1 and goes 1, 2, 3, 0, 1 per lap.
    let tags: Vec<u32> = (0..5).map(|lap| ring_id(lap * 32, 32)).collect();
    assert_eq!(tags, vec![1, 2, 3, 0, 1]);
    // §5.1 worked examples: TOP_SP 1 = 0x82C0000000, TOP_SP 8 = 0x808280000000.
    assert_eq!(evt_sem_base(1), 0x82_C000_0000);
    assert_eq!(evt_sem_base(8), 0x8082_8000_0000);
    // §5.1 / lowering.md §6.4: the per-step trigger address is base + 0x1800 + idx·4.
    assert_eq!(sem_inc(0, 0), 0x82_8000_1800);
    // §1.4: chip id in 53:48 with the valid bit 54.
    assert_eq!(routed(0, Some(0x3F)), 0x007F_0000_0000_0000);
    // carrier.md §3.5 / seed 003: the mesh path writes algo_type = 1 with algo_sub_type = 3.
    let mesh = cc_op(CcOp {
        algo_type: 1,
        algo_sub_type: 3,
        union: 2 | (7 << 16),
        ..CcOp::default()
    });
    assert_eq!(mesh, [0x01, 0x31, 0x00, 0x00, 0x02, 0x00, 0x07, 0x00]);
    // lowering.md §6.1: the flag byte puts reporter at bit 0 … unique_tensors at bit 4.
    let all = cc_op(CcOp {
        reporter: true,
        ring_wait_complete: true,
        ring_send_complete: true,
        safe_mode: true,
        unique_tensors: true,
        trigger_next: true,
        ..CcOp::default()
    });
    assert_eq!(all[..3], [0x01, 0x80, 0x1F]);
    // emit_slot.rs: a no-wait END record with repeat 0 (the doc's "empty END record").
    assert_eq!(
        slot_record(0, 0, 0, None, true),
        [0, 0, 0, 0, 0, 0, 0xFF, 0x10, 0, 0, 0, 0, 0, 0, 0, 0]
    );
}

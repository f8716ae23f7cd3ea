//! Packet checking and execution for [`super`] (docs/contract/device.md §1.2, §2.1–§2.3): the framing
//! rules a TX packet must follow, and the zero-copy execution of copy and CCE packets.
//!
//! The per-packet path allocates nothing: packets are parsed into the engine's reused
//! buffers, a reduce's per-source operands go to the run's reused buffers, and the operands
//! are resolved through the run's region cache ([`super::RunCx`]). An op that runs at once
//! (small and independent of everything pending) goes straight to the region bytes
//! ([`copy_now`], [`reduce_now`]) rather than through the memory's address routing again.

use std::sync::Arc;

use super::{fault, Fault, Loc, Raw, RunCx, Seg, TxPacket};
use crate::device::batch::{copy_now, reduce_now, ReduceSpec, Span, SrcSpan, DEFER_MIN_BYTES};
use crate::device::cce::{self, MAX_SOURCES};
use crate::device::memory::{MemError, Memory, Src, Touched};
use crate::dtype::{Dtype, Numerics};
use crate::isa::udma::{CceCompute, CceOp, Descriptor, Direction};

const TX: Direction = Direction::M2S;
const RX: Direction = Direction::S2M;

/// Check a complete TX packet's framing and classify it; its data segments go to `segs`
/// (and, for a CCE packet, the start of each source's segments to `bounds`, closed by
/// `segs.len()`).
pub(super) fn parse_tx(
    p: &[Raw],
    segs: &mut Vec<Seg>,
    bounds: &mut Vec<usize>,
    scales: &mut Vec<f32>,
) -> Result<TxPacket, Fault> {
    segs.clear();
    bounds.clear();
    scales.clear();
    match p[0].desc {
        Descriptor::TxData { meta: Some(_), .. } => {
            for (at, r) in p.iter().enumerate() {
                match r.desc {
                    Descriptor::TxData {
                        ctrl,
                        meta: Some(_),
                        addr,
                    } => segs.push(Seg {
                        addr,
                        len: u64::from(ctrl.length),
                        at,
                    }),
                    Descriptor::TxData { meta: None, .. } => {
                        return Err(fault(
                            r,
                            TX,
                            "data descriptor without a copy meta_ctrl inside a copy packet",
                        ))
                    }
                    _ => return Err(fault(r, TX, "META descriptor where copy data was expected")),
                }
            }
            Ok(TxPacket::Copy)
        }
        Descriptor::Cce(_) => parse_cce(p, segs, bounds, scales),
        Descriptor::TxData { meta: None, .. } => Err(fault(
            &p[0],
            TX,
            "a data descriptor without meta_ctrl must follow a CCE compute descriptor",
        )),
        _ => Err(fault(
            &p[0],
            TX,
            "copy-class meta descriptors (CME/CRC setup) are not implemented by this device",
        )),
    }
}

/// The compute descriptor at `i` of a CCE packet (the parser only records compute indices).
fn compute(p: &[Raw], i: usize) -> &CceCompute {
    match &p[i].desc {
        Descriptor::Cce(c) => c,
        _ => unreachable!("a recorded compute descriptor"),
    }
}

/// Close the source whose compute descriptor is at `at` and whose data segments start at
/// `first_seg`: its bytes must be its compute descriptor's length.
fn close(p: &[Raw], at: usize, first_seg: usize, segs: &[Seg]) -> Result<(), Fault> {
    let got: u64 = segs[first_seg..].iter().map(|g| g.len).sum();
    let want = compute(p, at).length;
    if got != u64::from(want) {
        return Err(fault(
            &p[at],
            TX,
            format!(
                "CCE source carries {got} data bytes, its compute descriptor says {want} \
                 (docs/contract/device.md §2.1)"
            ),
        ));
    }
    Ok(())
}

fn parse_cce(
    p: &[Raw],
    segs: &mut Vec<Seg>,
    bounds: &mut Vec<usize>,
    scales: &mut Vec<f32>,
) -> Result<TxPacket, Fault> {
    // Indices of the first source's compute descriptor (every other must agree with it) and
    // of the current one, where the current source's segments start, the FMA scales.
    let (mut first, mut cur, mut cur_seg) = (None::<usize>, None::<usize>, 0);
    for (at, r) in p.iter().enumerate() {
        match &r.desc {
            Descriptor::Cce(c) => {
                if let Some(k) = cur {
                    close(p, k, cur_seg, segs)?;
                    if compute(p, k).meta.last {
                        return Err(fault(r, TX, "CCE source after the one flagged last"));
                    }
                }
                match first {
                    Some(f) => {
                        let a = compute(p, f);
                        if a.meta.op != c.meta.op
                            || a.meta.out != c.meta.out
                            || a.meta.input != c.meta.input
                            || a.length != c.length
                        {
                            return Err(fault(
                                r,
                                TX,
                                "CCE compute descriptors of one packet disagree on op, dtype or \
                                 length (docs/contract/device.md §2.1: every source has the same length)",
                            ));
                        }
                    }
                    None => first = Some(at),
                }
                if c.meta.op == CceOp::Fma {
                    scales.push(f32::from_bits(c.scale));
                }
                bounds.push(segs.len());
                (cur, cur_seg) = (Some(at), segs.len());
            }
            Descriptor::TxData {
                ctrl,
                meta: None,
                addr,
            } => {
                debug_assert!(
                    cur.is_some(),
                    "a CCE packet starts with a compute descriptor"
                );
                segs.push(Seg {
                    addr: *addr,
                    len: u64::from(ctrl.length),
                    at,
                })
            }
            Descriptor::TxData { meta: Some(_), .. } => {
                return Err(fault(r, TX, "copy descriptor inside a CCE packet"))
            }
            _ => {
                return Err(fault(
                    r,
                    TX,
                    "copy-class META descriptor inside a CCE packet",
                ))
            }
        }
    }
    let k = cur.expect("packet is not empty");
    close(p, k, cur_seg, segs)?;
    if !compute(p, k).meta.last {
        return Err(fault(
            &p[k],
            TX,
            "the final CCE source is not flagged last in its meta_ctrl (docs/contract/device.md §2.1)",
        ));
    }
    bounds.push(segs.len());
    let f = first.expect("packet is not empty");
    let (c0, head) = (*compute(p, f), &p[f]);
    let m = c0.meta;
    let len = u64::from(c0.length);
    if len == 0 {
        return Err(fault(head, TX, "CCE source of length 0"));
    }
    let bad_dtype = |why: &str| {
        fault(
            head,
            TX,
            format!("CCE output dtype nibble {}: {why}", m.out),
        )
    };
    let dtype = Dtype::from_u8(m.out).ok_or_else(|| bad_dtype("not a dtype"))?;
    if !dtype.is_cce_reducible() {
        return Err(bad_dtype(&format!(
            "{dtype} cannot be reduced (docs/contract/device.md §11.1, §11.4)"
        )));
    }
    if m.input != 0 && m.input != m.out {
        return Err(fault(
            head,
            TX,
            format!(
                "CCE input dtype nibble {} differs from the output {}: conversion in transfer \
                 is not implemented",
                m.input, m.out
            ),
        ));
    }
    if !matches!(m.op, CceOp::Add | CceOp::Max | CceOp::Min | CceOp::Fma) {
        return Err(fault(
            head,
            TX,
            format!("CCE op {:?} is not implemented by this device", m.op),
        ));
    }
    let esz = dtype.size_bytes().unwrap_or(1) as u64;
    if len % esz != 0 {
        return Err(fault(
            head,
            TX,
            format!("CCE length {len} is not a whole number of {dtype} elements"),
        ));
    }
    Ok(TxPacket::Cce {
        op: m.op,
        dtype,
        fma: m.op == CceOp::Fma,
        len,
        head: f,
    })
}

/// The RX packet's destinations (decode already guarantees RX data descriptors), into `segs`.
pub(super) fn parse_rx(p: &[Raw], segs: &mut Vec<Seg>) {
    segs.clear();
    segs.extend(p.iter().enumerate().map(|(at, r)| match r.desc {
        Descriptor::RxData { ctrl, addr } => Seg {
            addr,
            len: u64::from(ctrl.length),
            at,
        },
        _ => unreachable!("an S2M queue decodes only RX data descriptors"),
    }));
}

/// The address a memory error names, if any.
fn err_addr(e: &MemError) -> Option<u64> {
    match e {
        MemError::BadAddress { addr, .. }
        | MemError::NoChip { addr, .. }
        | MemError::Unmapped { addr, .. }
        | MemError::CrossesEnd { addr, .. }
        | MemError::OutOfRange { addr, .. }
        | MemError::SemAccess { addr, .. }
        | MemError::NotMemory { addr }
        | MemError::Overlap { addr } => Some(*addr),
        MemError::BadMapping { .. } => None,
    }
}

/// Blame the piece whose address the error names: a TX source if it matches one, else the
/// RX destination.
fn mem_fault(e: &MemError, srcs: &[(u64, &Raw)], dst: &Raw) -> Fault {
    let a = err_addr(e);
    match srcs.iter().find(|(s, _)| Some(*s) == a) {
        Some((_, r)) => fault(r, TX, e.to_string()),
        None => fault(dst, RX, e.to_string()),
    }
}

/// The segment containing byte `off` of a segment list and the offset inside it.
fn locate(segs: &[Seg], mut off: u64) -> (usize, u64) {
    for (i, s) in segs.iter().enumerate() {
        if off < s.len {
            return (i, off);
        }
        off -= s.len;
    }
    unreachable!("offset inside the packet")
}

/// Where a packet's byte work goes: the memory, and the run's context (the batch of deferred
/// ops, see [`crate::device::batch`] for when an op is deferred and when the batch is flushed).
pub(super) struct Sink<'m> {
    pub mem: &'m mut Memory,
    pub chip: u8,
    pub cx: &'m mut RunCx,
    /// Many descriptors were posted when the engine started: small ops are deferred too, since
    /// together they are bulk work worth spreading.
    pub bulk: bool,
}

impl Sink<'_> {
    /// The checked, shared reduce parameters of `red` with `n_src` sources: [`cce::check`]
    /// (what the in-order kernels would reject aborts the packet before anything is deferred),
    /// skipped when the previous CCE packet had the same parameters (consecutive packets of a
    /// step do).
    fn spec(&mut self, red: &Reduce<'_>, n_src: usize) -> crate::error::Result<Arc<ReduceSpec>> {
        let same = |s: &ReduceSpec| {
            s.numerics == *red.numerics
                && s.op == red.op
                && s.dtype == red.dtype
                && s.scales.as_deref() == red.scales
        };
        match &self.cx.last_spec {
            Some((s, n)) if *n == n_src && same(s) => Ok(Arc::clone(s)),
            _ => {
                cce::check(red.numerics, red.op, red.dtype, n_src, red.scales)?;
                let s = Arc::new(ReduceSpec {
                    numerics: *red.numerics,
                    op: red.op,
                    dtype: red.dtype,
                    scales: red.scales.map(Arc::from),
                });
                self.cx.last_spec = Some((Arc::clone(&s), n_src));
                Ok(s)
            }
        }
    }

    /// Execute everything deferred so far.
    fn flush(&mut self) {
        self.cx.batch.flush(self.mem);
    }

    /// Is an op of `n` bytes one that runs at once when it is independent of everything
    /// pending (outside a bulk run, under [`DEFER_MIN_BYTES`])?
    fn small(&self, n: usize) -> bool {
        !self.bulk && (n as u64) < DEFER_MIN_BYTES
    }

    /// Flush if anything is pending.
    fn settle(&mut self) {
        if !self.cx.batch.is_empty() {
            self.flush();
        }
    }

    /// The plain-memory span of `(addr, n)` (operand position `pos`: 0 the destination, then
    /// the sources) and whether it lies in a ring's region.
    fn span(&mut self, addr: u64, n: usize, pos: usize) -> Option<(Span, bool)> {
        match self.cx.place(self.mem, self.chip, addr, n, pos) {
            Loc::Mem { region, off, ring } => Some((
                Span {
                    region,
                    off,
                    len: n,
                },
                ring,
            )),
            _ => None,
        }
    }

    /// Copy `n` bytes `src → dst`: deferred when both sides are plain memory outside the rings
    /// (or run at once when small and independent), else in order after flushing what must
    /// precede it — a ring's region or an overlapping same-region copy (`memmove`) directly,
    /// anything else (a semaphore write, a bad address) through [`Memory::copy`].
    fn copy(&mut self, dst: u64, src: u64, n: usize) -> Result<Touched, MemError> {
        let d = self.cx.place(self.mem, self.chip, dst, n, 0);
        match (d, self.span(src, n, 1)) {
            (
                Loc::Mem {
                    region,
                    off,
                    ring: d_ring,
                },
                Some((s, s_ring)),
            ) => {
                let d = Span {
                    region,
                    off,
                    len: n,
                };
                if !d.overlaps(&s) && !d_ring && !s_ring {
                    if self.small(n) && self.cx.batch.independent(d, std::iter::once(s)) {
                        copy_now(self.mem, d, s);
                    } else {
                        self.cx.batch.add_copy(self.mem, d, s);
                    }
                } else {
                    self.settle();
                    copy_now(self.mem, d, s);
                }
                return Ok(Touched::Memory);
            }
            (Loc::Sem, Some((s, _))) => {
                // A semaphore write: the batch orders it after the pending data (nothing in
                // this machine reads data but the batch's ops) unless someone outside may read
                // the data it signals, or its own source bytes are pending.
                if self.cx.flush_at_signal || self.cx.batch.writes_overlap(s) {
                    self.settle();
                }
                // What `Memory::copy` does for it: read the source, write the words.
                let mut buf = [0u8; 64];
                if let Some(buf) = buf.get_mut(..n) {
                    buf.copy_from_slice(&self.mem.region_bytes(s.region)[s.off..s.off + n]);
                    return self.mem.write(self.chip, dst, buf);
                }
            }
            _ => self.settle(),
        }
        self.mem.copy(self.chip, dst, src, n)
    }

    /// Reduce one piece (`n` bytes at `dst` from the sources at `srcs`): deferred, or run at
    /// once when small and independent; false when it must run in order through
    /// [`Memory::split`] (an operand that is not plain memory, in a ring's region, or partly
    /// overlapping the destination), after what must precede it was flushed.
    fn reduce(&mut self, spec: &Arc<ReduceSpec>, dst: u64, n: usize, srcs: &[u64]) -> bool {
        let Some((d, false)) = self.span(dst, n, 0) else {
            self.settle();
            return false;
        };
        let mut spans = std::mem::take(&mut self.cx.spans);
        spans.clear();
        for (k, &a) in srcs.iter().enumerate() {
            spans.push(match self.span(a, n, k + 1) {
                Some((s, false)) if s == d => SrcSpan::Dst,
                Some((s, false)) if !s.overlaps(&d) => SrcSpan::Mem(s),
                _ => {
                    self.cx.spans = spans;
                    self.settle();
                    return false;
                }
            });
        }
        let reads = spans.iter().filter_map(|s| match s {
            SrcSpan::Mem(m) => Some(*m),
            SrcSpan::Dst => None,
        });
        if self.small(n) && self.cx.batch.independent(d, reads) {
            reduce_now(self.mem, spec, d, &spans);
        } else {
            self.cx.batch.add_reduce(self.mem, spec, d, &spans);
        }
        self.cx.spans = spans;
        true
    }
}

/// Concatenated sources → concatenated destinations, one copy per overlap: deferred when both
/// sides are plain memory, else (a semaphore write, a ring write, an overlapping `memmove`, a
/// bad address) executed in order with [`Memory::copy`] (flushing first what must precede).
pub(super) fn exec_copy(
    sink: &mut Sink<'_>,
    src: &[Seg],
    dst: &[Seg],
    tx: &[Raw],
    rx: &[Raw],
) -> Result<(), Fault> {
    let (mut si, mut so, mut di, mut doff) = (0, 0, 0, 0);
    while si < src.len() && di < dst.len() {
        let (s, d) = (&src[si], &dst[di]);
        let n = (s.len - so).min(d.len - doff);
        let (sa, da) = (s.addr + so, d.addr + doff);
        let t = sink
            .copy(da, sa, n as usize)
            .map_err(|e| mem_fault(&e, &[(sa, &tx[s.at])], &rx[d.at]))?;
        if let Touched::Sem(t) = t {
            sink.cx.touched.push(t);
        }
        so += n;
        doff += n;
        if so == s.len {
            (si, so) = (si + 1, 0);
        }
        if doff == d.len {
            (di, doff) = (di + 1, 0);
        }
    }
    Ok(())
}

/// The parameters of a CCE packet.
pub(super) struct Reduce<'a> {
    pub numerics: &'a Numerics,
    pub op: CceOp,
    pub dtype: Dtype,
    pub scales: Option<&'a [f32]>,
    pub head: Raw,
}

/// A checked CCE packet: source `k` is `segs[bounds[k]..bounds[k + 1]]` (each `len` bytes,
/// possibly in several descriptors), the destination `dst`; `tx` / `rx` are the descriptors
/// the segments came from.
pub(super) struct CcePacket<'a> {
    pub len: u64,
    pub segs: &'a [Seg],
    pub bounds: &'a [usize],
    pub dst: &'a [Seg],
    pub tx: &'a [Raw],
    pub rx: &'a [Raw],
}

/// Reduce the packet's sources into its destination. The byte range is cut at every
/// descriptor boundary of any source or destination (into `cuts`); each piece is one deferred
/// reduce op, or — when an operand is not plain memory, a ring, or partly overlaps the
/// destination — run in order through [`Memory::split`] (which reports the error, if any).
pub(super) fn exec_cce(
    sink: &mut Sink<'_>,
    red: &Reduce<'_>,
    p: &CcePacket<'_>,
    cuts: &mut Vec<u64>,
) -> Result<(), Fault> {
    let (segs, bounds, dst) = (p.segs, p.bounds, p.dst);
    let n_src = bounds.len() - 1;
    let source = |k: usize| &segs[bounds[k]..bounds[k + 1]];
    let esz = red.dtype.size_bytes().unwrap_or(1) as u64;
    let spec = sink
        .spec(red, n_src)
        .map_err(|e| fault(&red.head, TX, e.message().to_string()))?;
    cuts.clear();
    cuts.extend([0, p.len]);
    // One descriptor per source and destination (the emitter's CCE packets): one piece, and
    // no boundary inside the packet to check.
    if dst.len() > 1 || segs.len() > n_src {
        let lists = (0..n_src).map(|k| (source(k), p.tx, TX));
        for (list, raws, dir) in lists.chain(std::iter::once((dst, p.rx, RX))) {
            let mut off = 0;
            for s in list {
                off += s.len;
                if off % esz != 0 {
                    return Err(fault(
                        &raws[s.at],
                        dir,
                        format!(
                            "descriptor boundary at byte {off} splits a {} element",
                            red.dtype
                        ),
                    ));
                }
                cuts.push(off);
            }
        }
        cuts.sort_unstable();
        cuts.dedup();
    }
    // The pieces' source addresses and segments (reused buffers: no per-packet allocation).
    let mut addrs = std::mem::take(&mut sink.cx.addrs);
    let mut at = std::mem::take(&mut sink.cx.at);
    for w in cuts.windows(2) {
        let (a, n) = (w[0], (w[1] - w[0]) as usize);
        let (dk, doff) = locate(dst, a);
        let d = &dst[dk];
        addrs.clear();
        at.clear();
        for k in 0..n_src {
            let (i, o) = locate(source(k), a);
            at.push(bounds[k] + i);
            addrs.push(segs[bounds[k] + i].addr + o);
        }
        if sink.reduce(&spec, d.addr + doff, n, &addrs) {
            continue;
        }
        let req: Vec<(u64, usize)> = addrs.iter().map(|&s| (s, n)).collect();
        let split = sink
            .mem
            .split(sink.chip, (d.addr + doff, n), &req)
            .map_err(|e| {
                let spots: Vec<(u64, &Raw)> = addrs
                    .iter()
                    .zip(&at)
                    .map(|(&s, &i)| (s, &p.tx[segs[i].at]))
                    .collect();
                mem_fault(&e, &spots, &p.rx[d.at])
            })?;
        reduce_piece(red, split.dst, &split.srcs)
            .map_err(|e| fault(&red.head, TX, e.message().to_string()))?;
    }
    sink.cx.addrs = addrs;
    sink.cx.at = at;
    Ok(())
}

/// One piece: out of place, in place (exactly one source is the destination), or — when
/// several sources alias the destination — through a copy of the destination bytes.
fn reduce_piece(red: &Reduce<'_>, dst: &mut [u8], srcs: &[Src<'_>]) -> crate::error::Result<()> {
    let mut v: [&[u8]; MAX_SOURCES] = [&[]; MAX_SOURCES];
    let (mut n, mut in_place, mut at) = (0, 0, 0);
    for (i, s) in srcs.iter().enumerate() {
        match s {
            Src::Bytes(b) => {
                v[n] = b;
                n += 1;
            }
            Src::Dst => {
                in_place += 1;
                at = i;
            }
        }
    }
    match in_place {
        0 => cce::reduce_with(red.numerics, red.op, red.dtype, &v[..n], red.scales, dst),
        1 => cce::reduce_in_place_with(
            red.numerics,
            red.op,
            red.dtype,
            dst,
            at,
            &v[..n],
            red.scales,
        ),
        _ => {
            let copy = dst.to_vec();
            for (slot, s) in v.iter_mut().zip(srcs) {
                *slot = match s {
                    Src::Bytes(b) => b,
                    Src::Dst => &copy[..],
                };
            }
            cce::reduce_with(
                red.numerics,
                red.op,
                red.dtype,
                &v[..srcs.len()],
                red.scales,
                dst,
            )
        }
    }
}

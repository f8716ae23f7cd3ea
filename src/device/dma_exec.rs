//! Packet checking and execution for [`super`] (spec/device.md §1.2, §2.1–§2.3): the framing
//! rules a TX packet must follow, and the zero-copy execution of copy and CCE packets.

use std::sync::Arc;

use super::{fault, Fault, Raw, Seg, TxPacket};
use crate::device::batch::{Batch, Op, ReduceSpec, Span, SrcSpan, DEFER_MIN_BYTES};
use crate::device::cce;
use crate::device::memory::{MemError, Memory, Place, SemTouch, Src, Touched};
use crate::dtype::{Dtype, Numerics};
use crate::isa::udma::{CceCompute, CceOp, Descriptor, Direction};

const TX: Direction = Direction::M2S;
const RX: Direction = Direction::S2M;

/// Check a complete TX packet's framing and classify it.
pub(super) fn parse_tx(p: &[Raw]) -> Result<TxPacket, Fault> {
    match p[0].desc {
        Descriptor::TxData { meta: Some(_), .. } => {
            let mut segs = Vec::with_capacity(p.len());
            for r in p {
                match r.desc {
                    Descriptor::TxData {
                        ctrl,
                        meta: Some(_),
                        addr,
                    } => segs.push(Seg {
                        addr,
                        len: u64::from(ctrl.length),
                        raw: *r,
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
            Ok(TxPacket::Copy(segs))
        }
        Descriptor::Cce(_) => parse_cce(p),
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

/// One source of a CCE packet being collected.
struct Source {
    compute: CceCompute,
    raw: Raw,
    segs: Vec<Seg>,
}

fn close(s: &Source) -> Result<(), Fault> {
    let got: u64 = s.segs.iter().map(|g| g.len).sum();
    if got != u64::from(s.compute.length) {
        return Err(fault(
            &s.raw,
            TX,
            format!(
                "CCE source carries {got} data bytes, its compute descriptor says {} \
                 (device.md §2.1)",
                s.compute.length
            ),
        ));
    }
    Ok(())
}

fn parse_cce(p: &[Raw]) -> Result<TxPacket, Fault> {
    let mut done: Vec<Source> = Vec::new();
    let mut cur: Option<Source> = None;
    for r in p {
        match r.desc {
            Descriptor::Cce(c) => {
                if let Some(s) = cur.take() {
                    close(&s)?;
                    if s.compute.meta.last {
                        return Err(fault(r, TX, "CCE source after the one flagged last"));
                    }
                    done.push(s);
                }
                if let Some(f) = done.first() {
                    let (a, b) = (f.compute, c);
                    if a.meta.op != b.meta.op
                        || a.meta.out != b.meta.out
                        || a.meta.input != b.meta.input
                        || a.length != b.length
                    {
                        return Err(fault(
                            r,
                            TX,
                            "CCE compute descriptors of one packet disagree on op, dtype or \
                             length (device.md §2.1: every source has the same length)",
                        ));
                    }
                }
                cur = Some(Source {
                    compute: c,
                    raw: *r,
                    segs: Vec::new(),
                });
            }
            Descriptor::TxData {
                ctrl,
                meta: None,
                addr,
            } => match &mut cur {
                Some(s) => s.segs.push(Seg {
                    addr,
                    len: u64::from(ctrl.length),
                    raw: *r,
                }),
                None => unreachable!("a CCE packet starts with a compute descriptor"),
            },
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
    let s = cur.expect("packet is not empty");
    close(&s)?;
    if !s.compute.meta.last {
        return Err(fault(
            &s.raw,
            TX,
            "the final CCE source is not flagged last in its meta_ctrl (device.md §2.1)",
        ));
    }
    done.push(s);
    let head = done[0].raw;
    let m = done[0].compute.meta;
    let len = u64::from(done[0].compute.length);
    if len == 0 {
        return Err(fault(&head, TX, "CCE source of length 0"));
    }
    let bad_dtype = |why: &str| {
        fault(
            &head,
            TX,
            format!("CCE output dtype nibble {}: {why}", m.out),
        )
    };
    let dtype = Dtype::from_u8(m.out).ok_or_else(|| bad_dtype("not a dtype"))?;
    if !dtype.is_cce_reducible() {
        return Err(bad_dtype(&format!(
            "{dtype} cannot be reduced (device.md §11.1, §11.4)"
        )));
    }
    if m.input != 0 && m.input != m.out {
        return Err(fault(
            &head,
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
            &head,
            TX,
            format!("CCE op {:?} is not implemented by this device", m.op),
        ));
    }
    let esz = dtype.size_bytes().unwrap_or(1) as u64;
    if len % esz != 0 {
        return Err(fault(
            &head,
            TX,
            format!("CCE length {len} is not a whole number of {dtype} elements"),
        ));
    }
    let scales = (m.op == CceOp::Fma).then(|| {
        done.iter()
            .map(|s| f32::from_bits(s.compute.scale))
            .collect()
    });
    Ok(TxPacket::Cce {
        op: m.op,
        dtype,
        scales,
        len,
        sources: done.into_iter().map(|s| s.segs).collect(),
        head,
    })
}

/// The RX packet's destinations (decode already guarantees RX data descriptors).
pub(super) fn parse_rx(p: &[Raw]) -> Vec<Seg> {
    p.iter()
        .map(|r| match r.desc {
            Descriptor::RxData { ctrl, addr } => Seg {
                addr,
                len: u64::from(ctrl.length),
                raw: *r,
            },
            _ => unreachable!("an S2M queue decodes only RX data descriptors"),
        })
        .collect()
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

/// Where a packet's byte work goes: the memory, and the engine's [`Batch`] of deferred ops
/// (see [`crate::device::batch`] for when an op is deferred and when the batch is flushed).
pub(super) struct Sink<'m> {
    pub mem: &'m mut Memory,
    pub chip: u8,
    pub batch: &'m mut Batch,
    /// Regions holding this engine's two rings: an op writing them runs in order.
    pub rings: [Option<usize>; 2],
    /// Many descriptors were posted when the engine started: small ops are deferred too, since
    /// together they are bulk work worth spreading.
    pub bulk: bool,
    /// The reduce parameters of the last CCE packet (consecutive packets share them).
    pub last_spec: Option<Arc<ReduceSpec>>,
    pub threads: usize,
}

impl Sink<'_> {
    /// The shared reduce parameters of `red`.
    fn spec(&mut self, red: &Reduce<'_>) -> Arc<ReduceSpec> {
        let same = |s: &ReduceSpec| {
            s.numerics == *red.numerics
                && s.op == red.op
                && s.dtype == red.dtype
                && s.scales.as_deref() == red.scales
        };
        match &self.last_spec {
            Some(s) if same(s) => Arc::clone(s),
            _ => {
                let s = Arc::new(ReduceSpec {
                    numerics: *red.numerics,
                    op: red.op,
                    dtype: red.dtype,
                    scales: red.scales.map(Arc::from),
                });
                self.last_spec = Some(Arc::clone(&s));
                s
            }
        }
    }

    /// Execute everything deferred so far.
    pub fn flush(&mut self) {
        self.batch.flush(self.mem, self.threads);
    }

    /// Defer `op` behind the pending ops it depends on (flushing first if the batch is full),
    /// or — outside a bulk run, when it is small and independent of everything pending — tell
    /// the caller to run it in order right now (false): deferring a few bytes costs more than
    /// it saves, and an independent op commutes with the pending ones.
    fn defer(&mut self, op: Op) -> bool {
        if !self.bulk && op.bytes() < DEFER_MIN_BYTES && self.batch.level_for(&op) == 0 {
            return false;
        }
        if let Err(op) = self.batch.push(op) {
            self.flush();
            let _ = self.batch.push(op);
        }
        true
    }

    /// The memory span of `(addr, n)` if an op may be deferred onto it.
    fn span(&self, addr: u64, n: usize, writes: bool) -> Option<Span> {
        match self.mem.place(self.chip, addr, n) {
            Ok(Place::Mem { region, off }) if !(writes && self.rings.contains(&Some(region))) => {
                Some(Span {
                    region,
                    off,
                    len: n,
                })
            }
            _ => None,
        }
    }
}

/// Concatenated sources → concatenated destinations, one copy per overlap: deferred when both
/// sides are plain memory, else (a semaphore write, a ring write, an overlapping `memmove`, a
/// bad address) flushed and executed in order with [`Memory::copy`].
pub(super) fn exec_copy(
    sink: &mut Sink<'_>,
    src: &[Seg],
    dst: &[Seg],
    sems: &mut Vec<SemTouch>,
) -> Result<(), Fault> {
    let (mut si, mut so, mut di, mut doff) = (0, 0, 0, 0);
    while si < src.len() && di < dst.len() {
        let (s, d) = (&src[si], &dst[di]);
        let n = (s.len - so).min(d.len - doff);
        let (sa, da) = (s.addr + so, d.addr + doff);
        let op = sink.span(da, n as usize, true).and_then(|dsp| {
            let ssp = sink.span(sa, n as usize, false)?;
            let apart = dsp.region != ssp.region
                || dsp.off + dsp.len <= ssp.off
                || ssp.off + ssp.len <= dsp.off;
            apart.then_some(Op::Copy { dst: dsp, src: ssp })
        });
        let deferred = match op {
            Some(op) => sink.defer(op),
            None => {
                if n > 0 {
                    sink.flush();
                }
                false
            }
        };
        if !deferred {
            let t = sink
                .mem
                .copy(sink.chip, da, sa, n as usize)
                .map_err(|e| mem_fault(&e, &[(sa, &s.raw)], &d.raw))?;
            if let Touched::Sem(t) = t {
                sems.push(t);
            }
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

/// Reduce `sources` (each `len` bytes, possibly in several descriptors) into `dst`. The byte
/// range is cut at every descriptor boundary of any source or destination; each piece is one
/// deferred reduce op, or — when an operand is not plain memory, a ring, or partly overlaps
/// the destination — flushed and run in order through [`Memory::split`] (which reports the
/// error, if any).
pub(super) fn exec_cce(
    sink: &mut Sink<'_>,
    red: &Reduce<'_>,
    len: u64,
    sources: &[Vec<Seg>],
    dst: &[Seg],
) -> Result<(), Fault> {
    let esz = red.dtype.size_bytes().unwrap_or(1) as u64;
    cce::check(red.numerics, red.op, red.dtype, sources.len(), red.scales)
        .map_err(|e| fault(&red.head, TX, e.message().to_string()))?;
    let mut cuts: Vec<u64> = vec![0, len];
    for segs in sources.iter().map(|s| &s[..]).chain(std::iter::once(dst)) {
        let mut off = 0;
        for s in segs {
            off += s.len;
            if off % esz != 0 {
                return Err(fault(
                    &s.raw,
                    s.raw_dir(),
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
    let spec = sink.spec(red);
    for w in cuts.windows(2) {
        let (a, n) = (w[0], (w[1] - w[0]) as usize);
        let (dk, doff) = locate(dst, a);
        let d = &dst[dk];
        let spots: Vec<(u64, &Raw)> = sources
            .iter()
            .map(|segs| {
                let (k, o) = locate(segs, a);
                (segs[k].addr + o, &segs[k].raw)
            })
            .collect();
        match reduce_op(sink, &spec, d.addr + doff, n, &spots) {
            Some(op) => {
                if sink.defer(op) {
                    continue;
                }
            }
            None => sink.flush(),
        }
        let req: Vec<(u64, usize)> = spots.iter().map(|&(s, _)| (s, n)).collect();
        let split = sink
            .mem
            .split(sink.chip, (d.addr + doff, n), &req)
            .map_err(|e| mem_fault(&e, &spots, &d.raw))?;
        reduce_piece(red, split.dst, &split.srcs)
            .map_err(|e| fault(&red.head, TX, e.message().to_string()))?;
    }
    Ok(())
}

/// The deferrable reduce of one piece, if every operand is plain memory and no source partly
/// overlaps the destination.
fn reduce_op(
    sink: &Sink<'_>,
    spec: &Arc<ReduceSpec>,
    dst: u64,
    n: usize,
    spots: &[(u64, &Raw)],
) -> Option<Op> {
    let d = sink.span(dst, n, true)?;
    let mut srcs = Vec::with_capacity(spots.len());
    for &(a, _) in spots {
        let s = sink.span(a, n, false)?;
        srcs.push(if s == d {
            SrcSpan::Dst
        } else if s.region != d.region || s.off + n <= d.off || d.off + n <= s.off {
            SrcSpan::Mem(s)
        } else {
            return None;
        });
    }
    Some(Op::Reduce {
        dst: d,
        srcs,
        spec: Arc::clone(spec),
    })
}

/// One piece: out of place, in place (exactly one source is the destination), or — when
/// several sources alias the destination — through a copy of the destination bytes.
fn reduce_piece(red: &Reduce<'_>, dst: &mut [u8], srcs: &[Src<'_>]) -> crate::error::Result<()> {
    let at_dst: Vec<usize> = (0..srcs.len()).filter(|&i| srcs[i] == Src::Dst).collect();
    fn bytes<'b>(s: &Src<'b>) -> &'b [u8] {
        match s {
            Src::Bytes(b) => b,
            Src::Dst => &[],
        }
    }
    match at_dst[..] {
        [] => {
            let v: Vec<&[u8]> = srcs.iter().map(bytes).collect();
            cce::reduce_with(red.numerics, red.op, red.dtype, &v, red.scales, dst)
        }
        [p] => {
            let v: Vec<&[u8]> = srcs.iter().filter(|s| **s != Src::Dst).map(bytes).collect();
            cce::reduce_in_place_with(red.numerics, red.op, red.dtype, dst, p, &v, red.scales)
        }
        _ => {
            let copy = dst.to_vec();
            let v: Vec<&[u8]> = srcs
                .iter()
                .map(|s| match s {
                    Src::Bytes(b) => *b,
                    Src::Dst => &copy[..],
                })
                .collect();
            cce::reduce_with(red.numerics, red.op, red.dtype, &v, red.scales, dst)
        }
    }
}

impl Seg {
    /// The queue a segment's descriptor sits on.
    fn raw_dir(&self) -> Direction {
        match self.raw.desc {
            Descriptor::RxData { .. } => RX,
            _ => TX,
        }
    }
}

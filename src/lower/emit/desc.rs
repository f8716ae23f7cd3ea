//! Tiling one step into UDMA descriptors (docs/contract/device.md §1.2, §2.1;
//! docs/contract/lowering.md §5, §6.4).
//!
//! * **Copy** (`Transfer::Copy`): one M2S packet of TX data descriptors (≤ 64 KiB each, CME
//!   meta_ctrl 0x01080003, plus the notification bit on v4) and the matching S2M packet of RX
//!   descriptors. A packet holds at most [`copy_packet_descs`] descriptors (the smaller of the
//!   TX/RX per-packet limits of §5.2), so a large copy becomes several packet pairs.
//! * **Reduce** (`Transfer::Reduce`): per packet, source by source, a CCE compute descriptor
//!   (its meta_ctrl "last" only on the final source) then the source's TX data descriptor(s);
//!   and one S2M packet writing the reduced stream. Packet elements: see [`reduce_packet_elems`].
//! * **Signal**: a 4-byte copy from the issuing rank's constant page to the semaphore's INC
//!   window (routed). The RX descriptor sets DMB (len_ctrl bit 30) so the increment lands only
//!   after every earlier write of the queue is visible: the data-then-signal order of §6.4.
//!   Amounts above the constant page (1023) are split into several increments.
//!
//! Descriptors are built untagged; [`stamp`] sets RING_ID once the ring length is known.
//! Zero-length transfers emit nothing.

use crate::error::{Error, Result};
use crate::isa::enums::Dtype;
use crate::isa::udma::{CceCompute, CceMeta, CceOp, CopyMeta, Descriptor, LenCtrl, MAX_DESC_BYTES};
use crate::lower::addrmap::{AddressMap, Generation, CONST_WORDS};
use crate::lower::program::{Signal, Transfer};
use crate::lower::request::ReduceOp;

/// Per-priority-class CCE packet byte caps (`cc_cce_reduce_prio_pkt_size`,
/// docs/contract/lowering.md §5.1). The vendor values were not recovered (OPEN): we use 8 KiB for
/// every class, which is 2048 FP32 elements — so on v3/v4 the 2048-element cap of §5.2 is what
/// binds for every dtype, and no class changes a result. Edit this table to model QoS classes.
pub const PRIO_PKT_CAP: [u64; 5] = [8192; 5];

/// Most CCE sources per packet (docs/contract/device.md §2.1).
pub const MAX_CCE_SOURCES: usize = 32;

/// Most descriptors of one copy packet on `gen` (min of TX and RX limits,
/// docs/contract/lowering.md §5.2).
pub fn copy_packet_descs(gen: Generation) -> u64 {
    let (tx, rx) = gen.max_descs_per_packet();
    u64::from(tx.min(rx))
}

/// Elements per CCE packet for a reduce of `len` elements of `esz` bytes
/// (docs/contract/lowering.md §5.1, §5.2): `min(esz·len, cap[prio]) & ~0x1F` bytes, at most the
/// generation's CCE element cap. When that rounds to zero (fewer than 32 bytes) the whole transfer
/// is one packet.
pub fn reduce_packet_elems(len: u64, esz: u64, prio: u8, gen: Generation) -> u64 {
    let cap = PRIO_PKT_CAP[usize::from(prio).min(PRIO_PKT_CAP.len() - 1)];
    let bytes = (esz * len).min(cap) & !0x1F;
    let elems = (bytes / esz).min(gen.cce_max_elems());
    if elems == 0 {
        len.min(gen.cce_max_elems())
    } else {
        elems
    }
}

/// The CCE op of a reduce op (`SDMA_CCETYPE`, docs/contract/lowering.md §2.10).
pub fn cce_op(op: ReduceOp) -> CceOp {
    match op {
        ReduceOp::Add => CceOp::Add,
        ReduceOp::Max => CceOp::Max,
        ReduceOp::Min => CceOp::Min,
    }
}

/// The descriptors of one step, per direction, in issue order (untagged).
#[derive(Debug, Default)]
pub struct StepDescs {
    /// M2S.
    pub m2s: Vec<Descriptor>,
    /// S2M.
    pub s2m: Vec<Descriptor>,
}

fn ctrl(length: u32, first: bool, last: bool) -> LenCtrl {
    LenCtrl {
        length,
        first,
        last,
        ..Default::default()
    }
}

/// Split `bytes` at `addr` into ≤ 64 KiB data descriptors; FIRST/LAST as asked on the ends.
fn data_run(addr: u64, bytes: u64, first: bool, last: bool, mut mk: impl FnMut(LenCtrl, u64)) {
    let n = bytes.div_ceil(u64::from(MAX_DESC_BYTES));
    for i in 0..n {
        let off = i * u64::from(MAX_DESC_BYTES);
        let len = (bytes - off).min(u64::from(MAX_DESC_BYTES)) as u32;
        mk(ctrl(len, first && i == 0, last && i + 1 == n), addr + off);
    }
}

/// Emits the descriptors of steps issued by one rank.
#[derive(Debug)]
pub struct Tiler<'a> {
    /// The map.
    pub map: &'a AddressMap,
    /// Issuing rank.
    pub rank: u32,
    /// Element type.
    pub dtype: Dtype,
    /// DMA priority class.
    pub prio: u8,
}

impl Tiler<'_> {
    fn esz(&self) -> Result<u64> {
        match self.dtype.sdma_size_table() {
            0 => Err(Error::invalid(format!(
                "emit: dtype {} has no SDMA size (docs/contract/lowering.md §5.1)",
                self.dtype.name()
            ))),
            s => Ok(s as u64),
        }
    }

    fn copy_meta(&self) -> CopyMeta {
        CopyMeta {
            notification: self.map.gen() == Generation::V4,
            ..CopyMeta::default()
        }
    }

    /// One transfer.
    pub fn transfer(&self, t: &Transfer, out: &mut StepDescs) -> Result<()> {
        let esz = self.esz()?;
        match t {
            Transfer::Copy { src, dst, len } => {
                let total = len * esz;
                let per_pkt = copy_packet_descs(self.map.gen()) * u64::from(MAX_DESC_BYTES);
                let mut off = 0;
                while off < total {
                    let n = (total - off).min(per_pkt);
                    let s = self.map.loc_addr(self.rank, *src, esz, total)? + off;
                    let d = self.map.loc_addr(self.rank, *dst, esz, total)? + off;
                    let meta = Some(self.copy_meta());
                    data_run(s, n, true, true, |ctrl, addr| {
                        out.m2s.push(Descriptor::TxData { ctrl, meta, addr })
                    });
                    data_run(d, n, true, true, |ctrl, addr| {
                        out.s2m.push(Descriptor::RxData { ctrl, addr })
                    });
                    off += n;
                }
            }
            Transfer::Reduce {
                op, srcs, dst, len, ..
            } => {
                if *len == 0 {
                    return Ok(());
                }
                if !self.dtype.is_cce_reducible() {
                    return Err(Error::invalid(format!(
                        "emit: the CCE cannot reduce {}",
                        self.dtype.name()
                    )));
                }
                if srcs.is_empty() || srcs.len() > MAX_CCE_SOURCES {
                    return Err(Error::invalid(format!(
                        "emit: a CCE reduce takes 1..={MAX_CCE_SOURCES} sources, got {}",
                        srcs.len()
                    )));
                }
                let total = len * esz;
                let bases = srcs
                    .iter()
                    .map(|s| self.map.loc_addr(self.rank, *s, esz, total))
                    .collect::<Result<Vec<_>>>()?;
                let dbase = self.map.loc_addr(self.rank, *dst, esz, total)?;
                let pkt = reduce_packet_elems(*len, esz, self.prio, self.map.gen()) * esz;
                let cop = cce_op(*op);
                let n = srcs.len();
                let mut off = 0;
                while off < total {
                    let bytes = (total - off).min(pkt);
                    for (i, base) in bases.iter().enumerate() {
                        let last = i + 1 == n;
                        out.m2s.push(Descriptor::Cce(CceCompute {
                            ctrl: LenCtrl {
                                meta: true,
                                first: i == 0,
                                ..Default::default()
                            },
                            meta: CceMeta::for_reduce(cop, self.dtype, last),
                            length: bytes as u32,
                            w2_hi: CceCompute::default_w2_hi(cop),
                            scale: 0,
                        }));
                        data_run(base + off, bytes, false, last, |ctrl, addr| {
                            out.m2s.push(Descriptor::TxData {
                                ctrl,
                                meta: None,
                                addr,
                            })
                        });
                    }
                    data_run(dbase + off, bytes, true, true, |ctrl, addr| {
                        out.s2m.push(Descriptor::RxData { ctrl, addr })
                    });
                    off += bytes;
                }
            }
        }
        Ok(())
    }

    /// One semaphore increment (docs/contract/lowering.md §6.4): 4-byte copies from the constant
    /// page to the INC window.
    pub fn signal(&self, s: &Signal, out: &mut StepDescs) -> Result<()> {
        let dst = self.map.sem_inc_addr(self.rank, s.sem)?;
        let mut left = s.amount;
        while left > 0 {
            let v = left.min(CONST_WORDS - 1);
            let src = self.map.const_addr(self.rank, v)?;
            out.m2s.push(Descriptor::TxData {
                ctrl: ctrl(4, true, true),
                meta: Some(self.copy_meta()),
                addr: src,
            });
            out.s2m.push(Descriptor::RxData {
                ctrl: LenCtrl {
                    dmb: true,
                    ..ctrl(4, true, true)
                },
                addr: dst,
            });
            left -= v;
        }
        Ok(())
    }
}

/// Set the RING_ID tag of every descriptor of a stream for a ring of `ring_len` slots and
/// encode it (docs/contract/device.md §1.3).
pub fn stamp(descs: &[Descriptor], ring_len: u64) -> Vec<[u8; 16]> {
    descs
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let tag = crate::isa::udma::ring_id_at(i as u64, ring_len);
            let mut d = *d;
            match &mut d {
                Descriptor::TxData { ctrl, .. }
                | Descriptor::RxData { ctrl, .. }
                | Descriptor::CopyMetaDesc { ctrl, .. } => ctrl.ring_id = tag,
                Descriptor::Cce(c) => c.ctrl.ring_id = tag,
            }
            d.encode()
        })
        .collect()
}

/// The ring guard gap (docs/contract/device.md §3.2).
pub const RING_GUARD: u64 = 16;
/// Smallest ring we allocate.
pub const MIN_RING: u64 = 32;

/// Ring length for a stream of `n` descriptors: the smallest power of two holding the stream plus
/// the 16-descriptor guard gap, capped at `max_ring` (then the stream wraps,
/// docs/contract/device.md §1.3).
pub fn ring_len(n: u64, max_ring: u64) -> u64 {
    (n + RING_GUARD)
        .next_power_of_two()
        .max(MIN_RING)
        .min(max_ring)
}

//! The 16-byte UDMA descriptor, the copy (CME) meta_ctrl and the CCE compute descriptor
//! (docs/contract/device.md §1.1–§1.3, §2.1–§2.2).
//!
//! Word layout (docs/contract/device.md §1.1): W0 `len_ctrl` @0, W1 `meta_ctrl` @4, `buf_ptr` u64
//! @8 (a meta descriptor stores two u32 there instead). All little-endian.
//!
//! Three choices of ours, documented because the spec leaves them open:
//! * **The top byte of a META descriptor.** The vendor reads bits 31:24 of a meta descriptor's
//!   W0 as a "meta index" (docs/contract/device.md §1.1, §2.1). We encode that index so that it
//!   *is* a valid len_ctrl top byte: RING_ID in index bits 1:0, FIRST in bit 2, LAST in bit 3, … —
//!   the vendor constant `(idx << 24) | 0x04800000` for copy meta descriptors already has FIRST set
//!   this way. So one [`LenCtrl`] decoder serves every descriptor, and the engine's generation-tag
//!   check (§1.3) and packet framing work the same on meta and data descriptors.
//! * **The "write-barrier flag" of the CCE compute W0** is the DMB bit (len_ctrl bit 30), the
//!   only barrier bit of len_ctrl (§1.1 "barrier modes").
//! * **W1 of a TX data descriptor inside a CCE packet** is 0: the class comes from the compute
//!   descriptor in front of it. A plain copy's TX data descriptor carries the CME meta_ctrl.
//!
//! `encode` is total (fields are masked to their width); `decode` is strict and names the
//! field and its bits when it rejects a word. `decode(encode(d)) == d` for every valid `d`.

use crate::error::{Error, Result};
mod cce;
pub use cce::{CceCompute, CceMeta, CceOp, ACCUM_FP32R, W2_COMBO, W2_MIN_MAX};

/// Size of one descriptor.
pub const DESC_BYTES: usize = 16;
/// Largest data length of one descriptor (LENGTH 0 encodes it), docs/contract/device.md §1.1.
pub const MAX_DESC_BYTES: u32 = 65536;
/// The default CME (copy) meta_ctrl, docs/contract/device.md §1.1 **\[H\]**.
pub const META_CTRL_COPY_DEFAULT: u32 = 0x0108_0003;
/// SDMA operation class CME (plain copy), meta_ctrl bits 25:23.
pub const CLASS_CME: u8 = 2;
/// SDMA operation class CCE (compute), meta_ctrl bits 25:23 (bit 25 = "CCE valid").
pub const CLASS_CCE: u8 = 4;

/// Which queue a descriptor sits on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Memory to stream (TX): reads the source.
    M2S,
    /// Stream to memory (RX): writes the destination.
    S2M,
}

fn bad(field: &str, bits: &str, v: u64, why: &str) -> Error {
    Error::invalid(format!(
        "udma descriptor: {field} (bits {bits}) = {v:#x}: {why}"
    ))
    .with_field(field)
    .with_actual(format!("{v:#x}"))
}

fn b(w: u32, n: u32) -> bool {
    (w >> n) & 1 == 1
}

/// W0 `len_ctrl` (docs/contract/device.md §1.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct LenCtrl {
    /// Data bytes, 1..=65536 (LENGTH 0 = 65536). Always 0 on a META descriptor.
    pub length: u32,
    /// Bit 23: meta / compute-setup descriptor, no data buffer.
    pub meta: bool,
    /// Bits 25:24: generation tag (docs/contract/device.md §1.3).
    pub ring_id: u8,
    /// Bit 26: first descriptor of a packet.
    pub first: bool,
    /// Bit 27: last descriptor of a packet.
    pub last: bool,
    /// Bit 28: interrupt / completion.
    pub int_en: bool,
    /// Bit 29: strong write order (RX only, v3+).
    pub sow: bool,
    /// Bit 30: data memory barrier (earlier writes visible first).
    pub dmb: bool,
    /// Bit 31: concatenate with the next descriptor.
    pub concat: bool,
}

impl LenCtrl {
    /// The 32-bit word.
    pub fn encode(&self) -> u32 {
        let len = if self.meta { 0 } else { self.length & 0xFFFF };
        len | (u32::from(self.meta) << 23)
            | (u32::from(self.ring_id & 3) << 24)
            | (u32::from(self.first) << 26)
            | (u32::from(self.last) << 27)
            | (u32::from(self.int_en) << 28)
            | (u32::from(self.sow) << 29)
            | (u32::from(self.dmb) << 30)
            | (u32::from(self.concat) << 31)
    }

    /// Decode W0; reserved bits 22:16 must be 0, a META word has LENGTH 0.
    pub fn decode(w: u32) -> Result<LenCtrl> {
        if w & 0x007F_0000 != 0 {
            return Err(bad(
                "len_ctrl reserved",
                "22:16",
                u64::from((w >> 16) & 0x7F),
                "must be 0",
            ));
        }
        let meta = b(w, 23);
        let raw = w & 0xFFFF;
        if meta && raw != 0 {
            return Err(bad(
                "len_ctrl LENGTH",
                "15:0",
                u64::from(raw),
                "a META descriptor carries no data",
            ));
        }
        Ok(LenCtrl {
            length: if meta {
                0
            } else if raw == 0 {
                MAX_DESC_BYTES
            } else {
                raw
            },
            meta,
            ring_id: ((w >> 24) & 3) as u8,
            first: b(w, 26),
            last: b(w, 27),
            int_en: b(w, 28),
            sow: b(w, 29),
            dmb: b(w, 30),
            concat: b(w, 31),
        })
    }

    /// The vendor's view of a META descriptor's top byte (its "meta index").
    pub fn meta_idx(&self) -> u8 {
        (self.encode() >> 24) as u8
    }
}

/// W1 of a copy-class (CME) descriptor (docs/contract/device.md §1.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CopyMeta {
    /// Bits 2:0 (`block_attr`; bits 1:0 = is_last_block / is_first_block), 3 in the default.
    pub block_attr: u8,
    /// Bit 19: copy_source_data (set in the default).
    pub copy_source_data: bool,
    /// Bits 22:20: op_type (0 in the default).
    pub op_type: u8,
    /// Bit 26: write barrier.
    pub write_barrier: bool,
    /// Bit 28: notification (required on v4).
    pub notification: bool,
}

impl Default for CopyMeta {
    /// The default word 0x01080003.
    fn default() -> Self {
        CopyMeta {
            block_attr: 3,
            copy_source_data: true,
            op_type: 0,
            write_barrier: false,
            notification: false,
        }
    }
}

impl CopyMeta {
    /// The 32-bit word (class CME = 2 in bits 25:23).
    pub fn encode(&self) -> u32 {
        u32::from(self.block_attr & 7)
            | (u32::from(self.copy_source_data) << 19)
            | (u32::from(self.op_type & 7) << 20)
            | (u32::from(CLASS_CME) << 23)
            | (u32::from(self.write_barrier) << 26)
            | (u32::from(self.notification) << 28)
    }

    /// Decode; the class must be CME and the unnamed bits 0.
    pub fn decode(w: u32) -> Result<CopyMeta> {
        let class = (w >> 23) & 7;
        if class != u32::from(CLASS_CME) {
            return Err(bad(
                "meta_ctrl SDMA class",
                "25:23",
                u64::from(class),
                "expected 2 (CME copy)",
            ));
        }
        let unnamed = w & !(0x7 | (1 << 19) | (0x7 << 20) | (0x7 << 23) | (1 << 26) | (1 << 28));
        if unnamed != 0 {
            return Err(bad(
                "meta_ctrl reserved",
                "18:3,27,31:29",
                u64::from(unnamed),
                "must be 0",
            ));
        }
        Ok(CopyMeta {
            block_attr: (w & 7) as u8,
            copy_source_data: b(w, 19),
            op_type: ((w >> 20) & 7) as u8,
            write_barrier: b(w, 26),
            notification: b(w, 28),
        })
    }
}

/// One typed 16-byte descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Descriptor {
    /// M2S data: read `ctrl.length` bytes at `addr`. `meta` is the CME meta_ctrl of a plain
    /// copy, or `None` (W1 = 0) for a source of a CCE packet.
    TxData {
        /// W0.
        ctrl: LenCtrl,
        /// W1.
        meta: Option<CopyMeta>,
        /// Source SoC address.
        addr: u64,
    },
    /// S2M data: write `ctrl.length` bytes at `addr`.
    RxData {
        /// W0.
        ctrl: LenCtrl,
        /// Destination SoC address.
        addr: u64,
    },
    /// M2S CCE compute descriptor.
    Cce(CceCompute),
    /// M2S copy-class meta descriptor (`(idx << 24) | 0x04800000`, docs/contract/device.md §1.1).
    CopyMetaDesc {
        /// W0 (META set).
        ctrl: LenCtrl,
        /// W1.
        meta: CopyMeta,
        /// u32 @8.
        meta1: u32,
        /// u32 @12.
        meta2: u32,
    },
}

impl Descriptor {
    /// W0 of any descriptor.
    pub fn ctrl(&self) -> LenCtrl {
        match self {
            Descriptor::TxData { ctrl, .. }
            | Descriptor::RxData { ctrl, .. }
            | Descriptor::CopyMetaDesc { ctrl, .. } => *ctrl,
            Descriptor::Cce(c) => c.ctrl,
        }
    }

    /// The 16 bytes (total: fields are masked to their widths).
    pub fn encode(&self) -> [u8; DESC_BYTES] {
        let (w0, w1, w2, w3) = match self {
            Descriptor::TxData { ctrl, meta, addr } => {
                let m = meta.map_or(0, |m| m.encode());
                (ctrl.encode(), m, *addr as u32, (*addr >> 32) as u32)
            }
            Descriptor::RxData { ctrl, addr } => {
                (ctrl.encode(), 0, *addr as u32, (*addr >> 32) as u32)
            }
            Descriptor::Cce(c) => {
                let mut ctrl = c.ctrl;
                ctrl.meta = true;
                let w2 = (c.length & 0xFF_FFFF) | (u32::from(c.w2_hi) << 24);
                (ctrl.encode(), c.meta.encode(), w2, c.scale)
            }
            Descriptor::CopyMetaDesc {
                ctrl,
                meta,
                meta1,
                meta2,
            } => {
                let mut ctrl = *ctrl;
                ctrl.meta = true;
                (ctrl.encode(), meta.encode(), *meta1, *meta2)
            }
        };
        let mut out = [0u8; DESC_BYTES];
        for (i, w) in [w0, w1, w2, w3].into_iter().enumerate() {
            out[4 * i..4 * i + 4].copy_from_slice(&w.to_le_bytes());
        }
        out
    }

    /// Decode 16 bytes read from a queue of direction `dir`.
    pub fn decode(bytes: &[u8; DESC_BYTES], dir: Direction) -> Result<Descriptor> {
        let w = |i: usize| {
            u32::from_le_bytes([
                bytes[4 * i],
                bytes[4 * i + 1],
                bytes[4 * i + 2],
                bytes[4 * i + 3],
            ])
        };
        let (w0, w1, w2, w3) = (w(0), w(1), w(2), w(3));
        let ctrl = LenCtrl::decode(w0)?;
        let addr = u64::from(w2) | (u64::from(w3) << 32);
        match dir {
            Direction::S2M => {
                if ctrl.meta {
                    return Err(bad(
                        "len_ctrl META",
                        "23",
                        1,
                        "an S2M queue has no meta descriptors",
                    ));
                }
                if w1 != 0 {
                    return Err(bad(
                        "S2M W1",
                        "63:32",
                        u64::from(w1),
                        "unused on RX, must be 0",
                    ));
                }
                Ok(Descriptor::RxData { ctrl, addr })
            }
            Direction::M2S => {
                if ctrl.sow {
                    return Err(bad(
                        "len_ctrl SOW",
                        "29",
                        1,
                        "strong write order is RX only",
                    ));
                }
                if !ctrl.meta {
                    let meta = if w1 == 0 {
                        None
                    } else {
                        Some(CopyMeta::decode(w1)?)
                    };
                    return Ok(Descriptor::TxData { ctrl, meta, addr });
                }
                match (w1 >> 23) & 7 {
                    4 => {
                        let meta = CceMeta::decode(w1)?;
                        let hi = (w2 >> 24) as u8;
                        let allowed = match meta.op {
                            CceOp::Add => W2_COMBO,
                            CceOp::Max | CceOp::Min => W2_MIN_MAX | W2_COMBO,
                            _ => 0x7F,
                        };
                        if hi & !allowed != 0 {
                            return Err(bad(
                                "CCE W2 op bits",
                                "31:24",
                                u64::from(hi),
                                "not valid for the sub-op",
                            ));
                        }
                        if meta.op.is_min_max() && hi & W2_MIN_MAX == 0 {
                            return Err(bad(
                                "CCE W2 MIN/MAX marker",
                                "25",
                                0,
                                "MIN/MAX sets 0x02000000",
                            ));
                        }
                        if meta.op != CceOp::Fma && w3 != 0 {
                            return Err(bad(
                                "CCE W3 scale",
                                "31:0",
                                u64::from(w3),
                                "only FMA has a scale",
                            ));
                        }
                        Ok(Descriptor::Cce(CceCompute {
                            ctrl,
                            meta,
                            length: w2 & 0xFF_FFFF,
                            w2_hi: hi,
                            scale: w3,
                        }))
                    }
                    2 => Ok(Descriptor::CopyMetaDesc {
                        ctrl,
                        meta: CopyMeta::decode(w1)?,
                        meta1: w2,
                        meta2: w3,
                    }),
                    c => Err(bad(
                        "meta_ctrl SDMA class",
                        "25:23",
                        u64::from(c),
                        "a meta descriptor must be CME (2) or CCE (4)",
                    )),
                }
            }
        }
    }
}

/// The generation tag of the descriptor at stream position `index` of a ring of `ring_len`
/// slots (docs/contract/device.md §1.3): 1 on the first lap, +1 mod 4 each time the producer wraps
/// to 0.
pub fn ring_id_at(index: u64, ring_len: u64) -> u8 {
    ((1 + index / ring_len.max(1)) % 4) as u8
}

#[cfg(test)]
mod tests;

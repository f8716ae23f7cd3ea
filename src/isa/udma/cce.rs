//! The CCE form of a descriptor (docs/contract/device.md §2.1–§2.2): the `SDMA_CCETYPE` sub-op, the
//! CCE meta_ctrl with its two per-op layouts, and the compute descriptor's words. A child of
//! [`udma`](super); re-exported there.

use super::{b, bad, CLASS_CCE};
use crate::error::Result;
use crate::isa::enums::Dtype;
use crate::isa::udma::LenCtrl;

/// `SDMA_CCETYPE` (docs/contract/lowering.md §2.10), CCE meta_ctrl bits 2:0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum CceOp {
    /// 0.
    Add = 0,
    /// 1: `acc += scale · x`.
    Fma = 1,
    /// 2.
    Max = 2,
    /// 3.
    Min = 3,
    /// 4 (device-only).
    Ext = 4,
    /// 5 (device-only).
    Gce = 5,
}

impl CceOp {
    /// From the 3-bit sub-op.
    pub fn from_u8(v: u8) -> Option<CceOp> {
        Some(match v {
            0 => CceOp::Add,
            1 => CceOp::Fma,
            2 => CceOp::Max,
            3 => CceOp::Min,
            4 => CceOp::Ext,
            5 => CceOp::Gce,
            _ => return None,
        })
    }
    /// The MIN/MAX builder layout (last at bit 4, notification at bit 7, use_const at bit 5).
    pub fn is_min_max(self) -> bool {
        matches!(self, CceOp::Max | CceOp::Min)
    }
    /// The op selector bits 22:20 the builders write (docs/contract/device.md §2.2).
    pub fn op_selector(self) -> u8 {
        match self {
            CceOp::Add | CceOp::Max | CceOp::Min => 0,
            CceOp::Fma => 1,
            CceOp::Ext => 4,
            CceOp::Gce => 5,
        }
    }
}

/// Accumulation nibble our encoder writes: FP32R (11), docs/contract/device.md §11.1.
pub const ACCUM_FP32R: u8 = 11;

/// The CCE form of meta_ctrl (docs/contract/device.md §2.2). Bit positions of "last" and the flag
/// depend on the op: ADD/FMA builder `last` = bit 7, flag = bit 4; MIN/MAX builder `last` = bit 4,
/// notification = bit 7, use_const = bit 5.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CceMeta {
    /// Bits 2:0.
    pub op: CceOp,
    /// Bits 22:20: op selector (MIN/MAX with use_const: the constant's dtype).
    pub op_sel: u8,
    /// Bits 19:16: accumulation dtype (10 or 11 = binary32).
    pub accum: u8,
    /// Bits 15:12: output dtype (FMA: scale dtype).
    pub out: u8,
    /// Bits 11:8: input dtype (the ADD builder leaves it 0).
    pub input: u8,
    /// Flush the accumulator to the S2M side (set on the final source only).
    pub last: bool,
    /// Bit 6: write barrier.
    pub wb: bool,
    /// ADD/FMA: the unnamed bit 4; MIN/MAX: notification (bit 7).
    pub flag: bool,
    /// MIN/MAX only: bit 5.
    pub use_const: bool,
}

impl CceMeta {
    /// The ADD/MIN/MAX meta_ctrl our emitter writes for an I/O dtype: accum = FP32R, input
    /// nibble 0 (as the ADD builder), output = the dtype.
    pub fn for_reduce(op: CceOp, dtype: Dtype, last: bool) -> CceMeta {
        CceMeta {
            op,
            op_sel: op.op_selector(),
            accum: ACCUM_FP32R,
            out: dtype.as_u8(),
            input: 0,
            last,
            wb: false,
            flag: false,
            use_const: false,
        }
    }

    /// The 32-bit word: `(sub & 7) | out << 12 | accum << 16 | last << 7 | wb << 6 | flag << 4
    /// | 0x02000000` for ADD (docs/contract/device.md §2.2), the MIN/MAX layout otherwise.
    pub fn encode(&self) -> u32 {
        let mm = self.op.is_min_max();
        let (last_bit, flag_bit) = if mm { (4, 7) } else { (7, 4) };
        (self.op as u32)
            | (u32::from(self.input & 0xF) << 8)
            | (u32::from(self.out & 0xF) << 12)
            | (u32::from(self.accum & 0xF) << 16)
            | (u32::from(self.op_sel & 7) << 20)
            | (1 << 25)
            | (u32::from(self.wb) << 6)
            | (u32::from(self.last) << last_bit)
            | (u32::from(self.flag) << flag_bit)
            | (u32::from(self.use_const && mm) << 5)
    }

    /// Decode a CCE meta_ctrl (class bits 25:23 must be 4).
    pub fn decode(w: u32) -> Result<CceMeta> {
        let class = (w >> 23) & 7;
        if class != u32::from(CLASS_CCE) {
            return Err(bad(
                "meta_ctrl SDMA class",
                "25:23",
                u64::from(class),
                "expected 4 (CCE)",
            ));
        }
        if w >> 26 != 0 {
            return Err(bad(
                "CCE meta_ctrl reserved",
                "31:26",
                u64::from(w >> 26),
                "must be 0",
            ));
        }
        if b(w, 3) {
            return Err(bad("CCE meta_ctrl reserved", "3", 1, "must be 0"));
        }
        let op = CceOp::from_u8((w & 7) as u8).ok_or_else(|| {
            bad(
                "CCE meta_ctrl sub-op",
                "2:0",
                u64::from(w & 7),
                "not an SDMA_CCETYPE",
            )
        })?;
        let mm = op.is_min_max();
        if !mm && b(w, 5) {
            return Err(bad(
                "CCE meta_ctrl use_const",
                "5",
                1,
                "only MIN/MAX have a constant",
            ));
        }
        let use_const = mm && b(w, 5);
        let op_sel = ((w >> 20) & 7) as u8;
        if !use_const && op_sel != op.op_selector() {
            return Err(bad(
                "CCE meta_ctrl op selector",
                "22:20",
                u64::from(op_sel),
                "does not match the sub-op",
            ));
        }
        let nib = |s: u32| ((w >> s) & 0xF) as u8;
        let accum = nib(16);
        if accum != 10 && accum != 11 {
            return Err(bad(
                "CCE meta_ctrl accumulation dtype",
                "19:16",
                u64::from(accum),
                "expected 10 (FP32) or 11 (FP32R)",
            ));
        }
        let out = nib(12);
        if !matches!(Dtype::from_u8(out), Some(d) if d != Dtype::Invalid) {
            return Err(bad(
                "CCE meta_ctrl output dtype",
                "15:12",
                u64::from(out),
                "not a dtype",
            ));
        }
        let input = nib(8);
        if Dtype::from_u8(input).is_none() {
            return Err(bad(
                "CCE meta_ctrl input dtype",
                "11:8",
                u64::from(input),
                "not a dtype",
            ));
        }
        let (last_bit, flag_bit) = if mm { (4, 7) } else { (7, 4) };
        Ok(CceMeta {
            op,
            op_sel,
            accum,
            out,
            input,
            last: b(w, last_bit),
            wb: b(w, 6),
            flag: b(w, flag_bit),
            use_const,
        })
    }
}

/// W2 high byte: MIN/MAX marker (W2 bit 25), docs/contract/device.md §2.1.
pub const W2_MIN_MAX: u8 = 0x02;
/// W2 high byte: "more descriptors follow" in fused packets (W2 bit 30) **\[M\]**.
pub const W2_COMBO: u8 = 0x40;

/// One CCE compute descriptor (docs/contract/device.md §2.1): META W0, CCE meta_ctrl W1, byte
/// length and op bits W2, FP32 scale W3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CceCompute {
    /// W0 (META set, LENGTH 0).
    pub ctrl: LenCtrl,
    /// W1.
    pub meta: CceMeta,
    /// W2 bits 23:0: bytes of this source in the packet.
    pub length: u32,
    /// W2 bits 31:24: MIN/MAX 0x02, FMA selectors a (bits 25:24), b (27:26), c (29:28), combo 0x40.
    pub w2_hi: u8,
    /// W3: FP32 scale bits (FMA), 0 otherwise.
    pub scale: u32,
}

impl CceCompute {
    /// The W2 high byte the builders write for `op` (FMA: the default selectors a = 1, b = 2,
    /// c = 0).
    pub fn default_w2_hi(op: CceOp) -> u8 {
        match op {
            CceOp::Max | CceOp::Min => W2_MIN_MAX,
            CceOp::Fma => 1 | (2 << 2),
            _ => 0,
        }
    }
}

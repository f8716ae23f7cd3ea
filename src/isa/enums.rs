//! The enum tables of the pseudo-instruction words, with their exact wire values.
//!
//! Every enum here is one table of docs/contract/isa.md §2 (EVENTS) or §10 (ISA enums), plus the
//! host `enc_op_type` of docs/contract/lowering.md §2.1 that rule 12 of docs/contract/isa.md §9 is
//! stated in; the address markers, the LNC size format and the opcodes are in
//! [`markers`](super::markers). Each has `from_u8` (returning `None` for a code the table does not
//! list: the decoder turns that into an [`IsaError`](super::isa_error::IsaError) naming the
//! field), `as_u8`, `name` (the spec's spelling) and `ALL` (every listed value, for tests and
//! strategies).

use std::fmt;

/// Declares a `#[repr(u8)]` wire enum plus `ALL`, `from_u8`, `as_u8` and `name`.
macro_rules! wire_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $var:ident = $val:literal => $label:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum $name {
            $( $(#[$vmeta])* $var = $val, )+
        }

        impl $name {
            /// Every value the table lists, in table order.
            pub const ALL: &'static [$name] = &[$($name::$var,)+];

            /// The enum value for wire code `v`, or `None` if the table does not list `v`.
            pub fn from_u8(v: u8) -> Option<Self> {
                match v {
                    $( $val => Some($name::$var), )+
                    _ => None,
                }
            }

            /// The wire code.
            pub fn as_u8(self) -> u8 {
                self as u8
            }

            /// The spec's name for the value.
            pub fn name(self) -> &'static str {
                match self {
                    $( $name::$var => $label, )+
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{} ({:#04x})", self.name(), self.as_u8())
            }
        }

        /// Serialized as the spec's name (stable across renames of the Rust variant).
        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.name())
            }
        }
    };
}
pub(crate) use wire_enum;

wire_enum! {
    /// WAIT_MODE, header byte 4 (docs/contract/isa.md §2) **\[H\]**: the word does not issue until
    /// the condition holds. The register forms are 0x81..0x85 (the source names 0x85 = GE-register
    /// and "0x81..0x85 for register thresholds"); no other 0x8x code is listed, so none is
    /// accepted.
    pub enum WaitMode {
        /// No wait.
        None = 0x00 => "NONE",
        /// sem == value.
        SemEqImm = 0x01 => "SEM_EQ_IMM",
        /// sem < value.
        SemLtImm = 0x02 => "SEM_LT_IMM",
        /// sem <= value.
        SemLeImm = 0x03 => "SEM_LE_IMM",
        /// sem > value (strictly greater).
        SemGtImm = 0x04 => "SEM_GT_IMM",
        /// sem >= value.
        SemGeImm = 0x05 => "SEM_GE_IMM",
        /// Wait until the event is set.
        EvtSet = 0x06 => "EVT_SET",
        /// Wait until the event is set, then clear it.
        EvtSetThenClear = 0x07 => "EVT_SET_THEN_CLEAR",
        /// Wait until the event is clear.
        EvtClear = 0x0E => "EVT_CLEAR",
        /// Wait until the event is clear, then set it.
        EvtClearThenSet = 0x0F => "EVT_CLEAR_THEN_SET",
        /// sem == register.
        SemEqReg = 0x81 => "SEM_EQ_REG",
        /// sem < register.
        SemLtReg = 0x82 => "SEM_LT_REG",
        /// sem <= register.
        SemLeReg = 0x83 => "SEM_LE_REG",
        /// sem > register.
        SemGtReg = 0x84 => "SEM_GT_REG",
        /// sem >= register.
        SemGeReg = 0x85 => "SEM_GE_REG",
    }
}

wire_enum! {
    /// UPDATE_MODE, header byte 6 (docs/contract/isa.md §2) **\[H\]**. Low nibble = action; 0x1x =
    /// on completion, 0x0x = once the inputs are read. Only the listed codes are valid; 0x06/0x08
    /// and 0x16/0x18 are named by no source and are rejected (§2 "treat every code not listed as
    /// invalid"). 0x99 is the one register-sourced form the ISA header names.
    pub enum UpdateMode {
        /// No update.
        None = 0x00 => "NONE",
        /// Set the event once inputs are read.
        EvtSetRead = 0x01 => "EVT_SET_READ",
        /// Clear the event once inputs are read.
        EvtClearRead = 0x02 => "EVT_CLEAR_READ",
        /// sem += 1 once inputs are read.
        SemIncRead = 0x03 => "SEM_INC_READ",
        /// sem -= 1 once inputs are read.
        SemDecRead = 0x04 => "SEM_DEC_READ",
        /// sem += value once inputs are read.
        SemAddImmRead = 0x05 => "SEM_ADD_IMM_READ",
        /// sem -= value once inputs are read.
        SemSubImmRead = 0x07 => "SEM_SUB_IMM_READ",
        /// sem = value once inputs are read.
        SemWrImmRead = 0x09 => "SEM_WR_IMM_READ",
        /// Set the event on completion.
        EvtSetComplete = 0x11 => "EVT_SET_COMPLETE",
        /// Clear the event on completion.
        EvtClearComplete = 0x12 => "EVT_CLEAR_COMPLETE",
        /// sem += 1 on completion: the mode every collective pseudo-op must use
        /// (docs/contract/isa.md §9 rule 1).
        SemIncComplete = 0x13 => "SEM_INC_COMPLETE",
        /// sem -= 1 on completion.
        SemDecComplete = 0x14 => "SEM_DEC_COMPLETE",
        /// sem += value on completion.
        SemAddImmComplete = 0x15 => "SEM_ADD_IMM_COMPLETE",
        /// sem -= value on completion.
        SemSubImmComplete = 0x17 => "SEM_SUB_IMM_COMPLETE",
        /// sem = value on completion.
        SemWrImmComplete = 0x19 => "SEM_WR_IMM_COMPLETE",
        /// sem = register on completion (the register form named by the ISA header).
        SemWrRegComplete = 0x99 => "SEM_WR_REG_COMPLETE",
    }
}

wire_enum! {
    /// COLLECTIVE_TYPE (ctype): 0xC8 byte 32, 0xD9 byte 14 (docs/contract/isa.md §10) **\[H\]**.
    /// Value 0 is unused and therefore not listed (it decodes as an error). ALL_TO_ALL_V = 9 is out
    /// of sequence: it was added later.
    pub enum CollectiveType {
        /// All-reduce.
        AllReduce = 1 => "ALL_REDUCE",
        /// Reduce-scatter.
        ReduceScatter = 2 => "REDUCE_SCATTER",
        /// All-gather.
        AllGather = 3 => "ALL_GATHER",
        /// All-to-all with a fixed block.
        AllToAll = 4 => "ALL_TO_ALL",
        /// Explicit permute.
        Permute = 5 => "PERMUTE",
        /// Explicit permute-reduce (no composer path: rejected, docs/contract/isa.md §9 rule 12).
        PermuteReduce = 6 => "PERMUTE_REDUCE",
        /// Implicit permute.
        PermuteImplicit = 7 => "PERMUTE_IMPLICIT",
        /// Implicit permute-reduce.
        PermuteReduceImplicit = 8 => "PERMUTE_REDUCE_IMPLICIT",
        /// All-to-all with per-peer counts (src1 metadata tensor, docs/contract/isa.md §9 rule 9).
        AllToAllV = 9 => "ALL_TO_ALL_V",
    }
}

impl CollectiveType {
    /// The host `enc_op_type` this ctype lowers to (docs/contract/lowering.md §2.1 mapping table
    /// **\[M\]**).
    pub fn enc_op(self) -> EncOpType {
        match self {
            CollectiveType::AllReduce => EncOpType::AllReduce,
            CollectiveType::ReduceScatter => EncOpType::ReduceScatter,
            CollectiveType::AllGather => EncOpType::AllGather,
            CollectiveType::AllToAll => EncOpType::AllToAll,
            CollectiveType::Permute => EncOpType::Permute,
            CollectiveType::PermuteReduce => EncOpType::PermuteReduce,
            CollectiveType::PermuteImplicit => EncOpType::PermuteImplicit,
            CollectiveType::PermuteReduceImplicit => EncOpType::PermuteReduceImplicit,
            CollectiveType::AllToAllV => EncOpType::AllToAllV,
        }
    }

    /// The op combines data with the ALU op (rule 6 and the CCE-dtype part of rule 10 apply).
    pub fn is_reducing(self) -> bool {
        matches!(
            self,
            CollectiveType::AllReduce
                | CollectiveType::ReduceScatter
                | CollectiveType::PermuteReduce
                | CollectiveType::PermuteReduceImplicit
        )
    }

    /// One of the four permute kinds (HBM only, docs/contract/isa.md §9 rule 7).
    pub fn is_permute(self) -> bool {
        matches!(
            self,
            CollectiveType::Permute
                | CollectiveType::PermuteReduce
                | CollectiveType::PermuteImplicit
                | CollectiveType::PermuteReduceImplicit
        )
    }
}

wire_enum! {
    /// Host `enc_op_type` (docs/contract/lowering.md §2.1) **\[H\]**. Not on the wire of a
    /// pseudo-op, but docs/contract/isa.md §9 rule 12 is stated in it and the API path builds
    /// requests with it.
    pub enum EncOpType {
        /// ALLGATHER.
        AllGather = 0 => "ALLGATHER",
        /// ALLREDUCE.
        AllReduce = 1 => "ALLREDUCE",
        /// BROADCAST (no dispatcher path: rejected).
        Broadcast = 2 => "BROADCAST",
        /// REDUCE (no dispatcher path: rejected).
        Reduce = 3 => "REDUCE",
        /// REDUCE_SCATTER.
        ReduceScatter = 4 => "REDUCE_SCATTER",
        /// SEND.
        Send = 5 => "SEND",
        /// RECV.
        Recv = 6 => "RECV",
        /// ALLTOALL (needs mesh).
        AllToAll = 7 => "ALLTOALL",
        /// PERMUTE.
        Permute = 8 => "PERMUTE",
        /// PERMUTE_REDUCE (no dispatcher path: rejected).
        PermuteReduce = 9 => "PERMUTE_REDUCE",
        /// PERMUTE_IMPLICIT.
        PermuteImplicit = 10 => "PERMUTE_IMPLICIT",
        /// PERMUTE_REDUCE_IMPLICIT.
        PermuteReduceImplicit = 11 => "PERMUTE_REDUCE_IMPLICIT",
        /// ALLTOALL_V (needs mesh).
        AllToAllV = 12 => "ALLTOALL_V",
        /// INVALID.
        Invalid = 13 => "INVALID",
    }
}

impl EncOpType {
    /// Input element count = num_elements × rank_n: `(1 << op) & 0x90` (docs/contract/isa.md §4
    /// **\[H\]**).
    pub fn input_spans_ranks(self) -> bool {
        (1u32 << self.as_u8()) & 0x90 != 0
    }
    /// Output element count = num_elements × rank_n: `(1 << op) & 0x81` (docs/contract/isa.md §4
    /// **\[H\]**).
    pub fn output_spans_ranks(self) -> bool {
        (1u32 << self.as_u8()) & 0x81 != 0
    }
}

wire_enum! {
    /// ALU_OP, byte 12 of 0xC7/0xC8/0xD9 (docs/contract/isa.md §10) **\[H\]**.
    pub enum AluOp {
        /// Pass-through: what copy ops normally carry.
        Bypass = 0x00 => "BYPASS",
        /// Add.
        Add = 0x04 => "ADD",
        /// Subtract (rejected as a reduce op).
        Subtract = 0x05 => "SUBTRACT",
        /// Multiply (rejected as a reduce op: no product reduce on the CCE,
        /// docs/contract/lowering.md §2.11).
        Mult = 0x06 => "MULT",
        /// Divide (rejected as a reduce op).
        Divide = 0x07 => "DIVIDE",
        /// Max.
        Max = 0x08 => "MAX",
        /// Min.
        Min = 0x09 => "MIN",
        /// Integer-engine add (rejected: integer reductions are converted to FP32 by the compiler).
        AddInt = 0xC4 => "ADD_INT",
        /// Integer-engine max.
        MaxInt = 0xCF => "MAX_INT",
        /// Integer-engine min.
        MinInt = 0xD0 => "MIN_INT",
    }
}

impl AluOp {
    /// The vendor's reduce-op test `(1 << op) & 0x350` (ADD, MULT, MAX, MIN;
    /// docs/contract/isa.md §9 rule 6 **\[H\]**). False for the integer forms, whose code is past
    /// the mask's width.
    pub fn passes_vendor_reduce_mask(self) -> bool {
        let v = u32::from(self.as_u8());
        v < 32 && (1u32 << v) & 0x350 != 0
    }
    /// One of the integer-engine forms.
    pub fn is_integer(self) -> bool {
        matches!(self, AluOp::AddInt | AluOp::MaxInt | AluOp::MinInt)
    }
    /// The CCE op this ALU op reduces with (docs/contract/lowering.md §2.11): ADD/MAX/MIN map 1:1;
    /// MULT's positional mapping to FMA is a scaled accumulate, not a product, so it maps to
    /// nothing, like every other op.
    pub fn cce_op(self) -> Option<CceOp> {
        match self {
            AluOp::Add => Some(CceOp::Add),
            AluOp::Max => Some(CceOp::Max),
            AluOp::Min => Some(CceOp::Min),
            _ => None,
        }
    }
}

wire_enum! {
    /// CCE_OP = SDMA_CCETYPE, the reduce op on a CCE descriptor (docs/contract/isa.md §10,
    /// docs/contract/lowering.md §2.10) **\[H\]**. Only ADD, MAX and MIN are reached from
    /// collectives.
    pub enum CceOp {
        /// acc += src.
        Add = 0 => "ADD",
        /// acc += scale·src (needs a scale; never produced by a collective).
        Fma = 1 => "FMA",
        /// acc = max(acc, src).
        Max = 2 => "MAX",
        /// acc = min(acc, src).
        Min = 3 => "MIN",
        /// Device-only mode.
        Ext = 4 => "EXT",
        /// Device-only mode.
        Gce = 5 => "GCE",
    }
}

wire_enum! {
    /// DTYPE, byte 13 (docs/contract/isa.md §10) **\[H\]**; identical to SDMA_DTYPE and the public
    /// `nrt_dtype_t`. Codes ≥ 16 (FP4, compute-kernel types) are invalid for collectives and are
    /// not listed. INVALID = 0 is listed (it decodes) and rejected by §9 rule 10.
    pub enum Dtype {
        /// INVALID.
        Invalid = 0 => "INVALID",
        /// UINT64.
        Uint64 = 1 => "UINT64",
        /// INT8.
        Int8 = 2 => "INT8",
        /// UINT8.
        Uint8 = 3 => "UINT8",
        /// INT16.
        Int16 = 4 => "INT16",
        /// UINT16.
        Uint16 = 5 => "UINT16",
        /// BFLOAT16.
        Bf16 = 6 => "BFLOAT16",
        /// FP16.
        Fp16 = 7 => "FP16",
        /// INT32.
        Int32 = 8 => "INT32",
        /// UINT32.
        Uint32 = 9 => "UINT32",
        /// FP32.
        Fp32 = 10 => "FP32",
        /// FP32R: an accumulation type, not an I/O type (docs/design.md §2.9).
        Fp32r = 11 => "FP32R",
        /// INT64.
        Int64 = 12 => "INT64",
        /// FP8 E3M4.
        Fp8E3 = 13 => "FP8_EXP3",
        /// FP8 E4M3 (IEEE-like, with Inf).
        Fp8E4 = 14 => "FP8_EXP4",
        /// FP8 E5M2.
        Fp8E5 = 15 => "FP8_EXP5",
    }
}

impl Dtype {
    /// Bytes per element in memory; `None` for INVALID. FP32R is 4 bytes in memory.
    pub fn size_bytes(self) -> Option<usize> {
        Some(match self {
            Dtype::Invalid => return None,
            Dtype::Int8 | Dtype::Uint8 | Dtype::Fp8E3 | Dtype::Fp8E4 | Dtype::Fp8E5 => 1,
            Dtype::Int16 | Dtype::Uint16 | Dtype::Bf16 | Dtype::Fp16 => 2,
            Dtype::Int32 | Dtype::Uint32 | Dtype::Fp32 | Dtype::Fp32r => 4,
            Dtype::Uint64 | Dtype::Int64 => 8,
        })
    }
    /// The entry of the vendor's SDMA element-size table: the in-memory size, except FP32R
    /// (and INVALID) which hold 0 — the "FP32R size-0 trap" of CCE packet sizing
    /// (docs/contract/isa.md §10, docs/contract/lowering.md §5.1).
    pub fn sdma_size_table(self) -> usize {
        match self {
            Dtype::Fp32r => 0,
            d => d.size_bytes().unwrap_or(0),
        }
    }
    /// An integer type.
    pub fn is_integer(self) -> bool {
        matches!(
            self,
            Dtype::Uint64
                | Dtype::Int8
                | Dtype::Uint8
                | Dtype::Int16
                | Dtype::Uint16
                | Dtype::Int32
                | Dtype::Uint32
                | Dtype::Int64
        )
    }
    /// The CCE can reduce it: BF16, FP16, FP32, FP8 E3/E4/E5 (docs/design.md §2.9; FP32 per
    /// docs/contract/lowering.md §7 item 5). FP32R is an accumulation type, not an I/O type, so it
    /// is not.
    pub fn is_cce_reducible(self) -> bool {
        matches!(
            self,
            Dtype::Bf16 | Dtype::Fp16 | Dtype::Fp32 | Dtype::Fp8E3 | Dtype::Fp8E4 | Dtype::Fp8E5
        )
    }
}

wire_enum! {
    /// COLLECTIVE_DIMENSION (cc_dim), 0xD9 byte 15 (docs/contract/isa.md §10) **\[H\]** values;
    /// only 0 and 1 are valid ("Invalid cc_dim", §9 rule 7). What each value means is **\[L\]**:
    /// see [`CC_DIM_0_AXIS`].
    pub enum CcDim {
        /// DIM_0.
        Dim0 = 0 => "DIM_0",
        /// DIM_1.
        Dim1 = 1 => "DIM_1",
    }
}

/// A tensor axis of an SBUF operand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Axis {
    /// The free (within-partition) dimension.
    Free,
    /// The partition dimension.
    Partition,
}

/// The one constant behind the cc_dim meaning (docs/contract/isa.md §10, §12.5;
/// docs/contract/lowering.md §7 item 13): seed 002 reads DIM_0 as the free dimension from runtime
/// strings that describe the wire value; the compiler's own enum orders them the other way but no
/// conversion into the wire byte was traced. We follow seed 002. Flip this constant (and nothing
/// else) if dumps show otherwise.
pub const CC_DIM_0_AXIS: Axis = Axis::Free;

impl CcDim {
    /// The axis this value selects, per [`CC_DIM_0_AXIS`].
    pub fn axis(self) -> Axis {
        match (self, CC_DIM_0_AXIS) {
            (CcDim::Dim0, a) => a,
            (CcDim::Dim1, Axis::Free) => Axis::Partition,
            (CcDim::Dim1, Axis::Partition) => Axis::Free,
        }
    }
}

wire_enum! {
    /// INSTR_CHAINING, 0xDA byte 1 (docs/contract/isa.md §10) **\[H\]**.
    pub enum InstrChaining {
        /// Standalone.
        None = 0 => "NONE",
        /// Opens a chain.
        Initial = 1 => "INITIAL",
        /// Inside a chain.
        Body = 2 => "BODY",
        /// Closes a chain (also called LAST).
        Final = 3 => "FINAL",
    }
}

wire_enum! {
    /// The boolean knobs of the 0xDA word: UNIQUE_TENSORS and CROSS_SBOUTPUT_TRANSFER
    /// (docs/contract/isa.md §10). Their codes are **\[OPEN\]**; the spec says treat them as 0 =
    /// off, 1 = on, so any other value is rejected at decode: with an **\[L\]** offset, a stray
    /// value more likely means the offset guess is wrong than a new code (see `layout.rs`).
    pub enum Flag {
        /// Off.
        Off = 0 => "OFF",
        /// On.
        On = 1 => "ON",
    }
}

impl Flag {
    /// As a bool.
    pub fn is_on(self) -> bool {
        self == Flag::On
    }
    /// From a bool.
    pub fn from_bool(b: bool) -> Self {
        if b {
            Flag::On
        } else {
            Flag::Off
        }
    }
}

/// PERMUTE_CHAIN, 0xDA byte 43 (docs/contract/isa.md §10 **\[M\]**, codes **\[OPEN\]**): 0 = not in
/// a chain, any non-zero value = in a protected run of permutes (fed into cc_op `safe_mode`). Every
/// byte is accepted, so the word keeps the raw byte and this is its view.
pub fn permute_chain_active(raw: u8) -> bool {
    raw != 0
}

#[cfg(test)]
mod tests;

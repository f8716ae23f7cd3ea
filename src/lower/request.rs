//! The collective request: what both entry paths (pseudo-instructions and the C API) produce,
//! and what everything after decode works from (docs/design.md §1).
//!
//! * [`CollectiveRequest`] — one collective for one rank: op, dtype, reduce op, the per-rank block
//!   count (docs/contract/isa.md §4), in-place, replica group and rank, stream / channel / cc_dim /
//!   priority, permute pairs, and the fields only some words carry: chaining ([`ChainInfo`], §10;
//!   docs/contract/lowering.md §6.3), all-to-all-v metadata ([`A2avMeta`], docs/contract/isa.md §9
//!   rule 9), operand names ([`Operands`]), the API list forms ([`IoForm`]), the 0xDA scratch knobs
//!   and the trigger's EVENTS ([`TriggerEvents`]).
//! * The mapping tables: ctype → [`CollectiveOp`] (docs/contract/lowering.md §2.1), ALU_OP →
//!   [`ReduceOp`] (§2.11), `nrt_op_type_t` → [`ReduceOp`] (docs/contract/abi.md §2.2); an op's
//!   names and `nrt_cc_op_type_t` code are in [`names`].
//! * The two builders live next door: [`instr`]
//!   (`CollectiveRequest::from_instr`, [`requests_from_stream`]) and
//!   [`api`] (`CollectiveRequest::from_api`); the A2Av table is
//!   resolved in [`a2av`].
//!
//! Every rejection is an [`Error`] of kind `Invalid` whose message names the field, the value
//! and the reason.

pub mod a2av;
pub mod api;
mod check;
pub mod instr;
pub mod names;
pub mod stream;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::isa::enums::{AluOp, CollectiveType, Dtype, EncOpType, InstrChaining};
use crate::isa::enums::{UpdateMode, WaitMode};

pub use a2av::{decode_metadata, encode_metadata, metadata_bytes, A2avMeta, A2avRow, A2avTable};
pub use api::ApiComm;
pub use instr::{InstrContext, TensorInfo};
pub use names::{OpNames, ReduceNames, OP_NAMES, REDUCE_NAMES};
pub use stream::requests_from_stream;

/// The collective operation (host view, `enc_op_type` of docs/contract/lowering.md §2.1 minus the
/// unsupported BROADCAST / REDUCE / explicit PERMUTE_REDUCE).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CollectiveOp {
    /// Every rank ends with the reduction of all inputs.
    AllReduce,
    /// Every rank ends with all inputs, concatenated in rank order.
    AllGather,
    /// Rank r ends with block r of the reduction.
    ReduceScatter,
    /// Rank r's block i goes to rank i's block r.
    AllToAll,
    /// All-to-all with per-peer counts and displacements.
    AllToAllV,
    /// Explicit source → target pairs.
    Permute,
    /// Send to the ring successor, receive from the predecessor.
    PermuteImplicit,
    /// Send `op(src0, src1)` to the successor.
    PermuteReduceImplicit,
    /// Point-to-point send (0xCB, is_send = 1).
    Send,
    /// Point-to-point receive (0xCB, is_send = 0).
    Recv,
    /// A barrier: no data, every rank waits for every other.
    Barrier,
}

impl CollectiveOp {
    /// The host `enc_op_type` (docs/contract/lowering.md §2.1); `None` for a barrier, which has no
    /// enc op (it runs on the barrier machinery, not the operation dispatcher).
    pub fn enc_op(self) -> Option<EncOpType> {
        Some(match self {
            CollectiveOp::Barrier => return None,
            CollectiveOp::AllReduce => EncOpType::AllReduce,
            CollectiveOp::AllGather => EncOpType::AllGather,
            CollectiveOp::ReduceScatter => EncOpType::ReduceScatter,
            CollectiveOp::AllToAll => EncOpType::AllToAll,
            CollectiveOp::AllToAllV => EncOpType::AllToAllV,
            CollectiveOp::Permute => EncOpType::Permute,
            CollectiveOp::PermuteImplicit => EncOpType::PermuteImplicit,
            CollectiveOp::PermuteReduceImplicit => EncOpType::PermuteReduceImplicit,
            CollectiveOp::Send => EncOpType::Send,
            CollectiveOp::Recv => EncOpType::Recv,
        })
    }

    /// The op for a ctype (docs/contract/lowering.md §2.1 table **\[M\]**). PERMUTE_REDUCE
    /// (explicit, enc op 9) has no dispatcher path in the runtime and is rejected
    /// (docs/contract/isa.md §9 rule 12; docs/contract/lowering.md §4.9).
    pub fn from_ctype(ct: CollectiveType) -> Result<Self> {
        Ok(match ct {
            CollectiveType::AllReduce => CollectiveOp::AllReduce,
            CollectiveType::ReduceScatter => CollectiveOp::ReduceScatter,
            CollectiveType::AllGather => CollectiveOp::AllGather,
            CollectiveType::AllToAll => CollectiveOp::AllToAll,
            CollectiveType::AllToAllV => CollectiveOp::AllToAllV,
            CollectiveType::Permute => CollectiveOp::Permute,
            CollectiveType::PermuteImplicit => CollectiveOp::PermuteImplicit,
            CollectiveType::PermuteReduceImplicit => CollectiveOp::PermuteReduceImplicit,
            CollectiveType::PermuteReduce => {
                return Err(Error::invalid(
                    "ctype PERMUTE_REDUCE (6) is not supported: the runtime's operation \
                     dispatcher has no path for explicit permute-reduce (enc op 9) \
                     (docs/contract/isa.md §9 rule 12; docs/contract/lowering.md §4.9)",
                ))
            }
        })
    }

    /// The op combines data with a [`ReduceOp`].
    pub fn is_reducing(self) -> bool {
        matches!(
            self,
            CollectiveOp::AllReduce
                | CollectiveOp::ReduceScatter
                | CollectiveOp::PermuteReduceImplicit
        )
    }
}

/// The reduction applied by the CCE (`SDMA_CCETYPE`, docs/contract/lowering.md §2.10): only these
/// three reach the hardware from collectives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReduceOp {
    /// Sum (CCE op 0).
    Add,
    /// Maximum (CCE op 2).
    Max,
    /// Minimum (CCE op 3).
    Min,
}

/// `nrt_op_type_t` values (docs/contract/abi.md §2.2 **\[H\]**; same numbering as SDMA_CCETYPE).
pub mod nrt_op {
    /// NRT_OP_ADD.
    pub const ADD: u32 = 0;
    /// NRT_OP_FMA.
    pub const FMA: u32 = 1;
    /// NRT_OP_MAX.
    pub const MAX: u32 = 2;
    /// NRT_OP_MIN.
    pub const MIN: u32 = 3;
    /// NRT_OP_INVALID.
    pub const INVALID: u32 = 0xF;
}

/// `nrt_cc_op_type_t` values (docs/contract/abi.md §2.2 **\[H\]**).
pub mod nrt_cc_op {
    /// NRT_CC_ALLGATHER.
    pub const ALLGATHER: u32 = 0;
    /// NRT_CC_ALLREDUCE.
    pub const ALLREDUCE: u32 = 1;
    /// NRT_CC_REDUCESCATTER.
    pub const REDUCESCATTER: u32 = 2;
}

impl ReduceOp {
    /// The reduce op of ALU_OP `alu` for a reducing collective (docs/contract/lowering.md §2.11):
    /// ADD/MAX/MIN map 1:1. MULT, SUBTRACT, DIVIDE, BYPASS and the integer forms are rejected, each
    /// with its reason. (Copy ops never call this: they ignore the op byte, normally BYPASS,
    /// docs/contract/isa.md §9 rule 6.)
    pub fn from_alu(alu: AluOp) -> Result<Self> {
        let why = match alu {
            AluOp::Add => return Ok(ReduceOp::Add),
            AluOp::Max => return Ok(ReduceOp::Max),
            AluOp::Min => return Ok(ReduceOp::Min),
            AluOp::Mult => {
                "the CCE has no product reduce; MULT's positional mapping is SDMA_CCETYPE FMA, \
                 which computes a scaled accumulate (acc += scale*src), not a product of the \
                 ranks' inputs, so it would give wrong numbers (docs/contract/lowering.md §2.11)"
            }
            AluOp::Subtract | AluOp::Divide => {
                "it is not associative and has no SDMA_CCETYPE; only ADD, MAX and MIN reach the \
                 CCE (docs/contract/lowering.md §2.11)"
            }
            AluOp::Bypass => "BYPASS is the copy op; a reducing collective needs ADD, MAX or MIN",
            AluOp::AddInt | AluOp::MaxInt | AluOp::MinInt => {
                "integer reductions are not supported: the compiler converts integer reductions \
                 to FP32 (docs/design.md §2.9)"
            }
        };
        Err(Error::invalid(format!(
            "op (ALU_OP) = {} ({:#04x}) is rejected as a reduce op: {why}",
            alu.name(),
            alu.as_u8()
        )))
    }

    /// The reduce op of `nrt_op_type_t` value `op` (docs/contract/abi.md §2.2; the identity on the
    /// CCE numbering). FMA needs a scale the collective API does not carry; INVALID and unlisted
    /// values are not reductions. `what` names the operation for the message.
    pub fn from_nrt_op(op: u32, what: &str) -> Result<Self> {
        if let Some(reduce) = ReduceOp::of_nrt_op(op) {
            return Ok(reduce);
        }
        let why = match op {
            nrt_op::FMA => "NRT_OP_FMA (1) is not supported: FMA computes a scaled accumulate \
                 (acc += scale*src) and needs a scale, which the collective API does not carry"
                .to_string(),
            nrt_op::INVALID => format!("NRT_OP_INVALID (15) is not a reduction; {what} needs NRT_OP_ADD (0), NRT_OP_MAX (2) or NRT_OP_MIN (3)"),
            v => format!("{v} is not a valid nrt_op_type_t (ADD 0, FMA 1, MAX 2, MIN 3, INVALID 15); {what} needs ADD, MAX or MIN"),
        };
        Err(Error::invalid(format!("op (nrt_op_type_t) = {op}: {why}")))
    }
}

/// Where an operand lives (the NEFF variable kind), when the caller knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    /// Device HBM.
    Hbm,
    /// State buffer.
    Sbuf,
}

/// What names an operand's storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TensorName {
    /// A NEFF DRAM tensor id (0xC7, 0xC8, 0xCB).
    TensorId(u32),
    /// A NEFF variable id (the VAR_ID operands of 0xD9/0xDA, docs/contract/isa.md §7).
    Var(u16),
}

/// The strides and shape of a PSEUDO_ADDR8TENSOR2D operand (docs/contract/isa.md §7), in elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Shape2d {
    /// Strides.
    pub step_elem: [i32; 2],
    /// Shape.
    pub num_elem: [u32; 2],
}

/// One operand: which storage, the byte offset in it, the 2-D walk if the word gave one, and
/// where it lives. The emitter turns this into SoC addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Operand {
    /// The storage.
    pub tensor: TensorName,
    /// Byte offset of the first element.
    pub offset_bytes: u64,
    /// The 2-D walk (0xD9/0xDA operands); `None` = contiguous.
    pub shape: Option<Shape2d>,
    /// HBM or SBUF, when known.
    pub placement: Option<Placement>,
}

/// The operands a word names. All `None` on the API path (the tensors are bound at schedule
/// time, so two prepares of the same op on the same communicator share one program).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Default)]
pub struct Operands {
    /// The input (src0 / input tensor).
    pub src0: Option<Operand>,
    /// The second input of a permute-reduce (0xD9 src1). The A2Av metadata tensor is in
    /// [`A2avMeta::metadata`], not here.
    pub src1: Option<Operand>,
    /// The output (dst / output tensor).
    pub dst: Option<Operand>,
}

/// Chaining of 0xD9+0xDA pairs (docs/contract/isa.md §10; docs/contract/lowering.md §4.9, §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct ChainInfo {
    /// INSTR_CHAINING of the 0xDA: NONE, or INITIAL / BODY / FINAL of a fused cc-op bundle.
    pub role: InstrChaining,
    /// Position in the chain (0 = the INITIAL word; 0 when standalone).
    pub index: u32,
    /// Members of the chain (1 when standalone; 0 = unknown, for a chained word lowered alone
    /// by `from_instr`, where the rest of the chain is not visible).
    pub len: u32,
    /// PERMUTE_CHAIN non-zero: a protected run of permutes; becomes the cc_op `safe_mode` bit.
    pub permute_chain: bool,
    /// UNIQUE_TENSORS: the ops of the chain use distinct tensors (cc_op `unique_tensors` bit).
    pub unique_tensors: bool,
}

impl Default for ChainInfo {
    fn default() -> Self {
        ChainInfo {
            role: InstrChaining::None,
            index: 0,
            len: 1,
            permute_chain: false,
            unique_tensors: false,
        }
    }
}

impl ChainInfo {
    /// The cc_op `safe_mode` bit (docs/contract/isa.md §10 PERMUTE_CHAIN;
    /// docs/contract/lowering.md §4.9).
    pub fn safe_mode(&self) -> bool {
        self.permute_chain
    }
}

/// How the API path's tensor lists map onto the per-rank blocks (docs/contract/abi.md §5.7, 2.33
/// forms).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum IoForm {
    /// One input tensor and one output tensor (and every instruction-path request).
    #[default]
    Single,
    /// All-gather with rank_n output tensors: output block r is output tensor r.
    OutputBlocks,
    /// Reduce-scatter with rank_n input tensors: input block r is input tensor r.
    InputBlocks,
}

/// The explicit collective scratch in SBUF of a 0xDA word (`cc_buf_start_addr`, `cc_buf_size`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct CcBuf {
    /// ADDR4 raw (an immediate SBUF partition offset, docs/contract/isa.md §7).
    pub start_addr: u32,
    /// Size in bytes (offset **\[L\]**, see isa/layout.rs).
    pub size: u32,
}

/// The EVENTS the on-stream trigger record keeps (docs/contract/lowering.md §6.5): it waits like
/// the pseudo-op did, and the op's completion increments `update_idx`. For a chain, the FINAL
/// word's record waits on what the chain's first word waited on and updates as the FINAL word says
/// (§6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct TriggerEvents {
    /// WAIT_MODE.
    pub wait_mode: WaitMode,
    /// Semaphore / event waited on.
    pub wait_idx: u8,
    /// Immediate of the `*_IMM` waits.
    pub semaphore_value: u32,
    /// UPDATE_MODE (SEM_INC_COMPLETE after validation, docs/contract/isa.md §9 rule 1).
    pub update_mode: UpdateMode,
    /// Semaphore incremented on completion.
    pub update_idx: u8,
}

/// One collective, fully described, for one rank of its replica group.
///
/// Element counts follow the `num_elements` convention of docs/contract/isa.md §4: `count` is
/// the per-rank block. All-reduce: in = out = count; all-gather: in = count, out = count·N;
/// reduce-scatter: in = count·N, out = count; all-to-all: in = out = count·N. All-to-all-v
/// carries its buffer sizes in [`A2avMeta`]. Implicit permute-reduce: in = 2·count, out = count
/// (see [`CollectiveRequest::input_elems`]). Send/recv (0xCB) is a byte copy: dtype UINT8,
/// count = size_bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct CollectiveRequest {
    /// The operation.
    pub op: CollectiveOp,
    /// Element type (ISA DTYPE = SDMA_DTYPE = nrt_dtype_t numbering).
    pub dtype: Dtype,
    /// The reduction, for reducing ops; `None` for copy ops.
    pub reduce: Option<ReduceOp>,
    /// Elements per rank block (see above).
    pub count: u64,
    /// Input and output are the same storage.
    pub in_place: bool,
    /// Global device ids of the participants, in rank order.
    pub group: Vec<u32>,
    /// This rank's index in `group`.
    pub rank: u32,
    /// Collective stream (0..4).
    pub stream: u8,
    /// Channel hint (permutes), if any.
    pub channel: Option<u16>,
    /// Collective dimension (0 = free dimension, docs/contract/isa.md §10).
    pub cc_dim: u8,
    /// DMA priority class (0..=4).
    pub priority: u8,
    /// Permute pairs (source rank index → target rank index), for explicit permutes.
    pub pairs: Vec<(u32, u32)>,
    /// Instruction chaining and the permute-chain / unique-tensors flags.
    pub chain: ChainInfo,
    /// All-to-all-v metadata; `Some` exactly when `op` is [`CollectiveOp::AllToAllV`].
    pub a2av: Option<A2avMeta>,
    /// The operands the word names (instruction path only).
    pub operands: Operands,
    /// The API list forms.
    pub io_form: IoForm,
    /// Explicit collective scratch in SBUF (0xDA), if set.
    pub cc_buf: Option<CcBuf>,
    /// CROSS_SBOUTPUT_TRANSFER: replicate the output into another SBUF (0xDA).
    pub cross_sb_out: bool,
    /// The trigger record's EVENTS (instruction path); `None` for the API path and for the
    /// INITIAL / BODY members of a chain, which get no record of their own
    /// (docs/contract/lowering.md §6.3).
    pub trigger: Option<TriggerEvents>,
}

impl CollectiveRequest {
    /// A request with the given core fields and every other field at its neutral value
    /// (stream 0, no channel, cc_dim 0, priority 0, standalone, single tensors, no operands).
    pub fn new(
        op: CollectiveOp,
        dtype: Dtype,
        reduce: Option<ReduceOp>,
        count: u64,
        group: Vec<u32>,
        rank: u32,
    ) -> Self {
        CollectiveRequest {
            op,
            dtype,
            reduce,
            count,
            in_place: false,
            group,
            rank,
            stream: 0,
            channel: None,
            cc_dim: 0,
            priority: 0,
            pairs: Vec::new(),
            chain: ChainInfo::default(),
            a2av: None,
            operands: Operands::default(),
            io_form: IoForm::Single,
            cc_buf: None,
            cross_sb_out: false,
            trigger: None,
        }
    }

    /// Number of ranks.
    pub fn rank_n(&self) -> u32 {
        self.group.len() as u32
    }

    /// Elements of the input buffer of each rank, as the lowering addresses it.
    ///
    /// All-to-all-v: [`A2avMeta::input_elems`] when the metadata is present.
    ///
    /// Implicit permute-reduce: **2·count**. The lowering's input buffer for this op is
    /// `[src0 | src1]`: the ring composer reads the second operand from the `count` elements
    /// right after src0 (`lower::compose::permute`), so the program never names src1 as a
    /// separate buffer. Whoever stages the tensors — the runtime, before it starts the program
    /// — places src1 there (or binds an input buffer whose second half is src1). The operand
    /// the word named is still in [`Operands::src1`]; it is not a second IR buffer.
    pub fn input_elems(&self) -> u64 {
        match (self.op, &self.a2av) {
            (CollectiveOp::AllToAllV, Some(m)) => m.input_elems,
            (CollectiveOp::PermuteReduceImplicit, _) => 2 * self.count,
            (CollectiveOp::ReduceScatter | CollectiveOp::AllToAll | CollectiveOp::AllToAllV, _) => {
                self.count * u64::from(self.rank_n())
            }
            (CollectiveOp::Barrier, _) => 0,
            _ => self.count,
        }
    }

    /// Elements of the output buffer of each rank (all-to-all-v: [`A2avMeta::output_elems`]
    /// when the metadata is present).
    pub fn output_elems(&self) -> u64 {
        match (self.op, &self.a2av) {
            (CollectiveOp::AllToAllV, Some(m)) => m.output_elems,
            (CollectiveOp::AllGather | CollectiveOp::AllToAll | CollectiveOp::AllToAllV, _) => {
                self.count * u64::from(self.rank_n())
            }
            (CollectiveOp::Barrier, _) => 0,
            _ => self.count,
        }
    }

    /// Bytes per element of `dtype` (`None` for INVALID).
    pub fn elem_bytes(&self) -> Option<u64> {
        self.dtype.size_bytes().map(|s| s as u64)
    }
}

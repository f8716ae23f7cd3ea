//! The collective request: what both entry paths (pseudo-instructions and the C API) produce,
//! and what everything after decode works from (design.md §1).

use serde::Serialize;

use crate::isa::enums::Dtype;

/// The collective operation (host view, `enc_op_type` of spec/lowering.md §2.1 minus the
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

/// The reduction applied by the CCE (`SDMA_CCETYPE`, spec/lowering.md §2.10): only these three
/// reach the hardware from collectives.
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

impl ReduceOp {
    /// The `SDMA_CCETYPE` code written into the CCE meta_ctrl.
    pub fn cce_code(self) -> u8 {
        match self {
            ReduceOp::Add => 0,
            ReduceOp::Max => 2,
            ReduceOp::Min => 3,
        }
    }
}

/// One collective, fully described, for one rank of its replica group.
///
/// Element counts follow the `num_elements` convention of spec/lowering.md §1.4: `count` is
/// the per-rank block. All-reduce: in = out = count; all-gather: in = count, out = count·N;
/// reduce-scatter: in = count·N, out = count; all-to-all: in = out = count·N.
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
    /// Collective dimension (0 = free dimension, spec §1.10).
    pub cc_dim: u8,
    /// DMA priority class (0..=4).
    pub priority: u8,
    /// Permute pairs (source rank index → target rank index), for explicit permutes.
    pub pairs: Vec<(u32, u32)>,
}

impl CollectiveRequest {
    /// Number of ranks.
    pub fn rank_n(&self) -> u32 {
        self.group.len() as u32
    }

    /// Elements of the input buffer of each rank.
    pub fn input_elems(&self) -> u64 {
        match self.op {
            CollectiveOp::ReduceScatter | CollectiveOp::AllToAll | CollectiveOp::AllToAllV => {
                self.count * u64::from(self.rank_n())
            }
            CollectiveOp::Barrier => 0,
            _ => self.count,
        }
    }

    /// Elements of the output buffer of each rank.
    pub fn output_elems(&self) -> u64 {
        match self.op {
            CollectiveOp::AllGather | CollectiveOp::AllToAll | CollectiveOp::AllToAllV => {
                self.count * u64::from(self.rank_n())
            }
            CollectiveOp::Barrier => 0,
            _ => self.count,
        }
    }
}

//! The program IR: for every rank, the step tapes of one collective (docs/contract/lowering.md §4)
//! and, once emitted, the bytes the hardware would run (§5–§6, docs/contract/device.md §1–§6).
//!
//! Shape: a [`Program`] has one [`RankProgram`] per rank. A rank program is a sequence of
//! [`Entry`]s — one per cc_op slot of the TOP_SP table (a flat algorithm has one; a hierarchical
//! op has one per leg, chained). An entry has one [`Tape`] per channel; a tape is an ordered list
//! of [`Step`]s in the step vocabulary of docs/contract/lowering.md §4.0.
//!
//! Order (what the device does, docs/contract/device.md §8.3, docs/contract/lowering.md §6.3;
//! modelled by the verifier's `lanes`): each TOP_SP of a rank runs the tapes it drives one after
//! the other — the entries it takes part in, in order, and inside an entry in channel order;
//! TOP_SPs and ranks run concurrently and synchronise through semaphores. Entries are **not** a
//! rank-wide barrier: besides semaphores, the only order between TOP_SPs is that an entry's
//! reporter (the TOP_SP of its lowest channel) waits for the entry's other TOP_SPs at its end. A
//! program whose entry reads what another TOP_SP wrote in an earlier entry orders it with
//! semaphores (the hierarchical legs' joins, `compose::leg_join`).
//!
//! Semantics of one step (what the verifier executes and the emitter encodes):
//! 1. if `wait` is set: block until `sem >= target`, then `sem -= consume` (ring steps:
//!    `wait_ge_and_dec`, consume 1, docs/contract/device.md §5.3; mesh events: consume = wait_val,
//!    docs/contract/lowering.md §4.6);
//! 2. run every [`Transfer`] (a copy, or a CCE reduce of several sources), in order;
//! 3. once the data has landed, apply every [`Signal`] (`sem += amount`): the LOCAL increment
//!    (source may be reused) and the REMOTE one on the receiver (data ready), §6.4.
//!
//! Memory is named, not addressed, here: each rank has an input, an output and a scratch
//! buffer, indexed in elements of the request's dtype. When the request is in place, input and
//! output are one storage. The emitter turns these into SoC addresses.

pub mod text;

use serde::Serialize;

use crate::isa::enums::Dtype;
use crate::lower::request::{CollectiveRequest, ReduceOp};

/// A rank's buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Buf {
    /// The input tensor (src0).
    Input,
    /// The output tensor (dst); the same storage as `Input` when the request is in place.
    Output,
    /// Per-rank scratch owned by the program (staging of incoming partials).
    Scratch,
}

/// A run of elements in one rank's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Loc {
    /// Whose memory.
    pub rank: u32,
    /// Which buffer.
    pub buf: Buf,
    /// First element.
    pub offset: u64,
}

/// The ring read/write shape of a reduce step (`reduction_type_t`, docs/contract/lowering.md §2.6):
/// the third argument of every `recv_reduce_*` primitive, distinct from the reduce op (the second).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RingShape {
    /// Two sources (local, incoming), one write. The ring composer passes this.
    #[serde(rename = "RING_2R1W")]
    Ring2R1W = 0,
    /// Two sources, two writes.
    #[serde(rename = "RING_2R2W")]
    Ring2R2W = 1,
    /// N sources, one write. The kangaring composer passes this.
    #[serde(rename = "KANGARING_NR1W")]
    KangaringNR1W = 2,
}

/// One data movement: `len` elements from each source to the destination(s).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Transfer {
    /// Plain copy (DMA class CME = 2).
    Copy {
        /// Source.
        src: Loc,
        /// Destination.
        dst: Loc,
        /// Elements.
        len: u64,
    },
    /// In-transfer reduce (DMA class CCE = 4): `dst[i] = op(srcs[0][i], srcs[1][i], ...)`,
    /// accumulated in FP32 and rounded once to the dtype (docs/contract/device.md §2.3, §11).
    Reduce {
        /// The reduce op (`SDMA_CCETYPE`).
        op: ReduceOp,
        /// The ring shape (`reduction_type_t`).
        shape: RingShape,
        /// The sources (2 for a ring step, up to 32).
        srcs: Vec<Loc>,
        /// Destination.
        dst: Loc,
        /// Elements.
        len: u64,
    },
}

impl Transfer {
    /// Elements moved.
    pub fn len(&self) -> u64 {
        match self {
            Transfer::Copy { len, .. } | Transfer::Reduce { len, .. } => *len,
        }
    }
    /// True if no element moves.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The destination.
    pub fn dst(&self) -> Loc {
        match self {
            Transfer::Copy { dst, .. } | Transfer::Reduce { dst, .. } => *dst,
        }
    }
}

/// A TOP_SP semaphore of some rank: the 256-entry EVT_SEM block of TOP_SP `topsp` of the
/// rank's logical core (docs/contract/device.md §5.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Sem {
    /// Whose TOP_SP.
    pub rank: u32,
    /// Which TOP_SP of that rank.
    pub topsp: u8,
    /// Semaphore index 0..=255 (0..=7 are reserved, docs/contract/lowering.md §6.4).
    pub id: u8,
}

/// Reserved TOP_SP semaphore ids (docs/contract/lowering.md §6.4).
pub mod sem_id {
    /// Started by the compute stream's trigger record.
    pub const TRIGGER: u8 = 0;
    /// Posted by the reporter on completion.
    pub const COMPLETION: u8 = 1;
    /// Device barrier.
    pub const BARRIER0: u8 = 2;
    /// Device barrier.
    pub const BARRIER1: u8 = 3;
    /// DMA sync.
    pub const DMA_SYNC: u8 = 4;
    /// Function switch.
    pub const FUNCTION_SWITCH: u8 = 5;
    /// Host barrier (host-driven CC).
    pub const HOST_BARRIER0: u8 = 6;
    /// Host barrier (host-driven CC).
    pub const HOST_BARRIER1: u8 = 7;
    /// First id free for per-channel / per-leg semaphores.
    pub const FIRST_FREE: u8 = 8;
    /// Last id composers may use: 253 and 254 belong to the emitter (`trigger_next` and the
    /// completion chain, see `lower::emit`), 255 is the null semaphore.
    pub const LAST_FREE: u8 = 252;
    /// The null semaphore (MAX − 1).
    pub const NULL: u8 = 255;
}

/// Block until `sem >= target`, then subtract `consume`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Wait {
    /// The semaphore (always one of the waiting rank's own).
    pub sem: Sem,
    /// Threshold.
    pub target: u32,
    /// Amount consumed once the threshold is met (1 for ring steps).
    pub consume: u32,
}

/// Why a signal is sent (docs/contract/lowering.md §6.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SignalKind {
    /// On this core: the source may be reused.
    Local,
    /// On the peer, routed: the data has landed.
    Remote,
    /// Flow-control credit returned to a sender (`post_recv`).
    Credit,
}

/// `sem += amount` once the step's transfers have landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Signal {
    /// The semaphore.
    pub sem: Sem,
    /// Increment.
    pub amount: u32,
    /// Why.
    pub kind: SignalKind,
}

/// Step primitives (docs/contract/lowering.md §4.0). Copy family first, then the reduce family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Primitive {
    /// Push the local chunk to NEXT.
    Send,
    /// Grant receive credits.
    PostRecv,
    /// Receive from PREV into the final output position.
    DirectRecv,
    /// Receive into output and forward the same bytes to NEXT.
    DirectRecvSend,
    /// Copy local → output and send to NEXT.
    DirectCopySend,
    /// Local → output copy.
    DirectCopy,
    /// Read from a peer.
    DirectPull,
    /// `out_to_next = local ⊕ incoming`.
    RecvReduceSend,
    /// `output = local ⊕ incoming` (sources: a vector of peers).
    RecvReduceCopy,
    /// Both: write locally and forward.
    RecvReduceCopySend,
    /// The reduced result is written to a remote peer (mesh).
    RecvReduceWrite,
    /// Kangaring multi-source reduce.
    DirectReduceSendKangaring,
    /// Permute-reduce.
    DirectReduceSendPermute,
    /// A mesh event (docs/contract/lowering.md §4.6): wait, DMA kicks, direct semaphore triggers.
    MeshEvent,
}

impl Primitive {
    /// True for the reduce family (CCE; carries an op and a ring shape).
    pub fn is_reduce(self) -> bool {
        matches!(
            self,
            Primitive::RecvReduceSend
                | Primitive::RecvReduceCopy
                | Primitive::RecvReduceCopySend
                | Primitive::RecvReduceWrite
                | Primitive::DirectReduceSendKangaring
                | Primitive::DirectReduceSendPermute
        )
    }
}

/// Which half of the current chunk a step works on (`enc_half_chunk_index`,
/// docs/contract/lowering.md §2.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Half {
    /// First half.
    H0,
    /// Second half.
    H1,
}

/// One step of a tape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Step {
    /// The primitive.
    pub primitive: Primitive,
    /// Which half chunk.
    pub half: Half,
    /// The chunk handled: a rank id (the block it belongs to), docs/contract/lowering.md §4.1.
    pub chunk: u32,
    /// Reduce op and ring shape, for the reduce family.
    pub reduction: Option<(ReduceOp, RingShape)>,
    /// Wait before issuing.
    pub wait: Option<Wait>,
    /// The data movement.
    pub transfers: Vec<Transfer>,
    /// Semaphore increments once the data has landed.
    pub signals: Vec<Signal>,
    /// Mesh event type (`enc_mesh_event_type`) for `MeshEvent` steps.
    pub event_type: Option<u8>,
}

/// The steps one channel of one rank runs, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Tape {
    /// Ring channel (absolute id, 0..32) or mesh window index.
    pub channel: u8,
    /// The TOP_SP (of this rank's logical core) that drives the channel.
    pub topsp: u8,
    /// The steps.
    pub steps: Vec<Step>,
}

/// The host algorithm (`enc_alg_type`, docs/contract/lowering.md §2.2), with its wire values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Algorithm {
    /// 0.
    Ring = 0,
    /// 1.
    Hier = 1,
    /// 2.
    Mesh = 2,
    /// 3.
    Kangaring = 3,
    /// 4.
    SingleCycleRing = 4,
    /// 5.
    IntraRdh = 5,
    /// 7.
    InterRdh = 7,
}

impl Algorithm {
    /// Every algorithm, in `enc_alg_type` order.
    pub const ALL: [Algorithm; 7] = [
        Algorithm::Ring,
        Algorithm::Hier,
        Algorithm::Mesh,
        Algorithm::Kangaring,
        Algorithm::SingleCycleRing,
        Algorithm::IntraRdh,
        Algorithm::InterRdh,
    ];
    /// The CLI / env spelling.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Ring => "ring",
            Algorithm::Hier => "hier",
            Algorithm::Mesh => "mesh",
            Algorithm::Kangaring => "kangaring",
            Algorithm::SingleCycleRing => "single_cycle_ring",
            Algorithm::IntraRdh => "intra_rdh",
            Algorithm::InterRdh => "inter_rdh",
        }
    }
    /// Parse the CLI / env spelling.
    pub fn parse(s: &str) -> Option<Algorithm> {
        Self::ALL
            .into_iter()
            .find(|a| a.name().eq_ignore_ascii_case(s.trim()))
    }
    /// The device pattern the cc_op `algo_type` carries for this algorithm
    /// (docs/contract/lowering.md §6.1 (a)): ring-family variants go out as RING, mesh-family (and
    /// intra RDH) as MESH.
    pub fn device_pattern(self) -> crate::isa::ccop::DevicePattern {
        use crate::isa::ccop::DevicePattern;
        match self {
            Algorithm::Mesh | Algorithm::IntraRdh => DevicePattern::Mesh,
            _ => DevicePattern::Ring,
        }
    }
}

/// One cc_op slot of a rank's TOP_SP table: one algorithm leg.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Entry {
    /// What this leg does (e.g. "intra reduce-scatter").
    pub leg: String,
    /// The algorithm composing it.
    pub algorithm: Algorithm,
    /// Mesh flavour (`algo_sub_type`) for mesh legs.
    pub mesh_sub_type: Option<u8>,
    /// The ranks taking part in this leg (rank ids of the request's group).
    pub ranks: Vec<u32>,
    /// One tape per channel.
    pub tapes: Vec<Tape>,
}

impl Entry {
    /// A test entry named "t": one tape per `(channel, topsp)`, each with `steps()`.
    #[cfg(test)]
    pub(crate) fn for_test(
        algorithm: Algorithm,
        mesh_sub_type: Option<u8>,
        ranks: Vec<u32>,
        tapes: &[(u8, u8)],
        steps: impl Fn() -> Vec<Step>,
    ) -> Entry {
        Entry {
            leg: "t".into(),
            algorithm,
            mesh_sub_type,
            ranks,
            tapes: tapes
                .iter()
                .map(|&(channel, topsp)| Tape {
                    channel,
                    topsp,
                    steps: steps(),
                })
                .collect(),
        }
    }
}

/// Everything one rank runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RankProgram {
    /// Rank id (index in the group).
    pub rank: u32,
    /// Scratch elements this rank's program needs.
    pub scratch_elems: u64,
    /// The cc_op entries, in order.
    pub entries: Vec<Entry>,
}

/// A lowered collective: the request (without the caller's rank: programs cover every rank)
/// and every rank's program.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Program {
    /// The request the program implements.
    pub request: CollectiveRequest,
    /// Why each algorithm was chosen (one line per decision).
    pub selection: Vec<String>,
    /// Per rank.
    pub ranks: Vec<RankProgram>,
}

impl Program {
    /// The element type.
    pub fn dtype(&self) -> Dtype {
        self.request.dtype
    }
    /// Stable JSON form (field order is declaration order).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("the IR always serializes")
    }
    /// Number of steps over all ranks.
    pub fn step_count(&self) -> usize {
        self.ranks
            .iter()
            .flat_map(|r| &r.entries)
            .flat_map(|e| &e.tapes)
            .map(|t| t.steps.len())
            .sum()
    }
}

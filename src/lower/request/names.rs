//! How a [`CollectiveOp`] is spelled, in one table ([`OP_NAMES`]): the command line and the case
//! names (`all_reduce`), the selector's reasons and the API's messages (`all-reduce`), and the
//! C API's `nrt_cc_op_type_t` code. One table, so that `opennrt`, the case matrix, the lowering's
//! messages and `perf-rank` cannot drift apart, and a new op is named in one place.
//!
//! (The JSON of a request spells ops by serde's `snake_case` of the variant, which is the
//! command-line name except for a send, `send`: the command line's `send_recv` is the matrix's
//! send/recv pair, whose requests are a send and a receive.)

use super::{nrt_cc_op, nrt_op, CollectiveOp, ReduceOp};

/// The spellings of one op: one row of [`OP_NAMES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpNames {
    /// The op.
    pub op: CollectiveOp,
    /// The command line's and the case names' spelling (`opennrt … --op`, case lines, the
    /// `perf` tables).
    pub name: &'static str,
    /// The spelling in prose: the selector's reasons and the API's messages (`all-reduce`).
    pub label: &'static str,
    /// `--op` accepts [`OpNames::name`] and the case matrix runs the op. Not so for the receive
    /// half of send/recv: the matrix runs the pair under the send's name.
    pub listed: bool,
    /// The `nrt_cc_op_type_t` of the host API (docs/contract/abi.md §2.2), for the three ops
    /// it has.
    pub nrt_cc_op: Option<u32>,
}

const fn row(
    op: CollectiveOp,
    name: &'static str,
    label: &'static str,
    listed: bool,
    nrt_cc_op: Option<u32>,
) -> OpNames {
    OpNames {
        op,
        name,
        label,
        listed,
        nrt_cc_op,
    }
}

/// Every op's spellings, in declaration order (so `OP_NAMES[op as usize].op == op`), which is
/// also the order of the case matrix and of the names `--op` lists.
#[rustfmt::skip]
pub const OP_NAMES: [OpNames; 11] = {
    use CollectiveOp as C;
    [
        row(C::AllReduce, "all_reduce", "all-reduce", true, Some(nrt_cc_op::ALLREDUCE)),
        row(C::AllGather, "all_gather", "all-gather", true, Some(nrt_cc_op::ALLGATHER)),
        row(C::ReduceScatter, "reduce_scatter", "reduce-scatter", true, Some(nrt_cc_op::REDUCESCATTER)),
        row(C::AllToAll, "all_to_all", "all-to-all", true, None),
        row(C::AllToAllV, "all_to_all_v", "all-to-all-v", true, None),
        row(C::Permute, "permute", "permute", true, None),
        row(C::PermuteImplicit, "permute_implicit", "permute-implicit", true, None),
        row(C::PermuteReduceImplicit, "permute_reduce_implicit", "permute-reduce-implicit", true, None),
        row(C::Send, "send_recv", "send", true, None),
        row(C::Recv, "recv", "recv", false, None),
        row(C::Barrier, "barrier", "barrier", true, None),
    ]
};

impl CollectiveOp {
    /// This op's row of [`OP_NAMES`].
    pub fn names(self) -> &'static OpNames {
        &OP_NAMES[self as usize]
    }

    /// The command line's and the case names' spelling (`all_reduce`; `send_recv` for a send,
    /// `recv` for a receive).
    pub fn name(self) -> &'static str {
        self.names().name
    }

    /// The spelling in prose, for reasons and messages (`all-reduce`).
    pub fn label(self) -> &'static str {
        self.names().label
    }

    /// The op `--op` names: a listed [`CollectiveOp::name`], in any case.
    pub fn parse(s: &str) -> Option<CollectiveOp> {
        Self::listed().find(|o| o.name().eq_ignore_ascii_case(s))
    }

    /// The ops `--op` accepts and the case matrix runs, in matrix order.
    pub fn listed() -> impl Iterator<Item = CollectiveOp> {
        OP_NAMES.iter().filter(|r| r.listed).map(|r| r.op)
    }

    /// The `nrt_cc_op_type_t` of the host API, for all-reduce, all-gather and reduce-scatter.
    pub fn nrt_cc_op(self) -> Option<u32> {
        self.names().nrt_cc_op
    }

    /// The op of `nrt_cc_op_type_t` value `v`, if it names one.
    pub fn from_nrt_cc_op(v: u32) -> Option<CollectiveOp> {
        OP_NAMES
            .iter()
            .find(|r| r.nrt_cc_op == Some(v))
            .map(|r| r.op)
    }
}

/// The spellings and codes of one reduce op: one row of [`REDUCE_NAMES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReduceNames {
    /// The op.
    pub op: ReduceOp,
    /// The command line's spelling (`opennrt … --redop add`), also used in messages.
    pub name: &'static str,
    /// Other spellings the command line accepts (`sum`, the nccl-tests word).
    pub aliases: &'static [&'static str],
    /// The `nrt_op_type_t` of the host API (docs/contract/abi.md §2.2).
    pub nrt_op: u32,
    /// The `SDMA_CCETYPE` code written into a CCE descriptor's meta_ctrl. The C API numbers
    /// its ops the same way, so this equals [`ReduceNames::nrt_op`]; both are kept so that each
    /// reader names the vocabulary it means.
    pub cce_code: u8,
}

/// Every reduce op's spellings and codes, in declaration order
/// (`REDUCE_NAMES[op as usize].op == op`).
pub const REDUCE_NAMES: [ReduceNames; 3] = [
    ReduceNames {
        op: ReduceOp::Add,
        name: "add",
        aliases: &["sum"],
        nrt_op: nrt_op::ADD,
        cce_code: 0,
    },
    ReduceNames {
        op: ReduceOp::Max,
        name: "max",
        aliases: &[],
        nrt_op: nrt_op::MAX,
        cce_code: 2,
    },
    ReduceNames {
        op: ReduceOp::Min,
        name: "min",
        aliases: &[],
        nrt_op: nrt_op::MIN,
        cce_code: 3,
    },
];

impl ReduceOp {
    /// This op's row of [`REDUCE_NAMES`].
    pub fn names(self) -> &'static ReduceNames {
        &REDUCE_NAMES[self as usize]
    }

    /// The command line's spelling (`add`, `max`, `min`).
    pub fn name(self) -> &'static str {
        self.names().name
    }

    /// The op a command line names: a [`ReduceOp::name`] or an alias, in any case.
    pub fn parse(s: &str) -> Option<ReduceOp> {
        REDUCE_NAMES
            .iter()
            .find(|r| {
                r.name.eq_ignore_ascii_case(s)
                    || r.aliases.iter().any(|a| a.eq_ignore_ascii_case(s))
            })
            .map(|r| r.op)
    }

    /// The `nrt_op_type_t` of the host API.
    pub fn nrt_op(self) -> u32 {
        self.names().nrt_op
    }

    /// The op of `nrt_op_type_t` value `v`, if it is one of the three reductions
    /// ([`ReduceOp::from_nrt_op`] says why another value is refused).
    pub fn of_nrt_op(v: u32) -> Option<ReduceOp> {
        REDUCE_NAMES.iter().find(|r| r.nrt_op == v).map(|r| r.op)
    }

    /// The `SDMA_CCETYPE` code written into the CCE meta_ctrl.
    pub fn cce_code(self) -> u8 {
        self.names().cce_code
    }
}

#[cfg(test)]
mod tests;

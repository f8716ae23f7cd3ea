//! The API entry path: `nrta_cc_prepare`'s arguments → [`CollectiveRequest`]
//! (docs/contract/abi.md §3.6, §5.7; enums of §2.2).
//!
//! The C boundary reads `nrt_cc_comm_t` and the two tensor lists once and hands this module
//! plain values: an [`ApiComm`], the byte sizes of the input and output tensors, whether the two
//! lists name the same storage, and the three raw enum values. Everything is checked here, in
//! this order, and the first failure is returned as an `Invalid` error naming the argument, the
//! value and the rule: `cc_op`, `dtype`, `op`, the communicator, the tensor lists.
//!
//! Choices (the spec leaves them open):
//! * `op` is ignored for all-gather (a copy; callers pass anything), like the instruction
//!   path ignores the ALU op of copy ops (docs/contract/isa.md §9 rule 6).
//! * FP32R is accepted for all-gather (a copy of 4-byte elements is exact; the request carries
//!   FP32, whose copy moves the same bytes) and rejected for
//!   the reducing ops (an accumulation type, not an I/O type: docs/design.md §2.9), the same as
//!   rule 10 on the instruction path.
//! * In-place (`same_tensor`) means input and output start at the same byte; it is refused with
//!   the list forms, where "the same tensor" has no single meaning.
//! * Operands are left unnamed: the tensors are bound at schedule time, so preparing the same
//!   op on the same communicator twice gives equal requests (the program cache of
//!   `runtime::collective` relies on it).

use super::{CollectiveOp, CollectiveRequest, IoForm, ReduceOp};
use crate::error::{Error, Result};
use crate::isa::enums::Dtype;

/// `nrt_cc_comm_t` as plain values (docs/contract/abi.md §5.7 **\[M\]**).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct ApiComm {
    /// The participants' global device ids, in rank order (`rank_n` of them).
    pub replica_group: Vec<u32>,
    /// The caller's index in `replica_group`.
    pub rank: u32,
    /// Number of ranks.
    pub rank_n: u32,
    /// The caller's global device id (from `nrt_cc_global_comm_init`).
    pub ctx_device_id: u32,
    /// The world size (from `nrt_cc_global_comm_init`).
    pub ctx_device_count: u32,
    /// The local logical core.
    pub vnc: u32,
}

impl ApiComm {
    /// Check the communicator: `rank_n` = group length ≥ 1, `rank < rank_n`,
    /// `replica_group[rank] == ctx_device_id`, ids unique and below `ctx_device_count`.
    pub fn check(&self) -> Result<()> {
        let n = self.replica_group.len();
        if self.rank_n as usize != n {
            return Err(Error::invalid(format!(
                "comm.rank_n = {} but comm.replica_group has {n} entries; they must agree",
                self.rank_n
            )));
        }
        if n == 0 {
            return Err(Error::invalid(
                "comm.rank_n = 0: a communicator needs at least one rank",
            ));
        }
        if self.rank >= self.rank_n {
            return Err(Error::invalid(format!(
                "comm.rank = {} is not below comm.rank_n = {}",
                self.rank, self.rank_n
            )));
        }
        let own = self.replica_group[self.rank as usize];
        if own != self.ctx_device_id {
            return Err(Error::invalid(format!(
                "comm.replica_group[{}] = {own} but comm.ctx_device_id = {}: the group must \
                 contain the calling rank at its index",
                self.rank, self.ctx_device_id
            )));
        }
        for (i, &id) in self.replica_group.iter().enumerate() {
            if id >= self.ctx_device_count {
                return Err(Error::invalid(format!(
                    "comm.replica_group[{i}] = {id} is not below comm.ctx_device_count = {} \
                     (the world size)",
                    self.ctx_device_count
                )));
            }
            if let Some(j) = self.replica_group[..i].iter().position(|&x| x == id) {
                return Err(Error::invalid(format!(
                    "comm.replica_group[{j}] and [{i}] are both device {id}: participants must \
                     be distinct"
                )));
            }
        }
        Ok(())
    }
}

fn cc_op_of(cc_op: u32) -> Result<CollectiveOp> {
    CollectiveOp::from_nrt_cc_op(cc_op).ok_or_else(|| {
        Error::invalid(format!(
            "cc_op (nrt_cc_op_type_t) = {cc_op} is not a collective: valid values are \
             NRT_CC_ALLGATHER 0, NRT_CC_ALLREDUCE 1, NRT_CC_REDUCESCATTER 2"
        ))
    })
}

/// The dtype of `nrt_dtype_t` value `v` for `op` (docs/contract/abi.md §2.2; same numbering as the
/// ISA DTYPE, docs/contract/isa.md §10).
pub fn dtype_of(v: u32, op: CollectiveOp) -> Result<Dtype> {
    let d = u8::try_from(v)
        .ok()
        .and_then(Dtype::from_u8)
        .ok_or_else(|| {
            Error::invalid(format!(
                "dtype (nrt_dtype_t) = {v} is not a valid nrt_dtype_t (values 1..=15)"
            ))
        })?;
    let what = op.label();
    let why = if d == Dtype::Invalid {
        "NRT_DTYPE_UNKNOWN (0) is not a data type".to_string()
    } else if op.is_reducing() && d.is_integer() {
        format!(
            "{what} of {} is not supported: integer reductions are rejected because the \
             compiler converts integer reductions to FP32 (docs/design.md §2.9)",
            d.name()
        )
    } else if op.is_reducing() && d == Dtype::Fp32r {
        format!(
            "{what} of FP32R is not supported: FP32R is an accumulation type, not an element \
             type of tensors (docs/design.md §2.9); use FLOAT32"
        )
    } else if op.is_reducing() && !d.is_cce_reducible() {
        format!(
            "{what} of {} is not supported: the CCE reduces BFLOAT16, FLOAT16, FLOAT32 and \
             FP8 E3/E4/E5 only",
            d.name()
        )
    } else {
        return Ok(d);
    };
    Err(Error::invalid(format!("dtype (nrt_dtype_t) = {v}: {why}")))
}

/// Byte sizes → elements, each a whole number of elements.
fn elems(list: &str, sizes: &[u64], esize: u64, d: Dtype) -> Result<Vec<u64>> {
    sizes
        .iter()
        .enumerate()
        .map(|(i, &b)| {
            if b % esize == 0 {
                Ok(b / esize)
            } else {
                Err(Error::invalid(format!(
                    "{list}[{i}] is {b} bytes, not a multiple of the {esize}-byte {} element",
                    d.name()
                )))
            }
        })
        .collect()
}

impl CollectiveRequest {
    /// Build the request `nrta_cc_prepare(comm, inputs, outputs, dtype, op, cc_op)` describes.
    /// `inputs` / `outputs` are the byte sizes of the tensors of the two lists; `same_tensor`
    /// says the input and output are the same storage (in place). See the module doc for the
    /// rules and their order.
    pub fn from_api(
        comm: &ApiComm,
        inputs: &[u64],
        outputs: &[u64],
        same_tensor: bool,
        dtype: u32,
        op: u32,
        cc_op: u32,
    ) -> Result<CollectiveRequest> {
        let cop = cc_op_of(cc_op)?;
        let d = dtype_of(dtype, cop)?;
        let reduce = if cop.is_reducing() {
            Some(ReduceOp::from_nrt_op(op, cop.label())?)
        } else {
            None
        };
        comm.check()?;
        let n = u64::from(comm.rank_n);
        let esize = d.size_bytes().expect("dtype_of rejects INVALID") as u64;
        let ins = elems("inputs", inputs, esize, d)?;
        let outs = elems("outputs", outputs, esize, d)?;
        let what = cop.label();
        let list_err = |msg: String| Err(Error::invalid(format!("{what}: {msg}")));
        if ins.is_empty() || outs.is_empty() {
            return list_err(format!(
                "{} input and {} output tensors given; at least one of each is needed",
                ins.len(),
                outs.len()
            ));
        }
        // The list forms (2.33): all-gather 1 → N outputs, reduce-scatter N inputs → 1.
        let (form, block_list) = match (cop, ins.len(), outs.len()) {
            (_, 1, 1) => (IoForm::Single, None),
            (CollectiveOp::AllGather, 1, k) if k as u64 == n => {
                (IoForm::OutputBlocks, Some(("outputs", &outs)))
            }
            (CollectiveOp::ReduceScatter, k, 1) if k as u64 == n => {
                (IoForm::InputBlocks, Some(("inputs", &ins)))
            }
            (_, i, o) => {
                let allowed = match cop {
                    CollectiveOp::AllGather => format!("1 input and 1 or rank_n = {n} outputs"),
                    CollectiveOp::ReduceScatter => {
                        format!("1 or rank_n = {n} inputs and 1 output")
                    }
                    _ => "1 input and 1 output".to_string(),
                };
                return list_err(format!(
                    "{i} input and {o} output tensors given; it takes {allowed}"
                ));
            }
        };
        if let Some((name, list)) = block_list {
            if same_tensor {
                return list_err(format!(
                    "in-place (same tensor) needs one input and one output tensor, not the \
                     {n}-tensor {name} list"
                ));
            }
            if let Some(i) = list.iter().position(|&x| x != list[0]) {
                return list_err(format!(
                    "the {n} {name} tensors are the rank blocks and must be equal-sized: \
                     {name}[0] is {} bytes, {name}[{i}] is {} bytes",
                    list[0] * esize,
                    list[i] * esize
                ));
            }
        }
        // Byte sizes summed fit u64 (they are a sum of u64 byte sizes divided by esize ≥ 1,
        // checked), so `x * esize` below cannot overflow once the sum is known to fit.
        let total = |name: &str, v: &[u64]| {
            v.iter()
                .try_fold(0u64, |a, &x| a.checked_add(x.checked_mul(esize)?))
                .map(|b| b / esize)
                .ok_or_else(|| Error::invalid(format!("{what}: the {name} sizes overflow u64")))
        };
        let (tin, tout) = (total("inputs", &ins)?, total("outputs", &outs)?);
        let (count, want_in, want_out) = match cop {
            CollectiveOp::AllGather => (tin, Some(tin), tin.checked_mul(n)),
            CollectiveOp::ReduceScatter => (tout, tout.checked_mul(n), Some(tout)),
            _ => (tin, Some(tin), Some(tin)),
        };
        let sizes_ok = want_in == Some(tin) && want_out == Some(tout);
        if !sizes_ok {
            let rule = match cop {
                CollectiveOp::AllGather => "output = rank_n x input",
                CollectiveOp::ReduceScatter => "input = rank_n x output",
                _ => "input = output",
            };
            return list_err(format!(
                "input {} bytes and output {} bytes do not fit: it needs {rule} (rank_n = {n})",
                tin * esize,
                tout * esize
            ));
        }
        // An FP32R all-gather moves 4-byte words: it is lowered as the FP32 copy (the DMA has
        // no FP32R element size, docs/contract/lowering.md §5.1; the bytes are identical).
        let d = if d == Dtype::Fp32r { Dtype::Fp32 } else { d };
        let mut req =
            CollectiveRequest::new(cop, d, reduce, count, comm.replica_group.clone(), comm.rank);
        req.in_place = same_tensor;
        req.io_form = form;
        Ok(req)
    }
}

#[cfg(test)]
mod tests;

//! A rank's tensors as the data of a device collective ([`RankIo`] for `nrta_cc_*`).
//!
//! Out of place, the input buffer is the input tensors one after the other (one tensor, or the
//! `rank_n` blocks of the reduce-scatter list form) and the output is split over the output
//! tensors the same way (all-gather list form: one tensor per rank block).
//!
//! In place (the same tensor in both lists), the tensor holds the whole output of an all-gather
//! or the whole input of a reduce-scatter, and the rank's own block sits at byte
//! `rank · count · esize` — NCCL's convention, which the lowering composes for
//! (`lower::verify::expect::in_place_bases`). So an in-place all-gather reads its input from the
//! rank's block and writes the whole tensor; an in-place reduce-scatter reads the whole tensor
//! and writes only the rank's block (the other blocks keep their input, as in NCCL); an
//! in-place all-reduce reads and writes the whole tensor.

use crate::error::{Error, Result};
use crate::lower::request::{CollectiveOp, CollectiveRequest};
use crate::runtime::collective::RankIo;
use crate::runtime::tensor::Tensor;

/// The tensors of one rank's collective.
#[derive(Debug)]
pub struct TensorIo {
    /// The input list.
    pub inputs: Vec<Tensor>,
    /// The output list.
    pub outputs: Vec<Tensor>,
    /// Byte offset of the rank's input in `inputs[0]` (in place) — 0 otherwise.
    pub input_at: u64,
    /// Byte offset of the rank's result in `outputs[0]` (in place) — 0 otherwise.
    pub output_at: u64,
}

impl TensorIo {
    /// The I/O of `req` (its rank and in-place flag decide the offsets).
    pub fn new(req: &CollectiveRequest, inputs: Vec<Tensor>, outputs: Vec<Tensor>) -> TensorIo {
        let own = u64::from(req.rank) * req.count * req.elem_bytes().unwrap_or(1);
        let (input_at, output_at) = match (req.in_place, req.op) {
            (true, CollectiveOp::AllGather) => (own, 0),
            (true, CollectiveOp::ReduceScatter) => (0, own),
            _ => (0, 0),
        };
        TensorIo {
            inputs,
            outputs,
            input_at,
            output_at,
        }
    }
}

impl RankIo for TensorIo {
    fn device_tensor(&self, buf: crate::lower::program::Buf) -> Option<&Tensor> {
        use crate::lower::program::Buf;
        let in_place = self.inputs.len() == 1
            && self.outputs.len() == 1
            && self.inputs[0].storage_key() == self.outputs[0].storage_key();
        match buf {
            // One input tensor is the input buffer; in place it is the whole storage.
            Buf::Input if self.inputs.len() == 1 => Some(&self.inputs[0]),
            Buf::Output if self.outputs.len() == 1 && !in_place => Some(&self.outputs[0]),
            _ => None,
        }
    }

    fn input_into(&self, v: &mut [u8]) -> Result<()> {
        let len = v.len();
        if self.input_at > 0 || self.inputs.len() == 1 {
            return self.inputs[0].read(self.input_at, v);
        }
        let mut at = 0usize;
        for t in &self.inputs {
            let n = t.size() as usize;
            let dst = v.get_mut(at..at + n).ok_or_else(|| {
                Error::invalid(format!(
                    "the input tensors hold more than the {len} bytes the program reads"
                ))
            })?;
            t.read(0, dst)?;
            at += n;
        }
        // The loader does not zero the bytes it hands here (`Memory::map_written`): whatever
        // the tensors do not cover reads as zero, as in a fresh buffer.
        v[at..].fill(0);
        Ok(())
    }

    fn output(&self, data: &[u8]) -> Result<()> {
        if self.output_at > 0 || self.outputs.len() == 1 {
            return self.outputs[0].write(self.output_at, data);
        }
        let mut at = 0usize;
        for t in &self.outputs {
            let n = t.size() as usize;
            let src = data.get(at..at + n).ok_or_else(|| {
                Error::invalid("the output tensors hold more than the collective produced")
            })?;
            t.write(0, src)?;
            at += n;
        }
        Ok(())
    }
}

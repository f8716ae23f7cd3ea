//! The NEFF of one size: one collective trigger (or `-I`'s several) written by OpenNRT's NEFF
//! builder (`opennrt::neff::build`, docs/neff.md §2), which every rank loads. Its I/O vars are
//! `input0` and `output0`, one rank's input and output (and `metadata0`, the table, for the
//! variable-size ops).

use opennrt::isa::enums::Dtype;
use opennrt::neff::build::BuildSpec;

use crate::ops::Op;

/// What the builder needs for one size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NeffSpec {
    /// The operation (one the builder writes).
    pub op: Op,
    /// World size.
    pub ranks: u32,
    /// Elements per block.
    pub count: u64,
    /// Element type.
    pub dtype: Dtype,
    /// Identical triggers in a row.
    pub ops: u32,
    /// Custom replica subgroups (one group).
    pub groups: Option<Vec<Vec<u32>>>,
    /// Custom permute pairs (global ranks).
    pub pairs: Option<Vec<(u32, u32)>>,
}

/// A built NEFF and the tensor sizes the builder gave its vars.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Built {
    /// The file.
    pub bytes: Vec<u8>,
    /// `input0`'s bytes.
    pub in_bytes: u64,
    /// `output0`'s bytes.
    pub out_bytes: u64,
}

/// The builder's spec of `spec`.
pub fn build_spec(spec: &NeffSpec) -> BuildSpec {
    let mut b = BuildSpec::new(spec.op, spec.ranks, spec.count, spec.dtype);
    b.ops = spec.ops;
    b.replica_groups = spec.groups.clone().map(|g| vec![g]);
    b.pairs = spec.pairs.clone();
    b
}

/// The NEFF's bytes and var sizes, or the builder's refusal.
pub fn build(spec: &NeffSpec) -> Result<Built, String> {
    let b = build_spec(spec);
    let bytes = opennrt::neff::build::build(&b).map_err(|e| e.message().to_string())?;
    Ok(Built {
        bytes,
        in_bytes: b.input_bytes(),
        out_bytes: b.output_bytes(),
    })
}

#[cfg(test)]
mod tests;

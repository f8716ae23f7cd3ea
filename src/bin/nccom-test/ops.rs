//! The operations nccom-test names, and what each one's size means.
//!
//! The positional word (anywhere on the line) is one of `all_reduce|allr`, `all_gather|allg`,
//! `all_gatherv|allgv`, `reduce_scatter|redsct`, `sendrecv`, `alltoall`, `alltoallv`, `permute`.
//!
//! **size(B)** is the vendor's for all-reduce (one rank's buffer) and all-gather (the total
//! output). For the others it is OpenNRT's choice, the buffer a rank would allocate for the
//! size: reduce-scatter the total input (each rank's input, `R` blocks); all-to-all and
//! all-to-all-v one rank's buffer (in = out = `R` blocks); all-gather-v the total output, as
//! all-gather (in = one block, out = `R`); permute and sendrecv one rank's buffer (one block).
//! For the variable-size ops the buffers are what the size says whatever their table moves,
//! so algbw is size(B) over the time, as for their fixed-size twins. So a size
//! holds [`Sizes::size_blocks`] per-rank blocks of `count` elements, and a size that does not
//! split evenly is rounded down to a whole number of elements per block (`-d fp32 -b 1023` is
//! 1020 bytes for all-reduce; 1016 for all-gather on 8 ranks); the printed size(B) is the
//! rounded one. `g` below is the group size: the rank count, or a custom replica group's size.
//!
//! **busbw** = algbw × [`Sizes::busbw_factor`]: all-reduce 2(g−1)/g; all-gather, reduce-scatter,
//! all-to-all(-v) (g−1)/g; sendrecv and permute 1 (the vendor's factors).

use opennrt::lower::request::CollectiveOp;

/// An nccom-test operation: the builder's op, whose NEFF each size runs. Its words are the
/// `nccom` column of [`opennrt::neff::build::BUILD_OP_NAMES`]: parse one with
/// [`Op::from_nccom_word`], print one with [`Op::nccom_name`] (not `name`, the builder's
/// canonical spelling).
pub use opennrt::neff::build::BuildOp as Op;

/// What an op's size means to nccom-test (see the module doc), and the request the lowering
/// sees for it.
pub trait Sizes: Copy {
    /// The collective the lowering sees for this op (the request `--show-algorithm` selects
    /// for; sendrecv is the implicit permute of docs/neff.md §2).
    fn collective(self) -> CollectiveOp;
    /// Per-rank blocks of `count` elements in one size(B) (see the module doc).
    fn size_blocks(self, g: u32) -> u64;
    /// Blocks in one rank's input tensor.
    fn in_blocks(self, g: u32) -> u64;
    /// Blocks in one rank's output tensor.
    fn out_blocks(self, g: u32) -> u64;
    /// busbw / algbw for a group of `g` ranks (the vendor's factors; 0 ranks count as 1).
    fn busbw_factor(self, g: u32) -> f64;
}

impl Sizes for Op {
    fn collective(self) -> CollectiveOp {
        match self {
            Op::AllReduce => CollectiveOp::AllReduce,
            Op::AllGather | Op::AllGatherV => CollectiveOp::AllGather,
            Op::ReduceScatter => CollectiveOp::ReduceScatter,
            Op::SendRecv => CollectiveOp::PermuteImplicit,
            Op::AllToAll => CollectiveOp::AllToAll,
            Op::AllToAllV => CollectiveOp::AllToAllV,
            Op::Permute => CollectiveOp::Permute,
        }
    }

    fn size_blocks(self, g: u32) -> u64 {
        match self {
            Op::AllReduce | Op::Permute | Op::SendRecv => 1,
            _ => u64::from(g),
        }
    }

    fn in_blocks(self, g: u32) -> u64 {
        if self.input_spans_ranks() {
            u64::from(g)
        } else {
            1
        }
    }

    fn out_blocks(self, g: u32) -> u64 {
        if self.output_spans_ranks() {
            u64::from(g)
        } else {
            1
        }
    }

    fn busbw_factor(self, g: u32) -> f64 {
        let r = f64::from(g.max(1));
        match self {
            Op::AllReduce => 2.0 * (r - 1.0) / r,
            Op::AllGather | Op::AllGatherV | Op::ReduceScatter | Op::AllToAll | Op::AllToAllV => {
                (r - 1.0) / r
            }
            Op::SendRecv | Op::Permute => 1.0,
        }
    }
}

/// What one requested size becomes for an op: the per-rank block and the sizes it implies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizing {
    /// The requested size (before rounding).
    pub requested: u64,
    /// Elements per rank block (the NEFF trigger's count).
    pub count: u64,
    /// size(B), rounded down to whole blocks.
    pub bytes: u64,
    /// count(elems): the elements in size(B).
    pub elems: u64,
    /// One rank's input tensor in bytes.
    pub in_bytes: u64,
    /// One rank's output tensor in bytes.
    pub out_bytes: u64,
}

/// Round `requested` bytes down to what `op` on groups of `g` splits evenly, for elements of
/// `esz` bytes.
pub fn size_for(op: Op, g: u32, esz: u64, requested: u64) -> Sizing {
    let blocks = op.size_blocks(g);
    let count = requested / (esz * blocks);
    Sizing {
        requested,
        count,
        bytes: count * blocks * esz,
        elems: count * blocks,
        in_bytes: count * op.in_blocks(g) * esz,
        out_bytes: count * op.out_blocks(g) * esz,
    }
}

#[cfg(test)]
mod tests;

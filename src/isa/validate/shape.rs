//! The shape and placement rules of docs/contract/isa.md §9: rule 7 (cc_dim against the op and the
//! operand location), rule 9 (ALL_TO_ALL_V metadata) and rule 11 (the 0xBF S3D3 word). Split
//! from `validate.rs` to keep files small; [`validate`](super::validate) calls them in rule order.

use super::{Location, ValidationContext, SB2SB_MAX_ELEMENTS};
use crate::isa::enums::{Axis, CcDim, CollectiveType};
use crate::isa::instr::other::{Sb2sbCollective, SB2SB_RESERVED1};
use crate::isa::instr::trigger::{Collective2, TriggerCollective};
use crate::isa::isa_error::{rule, IsaError, IsaResult};
use crate::isa::layout::{da_field, ExtField};
use crate::isa::markers::opcode;
use crate::isa::operand::{Tensor2d, Tensor3d, TENSOR2D_FREE_DIM, TENSOR2D_PARTITION_DIM};

use super::Arch;

fn num_elem_field(which: &'static str, dim: usize) -> &'static str {
    match (which, dim) {
        ("src0", 0) => "src0.num_elem[0]",
        ("src0", _) => "src0.num_elem[1]",
        (_, 0) => "dst.num_elem[0]",
        _ => "dst.num_elem[1]",
    }
}

fn axis_dim(axis: Axis) -> usize {
    match axis {
        Axis::Free => TENSOR2D_FREE_DIM,
        Axis::Partition => TENSOR2D_PARTITION_DIM,
    }
}

/// Rule 7: cc_dim (0 or 1, enforced at decode) against the op's mask and the operand location:
/// all-gather cc_dim 0 in HBM (0 or 1 in SBUF); reduce-scatter cc_dim 0; all-to-all cc_dim 0
/// and HBM; permutes HBM; two-dimensional input needs mesh; and for cc_dim 0 in SBUF the
/// reduce-scatter / all-gather shapes must concatenate along the cc_dim axis by rank_n.
pub fn rule_07_cc_dim(c: &Collective2, ctx: &ValidationContext) -> IsaResult<()> {
    let d9 = opcode::TRIGGER_COLLECTIVE2;
    let t = &c.trigger;
    let dim = t.cc_dim;
    let bad_dim = |why: &str| {
        Err(IsaError::new(
            d9,
            "cc_dim",
            15,
            u64::from(dim.as_u8()),
            format!(
                "{} does not support cc_dim {} {why}",
                t.ctype.name(),
                dim.as_u8()
            ),
            rule::RULE_7,
        ))
    };
    let bad_loc = |loc: &str| {
        Err(IsaError::new(
            d9,
            "ctype",
            14,
            u64::from(t.ctype.as_u8()),
            format!(
                "{} operands must be in HBM; these are in {loc}",
                t.ctype.name()
            ),
            rule::RULE_7,
        ))
    };
    let in_sbuf = ctx.location == Some(Location::Sbuf);
    match t.ctype {
        CollectiveType::ReduceScatter if dim != CcDim::Dim0 => return bad_dim("(cc_dim 0 only)"),
        CollectiveType::AllToAll | CollectiveType::AllToAllV => {
            if dim != CcDim::Dim0 {
                return bad_dim("(cc_dim 0 only)");
            }
            if in_sbuf {
                return bad_loc("SBUF");
            }
        }
        CollectiveType::AllGather if dim != CcDim::Dim0 && ctx.location == Some(Location::Hbm) => {
            return bad_dim("in HBM (cc_dim 1 needs SBUF operands)");
        }
        ct if ct.is_permute() && in_sbuf => return bad_loc("SBUF"),
        _ => {}
    }
    if ctx.mesh_available == Some(false) && !t.src0.is_one_dimensional() {
        return Err(IsaError::new(
            d9,
            "src0.num_elem[1]",
            36,
            u64::from(t.src0.num_elem[1]),
            "Two-dimensional input is only supported by mesh algorithm, and mesh is not available",
            rule::RULE_7,
        ));
    }
    if let (true, CcDim::Dim0, Some(rank_n)) = (in_sbuf, dim, ctx.rank_n) {
        let k = axis_dim(dim.axis());
        let src = u64::from(t.src0.num_elem[k]);
        let dst = u64::from(c.ext.dst.num_elem[k]);
        let n = u64::from(rank_n);
        let (opc, field, off, value, want) = match t.ctype {
            CollectiveType::ReduceScatter if src != dst * n => {
                (d9, num_elem_field("src0", k), 32 + 4 * k, src, dst * n)
            }
            CollectiveType::AllGather if dst != src * n => (
                opcode::EXTENSION,
                num_elem_field("dst", k),
                24 + 4 * k,
                dst,
                src * n,
            ),
            _ => return Ok(()),
        };
        return Err(IsaError::new(
            opc,
            field,
            off,
            value,
            format!(
                "cc_dim 0 in SBUF: the {} operand must span the ranks along the cc_dim axis \
                 ({want} = other side × rank_n {n})",
                if opc == d9 { "input" } else { "output" }
            ),
            rule::RULE_7,
        ));
    }
    Ok(())
}

/// Rule 9: ALL_TO_ALL_V metadata in src1: src1_bitmap bits 0 and 1 set (send counts and
/// displacements are inputs), and room for 4 rows of rank_n uint32 entries
/// (`src1_size_bytes / 4 >= rank_n · 4`) **\[H\]**.
pub fn rule_09_all_to_all_v(c: &Collective2, ctx: &ValidationContext) -> IsaResult<()> {
    if c.trigger.ctype != CollectiveType::AllToAllV {
        return Ok(());
    }
    let bm = c.ext.src1_bitmap;
    if bm & 0b11 != 0b11 {
        let s = da_field(ExtField::Src1Bitmap);
        return Err(IsaError::new(
            opcode::EXTENSION,
            s.name,
            s.offset,
            u64::from(bm),
            "ALL_TO_ALL_V: src1_bitmap bits 0 (send counts) and 1 (send displacements) must be set",
            rule::RULE_9,
        ));
    }
    if let Some(rank_n) = ctx.rank_n {
        let n = src1_metadata_entries(&c.trigger.src1);
        let need = 4 * u64::from(rank_n);
        if n < need {
            return Err(IsaError::new(
                opcode::TRIGGER_COLLECTIVE2,
                "src1.num_elem",
                56,
                n,
                format!(
                    "src1 tensor has wrong num_elem and/or step_elem: ALL_TO_ALL_V metadata needs \
                     4 rows of rank_n = {rank_n} uint32 entries ({need})"
                ),
                rule::RULE_9,
            ));
        }
    }
    Ok(())
}

/// uint32 entries in the A2Av metadata tensor: `src1_size_bytes / dtype_size(src1)` with the
/// uint32 element type of the NKI docs, i.e. the operand's element count.
fn src1_metadata_entries(t: &Tensor2d) -> u64 {
    t.num_elements()
}

/// Rule 9 for 0xC8: ALL_TO_ALL_V needs the src1 metadata tensor, which only 0xD9 carries.
pub fn rule_09_all_to_all_v_c8(w: &TriggerCollective) -> IsaResult<()> {
    if w.ctype != CollectiveType::AllToAllV {
        return Ok(());
    }
    Err(IsaError::new(
        opcode::TRIGGER_COLLECTIVE,
        "ctype",
        32,
        u64::from(w.ctype.as_u8()),
        "ALL_TO_ALL_V needs the src1 metadata tensor, which only 0xD9+0xDA carries",
        rule::RULE_9,
    ))
}

fn t3d_checks(off: usize, name: &'static str, t: &Tensor3d) -> IsaResult<()> {
    let bf = opcode::SB2SB_COLLECTIVE;
    let n = t.element_count();
    if n > SB2SB_MAX_ELEMENTS {
        let field = if name == "src" { "src.num" } else { "dst.num" };
        return Err(IsaError::new(
            bf,
            field,
            off + 10,
            n,
            format!("at most {SB2SB_MAX_ELEMENTS} elements per 0xBF word"),
            rule::RULE_11,
        ));
    }
    if !t.addr.is_imm_sbuf() {
        let field = if name == "src" {
            "src.addr"
        } else {
            "dst.addr"
        };
        let why = if t.addr.is_sbuf() {
            "the tensor must be an immediate SBUF offset: bits 26-31 must be clear"
        } else {
            "both tensors must be in SBUF: bit 25 (not-SBUF) is set"
        };
        return Err(IsaError::new(
            bf,
            field,
            off,
            u64::from(t.addr.raw),
            why,
            rule::RULE_11,
        ));
    }
    Ok(())
}

/// Rule 11: 0xBF: in_dtype == out_dtype, ≤ 256 elements per tensor, 1..=128 active channels,
/// LNC1 or LNC2, both tensors immediate SBUF offsets, reserved bytes 0; and nc ≥ v3
/// (docs/contract/isa.md §8).
pub fn rule_11_s3d3(w: &Sb2sbCollective, ctx: &ValidationContext) -> IsaResult<()> {
    let bf = opcode::SB2SB_COLLECTIVE;
    let err = |field, off, v: u64, reason: &str| {
        Err(IsaError::new(bf, field, off, v, reason, rule::RULE_11))
    };
    if ctx.arch == Some(Arch::V2) {
        return err(
            "opcode",
            0,
            u64::from(bf),
            "SB2SB_COLLECTIVE needs a v3 or later NeuronCore",
        );
    }
    if w.in_dtype != w.out_dtype {
        return err(
            "out_dtype",
            13,
            u64::from(w.out_dtype.as_u8()),
            "out_dtype must equal in_dtype",
        );
    }
    t3d_checks(16, "src", &w.src)?;
    t3d_checks(48, "dst", &w.dst)?;
    if !(1..=128).contains(&w.num_active_channels) {
        return err(
            "num_active_channels",
            33,
            u64::from(w.num_active_channels),
            "num_active_channels must be 1..=128",
        );
    }
    if w.lnc_size_fmt.cores() > 2 {
        return err(
            "lnc_size_fmt",
            32,
            u64::from(w.lnc_size_fmt.as_u8()),
            "only LNC1 and LNC2 are accepted",
        );
    }
    if let Some(i) = w.reserved0.iter().position(|&x| x != 0) {
        return err(
            "reserved0",
            14 + i,
            u64::from(w.reserved0[i]),
            "reserved bytes must be 0",
        );
    }
    if let Some(i) = w.reserved1.iter().position(|&x| x != 0) {
        return err(
            "reserved1",
            SB2SB_RESERVED1.start + i,
            u64::from(w.reserved1[i]),
            "reserved bytes must be 0",
        );
    }
    Ok(())
}

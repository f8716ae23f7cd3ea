//! Operand checks shared by the instruction path (docs/contract/isa.md §4, §7;
//! docs/contract/lowering.md §4.9): counts that must not overflow, operands that must fit their
//! NEFF variable, the in-place / overlap rule, and the explicit permute pairs. Split from
//! `request/instr.rs` for size.

use std::collections::BTreeSet;

use super::instr::InstrContext;
use super::{Operand, Shape2d, TensorName};
use crate::error::{Error, Result};
use crate::isa::operand::Tensor2d;

pub(super) fn mul(a: u64, n: u64, what: &str) -> Result<u64> {
    a.checked_mul(n)
        .ok_or_else(|| Error::invalid(format!("{what}: {a} x rank_n {n} overflows u64")))
}

/// Reject overlapping input/output windows `[a, a+la)` and `[b, b+lb)` of one storage unless
/// they start together (in place). Returns whether they are in place.
pub(super) fn in_place_or_disjoint(
    name: &str,
    same_start: bool,
    (a, la): (u64, u64),
    (b, lb): (u64, u64),
) -> Result<bool> {
    if same_start {
        return Ok(true);
    }
    let overlap = la > 0 && lb > 0 && a < b.saturating_add(lb) && b < a.saturating_add(la);
    if overlap {
        return Err(Error::invalid(format!(
            "input [{a}, {}) and output [{b}, {}) of {name} overlap without starting together; \
             only an exact in-place (same start) is supported",
            a.saturating_add(la),
            b.saturating_add(lb)
        )));
    }
    Ok(false)
}

/// The module's permute pairs for `group_id`, checked against rank_n `n`.
pub(super) fn pairs_of(ctx: &InstrContext, group_id: u16, n: u64) -> Result<Vec<(u32, u32)>> {
    let pairs = ctx.permute_pairs.get(&group_id).ok_or_else(|| {
        Error::invalid(format!(
            "explicit PERMUTE on group {group_id} needs the module's source-target pairs; none \
             were given (docs/contract/lowering.md §4.9)"
        ))
    })?;
    let (mut srcs, mut dsts) = (BTreeSet::new(), BTreeSet::new());
    for &(s, t) in pairs {
        if u64::from(s) >= n || u64::from(t) >= n {
            return Err(Error::invalid(format!(
                "permute pair ({s} -> {t}) of group {group_id} names a rank outside 0..{n}"
            )));
        }
        if !srcs.insert(s) || !dsts.insert(t) {
            return Err(Error::invalid(format!(
                "permute pair ({s} -> {t}) of group {group_id}: each rank may send once and \
                 receive once"
            )));
        }
    }
    Ok(pairs.clone())
}

/// A VAR_ID operand of 0xD9/0xDA, checked to fit its variable (element size `esize`).
pub(super) fn var_operand(
    ctx: &InstrContext,
    t: &Tensor2d,
    field: &str,
    esize: u64,
) -> Result<Operand> {
    let (Some(var), Some(off)) = (t.start.var_id(), t.start.var_offset()) else {
        return Err(Error::invalid(format!(
            "{field} is not a VAR_ID address (docs/contract/isa.md §7)"
        )));
    };
    let info = ctx.var(var)?;
    if let (Some(info), true) = (info, t.num_elements() > 0) {
        // Extent of the walk of docs/contract/isa.md §7 in elements, relative to the start.
        let (mut lo, mut hi) = (0i128, 0i128);
        for k in 0..2 {
            let span = i128::from(t.num_elem[k]) - 1;
            let s = i128::from(t.step_elem[k]);
            lo += span * s.min(0);
            hi += span * s.max(0);
        }
        let e = i128::from(esize);
        let (first, end) = (i128::from(off) + lo * e, i128::from(off) + (hi + 1) * e);
        if first < 0 || end > i128::from(info.bytes) {
            return Err(Error::invalid(format!(
                "{field} walks bytes [{first}, {end}) of variable {var}, which has {} bytes \
                 (num_elem {:?}, step_elem {:?})",
                info.bytes, t.num_elem, t.step_elem
            )));
        }
    }
    Ok(Operand {
        tensor: TensorName::Var(var),
        offset_bytes: off,
        shape: Some(Shape2d {
            step_elem: t.step_elem,
            num_elem: t.num_elem,
        }),
        placement: info.and_then(|i| i.placement),
    })
}

/// Byte extent `(start, len)` of a VAR_ID operand's walk (for the overlap test); negative
/// strides extend it below the start address. Clamped to u64 (only compared, never used to
/// address).
pub(super) fn byte_window(o: &Operand, esize: u64) -> (u64, u64) {
    let s = o.shape.expect("var operands have a shape");
    if s.num_elem[0] == 0 || s.num_elem[1] == 0 {
        return (o.offset_bytes, 0);
    }
    let (mut lo, mut hi) = (0i128, 0i128);
    for k in 0..2 {
        let span = i128::from(s.num_elem[k]) - 1;
        let st = i128::from(s.step_elem[k]);
        lo += span * st.min(0);
        hi += span * st.max(0);
    }
    let e = i128::from(esize);
    let start = (i128::from(o.offset_bytes) + lo * e).clamp(0, i128::from(u64::MAX));
    let len = ((hi - lo + 1) * e).clamp(0, i128::from(u64::MAX));
    (start as u64, len as u64)
}

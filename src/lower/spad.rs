//! The CTRL SPAD cc_op table of one TOP_SP (docs/contract/lowering.md §6.1–§6.3, seed 003): one
//! 8-byte `spad_ctrl_entry` per [`Entry`] the TOP_SP takes part in (drives at least one tape),
//! followed by `SPAD_SLOT_CONTINUE_MARK` slots when that entry's step records overflow one
//! SLOT SPAD slot (see `emit_slot`). At most 512 slots (4 KiB).
//!
//! Field choices:
//! * `algo_type`: what [`ALGO_TYPE_CARRIES`] says — the device pattern (`Algorithm::
//!   device_pattern`, RING 0 / MESH 1) under seed 003, else the host algorithm's low nibble.
//! * `algo_sub_type`: the entry's mesh flavour for mesh legs, 0 for ring legs.
//! * `trigger_next`: on every entry of the TOP_SP but its last.
//! * `reporter`: the TOP_SP driving the entry's lowest channel (so channel 0 ⇒ reporter, the
//!   packer's assertion); exactly one per (rank, entry).
//! * `ring_wait_complete` / `ring_send_complete` (§6.3 chaining rule, our reading): the rule
//!   compares a neighbour TOP_SP's index with one's own — greater ⇒ send, less ⇒ wait. We apply
//!   it from the reporter's side: every other TOP_SP of the entry (a greater index than the
//!   reporter's when the reporter drives channel 0 on the lowest TOP_SP) sends its completion to
//!   the reporter, and the reporter waits for all of them before it posts completion, so the
//!   op is reported only when every TOP_SP is done. A lone TOP_SP sets neither.
//! * union: ring view `channel_list` = OR of `1 << channel` over the tapes this TOP_SP drives;
//!   mesh view `sema_shift_offset` = this rank's position in the entry's ranks (the runtime
//!   checks it against the rank index, §6.1) and `sema_mask` = one bit per rank of the leg
//!   (saturated at 16 bits).
//! * `safe_mode`, `unique_tensors`: 0 (the request carries no permute chain / unique flag).

use crate::error::{Error, Result};
use crate::isa::ccop::{
    pack_cc_op, AlgoTypeEncoding, CcOpFields, CcOpOperands, DevicePattern, ALGO_TYPE_CARRIES,
    CTRL_SPAD_BYTES, SPAD_CTRL_ENTRY_SIZE, SPAD_SLOT_CONTINUE_MARK,
};
use crate::lower::program::Entry;

/// Most CTRL slots (4 KiB / 8).
pub const MAX_CTRL_SLOTS: usize = CTRL_SPAD_BYTES / SPAD_CTRL_ENTRY_SIZE;

/// The TOP_SPs taking part in an entry (of one rank's program), ascending.
pub fn participants(e: &Entry) -> Vec<u8> {
    let mut t: Vec<u8> = e.tapes.iter().map(|t| t.topsp).collect();
    t.sort_unstable();
    t.dedup();
    t
}

/// The reporter TOP_SP of an entry: the one driving its lowest channel.
pub fn reporter_of(e: &Entry) -> Option<u8> {
    e.tapes.iter().min_by_key(|t| t.channel).map(|t| t.topsp)
}

/// The cc_op fields of `topsp` of `rank` for entry `e`; `last` = it is this TOP_SP's last entry.
/// Returns the fields and the lowest channel id the TOP_SP drives (the packer's `channel_id`).
pub fn cc_op_fields(rank: u32, e: &Entry, topsp: u8, last: bool) -> Result<(CcOpFields, u32)> {
    let mine: Vec<_> = e.tapes.iter().filter(|t| t.topsp == topsp).collect();
    let lowest = mine
        .iter()
        .map(|t| u32::from(t.channel))
        .min()
        .ok_or_else(|| {
            Error::invalid(format!(
                "cc_op: TOP_SP {topsp} drives no tape of entry '{}'",
                e.leg
            ))
        })?;
    let pattern = e.algorithm.device_pattern();
    let algo_type = match ALGO_TYPE_CARRIES {
        AlgoTypeEncoding::DevicePattern => pattern as u8,
        AlgoTypeEncoding::HostAlgorithm => (e.algorithm as u8) & 0xF,
    };
    let operands = match pattern {
        DevicePattern::Ring => {
            let mut list = 0u32;
            for t in &mine {
                if t.channel >= 32 {
                    return Err(Error::invalid(format!(
                        "cc_op: ring channel {} does not fit channel_list",
                        t.channel
                    )));
                }
                list |= 1 << t.channel;
            }
            CcOpOperands::Ring { channel_list: list }
        }
        DevicePattern::Mesh => {
            let pos = e
                .ranks
                .iter()
                .position(|&r| r == rank)
                .unwrap_or(rank as usize);
            let g = e.ranks.len().min(16) as u32;
            CcOpOperands::Mesh {
                sema_shift_offset: pos as u16,
                sema_mask: ((1u32 << g) - 1) as u16,
            }
        }
    };
    let sub = match pattern {
        DevicePattern::Mesh => e.mesh_sub_type.unwrap_or(0),
        DevicePattern::Ring => 0,
    };
    let reporter = reporter_of(e) == Some(topsp);
    let many = participants(e).len() > 1;
    Ok((
        CcOpFields {
            algo_type,
            algo_sub_type: sub,
            trigger_next: !last,
            reporter,
            ring_wait_complete: many && reporter,
            ring_send_complete: many && !reporter,
            safe_mode: false,
            unique_tensors: false,
            operands,
        },
        lowest,
    ))
}

/// One cc_op to place: its fields, the packer's channel id, and how many SLOT slots its
/// records take (≥ 1; the extra ones get continuation marks).
#[derive(Debug, Clone, Copy)]
pub struct CcOpPlacement {
    /// The fields.
    pub fields: CcOpFields,
    /// Lowest channel driven.
    pub channel_id: u32,
    /// SLOT slots used.
    pub slots: usize,
}

/// Build the CTRL SPAD bytes (8 bytes per slot, no padding).
pub fn build_ctrl_spad(ops: &[CcOpPlacement]) -> Result<Vec<u8>> {
    let total: usize = ops.iter().map(|o| o.slots.max(1)).sum();
    if total > MAX_CTRL_SLOTS {
        return Err(Error::resource(format!(
            "cc_op table needs {total} slots, the CTRL SPAD holds {MAX_CTRL_SLOTS} (4 KiB)"
        )));
    }
    let mut out = Vec::with_capacity(total * SPAD_CTRL_ENTRY_SIZE);
    for o in ops {
        out.extend_from_slice(&pack_cc_op(
            [0; SPAD_CTRL_ENTRY_SIZE],
            &o.fields,
            o.channel_id,
        )?);
        for _ in 1..o.slots {
            out.extend_from_slice(&SPAD_SLOT_CONTINUE_MARK.to_le_bytes());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests;

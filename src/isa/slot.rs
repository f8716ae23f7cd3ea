//! Our SLOT SPAD format: the per-step records the TOP_SP sequencer executes
//! (docs/contract/lowering.md §6.2, docs/contract/device.md §8.3). The lowering writes it
//! (`lower::emit`), the software device reads it; it lives in `isa` because it is part of the
//! contract between the two.
//!
//! The spec gives the content of a step — `tp_inc_steps[i] = {m2s, s2m, repeat}` and a
//! `wait_ge_and_dec` before the next step — but not the vendor's byte layout (not recovered).
//! This is OUR documented format, 16 bytes per record, little-endian:
//!
//! | off | size | field |
//! |---|---|---|
//! | 0 | u16 | `m2s`: descriptors released on the M2S (TX) queue |
//! | 2 | u16 | `s2m`: descriptors released on the S2M (RX) queue |
//! | 4 | u16 | `repeat`: how many times to apply both increments (1; 0 on an empty END record) |
//! | 6 | u8 | `wait_sem`: semaphore id waited on before the increments; 0xFF = no wait |
//! | 7 | u8 | flags: bits 3:0 the waited TOP_SP (rank-local), bit 4 END (last record of the cc_op), bits 7:5 zero |
//! | 8 | u32 | `wait_target`: block until `sem >= target` |
//! | 12 | u32 | `wait_consume`: then `sem -= consume` |
//!
//! Execution of a record: wait (if any), then `repeat` times {RX tail += s2m; TX tail += m2s}
//! (RX first, docs/contract/device.md §1.2), then the next record; after an END record the cc_op is
//! done.
//!
//! **Slots.** The SLOT SPAD (32 KiB, docs/contract/carrier.md App. A) is cut into [`SLOTS`] slots
//! of [`SLOT_RECORDS`] records; slot k belongs to CTRL SPAD slot k. A cc_op whose records do not
//! fit one slot continues in the next slot, whose CTRL slot holds `SPAD_SLOT_CONTINUE_MARK`
//! (docs/contract/lowering.md §6.2). A cc_op with no step gets one empty END record.

use crate::error::{Error, Result};

/// Bytes of one record.
pub const RECORD_BYTES: usize = 16;
/// Records per slot (1 KiB slots).
pub const SLOT_RECORDS: usize = 64;
/// Bytes of the SLOT SPAD (docs/contract/carrier.md Appendix A).
pub const SLOT_SPAD_BYTES: usize = 0x8000;
/// Slots in the SLOT SPAD.
pub const SLOTS: usize = SLOT_SPAD_BYTES / (SLOT_RECORDS * RECORD_BYTES);
/// TOP_SP semaphore of our own that collects the other TOP_SPs' completions on the reporter
/// (`complete` / `complete_prev`, docs/contract/lowering.md §6.3). Composers never use it.
pub const CHAIN_SEM: u8 = 254;
/// TOP_SP semaphore of our own that `trigger_next` increments to start the next chained entry.
/// Composers never use it.
pub const NEXT_SEM: u8 = 253;
/// `wait_sem` value meaning "no wait".
pub const NO_WAIT: u8 = 0xFF;
const END: u8 = 0x10;

/// The wait of a record (`wait_ge_and_dec` generalised to any consume,
/// docs/contract/device.md §5.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SlotWait {
    /// Rank-local TOP_SP of the semaphore.
    pub topsp: u8,
    /// Semaphore id (not 0xFF).
    pub sem: u8,
    /// Threshold.
    pub target: u32,
    /// Amount subtracted.
    pub consume: u32,
}

/// One record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SlotRecord {
    /// M2S tail increment.
    pub m2s: u16,
    /// S2M tail increment.
    pub s2m: u16,
    /// Repeat count.
    pub repeat: u16,
    /// Wait before the increments.
    pub wait: Option<SlotWait>,
    /// Last record of the cc_op.
    pub end: bool,
}

impl SlotRecord {
    /// The 16 bytes.
    pub fn encode(&self) -> [u8; RECORD_BYTES] {
        let mut b = [0u8; RECORD_BYTES];
        b[0..2].copy_from_slice(&self.m2s.to_le_bytes());
        b[2..4].copy_from_slice(&self.s2m.to_le_bytes());
        b[4..6].copy_from_slice(&self.repeat.to_le_bytes());
        let end = if self.end { END } else { 0 };
        match self.wait {
            Some(w) => {
                b[6] = w.sem;
                b[7] = (w.topsp & 0xF) | end;
                b[8..12].copy_from_slice(&w.target.to_le_bytes());
                b[12..16].copy_from_slice(&w.consume.to_le_bytes());
            }
            None => {
                b[6] = NO_WAIT;
                b[7] = end;
            }
        }
        b
    }

    /// Decode; rejects reserved flag bits and a no-wait record with a target or consume.
    pub fn decode(b: &[u8; RECORD_BYTES]) -> Result<SlotRecord> {
        let u16_at = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]);
        let u32_at = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        if b[7] & 0xE0 != 0 {
            return Err(Error::invalid(format!(
                "slot record: flags bits 7:5 = {:#x}, must be 0",
                b[7] >> 5
            )));
        }
        let wait = if b[6] == NO_WAIT {
            if b[7] & 0xF != 0 || u32_at(8) != 0 || u32_at(12) != 0 {
                return Err(Error::invalid(
                    "slot record: no wait (sem 0xFF) but a TOP_SP, target or consume is set",
                ));
            }
            None
        } else {
            Some(SlotWait {
                topsp: b[7] & 0xF,
                sem: b[6],
                target: u32_at(8),
                consume: u32_at(12),
            })
        };
        Ok(SlotRecord {
            m2s: u16_at(0),
            s2m: u16_at(2),
            repeat: u16_at(4),
            wait,
            end: b[7] & END != 0,
        })
    }
}

/// Byte offset in the SLOT SPAD of record position `pos` (= slot · 64 + index in slot).
pub fn record_offset(pos: u32) -> usize {
    pos as usize * RECORD_BYTES
}

#[cfg(test)]
mod tests;

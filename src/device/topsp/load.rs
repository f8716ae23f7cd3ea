//! Load-time decoding and validation of one TOP_SP's program (docs/contract/lowering.md §6.1–§6.3,
//! docs/contract/device.md §8.2): the CTRL SPAD cc_op table with its continuation marks, the SLOT SPAD records
//! of every entry, and the `neff_configs` semaphore addresses. Everything that could go wrong at
//! run time because of the bytes is checked here, so the walk in [`super`] never meets an
//! undecodable byte; every error names the CTRL slot or SLOT record and its byte offset.

use crate::error::{Error, Result};
use crate::isa::ccop::{
    AlgoTypeEncoding, DevicePattern, SpadCtrlEntry, ALGO_TYPE_CARRIES, CTRL_SPAD_BYTES,
    SPAD_CTRL_ENTRY_SIZE, SPAD_SLOT_CONTINUE_MARK,
};
use crate::isa::evtsem::{Route, SemAddr, SemWindow, SocAddr};
use crate::isa::slot::{SlotRecord, RECORD_BYTES, SLOTS, SLOT_RECORDS, SLOT_SPAD_BYTES};

use super::SeqConfig;

/// One decoded cc_op entry.
#[derive(Debug, Clone)]
pub(super) struct LoadedEntry {
    /// CTRL SPAD slot of the entry (its first SLOT SPAD slot has the same index).
    pub slot: usize,
    /// The decoded slot.
    pub ctrl: SpadCtrlEntry,
    /// SLOT SPAD position (slot · 64 + index) of the first record.
    pub first_pos: u32,
    /// Its records, in order, the last one END.
    pub records: Vec<SlotRecord>,
}

/// The decoded program and the resolved `neff_configs` semaphores.
#[derive(Debug, Clone)]
pub(super) struct Loaded {
    pub entries: Vec<LoadedEntry>,
    /// Own semaphore index waited before the first entry (from `trigger`).
    pub trigger_idx: u8,
    /// Own semaphore index chained entries wait on, and the INC address that bumps it.
    pub next: Option<(u8, u64)>,
    /// Own semaphore index the reporter collects completions on, and how many per entry.
    pub chain: Option<(u8, u32)>,
    /// INC-window address of the reporter's completion semaphore (non-reporters).
    pub complete_inc: Option<u64>,
}

fn ctrl_err(t: u8, slot: usize, msg: impl std::fmt::Display) -> Error {
    Error::invalid(format!(
        "TOP_SP {t}: CTRL SPAD slot {slot} (byte {:#x}): {msg}",
        slot * SPAD_CTRL_ENTRY_SIZE
    ))
}

fn rec_err(t: u8, pos: usize, msg: impl std::fmt::Display) -> Error {
    Error::invalid(format!(
        "TOP_SP {t}: SLOT SPAD record {pos} (slot {}, byte {:#x}): {msg}",
        pos / SLOT_RECORDS,
        pos * RECORD_BYTES
    ))
}

/// A semaphore address from `neff_configs` in the READ-window form (docs/contract/device.md §9.2).
fn read_form(t: u8, name: &str, addr: u64) -> Result<(SocAddr, SemAddr)> {
    let bad = |why: String| {
        Error::invalid(format!(
            "TOP_SP {t}: neff_configs.{name} = {addr:#x}: {why}"
        ))
    };
    let soc = SocAddr::decode(addr).map_err(|e| bad(e.message().to_string()))?;
    let sem = SemAddr::decode(soc.on_chip())
        .ok_or_else(|| bad("not a TOP_SP EVT_SEM semaphore address".into()))?;
    if sem.window != SemWindow::Read {
        return Err(bad(format!(
            "{:?} window; neff_configs stores the READ form (docs/contract/device.md §9.2)",
            sem.window
        )));
    }
    Ok((soc, sem))
}

/// An own semaphore: READ form, local route, same EVT_SEM block as `trigger`.
fn own_sem(t: u8, name: &str, addr: u64, block: Option<u8>) -> Result<SemAddr> {
    let (soc, sem) = read_form(t, name, addr)?;
    if soc.route != Route::Local {
        return Err(Error::invalid(format!(
            "TOP_SP {t}: neff_configs.{name} = {addr:#x} is routed ({:?}); it must be this TOP_SP's own semaphore",
            soc.route
        )));
    }
    if let Some(b) = block {
        if sem.topsp != b {
            return Err(Error::invalid(format!(
                "TOP_SP {t}: neff_configs.{name} = {addr:#x} is in EVT_SEM block {} but trigger is in block {b}",
                sem.topsp
            )));
        }
    }
    Ok(sem)
}

/// INC-window twin of a READ-form address (INC = READ + 0x800, docs/contract/device.md §9.2); the routing
/// bits are kept.
fn inc_of(addr: u64) -> u64 {
    addr + (SemWindow::Inc.offset() - SemWindow::Read.offset())
}

/// Split the CTRL SPAD into entries `(slot, continuations, decoded)`. The table ends at the
/// first all-zero slot (so a full 4 KiB image may be passed); everything after it must be zero.
fn ctrl_entries(t: u8, ctrl: &[u8]) -> Result<Vec<(usize, usize, SpadCtrlEntry)>> {
    if ctrl.len() % SPAD_CTRL_ENTRY_SIZE != 0 || ctrl.len() > CTRL_SPAD_BYTES {
        return Err(Error::invalid(format!(
            "TOP_SP {t}: CTRL SPAD of {} bytes; it must be a multiple of 8 and at most {CTRL_SPAD_BYTES}",
            ctrl.len()
        )));
    }
    let mut out: Vec<(usize, usize, SpadCtrlEntry)> = vec![];
    for (k, chunk) in ctrl.chunks_exact(SPAD_CTRL_ENTRY_SIZE).enumerate() {
        let b: [u8; SPAD_CTRL_ENTRY_SIZE] = chunk.try_into().expect("chunks_exact");
        if b == [0; SPAD_CTRL_ENTRY_SIZE] {
            if let Some(nz) = ctrl[k * SPAD_CTRL_ENTRY_SIZE..]
                .iter()
                .position(|&x| x != 0)
            {
                let at = k * SPAD_CTRL_ENTRY_SIZE + nz;
                return Err(ctrl_err(
                    t,
                    at / SPAD_CTRL_ENTRY_SIZE,
                    format!("non-zero byte {at:#x} after the end of the table (empty slot {k})"),
                ));
            }
            break;
        }
        if k >= SLOTS {
            return Err(ctrl_err(
                t,
                k,
                format!("the SLOT SPAD has only {SLOTS} slots for the CTRL slots to map to"),
            ));
        }
        if u64::from_le_bytes(b) == SPAD_SLOT_CONTINUE_MARK {
            match out.last_mut() {
                Some(e) => e.1 += 1,
                None => {
                    return Err(ctrl_err(
                        t,
                        k,
                        "continuation mark without a cc_op before it",
                    ))
                }
            }
            continue;
        }
        let e = SpadCtrlEntry::unpack(b);
        let check = |ok: bool, what: String| {
            if ok {
                Ok(())
            } else {
                Err(ctrl_err(t, k, what))
            }
        };
        check(
            e.cc_op,
            format!("byte 0 = {:#04x}: header.cc_op is 0", b[0]),
        )?;
        check(
            e.header_reserved == 0,
            format!("byte 0 = {:#04x}: header reserved bits set", b[0]),
        )?;
        check(
            e.flags_reserved == 0,
            format!("byte 2 = {:#04x}: reserved flag bits 7:5 set", b[2]),
        )?;
        check(e.pad == 0, format!("byte 3 (padding) = {:#04x}", b[3]))?;
        if ALGO_TYPE_CARRIES == AlgoTypeEncoding::DevicePattern {
            let (ring, mesh) = (DevicePattern::Ring as u8, DevicePattern::Mesh as u8);
            check(
                e.algo_type == ring || e.algo_type == mesh,
                format!(
                    "byte 1 = {:#04x}: algo_type {} is neither RING nor MESH",
                    b[1], e.algo_type
                ),
            )?;
            check(
                e.algo_type == mesh || e.algo_sub_type == 0,
                format!(
                    "byte 1 = {:#04x}: ring entry with algo_sub_type {}",
                    b[1], e.algo_sub_type
                ),
            )?;
            check(
                e.algo_sub_type <= 3,
                format!(
                    "byte 1 = {:#04x}: mesh algo_sub_type {} > 3",
                    b[1], e.algo_sub_type
                ),
            )?;
        }
        check(
            !(e.ring_wait_complete && e.ring_send_complete),
            format!(
                "byte 2 = {:#04x}: both ring_wait_complete and ring_send_complete",
                b[2]
            ),
        )?;
        check(
            !e.ring_wait_complete || e.reporter,
            format!(
                "byte 2 = {:#04x}: ring_wait_complete on a non-reporter",
                b[2]
            ),
        )?;
        check(
            !e.ring_send_complete || !e.reporter,
            format!("byte 2 = {:#04x}: ring_send_complete on the reporter", b[2]),
        )?;
        out.push((k, 0, e));
    }
    Ok(out)
}

/// The records of the entry at CTRL slot `slot` with `cont` continuation slots: from the
/// slot's first record up to its END, which must lie in the entry's last slot.
fn entry_records(t: u8, spad: &[u8], slot: usize, cont: usize) -> Result<Vec<SlotRecord>> {
    let first = slot * SLOT_RECORDS;
    let last_slot = slot + cont;
    let mut recs = vec![];
    for pos in first..(last_slot + 1) * SLOT_RECORDS {
        let off = pos * RECORD_BYTES;
        let Some(bytes) = spad.get(off..off + RECORD_BYTES) else {
            return Err(rec_err(
                t,
                pos,
                format!(
                    "past the end of the {}-byte SLOT SPAD before the entry's END",
                    spad.len()
                ),
            ));
        };
        let b: &[u8; RECORD_BYTES] = bytes.try_into().expect("16 bytes");
        let r = SlotRecord::decode(b).map_err(|e| rec_err(t, pos, e.message()))?;
        if r.repeat == 0 && (r.m2s != 0 || r.s2m != 0) {
            return Err(rec_err(
                t,
                pos,
                format!(
                    "repeat 0 with m2s {} / s2m {}: the increments would never be applied",
                    r.m2s, r.s2m
                ),
            ));
        }
        recs.push(r);
        if r.end {
            if pos / SLOT_RECORDS != last_slot {
                return Err(rec_err(
                    t,
                    pos,
                    format!(
                        "END in slot {} but the entry at CTRL slot {slot} spans slots {slot}..={last_slot} (continuation marks)",
                        pos / SLOT_RECORDS
                    ),
                ));
            }
            return Ok(recs);
        }
    }
    Err(rec_err(
        t,
        (last_slot + 1) * SLOT_RECORDS - 1,
        format!("the entry at CTRL slot {slot} has no END record in slots {slot}..={last_slot}"),
    ))
}

/// Decode and validate everything (see the module doc).
pub(super) fn load(ctrl: &[u8], spad: &[u8], cfg: &SeqConfig) -> Result<Loaded> {
    let t = cfg.topsp;
    if spad.len() % RECORD_BYTES != 0 || spad.len() > SLOT_SPAD_BYTES {
        return Err(Error::invalid(format!(
            "TOP_SP {t}: SLOT SPAD of {} bytes; it must be a multiple of {RECORD_BYTES} and at most {SLOT_SPAD_BYTES}",
            spad.len()
        )));
    }
    let raw = ctrl_entries(t, ctrl)?;
    if raw.len() != cfg.op_num as usize {
        return Err(Error::invalid(format!(
            "TOP_SP {t}: the CTRL SPAD holds {} cc_op entries, neff_configs.op_num says {}",
            raw.len(),
            cfg.op_num
        )));
    }
    let mut entries = Vec::with_capacity(raw.len());
    for (i, &(slot, cont, ctrl)) in raw.iter().enumerate() {
        let last = i + 1 == raw.len();
        if ctrl.trigger_next == last {
            return Err(ctrl_err(
                t,
                slot,
                if last {
                    "trigger_next on the last entry: nothing to start"
                } else {
                    "no trigger_next on an entry that is not the last: the next entry would never start"
                },
            ));
        }
        let records = entry_records(t, spad, slot, cont)?;
        entries.push(LoadedEntry {
            slot,
            ctrl,
            first_pos: (slot * SLOT_RECORDS) as u32,
            records,
        });
    }
    let any = |f: fn(&SpadCtrlEntry) -> bool| entries.iter().any(|e| f(&e.ctrl));
    if any(|c| c.reporter) != cfg.leader {
        return Err(Error::invalid(format!(
            "TOP_SP {t}: neff_configs leader = {} but {} entry has the reporter bit",
            cfg.leader,
            if cfg.leader { "no" } else { "an" }
        )));
    }
    let trig = own_sem(t, "trigger", cfg.trigger, None)?;
    let next = if any(|c| c.trigger_next) {
        let s = own_sem(t, "trigger_next", cfg.trigger_next, Some(trig.topsp))?;
        Some((s.idx, inc_of(cfg.trigger_next)))
    } else {
        None
    };
    let chain = if any(|c| c.ring_wait_complete) {
        let s = own_sem(t, "complete_prev", cfg.complete_prev, Some(trig.topsp))?;
        if cfg.complete_prev_target == 0 {
            return Err(Error::invalid(format!(
                "TOP_SP {t}: ring_wait_complete is set but neff complete_prev_target is 0"
            )));
        }
        Some((s.idx, cfg.complete_prev_target))
    } else {
        None
    };
    let complete_inc = if any(|c| c.ring_send_complete) {
        read_form(t, "complete", cfg.complete)?;
        Some(inc_of(cfg.complete))
    } else {
        None
    };
    for (i, &a) in cfg.completion_addrs.iter().enumerate() {
        SocAddr::decode(a).map_err(|e| {
            Error::invalid(format!(
                "TOP_SP {t}: completion address {i} = {a:#x}: {}",
                e.message()
            ))
        })?;
    }
    Ok(Loaded {
        entries,
        trigger_idx: trig.idx,
        next,
        chain,
        complete_inc,
    })
}

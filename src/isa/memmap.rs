//! The device memory map both sides share: where the lowering puts every rank's constants,
//! program areas, rings and buffers, and where the device's register and semaphore blocks sit
//! (docs/contract/device.md §1.4, §5.1, §8.1; docs/design.md §3: `isa` holds every wire format,
//! and the device never imports the lowering). Addresses here are *on-chip* (bits 47:0, die bit
//! included); the routing bits of a SoC address are [`super::evtsem::SocAddr`]'s business.
//!
//! **HBM windows (our choice, the spec gives none).** Every (chip, logical core) owns a 1 TiB
//! window at `HBM_BASE + core · 2^40` with `HBM_BASE = 2^44` (16 TiB): [`MAX_CORES`] windows end
//! at 32 TiB, inside the 47-bit local space and far above the EVT_SEM blocks
//! (0x82_8000_0000 … 0x84_4000_2000, plus the die bit) and the per-TPB block at
//! [`TPB_EVT_SEM_BASE`]. Inside a window:
//!
//! | offset | what |
//! |---|---|
//! | 0 | constant page (4 KiB): u32 `v` at `4·v` for `v` in 0..1024 (the device fills it) |
//! | `0x1000_0000 + t·2^30` | rank-local TOP_SP `t`: CTRL SPAD @+0 (4 KiB), SLOT SPAD @+0x1000 (32 KiB), M2S pring @+0x10_0000, S2M pring @+0x2000_0000 (≤ 2^24 descriptors each) |
//! | `2^36` | input, then output (the same storage when in place), then scratch, each 4 KiB aligned |
//!
//! Only what a loader maps is backed by host memory (`device::memory`), so the huge windows cost
//! nothing.

use super::evtsem::{SemWindow, SEMS_PER_TOPSP};

/// Start of the HBM windows (on-chip address).
pub const HBM_BASE: u64 = 1 << 44;
/// Bytes of one (chip, core) window.
pub const CORE_WINDOW: u64 = 1 << 40;
/// Most logical cores per chip the windows cover.
pub const MAX_CORES: u32 = 16;
/// Values in the constant page (u32 `v` at `4·v`).
pub const CONST_WORDS: u32 = 1024;
/// Bytes of the constant page at window offset 0.
pub const CONST_PAGE_BYTES: u64 = 4 * CONST_WORDS as u64;
/// Offset of TOP_SP 0's program area in a window.
pub const PROGRAM_OFF: u64 = 0x1000_0000;
/// Stride of the per-TOP_SP program areas.
pub const PROGRAM_STRIDE: u64 = 1 << 30;
/// CTRL SPAD offset in a program area (4 KiB, docs/contract/carrier.md App. A).
pub const CTRL_SPAD_OFF: u64 = 0;
/// CTRL SPAD bytes (docs/contract/device.md §8.2).
pub const CTRL_SPAD_BYTES: u64 = 0x1000;
/// SLOT SPAD offset in a program area (32 KiB).
pub const SLOT_SPAD_OFF: u64 = 0x1000;
/// SLOT SPAD bytes (docs/contract/device.md §8.2).
pub const SLOT_SPAD_BYTES: u64 = 0x8000;
/// M2S pring offset in a program area.
pub const M2S_RING_OFF: u64 = 0x10_0000;
/// S2M pring offset in a program area.
pub const S2M_RING_OFF: u64 = 0x2000_0000;
/// Largest ring (DRL bits 23:0, docs/contract/device.md §3.1).
pub const MAX_RING_DESCS: u64 = 1 << 24;
/// Bytes of one UDMA descriptor (docs/contract/device.md §1.1).
pub const DESC_BYTES: u64 = 16;
/// Bytes reserved for one pring (the largest ring).
pub const RING_BYTES: u64 = MAX_RING_DESCS * DESC_BYTES;
/// Offset of the data buffers in a window.
pub const DATA_OFF: u64 = 1 << 36;
/// Alignment of each data buffer.
pub const DATA_ALIGN: u64 = 0x1000;

/// Base of (chip-local) logical core `core`'s HBM window.
pub fn core_window(core: u32) -> u64 {
    HBM_BASE + u64::from(core) * CORE_WINDOW
}

/// Address of the constant word holding `value` in `core`'s window (caller checks
/// `value < CONST_WORDS`).
pub fn const_word(core: u32, value: u32) -> u64 {
    core_window(core) + 4 * u64::from(value)
}

/// Base of rank-local TOP_SP `t`'s program area in `core`'s window.
pub fn program_area(core: u32, t: u8) -> u64 {
    core_window(core) + PROGRAM_OFF + u64::from(t) * PROGRAM_STRIDE
}

/// A buffer size rounded up to [`DATA_ALIGN`]; an empty buffer still takes one page so that
/// every buffer has a distinct address.
pub fn align_buf(bytes: u64) -> u64 {
    bytes.max(1).div_ceil(DATA_ALIGN) * DATA_ALIGN
}

/// Which core window an on-chip address falls in, and the offset inside it.
pub fn window_of(on_chip: u64) -> Option<(u32, u64)> {
    if !(HBM_BASE..HBM_BASE + u64::from(MAX_CORES) * CORE_WINDOW).contains(&on_chip) {
        return None;
    }
    let rel = on_chip - HBM_BASE;
    Some(((rel / CORE_WINDOW) as u32, rel % CORE_WINDOW))
}

/// The parts of a TOP_SP program area.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProgramPart {
    /// CTRL SPAD (cc_op table).
    CtrlSpad,
    /// SLOT SPAD (per-slot step data).
    SlotSpad,
    /// M2S pring.
    M2sRing,
    /// S2M pring.
    S2mRing,
}

/// Which TOP_SP program part a window offset names: `(t, part, offset in the part)` for
/// `t < topsps`, `None` outside every part.
pub fn program_part(win_off: u64, topsps: u32) -> Option<(u8, ProgramPart, u64)> {
    if win_off < PROGRAM_OFF || win_off >= PROGRAM_OFF + u64::from(topsps) * PROGRAM_STRIDE {
        return None;
    }
    let t = ((win_off - PROGRAM_OFF) / PROGRAM_STRIDE) as u8;
    let p = (win_off - PROGRAM_OFF) % PROGRAM_STRIDE;
    let parts = [
        (ProgramPart::CtrlSpad, CTRL_SPAD_OFF, CTRL_SPAD_BYTES),
        (ProgramPart::SlotSpad, SLOT_SPAD_OFF, SLOT_SPAD_BYTES),
        (ProgramPart::M2sRing, M2S_RING_OFF, RING_BYTES),
        (ProgramPart::S2mRing, S2M_RING_OFF, RING_BYTES),
    ];
    parts
        .iter()
        .find(|(_, off, len)| (*off..off + len).contains(&p))
        .map(|&(part, off, _)| (t, part, p - off))
}

/// Per-TPB (compute engine) EVT_SEM block 0 (docs/contract/device.md §5.1 **\[H\]**): a different
/// block from the TOP_SP ones; compute-engine semaphores named in the pseudo-op EVENTS fields live
/// here.
pub const TPB_EVT_SEM_BASE: u64 = 0x28_0270_0000;
/// Stride between per-TPB blocks. **Our choice**: the spec gives only TPB 0's base; one block per
/// logical core is needed so ranks on one chip do not share compute semaphores. Change here.
pub const TPB_EVT_SEM_STRIDE: u64 = 0x1_0000;
/// Per-TPB blocks per chip (one per logical core window).
pub const MAX_TPBS: u8 = MAX_CORES as u8;
/// Bytes of one EVT_SEM block: events + READ/SET/INC/DEC (docs/contract/device.md §5.1); the
/// per-TPB blocks use the TOP_SP window layout (our choice; the spec does not give theirs).
pub const SEM_BLOCK_BYTES: u64 = 0x2000;

/// Base of per-TPB block `i` (on-chip address).
pub fn tpb_evt_sem_base(i: u8) -> u64 {
    TPB_EVT_SEM_BASE + u64::from(i) * TPB_EVT_SEM_STRIDE
}

/// Which per-TPB block an on-chip address falls in: `(tpb, offset in block)`. The die bit is not
/// part of these addresses (our choice), so an address with bit 47 set is never a TPB block.
pub fn tpb_block_of(on_chip: u64) -> Option<(u8, u64)> {
    let end = TPB_EVT_SEM_BASE + u64::from(MAX_TPBS) * TPB_EVT_SEM_STRIDE;
    if !(TPB_EVT_SEM_BASE..end).contains(&on_chip) {
        return None;
    }
    let rel = on_chip - TPB_EVT_SEM_BASE;
    let off = rel % TPB_EVT_SEM_STRIDE;
    (off < SEM_BLOCK_BYTES).then_some(((rel / TPB_EVT_SEM_STRIDE) as u8, off))
}

/// Which TOP_SP EVT_SEM block an on-chip address falls in: `(topsp, offset in block)`, for any
/// offset in the 0x2000-byte block (gaps and misaligned offsets included, so the device can
/// reject them instead of treating them as plain memory). Inverse of
/// [`super::evtsem::topsp_base`].
pub fn topsp_block_of(on_chip: u64) -> Option<(u8, u64)> {
    let die = (on_chip >> 47) & 1;
    let low = on_chip & ((1 << 47) - 1);
    let rel = low.checked_sub(super::evtsem::EVT_SEM_BASE)?;
    let (grp, off) = (rel >> 30, rel & ((1 << 30) - 1));
    (grp < 8 && off < SEM_BLOCK_BYTES).then_some(((grp + 8 * die) as u8, off))
}

/// The window and index a block offset names: `None` for the gaps between windows and for
/// offsets that are not 4-byte aligned. Every window holds [`SEMS_PER_TOPSP`] 4-byte slots.
pub fn sem_window_at(block_off: u64) -> Option<(SemWindow, u8)> {
    if block_off % 4 != 0 {
        return None;
    }
    let span = 4 * u64::from(SEMS_PER_TOPSP);
    [
        SemWindow::Event,
        SemWindow::Read,
        SemWindow::Set,
        SemWindow::Inc,
        SemWindow::Dec,
    ]
    .into_iter()
    .find(|w| (w.offset()..w.offset() + span).contains(&block_off))
    .map(|w| (w, ((block_off - w.offset()) / 4) as u8))
}

/// Does the on-chip range `[base, end)` touch any EVT_SEM block (the TOP_SP blocks on both dies,
/// or the per-TPB area)? Memory must never be mapped over them.
pub fn overlaps_sem_block(base: u64, end: u64) -> bool {
    let hit = |b: u64, len: u64| base < b + len && b < end;
    let tpb_span = u64::from(MAX_TPBS) * TPB_EVT_SEM_STRIDE;
    (0..super::evtsem::MAX_TOPSPS).any(|t| hit(super::evtsem::topsp_base(t), SEM_BLOCK_BYTES))
        || hit(TPB_EVT_SEM_BASE, tpb_span)
}

/// TOP_SP LOCAL_REG base (docs/contract/device.md §8.1 **\[H\]**).
pub const LOCAL_REG_BASE: u64 = 0x6_0000;
/// LOCAL_REG + 0x1540: init.
pub const REG_INIT_OFF: u64 = 0x1540;
/// LOCAL_REG + 0x1560: tsync.
pub const REG_TSYNC_OFF: u64 = 0x1560;
/// LOCAL_REG + 0x15A0: host_trigger (write 1 to start the cc_op program once,
/// docs/contract/device.md §8.2).
pub const REG_HOST_TRIGGER_OFF: u64 = 0x15A0;
/// LOCAL_REG + 0x15C0: stop.
pub const REG_STOP_OFF: u64 = 0x15C0;
/// LOCAL_REG + 0x15E0: basic-block switch doorbell (docs/contract/device.md §4).
pub const REG_BB_SWITCH_OFF: u64 = 0x15E0;
/// Absolute host_trigger on v3/v4 (0x615A0).
pub const HOST_TRIGGER_V3: u64 = LOCAL_REG_BASE + REG_HOST_TRIGGER_OFF;
/// Absolute host_trigger on v2 (a different offset, docs/contract/device.md §8.1 **\[H\]**).
pub const HOST_TRIGGER_V2: u64 = 0x6_0848;

#[cfg(test)]
mod tests;

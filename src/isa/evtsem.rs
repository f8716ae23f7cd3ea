//! EVT_SEM semaphore addresses and SoC address routing (docs/contract/device.md §1.4, §5.1;
//! docs/contract/carrier.md Appendix A).
//!
//! * TOP_SP `i`'s EVT_SEM block sits at `0x8280000000 + ((i & 7) << 30) + ((i > 7) << 47)`
//!   (v3/v4, **\[H\]**). The v2 TOP_SP layout was not recovered; we use the same formula on v2
//!   (whose 6 TOP_SPs all fall in the first group of eight), so the model is self-consistent.
//! * Inside a block: events +0, semaphore READ +0x1000, SET +0x1400, INC +0x1800, DEC +0x1C00;
//!   index `idx` at window + 4·idx (256 semaphores).
//! * A SoC address: local address bits 46:0, die bit 47, chip id bits 53:48, id-valid bit 54.
//!   The neighbour-routing form (bit 52 NEIGHBOR_ROUTE, 51 EXIT_DIE, 50 EXIT_SENG) overlaps the
//!   chip id; [`SocAddr::decode`] reports it separately when bit 52 is set.

use crate::error::{Error, Result};

/// Base of TOP_SP 0's EVT_SEM block.
pub const EVT_SEM_BASE: u64 = 0x82_8000_0000;
/// Bytes spanned by one block (events + the four semaphore windows).
pub const EVT_SEM_BLOCK_BYTES: u64 = 0x2000;
/// Semaphores (and events) per TOP_SP.
pub const SEMS_PER_TOPSP: u32 = 256;
/// Most TOP_SP instances the address formula covers (v3/v4: 16).
pub const MAX_TOPSPS: u8 = 16;

/// The windows of an EVT_SEM block (docs/contract/device.md §5.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SemWindow {
    /// +0x0000: events (1 bit each).
    Event,
    /// +0x1000: read (writes ignored). Ring/barrier config fields store this form.
    Read,
    /// +0x1400: value := written.
    Set,
    /// +0x1800: value += written.
    Inc,
    /// +0x1C00: value -= written.
    Dec,
}

impl SemWindow {
    /// Offset of the window in the block.
    pub fn offset(self) -> u64 {
        match self {
            SemWindow::Event => 0,
            SemWindow::Read => 0x1000,
            SemWindow::Set => 0x1400,
            SemWindow::Inc => 0x1800,
            SemWindow::Dec => 0x1C00,
        }
    }
    fn from_offset(off: u64) -> Option<(SemWindow, u64)> {
        let (w, base) = match off {
            0x0000..=0x03FF => (SemWindow::Event, 0),
            0x1000..=0x13FF => (SemWindow::Read, 0x1000),
            0x1400..=0x17FF => (SemWindow::Set, 0x1400),
            0x1800..=0x1BFF => (SemWindow::Inc, 0x1800),
            0x1C00..=0x1FFF => (SemWindow::Dec, 0x1C00),
            _ => return None,
        };
        Some((w, off - base))
    }
}

/// Local (bits 47:0, die bit included) base of TOP_SP `i`'s EVT_SEM block.
pub fn topsp_base(i: u8) -> u64 {
    EVT_SEM_BASE + (u64::from(i & 7) << 30) + (u64::from(i > 7) << 47)
}

/// One semaphore (or event) window address of a TOP_SP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SemAddr {
    /// TOP_SP instance 0..16.
    pub topsp: u8,
    /// Window.
    pub window: SemWindow,
    /// Index 0..=255.
    pub idx: u8,
}

impl SemAddr {
    /// The local address (bits 47:0).
    pub fn encode(&self) -> u64 {
        topsp_base(self.topsp) + self.window.offset() + 4 * u64::from(self.idx)
    }

    /// Decode a local address (bits 47:0); `None` if it is not in an EVT_SEM window or not
    /// 4-byte aligned.
    pub fn decode(local: u64) -> Option<SemAddr> {
        let die = (local >> 47) & 1;
        let low = local & ((1 << 47) - 1);
        if low < EVT_SEM_BASE {
            return None;
        }
        let rel = low - EVT_SEM_BASE;
        let grp = rel >> 30;
        let off = rel & ((1 << 30) - 1);
        if grp > 7 || off >= EVT_SEM_BLOCK_BYTES || off % 4 != 0 {
            return None;
        }
        let (window, woff) = SemWindow::from_offset(off)?;
        Some(SemAddr {
            topsp: (grp + 8 * die) as u8,
            window,
            idx: (woff / 4) as u8,
        })
    }
}

/// Bit of the die in a SoC address.
pub const DIE_BIT: u32 = 47;
/// Mask of the local address (bits 46:0).
pub const LOCAL_MASK: u64 = (1 << 47) - 1;
/// Chip id field shift (bits 53:48).
pub const CHIP_SHIFT: u32 = 48;
/// Id-valid bit.
pub const ID_VALID_BIT: u32 = 54;
/// Neighbour-routing flags.
pub const EXIT_SENG_BIT: u32 = 50;
/// Neighbour-routing flags.
pub const EXIT_DIE_BIT: u32 = 51;
/// Neighbour-routing flags.
pub const NEIGHBOR_ROUTE_BIT: u32 = 52;

/// How an address is routed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Route {
    /// The issuing chip.
    Local,
    /// Chip id `0..64`, with the id-valid bit.
    Chip(u8),
    /// Neighbour routing (bit 52), with the exit flags.
    Neighbor {
        /// Bit 51.
        exit_die: bool,
        /// Bit 50.
        exit_seng: bool,
    },
}

/// A SoC address (docs/contract/device.md §1.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SocAddr {
    /// Bits 46:0.
    pub local: u64,
    /// Bit 47.
    pub die: bool,
    /// Routing.
    pub route: Route,
}

impl SocAddr {
    /// The 64-bit address.
    pub fn encode(&self) -> u64 {
        let mut a = (self.local & LOCAL_MASK) | (u64::from(self.die) << DIE_BIT);
        match self.route {
            Route::Local => {}
            Route::Chip(c) => a |= (u64::from(c & 0x3F) << CHIP_SHIFT) | (1 << ID_VALID_BIT),
            Route::Neighbor {
                exit_die,
                exit_seng,
            } => {
                a |= (1 << NEIGHBOR_ROUTE_BIT)
                    | (u64::from(exit_die) << EXIT_DIE_BIT)
                    | (u64::from(exit_seng) << EXIT_SENG_BIT)
            }
        }
        a
    }

    /// Decode; bits 63:55 must be 0, the chip-id form needs id-valid, the neighbour form
    /// leaves bits 49:48 and 54 clear.
    pub fn decode(a: u64) -> Result<SocAddr> {
        if a >> 55 != 0 {
            return Err(Error::invalid(format!(
                "SoC address {a:#x}: bits 63:55 = {:#x} must be 0 (docs/contract/device.md §1.4)",
                a >> 55
            )));
        }
        let local = a & LOCAL_MASK;
        let die = (a >> DIE_BIT) & 1 == 1;
        let chip = ((a >> CHIP_SHIFT) & 0x3F) as u8;
        let valid = (a >> ID_VALID_BIT) & 1 == 1;
        let route = if (a >> NEIGHBOR_ROUTE_BIT) & 1 == 1 && !valid {
            if chip & 0b11 != 0 {
                return Err(Error::invalid(format!(
                    "SoC address {a:#x}: neighbour route with bits 49:48 set"
                )));
            }
            Route::Neighbor {
                exit_die: (a >> EXIT_DIE_BIT) & 1 == 1,
                exit_seng: (a >> EXIT_SENG_BIT) & 1 == 1,
            }
        } else if valid {
            Route::Chip(chip)
        } else if chip != 0 {
            return Err(Error::invalid(format!(
                "SoC address {a:#x}: chip id {chip} (bits 53:48) without the id-valid bit 54"
            )));
        } else {
            Route::Local
        };
        Ok(SocAddr { local, die, route })
    }

    /// Bits 47:0 (local address with the die bit): what a chip resolves after routing.
    pub fn on_chip(&self) -> u64 {
        self.local | (u64::from(self.die) << DIE_BIT)
    }
}

#[cfg(test)]
mod tests;

//! The error of a failed simulated-memory access or mapping (see the parent's module doc:
//! errors carry the address as issued, and the DMA engine reports them as an engine abort with
//! the descriptor).

use std::fmt;

/// A failed access or mapping. `addr` is always the SoC address as issued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemError {
    /// Not a well-formed SoC address (bits 63:55 set, chip id without id-valid, neighbour route).
    BadAddress {
        /// Address.
        addr: u64,
        /// Why.
        reason: String,
    },
    /// The issuing or the routed chip does not exist in this machine.
    NoChip {
        /// Address.
        addr: u64,
        /// The chip.
        chip: u8,
    },
    /// No region is mapped at the start of the access.
    Unmapped {
        /// Address.
        addr: u64,
        /// Target chip.
        chip: u8,
    },
    /// The access runs past the end of the region it starts in.
    CrossesEnd {
        /// Address.
        addr: u64,
        /// Bytes accessed.
        len: u64,
        /// Target chip.
        chip: u8,
        /// The region's on-chip base.
        base: u64,
        /// The region's length.
        region_len: u64,
    },
    /// The access runs past the top of the 48-bit on-chip address space.
    OutOfRange {
        /// Address.
        addr: u64,
        /// Bytes accessed.
        len: u64,
    },
    /// An EVT_SEM access that is misaligned, not a multiple of 4 bytes, in a gap between
    /// windows, or spans two windows.
    SemAccess {
        /// Address.
        addr: u64,
        /// Bytes accessed.
        len: u64,
    },
    /// A bulk (zero-copy) access aimed at an EVT_SEM window.
    NotMemory {
        /// Address.
        addr: u64,
    },
    /// Two operands of one transfer partly overlap (only identical ranges may alias).
    Overlap {
        /// Address of the later operand.
        addr: u64,
    },
    /// A [`Memory::map`](super::Memory::map) that is empty, leaves the on-chip space, overlaps a mapped region or
    /// an EVT_SEM block, or an unmap of nothing.
    BadMapping {
        /// Chip.
        chip: u8,
        /// On-chip base.
        base: u64,
        /// Length.
        len: u64,
        /// Why.
        reason: &'static str,
    },
}

impl fmt::Display for MemError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MemError::BadAddress { addr, reason } => {
                write!(f, "bad SoC address {addr:#x}: {reason}")
            }
            MemError::NoChip { addr, chip } => write!(f, "address {addr:#x}: no chip {chip}"),
            MemError::Unmapped { addr, chip } => {
                write!(f, "address {addr:#x}: nothing mapped there on chip {chip}")
            }
            MemError::CrossesEnd {
                addr,
                len,
                chip,
                base,
                region_len,
            } => write!(
                f,
                "address {addr:#x} + {len} bytes crosses the end of chip {chip}'s region \
                 {base:#x}..{:#x}",
                base + region_len
            ),
            MemError::OutOfRange { addr, len } => {
                write!(
                    f,
                    "address {addr:#x} + {len} bytes leaves the on-chip address space"
                )
            }
            MemError::SemAccess { addr, len } => write!(
                f,
                "EVT_SEM access {addr:#x} + {len} bytes: must be whole aligned 4-byte words in one \
                 window (docs/contract/device.md §5.1)"
            ),
            MemError::NotMemory { addr } => {
                write!(f, "address {addr:#x} is an EVT_SEM window, not memory")
            }
            MemError::Overlap { addr } => {
                write!(
                    f,
                    "address {addr:#x}: operands of one transfer partly overlap"
                )
            }
            MemError::BadMapping {
                chip,
                base,
                len,
                reason,
            } => {
                write!(f, "cannot map chip {chip} {base:#x} + {len:#x}: {reason}")
            }
        }
    }
}

impl std::error::Error for MemError {}

/// The core error for a failed device access. The status class is the DMA abort (1203,
/// docs/contract/device.md §12.2); `ErrorKind` has no such kind yet, so this is `Failure` with the class named
/// in the message — the DMA engine adds the descriptor.
impl From<MemError> for crate::error::Error {
    fn from(e: MemError) -> Self {
        crate::error::Error::new(crate::error::ErrorKind::DmaAbort, format!("DMA abort: {e}"))
    }
}

//! One mapped region of simulated memory and where its bytes live.

use std::fmt;
use std::sync::Arc;

use crate::device::peers::WriteLog;
use crate::device::sema::ExternalBytes;

#[derive(Debug)]
pub(super) struct Region {
    pub(super) chip: u8,
    pub(super) base: u64,
    pub(super) data: Backing,
    /// Where writes into this region are recorded, with the region's offset in the logged
    /// memory: the region is another host's HBM, held here as a shadow (`device::peers`).
    pub(super) log: Option<(Arc<dyn WriteLog>, usize)>,
}

/// Where a region's bytes live: the machine's own (recycled through `device::buffer_pool`), or
/// a window of memory owned elsewhere — a shared-memory segment that other processes map, so
/// that their DMA engines write into this chip's HBM (docs/design.md §2.7).
pub(super) enum Backing {
    Heap(Vec<u8>),
    External {
        ptr: *mut u8,
        len: usize,
        _keep: Arc<dyn ExternalBytes>,
    },
}

// SAFETY: `ptr` points into the mapping `_keep` holds alive (ExternalBytes: Send + Sync).
unsafe impl Send for Backing {}

impl fmt::Debug for Backing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Backing::Heap(v) => write!(f, "Heap({} bytes)", v.len()),
            Backing::External { len, _keep, .. } => write!(f, "External({len} bytes of {_keep:?})"),
        }
    }
}

impl std::ops::Deref for Backing {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Backing::Heap(v) => v,
            // SAFETY: in bounds of the live mapping (checked by `Memory::map_external`).
            Backing::External { ptr, len, .. } => unsafe { std::slice::from_raw_parts(*ptr, *len) },
        }
    }
}

impl std::ops::DerefMut for Backing {
    fn deref_mut(&mut self) -> &mut [u8] {
        match self {
            Backing::Heap(v) => v,
            // SAFETY: `ptr..ptr + len` lies in the live mapping `_keep` holds (checked by
            // `Memory::map_external`); `&mut self` makes this the only view through this machine.
            Backing::External { ptr, len, .. } => unsafe {
                std::slice::from_raw_parts_mut(*ptr, *len)
            },
        }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        if let Backing::Heap(v) = &mut self.data {
            crate::device::buffer_pool::give(std::mem::take(v));
        }
    }
}

impl Region {
    pub(super) fn end(&self) -> u64 {
        self.base + self.data.len() as u64
    }
}

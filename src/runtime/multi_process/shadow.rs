//! A rank on another host, as this process holds it during a run (docs/design.md §2.7): its
//! device segment's *shadow* — private memory with the very layout of the remote segment
//! (`segment::Layout`), so that the machine maps it exactly as it maps a peer's shared segment.
//!
//! * **Data.** The DMA engines write into the shadow's regions; the machine records every
//!   written range ([`crate::device::peers::WriteLog`]). Nothing reads them back: the remote
//!   rank's bytes are its own, and a program that read another host's HBM would read zeros
//!   here, so such a program fails its check instead of passing by accident.
//! * **Semaphores.** A write into one of the shadow's EVT_SEM blocks ([`RemoteSem`]) hands the
//!   recorded ranges and then the semaphore change to the network proxy, in that order: the
//!   proxy sends them on one ordered channel (`proxy`), and the remote process copies the data
//!   into the real segment before it applies the change — data then signal, as on the device.
//!   The proxy sends large written ranges from the shadow in place; a run starts only once no
//!   send of the last one still reads them ([`Shadow::lent`]).
//! * **State.** The shadow's header page holds what the remote rank last told this process
//!   about itself (running, done, failed and why), written by the proxy's receiver; the run
//!   reads it as it reads a local peer's header.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::device::peers::WriteLog;
use crate::device::sema::{ExternalBytes, SemNotify, SemOp};
use crate::error::{Error, Result};

/// Private, zero-filled memory of one remote segment's size (module doc).
pub struct Shadow {
    ptr: *mut u8,
    len: usize,
    /// The remote segment's name (messages name it by [`seg_id`]).
    name: String,
    /// Ranges written since the last signal, as `(offset, bytes)`.
    written: Mutex<Vec<(usize, usize)>>,
    /// Sends in flight that read this shadow in place (`proxy`'s `Lent`).
    lent: AtomicUsize,
}

// SAFETY: the mapping is owned by the value and unmapped only in Drop; concurrent access goes
// through atomics (header, blocks) or is ordered by the run (data, written by one executor).
unsafe impl Send for Shadow {}
// SAFETY: `&Shadow` only reaches the mapping through atomics (header, blocks) or data ranges
// the run orders between one writer and its readers; `written` and `lent` are themselves Sync.
unsafe impl Sync for Shadow {}

impl std::fmt::Debug for Shadow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Shadow({:?}, {} bytes)", self.name, self.len)
    }
}

impl Shadow {
    /// The shadow of remote segment `name` of `len` bytes.
    pub fn new(name: &str, len: usize) -> Result<Shadow> {
        let len = len.max(4096).next_multiple_of(4096);
        // SAFETY: an anonymous private mapping; the result is checked.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(Error::resource(format!(
                "mapping a {len}-byte shadow of {name:?}: {}",
                std::io::Error::last_os_error()
            )));
        }
        Ok(Shadow {
            ptr: ptr.cast(),
            len,
            name: name.to_string(),
            written: Mutex::new(Vec::new()),
            lent: AtomicUsize::new(0),
        })
    }

    /// The remote segment's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A send that reads this shadow in place was queued.
    pub fn lend(&self) {
        self.lent.fetch_add(1, SeqCst);
    }
    /// A send that read this shadow in place completed, or was given up.
    pub fn give_back(&self) {
        self.lent.fetch_sub(1, SeqCst);
    }
    /// Sends in flight that read this shadow in place: the executor must not write into it
    /// until none is left.
    pub fn lent(&self) -> usize {
        self.lent.load(SeqCst)
    }
    /// The ranges written since the last call, merged where they touch, in offset order.
    pub fn take_written(&self) -> Vec<(usize, usize)> {
        let mut w = std::mem::take(&mut *self.written.lock());
        w.sort_unstable();
        let mut out: Vec<(usize, usize)> = Vec::with_capacity(w.len());
        for (off, n) in w {
            match out.last_mut() {
                Some((o, l)) if off <= *o + *l => *l = (*l).max(off + n - *o),
                _ => out.push((off, n)),
            }
        }
        out
    }
}

impl Drop for Shadow {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

// SAFETY: a live private mapping of `len` bytes, page aligned, until dropped.
unsafe impl ExternalBytes for Shadow {
    fn base_ptr(&self) -> *mut u8 {
        self.ptr
    }
    fn len(&self) -> usize {
        self.len
    }
}

impl WriteLog for Shadow {
    fn wrote(&self, off: usize, len: usize) {
        if len > 0 {
            self.written.lock().push((off, len));
        }
    }
}

/// The stable id of a segment on the wire: FNV-1a of its name (every process names a segment
/// the same; the names are unique within a job).
pub fn seg_id(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Where a shadow's signals go: the proxy's link to the remote rank's process.
pub trait Signal: Send + Sync + std::fmt::Debug {
    /// Send the `written` ranges of `shadow`, then semaphore `idx` of the EVT_SEM block at
    /// byte `block` of the remote segment changed by `op`.
    fn signal(
        &self,
        shadow: &Arc<Shadow>,
        written: Vec<(usize, usize)>,
        block: usize,
        idx: u8,
        op: SemOp,
    );
    /// This rank's state (`segment::RankState` as u32) in run `run` changed, with `why` for a
    /// failure: the remote process writes it into its shadow of this rank.
    fn state(&self, run: u64, state: u32, why: &str);
    /// Why the remote rank's process counts as lost (silent past the proxy's limit, module
    /// doc of `proxy`), naming its host; `None` while it is alive or has left.
    fn lost(&self) -> Option<String>;
    /// Whether the remote rank's process said goodbye (`nrt_close`): it sends nothing more.
    fn left(&self) -> bool;
    /// Whether its goodbye said it had lost a peer first (the network, or a stopped process).
    fn left_after_loss(&self) -> bool {
        false
    }
}

/// The [`SemNotify`] of one EVT_SEM block of a shadow (module doc, "Semaphores").
#[derive(Debug)]
pub struct RemoteSem {
    /// The shadow.
    pub shadow: Arc<Shadow>,
    /// The block's offset in the segment.
    pub block: usize,
    /// The link to the remote process.
    pub link: Arc<dyn Signal>,
}

impl SemNotify for RemoteSem {
    fn changed(&self, idx: u8, op: SemOp) {
        let written = self.shadow.take_written();
        self.link.signal(&self.shadow, written, self.block, idx, op);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_ranges_merge_where_they_touch() {
        let s = Shadow::new("/t", 1 << 20).unwrap();
        for (o, n) in [(100, 10), (0, 50), (50, 20), (200, 1), (105, 2), (0, 0)] {
            s.wrote(o, n);
        }
        assert_eq!(s.take_written(), vec![(0, 70), (100, 10), (200, 1)]);
        assert!(s.take_written().is_empty());
    }

    #[test]
    fn segment_ids_are_fnv1a_of_the_name() {
        // FNV-1a 64 of "a" (the published test vector: 0xaf63dc4c8601ec8c).
        assert_eq!(seg_id("a"), 0xaf63_dc4c_8601_ec8c);
        assert_ne!(seg_id("/opennrt-x-1-d0-1"), seg_id("/opennrt-x-1-d1-1"));
    }
}

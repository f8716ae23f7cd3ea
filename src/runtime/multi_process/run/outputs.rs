//! Outputs in place: a rank's output tensor *is* its output buffer on the shared device, so the
//! DMA engines of every rank write the result straight into it and nothing is copied out of
//! the segment (`runtime::multi_process::run`, "Outputs in place").
//!
//! In a job, a device tensor's storage is a named shared-memory object of its own
//! (`runtime::tensor`, "Shared device memory in a job"). A rank whose output is such a tensor
//! publishes where it is with its segment ([`SegmentAt::output`], through the root or the go
//! board); every rank's machine then maps that rank's output buffer from the tensor's object
//! instead of from the rank's segment ([`bound_outputs`] says which, [`object`] maps them).
//!
//! **When.** A rank's output is published ([`own_output`]) when its data is one device tensor
//! in shared memory that is not also its input (an out-of-place collective: every write of the
//! program into the output buffer is the result, as `runtime::resident` binds it), covers the
//! output buffer and starts 8-byte aligned. Every rank then decides from the same go answer
//! ([`bound_outputs`]) whether each rank's published output is used: not when the ranks span
//! hosts (a remote rank writes through its shadow of the segment, whose bytes the proxy sends
//! into the segment), and not for two outputs that share a byte (one machine maps every rank's
//! output and borrows each region on its own). A published output that is not used is copied
//! out of the segment as before.
//!
//! **Lifetime.** A peer opens a tensor's object by name when it builds its machine, which is
//! before the run starts, while the tensor is alive (the collective holds it until every rank
//! has finished). The machine kept for a repeat keeps the mapping; the name goes when the
//! owner frees the tensor, the pages when the last mapping goes: the next machine built
//! without that tensor, or `nrt_close`.

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use once_cell::sync::Lazy;
use parking_lot::Mutex;

use crate::error::Result;
use crate::lower::program::Buf;
use crate::runtime::collective::{Arrival, Lowered};
use crate::runtime::machine::byte_bases;
use crate::runtime::multi_process::shm::Segment;
use crate::runtime::multi_process::wire::{SegmentAt, TensorAt};

/// Tensor objects mapped by this process, by name: weak, so a mapping lives only as long as a
/// machine (or the owning tensor) holds it.
static OBJECTS: Lazy<Mutex<HashMap<String, Weak<Segment>>>> = Lazy::new(Mutex::default);

/// Rank `a.req.rank`'s output tensor as it publishes it, when its result can go there in
/// place (module doc, "When"); the object is registered so this process's own machine maps
/// the very mapping the tensor uses.
pub fn own_output(a: &Arrival, l: &Lowered) -> Option<TensorAt> {
    let t = a.io.device_tensor(Buf::Output)?;
    let shared = t.shared_object()?;
    let out = l.map.buffers().output;
    let (_, at) = byte_bases(&l.program, a.req.rank).ok()?;
    let fits = out > 0 && at == 0 && t.size() >= out && t.va().addr() % 8 == 0;
    if !fits {
        return None;
    }
    let name = shared.object.name().to_string();
    let mut objects = OBJECTS.lock();
    // A repeat finds its tensor registered already: no sweep, no insert on that path.
    if objects.get(&name).is_none_or(|w| w.strong_count() == 0) {
        objects.retain(|_, w| w.strong_count() > 0);
        objects.insert(name.clone(), Arc::downgrade(&shared.object));
    }
    Some(TensorAt {
        name,
        len: shared.object.len() as u64,
        offset: shared.offset,
    })
}

/// Per rank, the output tensor its output buffer is mapped from this run (module doc,
/// "When"): every rank computes the same from the same go answer `names`; `out` is the output
/// buffer's bytes.
pub fn bound_outputs(names: &[SegmentAt], out: u64) -> Vec<Option<TensorAt>> {
    if super::spans_hosts(names) {
        return vec![None; names.len()];
    }
    let mut picks: Vec<Option<TensorAt>> = names.iter().map(|n| n.output.clone()).collect();
    let overlap = |a: &TensorAt, b: &TensorAt| {
        a.name == b.name && a.offset < b.offset + out && b.offset < a.offset + out
    };
    let mut clash = vec![false; picks.len()];
    for (i, a) in picks.iter().enumerate() {
        for (j, b) in picks.iter().enumerate().skip(i + 1) {
            if let (Some(a), Some(b)) = (a, b) {
                if overlap(a, b) {
                    clash[i] = true;
                    clash[j] = true;
                }
            }
        }
    }
    for (p, c) in picks.iter_mut().zip(clash) {
        if c {
            *p = None;
        }
    }
    picks
}

/// The mapping of tensor object `at`: this process's own (registered by [`own_output`]) or one
/// mapped before and still held, else the object opened by name.
pub fn object(at: &TensorAt) -> Result<Arc<Segment>> {
    if let Some(s) = OBJECTS.lock().get(&at.name).and_then(Weak::upgrade) {
        return Ok(s);
    }
    let s = Arc::new(Segment::open(&at.name, at.len as usize)?);
    let mut objects = OBJECTS.lock();
    objects.retain(|_, w| w.strong_count() > 0);
    objects.insert(at.name.clone(), Arc::downgrade(&s));
    Ok(s)
}

/// Forget every mapping (`nrt_close`; machines holding one keep it until they go).
pub fn reset() {
    OBJECTS.lock().clear();
}

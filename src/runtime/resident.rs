//! A resident device: the simulated machine of a prepared collective, kept loaded between runs
//! (docs/design.md §2.10; docs/contract/lowering.md §8.4: the exec prings are "set once per
//! communicator ... switched, not rebuilt", the program is DMA'd onto the TOP_SPs once and every
//! execution is a `host_trigger` doorbell).
//!
//! [`Resident::build`] loads a lowered collective once: every region the address map defines
//! (constant pages, scratch, SPAD images, rings) is mapped and written, the firmware dispatch is
//! checked, and every TOP_SP's queue pair and sequencer is kept as it stands before its first
//! step ([`TopspAgent`]). [`Resident::run`] then does what the hardware does per execution:
//!
//! 1. **re-arm**: zero the EVT_SEM blocks the last run changed, write again the first lap of a
//!    ring whose stream is longer than the ring (its feed overwrote those slots), start every
//!    sequencer at its first cc_op entry and every queue at head = tail = 0;
//! 2. **bind the tensors**: a rank's input and output buffers *are* its tensors' bytes
//!    ([`Memory::map_external`] over the tensor storage; docs/design.md §2.7), so the DMA engines read
//!    the inputs and write the results in place, with no staging copy — see "binding" below;
//! 3. **ring the host trigger** (TRIGGER, semaphore 0, on every TOP_SP) and run the machine;
//! 4. **unbind**: the tensors' regions are unmapped again, so the machine never holds a user's
//!    memory between runs (a freed tensor is freed).
//!
//! Only the emitted bytes reach a result, exactly as on a freshly built machine: the
//! sequencers walk the same SPAD tables, the engines the same rings.
//!
//! **Binding.** A rank's buffer is bound to a tensor when the rank's data is one tensor covering
//! the buffer (a single-tensor list; in place, the tensor is the whole storage), whose first byte
//! is 8-byte aligned, that overlaps no other bound tensor of the run, and that the program writes
//! only where the collective's result goes: an out-of-place input is bound only if no transfer
//! writes into it (the program may not clobber a caller's input), an in-place storage only if
//! every write lands in the rank's result range (an in-place reduce-scatter leaves the other
//! blocks as they were). Any other buffer is *staged*: the machine's own region, written from the
//! rank's data before the run and copied out after it, as before.
//!
//! **Failure.** A run that fails (a fault, a hang, a timeout) leaves state the next run must not
//! inherit: the caller drops the resident ([`Resident::run`] consumes nothing, but the
//! collective layer never gives a failed one back to its pool), and the next run of the same
//! collective loads a fresh machine.

use std::sync::Arc;

use crate::device::executor::{Machine, RunReport};
use crate::device::memory::Memory;
use crate::device::sema::ExternalBytes;
use crate::error::{Error, Result};
use crate::isa::memmap::align_buf;
use crate::lower::addrmap::AddressMap;
use crate::lower::emit::EmittedProgram;
use crate::lower::program::{Buf, Program};
use crate::runtime::collective::RankIo;
use crate::runtime::machine::{buffer_regions, byte_bases, load_program, ring_reposts, TopspAgent};
use crate::runtime::tensor::Tensor;

/// A tensor's bytes as external memory of the simulated device: the region's backing holds the
/// tensor (and so its storage) alive while it is mapped.
#[derive(Debug)]
struct TensorBytes(Tensor);

// SAFETY: `va()` points to `size()` bytes of the tensor's storage, which the held tensor keeps
// alive; the resident binds only 8-aligned tensors (`bindable`). Access during a run follows the
// async API's contract: the caller does not touch a tensor while a collective using it is in
// flight (docs/contract/abi.md §3.6), so the machine is the only writer.
unsafe impl ExternalBytes for TensorBytes {
    fn base_ptr(&self) -> *mut u8 {
        self.0.va()
    }
    fn len(&self) -> usize {
        self.0.size() as usize
    }
}

/// One of a rank's data buffers that a tensor may stand in for.
#[derive(Debug)]
struct IoBuffer {
    rank: u32,
    buf: Buf,
    chip: u8,
    base: u64,
    /// The bytes the program addresses.
    len: u64,
    /// May a tensor be bound here (the program writes it only where the result goes)?
    may_bind: bool,
    /// Is the machine's own (staging) region mapped here now?
    heap: bool,
}

/// A loaded collective whose machine persists between runs (module doc).
#[derive(Debug)]
pub struct Resident {
    /// The machine between runs: its memory (every region, SPAD and ring, without the bound
    /// tensors) and the engines' run context, with no TOP_SP added. Kept whole rather than
    /// rebuilt per run, so a run allocates none of what the last one grew (the DMA batch's
    /// lists, the region cache, the decode memo): with ranks as threads the machine runs on
    /// whichever rank arrives last, and memory freed by one run on one thread came back as
    /// fresh pages — page faults — on the next (issue 26). Boxed: a machine is a few KiB, and
    /// a resident moves in and out of its collective's pool by value on the run's stack (the
    /// stack of whichever rank thread runs it: deeper frames there are more fresh pages).
    machine: Option<Box<Machine>>,
    agents: Vec<TopspAgent>,
    reposts: Vec<(u8, u64, Vec<u8>)>,
    io: Vec<IoBuffer>,
    /// Per rank: byte offsets of its input and result in its buffers (in place: NCCL's layout).
    bases: Vec<(u64, u64)>,
    input_bytes: u64,
    output_bytes: u64,
    in_place: bool,
    runs: u64,
}

impl Resident {
    /// Load `emitted` (the lowering of `p` over `map`) into a new machine (module doc).
    pub fn build(p: &Program, emitted: &EmittedProgram, map: &AddressMap) -> Result<Resident> {
        // The I/O buffers stay unmapped until a run binds or stages them.
        let (mut m, agents) = load_program(p, emitted, map, None)?;
        let bufs = map.buffers();
        let world = map.ranks();
        let writes = written_ranges(p);
        let mut io = Vec::new();
        let mut bases = Vec::with_capacity(world as usize);
        for r in 0..world {
            let chip = map.chip_id(r)?;
            let (at, out_at) = byte_bases(p, r)?;
            bases.push((at, out_at));
            for (buf, n) in buffer_regions(&bufs) {
                if buf == Buf::Scratch || n == 0 {
                    continue;
                }
                let esz = p.request.elem_bytes().unwrap_or(1);
                let may_bind = match (bufs.in_place, buf) {
                    // In place: every write into the storage lands in the rank's result.
                    (true, _) => writes[r as usize].iter().all(|&(b, lo, hi)| {
                        b == Buf::Scratch
                            || (lo * esz >= out_at && hi * esz <= out_at + bufs.output)
                    }),
                    (false, Buf::Input) => {
                        writes[r as usize].iter().all(|&(b, _, _)| b != Buf::Input)
                    }
                    (false, _) => true,
                };
                io.push(IoBuffer {
                    rank: r,
                    buf,
                    chip,
                    base: map.buf_on_chip(r, buf, 0)?,
                    len: n,
                    may_bind,
                    heap: false,
                });
            }
        }
        let reposts = ring_reposts(map, emitted)?;
        m.clear_topsps();
        Ok(Resident {
            machine: Some(Box::new(m)),
            agents,
            reposts,
            io,
            bases,
            input_bytes: bufs.input,
            output_bytes: bufs.output,
            in_place: bufs.in_place,
            runs: 0,
        })
    }

    /// Bytes the machine holds between runs (its own regions: scratch, staging, SPADs, rings).
    pub fn held_bytes(&self) -> u64 {
        self.machine.as_ref().map_or(0, |m| m.mem.mapped_bytes())
    }

    /// Runs so far.
    pub fn runs(&self) -> u64 {
        self.runs
    }

    /// How many of the rank buffers the last run bound to tensors (tests, DEBUG logs).
    pub fn bound_last_run(&self) -> usize {
        self.io.iter().filter(|b| !b.heap).count()
    }

    /// Run once more with `ios[r]` as rank r's data (module doc: re-arm, bind, trigger, run,
    /// unbind). After an error the resident must be dropped.
    pub fn run(&mut self, ios: &[&dyn RankIo]) -> Result<RunReport> {
        if ios.len() != self.bases.len() {
            return Err(Error::invalid(format!(
                "resident device: {} ranks' data for {} ranks",
                ios.len(),
                self.bases.len()
            )));
        }
        let mut m = self
            .machine
            .take()
            .ok_or_else(|| Error::failure("resident device: used again after a failed run"))?;
        let mem = &mut m.mem;
        mem.clear_dirty_sems();
        for (chip, base, bytes) in &self.reposts {
            mem.write(*chip, *base, bytes)?;
        }
        let binding = self.choose_bindings(ios);
        for (k, t) in binding.iter().enumerate() {
            let b = &mut self.io[k];
            match t {
                Some(t) => {
                    if b.heap {
                        mem.unmap(b.chip, b.base)?;
                        b.heap = false;
                    }
                    let ext: Arc<dyn ExternalBytes> = Arc::new(TensorBytes((*t).clone()));
                    mem.map_external(b.chip, b.base, ext, 0, b.len)?;
                }
                None => {
                    if !b.heap {
                        mem.map_written(b.chip, b.base, align_buf(b.len), 0..0)?;
                        b.heap = true;
                    }
                }
            }
        }
        // Staged inputs: the rank's data into the machine's own region.
        for b in self.io.iter().filter(|b| b.heap && b.buf == Buf::Input) {
            let (at, _) = self.bases[b.rank as usize];
            let dst = mem.slice_mut(b.chip, b.base + at, self.input_bytes as usize)?;
            ios[b.rank as usize].input_into(dst)?;
        }
        for a in &self.agents {
            a.clone().attach(&mut m)?;
        }
        let ran = m.run();
        m.clear_topsps();
        let out = ran.and_then(|rep| {
            self.copy_out(&m.mem, ios)?;
            Ok(rep)
        });
        // Unbind: the tensors leave the machine whatever happened.
        for b in self.io.iter().filter(|b| !b.heap) {
            m.mem.unmap(b.chip, b.base)?;
        }
        if out.is_ok() {
            self.runs += 1;
            self.machine = Some(m);
        }
        out
    }

    /// The tensor each rank buffer is bound to this run (module doc: binding), `None` = staged.
    fn choose_bindings<'a>(&self, ios: &[&'a dyn RankIo]) -> Vec<Option<&'a Tensor>> {
        let mut picks: Vec<Option<&'a Tensor>> = self
            .io
            .iter()
            .map(|b| {
                let t = ios[b.rank as usize].device_tensor(b.buf)?;
                let fits = b.may_bind
                    && t.has_storage()
                    && t.size() >= b.len
                    && (t.va() as usize) % 8 == 0;
                fits.then_some(t)
            })
            .collect();
        // Two bound tensors must not share a byte: the machine borrows every region mutably.
        let mut spans: Vec<(usize, usize, usize)> = picks
            .iter()
            .enumerate()
            .filter_map(|(k, t)| t.map(|t| (t.va() as usize, self.io[k].len as usize, k)))
            .collect();
        spans.sort_unstable();
        let mut clash = Vec::new();
        for w in spans.windows(2) {
            if w[0].0 + w[0].1 > w[1].0 {
                clash.extend([w[0].2, w[1].2]);
            }
        }
        for k in clash {
            picks[k] = None;
        }
        picks
    }

    /// Staged results out of the machine's regions into the ranks' data.
    fn copy_out(&self, mem: &Memory, ios: &[&dyn RankIo]) -> Result<()> {
        for b in &self.io {
            let staged_output = match (self.in_place, b.buf) {
                (true, Buf::Input) | (false, Buf::Output) => b.heap,
                _ => false,
            };
            if staged_output {
                let (_, out_at) = self.bases[b.rank as usize];
                let src = mem.slice(b.chip, b.base + out_at, self.output_bytes as usize)?;
                ios[b.rank as usize].output(src)?;
            }
        }
        Ok(())
    }
}

/// Per rank, every element range `(buf, first, end)` some transfer of any rank writes into that
/// rank's memory (a transfer's destination may be another rank's buffer).
fn written_ranges(p: &Program) -> Vec<Vec<(Buf, u64, u64)>> {
    let mut out = vec![Vec::new(); p.ranks.len()];
    let steps = p
        .ranks
        .iter()
        .flat_map(|rp| &rp.entries)
        .flat_map(|e| &e.tapes)
        .flat_map(|t| &t.steps);
    for step in steps {
        for tr in &step.transfers {
            let d = tr.dst();
            if let Some(v) = out.get_mut(d.rank as usize) {
                v.push((d.buf, d.offset, d.offset + tr.len()));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;

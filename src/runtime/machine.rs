//! The software machine of one collective, every rank in this process: a lowered, emitted
//! program loaded into a [`Machine`] and run (docs/design.md §1–§2). The glue between `lower` (which
//! decides the bytes) and `device` (which only executes bytes); the runtime may import both,
//! the device never imports the lowering. A machine kept between runs is
//! [`crate::runtime::resident`]; one rank's part of a collective whose ranks live in several
//! processes is [`crate::runtime::multi_process::run`], which loads with the same pieces.
//!
//! [`execute`] builds a [`Machine`] with one chip per distinct rank chip, maps for every rank
//! each region the [`AddressMap`] defines — the input/output (one region when in place) and
//! scratch buffers, the constant page (word `v` at byte `4·v` holds `v`, the source of
//! semaphore increments), and per TOP_SP its program area (CTRL SPAD, SLOT SPAD, M2S and S2M
//! rings) — writes the inputs, the SPAD images and the descriptor streams (stream index `i` at
//! ring slot `i % len`), loads each [`Sequencer`] from the CTRL/SLOT SPAD bytes and the neff
//! values, raises TRIGGER (semaphore 0) on every TOP_SP (the host trigger, docs/contract/device.md §8.2),
//! runs the machine and reads every rank's output buffer.
//!
//! In place, input and output are one storage and the data sits where NCCL puts it (the
//! lowering composes for the same convention, `lower::verify::expect::in_place_bases`): an
//! all-gather's input is written at element `r·count` of rank r's storage, a reduce-scatter's
//! result is read from there; every other op uses offset 0.
//!
//! A stream longer than its ring (the emitter's lap scheme: stream index `i` in slot `i % len`
//! with the RING_ID of its lap) is loaded one lap at a time: the loader writes the first lap and
//! attaches the stream to the queue ([`crate::device::dma::Feed`]), whose producer writes each
//! later descriptor into its slot when a doorbell releases it — after the engine has read the
//! slot's previous occupant (docs/contract/device.md §3.2: at most `len` outstanding).

use crate::device::dma::{Queue, QueuePair};
use crate::device::executor::{Machine, RunReport};
use crate::device::sema::BlockId;
use crate::device::topsp::{SeqConfig, Sequencer};
use crate::error::{Error, Result};
use crate::isa::memmap::{align_buf, CONST_PAGE_BYTES, CONST_WORDS};
use crate::isa::udma::Direction;
use crate::lower::addrmap::{AddressMap, BufferSizes};
use crate::lower::emit::{EmittedProgram, TopspImage};
use crate::lower::program::{Buf, Program};
use crate::lower::verify::expect::in_place_bases;
use crate::ncfw::{FirmwareImage, Handler};

/// Execute `emitted` (the lowering of `p` over `map`) with `inputs[r]` as rank `r`'s input
/// bytes; returns every rank's output bytes.
pub fn execute(
    p: &Program,
    emitted: &EmittedProgram,
    map: &AddressMap,
    inputs: &[Vec<u8>],
) -> Result<Vec<Vec<u8>>> {
    execute_with_report(p, emitted, map, inputs).map(|(o, _)| o)
}

/// [`execute`], also returning what the machine did.
pub fn execute_with_report(
    p: &Program,
    emitted: &EmittedProgram,
    map: &AddressMap,
    inputs: &[Vec<u8>],
) -> Result<(Vec<Vec<u8>>, RunReport)> {
    let mut m = load(p, emitted, map, inputs)?;
    let report = m.run()?;
    Ok((read_outputs(&m, p, map)?, report))
}

/// Build the machine of [`execute`] up to the host trigger (every TOP_SP triggered, nothing
/// run yet): tests and tools can alter it before [`Machine::run`].
pub fn load(
    p: &Program,
    emitted: &EmittedProgram,
    map: &AddressMap,
    inputs: &[Vec<u8>],
) -> Result<Machine> {
    if inputs.len() != map.ranks() as usize {
        return Err(Error::invalid(format!(
            "device run: {} inputs for {} ranks",
            inputs.len(),
            map.ranks()
        )));
    }
    load_from(p, emitted, map, &|r, dst| {
        let input = &inputs[r as usize];
        if input.len() != dst.len() {
            return Err(Error::invalid(format!(
                "device run: rank {r} input has {} bytes, the program reads {}",
                input.len(),
                dst.len()
            )));
        }
        dst.copy_from_slice(input);
        Ok(())
    })
}

/// [`load`] with each rank's input written by `input(rank, dst)` straight into the rank's
/// device buffer (`dst` has the program's input bytes): no intermediate copy.
pub fn load_from(
    p: &Program,
    emitted: &EmittedProgram,
    map: &AddressMap,
    input: &dyn Fn(u32, &mut [u8]) -> Result<()>,
) -> Result<Machine> {
    let (mut m, agents) = load_program(p, emitted, map, Some(input))?;
    for a in agents {
        a.attach(&mut m)?;
    }
    Ok(m)
}

/// Writes rank r's input bytes into its input buffer (`input(r, dst)`).
pub type InputFill<'a> = dyn Fn(u32, &mut [u8]) -> Result<()> + 'a;

/// Everything [`load_from`] does but adding the TOP_SPs: the machine's memory holds every
/// region, SPAD image and first ring lap, no semaphore is raised, and the TOP_SPs come back
/// as [`TopspAgent`]s (a persistent machine keeps them to start each run from).
///
/// `input: None` leaves the ranks' input and output buffers unmapped (scratch is mapped): a
/// resident machine binds them to the tensors, or maps staging, at each run
/// (`runtime::resident`). Mapping and prefaulting them here only to drop them would fault in
/// every rank's I/O bytes once more: 4 GiB for 128 ranks at 16 MiB, which took 15 s of the
/// first run's 31 s on this 2-core VM (first-touch page faults run at 0.4–2 GB/s here).
pub fn load_program(
    p: &Program,
    emitted: &EmittedProgram,
    map: &AddressMap,
    input: Option<&InputFill<'_>>,
) -> Result<(Machine, Vec<TopspAgent>)> {
    let world = map.ranks();
    if p.ranks.len() != world as usize {
        return Err(Error::invalid(format!(
            "device run: {} rank programs for {world} ranks",
            p.ranks.len()
        )));
    }
    let bufs = map.buffers();
    let chips = (0..world)
        .map(|r| map.chip_id(r))
        .collect::<Result<Vec<_>>>()?;
    let (mut m, fw) = new_machine(map, chips.iter().copied().max().unwrap_or(0) + 1)?;
    for r in 0..world {
        let chip = chips[r as usize];
        let page = map.const_addr(r, 0)?;
        m.mem.map(chip, page, CONST_PAGE_BYTES)?;
        let words: Vec<u8> = (0..CONST_WORDS).flat_map(u32::to_le_bytes).collect();
        m.mem.write(chip, page, &words)?;
        let (at, _) = byte_bases(p, r)?;
        for (b, n) in buffer_regions(&bufs) {
            if n > 0 && (input.is_some() || b == Buf::Scratch) {
                let base = map.buf_on_chip(r, b, 0)?;
                // `input` below writes the input bytes: no need to zero them first.
                let written = match b {
                    Buf::Input => at..at + bufs.input,
                    _ => 0..0,
                };
                m.mem.map_written(chip, base, align_buf(n), written)?;
                m.mem.prefault(chip, base)?;
            }
        }
        if let Some(input) = input {
            let dst = m.mem.slice_mut(
                chip,
                map.buf_on_chip(r, Buf::Input, at)?,
                bufs.input as usize,
            )?;
            input(r, dst)?;
        }
    }
    let mut agents = Vec::new();
    for rank in &emitted.ranks {
        let chip = map.chip_id(rank.rank)?;
        for img in &rank.topsps {
            agents.push(load_topsp(&mut m, &fw, map, rank.rank, chip, img)?);
        }
    }
    Ok((m, agents))
}

/// The data buffers a rank maps and their bytes: input and output (one storage in place, sized
/// for the larger) and scratch when the program needs it.
pub fn buffer_regions(bufs: &BufferSizes) -> Vec<(Buf, u64)> {
    let mut sizes = vec![(Buf::Input, bufs.input.max(bufs.output))];
    if !bufs.in_place {
        sizes = vec![(Buf::Input, bufs.input), (Buf::Output, bufs.output)];
    }
    if bufs.scratch > 0 {
        sizes.push((Buf::Scratch, bufs.scratch));
    }
    sizes
}

/// Every rank's output: its output buffer, or in place where the NCCL convention puts it
/// (module doc).
pub fn read_outputs(m: &Machine, p: &Program, map: &AddressMap) -> Result<Vec<Vec<u8>>> {
    let mut outs = Vec::with_capacity(map.ranks() as usize);
    for_each_output(m, p, map, &mut |_, o| {
        outs.push(o.to_vec());
        Ok(())
    })?;
    Ok(outs)
}

/// Hand every rank's output, in rank order, to `f(rank, bytes)` straight from the device
/// buffer (the [`read_outputs`] bytes without copying them first).
pub fn for_each_output(
    m: &Machine,
    p: &Program,
    map: &AddressMap,
    f: &mut dyn FnMut(u32, &[u8]) -> Result<()>,
) -> Result<()> {
    let n = map.buffers().output as usize;
    for r in 0..map.ranks() {
        let (_, at) = byte_bases(p, r)?;
        let out = m
            .mem
            .slice(map.chip_id(r)?, map.buf_on_chip(r, Buf::Output, at)?, n)?;
        f(r, out)?;
    }
    Ok(())
}

/// Byte offsets of rank `r`'s input and result in its buffers: `(0, 0)` except in place
/// (`lower::verify::expect::in_place_bases`, NCCL's convention).
pub fn byte_bases(p: &Program, r: u32) -> Result<(u64, u64)> {
    let (i, o) = in_place_bases(&p.request, r);
    let esz = p
        .request
        .elem_bytes()
        .ok_or_else(|| Error::invalid("device run: the request's dtype has no element size"))?;
    Ok((i * esz, o * esz))
}

/// The sequencer configuration of a TOP_SP image: its neff values.
pub fn seq_config(img: &TopspImage) -> SeqConfig {
    let n = &img.neff;
    SeqConfig {
        topsp: img.topsp,
        trigger: n.trigger,
        trigger_next: n.trigger_next,
        complete: n.complete,
        complete_prev: n.complete_prev,
        complete_prev_target: n.complete_prev_target,
        op_num: n.op_num,
        leader: n.leader,
        completion_addrs: Vec::new(),
    }
}

/// NCFW dispatch (docs/contract/device.md §9.1): every cc_op entry's handler is looked up by
/// its `algo_type` in the dispatch table of OpenNRT's firmware image for the machine's arch —
/// the bytes the loaded carrier's `libncfw_get_image` hands out; an entry without a handler (the
/// image's default `Fault`) is refused at load, naming rank, TOP_SP, CTRL slot and algo_type.
/// The sequencer then walks the entry with the RING or MESH view the handler names.
pub fn check_dispatch(seq: &Sequencer, fw: &FirmwareImage, r: u32, topsp: u8) -> Result<()> {
    for (slot, algo_type) in seq.entry_algo_types() {
        if fw.handler_for_algo_type(algo_type) == Handler::Fault {
            return Err(Error::invalid(format!(
                "device run: rank {r} TOP_SP {topsp} CTRL slot {slot}: algo_type {algo_type} has \
                 no handler in the {:?} firmware image's dispatch table (ncfw image, \
                 docs/contract/device.md §9.1)",
                fw.arch
            ))
            .with_rank(r)
            .with_step(slot as u64)
            .with_field("algo_type")
            .with_actual(algo_type));
        }
    }
    Ok(())
}

/// Map and fill one TOP_SP's program area, build its queues and sequencer.
fn load_topsp(
    m: &mut Machine,
    fw: &FirmwareImage,
    map: &AddressMap,
    r: u32,
    chip: u8,
    img: &TopspImage,
) -> Result<TopspAgent> {
    let n = &img.neff;
    for (base, bytes) in [
        (n.ctrl_spad_base, &img.ctrl_spad),
        (n.slot_spad_base, &img.slot_spad),
    ] {
        m.mem.map(chip, base, (bytes.len() as u64).max(1))?;
        m.mem.write(chip, base, bytes)?;
    }
    for (base, len, stream) in [
        (n.m2s_ring_base, img.m2s_ring_len, &img.m2s),
        (n.s2m_ring_base, img.s2m_ring_len, &img.s2m),
    ] {
        let len = u64::from(len);
        m.mem.map(chip, base, len * 16)?;
        // The first lap now; a longer stream is written behind the engine as the doorbells
        // need it (`dma::Feed`), RING_IDs as the emitter stamped them.
        let first = stream.len().min(len as usize);
        let bytes: Vec<u8> = stream[..first].iter().flatten().copied().collect();
        m.mem.write(chip, base, &bytes)?;
    }
    topsp_agent(fw, map, r, chip, img)
}

/// One TOP_SP as loaded, before its first step: its queue pair (rings empty, a longer stream's
/// feed at its first lap) and its sequencer at the first cc_op entry. A persistent machine
/// (`runtime::resident`) keeps these and starts every run from a clone, as the hardware's
/// sequencer restarts at its table and its rings at their bases.
#[derive(Debug, Clone)]
pub struct TopspAgent {
    /// The rank it runs for.
    pub rank: u32,
    /// Its chip.
    pub chip: u8,
    /// Its device TOP_SP index.
    pub dev: u8,
    /// Its M2S and S2M queues.
    pub pair: QueuePair,
    /// Its sequencer.
    pub seq: Sequencer,
}

impl TopspAgent {
    /// Raise its TRIGGER (semaphore 0, the host trigger, docs/contract/device.md §8.2) in `m`'s memory and
    /// add it to `m`.
    pub fn attach(self, m: &mut Machine) -> Result<()> {
        let (chip, dev) = (self.chip, self.dev);
        m.mem
            .sem_block_mut(chip, BlockId::TopSp(dev))
            .ok_or_else(|| Error::invalid(format!("device run: no TOP_SP {dev} on chip {chip}")))?
            .add(0, 1);
        m.add_rank_topsp(self.rank, chip, dev, self.pair, self.seq);
        Ok(())
    }
}

/// The queues and sequencer of one TOP_SP whose program area is in memory already (SPADs and
/// the first lap of each ring written), its dispatch checked against the firmware image.
pub fn topsp_agent(
    fw: &FirmwareImage,
    map: &AddressMap,
    r: u32,
    chip: u8,
    img: &TopspImage,
) -> Result<TopspAgent> {
    let n = &img.neff;
    let mut queues = Vec::with_capacity(2);
    for (dir, base, len, stream) in [
        (Direction::M2S, n.m2s_ring_base, img.m2s_ring_len, &img.m2s),
        (Direction::S2M, n.s2m_ring_base, img.s2m_ring_len, &img.s2m),
    ] {
        let len = u64::from(len);
        let mut q = Queue::new(dir, base, len)?;
        if stream.len() as u64 > len {
            q = q.with_feed(stream.as_slice().into(), len);
        }
        queues.push(q);
    }
    let s2m = queues.pop().expect("two queues");
    let m2s = queues.pop().expect("two queues");
    let pair = QueuePair::new(img.topsp, m2s, s2m);
    let cfg = seq_config(img);
    let seq = Sequencer::load(&img.ctrl_spad, &img.slot_spad, cfg)?;
    check_dispatch(&seq, fw, r, img.topsp)?;
    let dev = map.device_topsp(r, img.topsp)?;
    Ok(TopspAgent {
        rank: r,
        chip,
        dev,
        pair,
        seq,
    })
}

/// Add the queues and sequencer of one TOP_SP whose program area is in `m`'s memory already
/// (SPADs and the first lap of each ring written), and raise its TRIGGER. Shared with
/// `runtime::multi_process::run`, whose program areas live in shared memory.
pub fn attach_topsp(
    m: &mut Machine,
    fw: &FirmwareImage,
    map: &AddressMap,
    r: u32,
    chip: u8,
    img: &TopspImage,
) -> Result<()> {
    topsp_agent(fw, map, r, chip, img)?.attach(m)
}

/// The first lap of every ring whose stream is longer than the ring, as `(chip, base, bytes)`:
/// the feed overwrites those slots during a run, so a persistent machine writes them again
/// before the next (a ring no longer than its ring length is never written by a run).
pub fn ring_reposts(map: &AddressMap, emitted: &EmittedProgram) -> Result<Vec<(u8, u64, Vec<u8>)>> {
    let mut out = Vec::new();
    for rank in &emitted.ranks {
        let chip = map.chip_id(rank.rank)?;
        for img in &rank.topsps {
            let n = &img.neff;
            for (base, len, stream) in [
                (n.m2s_ring_base, img.m2s_ring_len, &img.m2s),
                (n.s2m_ring_base, img.s2m_ring_len, &img.s2m),
            ] {
                let len = len as usize;
                if stream.len() > len {
                    out.push((
                        chip,
                        base,
                        stream[..len].iter().flatten().copied().collect(),
                    ));
                }
            }
        }
    }
    Ok(out)
}

/// A machine of `chips` chips for a program over `map`: the TOP_SPs' arch from the topology's
/// generation, the execution timeout read at `nrt_init`, and that arch's firmware image from
/// the carrier `nrt_init` loaded (`libncfw_get_image`; OpenNRT's own without one): its dispatch
/// table checks every TOP_SP ([`check_dispatch`]).
pub fn new_machine(map: &AddressMap, chips: u8) -> Result<(Machine, FirmwareImage)> {
    let mut m = Machine::new(chips);
    m.arch = crate::ncfw::Arch::from_id(map.gen().ncfw_arch_id()).unwrap_or(m.arch);
    m.timeout = crate::runtime::process::config()?.exec_timeout();
    let fw = crate::device::settings::firmware_image(m.arch)?;
    Ok((m, fw))
}

#[cfg(test)]
mod tests;

//! One row of `opennrt perf`: build the request(s) of an op for a size, lower and emit them,
//! run them on the software device `iters` times (only [`Machine::run`] is timed), and check
//! every element of the last run against `runtime::verifiable`. Each run also reports the bytes
//! its DMA engines wrote ([`Measured::moved`]), from which the row's memory-traffic ratio is
//! computed (`perf_cmd`).
//!
//! How each op is driven (choices where nccl-tests has no counterpart):
//! * **all_to_all_v** (Choice): the deterministic uneven table of [`cases::a2av_meta`] with
//!   packed receive windows (`send_counts[r][p]` spread over `0..=count`, one zero per rank);
//!   the buffers hold `count · N` elements, and the bandwidth counts the bytes a rank actually
//!   sends (mean over ranks), not the buffer.
//! * **permute** (Choice): the pairs `r → (r + 1) mod N`; **permute_implicit** and
//!   **permute_reduce_implicit** need no pairs (ring successor).
//! * **send_recv** (Choice): the pairs `2k → 2k + 1`, each its own 2-rank send/recv collective
//!   (the op is point to point), lowered on the topology of the whole world; an odd last rank
//!   idles. The simulator runs the pairs one after another, as one machine executing all of
//!   them would, so the row's time is the sum of the pairs' run times.
//! * **barrier**: no data; the row is its time alone.
//!
//! [`Machine::run`]: opennrt::device::executor::Machine::run

use std::time::Instant;

use opennrt::isa::enums::Dtype;
use opennrt::lower::addrmap::AddressMap;
use opennrt::lower::cases;
use opennrt::lower::emit::{emit, EmittedProgram};
use opennrt::lower::pipeline::{address_map, lower, LowerConfig};
use opennrt::lower::program::{Algorithm, Program};
use opennrt::lower::request::{CollectiveOp, CollectiveRequest, ReduceOp};
use opennrt::runtime::verifiable;
use opennrt::Result;

/// What every row shares.
#[derive(Debug, Clone)]
pub struct Setup {
    /// The op.
    pub op: CollectiveOp,
    /// World size.
    pub n: u32,
    /// Element type.
    pub dtype: Dtype,
    /// Reduce op (reducing ops only).
    pub redop: ReduceOp,
    /// Forced algorithm.
    pub alg: Option<Algorithm>,
    /// Timed runs per row (the median is reported).
    pub iters: u32,
    /// Check every element.
    pub check: bool,
}

/// Per-rank blocks in the buffer nccl-tests reports as the size (all-gather's output,
/// reduce-scatter's input, the all-to-all buffers; the permute-reduce input `[src0 | src1]`).
pub fn blocks(op: CollectiveOp, n: u32) -> u64 {
    match op {
        CollectiveOp::AllGather
        | CollectiveOp::ReduceScatter
        | CollectiveOp::AllToAll
        | CollectiveOp::AllToAllV => u64::from(n),
        CollectiveOp::PermuteReduceImplicit => 2,
        _ => 1,
    }
}

/// nccl-tests' bus-bandwidth factor: all-reduce `2(n-1)/n`; all-gather, reduce-scatter and
/// all-to-all(-v) `(n-1)/n`; point-to-point ops 1 (every byte crosses one link); barrier 0.
pub fn busbw_factor(op: CollectiveOp, n: u32) -> f64 {
    let n = f64::from(n);
    match op {
        CollectiveOp::AllReduce => 2.0 * (n - 1.0) / n,
        CollectiveOp::AllGather
        | CollectiveOp::ReduceScatter
        | CollectiveOp::AllToAll
        | CollectiveOp::AllToAllV => (n - 1.0) / n,
        CollectiveOp::Barrier => 0.0,
        _ => 1.0,
    }
}

/// One lowered, emitted collective and its data.
struct Prepared {
    req: CollectiveRequest,
    prog: Program,
    em: EmittedProgram,
    map: AddressMap,
}

/// The requests of one row: one collective, or one per send/recv pair.
fn requests(s: &Setup, count: u64, in_place: bool) -> Result<Vec<CollectiveRequest>> {
    let make = |group: Vec<u32>| {
        let mut r = CollectiveRequest::new(
            s.op,
            s.dtype,
            s.op.is_reducing().then_some(s.redop),
            count,
            group,
            0,
        );
        r.in_place = in_place;
        r
    };
    Ok(match s.op {
        CollectiveOp::Send | CollectiveOp::Recv => {
            (0..s.n / 2).map(|k| make(vec![2 * k, 2 * k + 1])).collect()
        }
        CollectiveOp::Permute => {
            let mut r = make((0..s.n).collect());
            r.pairs = (0..s.n).map(|q| (q, (q + 1) % s.n)).collect();
            vec![r]
        }
        CollectiveOp::AllToAllV => {
            let mut r = make((0..s.n).collect());
            r.a2av = Some(cases::a2av_meta(s.n, count, cases::A2avRecv::Packed)?);
            vec![r]
        }
        _ => vec![make((0..s.n).collect())],
    })
}

fn prepare(s: &Setup, req: CollectiveRequest) -> Result<Prepared> {
    let mut cfg = LowerConfig::from_lookup(opennrt::runtime::config::env_lookup, s.n)?;
    if s.alg.is_some() {
        cfg.select.forced = s.alg;
    }
    let prog = lower(&req, &cfg)?;
    let map = address_map(&prog, &cfg.topology)?;
    // The emitter's default rings (a 64 Ki-descriptor vring page, docs/contract/device.md §4); a longer
    // stream runs lap by lap through the queue feed.
    let em = emit(&prog, &map)?;
    Ok(Prepared { req, prog, em, map })
}

/// The measured half of a row (out of place or in place).
#[derive(Debug, Clone, Copy)]
pub struct Measured {
    /// Median run time in seconds.
    pub time: f64,
    /// Bytes per rank the bandwidth is computed from.
    pub bytes: f64,
    /// Wrong elements (`None`: not checked).
    pub wrong: Option<u64>,
    /// Bytes the DMA engines wrote in one run (`RunReport::bytes` of [`Machine::run`], summed
    /// over the row's machines: data and semaphore words); `None` when not known (`--procs`).
    ///
    /// [`Machine::run`]: opennrt::device::executor::Machine::run
    pub moved: Option<u64>,
}

/// The first wrong element of a row, for the error stream.
pub type FirstWrong = Option<String>;

/// Run one half-row. `inputs` caches the verifiable inputs of each request across the two
/// halves (they do not depend on the placement).
pub fn measure(
    s: &Setup,
    count: u64,
    in_place: bool,
    inputs: &mut Vec<Vec<Vec<u8>>>,
) -> Result<(Measured, FirstWrong)> {
    let preps = requests(s, count, in_place)?
        .into_iter()
        .map(|r| prepare(s, r))
        .collect::<Result<Vec<_>>>()?;
    if inputs.len() != preps.len() {
        *inputs = preps
            .iter()
            .map(|p| verifiable::inputs(&p.req))
            .collect::<Result<_>>()?;
    }
    let mut times = Vec::with_capacity(s.iters as usize);
    let mut outs = Vec::new();
    let mut moved = 0;
    for it in 0..s.iters {
        let mut t = 0.0;
        // The same program every iteration: the bytes moved are those of any one of them.
        moved = 0;
        for (p, ins) in preps.iter().zip(inputs.iter()) {
            let mut m = verifiable::load_staged(&p.prog, &p.em, &p.map, ins)?;
            let start = Instant::now();
            let rep = m.run()?;
            t += start.elapsed().as_secs_f64();
            moved += rep.bytes;
            if it + 1 == s.iters && s.check {
                outs.push(verifiable::read_results(&m, &p.prog, &p.map)?);
            }
        }
        times.push(t);
    }
    times.sort_by(f64::total_cmp);
    let (mut wrong, mut first) = (None, None);
    if s.check {
        let mut w = 0;
        for ((p, ins), got) in preps.iter().zip(inputs.iter()).zip(&outs) {
            let c = verifiable::check(&p.req, ins, got)?;
            w += c.wrong;
            if first.is_none() {
                first = c.first.map(|m| {
                    format!(
                        "{}{}",
                        if preps.len() > 1 {
                            format!("pair {:?}: ", p.req.group)
                        } else {
                            String::new()
                        },
                        m
                    )
                });
            }
        }
        wrong = Some(w);
    }
    let esz = s.dtype.size_bytes().unwrap_or(1) as f64;
    let bytes = match (&preps[0].req.a2av, s.op) {
        (Some(m), CollectiveOp::AllToAllV) => match &m.table {
            Some(t) => {
                let sent: u64 = t.send_counts.iter().flatten().sum();
                sent as f64 / f64::from(s.n) * esz
            }
            None => 0.0,
        },
        (_, CollectiveOp::Barrier) => 0.0,
        _ => (count * blocks(s.op, s.n)) as f64 * esz,
    };
    Ok((
        Measured {
            time: times[times.len() / 2],
            bytes,
            wrong,
            moved: Some(moved),
        },
        first,
    ))
}

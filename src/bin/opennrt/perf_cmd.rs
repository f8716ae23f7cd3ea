//! `opennrt perf`: the main job — run a collective on N simulated ranks in one
//! process through the lowering and the software device, nccl-tests style.
//!
//! Every size is one row with an out-of-place and an in-place half (nccl-tests prints both on
//! one row); each half loads the emitted program into a fresh simulated machine (not timed),
//! runs it (timed: the device executing the descriptors, [`perf_run::measure`]) and checks
//! every element against `runtime::verifiable` (data whose exact result every dtype
//! represents), so `#wrong` must be 0. Sizes are bytes of the per-rank buffer nccl-tests
//! reports (all-gather's output, reduce-scatter's input, the all-to-all buffers) and take
//! K/M/G suffixes; busbw uses nccl-tests' factors ([`perf_run::busbw_factor`]). The run opens
//! with this machine's single-thread memcpy bandwidth, measured then, and closes with
//! nccl-tests' `# Avg bus bandwidth` and the ratio of the largest size's busbw to memcpy.
//!
//! **Memory-traffic ratio.** After each row a comment line gives, per half, *bytes moved ÷
//! (time × memcpy bandwidth)*: the bytes the DMA engines wrote in one run (`RunReport::bytes`
//! of `Machine::run`, summed over the row's machines — data and semaphore words of every rank)
//! over what one thread's `memcpy` copies in the same time. busbw counts the bytes of the
//! collective's definition; this counts what the simulated device really wrote, so it says how
//! close the simulator runs to the host's memory speed (1.0: as fast as a single-thread memcpy
//! of the same bytes; above 1 the cores together beat one memcpy; well below 1 at small sizes,
//! where per-packet control, not memory, is the cost). The rows themselves keep the
//! nccl-tests columns unchanged.
//!
//! Integer reductions are refused before anything runs: the CCE has no integer datapath
//! (docs/contract/device.md §11.1; the compiler converts integer reductions to FP32), and the emitter
//! would refuse the reduce descriptors anyway. With `--check 0` nothing is compared (`#wrong`
//! prints `N/A`), which keeps large sizes cheap; the exit status is then that of the runs.
//!
//! `--procs P` hands the whole run to [`crate::perf_procs`]: the same sizes through the C API,
//! in one process and in P processes, compared row by row.

use opennrt::isa::enums::Dtype;
use opennrt::lower::cases;
use opennrt::lower::program::Algorithm;
use opennrt::lower::request::{CollectiveOp, ReduceOp};

use crate::args::{self, fail, Opt, Spec};
use crate::perf_run::{self, Measured, Setup};

/// The options of `opennrt perf`: the parser and `--help` both read this table. `-b/-e/-f`,
/// `-n` and `-c` are nccl-tests' spellings, accepted because its users type them.
pub(crate) const SPEC: Spec = Spec {
    cmd: "perf",
    usage: "usage: opennrt perf --op <op> --ranks N [options]",
    opts: &[
        Opt::val(
            "--op",
            "OP",
            args::OP_HELP,
        ),
        Opt::val(
            "--ranks",
            "N",
            "simulated ranks (global device ids 0..N; topology from OPENNRT_TOPOLOGY)",
        ),
        Opt::val(
            "--dtype",
            "T",
            "fp32 (default), bf16, fp16, fp8_e3m4, fp8_e4m3, fp8_e5m2, int8, uint8, int16,
             uint16, int32, uint32, int64, uint64 (reductions need a float dtype)",
        ),
        Opt::val("--redop", "R", "add (default), max, min (reducing ops)"),
        Opt::val(
            "--minbytes",
            "A",
            "smallest size in bytes (default 8); sizes take K/M/G suffixes",
        )
        .alias(&["-b"]),
        Opt::val("--maxbytes", "B", "largest size (default 1M)").alias(&["-e"]),
        Opt::val(
            "--stepfactor",
            "F",
            "multiply the size by F from row to row (default 4, at least 2)",
        )
        .alias(&["-f"]),
        Opt::val(
            "--iters",
            "K",
            "timed runs per size, the median is reported (default 3)",
        )
        .alias(&["-n"]),
        Opt::val(
            "--alg",
            "A",
            "force an algorithm: ring, hier, mesh, kangaring, single_cycle_ring, intra_rdh,
             inter_rdh (as OPENNRT_CC_ALGO)",
        ),
        Opt::val(
            "--check",
            "0|1",
            "check every element (default 1); exit 1 on any wrong element",
        )
        .alias(&["-c"]),
        Opt::val(
            "--plot",
            "FILE",
            "also write busbw against size as an SVG chart, one curve per half (out of place,
             in place; not with --procs)",
        ),
        Opt::val(
            "--procs",
            "P",
            "run through the C API instead, twice: all N ranks in one process, then in P
             processes of N/P ranks (P divides N; all_reduce, all_gather, reduce_scatter;
             out-of-place only) — one row per size with both and their busbw ratio",
        ),
        Opt::val(
            "--deadline",
            "S",
            "with --procs: kill the processes of a mode still running after S seconds
             (default 600)",
        ),
    ],
    notes: "Each row is followed by `#   moved/(time x memcpy): ...`: per half, the bytes the DMA engines
wrote in one run (data and semaphore words of all ranks, the RunReport of Machine::run) divided
by (the median time x the single-thread memcpy bandwidth printed above); 1.0 = the device wrote
bytes as fast as one thread's memcpy copies them.",
};

/// A size with an optional K/M/G suffix.
fn size(s: &str) -> u64 {
    let t = s.trim();
    let (num, mul) = match t.chars().last() {
        Some('K' | 'k') => (&t[..t.len() - 1], 1u64 << 10),
        Some('M' | 'm') => (&t[..t.len() - 1], 1 << 20),
        Some('G' | 'g') => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mul))
        .unwrap_or_else(|| fail("perf", &format!("bad size {s:?}")))
}

/// Single-thread memcpy bandwidth of this machine (bytes/s), measured now.
pub(crate) fn memcpy_bw() -> f64 {
    let n = 64 << 20;
    let src = vec![1u8; n];
    let mut dst = vec![0u8; n];
    dst.copy_from_slice(&src);
    let t = std::time::Instant::now();
    for _ in 0..4 {
        dst.copy_from_slice(std::hint::black_box(&src));
    }
    std::hint::black_box(&dst);
    4.0 * n as f64 / t.elapsed().as_secs_f64()
}

pub(crate) struct Opts {
    pub(crate) setup: Setup,
    minb: u64,
    maxb: u64,
    step: u64,
    /// `--procs P`: the C API comparison of [`crate::perf_procs`].
    procs: Option<u32>,
    /// `--plot FILE`.
    plot: Option<String>,
    /// `--deadline S` of `--procs`.
    deadline: std::time::Duration,
}

fn parse(a: &[String]) -> Opts {
    let c = "perf";
    let (mut op, mut n, mut dtype, mut redop) = (None, None, Dtype::Fp32, ReduceOp::Add);
    let (mut minb, mut maxb, mut step, mut iters, mut alg, mut check) =
        (8u64, 1u64 << 20, 4u64, 3u32, None, true);
    let (mut procs, mut deadline, mut plot) = (None, 600u64, None);
    for (k, v) in SPEC.parse(a) {
        match k {
            "--op" => op = Some(args::op(c, &v)),
            "--ranks" => n = Some(args::num::<u32>(c, k, &v)),
            "--dtype" => dtype = args::dtype(c, &v),
            "--redop" => redop = args::redop(c, &v),
            "--minbytes" => minb = size(&v),
            "--maxbytes" => maxb = size(&v),
            "--stepfactor" => step = args::num::<u64>(c, k, &v),
            "--iters" => iters = args::num::<u32>(c, k, &v).max(1),
            "--alg" => {
                alg = Some(
                    Algorithm::parse(&v)
                        .unwrap_or_else(|| fail(c, &format!("unknown --alg {v:?}"))),
                )
            }
            "--check" => {
                check = match v.as_str() {
                    "0" => false,
                    "1" => true,
                    _ => fail(c, &format!("--check {v:?}: use 0 or 1")),
                }
            }
            "--procs" => procs = Some(args::num::<u32>(c, k, &v)),
            "--plot" => plot = Some(v),
            "--deadline" => deadline = args::num::<u64>(c, k, &v),
            other => args::unhandled(c, other),
        }
    }
    let op = op.unwrap_or_else(|| fail(c, &format!("--op is required\n{}", SPEC.help())));
    let n = n.unwrap_or_else(|| fail(c, "--ranks is required"));
    if n == 0 {
        fail(c, "--ranks must be at least 1");
    }
    if matches!(op, CollectiveOp::Send | CollectiveOp::Recv) && n < 2 {
        fail(c, "send_recv needs at least 2 ranks (pairs 2k -> 2k+1)");
    }
    if step < 2 {
        fail(c, "--stepfactor must be at least 2");
    }
    if minb > maxb {
        fail(c, "--minbytes is larger than --maxbytes");
    }
    if matches!(dtype, Dtype::Fp32r | Dtype::Invalid) {
        fail(c, "dtype has no element size");
    }
    if op.is_reducing() && dtype.is_integer() {
        fail(
            c,
            &format!(
                "{} of {} is not supported: the CCE has no integer datapath (docs/contract/device.md §11.1); \
                 the compiler converts integer reductions to FP32, so use --dtype fp32",
                op.name(),
                dtype.short_name()
            ),
        );
    }
    Opts {
        setup: Setup {
            op,
            n,
            dtype,
            redop,
            alg,
            iters,
            check,
        },
        minb,
        maxb,
        step,
        procs,
        plot,
        deadline: std::time::Duration::from_secs(deadline),
    }
}

/// The element counts of the rows: nccl-tests' sizes from `minb` to `maxb`, turned into per-rank
/// block counts (at least 1), without repeats. A barrier has one row, count 0.
pub(crate) fn counts(o: &Opts, esz: u64) -> Vec<u64> {
    let s = &o.setup;
    if s.op == CollectiveOp::Barrier {
        return vec![0];
    }
    let per = perf_run::blocks(s.op, s.n) * esz;
    let mut v: Vec<u64> = Vec::new();
    let mut b = o.minb.max(1);
    while b <= o.maxb {
        let c = (b / per).max(1);
        if v.last() != Some(&c) {
            v.push(c);
        }
        b = match b.checked_mul(o.step) {
            Some(x) => x,
            None => break,
        };
    }
    v
}

pub(crate) fn half(m: &Option<Measured>, factor: f64) -> String {
    match m {
        None => format!("{:>9} {:>8} {:>8} {:>7}", "N/A", "N/A", "N/A", "N/A"),
        Some(m) => {
            let algbw = if m.time > 0.0 {
                m.bytes / m.time / 1e9
            } else {
                0.0
            };
            let wrong = m.wrong.map_or("N/A".to_string(), |w| w.to_string());
            format!(
                "{:>9.1} {:>8.3} {:>8.3} {:>7}",
                m.time * 1e6,
                algbw,
                algbw * factor,
                wrong
            )
        }
    }
}

/// Bytes moved ÷ (time × memcpy bandwidth) of a half (module doc), and the bytes.
fn traffic(m: &Option<Measured>, memcpy: f64) -> String {
    match m {
        Some(Measured {
            time,
            moved: Some(b),
            ..
        }) if *time > 0.0 && memcpy > 0.0 => {
            format!("{:.4} ({b} B)", *b as f64 / (time * memcpy))
        }
        _ => "N/A".into(),
    }
}

pub(crate) fn busbw(m: &Option<Measured>, factor: f64) -> Option<f64> {
    m.as_ref()
        .filter(|m| m.time > 0.0)
        .map(|m| m.bytes / m.time / 1e9 * factor)
}

pub fn perf_cmd(a: &[String]) -> i32 {
    if Spec::wants_help(a) {
        println!("{}", SPEC.help());
        return 0;
    }
    let o = parse(a);
    if let Some(p) = o.procs {
        if o.plot.is_some() {
            fail(
                "perf",
                "--plot draws the single-process sweep; it does not apply with --procs",
            );
        }
        return crate::perf_procs::perf_procs(&o, p, o.deadline);
    }
    let s = o.setup.clone();
    let esz = s.dtype.size_bytes().unwrap_or(1) as u64;
    let redop = if s.op.is_reducing() {
        format!("{:?}", s.redop).to_lowercase()
    } else {
        "none".into()
    };
    let in_place = cases::in_place_variants(s.op).contains(&true);
    let factor = perf_run::busbw_factor(s.op, s.n);
    let mem = memcpy_bw();
    println!(
        "# opennrt perf: {} on {} simulated ranks, {} {redop}, {} iteration(s) per size (median), check {}",
        s.op.name(),
        s.n,
        s.dtype.short_name(),
        s.iters,
        if s.check { "on" } else { "off" }
    );
    println!(
        "# single-thread memcpy: {:.3} GB/s (measured now); busbw factor {factor:.4}",
        mem / 1e9
    );
    if !in_place {
        println!("# {}: no in-place variant (no data)", s.op.name());
    }
    match s.op {
        CollectiveOp::AllToAllV => println!(
            "# all_to_all_v: the uneven count table of lower::cases::a2av_meta (packed receive \
             windows); size = buffer, algbw = bytes a rank actually sends (mean) / time"
        ),
        CollectiveOp::Permute => println!("# permute: pairs r -> (r + 1) mod N"),
        CollectiveOp::Send | CollectiveOp::Recv => println!(
            "# send_recv: pairs 2k -> 2k+1, each its own 2-rank collective; time = the sum of \
             the pairs' runs"
        ),
        _ => {}
    }
    println!("#{:>41} | {:^35} | {:^35}", "", "out-of-place", "in-place");
    println!(
        "#{:>11} {:>12} {:>9} {:>6} | {:>9} {:>8} {:>8} {:>7} | {:>9} {:>8} {:>8} {:>7}",
        "size",
        "count",
        "type",
        "redop",
        "time",
        "algbw",
        "busbw",
        "#wrong",
        "time",
        "algbw",
        "busbw",
        "#wrong"
    );
    println!(
        "#{:>11} {:>12} {:>9} {:>6} | {:>9} {:>8} {:>8} {:>7} | {:>9} {:>8} {:>8} {:>7}",
        "(B)", "(elements)", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", ""
    );
    let (mut wrong, mut sum, mut rows) = (0u64, 0.0, 0u32);
    let mut last = (None, None);
    let mut curves = [("out-of-place", Vec::new()), ("in-place", Vec::new())];
    let all = counts(&o, esz);
    let mut progress = opennrt::progress::Progress::new("perf", all.len() as u64);
    for (row, &count) in all.iter().enumerate() {
        progress.update(row as u64, &format!("count {count}"));
        let mut inputs = Vec::new();
        let mut halves = [None, None];
        for (i, ip) in [false, true].into_iter().enumerate() {
            if ip && !in_place {
                continue;
            }
            match perf_run::measure(&s, count, ip, &mut inputs) {
                Ok((m, first)) => {
                    if let Some(f) = first {
                        eprintln!(
                            "opennrt perf: count {count} {}: first wrong element: {f}",
                            if ip { "in place" } else { "out of place" }
                        );
                    }
                    wrong += m.wrong.unwrap_or(0);
                    halves[i] = Some(m);
                }
                Err(e) => {
                    eprintln!(
                        "opennrt perf: count {count} {}: {e}",
                        if ip { "in place" } else { "out of place" }
                    );
                    return 1;
                }
            }
        }
        for b in halves.iter().filter_map(|h| busbw(h, factor)) {
            sum += b;
            rows += 1;
        }
        let size = count * perf_run::blocks(s.op, s.n) * esz;
        progress.finish();
        println!(
            "{:>12} {:>12} {:>9} {:>6} | {} | {}",
            size,
            count * perf_run::blocks(s.op, s.n),
            s.dtype.short_name(),
            redop,
            half(&halves[0], factor),
            half(&halves[1], factor)
        );
        println!(
            "#   moved/(time x memcpy): out-of-place {}, in-place {}",
            traffic(&halves[0], mem),
            traffic(&halves[1], mem)
        );
        last = (busbw(&halves[0], factor), busbw(&halves[1], factor));
        for (c, b) in curves.iter_mut().zip([last.0, last.1]) {
            c.1.extend(b.map(|b| (size, b)));
        }
    }
    progress.finish();
    let checked = if s.check {
        format!("{wrong} wrong elements")
    } else {
        "not checked (--check 0)".into()
    };
    println!("# Out of bounds values : {checked}");
    println!(
        "# Avg bus bandwidth    : {:.6}",
        if rows > 0 { sum / f64::from(rows) } else { 0.0 }
    );
    let ratio = |b: Option<f64>| b.map_or("N/A".into(), |b| format!("{:.4}", b * 1e9 / mem));
    println!(
        "# largest size busbw / single-thread memcpy: out-of-place {}, in-place {}",
        ratio(last.0),
        ratio(last.1)
    );
    if let Some(path) = &o.plot {
        let curves: Vec<_> = curves
            .into_iter()
            .map(|(name, points)| opennrt::plot::Curve {
                name: name.into(),
                points,
            })
            .collect();
        let title = format!(
            "opennrt perf: {} on {} ranks, {}",
            s.op.name(),
            s.n,
            s.dtype.short_name()
        );
        if let Err(e) = opennrt::plot::busbw_svg(path, &title, &curves) {
            eprintln!("opennrt perf: --plot {e}");
            return 1;
        }
    }
    i32::from(wrong > 0)
}

#[cfg(test)]
mod tests;

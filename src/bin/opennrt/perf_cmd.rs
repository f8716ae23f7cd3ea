//! `opennrt perf`: the main job (issue 4 item 7) — run a collective on N simulated ranks in one
//! process through the lowering and the software device, nccl-tests style.
//!
//! Every iteration loads the emitted program into a fresh simulated machine (not timed), runs
//! it (timed: the device executing the descriptors) and reads the outputs back; the data is
//! verifiable (small integer values whose exact result every dtype represents), so `#wrong`
//! must be 0. First version: all-reduce, all-gather, reduce-scatter and all-to-all, out of
//! place, the float dtypes bf16 / fp16 / fp32 (and the integer dtypes for copy ops); the other
//! ops, in-place rows and FP8 come with the rest of issue 4.

use std::time::Instant;

use opennrt::dtype::{FloatCodec, Numerics};
use opennrt::isa::enums::Dtype;
use opennrt::isa::memmap::MAX_RING_DESCS;
use opennrt::lower::emit::{emit_with, EmitOptions};
use opennrt::lower::pipeline::{address_map, lower, LowerConfig};
use opennrt::lower::program::Algorithm;
use opennrt::lower::request::{CollectiveOp, CollectiveRequest, ReduceOp};
use opennrt::runtime::device_run::{load, read_outputs};

use crate::args::{self, fail};

const USAGE: &str =
    "usage: opennrt perf --op <all_reduce|all_gather|reduce_scatter|all_to_all> --ranks N
       [--dtype bf16|fp16|fp32|int32|...] [--redop add|max|min] [--minbytes 8] [--maxbytes 1M]
       [--stepfactor 4] [--iters 3] [--alg ring|mesh|...] [--check 0|1]   (sizes take K/M/G)";

fn size(s: &str) -> u64 {
    let t = s.trim();
    let (num, mul) = match t.chars().last() {
        Some('K' | 'k') => (&t[..t.len() - 1], 1u64 << 10),
        Some('M' | 'm') => (&t[..t.len() - 1], 1 << 20),
        Some('G' | 'g') => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    num.parse::<u64>()
        .map(|n| n * mul)
        .unwrap_or_else(|_| fail("perf", &format!("bad size {s:?}")))
}

/// nccl-tests' bus-bandwidth factor of an op on n ranks.
fn busbw_factor(op: CollectiveOp, n: u32) -> f64 {
    let n = f64::from(n);
    match op {
        CollectiveOp::AllReduce => 2.0 * (n - 1.0) / n,
        CollectiveOp::AllGather | CollectiveOp::ReduceScatter | CollectiveOp::AllToAll => {
            (n - 1.0) / n
        }
        _ => 1.0,
    }
}

/// Single-thread memcpy bandwidth of this machine (bytes/s), measured now.
fn memcpy_bw() -> f64 {
    let n = 64 << 20;
    let src = vec![1u8; n];
    let mut dst = vec![0u8; n];
    dst.copy_from_slice(&src);
    let t = Instant::now();
    for _ in 0..4 {
        dst.copy_from_slice(std::hint::black_box(&src));
    }
    std::hint::black_box(&dst);
    4.0 * n as f64 / t.elapsed().as_secs_f64()
}

/// Input value of rank r, element i: small integers, so sums over up to 64 ranks stay exact in
/// bf16 (≤ 3·64 = 192 < 256) and in every wider type.
fn value(r: u32, i: u64) -> f64 {
    ((u64::from(r) * 7 + i * 3) % 4) as f64
}

fn encode(codec: Option<&FloatCodec>, d: Dtype, v: f64, out: &mut [u8]) {
    match codec {
        Some(c) => c.narrow_one(v as f32, out),
        None => {
            let le = (v as u64).to_le_bytes();
            let n = out.len();
            out.copy_from_slice(&le[..n]);
            let _ = d;
        }
    }
}

pub fn perf_cmd(a: &[String]) -> i32 {
    if a.iter().any(|x| x == "-h" || x == "--help") {
        println!("{USAGE}");
        return 0;
    }
    let c = "perf";
    let (mut op, mut n, mut dtype, mut redop) = (None, None, Dtype::Fp32, ReduceOp::Add);
    let (mut minb, mut maxb, mut step, mut iters, mut alg, mut check) =
        (8u64, 1u64 << 20, 4u64, 3u32, None, true);
    for (k, v) in args::pairs(c, a, &[]) {
        match k.as_str() {
            "--op" => op = Some(args::op(c, &v)),
            "--ranks" => n = Some(args::num::<u32>(c, &k, &v)),
            "--dtype" => dtype = args::dtype(c, &v),
            "--redop" => redop = args::redop(c, &v),
            "--minbytes" | "-b" => minb = size(&v),
            "--maxbytes" | "-e" => maxb = size(&v),
            "--stepfactor" | "-f" => step = args::num::<u64>(c, &k, &v).max(2),
            "--iters" => iters = args::num::<u32>(c, &k, &v).max(1),
            "--alg" => {
                alg = Some(
                    Algorithm::parse(&v)
                        .unwrap_or_else(|| fail(c, &format!("unknown --alg {v:?}"))),
                )
            }
            "--check" => check = v != "0",
            other => fail(c, &format!("unknown option {other}\n{USAGE}")),
        }
    }
    let op = op.unwrap_or_else(|| fail(c, &format!("--op is required\n{USAGE}")));
    if !matches!(
        op,
        CollectiveOp::AllReduce
            | CollectiveOp::AllGather
            | CollectiveOp::ReduceScatter
            | CollectiveOp::AllToAll
    ) {
        fail(
            c,
            "this first version of perf runs all_reduce, all_gather, reduce_scatter and all_to_all",
        );
    }
    let n = n.unwrap_or_else(|| fail(c, "--ranks is required"));
    let esz = dtype
        .size_bytes()
        .unwrap_or_else(|| fail(c, "dtype has no size")) as u64;
    let codec = FloatCodec::new(dtype, &Numerics::default()).ok();
    if op.is_reducing() && codec.is_none() {
        fail(
            c,
            "reductions need a float dtype (the compiler converts integer reductions to FP32)",
        );
    }
    let bw = memcpy_bw();
    println!("# opennrt perf: {} on {n} simulated ranks, {} {:?}; single-thread memcpy {:.2} GB/s (measured now)", args::op_name(op), dtype.name(), redop, bw / 1e9);
    println!(
        "#{:>12} {:>12} {:>8} {:>6} | {:>10} {:>8} {:>8} {:>7}",
        "size", "count", "type", "redop", "time(us)", "algbw", "busbw", "#wrong"
    );
    let mut total_wrong = 0u64;
    let mut sizes = Vec::new();
    let mut s = minb.max(esz);
    while s <= maxb {
        sizes.push(s);
        s *= step;
    }
    for bytes in sizes {
        // nccl-tests' size is the per-rank buffer of the larger side; count = elements of it.
        let total = bytes / esz;
        let count = match op {
            CollectiveOp::AllReduce => total,
            _ => (total / u64::from(n)).max(1),
        };
        let mut req = CollectiveRequest::new(
            op,
            dtype,
            op.is_reducing().then_some(redop),
            count,
            (0..n).collect(),
            0,
        );
        req.in_place = false;
        let mut cfg = match LowerConfig::from_env(n) {
            Ok(c) => c,
            Err(e) => fail(c, e.message()),
        };
        if alg.is_some() {
            cfg.select.forced = alg;
        }
        let run = || -> opennrt::Result<(f64, u64)> {
            let p = lower(&req, &cfg)?;
            let map = address_map(&p, &cfg.topology)?;
            // Rings as long as the stream (up to the memory map's 2^24 descriptors): the loader
            // does not refill wrapped rings yet.
            let e = emit_with(
                &p,
                &map,
                &EmitOptions {
                    max_ring: MAX_RING_DESCS,
                },
            )?;
            let in_elems = req.input_elems();
            let inputs: Vec<Vec<u8>> = (0..n)
                .map(|r| {
                    let mut b = vec![0u8; (in_elems * esz) as usize];
                    for i in 0..in_elems {
                        encode(
                            codec.as_ref(),
                            dtype,
                            value(r, i),
                            &mut b[(i * esz) as usize..((i + 1) * esz) as usize],
                        );
                    }
                    b
                })
                .collect();
            let mut times = Vec::new();
            let mut outs = Vec::new();
            for _ in 0..iters {
                let mut m = load(&p, &e, &map, &inputs)?;
                let t = Instant::now();
                m.run()?;
                times.push(t.elapsed().as_secs_f64());
                outs = read_outputs(&m, &map)?;
            }
            times.sort_by(f64::total_cmp);
            let wrong = if check {
                count_wrong(&req, &outs, codec.as_ref(), esz)
            } else {
                0
            };
            Ok((times[times.len() / 2], wrong))
        };
        match run() {
            Ok((t, wrong)) => {
                total_wrong += wrong;
                let algbw = bytes as f64 / t / 1e9;
                println!(
                    "{:>13} {:>12} {:>8} {:>6} | {:>10.1} {:>8.3} {:>8.3} {:>7}",
                    bytes,
                    total,
                    args::dtype_name(dtype),
                    if op.is_reducing() {
                        format!("{redop:?}").to_lowercase()
                    } else {
                        "none".to_string()
                    },
                    t * 1e6,
                    algbw,
                    algbw * busbw_factor(op, n),
                    wrong
                );
            }
            Err(e) => {
                eprintln!("opennrt perf: {bytes} bytes: {e}");
                return 1;
            }
        }
    }
    println!("# out-of-place only in this version; #wrong total {total_wrong}; busbw factors as nccl-tests (all_reduce 2(n-1)/n, others (n-1)/n)");
    i32::from(total_wrong > 0)
}

/// Elements of every rank's output that differ from the exact result.
fn count_wrong(
    req: &CollectiveRequest,
    outs: &[Vec<u8>],
    codec: Option<&FloatCodec>,
    esz: u64,
) -> u64 {
    let n = req.rank_n();
    let c = req.count;
    let mut wrong = 0;
    for r in 0..n {
        let out = &outs[r as usize];
        for e in 0..req.output_elems() {
            let want = match req.op {
                CollectiveOp::AllReduce => reduce(req, (0..n).map(|q| value(q, e))),
                CollectiveOp::ReduceScatter => {
                    reduce(req, (0..n).map(|q| value(q, u64::from(r) * c + e)))
                }
                CollectiveOp::AllGather => value((e / c) as u32, e % c),
                _ => value((e / c) as u32, u64::from(r) * c + e % c),
            };
            let mut exp = vec![0u8; esz as usize];
            encode(codec, req.dtype, want, &mut exp);
            if out[(e * esz) as usize..((e + 1) * esz) as usize] != exp[..] {
                wrong += 1;
            }
        }
    }
    wrong
}

fn reduce(req: &CollectiveRequest, vals: impl Iterator<Item = f64>) -> f64 {
    match req.reduce {
        Some(ReduceOp::Max) => vals.fold(f64::MIN, f64::max),
        Some(ReduceOp::Min) => vals.fold(f64::MAX, f64::min),
        _ => vals.sum(),
    }
}

//! Run one resident collective again and again: the loop `perf` / `callgrind` measure
//! `Machine::run` of a kept machine on (docs/performance.md, "What makes repeats fast").
//!
//! `cargo run --release --example resident_run -- [bytes per rank] [runs] [ranks]`
//! (defaults 4096, 10000, 2): an fp32 sum all-reduce, loaded once, run `runs` times, every
//! result checked; prints the mean time per run.

use std::sync::Arc;

use opennrt::isa::enums::Dtype;
use opennrt::lower::request::{CollectiveOp, CollectiveRequest, ReduceOp};
use opennrt::runtime::collective::{prepare, RankIo, VecIo};
use opennrt::runtime::resident::Resident;
use parking_lot::Mutex;

fn main() {
    let arg = |k: usize, d: u64| {
        std::env::args()
            .nth(k)
            .map_or(d, |s| s.parse().expect("a number"))
    };
    let (bytes, runs, ranks) = (arg(1, 4096), arg(2, 10_000), arg(3, 2) as u32);
    let count = bytes / 4;
    let req = CollectiveRequest::new(
        CollectiveOp::AllReduce,
        Dtype::Fp32,
        Some(ReduceOp::Add),
        count,
        (0..ranks).collect(),
        0,
    );
    let l = prepare(&req, ranks).expect("prepare");
    let mut res = Resident::build(&l.program, &l.emitted, &l.map).expect("build");
    let outs: Vec<Arc<Mutex<Vec<u8>>>> = (0..ranks).map(|_| Default::default()).collect();
    let ios: Vec<VecIo> = (0..ranks as usize)
        .map(|r| VecIo {
            input: (0..count)
                .flat_map(|e| ((e + r as u64) as f32).to_le_bytes())
                .collect(),
            output: outs[r].clone(),
        })
        .collect();
    let refs: Vec<&dyn RankIo> = ios.iter().map(|i| i as &dyn RankIo).collect();
    let want: Vec<u8> = (0..count)
        .flat_map(|e| {
            (0..u64::from(ranks))
                .map(|r| (e + r) as f32)
                .sum::<f32>()
                .to_le_bytes()
        })
        .collect();
    let t = std::time::Instant::now();
    for _ in 0..runs {
        res.run(&refs).expect("run");
    }
    let dt = t.elapsed().as_secs_f64() / runs as f64;
    for o in &outs {
        assert!(*o.lock() == want, "wrong result");
    }
    println!(
        "{bytes} B x {ranks} ranks: {:.2} µs per resident run ({runs} runs)",
        dt * 1e6
    );
}

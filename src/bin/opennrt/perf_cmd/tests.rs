use super::*;

fn opts(op: CollectiveOp, n: u32, minb: u64, maxb: u64, step: u64) -> Opts {
    Opts {
        setup: Setup {
            op,
            n,
            dtype: Dtype::Fp32,
            redop: ReduceOp::Add,
            alg: None,
            iters: 1,
            check: true,
        },
        minb,
        maxb,
        step,
        procs: None,
        plot: None,
        deadline: std::time::Duration::from_secs(600),
    }
}

#[test]
fn sizes_take_suffixes() {
    assert_eq!(size("8"), 8);
    assert_eq!(size("64K"), 65536);
    assert_eq!(size("1m"), 1 << 20);
    assert_eq!(size("2G"), 2 << 30);
}

/// nccl-tests' sizes → per-rank block counts: all-reduce 8 B..1 KiB ×4 of fp32 is 2, 8, 32,
/// 128 elements; all-gather on 4 ranks divides by 4 blocks and drops the repeats of the
/// 1-element minimum; a barrier has one row.
#[test]
fn counts_follow_nccl_sizes() {
    let o = opts(CollectiveOp::AllReduce, 4, 8, 1024, 4);
    assert_eq!(counts(&o, 4), vec![2, 8, 32, 128]);
    let o = opts(CollectiveOp::AllGather, 4, 8, 1024, 4);
    assert_eq!(counts(&o, 4), vec![1, 2, 8, 32]);
    let o = opts(CollectiveOp::Barrier, 4, 8, 1024, 4);
    assert_eq!(counts(&o, 4), vec![0]);
    assert_eq!(perf_run::busbw_factor(CollectiveOp::AllReduce, 8), 1.75);
    assert_eq!(perf_run::busbw_factor(CollectiveOp::AllToAll, 4), 0.75);
    assert_eq!(perf_run::busbw_factor(CollectiveOp::Send, 2), 1.0);
}

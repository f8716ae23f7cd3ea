//! Tests of `opennrt perf-rank`: the job's command line, the op mapping, and that each process
//! checks exactly its own ranks (by global id) against an independent fp32 oracle.

use super::*;

/// The parent's command line parses back into the same job.
#[test]
fn job_round_trips_through_its_command_line() {
    let j = RankJob {
        op: CollectiveOp::ReduceScatter,
        n: 8,
        procs: 4,
        proc_index: 3,
        dtype: Dtype::Bf16,
        redop: ReduceOp::Max,
        counts: vec![1, 16, 4096],
        iters: 5,
        check: false,
        wait_stdin: true,
    };
    let a = j.to_args();
    assert_eq!(a[0], "perf-rank");
    assert_eq!(RankJob::parse(&a[1..]), j);
    assert_eq!(j.per_proc(), 2);
    assert_eq!(
        j.request(16).input_elems(),
        128,
        "reduce-scatter input is N blocks"
    );
}

/// fp32 sums computed here, independently of the reference: out_r[e] = Σ_q in_q[at(r) + e].
fn sums(inputs: &[Vec<u8>], n: u32, count: usize, at: impl Fn(u32) -> usize) -> Vec<Vec<u8>> {
    let f = |b: &[u8], i: usize| f32::from_le_bytes(b[4 * i..4 * i + 4].try_into().unwrap());
    (0..n)
        .map(|r| {
            (0..count)
                .flat_map(|e| {
                    let s: f32 = inputs.iter().map(|x| f(x, at(r) + e)).sum();
                    s.to_le_bytes()
                })
                .collect()
        })
        .collect()
}

fn job(op: CollectiveOp, procs: u32, proc_index: u32) -> RankJob {
    RankJob {
        op,
        n: 4,
        procs,
        proc_index,
        dtype: Dtype::Fp32,
        redop: ReduceOp::Add,
        counts: vec![],
        iters: 1,
        check: true,
        wait_stdin: false,
    }
}

/// A process checks exactly its own ranks, names the global rank of a wrong element, and
/// the single-process path checks the whole world (the verifiable fp32 data sums exactly,
/// so the oracle here is a plain f32 sum).
#[test]
fn each_process_checks_its_own_ranks_by_global_id() {
    // Checks the message a user reads, on purpose.
    let count = 40;
    for op in [CollectiveOp::AllReduce, CollectiveOp::ReduceScatter] {
        let j = job(op, 2, 1);
        let req = j.request(count as u64);
        let ins = verifiable::inputs(&req).unwrap();
        let at = |r: u32| {
            if op == CollectiveOp::AllReduce {
                0
            } else {
                r as usize * count
            }
        };
        let good = sums(&ins, 4, count, at);
        // Process 1 holds global ranks 2 and 3.
        let mine = good[2..].to_vec();
        assert_eq!(check(&j, &req, None, mine.clone()).unwrap(), (0, None));
        let mut bad = mine;
        bad[1][5 * 4] ^= 0x40;
        let (w, first) = check(&j, &req, None, bad).unwrap();
        assert_eq!(w, 1, "{op:?}");
        let first = first.unwrap();
        assert!(first.starts_with("rank 3 element 5:"), "{first}");
        // One process: all four ranks, the inputs kept from the write.
        let one = job(op, 1, 0);
        assert_eq!(
            check(&one, &req, Some(ins.clone()), good.clone()).unwrap(),
            (0, None)
        );
        let mut bad = good;
        bad[0][0] ^= 1;
        assert_eq!(check(&one, &req, Some(ins), bad).unwrap().0, 1);
    }
}

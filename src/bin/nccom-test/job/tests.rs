use super::*;

fn job() -> Job {
    Job {
        neff: "/tmp/x.neff".into(),
        op: "all_gather".into(),
        dtype: "fp32".into(),
        world: 2,
        count: 4,
        in_bytes: 16,
        out_bytes: 32,
        warmup: 1,
        iters: 3,
        ops_per_exec: 1,
        samples_per_exec: 1,
        check: Some("random".into()),
        seed: 5,
        ranks: vec![1],
        threads: false,
        groups: vec![vec![0, 1]],
        pairs: vec![],
        wait_stdin: false,
        dump_dir: None,
        table: None,
    }
}

/// The job survives the trip through the command line.
#[test]
fn jobs_round_trip_through_the_argument() {
    let j = job();
    let a = j.to_args();
    assert_eq!(a[0], WORKER_ARG);
    assert_eq!(Job::from_arg(&a[1]), Ok(j.clone()));
    assert_eq!(j.op_kind(), Ok(Op::AllGather));
    assert_eq!(j.mode(), Ok(Some(Mode::Random)));
    assert_eq!(j.layout(1).unwrap().pos, 1);
    assert_eq!(
        j.data().input(1, 4),
        Data::new(Dtype::Fp32, Some(Mode::Random), 5).input(1, 4)
    );
}

#[test]
fn bad_jobs_are_refused() {
    assert!(Job::from_arg("{}").is_err());
    let mut j = job();
    j.op = "broadcast".into();
    assert!(Job::from_arg(&j.to_args()[1]).is_err());
    let mut j = job();
    j.check = Some("zeros".into());
    assert!(Job::from_arg(&j.to_args()[1]).is_err());
}

#[test]
fn rank_lines_parse() {
    let l = RankLine {
        rank: 0,
        times_us: Some(vec![1.5]),
        wrong: Some(0),
        first: None,
        digest: Some("ab".into()),
        dumped: None,
    };
    let s = serde_json::to_string(&l).unwrap();
    assert_eq!(serde_json::from_str::<RankLine>(&s).unwrap(), l);
}

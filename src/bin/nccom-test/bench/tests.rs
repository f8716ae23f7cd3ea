use super::*;
use crate::check::Mode;
use crate::stats::Stat;

fn setup(line: &str) -> Result<Setup, String> {
    let w: Vec<String> = line.split_whitespace().map(String::from).collect();
    match crate::args::parse(&w)? {
        crate::args::Parsed::Run(o) => prepare(*o),
        crate::args::Parsed::Help => Err("help".into()),
    }
}

fn line(rank: u32, times: Option<Vec<f64>>, wrong: u64, digest: &str) -> RankLine {
    RankLine {
        rank,
        times_us: times,
        wrong: Some(wrong),
        first: (wrong > 0).then(|| "element 0: got 1, expected 2".into()),
        digest: Some(digest.into()),
        dumped: None,
    }
}

#[test]
fn sizes_are_rounded_skipped_and_deduplicated() {
    let s = setup("-r 16 allg -b 4 -e 4096 -f 4 -d fp32").unwrap();
    assert_eq!(s.skipped, vec![4, 16]);
    let b: Vec<u64> = s.sizes.iter().map(|z| z.bytes).collect();
    assert_eq!(b, vec![64, 256, 1024, 4096]);
    assert_eq!(s.sizes[0].count, 1);
    let s = setup("-r 3 allr -b 1000 -e 1003 -i 1 -d fp32").unwrap();
    let b: Vec<u64> = s.sizes.iter().map(|z| z.bytes).collect();
    assert_eq!(b, vec![1000]);
    assert_eq!(s.g, 3);
    assert_eq!(s.pairs, vec![]);
    assert_eq!(
        setup("-r 3 permute").unwrap().pairs,
        vec![(0, 1), (1, 2), (2, 0)]
    );
}

/// Refusals (integer reductions are none: they widen): pairs on a non-permute, a
/// variable-size table a size cannot hold.
#[test]
fn refusals_say_why() {
    // Checks the message a user reads, on purpose.
    assert!(setup("-r 2 alltoallv").is_ok());
    let dir = std::env::temp_dir().join(format!("nccom_bench_test_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let m = dir.join("m.json");
    std::fs::write(
        &m,
        r#"{"metadata":[{"send_counts":[5,5],"send_displs":[0,5]}]}"#,
    )
    .unwrap();
    let line = format!(
        "-r 2 alltoallv -b 8 -e 64 -f 2 --variable-size-op-metadata {}",
        m.display()
    );
    let e = setup(&line).unwrap_err();
    assert!(
        e.contains(
            "size 8 B (8 elements in, 8 out per rank, of uint8 (the default -d/--datatype)) \
             cannot hold the table"
        ) && e.contains("rank 0 sends 5 elements to peer 1 from displacement 5"),
        "{e}"
    );
    let ok = setup(&line.replace("-b 8", "-b 16")).unwrap();
    assert_eq!(
        ok.table.as_ref().unwrap()[1][2],
        [5, 5],
        "derived receive counts"
    );
    std::fs::remove_dir_all(&dir).unwrap();
    // Integer reductions are no refusal: they run widened to fp32 (crate::widen).
    assert!(setup("-r 2 allr").is_ok());
    assert!(setup("-r 2 redsct -d int32").is_ok());
    assert!(setup("-r 2 allg -d int32").is_ok());
    assert!(setup("-r 2 allg --custom-src-target-pairs /x")
        .unwrap_err()
        .contains("permute"));
}

fn outcome(lines: Vec<RankLine>) -> Outcome {
    Outcome {
        lines,
        failures: vec![],
    }
}

/// A good size: rank 0's times make the stats; GB/s with 1e9; busbw with the group's factor.
#[test]
fn a_good_size_becomes_a_row() {
    let s = setup("-r 2 allr -b 1kb -e 1kb -d fp32 -c -t avg p50").unwrap();
    let z = s.sizes[0];
    let o = outcome(vec![
        line(1, None, 0, "d"),
        line(0, Some(vec![1.0, 2.0, 3.0]), 0, "d"),
    ]);
    let Verdict::Row(r) = evaluate(&s, &z, &o, Path::new("/tmp/l.log"), Some("mesh".into())) else {
        panic!()
    };
    assert_eq!((r.size, r.count, r.dtype), (1024, 256, "fp32"));
    assert_eq!(r.time(Stat::Avg), 2.0);
    assert_eq!(r.time(Stat::P(50)), 2.0);
    assert!((r.algbw - 0.512).abs() < 1e-12);
    assert!((r.busbw - 0.512).abs() < 1e-12);
    assert_eq!(r.algorithm.as_deref(), Some("mesh"));
}

#[test]
fn failures_and_wrong_results_fail_the_size() {
    // Checks the message a user reads, on purpose.
    let s = setup("-r 2 allg -b 1kb -e 1kb -d fp32 --check").unwrap();
    assert_eq!(s.opts.check, Some(Mode::Random));
    let z = s.sizes[0];
    let log = Path::new("/tmp/l.log");
    let bad = outcome(vec![
        line(0, Some(vec![1.0]), 2, "a"),
        line(1, None, 0, "a"),
    ]);
    match evaluate(&s, &z, &bad, log, None) {
        Verdict::Failed { line, details } => {
            assert_eq!(line, "Failure checking results - log file /tmp/l.log");
            assert!(details[0].starts_with("rank 0: 2 wrong element(s); first: element 0"));
        }
        v => panic!("{v:?}"),
    }
    let split = outcome(vec![
        line(0, Some(vec![1.0]), 0, "a"),
        line(1, None, 0, "b"),
    ]);
    match evaluate(&s, &z, &split, log, None) {
        Verdict::Failed { details, .. } => assert!(details[0].contains("identity")),
        v => panic!("{v:?}"),
    }
    let missing = outcome(vec![line(0, Some(vec![1.0]), 0, "a")]);
    match evaluate(&s, &z, &missing, log, None) {
        Verdict::Failed { line, details } => {
            assert!(line.starts_with("Failure running neuron-bench - log file"));
            assert!(details
                .iter()
                .any(|d| d.contains("no result from rank(s) [1]")));
        }
        v => panic!("{v:?}"),
    }
    let mut crashed = outcome(vec![
        line(0, Some(vec![1.0]), 0, "a"),
        line(1, None, 0, "a"),
    ]);
    crashed
        .failures
        .push("the worker of rank(s) 1 exited with status 3".into());
    assert!(matches!(
        evaluate(&s, &z, &crashed, log, None),
        Verdict::Failed { .. }
    ));
    let untimed = outcome(vec![line(0, None, 0, "a"), line(1, None, 0, "a")]);
    assert!(matches!(
        evaluate(&s, &z, &untimed, log, None),
        Verdict::Failed { .. }
    ));
}

#[test]
fn jobs_and_specs_follow_the_options() {
    let s = setup("-r 2 allg -b 1kb -e 1kb -d fp32 -n 4 -w 2 -c all_ones --seed 3").unwrap();
    let j = job_of(&s, &s.sizes[0], "/n".into(), "/d".into());
    assert_eq!((j.warmup, j.iters, j.ops_per_exec), (2, 4, 1));
    assert_eq!((j.count, j.in_bytes, j.out_bytes), (128, 512, 1024));
    assert_eq!((j.check.as_deref(), j.seed), (Some("all_ones"), 3));
    let s = setup("-r 2 allg -b 1kb -e 1kb -d fp32 -n 4 -I 6 -W 1").unwrap();
    let j = job_of(&s, &s.sizes[0], "/n".into(), "/d".into());
    // One NEFF of -n + -w (4 + 5) operations, 1 untimed and 6 timed runs, 4 samples each.
    assert_eq!(
        (j.warmup, j.iters, j.ops_per_exec, j.samples_per_exec),
        (1, 6, 9, 4)
    );
    let s = setup("-r 2 allr -b 1kb -e 1kb -n 15 -w 5 -I 10").unwrap();
    let j = job_of(&s, &s.sizes[0], "/n".into(), "/d".into());
    assert_eq!(
        (j.warmup, j.iters, j.ops_per_exec, j.samples_per_exec),
        (0, 10, 20, 15)
    );
    let s = setup("-r 2 allr -b 1kb -e 1kb -n 3 -w 1 -W 2").unwrap();
    let j = job_of(&s, &s.sizes[0], "/n".into(), "/d".into());
    assert_eq!(
        (j.warmup, j.iters, j.ops_per_exec, j.samples_per_exec),
        (2, 1, 4, 3)
    );
    let spec = spec_of(&s, &s.sizes[0], 4);
    assert_eq!(
        (spec.ops, spec.count, spec.groups, spec.pairs),
        (4, 1024, None, None)
    );
}

#[test]
fn identity_compares_within_subgroups() {
    let lines = vec![
        line(0, None, 0, "a"),
        line(1, None, 0, "b"),
        line(2, None, 0, "a"),
        line(3, None, 0, "b"),
    ];
    assert!(identity(&[vec![0, 2], vec![1, 3]], &lines).is_empty());
    assert_eq!(identity(&[vec![0, 1, 2, 3]], &lines).len(), 2);
}

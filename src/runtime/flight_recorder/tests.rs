//! Tests of the flight recorder: the ring, the file format, the analyser, and a timeout in one
//! process that writes the files naming the rank that never came.

use super::*;
use crate::error::Error;

fn what(rank: u32) -> What {
    What {
        kind: "cc",
        op: "all_reduce",
        dtype: "fp32",
        count: 1024,
        rank,
        algorithm: "ring".into(),
    }
}

fn seqs(r: &Ring) -> Vec<u64> {
    r.0.lock().records().iter().map(|r| r.seq).collect()
}

#[test]
fn the_ring_keeps_the_last_n_when_it_wraps() {
    let r = Ring::default();
    for i in 0..7 {
        r.open(3, i, &[0, 1], what(0), State::Running);
    }
    assert_eq!(seqs(&r), [4, 5, 6]);
    let g = r.0.lock();
    assert_eq!(g.next_seq, 7);
    let inst: Vec<u64> = g.records().iter().map(|r| r.instance).collect();
    assert_eq!(inst, [4, 5, 6]);
}

#[test]
fn a_new_capacity_starts_the_ring_afresh() {
    let r = Ring::default();
    r.open(3, 0, &[0, 1], what(0), State::Running);
    r.open(5, 1, &[0, 1], what(0), State::Running);
    assert_eq!(seqs(&r), [0]);
}

#[test]
fn states_move_scheduled_running_done_and_failed() {
    let r = Ring::default();
    let g = [7, 9];
    let a = r.open(8, 0, &g, what(1), State::Scheduled);
    let rec = |seq: u64| {
        r.0.lock()
            .records()
            .into_iter()
            .find(|x| x.seq == seq)
            .unwrap()
    };
    assert_eq!(rec(a).state, State::Scheduled);
    assert_eq!(rec(a).started_ns, None);
    // Entering finds the scheduled record instead of opening another.
    let e = r.enter(8, 0, &g, || what(1));
    assert_eq!(e, a);
    assert_eq!(rec(a).state, State::Running);
    assert!(rec(a).started_ns.is_some_and(|t| t >= rec(a).scheduled_ns));
    r.finish(a, &Ok(()));
    let done = rec(a);
    assert_eq!(done.state, State::Done);
    assert_eq!(done.error, None);
    assert!(done.ended_ns >= done.started_ns);
    assert_eq!(
        (done.gid, done.rank, done.group.clone()),
        (9, 1, vec![7, 9])
    );
    // Without a scheduled record, entering opens a running one.
    let b = r.enter(8, 1, &g, || what(1));
    assert_eq!(b, a + 1);
    assert_eq!(rec(b).state, State::Running);
    r.finish(b, &Err(Error::new(ErrorKind::Timeout, "late")));
    assert_eq!(rec(b).state, State::Failed);
    assert_eq!(rec(b).error.as_deref(), Some("NRT_TIMEOUT"));
}

#[test]
fn a_withdrawn_record_is_not_written() {
    let r = Ring::default();
    let a = r.open(4, 0, &[0, 1], what(0), State::Scheduled);
    r.withdraw(a);
    r.open(4, 0, &[0, 1], what(0), State::Scheduled);
    assert_eq!(seqs(&r), [1]);
}

#[test]
fn a_result_for_a_record_the_ring_forgot_changes_nothing() {
    let r = Ring::default();
    let a = r.open(2, 0, &[0, 1], what(0), State::Running);
    for i in 1..3 {
        r.open(2, i, &[0, 1], what(0), State::Running);
    }
    r.finish(a, &Ok(()));
    let states: Vec<State> = r.0.lock().records().iter().map(|r| r.state).collect();
    assert_eq!(states, [State::Running, State::Running]);
}

// ---- files ----

/// A rank file of global id `gid` in `group` (rank index from the group), with `records`
/// (instance, state) 1 ms apart, from wall-clock second 1,800,000,000.
fn file(gid: u32, group: &[u32], records: &[(u64, State)], recorded: u64) -> RankFile {
    let rank = group.iter().position(|g| *g == gid).unwrap() as u32;
    let first_seq = recorded - records.len() as u64;
    RankFile {
        path: PathBuf::from(format!("flight-test-rank{gid}.json")),
        header: Header {
            format: FORMAT.into(),
            version: VERSION,
            job: "test".into(),
            gid,
            pid: 100 + gid,
            host: "h".into(),
            capacity: 2000,
            recorded,
            anchor_unix_ns: 1_800_000_000 * 1_000_000_000,
            written_ns: 10_000_000_000,
            reason: "nrt_close".into(),
        },
        records: records
            .iter()
            .enumerate()
            .map(|(i, &(instance, state))| {
                let t = instance * 1_000_000;
                Record {
                    seq: first_seq + i as u64,
                    instance,
                    kind: "cc".into(),
                    op: "all_reduce".into(),
                    dtype: "fp32".into(),
                    count: 1024,
                    group: group.to_vec(),
                    rank,
                    gid,
                    algorithm: "ring".into(),
                    state,
                    error: (state == State::Failed).then(|| "NRT_TIMEOUT".to_string()),
                    scheduled_ns: t,
                    started_ns: (state != State::Scheduled).then_some(t + 10),
                    ended_ns: matches!(state, State::Done | State::Failed).then_some(t + 500),
                }
            })
            .collect(),
    }
}

fn done(range: std::ops::Range<u64>) -> Vec<(u64, State)> {
    range.map(|i| (i, State::Done)).collect()
}

#[test]
fn a_rank_file_round_trips_through_json_lines() {
    let mut records = done(0..3);
    records.push((3, State::Failed));
    records.push((4, State::Running));
    records.push((5, State::Scheduled));
    let f = file(2, &[0, 2, 5], &records, 6);
    let text = f.to_json_lines();
    assert_eq!(text.lines().count(), 7);
    let back = RankFile::parse(&f.path, &text).unwrap();
    assert_eq!(back, f);
    // The header's first fields, as the format is documented (docs/hangs.md §2).
    let head: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(head["format"], "opennrt-flight-recorder");
    assert_eq!(head["version"], 1);
    let rec: serde_json::Value = serde_json::from_str(text.lines().nth(4).unwrap()).unwrap();
    assert_eq!(rec["state"], "failed");
    assert_eq!(rec["error"], "NRT_TIMEOUT");
}

#[test]
fn a_file_of_another_format_is_refused_naming_it() {
    let p = Path::new("x.json");
    let e = RankFile::parse(p, "{\"format\":\"other\"}\n").unwrap_err();
    assert_eq!(e.status_name(), "NRT_INVALID");
    let f = file(1, &[0, 1], &done(0..1), 1);
    let mut text = f.to_json_lines();
    text = text.replace("\"gid\":1", "\"gid\":0");
    let e = RankFile::parse(p, &text).unwrap_err();
    assert_eq!(e.status_name(), "NRT_INVALID");
    assert_eq!(
        RankFile::parse(p, "").unwrap_err().status_name(),
        "NRT_INVALID"
    );
}

#[test]
fn file_names_carry_the_job_and_the_global_id() {
    assert_eq!(
        file_name("40123-0a1b2c3d", 3),
        "flight-40123-0a1b2c3d-rank3.json"
    );
}

#[test]
fn written_files_are_read_back_from_the_directory() {
    let dir = std::env::temp_dir().join(format!("opennrt-fr-rw-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let files = vec![
        file(0, &[0, 1], &done(0..4), 4),
        file(1, &[0, 1], &done(0..4), 4),
    ];
    let paths = write_files(&dir, &files).unwrap();
    assert_eq!(paths[1], dir.join("flight-test-rank1.json"));
    std::fs::write(dir.join("unrelated.txt"), "x").unwrap();
    let back = read_dir(&dir).unwrap();
    assert_eq!(back.len(), 2);
    assert_eq!(back[1].records, files[1].records);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(read_dir(&dir).unwrap_err().status_name(), "NRT_INVALID");
}

// ---- the analyser ----

const G4: [u32; 4] = [0, 1, 2, 3];

#[test]
fn the_analyser_names_the_rank_that_never_entered() {
    let mut hung = done(0..812);
    hung.push((812, State::Running));
    let files = vec![
        file(0, &G4, &hung, 812 + 1),
        file(1, &G4, &hung, 812 + 1),
        file(2, &G4, &hung, 812 + 1),
        file(3, &G4, &done(0..812), 812),
    ];
    let a = analyse(&files);
    assert!(!a.consistent());
    assert_eq!(a.findings.len(), 1);
    let f = &a.findings[0];
    assert_eq!((f.group.as_slice(), f.instance), (&G4[..], 812));
    assert_eq!(f.culprits(), [3]);
    assert_eq!(f.ranks[3], (3, Standing::NeverEntered));
    assert!(matches!(f.ranks[0].1, Standing::Running(_)));
    // The text is the product here: the line a user reads.
    let lines = a.lines();
    assert!(
        lines[0].starts_with(
            "group [0, 1, 2, 3] cc collective #812 (all_reduce fp32 x1024, ring): rank 3 \
             never entered it; ranks 0,1,2 running since 2027-01-15 08:00:00.812 UTC"
        ),
        "{lines:?}"
    );
    assert!(lines[1].starts_with("culprit: rank 3 never entered collective #812"));
}

#[test]
fn the_analyser_says_so_when_all_is_consistent() {
    let files: Vec<RankFile> = G4.iter().map(|&g| file(g, &G4, &done(0..50), 50)).collect();
    let a = analyse(&files);
    assert!(a.consistent(), "{:?}", a.findings);
    assert_eq!((a.ranks, a.groups, a.collectives), (4, 1, 50));
    assert!(a.lines()[0].starts_with("consistent: 4 rank(s)"));
}

#[test]
fn the_analyser_names_a_rank_that_entered_but_never_finished() {
    let mut stuck = done(0..5);
    stuck.push((5, State::Running));
    let files = vec![
        file(0, &G4, &done(0..6), 6),
        file(1, &G4, &done(0..6), 6),
        file(2, &G4, &stuck, 6),
        file(3, &G4, &done(0..6), 6),
    ];
    let a = analyse(&files);
    let f = &a.findings[0];
    assert_eq!(f.instance, 5);
    assert_eq!(f.culprits(), [2]);
    assert!(f.verdict().contains("entered"), "{}", f.verdict());
    assert!(f.verdict().contains("never finished"), "{}", f.verdict());
}

#[test]
fn a_rank_with_no_file_is_named() {
    let mut hung = done(0..3);
    hung.push((3, State::Failed));
    let files = vec![file(0, &[0, 1], &hung, 4)];
    let a = analyse(&files);
    let f = &a.findings[0];
    assert_eq!(f.instance, 0);
    assert_eq!(f.ranks[1], (1, Standing::NoFile));
    assert_eq!(f.culprits(), [1]);
}

#[test]
fn what_a_wrapped_ring_forgot_is_not_missing() {
    // Rank 1 keeps instances 8..10 only; 0..8 are unknown for it, not "never entered".
    let files = vec![
        file(0, &[0, 1], &done(0..10), 10),
        file(1, &[0, 1], &done(8..10), 10),
    ];
    let a = analyse(&files);
    assert!(a.consistent(), "{:?}", a.lines());
}

#[test]
fn the_first_finding_is_the_earliest() {
    let mut a0 = done(0..3);
    a0.push((3, State::Running));
    let mut b2 = done(0..2);
    b2.push((2, State::Scheduled));
    let files = vec![file(0, &[0, 1], &a0, 4), file(1, &[0, 1], &b2, 3)];
    let a = analyse(&files);
    assert_eq!(a.findings.len(), 2);
    assert_eq!(a.findings[0].instance, 2);
    assert_eq!(a.findings[0].culprits(), [1]);
    assert!(a.findings[0].line().contains("rank 1 scheduled it at"));
}

#[test]
fn wall_clock_times_are_utc_dates() {
    assert_eq!(analyse::wall(0), "1970-01-01 00:00:00.000 UTC");
    // 1,700,000,000 s is 2023-11-14 22:13:20 UTC (date -u -d @1700000000).
    assert_eq!(
        analyse::wall(1_700_000_000_123_000_000),
        "2023-11-14 22:13:20.123 UTC"
    );
    assert_eq!(
        analyse::wall(951_782_400 * 1_000_000_000),
        "2000-02-29 00:00:00.000 UTC"
    );
}

// ---- what the variables change ----

/// Ranks 0 and 1 of group [0, 1] in threads, through `run_user`: rank 0 runs `n0` all-reduces,
/// rank 1 `n1`; each rank's results.
fn run_pair(n0: u64, n1: u64) -> Vec<Vec<Result<()>>> {
    use crate::lower::request::{CollectiveOp, ReduceOp};
    use crate::runtime::collective::{self, Arrival, VecIo, Wait};
    let key = GroupKey {
        kind: "cc",
        slot: 1,
        group: vec![0, 1],
    };
    let hs: Vec<_> = [n0, n1]
        .into_iter()
        .enumerate()
        .map(|(rank, n)| {
            let key = key.clone();
            std::thread::spawn(move || {
                let req = CollectiveRequest::new(
                    CollectiveOp::AllReduce,
                    crate::isa::enums::Dtype::Fp32,
                    Some(ReduceOp::Add),
                    16,
                    vec![0, 1],
                    rank as u32,
                );
                (0..n)
                    .map(|_| {
                        let lowered = collective::prepare(&req, 2)?;
                        let t = collective::meetings().ticket(&key, req.rank);
                        let io = VecIo {
                            input: vec![0; 64],
                            output: Default::default(),
                        };
                        let a = Arrival {
                            req: req.clone(),
                            lowered,
                            io: Box::new(io),
                        };
                        collective::run_user(&key, t, a, Wait::Block)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    hs.into_iter().map(|h| h.join().unwrap()).collect()
}

#[test]
fn a_timeout_writes_every_rank_file_and_they_name_the_rank_that_never_came() {
    let dir = std::env::temp_dir().join(format!("opennrt-fr-e2e-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let d = dir.to_string_lossy().into_owned();
    let vars = [
        ("OPENNRT_FLIGHT_RECORDER_ENTRIES", "4"),
        ("OPENNRT_FLIGHT_RECORDER_DIR", d.as_str()),
        ("NEURON_RT_EXEC_TIMEOUT", "1"),
    ];
    crate::abi::handle::testing::with_runtime(&vars, || {
        let r = run_pair(6, 5);
        assert!(r[0][..5].iter().all(Result::is_ok));
        assert_eq!(r[0][5].as_ref().unwrap_err().status_name(), "NRT_TIMEOUT");
        // The timeout wrote them, before nrt_close.
        let files = read_dir(&dir).unwrap();
        assert_eq!(files.len(), 2);
        assert!(files
            .iter()
            .all(|f| f.header.capacity == 4 && f.records.len() == 4));
        let a = analyse(&files);
        let f = &a.findings[0];
        assert_eq!((f.instance, f.culprits()), (5, vec![1]));
        assert_eq!(f.ranks[1], (1, Standing::NeverEntered));
        assert!(matches!(&f.ranks[0].1, Standing::Failed(e, _) if e == "NRT_TIMEOUT"));
    });
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn zero_entries_records_nothing() {
    crate::abi::handle::testing::with_runtime(&[("OPENNRT_FLIGHT_RECORDER_ENTRIES", "0")], || {
        let r = run_pair(1, 1);
        assert!(r.iter().flatten().all(Result::is_ok));
        assert!(snapshot("test").is_empty());
    });
    crate::abi::handle::testing::with_runtime(&[], || {
        let r = run_pair(2, 2);
        assert!(r.iter().flatten().all(Result::is_ok));
        let files = snapshot("test");
        assert_eq!(files.len(), 2);
        assert!(files
            .iter()
            .all(|f| f.header.capacity == DEFAULT_ENTRIES as u64));
        let states: Vec<State> = files[0].records.iter().map(|r| r.state).collect();
        assert_eq!(states, [State::Done, State::Done]);
    });
}

use super::*;

/// One entry for every rank, recv rows derived (by hand, 3 ranks): rank r sends 1, 2, 3
/// elements to peers 0, 1, 2 from 0, 1, 3; so every rank receives what each peer sends it —
/// peer q sends rank r `r + 1` elements — packed in peer order.
#[test]
fn one_entry_for_every_rank_derives_the_receive_rows() {
    // Checks the message a user reads, on purpose.
    let t = r#"{"metadata":[{"send_counts":[1,2,3],"send_displs":[0,1,3]}]}"#;
    let rows = parse(t, Op::AllToAllV, 3).unwrap();
    assert_eq!(rows.len(), 3);
    assert_eq!(
        rows[1],
        [vec![1, 2, 3], vec![0, 1, 3], vec![2, 2, 2], vec![0, 2, 4]]
    );
    check_fits(&rows, 6, 9).unwrap();
    let e = check_fits(&rows, 5, 9).unwrap_err();
    assert!(e.contains("past its input of 5 elements"), "{e}");
}

/// One entry per rank with given receive rows; a given count that disagrees with the sender
/// is refused naming both.
#[test]
fn entries_per_rank_and_given_receive_rows() {
    // Checks the message a user reads, on purpose.
    let t = r#"{"metadata":[
        {"send_counts":[0,2],"send_displs":[0,0],"recv_counts":[0,1],"recv_displs":[0,4]},
        {"send_counts":[1,1],"send_displs":[3,0],"recv_counts":[2,1],"recv_displs":[0,2]}]}"#;
    let rows = parse(t, Op::AllToAllV, 2).unwrap();
    assert_eq!(rows[0][3], [0, 4]);
    check_fits(&rows, 4, 8).unwrap();
    let bad = t.replace(r#""recv_counts":[2,1]"#, r#""recv_counts":[1,1]"#);
    let e = check_fits(&parse(&bad, Op::AllToAllV, 2).unwrap(), 4, 8).unwrap_err();
    assert!(
        e.contains("rank 1's receive count from peer 0 is 1 but peer 0 sends it 2"),
        "{e}"
    );
}

/// allgv: one send window per rank, sent to every peer.
#[test]
fn all_gather_v_sends_one_window_to_every_peer() {
    // Checks the message a user reads, on purpose.
    let t = r#"{"metadata":[{"send_counts":[2],"send_displs":[1],"recv_counts":[2,2,2],"recv_displs":[4,0,2]}]}"#;
    let rows = parse(t, Op::AllGatherV, 3).unwrap();
    assert_eq!(
        rows[2],
        [vec![2, 2, 2], vec![1, 1, 1], vec![2, 2, 2], vec![4, 0, 2]]
    );
    check_fits(&rows, 3, 6).unwrap();
    let e = parse(
        r#"{"metadata":[{"send_counts":[2,2,2],"send_displs":[0,0,0]}]}"#,
        Op::AllGatherV,
        3,
    )
    .unwrap_err();
    assert!(
        e.contains("send_counts has 3 entries; all_gatherv on groups of 3 needs 1"),
        "{e}"
    );
}

/// The refusals, each naming what was wrong.
#[test]
fn bad_files_are_refused_naming_the_problem() {
    // Checks the message a user reads, on purpose.
    let cases: &[(&str, &str)] = &[
        ("{", "bad JSON"),
        (r#"{"meta":[]}"#, "bad JSON"),
        (
            r#"{"metadata":[{"send_counts":[1,1],"send_displs":[0,1],"x":1}]}"#,
            "bad JSON",
        ),
        (
            r#"{"metadata":[{"send_counts":[1,1],"send_displs":[0,1]},{"send_counts":[1,1],"send_displs":[0,1]}]}"#,
            "2 metadata entries; give one for every rank or one per rank (3)",
        ),
        (
            r#"{"metadata":[{"send_counts":[1,1],"send_displs":[0,1,2]}]}"#,
            "entry 0: send_counts has 2 entries",
        ),
        (
            r#"{"metadata":[{"send_counts":[1,1,1],"send_displs":[0,1,2],"recv_displs":[0]}]}"#,
            "entry 0: recv_displs has 1 entries",
        ),
        (
            r#"{"metadata":[{"send_counts":[1,-1,1],"send_displs":[0,1,2]}]}"#,
            "bad JSON",
        ),
    ];
    for (t, want) in cases {
        let e = parse(t, Op::AllToAllV, 3).unwrap_err();
        assert!(e.contains(want), "{t}: {e}");
    }
    // Overlapping receive windows (given displacements).
    let t = r#"{"metadata":[{"send_counts":[2,2],"send_displs":[0,2],"recv_displs":[0,1]}]}"#;
    let e = check_fits(&parse(t, Op::AllToAllV, 2).unwrap(), 4, 4).unwrap_err();
    assert!(e.contains("overlap"), "{e}");
    let missing = load(Path::new("/nonexistent/m.json"), Op::AllToAllV, 2).unwrap_err();
    assert!(
        missing.starts_with("--variable-size-op-metadata /nonexistent/m.json"),
        "{missing}"
    );
}

/// The equal-blocks tables (docs/neff.md §2).
#[test]
fn uniform_tables() {
    let a = uniform(Op::AllToAllV, 2, 3);
    assert_eq!(a, vec![[vec![3, 3], vec![0, 3], vec![3, 3], vec![0, 3]]; 2]);
    check_fits(&a, 6, 6).unwrap();
    let g = uniform(Op::AllGatherV, 2, 3);
    assert_eq!(g[1], [vec![3, 3], vec![0, 0], vec![3, 3], vec![0, 3]]);
    check_fits(&g, 3, 6).unwrap();
}

/// `load` refuses what no size could run (a receive count the peer does not send, overlapping
/// receive windows, an entry the uint32 `metadata0` cannot hold) naming the file, the rank and
/// the peer, before any size is looked at.
#[test]
fn load_refuses_size_independent_errors_naming_the_file() {
    // Checks the message a user reads, on purpose.
    let dir = std::env::temp_dir().join(format!("nccom_metadata_test_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cases = [
        (
            r#"{"metadata":[{"send_counts":[1,1],"send_displs":[0,1],"recv_counts":[1,2]}]}"#,
            "rank 0's receive count from peer 1 is 2 but peer 1 sends it 1",
        ),
        (
            r#"{"metadata":[{"send_counts":[2,2],"send_displs":[0,2],"recv_displs":[0,1]}]}"#,
            "on rank 0 the receive windows of peers 0 and 1 overlap",
        ),
        (
            r#"{"metadata":[{"send_counts":[1,1],"send_displs":[0,4294967296]}]}"#,
            "entry 0: send_displs[1] = 4294967296 is above 4294967295",
        ),
    ];
    for (k, (text, want)) in cases.iter().enumerate() {
        let p = dir.join(format!("m{k}.json"));
        std::fs::write(&p, text).unwrap();
        let e = load(&p, Op::AllToAllV, 2).unwrap_err();
        let named = format!("--variable-size-op-metadata {}: ", p.display());
        assert!(e.starts_with(&named) && e.contains(want), "{text}: {e}");
    }
    let p = dir.join("good.json");
    std::fs::write(
        &p,
        r#"{"metadata":[{"send_counts":[1,1],"send_displs":[0,1]}]}"#,
    )
    .unwrap();
    assert_eq!(
        load(&p, Op::AllToAllV, 2).unwrap(),
        uniform(Op::AllToAllV, 2, 1)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The guide's file writes `"recv_counts": []`: empty receive rows are rows left out.
#[test]
fn empty_receive_rows_mean_left_out() {
    let given = r#"{"metadata":[{"send_counts":[2,3],"send_displs":[0,2],"recv_counts":[],"recv_displs":[]}]}"#;
    let absent = r#"{"metadata":[{"send_counts":[2,3],"send_displs":[0,2]}]}"#;
    let a = parse(given, Op::AllToAllV, 2).unwrap();
    assert_eq!(a, parse(absent, Op::AllToAllV, 2).unwrap());
    // Position 1 receives 3 from position 0 and 3 from itself, packed from 0.
    assert_eq!(a[1][2], [3, 3]);
    assert_eq!(a[1][3], [0, 3]);
}

use super::*;

/// The three files parse from their text, as the binary's wrappers rely on.
#[test]
fn the_three_files_parse_from_text() {
    let rows = parse_metadata(
        r#"{"metadata":[{"send_counts":[1,1],"send_displs":[0,1]}]}"#,
        false,
        "alltoallv",
        2,
    )
    .unwrap();
    assert_eq!(rows[1], [vec![1, 1], vec![0, 1], vec![1, 1], vec![0, 1]]);
    check_fits(&rows, 2, 2).unwrap();
    assert_eq!(
        parse_groups(r#"{"replica_groups": [[[0, 1]]]}"#, 2, "g.json"),
        Ok(vec![vec![0, 1]])
    );
    assert_eq!(
        parse_pairs(r#"{"src_target_pairs": [[[0, 1], [1, 0]]]}"#, 2, "p.json"),
        Ok(vec![(0, 1), (1, 0)])
    );
    let e = parse_pairs("{", 2, "p.json").unwrap_err();
    assert!(e.starts_with("--custom-src-target-pairs p.json: "), "{e}");
}

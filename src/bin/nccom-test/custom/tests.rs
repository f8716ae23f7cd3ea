use super::*;
use opennrt::nccom_files::{check_groups, check_pairs};

fn file(name: &str, body: &str) -> std::path::PathBuf {
    let p = std::env::temp_dir().join(format!("nccom_test_custom_{}_{name}", std::process::id()));
    std::fs::write(&p, body).unwrap();
    p
}

#[test]
fn replica_groups_must_partition_the_ranks_evenly() {
    // Checks the message a user reads, on purpose.
    let p = file("g.json", r#"{"replica_groups": [[[0, 2], [1, 3]]]}"#);
    assert_eq!(groups(&p, 4), Ok(vec![vec![0, 2], vec![1, 3]]));
    assert!(groups(&p, 5)
        .unwrap_err()
        .contains("rank 4 is in no subgroup"));
    assert!(groups(&p, 3).unwrap_err().contains("not below"));
    let two = file("g2.json", r#"{"replica_groups": [[[0, 1]], [[0, 1]]]}"#);
    assert!(groups(&two, 2).unwrap_err().contains("give one group"));
    assert!(check_groups(vec![vec![0], vec![1, 2]], 3).is_err());
    assert!(check_groups(vec![vec![0, 1], vec![1, 0]], 2)
        .unwrap_err()
        .contains("two"));
    let bad = file("g3.json", "{}");
    assert!(groups(&bad, 2).is_err());
    assert!(groups(Path::new("/nonexistent/x.json"), 2).is_err());
}

#[test]
fn pairs_are_checked_and_default_to_the_ring() {
    // Checks the message a user reads, on purpose.
    let p = file("p.json", r#"{"src_target_pairs": [[[0, 1], [1, 0]]]}"#);
    assert_eq!(pairs(&p, 2), Ok(vec![(0, 1), (1, 0)]));
    assert!(pairs(&p, 1).is_err());
    assert!(check_pairs(vec![(0, 1), (0, 2)], 3)
        .unwrap_err()
        .contains("source of two"));
    assert!(check_pairs(vec![(0, 1), (2, 1)], 3)
        .unwrap_err()
        .contains("target of two"));
    assert!(check_pairs(vec![], 3).is_err());
    assert_eq!(ring_pairs(&[vec![0, 1, 2]]), vec![(0, 1), (1, 2), (2, 0)]);
    assert_eq!(
        ring_pairs(&[vec![0, 2], vec![1, 3]]),
        vec![(0, 2), (2, 0), (1, 3), (3, 1)]
    );
}

use super::*;
use crate::runtime::multi_process::wire::SegmentAt;
use crate::runtime::multi_process::wire::TensorAt;

fn board(tag: &str, n: usize) -> Board {
    let name = format!(
        "{}go-test-{tag}",
        crate::runtime::multi_process::shm::prefix("0", std::process::id())
    );
    let b = Board::create(&name, n).unwrap();
    b.unlink();
    b
}

fn key(n: u32) -> GroupKey {
    GroupKey {
        kind: "cc",
        slot: 1,
        group: (0..n).collect(),
    }
}

/// Rank `q`'s segment; ranks 1 and 2 publish an output tensor (rank 2 at an offset), rank 0
/// none.
fn seg(q: usize) -> SegmentAt {
    SegmentAt {
        name: format!("/opennrt-test-seg-{q}"),
        len: 4096 * (q as u64 + 1),
        host: crate::runtime::multi_process::host::key().to_string(),
        net: Vec::new(),
        output: (q > 0).then(|| TensorAt {
            name: format!("/opennrt-test-{q}-t{q}"),
            len: 8192,
            offset: 4096 * (q as u64 - 1),
        }),
    }
}

#[test]
fn equal_signatures_are_the_go_with_every_segment_in_rank_order() {
    let b = board("go", 3);
    assert!(!b.all_attached(), "nobody attached yet");
    (0..3).for_each(|q| b.attach(q));
    assert!(b.all_attached());
    for q in 0..3 {
        b.arrive(q, 5, 0xabc, &seg(q)).unwrap();
    }
    match b
        .wait(&key(3), 5, Some(Duration::from_secs(5)), || None)
        .unwrap()
    {
        Met::Go(names) => assert_eq!(names, (0..3).map(seg).collect::<Vec<_>>()),
        Met::Differ => panic!("same signatures"),
    }
}

#[test]
fn a_different_signature_sends_everyone_to_the_root() {
    let b = board("differ", 2);
    b.arrive(0, 0, 1, &seg(0)).unwrap();
    b.arrive(1, 0, 2, &seg(1)).unwrap();
    assert!(matches!(
        b.wait(&key(2), 0, None, || None).unwrap(),
        Met::Differ
    ));
}

#[test]
fn a_rank_that_never_arrives_is_named_after_the_timeout() {
    // Checks the report text a user reads, on purpose.
    let b = board("late", 3);
    b.arrive(0, 2, 7, &seg(0)).unwrap();
    b.arrive(2, 2, 7, &seg(2)).unwrap();
    let t = Instant::now();
    let e = b
        .wait(&key(3), 2, Some(Duration::from_millis(120)), || None)
        .unwrap_err();
    assert!(t.elapsed() >= Duration::from_millis(120));
    assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
    assert!(
        e.message().contains("rank 1 (global id 1) never arrived"),
        "{e}"
    );
}

#[test]
fn a_rank_past_this_instance_and_a_dead_job_end_the_wait() {
    // Checks the report text a user reads, on purpose.
    let b = board("moved", 2);
    b.arrive(0, 4, 7, &seg(0)).unwrap();
    b.arrive(1, 5, 7, &seg(1)).unwrap();
    let e = b.wait(&key(2), 4, None, || None).unwrap_err();
    assert!(
        e.message()
            .contains("rank 1 (global id 1) has moved on to collective #5"),
        "{e}"
    );
    // A peer that gave up leaves a collective that cannot complete: a hung collective
    // (1200), which the contract allows a missing participant, never NRT_FAILURE.
    assert_eq!(e.kind(), ErrorKind::CollectivesHang, "{e}");
    // When the job knows why (a dead process), that is the reason given: the one the peer
    // that moved on gave up for, with its status.
    let m = board("moved-dead", 3);
    m.arrive(0, 4, 7, &seg(0)).unwrap();
    m.arrive(1, 5, 7, &seg(1)).unwrap();
    let e = m
        .wait(&key(3), 4, None, || {
            Some(Error::new(
                ErrorKind::CollectivesHang,
                "global id 2 is gone: its process died",
            ))
        })
        .unwrap_err();
    assert!(e.message().contains("global id 2 is gone"), "{e}");
    assert_eq!(e.kind(), ErrorKind::CollectivesHang, "{e}");
    let c = board("dead", 2);
    c.arrive(0, 0, 7, &seg(0)).unwrap();
    let e = c
        .wait(&key(2), 0, None, || {
            Some(Error::failure("global id 1 is gone"))
        })
        .unwrap_err();
    assert!(e.message().contains("global id 1 is gone"), "{e}");
}

#[test]
fn a_late_arrival_wakes_the_waiter() {
    let b = Arc::new(board("wake", 2));
    b.arrive(0, 0, 3, &seg(0)).unwrap();
    let b2 = b.clone();
    let h = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        b2.arrive(1, 0, 3, &seg(1)).unwrap();
    });
    let met = b
        .wait(&key(2), 0, Some(Duration::from_secs(10)), || None)
        .unwrap();
    assert!(matches!(met, Met::Go(_)));
    h.join().unwrap();
}

#[test]
fn the_signature_covers_every_agreed_field_and_the_program() {
    use crate::isa::enums::Dtype;
    use crate::lower::request::{CollectiveOp, CollectiveRequest, ReduceOp};
    let r = |count, rank| {
        CollectiveRequest::new(
            CollectiveOp::AllReduce,
            Dtype::Fp32,
            Some(ReduceOp::Add),
            count,
            vec![0, 1],
            rank,
        )
    };
    assert_eq!(
        signature(&r(8, 0), 1),
        signature(&r(8, 1), 1),
        "the rank is not agreed"
    );
    assert_ne!(signature(&r(8, 0), 1), signature(&r(9, 0), 1), "count");
    // Every field agreed_fields names changes the signature.
    let base = r(8, 0);
    let changed: [(&str, CollectiveRequest); 6] = [
        (
            "op",
            CollectiveRequest {
                op: CollectiveOp::AllGather,
                ..base.clone()
            },
        ),
        (
            "dtype",
            CollectiveRequest {
                dtype: Dtype::Bf16,
                ..base.clone()
            },
        ),
        (
            "reduce op",
            CollectiveRequest {
                reduce: Some(ReduceOp::Max),
                ..base.clone()
            },
        ),
        (
            "group",
            CollectiveRequest {
                group: vec![0, 2],
                ..base.clone()
            },
        ),
        (
            "in place",
            CollectiveRequest {
                in_place: true,
                ..base.clone()
            },
        ),
        (
            "tensor lists",
            CollectiveRequest {
                io_form: crate::lower::request::IoForm::OutputBlocks,
                ..base.clone()
            },
        ),
    ];
    let agreed: Vec<&str> = crate::runtime::collective::agreed_fields(&base)
        .iter()
        .map(|(n, _)| *n)
        .collect();
    for (field, other) in &changed {
        assert!(agreed.contains(field), "{field} is an agreed field");
        assert_ne!(signature(&base, 1), signature(other, 1), "{field}");
    }
    assert_ne!(
        signature(&r(8, 0), 1),
        signature(&r(8, 0), 2),
        "program digest"
    );
}

use super::*;
use crate::error::ErrorKind;

#[test]
fn messages_round_trip_and_eof_is_none() {
    let req = CollectiveRequest::new(
        CollectiveOp::ReduceScatter,
        Dtype::Bf16,
        Some(ReduceOp::Max),
        77,
        vec![3, 1, 2],
        1,
    );
    let w = WireRequest::of(&req).unwrap();
    assert_eq!(w.request().unwrap(), req);
    // The ops only a NEFF names cross too, with their own codes.
    for (op, _) in EXT_OPS {
        let r = CollectiveRequest::new(op, Dtype::Fp32, None, 5, vec![0, 1], 0);
        let back = WireRequest::of(&r).unwrap().request().unwrap();
        assert_eq!(back.op, op);
        assert_eq!(
            crate::runtime::collective::agreed_fields(&back),
            crate::runtime::collective::agreed_fields(&r)
        );
    }
    let msgs = vec![
        Msg::Hello {
            magic: MAGIC,
            version: "x".into(),
            pid: 7,
            host: "boot-1/2".into(),
        },
        Msg::Arrive {
            id: 1,
            kind: "all_gather".into(),
            slot: 1,
            group: vec![0, 1],
            instance: 4,
            rank: 1,
            shm: "/opennrt-1-2-g1".into(),
            shm_len: 4096,
            in_len: 154,
            inline: None,
        },
        Msg::Arrive {
            id: 4,
            kind: "all_gather".into(),
            slot: 0,
            group: vec![0, 1],
            instance: 1,
            rank: 1,
            shm: String::new(),
            shm_len: 0,
            in_len: 3,
            inline: Some(hex(b"abc")),
        },
        Msg::Meet {
            id: 2,
            kind: "cc".into(),
            slot: 1,
            group: vec![3, 1, 2],
            instance: 4,
            rank: 1,
            req: Some(w),
            digest: 0x1234_5678_9abc_def0,
            seg: at(),
        },
        Msg::Segments {
            id: 2,
            error: None,
            segments: vec![
                at(),
                SegmentAt {
                    net: vec![0xfe, 0, 1],
                    output: Some(TensorAt {
                        name: "/opennrt-1-2-t3".into(),
                        len: 1 << 16,
                        offset: 4096,
                    }),
                    ..at()
                },
            ],
        },
        Msg::Done {
            id: 1,
            error: Some(WireError::of(&Error::new(
                ErrorKind::CollectivesHang,
                "stuck",
            ))),
            output: None,
        },
        Msg::Done {
            id: 3,
            error: None,
            output: Some(hex(&[0, 1, 0xab, 0xff])),
        },
    ];
    let mut buf = Vec::new();
    for m in &msgs {
        send(&mut buf, m).unwrap();
    }
    let mut r = &buf[..];
    for m in &msgs {
        assert_eq!(recv(&mut r).unwrap().as_ref(), Some(m));
    }
    assert_eq!(recv(&mut r).unwrap(), None);
    let e = WireError::of(&Error::new(ErrorKind::CollectivesHang, "stuck")).error();
    assert_eq!(e.kind(), ErrorKind::CollectivesHang);
    let mut half = &buf[..6];
    assert_eq!(
        recv(&mut half).unwrap(),
        None,
        "a cut message is end of stream"
    );
}

fn at() -> SegmentAt {
    SegmentAt {
        name: "/opennrt-1-2-d1-1".into(),
        len: 1 << 20,
        host: "boot:2a:1".into(),
        net: Vec::new(),
        output: None,
    }
}

#[test]
fn inline_data_round_trips_and_bad_hex_is_named() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    let all: Vec<u8> = (0..=255).collect();
    assert_eq!(unhex(&hex(&all)).unwrap(), all);
    assert_eq!(hex(&[0x0f, 0xa0]), "0fa0");
    let e = unhex("abc").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert!(e.message().contains("odd length"), "{e}");
    let e = unhex("0g").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert!(e.message().contains("byte 0"), "{e}");
    assert!(unhex("AB").is_err(), "lowercase only");
}

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
            proof: Some(hex(&[1, 2, 3])),
        },
        Msg::Challenge {
            nonce: hex(&[9; NONCE_LEN]),
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

/// RFC 4231 test cases 1, 2 and 6 (the last: a key longer than the block, hashed first).
#[test]
fn hmac_sha256_matches_rfc_4231() {
    let cases: [(&[u8], &[u8], &str); 3] = [
        (
            &[0x0b; 20],
            b"Hi There",
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7",
        ),
        (
            b"Jefe",
            b"what do ya want for nothing?",
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
        ),
        (
            &[0xaa; 131],
            b"Test Using Larger Than Block-Size Key - Hash Key First",
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54",
        ),
    ];
    for (key, msg, want) in cases {
        assert_eq!(hex(&hmac_sha256(key, msg)), want);
    }
}

#[test]
fn ct_eq_is_equality() {
    assert!(ct_eq(b"", b""));
    assert!(ct_eq(&[7; 32], &[7; 32]));
    assert!(!ct_eq(&[7; 32], &[7; 31]), "lengths differ");
    for i in 0..32 {
        let mut b = [7u8; 32];
        b[i] ^= 0x80;
        assert!(!ct_eq(&[7; 32], &b), "differs at byte {i}");
    }
}

/// The proof depends on the secret, the nonce and every field the hello claims.
#[test]
fn the_proof_binds_secret_nonce_and_hello() {
    let k = b"0123456789abcdef";
    let n = [5u8; NONCE_LEN];
    let p = proof(k, &n, MAGIC, "1.0", 42, "h");
    assert_eq!(p, proof(k, &n, MAGIC, "1.0", 42, "h"));
    for other in [
        proof(b"0123456789abcdeF", &n, MAGIC, "1.0", 42, "h"),
        proof(k, &[6u8; NONCE_LEN], MAGIC, "1.0", 42, "h"),
        proof(k, &n, MAGIC + 1, "1.0", 42, "h"),
        proof(k, &n, MAGIC, "1.1", 42, "h"),
        proof(k, &n, MAGIC, "1.0", 43, "h"),
        proof(k, &n, MAGIC, "1.0", 42, "g"),
        // The fields are length-prefixed: moving bytes between them changes the proof.
        proof(k, &n, MAGIC, "1.0h", 42, ""),
    ] {
        assert_ne!(other, p);
    }
}

/// A length over the bound is refused before anything is read or allocated (2^31 here, and
/// the hello's own bound); a length within it reads the body.
#[test]
fn a_length_over_the_bound_is_refused_before_reading_the_body() {
    let mut huge = (1u32 << 31).to_le_bytes().to_vec();
    huge.extend([0u8; 16]);
    assert_eq!(
        recv_bounded(&mut huge.as_slice(), MAX_MESSAGE),
        Err(Fault::TooLong(1 << 31, MAX_MESSAGE))
    );
    // The stranger: the magic's bytes, then a 2^60 length.
    let mut magic_then_huge = MAGIC.to_le_bytes().to_vec();
    magic_then_huge.extend((1u64 << 60).to_le_bytes());
    assert_eq!(
        recv_bounded(&mut magic_then_huge.as_slice(), MAX_HELLO),
        Err(Fault::TooLong(MAGIC, MAX_HELLO))
    );
    let mut buf = Vec::new();
    send(&mut buf, &Msg::Bye).unwrap();
    assert_eq!(recv_bounded(&mut buf.as_slice(), MAX_HELLO), Ok(Msg::Bye));
    let over = buf.len() as u32 - 5; // the body is one byte longer
    assert_eq!(
        recv_bounded(&mut buf.as_slice(), over),
        Err(Fault::TooLong(over + 1, over))
    );
    assert_eq!(recv_bounded(&mut &buf[..3], MAX_HELLO), Err(Fault::Closed));
    let mut junk = 4u32.to_le_bytes().to_vec();
    junk.extend(b"\xff{]x");
    assert!(matches!(
        recv_bounded(&mut junk.as_slice(), MAX_HELLO),
        Err(Fault::Garbage(_))
    ));
    const { assert!(MAX_HELLO < MAX_MESSAGE && (INLINE_MAX as u64) * 2 < MAX_MESSAGE as u64) };
}

//! Two services of one process talk over the loopback, as two processes would: each has its
//! own endpoint, and the store is this process's. Every test uses its own cores (the registry
//! is process-wide) and its own port. Tests skip, saying why, where libfabric is missing
//! (ci/test.sh installs it, and `OPENNRT_TEST_STRICT=1` makes the skip a failure).

use super::*;
use crate::error::ErrorKind;
use crate::runtime::tensor::{Placement, Tensor};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn settings(port: u16, chunk: usize) -> Settings {
    Settings {
        port,
        connect_timeout: Duration::from_secs(10),
        peer_timeout: Duration::from_secs(2),
        chunk,
        ifname: None,
    }
}

/// `nrt_close` stops every service of the process (`shutdown_all`), so these tests do not
/// interleave with the ones that start and close the runtime.
fn serial() -> parking_lot::MutexGuard<'static, ()> {
    crate::runtime::state::tests::SERIAL.lock()
}

fn fabric() -> bool {
    match crate::net::fabric::library() {
        Ok(_) => true,
        Err(e) => {
            assert!(!crate::testdata::strict(), "{}", e.message());
            eprintln!("SKIPPED: {}", e.message());
            false
        }
    }
}

fn wait_connected(c: &Comm) {
    let until = Instant::now() + Duration::from_secs(10);
    while !c.test().unwrap() {
        assert!(Instant::now() < until, "no connection");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn wait_done(r: &Request) -> Result<usize> {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(n) = r.test()? {
            return Ok(n);
        }
        assert!(Instant::now() < until, "request never completed");
        std::thread::yield_now();
    }
}

/// A pair of connected communicators between cores `a` (sender) and `b` (receiver).
fn pair(a: u32, b: u32, s: Settings) -> (Comm, Comm) {
    init(a, s.clone()).unwrap();
    init(b, s).unwrap();
    let rx = accept(b, "127.0.0.1", a).unwrap();
    let tx = connect(a, "127.0.0.1", b).unwrap();
    wait_connected(&tx);
    wait_connected(&rx);
    (tx, rx)
}

fn pattern(len: usize, salt: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(salt) ^ (i >> 8) as u8)
        .collect()
}

#[test]
fn tensors_of_every_size_arrive_byte_for_byte() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    let _serial = serial();
    if !fabric() {
        return;
    }
    let (tx, rx) = pair(10, 11, settings(free_port(), 4096));
    for (k, &len) in [0usize, 1, 4095, 4096, 4097, 3 * 4096 + 5, 1 << 20]
        .iter()
        .enumerate()
    {
        let src = Tensor::allocate(Placement::Host, None, len as u64 + 16, "src").unwrap();
        src.write(8, &pattern(len, k as u8)).unwrap();
        let dst = Tensor::allocate(Placement::Device, Some(0), len as u64 + 32, "dst").unwrap();
        // The receive is posted before the send for half the sizes, after it for the rest.
        let (r, s) = if k % 2 == 0 {
            let r = rx.recv(&dst, 16, len as u64 + 16).unwrap();
            (r, tx.send(&src, 8, len as u64).unwrap())
        } else {
            let s = tx.send(&src, 8, len as u64).unwrap();
            (rx.recv(&dst, 16, len as u64 + 16).unwrap(), s)
        };
        assert_eq!(wait_done(&s).unwrap(), len, "bytes sent, {len}");
        assert_eq!(wait_done(&r).unwrap(), len, "bytes received, {len}");
        let mut got = vec![0u8; len];
        dst.read(16, &mut got).unwrap();
        assert!(
            got == pattern(len, k as u8),
            "payload of {len} bytes differs"
        );
        // Nothing was written outside the range.
        let mut head = [1u8; 16];
        dst.read(0, &mut head).unwrap();
        assert_eq!(head, [0u8; 16]);
        // Reported done: recycled, so a second test is refused.
        let e = r.test().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Invalid, "{}", e.message());
        assert!(e.message().contains("tested again"), "{}", e.message());
    }
    close(10).unwrap();
    close(11).unwrap();
}

#[test]
fn many_requests_in_flight_keep_their_order() {
    let _serial = serial();
    if !fabric() {
        return;
    }
    let (tx, rx) = pair(12, 13, settings(free_port(), 4096));
    let n = MAX_PENDING_REQUESTS;
    let len = 5000usize;
    let src = Tensor::allocate(Placement::Host, None, (n * len) as u64, "src").unwrap();
    let all: Vec<u8> = (0..n).flat_map(|i| pattern(len, i as u8)).collect();
    src.write(0, &all).unwrap();
    let dst = Tensor::allocate(Placement::Host, None, (n * len) as u64, "dst").unwrap();
    let sends: Vec<Request> = (0..n)
        .map(|i| tx.send(&src, (i * len) as u64, len as u64).unwrap())
        .collect();
    // The 129th send is refused while the 128 are not yet reported done.
    let e = tx.send(&src, 0, 1).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Resource, "{}", e.message());
    let recvs: Vec<Request> = (0..n)
        .map(|i| rx.recv(&dst, (i * len) as u64, len as u64).unwrap())
        .collect();
    for r in sends.iter().chain(&recvs) {
        assert_eq!(wait_done(r).unwrap(), len);
    }
    let mut got = vec![0u8; n * len];
    dst.read(0, &mut got).unwrap();
    assert!(got == all, "the k-th receive holds the k-th send");
    close(12).unwrap();
    close(13).unwrap();
}

#[test]
fn rules_are_enforced_with_the_argument_named() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    let _serial = serial();
    if !fabric() {
        return;
    }
    let port = free_port();
    // Not started.
    let e = connect(20, "127.0.0.1", 21).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Failure, "{e}");
    assert!(e.message().contains("not started"), "{}", e.message());
    let e = init(200, settings(port, 4096)).unwrap_err();
    assert_eq!(e.fields().field.as_deref(), Some("lnc"));
    let (tx, rx) = pair(20, 21, settings(port, 4096));
    let e = init(20, settings(port, 4096)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Failure, "{e}");
    assert!(e.message().contains("already started"), "{}", e.message());
    let e = connect(20, "not-an-ip", 21).unwrap_err();
    assert_eq!(e.fields().field.as_deref(), Some("peer_ip"));
    let t = Tensor::allocate(Placement::Host, None, 100, "t").unwrap();
    let e = tx.send(&t, 90, 11).unwrap_err();
    assert_eq!(
        e.fields().field.as_deref(),
        Some("length"),
        "{}",
        e.message()
    );
    let e = tx.recv(&t, 0, 10).unwrap_err();
    assert_eq!(e.fields().field.as_deref(), Some("comm"), "{}", e.message());
    // The other way round, a close with a request in flight fails, and the next init too,
    // until a close succeeds.
    // A close with a request in flight fails, and the next init too, until a close succeeds.
    let r = rx.recv(&t, 0, 100).unwrap();
    let e = close(21).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Failure, "{e}");
    assert!(e.message().contains("in flight"), "{}", e.message());
    let e = init(21, settings(port, 4096)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Failure, "{e}");
    assert!(e.message().contains("failed"), "{}", e.message());
    let s = tx.send(&t, 0, 100).unwrap();
    wait_done(&s).unwrap();
    wait_done(&r).unwrap();
    close(21).unwrap();
    close(20).unwrap();
}

#[test]
fn a_send_larger_than_its_receive_fails_both_ends() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    let _serial = serial();
    if !fabric() {
        return;
    }
    for (sent, posted) in [(3 * 4096, 100), (200, 100), (2 * 4096 + 1, 2 * 4096)] {
        let (tx, rx) = pair(24, 25, settings(free_port(), 4096));
        let t = Tensor::allocate(Placement::Host, None, 4 * 4096, "t").unwrap();
        let r = rx.recv(&t, 0, posted).unwrap();
        let s = tx.send(&t, 0, sent).unwrap();
        let e = wait_done(&r).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Invalid, "{}", e.message());
        assert!(e.message().contains("more than"), "{}", e.message());
        assert_eq!(e.fields().field.as_deref(), Some("length"));
        // The sender's transfer ends one way or the other, and its communicator fails.
        let _ = wait_done(&s);
        let until = Instant::now() + Duration::from_secs(10);
        while tx.test().is_ok() {
            assert!(Instant::now() < until, "the sender never heard");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(rx.recv(&t, 0, 10).is_err());
        close(24).unwrap();
        close(25).unwrap();
    }
}

#[test]
fn a_peer_that_never_comes_times_out() {
    let _serial = serial();
    if !fabric() {
        return;
    }
    let mut s = settings(free_port(), 4096);
    s.connect_timeout = Duration::from_millis(300);
    init(30, s).unwrap();
    let c = connect(30, "127.0.0.1", 31).unwrap();
    let a = accept(30, "127.0.0.1", 32).unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    let e = loop {
        match c.test() {
            Ok(false) => std::thread::sleep(Duration::from_millis(5)),
            Ok(true) => panic!("connected to nobody"),
            Err(e) => break e,
        }
        assert!(Instant::now() < until);
    };
    assert_eq!(e.kind(), ErrorKind::Timeout, "{}", e.message());
    let until = Instant::now() + Duration::from_secs(10);
    while a.test().is_ok() {
        assert!(Instant::now() < until);
        std::thread::sleep(Duration::from_millis(5));
    }
    // Failed communicators do not hold a close back.
    close(30).unwrap();
}

#[test]
fn a_peer_that_closes_fails_the_waiting_requests_and_the_survivor_starts_again() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    let _serial = serial();
    if !fabric() {
        return;
    }
    let port = free_port();
    let (tx, rx) = pair(40, 41, settings(port, 4096));
    let t = Tensor::allocate(Placement::Host, None, 1 << 16, "t").unwrap();
    let r = rx.recv(&t, 0, 1 << 16).unwrap();
    drop(tx);
    close(40).unwrap();
    let e = wait_done(&r).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Failure, "{e}");
    assert!(e.message().contains("closed"), "{}", e.message());
    // ERROR is a sink: the request says so again.
    assert!(r.test().is_err());
    close(41).unwrap();
    let (tx, rx) = pair(40, 41, settings(port, 4096));
    let r = rx.recv(&t, 0, 100).unwrap();
    let s = tx.send(&t, 0, 100).unwrap();
    wait_done(&s).unwrap();
    wait_done(&r).unwrap();
    close(40).unwrap();
    close(41).unwrap();
}

#[test]
fn a_closed_senders_eager_transfers_are_still_received_and_nothing_more() {
    // A send below the eager size is done before the receiver posts. The sender may then close
    // before the receiver asks: the receives of what it sent must still complete, and only
    // the one after them fails (seen in CI: capi-tests/sendrecv's empty-and-tiny case).
    let _serial = serial();
    if !fabric() {
        return;
    }
    let (tx, rx) = pair(44, 45, settings(free_port(), 4096));
    let src = Tensor::allocate(Placement::Host, None, 300, "src").unwrap();
    src.write(0, &pattern(300, 7)).unwrap();
    for (offset, len) in [(0, 100), (100, 0), (100, 200)] {
        wait_done(&tx.send(&src, offset, len).unwrap()).unwrap();
    }
    drop(tx);
    close(44).unwrap();
    // The receiver hears the close before it posts anything.
    let until = Instant::now() + Duration::from_secs(10);
    while rx.with(|c| c.peer_left).unwrap().is_none() {
        assert!(Instant::now() < until, "the close never arrived");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(rx.with(|c| c.peer_left).unwrap().unwrap().0, 3);
    let dst = Tensor::allocate(Placement::Host, None, 300, "dst").unwrap();
    for (offset, len) in [(0, 100), (100, 0), (100, 200)] {
        let r = rx.recv(&dst, offset, len).unwrap();
        assert_eq!(wait_done(&r).unwrap(), len as usize);
    }
    let mut got = vec![0; 300];
    dst.read(0, &mut got).unwrap();
    assert_eq!(got, pattern(300, 7));
    let e = rx.recv(&dst, 0, 1).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Failure, "{e}");
    close(45).unwrap();
}

#[test]
fn control_messages_and_handles_round_trip_and_garbage_is_refused() {
    use protocol::{Control, Handle};
    let all = [
        Control::Hello {
            sender_comm: 3,
            receiver_comm: 9,
            nonce: 0xdead_beef_0123_4567,
            addr: vec![2, 0, 0x1f, 0x90, 127, 0, 0, 1],
        },
        Control::Welcome {
            sender_comm: 3,
            receiver_comm: 9,
            nonce: 7,
        },
        Control::Refuse {
            sender_comm: 1,
            nonce: 8,
        },
        Control::Ping { from: 1, to: 2 },
        Control::Pong { from: 2, to: 1 },
        Control::Bye {
            from: 5,
            to: 6,
            started: 0x00ab_cdef,
        },
    ];
    for m in &all {
        let bytes = m.encode();
        assert_eq!(&Control::decode(&bytes).unwrap(), m);
        // Every proper prefix is cut short, and a trailing byte is refused.
        for n in 0..bytes.len() {
            assert!(Control::decode(&bytes[..n]).is_err(), "{m:?} cut at {n}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(Control::decode(&longer).is_err());
    }
    assert!(
        Control::decode(b"ONSR\x01\x04\x01\x00\x02\x00").is_err(),
        "another version (1: a bye without the transfers started)"
    );
    assert!(Control::decode(b"ONSR\x02\x63").is_err(), "an unknown kind");
    let h = Handle {
        addr: vec![0, 1, 254, 255],
        comm: 12,
        nonce: 0x0123_4567_89ab_cdef,
    };
    assert_eq!(h.to_text(), "12.0123456789abcdef.0001feff");
    assert_eq!(Handle::parse(&h.to_text()).unwrap(), h);
    for bad in [
        "",
        "12",
        "12.zz.00",
        "12.1.0",
        "12.1.0g",
        "x.1.00",
        "1.1.00.00",
        "70000.1.00",
    ] {
        assert!(Handle::parse(bad).is_err(), "{bad:?}");
    }
    // The tags: a first chunk ignores its count, a later chunk's index is exact.
    let first = protocol::data_tag(protocol::TagKind::First, 5, 77, 3);
    let posted = protocol::data_tag(protocol::TagKind::First, 5, 77, 0);
    assert_eq!(
        first & !protocol::FIRST_IGNORE,
        posted & !protocol::FIRST_IGNORE
    );
    assert_eq!(protocol::tag_low(first), 3);
    assert_ne!(
        protocol::data_tag(protocol::TagKind::Chunk, 5, 77, 1),
        protocol::data_tag(protocol::TagKind::Chunk, 5, 78, 1)
    );
    assert_eq!(
        protocol::CONTROL_TAG & !protocol::CONTROL_IGNORE,
        0,
        "control messages are kind 0"
    );
    assert_ne!(
        first & !protocol::CONTROL_IGNORE,
        0,
        "data never matches a control receive"
    );
}

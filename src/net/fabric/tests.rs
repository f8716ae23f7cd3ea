//! The endpoint against the real libfabric, on the loopback: skipped (named) where libfabric
//! cannot be loaded, a failure under `OPENNRT_TEST_STRICT=1`.

use super::*;

fn have_libfabric() -> bool {
    match library() {
        Ok(_) => true,
        Err(e) => {
            assert!(
                !crate::testdata::strict(),
                "{} (OPENNRT_TEST_STRICT=1)",
                e.message()
            );
            eprintln!("SKIPPED: {}", e.message());
            false
        }
    }
}

fn pair(ip: &str) -> Option<(Endpoint, Endpoint)> {
    let ip: std::net::IpAddr = ip.parse().unwrap();
    let a = Endpoint::open(Some(ip)).ok()?;
    let b = Endpoint::open(Some(ip)).ok()?;
    Some((a, b))
}

/// Payload `i` of the test: its length and bytes say which message it is.
fn payload(i: usize) -> Vec<u8> {
    let len = match i % 7 {
        0 => 8,
        1 => 9,
        2 => 4096,
        3 => 65_537,
        4 => 1 << 20,
        5 => 4 << 20,
        _ => 33,
    };
    let mut v: Vec<u8> = (0..len)
        .map(|k| (k as u32).wrapping_mul(31).wrapping_add(i as u32) as u8)
        .collect();
    v[..8].copy_from_slice(&(i as u64).to_le_bytes());
    v
}

/// Both endpoints send `n` messages to each other while receiving `n`: every message arrives
/// once, intact. (Not in order of completion: the provider may complete a large receive after
/// a later small one — the proxy orders messages by its own sequence numbers.)
fn exchange(mut a: Endpoint, mut b: Endpoint, n: usize) {
    let (an, bn) = (a.name().unwrap(), b.name().unwrap());
    let to_b = a.insert(&bn).unwrap();
    let to_a = b.insert(&an).unwrap();
    let side = move |mut ep: Endpoint, to: u64| {
        std::thread::spawn(move || {
            let msgs: Vec<Vec<u8>> = (0..n).map(payload).collect();
            let mut bufs: Vec<Vec<u8>> = (0..8).map(|_| vec![0u8; (4 << 20) + 64]).collect();
            for (i, b) in bufs.iter_mut().enumerate() {
                // SAFETY: the buffers outlive the endpoint's use of them (drained below).
                assert!(unsafe { ep.post_recv(b.as_mut_ptr(), b.len(), i as u64) }.unwrap());
            }
            let mut seen = vec![false; n];
            let (mut sent, mut done, mut got) = (0usize, 0usize, 0usize);
            let mut out = Vec::new();
            while done < n || got < n {
                if sent < n && sent - done < 16 {
                    // SAFETY: `msgs` lives until the end of the thread.
                    if unsafe { ep.post_send(to, &[IoSlice::new(&msgs[sent])], sent as u64) }
                        .unwrap()
                    {
                        sent += 1;
                    }
                }
                out.clear();
                ep.poll(&mut out).unwrap();
                for c in &out {
                    assert_eq!(c.error, None);
                    match c.kind {
                        CompletionKind::Sent => done += 1,
                        CompletionKind::Received { len } => {
                            let b = &mut bufs[c.ctx as usize];
                            let i = u64::from_le_bytes(b[..8].try_into().unwrap()) as usize;
                            assert!(i < n && !seen[i], "message {i} arrives once");
                            assert!(b[..len] == payload(i)[..], "message {i} intact");
                            seen[i] = true;
                            got += 1;
                            // SAFETY: `b` is one of `bufs`, which outlive the endpoint's use of
                            // them (drained below), and its receive has just completed.
                            let again = unsafe { ep.post_recv(b.as_mut_ptr(), b.len(), c.ctx) };
                            assert!(again.unwrap());
                        }
                    }
                }
            }
            ep
        })
    };
    let ta = side(a, to_b);
    let tb = side(b, to_a);
    drop(ta.join().unwrap());
    drop(tb.join().unwrap());
}

#[test]
fn two_endpoints_exchange_messages_both_ways_on_ipv4() {
    if !have_libfabric() {
        return;
    }
    let (a, b) = pair("127.0.0.1").expect("tcp;ofi_rxm on 127.0.0.1");
    assert!(a.provider().contains("tcp"), "{}", a.provider());
    assert!(a.max_msg_size() >= 4 << 20);
    exchange(a, b, 700);
}

#[test]
fn ipv6_loopback_works_too() {
    if !have_libfabric() {
        return;
    }
    match pair("::1") {
        Some((a, b)) => exchange(a, b, 50),
        None => eprintln!("SKIPPED: the provider offers no endpoint on ::1"),
    }
}

#[test]
fn a_waker_ends_a_blocking_wait() {
    if !have_libfabric() {
        return;
    }
    let mut ep = Endpoint::open(Some("127.0.0.1".parse().unwrap())).unwrap();
    let w = ep.waker();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        w.wake();
    });
    let start = std::time::Instant::now();
    let mut out = Vec::new();
    assert_eq!(ep.wait_poll(&mut out, Duration::from_secs(10)).unwrap(), 0);
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "woken, not timed out"
    );
    t.join().unwrap();
    drop(ep);
}

#[test]
fn a_missing_library_is_a_network_proxy_error_naming_the_package() {
    // Checks the message a user reads, on purpose.
    let e = load_from("libfabric-does-not-exist.so.9").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NetworkProxy);
    assert!(e.message().contains("libfabric-does-not-exist.so.9"), "{e}");
    assert!(e.message().contains("apt install libfabric1"), "{e}");
}

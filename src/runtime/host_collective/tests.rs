use super::*;
use crate::error::ErrorKind;

fn threads<T: Send + 'static>(n: u32, f: impl Fn(u32) -> T + Send + Sync + 'static) -> Vec<T> {
    let f = Arc::new(f);
    let hs: Vec<_> = (0..n)
        .map(|r| {
            let f = f.clone();
            std::thread::spawn(move || f(r))
        })
        .collect();
    hs.into_iter().map(|h| h.join().unwrap()).collect()
}

#[test]
fn barrier_and_all_gather_across_threads() {
    let _s = crate::runtime::state::tests::SERIAL.lock();
    comm::reset();
    reset();
    for r in threads(3, |r| barrier(r, r, 3, 4)) {
        r.unwrap();
    }
    // Twice: the second barrier reuses the prepared collective and meets as instance 1.
    for r in threads(3, |r| barrier(r, r, 3, 4)) {
        r.unwrap();
    }
    let outs = threads(3, |r| {
        let input: Vec<u8> = (0..5).map(|i| (r * 10 + i) as u8).collect();
        let mut out = vec![0xEEu8; 15];
        all_gather(r, r, 3, 4, &input, &mut out).map(|_| out)
    });
    for o in outs {
        assert_eq!(
            o.unwrap(),
            vec![0, 1, 2, 3, 4, 10, 11, 12, 13, 14, 20, 21, 22, 23, 24]
        );
    }
    let errs = threads(3, |r| {
        let size = if r == 2 { 6 } else { 4 };
        let input = vec![1u8; size];
        let mut out = vec![0u8; 3 * size];
        all_gather(r, r, 3, 4, &input, &mut out)
    });
    for e in errs {
        let e = e.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
        let f = e.fields();
        assert_eq!(f.field.as_deref(), Some("rank_input_size"), "{e:?}");
        assert_eq!((f.rank, f.actual.as_deref()), (Some(2), Some("6")), "{e:?}");
        assert_eq!(f.expected.as_deref(), Some("4"), "{e:?}");
    }
    comm::reset();
    reset();
}

#[test]
fn a_timed_out_all_gather_with_a_lost_peer_is_a_network_failure() {
    let timeout = || Error::new(ErrorKind::Timeout, "rank 1 (global id 1) never arrived");
    let lost = || Some("no word from its host (10.231.0.2:1) for 3.0 s".to_string());
    let e = network_cause(timeout(), lost);
    assert_eq!(e.kind(), ErrorKind::NetworkProxy);
    assert!(e.message().contains("never arrived"), "{e}");
    assert!(e.message().contains("10.231.0.2"), "{e}");
    // No lost peer: still the timeout. Another failure: unchanged, lost peer or not.
    assert_eq!(network_cause(timeout(), || None).kind(), ErrorKind::Timeout);
    let closed = Error::new(
        ErrorKind::Closed,
        "nrt_close while nrt_all_gather was pending",
    );
    assert_eq!(network_cause(closed, lost).kind(), ErrorKind::Closed);
}

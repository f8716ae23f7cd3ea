use super::*;
use crate::error::Error;
use crate::isa::enums::Dtype;
use crate::lower::request::{CollectiveOp, ReduceOp};

fn req(count: u64, rank: u32) -> CollectiveRequest {
    CollectiveRequest::new(
        CollectiveOp::AllReduce,
        Dtype::Bf16,
        Some(ReduceOp::Add),
        count,
        vec![0, 1, 2, 3],
        rank,
    )
}

fn program(r: &CollectiveRequest, tag: &str) -> Program {
    Program {
        request: r.clone(),
        selection: vec![tag.to_string()],
        ranks: Vec::new(),
    }
}

#[test]
fn digest_is_stable_and_spreads() {
    // Pinned so that a change of the digest (which would silently change every key) shows.
    assert_eq!(digest(b""), digest(b""));
    assert_ne!(digest(b"a"), digest(b"b"));
    assert_ne!(digest(b"ab"), digest(b"ba"));
    assert_ne!(digest(b"\0"), digest(b""));
    let d = digest(b"opennrt");
    assert_eq!(d, 0x54549cee202ab5641792e8fe3a09b872);
    assert_ne!((d >> 64) as u64, d as u64, "the two lanes are independent");
    let mut seen = std::collections::HashSet::new();
    for i in 0..10_000u32 {
        assert!(seen.insert(digest(&i.to_le_bytes())));
    }
}

#[test]
fn signature_ignores_the_rank_only() {
    let t = "trn2.48xlarge/lnc2";
    assert_eq!(Signature::of(&req(8, 0), t), Signature::of(&req(8, 3), t));
    assert_ne!(Signature::of(&req(8, 0), t), Signature::of(&req(9, 0), t));
    assert_ne!(
        Signature::of(&req(8, 0), t),
        Signature::of(&req(8, 0), "trn1")
    );
    let mut r = req(8, 0);
    r.in_place = true;
    assert_ne!(Signature::of(&r, t), Signature::of(&req(8, 0), t));
    assert!(Signature::of(&req(8, 3), t).key.contains("\"rank\":0,"));
}

#[test]
fn hit_miss_and_shared_program() {
    let c = SignatureCache::new(4);
    let r = req(8, 1);
    let s = Signature::of(&r, "topo");
    let mut builds = 0;
    let p1 = c
        .get_or_insert_with(&s, || {
            builds += 1;
            Ok(program(&r, "built"))
        })
        .unwrap();
    let p2 = c
        .get_or_insert_with(&Signature::of(&req(8, 2), "topo"), || {
            builds += 1;
            Ok(program(&r, "again"))
        })
        .unwrap();
    assert_eq!(builds, 1);
    assert!(Arc::ptr_eq(&p1, &p2));
    assert_eq!(
        c.stats(),
        CacheStats {
            hits: 1,
            misses: 1,
            evictions: 0,
            len: 1
        }
    );
}

#[test]
fn build_errors_are_not_cached() {
    let c = SignatureCache::new(2);
    let s = Signature::from_key("k");
    let e = c
        .get_or_insert_with(&s, || Err(Error::invalid("no")))
        .unwrap_err();
    assert_eq!(e.message(), "no");
    assert_eq!(c.stats().len, 0);
    let r = req(1, 0);
    c.get_or_insert_with(&s, || Ok(program(&r, "ok"))).unwrap();
    assert_eq!(c.stats().len, 1);
}

#[test]
fn lru_eviction() {
    let c = SignatureCache::new(2);
    let r = req(1, 0);
    let sig = |k: &str| Signature::from_key(k.to_string());
    for k in ["a", "b"] {
        c.get_or_insert_with(&sig(k), || Ok(program(&r, k)))
            .unwrap();
    }
    assert!(c.get(&sig("a")).is_some()); // a is now more recent than b
    c.get_or_insert_with(&sig("c"), || Ok(program(&r, "c")))
        .unwrap();
    assert_eq!(c.stats().evictions, 1);
    assert!(c.get(&sig("b")).is_none(), "b was least recently used");
    assert!(c.get(&sig("a")).is_some() && c.get(&sig("c")).is_some());
    assert_eq!(c.stats().len, 2);
    c.clear();
    assert_eq!(c.stats().len, 0);
}

/// Two keys forced into one digest: the full-key check keeps them apart.
#[test]
fn collision_guard() {
    let c = SignatureCache::new(4);
    let r = req(1, 0);
    let a = Signature::from_key("key-a");
    let b = Signature {
        digest: a.digest,
        key: Arc::from("key-b"),
    };
    let pa = c.get_or_insert_with(&a, || Ok(program(&r, "a"))).unwrap();
    assert!(c.get(&b).is_none(), "same digest, different key: a miss");
    let pb = c.get_or_insert_with(&b, || Ok(program(&r, "b"))).unwrap();
    assert_eq!(pa.selection, ["a"]);
    assert_eq!(pb.selection, ["b"]);
    assert_eq!(c.get(&a).unwrap().selection, ["a"]);
    assert_eq!(c.get(&b).unwrap().selection, ["b"]);
    assert_eq!(c.stats().len, 2);
}

#[test]
fn concurrent_callers_share_one_program() {
    let c = Arc::new(SignatureCache::new(8));
    let r = req(64, 0);
    let s = Signature::of(&r, "t");
    let ps: Vec<Arc<Program>> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..8)
            .map(|_| {
                let (c, s, r) = (c.clone(), s.clone(), r.clone());
                sc.spawn(move || c.get_or_insert_with(&s, || Ok(program(&r, "x"))).unwrap())
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(ps.iter().all(|p| Arc::ptr_eq(p, &ps[0])));
    assert_eq!(c.stats().len, 1);
    assert_eq!(c.stats().hits + c.stats().misses, 8);
}

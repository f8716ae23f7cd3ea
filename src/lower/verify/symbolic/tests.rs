use super::*;

const W: Writer = Writer {
    rank: 0,
    entry: 0,
    tape: 0,
    step: 0,
};

fn terms(m: &Memory, st: usize, start: u64, end: u64) -> Vec<(u64, u64, Option<Term>)> {
    let mut v = Vec::new();
    m.pieces(st, start, end, &mut v);
    v.into_iter()
        .map(|p| (p.start, p.end, p.seg.map(|s| s.term())))
        .collect()
}

#[test]
fn copy_shifts_deltas_and_splits() {
    let mut m = Memory::new(2, 10, false);
    let out = m.store(0, Buf::Output);
    let mut s = Vec::new();
    m.copy((m.store(1, Buf::Input), 2), (out, 5), 4, W, &mut s)
        .unwrap();
    assert_eq!(
        terms(&m, out, 0, 10),
        vec![
            (0, 5, None),
            (5, 9, Some(Term::single(1, -3))),
            (9, 10, None)
        ]
    );
    // Overwrite the middle: the old segment is split around it.
    m.copy((m.store(0, Buf::Input), 0), (out, 6), 2, W, &mut s)
        .unwrap();
    let t = terms(&m, out, 5, 9);
    assert_eq!(t[0], (5, 6, Some(Term::single(1, -3))));
    assert_eq!(t[1], (6, 8, Some(Term::single(0, -6))));
    assert_eq!(t[2], (8, 9, Some(Term::single(1, -3))));
    assert!(m.copy((out, 0), (out, 1), 2, W, &mut s).is_err());
}

#[test]
fn reduce_is_a_multiset_union() {
    let mut m = Memory::new(3, 8, false);
    let sc = m.store(0, Buf::Scratch);
    let mut s = Vec::new();
    m.copy((m.store(1, Buf::Input), 0), (sc, 0), 4, W, &mut s)
        .unwrap();
    m.copy((m.store(2, Buf::Input), 4), (sc, 4), 4, W, &mut s)
        .unwrap();
    let out = m.store(0, Buf::Output);
    m.reduce(&[(m.store(0, Buf::Input), 0), (sc, 0)], (out, 0), 8, W)
        .unwrap();
    let t = terms(&m, out, 0, 8);
    assert_eq!(t.len(), 2);
    assert_eq!(t[0].2.as_ref().unwrap().to_string(), "in0[e] ⊕ in1[e]");
    assert_eq!(t[1].2.as_ref().unwrap().to_string(), "in0[e] ⊕ in2[e]");
    // Reducing the same source twice counts it twice.
    let i0 = m.store(0, Buf::Input);
    m.reduce(&[(i0, 0), (i0, 0)], (out, 0), 2, W).unwrap();
    let t = terms(&m, out, 0, 2);
    assert_eq!(t[0].2.as_ref().unwrap().describe_at(1), "2×in0[1]");
}

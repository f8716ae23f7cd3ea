//! Tests of the deferred batch: conflict rules and that a flush equals in-order execution.

use super::*;
use crate::device::memory::Memory;

fn span(region: usize, off: usize, len: usize) -> Span {
    Span { region, off, len }
}

fn copy(d: Span, s: Span) -> Op {
    Op::Copy { dst: d, src: s }
}

#[test]
fn ranges_merge_and_detect_overlap() {
    let mut r = Ranges::default();
    r.insert(span(0, 10, 10));
    r.insert(span(0, 20, 5)); // touches: merged into 10..25
    r.insert(span(1, 0, 4));
    assert_eq!(r.0.len(), 2);
    assert!(r.overlaps(span(0, 24, 1)));
    assert!(!r.overlaps(span(0, 25, 100)));
    assert!(!r.overlaps(span(0, 0, 10)));
    assert!(r.overlaps(span(0, 0, 11)));
    assert!(!r.overlaps(span(2, 0, 100)));
    assert!(!r.overlaps(span(0, 12, 0)), "empty spans overlap nothing");
}

#[test]
fn levels_follow_read_write_rules() {
    let mut b = Batch::default();
    b.push(copy(span(0, 0, 8), span(1, 0, 8))).unwrap();
    // Read after write, write after write, write after read: one level up.
    assert_eq!(b.level_for(&copy(span(2, 0, 8), span(0, 4, 8))), 1);
    assert_eq!(b.level_for(&copy(span(0, 7, 2), span(2, 0, 2))), 1);
    assert_eq!(b.level_for(&copy(span(1, 6, 4), span(2, 0, 4))), 1);
    // Read after read and disjoint writes: independent, level 0.
    assert_eq!(b.level_for(&copy(span(2, 0, 8), span(1, 0, 8))), 0);
    assert_eq!(b.level_for(&copy(span(0, 8, 8), span(3, 0, 8))), 0);
    // A chain climbs one level per dependency, up to MAX_LEVELS.
    let mut c = Batch::default();
    for k in 0..MAX_LEVELS {
        c.push(copy(span(0, 0, 8), span(1, 0, 8))).unwrap();
        assert_eq!(c.levels.len(), k + 1);
    }
    assert!(c.push(copy(span(0, 0, 8), span(1, 0, 8))).is_err());
}

/// A reduce then a copy of its result (a ring step's RecvReduceCopy): two levels, and the copy
/// sees the reduced bytes.
#[test]
fn dependent_ops_run_in_order() {
    let mut m = Memory::new(1);
    m.map(0, 0x1000, 64).unwrap();
    m.write(0, 0x1000, &[1, 0, 2, 0, 3, 0, 4, 0]).unwrap();
    let spec = Arc::new(ReduceSpec {
        numerics: Numerics::default(),
        op: CceOp::Max,
        dtype: Dtype::Fp32,
        scales: None,
    });
    let mut b = Batch::default();
    // bytes 16..24 = max(bytes 0..8, bytes 8..16) as fp32; then copy 16..24 -> 32..40.
    b.push(Op::Reduce {
        dst: span(0, 16, 8),
        srcs: vec![SrcSpan::Mem(span(0, 0, 8)), SrcSpan::Mem(span(0, 8, 8))],
        spec,
    })
    .unwrap();
    b.push(copy(span(0, 32, 8), span(0, 16, 8))).unwrap();
    assert_eq!(b.levels.len(), 2);
    b.flush(&mut m, 2);
    let mut got = [0u8; 8];
    m.read(0, 0x1000 + 32, &mut got).unwrap();
    // max(x, +0.0) over the positive tiny fp32 values is x itself.
    assert_eq!(got, [1, 0, 2, 0, 3, 0, 4, 0]);
}

/// Many independent copies and reduces over a few regions, flushed on 1 and on 4 threads and
/// compared with the same ops applied one by one with plain slices.
#[test]
fn flush_equals_in_order_execution_on_any_thread_count() {
    let len = 3 << 20;
    let build = || {
        let mut m = Memory::new(1);
        for (i, base) in [0x1000_0000u64, 0x2000_0000, 0x3000_0000]
            .iter()
            .enumerate()
        {
            m.map(0, *base, len as u64).unwrap();
            let bytes: Vec<u8> = (0..len)
                .map(|k| ((k * 7 + i * 13) % 251) as u8 & 0x3F)
                .collect();
            m.write(0, *base, &bytes).unwrap();
        }
        m
    };
    let spec = Arc::new(ReduceSpec {
        numerics: Numerics::default(),
        op: CceOp::Add,
        dtype: Dtype::Bf16,
        scales: None,
    });
    let ops = vec![
        copy(span(2, 0, 1 << 20), span(0, 0, 1 << 20)),
        copy(span(2, 1 << 20, 4096), span(0, 0, 4096)),
        Op::Reduce {
            dst: span(1, 0, 2 << 20),
            srcs: vec![SrcSpan::Mem(span(0, 1 << 20, 2 << 20)), SrcSpan::Dst],
            spec: Arc::clone(&spec),
        },
        Op::Reduce {
            dst: span(2, 2 << 20, 1 << 20),
            srcs: vec![
                SrcSpan::Mem(span(0, 0, 1 << 20)),
                SrcSpan::Mem(span(1, 2 << 20, 1 << 20)),
            ],
            spec,
        },
    ];
    // The reference: each op on plain vectors, in order.
    let mut want: Vec<Vec<u8>> = {
        let mut m = build();
        m.region_bytes_mut()
            .into_iter()
            .map(|r| r.to_vec())
            .collect()
    };
    for op in &ops {
        match op {
            Op::Copy { dst, src } => {
                let s = want[src.region][src.off..src.end()].to_vec();
                want[dst.region][dst.off..dst.end()].copy_from_slice(&s);
            }
            Op::Reduce { dst, srcs, spec } => {
                let own = want[dst.region][dst.off..dst.end()].to_vec();
                let v: Vec<Vec<u8>> = srcs
                    .iter()
                    .map(|s| match s {
                        SrcSpan::Mem(m) => want[m.region][m.off..m.end()].to_vec(),
                        SrcSpan::Dst => own.clone(),
                    })
                    .collect();
                let refs: Vec<&[u8]> = v.iter().map(|x| &x[..]).collect();
                let mut out = vec![0u8; dst.len];
                cce::reduce(spec.op, spec.dtype, &refs, &mut out).unwrap();
                want[dst.region][dst.off..dst.end()].copy_from_slice(&out);
            }
        }
    }
    for threads in [1, 4] {
        let mut m = build();
        let mut b = Batch::default();
        for op in &ops {
            assert_eq!(b.level_for(op), 0, "the test ops are independent");
            b.push(op.clone()).unwrap();
        }
        b.flush(&mut m, threads);
        assert!(b.is_empty());
        let got: Vec<Vec<u8>> = m
            .region_bytes_mut()
            .into_iter()
            .map(|r| r.to_vec())
            .collect();
        assert!(
            got == want,
            "flush on {threads} threads differs from in-order execution"
        );
    }
}

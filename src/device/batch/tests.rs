//! Tests of the deferred batch: conflict rules and that a flush equals in-order execution.

use super::*;
use crate::device::memory::Memory;

fn span(region: usize, off: usize, len: usize) -> Span {
    Span { region, off, len }
}

/// A reduce of `op` over `dtype` with the default numerics and no scales.
fn reduce_spec(op: CceOp, dtype: Dtype) -> Arc<ReduceSpec> {
    Arc::new(ReduceSpec {
        numerics: Numerics::default(),
        op,
        dtype,
        scales: None,
    })
}

/// Defer every op of `ops` into `b` as the engines do, then flush: the batch is empty after.
fn defer_and_flush(b: &mut Batch, m: &mut Memory, ops: &[Op]) {
    for op in ops {
        match op {
            Op::Copy { dst, src } => b.add_copy(m, *dst, *src),
            Op::Reduce { dst, srcs, spec } => b.add_reduce(m, spec, *dst, srcs),
        }
    }
    b.flush(m);
    assert!(b.is_empty());
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
    let spec = reduce_spec(CceOp::Max, Dtype::Fp32);
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
    b.flush(&mut m);
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
    let spec = reduce_spec(CceOp::Add, Dtype::Bf16);
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
        let mut b = Batch::new(threads);
        for op in &ops {
            assert_eq!(b.level_for(op), 0, "the test ops are independent");
            b.push(op.clone()).unwrap();
        }
        b.flush(&mut m);
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

/// Apply `ops` one by one to plain copies of the regions: the in-order reference.
fn in_order(mut want: Vec<Vec<u8>>, ops: &[Op]) -> Vec<Vec<u8>> {
    for op in ops {
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
    want
}

fn regions(m: &mut Memory) -> Vec<Vec<u8>> {
    m.region_bytes_mut()
        .into_iter()
        .map(|r| r.to_vec())
        .collect()
}

/// Three regions of small bf16 integers (every sum of a few of them is exact).
fn small_memory(len: usize) -> Memory {
    let mut m = Memory::new(1);
    for (i, base) in [0x1000_0000u64, 0x2000_0000, 0x3000_0000]
        .iter()
        .enumerate()
    {
        m.map(0, *base, len as u64).unwrap();
        let bytes: Vec<u8> = (0..len)
            .map(|k| {
                if k % 2 == 0 {
                    0
                } else {
                    0x3F + ((k / 2 + i) % 3) as u8
                }
            })
            .collect();
        m.write(0, *base, &bytes).unwrap();
    }
    m
}

/// Adjacent pieces of one stream extend the open op; a gap, another kind or a piece that
/// reads what the open op writes starts a new one.
#[test]
fn adjacent_pieces_coalesce() {
    let mut m = small_memory(1 << 16);
    let mut b = Batch::new(1);
    for k in 0..8 {
        b.add_copy(&mut m, span(1, k * 64, 64), span(0, k * 64, 64));
    }
    assert!(b.levels.is_empty(), "still open");
    match &b.open {
        Some(Op::Copy { dst, src }) => {
            assert_eq!((*dst, *src), (span(1, 0, 512), span(0, 0, 512)));
        }
        o => panic!("one open copy expected, got {o:?}"),
    }
    // Not adjacent: a new op, the first one placed.
    b.add_copy(&mut m, span(1, 1024, 64), span(0, 1024, 64));
    assert_eq!(b.levels.len(), 1);
    // Reads what the open op writes: never merged, and a level up once placed.
    b.add_copy(&mut m, span(1, 1088, 64), span(1, 1024, 64));
    assert_eq!(b.levels.len(), 1);
    b.close(&mut m);
    assert_eq!(b.levels.len(), 2);
    assert_eq!(b.levels[0].ops.len(), 2);

    let spec = reduce_spec(CceOp::Add, Dtype::Bf16);
    let mut r = Batch::new(1);
    for k in 0..4 {
        let srcs = [SrcSpan::Mem(span(0, 4096 + k * 32, 32)), SrcSpan::Dst];
        r.add_reduce(&mut m, &spec, span(2, k * 32, 32), &srcs);
    }
    match &r.open {
        Some(Op::Reduce { dst, srcs, .. }) => {
            assert_eq!(*dst, span(2, 0, 128));
            assert_eq!(srcs[..], [SrcSpan::Mem(span(0, 4096, 128)), SrcSpan::Dst]);
        }
        o => panic!("one open reduce expected, got {o:?}"),
    }
    // Another op (MAX): not merged.
    let max = Arc::new(ReduceSpec {
        op: CceOp::Max,
        ..(*spec).clone()
    });
    let srcs = [SrcSpan::Mem(span(0, 4224, 32)), SrcSpan::Dst];
    r.add_reduce(&mut m, &max, span(2, 128, 32), &srcs);
    assert_eq!(r.levels.len(), 1);
    r.flush(&mut m);
    assert!(r.is_empty());
}

/// A deterministic stream of adjacent, gapped, dependent (read-after-write, write-after-read,
/// write-after-write) and in-place pieces, deferred through `add_copy` / `add_reduce` (so
/// coalescing, levels and the level limit all take part) and flushed on 1, 2 and 4 threads:
/// always the bytes of in-order execution.
#[test]
fn any_stream_flushes_to_in_order_bytes() {
    let len = 1 << 20;
    let spec = reduce_spec(CceOp::Add, Dtype::Bf16);
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = |n: usize| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % n as u64) as usize
    };
    let mut ops = Vec::new();
    let (mut at, mut region) = (0usize, 0usize);
    for _ in 0..600 {
        // Mostly continue the stream (coalescing), sometimes jump.
        if rnd(4) == 0 {
            at = rnd(len / 1024 - 64) * 512;
            region = rnd(3);
        }
        let n = 2 * (1 + rnd(2048));
        let (dst, other) = (span(region, at, n), (region + 1 + rnd(2)) % 3);
        let src = span(other, (at + 2 * rnd(64)) % (len - n), n);
        let op = match rnd(3) {
            0 => Op::Copy { dst, src },
            1 => Op::Reduce {
                dst,
                srcs: vec![SrcSpan::Mem(src), SrcSpan::Dst],
                spec: Arc::clone(&spec),
            },
            _ => Op::Reduce {
                dst,
                srcs: vec![SrcSpan::Dst, SrcSpan::Mem(src)],
                spec: Arc::clone(&spec),
            },
        };
        ops.push(op);
        at = (at + n) % (len - 8192);
    }
    let want = in_order(regions(&mut small_memory(len)), &ops);
    for threads in [1, 2, 4] {
        let mut m = small_memory(len);
        let mut b = Batch::new(threads);
        defer_and_flush(&mut b, &mut m, &ops);
        assert!(
            regions(&mut m) == want,
            "a stream flushed on {threads} threads differs from in-order execution"
        );
    }
}

/// Ops run at once (`copy_now`, `reduce_now`) with sources before, after and around the
/// destination in its own region and in other regions, in place too.
#[test]
fn ops_run_now_like_in_order() {
    let len = 1 << 14;
    let spec = reduce_spec(CceOp::Add, Dtype::Bf16);
    let ops = vec![
        Op::Copy {
            dst: span(1, 100, 300),
            src: span(1, 0, 300),
        },
        Op::Copy {
            dst: span(2, 0, 256),
            src: span(0, 512, 256),
        },
        Op::Copy {
            dst: span(0, 4096, 256),
            src: span(2, 512, 256),
        },
        Op::Reduce {
            dst: span(1, 2048, 64),
            srcs: vec![
                SrcSpan::Mem(span(1, 0, 64)),
                SrcSpan::Dst,
                SrcSpan::Mem(span(1, 4096, 64)),
                SrcSpan::Mem(span(0, 64, 64)),
                SrcSpan::Mem(span(2, 64, 64)),
            ],
            spec: Arc::clone(&spec),
        },
        Op::Reduce {
            dst: span(0, 8192, 128),
            srcs: vec![SrcSpan::Mem(span(2, 0, 128)), SrcSpan::Mem(span(1, 0, 128))],
            spec,
        },
    ];
    let want = in_order(regions(&mut small_memory(len)), &ops);
    let mut m = small_memory(len);
    for op in &ops {
        match op {
            Op::Copy { dst, src } => copy_now(&mut m, *dst, *src),
            Op::Reduce { dst, srcs, spec } => reduce_now(&mut m, spec, *dst, srcs),
        }
    }
    assert!(regions(&mut m) == want);
}

/// Machines flushing at the same time share the one pool (a flush that finds it busy runs on
/// its own thread): every result is still exact.
#[test]
fn concurrent_flushes_share_the_pool() {
    let len = 4 << 20;
    let ops: Vec<Op> = (0..4)
        .map(|k| copy(span(1, k << 20, 1 << 20), span(0, k << 20, 1 << 20)))
        .collect();
    let want = in_order(regions(&mut small_memory(len)), &ops);
    std::thread::scope(|sc| {
        for _ in 0..4 {
            sc.spawn(|| {
                for _ in 0..3 {
                    let mut m = small_memory(len);
                    let mut b = Batch::new(4);
                    for op in &ops {
                        b.push(op.clone()).unwrap();
                    }
                    b.flush(&mut m);
                    assert!(regions(&mut m) == want);
                }
            });
        }
    });
}

/// `recycle` hands the same buffer on to a vector of the other lifetime, emptied.
#[test]
fn recycle_keeps_the_buffer() {
    let bytes = vec![1u8; 64];
    let mut v: Vec<JobSrc<'_>> = Vec::with_capacity(100);
    v.push(JobSrc::Bytes(&bytes));
    let (at, cap) = (v.as_ptr() as usize, v.capacity());
    let w: Vec<JobSrc<'static>> = recycle(v);
    assert!(w.is_empty());
    assert_eq!((w.as_ptr() as usize, w.capacity()), (at, cap));
}

/// A batch keeps what its flushes allocated (emptied levels, reduces' source lists, the
/// level's job, piece and source lists): the same stream deferred and flushed again finds
/// every list as it was left (no allocation, no growth), and the bytes are still those of
/// in-order execution.
#[test]
fn a_batch_reuses_its_lists() {
    let (len, n) = (4 << 20, 512 << 10);
    let spec = reduce_spec(CceOp::Add, Dtype::Bf16);
    // Four independent reduces (a level of 2 MiB: parallel, two pieces each), then four
    // copies of their results (a second level).
    let mut ops = Vec::new();
    for k in 0..4 {
        ops.push(Op::Reduce {
            dst: span(0, k << 20, n),
            srcs: vec![SrcSpan::Dst, SrcSpan::Mem(span(1, k << 20, n))],
            spec: Arc::clone(&spec),
        });
    }
    for k in 0..4 {
        ops.push(copy(span(2, k << 20, n), span(0, k << 20, n)));
    }
    let mut m = small_memory(len);
    let mut b = Batch::new(2);
    let lists = |b: &Batch| {
        (
            (b.levels.capacity(), b.spare.len(), b.spare_srcs.len()),
            (b.bufs.srcs.as_ptr() as usize, b.bufs.srcs.capacity()),
            (b.bufs.jobs.as_ptr() as usize, b.bufs.jobs.capacity()),
            (b.bufs.slots.as_ptr() as usize, b.bufs.slots.capacity()),
            b.bufs.carve.gaps.capacity(),
        )
    };
    let mut first = None;
    for _ in 0..2 {
        defer_and_flush(&mut b, &mut m, &ops);
        let now = lists(&b);
        assert_eq!(now.0 .1, 2, "both levels kept");
        assert_eq!(now.0 .2, 4, "the four reduces' source lists kept");
        assert!(now.3 .1 >= 8, "the pieces' slots kept: {now:?}");
        assert_eq!(
            *first.get_or_insert(now),
            now,
            "the second flush reused every list"
        );
    }
    let want = in_order(in_order(regions(&mut small_memory(len)), &ops), &ops);
    assert!(regions(&mut m) == want, "differs from in-order execution");
}

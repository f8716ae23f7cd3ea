//! CCE tests (docs/contract/device.md §2.3, §11.3): exact small cases per dtype and op, the streaming
//! source-order rounding, NaN/Inf/±0, FP8 overflow modes, the limits, and an ignored benchmark.

use super::*;
use crate::dtype::{Fp8Format, FP32_NAN};
use std::time::Instant;

const FLOATS: [Dtype; 6] = crate::dtype::CCE_IO_DTYPES;

fn codec(d: Dtype, n: &Numerics) -> FloatCodec {
    FloatCodec::new(d, n).unwrap()
}

fn enc(d: Dtype, n: &Numerics, v: &[f32]) -> Vec<u8> {
    let c = codec(d, n);
    let mut b = vec![0u8; v.len() * c.size()];
    c.narrow(v, &mut b);
    b
}

fn dec(d: Dtype, n: &Numerics, b: &[u8]) -> Vec<f32> {
    let c = codec(d, n);
    let mut v = vec![0f32; b.len() / c.size()];
    c.widen(b, &mut v);
    v
}

/// Reduce f32 values (exactly representable in `d`) and return the widened result.
fn run(n: &Numerics, op: CceOp, d: Dtype, srcs: &[&[f32]], scales: Option<&[f32]>) -> Vec<f32> {
    let bytes: Vec<Vec<u8>> = srcs.iter().map(|s| enc(d, n, s)).collect();
    let refs: Vec<&[u8]> = bytes.iter().map(|b| &b[..]).collect();
    let mut out = vec![0u8; bytes[0].len()];
    reduce_with(n, op, d, &refs, scales, &mut out).unwrap();
    dec(d, n, &out)
}

fn red(op: CceOp, d: Dtype, srcs: &[&[f32]]) -> Vec<f32> {
    run(&Numerics::default(), op, d, srcs, None)
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn exact_small_cases_every_dtype_and_op() {
    // Values with ≤ 2 mantissa bits and within E3M4's range: exact in every format.
    let a = [1.0, -2.0, 3.0, 0.5, 0.0];
    let b = [2.0, 3.0, -4.0, 0.5, -0.0];
    let c = [-1.0, 1.0, 1.5, 1.0, -0.0];
    for d in FLOATS {
        assert_eq!(
            red(CceOp::Add, d, &[&a, &b, &c]),
            [2.0, 2.0, 0.5, 2.0, 0.0],
            "{d}"
        );
        assert_eq!(
            red(CceOp::Max, d, &[&a, &b, &c]),
            [2.0, 3.0, 3.0, 1.0, 0.0],
            "{d}"
        );
        assert_eq!(
            red(CceOp::Min, d, &[&a, &b, &c]),
            [-1.0, -2.0, -4.0, 0.5, -0.0],
            "{d}"
        );
        assert_eq!(red(CceOp::Add, d, &[&a]), a, "{d}: one source is a copy");
        let fma = run(
            &Numerics::default(),
            CceOp::Fma,
            d,
            &[&a, &b],
            Some(&[2.0, 0.5]),
        );
        assert_eq!(fma, [3.0, -2.5, 4.0, 1.25, 0.0], "{d}");
    }
}

#[test]
fn accumulation_is_streaming_in_source_order() {
    // f32: 2^24 + 2^16 + 1 ties back to 2^24 + 2^16 (twice), which ties to even bf16 2^24;
    // 1 + 1 + 2^16 + 2^24 is exact in f32 and above the bf16 midpoint.
    let big = [16_777_216.0f32];
    let mid = [65_536.0f32];
    let one = [1.0f32];
    let n = Numerics::default();
    let fwd = enc(
        Dtype::Bf16,
        &n,
        &red(CceOp::Add, Dtype::Bf16, &[&big, &mid, &one, &one]),
    );
    let rev = enc(
        Dtype::Bf16,
        &n,
        &red(CceOp::Add, Dtype::Bf16, &[&one, &one, &mid, &big]),
    );
    assert_eq!(fwd, 0x4B80u16.to_le_bytes());
    assert_eq!(rev, 0x4B81u16.to_le_bytes());
    // The same in FP32 I/O: the per-add rounding shows directly.
    let f = red(CceOp::Add, Dtype::Fp32, &[&big, &one, &one]);
    let r = red(CceOp::Add, Dtype::Fp32, &[&one, &one, &big]);
    assert_eq!((f[0], r[0]), (16_777_216.0, 16_777_218.0));
}

/// Scalar reference: the docs/contract/device.md §2.3 loop one element at a time.
fn reference(op: CceOp, d: Dtype, srcs: &[Vec<u8>]) -> Vec<u8> {
    let n = Numerics::default();
    let c = codec(d, &n);
    let sz = c.size();
    let mut out = vec![0u8; srcs[0].len()];
    for e in 0..out.len() / sz {
        let r = e * sz..(e + 1) * sz;
        let mut acc = c.widen_one(&srcs[0][r.clone()]);
        for s in &srcs[1..] {
            let x = c.widen_one(&s[r.clone()]);
            acc = match op {
                CceOp::Add => acc + x,
                CceOp::Max => max_nan(acc, x),
                _ => min_nan(acc, x),
            };
        }
        c.narrow_one(acc, &mut out[r]);
    }
    out
}

fn pseudo_random(len: usize, seed: u32, d: Dtype) -> Vec<u8> {
    let mut x = seed.wrapping_mul(2_654_435_761) | 1;
    let v: Vec<f32> = (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            ((x % 20_001) as f32 - 10_000.0) / 97.0
        })
        .collect();
    enc(d, &Numerics::default(), &v)
}

#[test]
fn blocked_paths_match_the_scalar_reference() {
    for d in FLOATS {
        for len in [0usize, 1, BLOCK - 1, BLOCK + 1, 2 * BLOCK + 500] {
            for ns in [1usize, 2, 3, 8] {
                let srcs: Vec<Vec<u8>> = (0..ns)
                    .map(|s| pseudo_random(len, s as u32 + 7, d))
                    .collect();
                let refs: Vec<&[u8]> = srcs.iter().map(|b| &b[..]).collect();
                for op in [CceOp::Add, CceOp::Max, CceOp::Min] {
                    let mut out = vec![0xAAu8; srcs[0].len()];
                    reduce(op, d, &refs, &mut out).unwrap();
                    assert_eq!(out, reference(op, d, &srcs), "{d} {op:?} len {len} n {ns}");
                    // In place at every position gives the same bytes.
                    for pos in 0..ns {
                        let mut io = srcs[pos].clone();
                        let others: Vec<&[u8]> = (0..ns)
                            .filter(|&i| i != pos)
                            .map(|i| &srcs[i][..])
                            .collect();
                        reduce_in_place_with(
                            &Numerics::default(),
                            op,
                            d,
                            &mut io,
                            pos,
                            &others,
                            None,
                        )
                        .unwrap();
                        assert_eq!(io, out, "{d} {op:?} in place at {pos}");
                    }
                }
            }
        }
    }
}

#[test]
fn nan_inf_and_signed_zero() {
    let (inf, nan) = (f32::INFINITY, f32::NAN);
    for d in [
        Dtype::Bf16,
        Dtype::Fp16,
        Dtype::Fp32,
        Dtype::Fp8E4,
        Dtype::Fp8E5,
    ] {
        let a = [inf, nan, 1.0, -0.0, -0.0, 0.0, inf, nan];
        let b = [-inf, 1.0, nan, -0.0, 0.0, -0.0, 1.0, nan];
        let add = red(CceOp::Add, d, &[&a, &b]);
        assert!(add[0].is_nan() && add[1].is_nan() && add[2].is_nan() && add[7].is_nan());
        assert_eq!(bits(&add[3..7]), bits(&[-0.0, 0.0, 0.0, inf]), "{d}");
        for op in [CceOp::Max, CceOp::Min] {
            let r = red(op, d, &[&a, &b]);
            assert!(
                r[1].is_nan() && r[2].is_nan() && r[7].is_nan(),
                "{d} {op:?}"
            );
        }
        let mx = red(CceOp::Max, d, &[&a, &b]);
        let mn = red(CceOp::Min, d, &[&a, &b]);
        assert_eq!(bits(&mx[3..6]), bits(&[-0.0, 0.0, 0.0]), "{d}");
        assert_eq!(bits(&mn[3..6]), bits(&[-0.0, -0.0, -0.0]), "{d}");
        assert_eq!((mx[0], mn[0], mx[6], mn[6]), (inf, -inf, inf, 1.0));
    }
    // NaN outputs are canonical.
    let n = Numerics::default();
    let out = |d: Dtype| enc(d, &n, &red(CceOp::Add, d, &[&[inf], &[-inf]]));
    assert_eq!(out(Dtype::Bf16), 0x7FC0u16.to_le_bytes());
    assert_eq!(out(Dtype::Fp16), 0x7E00u16.to_le_bytes());
    assert_eq!(out(Dtype::Fp32), FP32_NAN.to_le_bytes());
    assert_eq!(out(Dtype::Fp8E5), [0x7E]);
    assert_eq!(out(Dtype::Fp8E4), [0x7F]);
    // Raw FP32 NaN payloads from the sources are canonicalised on the way out.
    let s = f32::from_bits(0xFFC0_1234).to_le_bytes();
    let mut o = [0u8; 4];
    reduce(CceOp::Add, Dtype::Fp32, &[&s, &1f32.to_le_bytes()], &mut o).unwrap();
    assert_eq!(o, FP32_NAN.to_le_bytes());
}

#[test]
fn fp8_overflow_and_saturation() {
    let one = |n: &Numerics, d: Dtype, a: f32, b: f32| -> u8 {
        let bytes = [[n.fp8(d).unwrap().encode(a)], [n.fp8(d).unwrap().encode(b)]];
        let mut o = [0u8];
        reduce_with(n, CceOp::Add, d, &[&bytes[0], &bytes[1]], None, &mut o).unwrap();
        o[0]
    };
    let ieee = Numerics::default();
    assert_eq!(one(&ieee, Dtype::Fp8E4, 240.0, 240.0), 0x78); // Inf
    assert_eq!(one(&ieee, Dtype::Fp8E4, -240.0, -8.0), 0xF8); // −248 → −Inf
    assert_eq!(one(&ieee, Dtype::Fp8E4, 224.0, 16.0), 0x77); // 240 exactly
    assert_eq!(one(&ieee, Dtype::Fp8E5, 57344.0, 57344.0), 0x7C);
    assert_eq!(one(&ieee, Dtype::Fp8E3, 15.5, 0.25), 0x70); // 15.75 → Inf
    let fnn = ieee.with_e4m3_fn(false);
    assert_eq!(one(&fnn, Dtype::Fp8E4, 448.0, 448.0), 0x7F); // NaN
    assert_eq!(one(&fnn, Dtype::Fp8E4, 240.0, 208.0), 0x7E); // 448 exactly
    let sat = ieee.with_e4m3_fn(true);
    assert_eq!(one(&sat, Dtype::Fp8E4, 448.0, 448.0), 0x7E);
    assert_eq!(one(&sat, Dtype::Fp8E4, -448.0, -448.0), 0xFE);
    let ext = ieee.with_e3m4_extended(false);
    assert_eq!(one(&ext, Dtype::Fp8E3, 15.5, 0.5), 0x70); // 16 is finite here
    assert_eq!(one(&ext, Dtype::Fp8E3, 30.0, 30.0), 0x7F);
    assert_eq!(Fp8Format::E3M4_EXT.decode(0x70), 16.0);
}

#[test]
fn fma_is_fused_and_scales_every_source() {
    // acc = −(1 + 2^-22); x = 1 + 2^-23, scale = 1 + 2^-23: x·scale = 1 + 2^-22 + 2^-46, so a
    // fused add leaves 2^-46 where an unfused one gives 0.
    let a = -(1.0 + 2f32.powi(-22));
    let x = 1.0 + 2f32.powi(-23);
    let r = run(
        &Numerics::default(),
        CceOp::Fma,
        Dtype::Fp32,
        &[&[a], &[x]],
        Some(&[1.0, x]),
    );
    assert_eq!(r, [2f32.powi(-46)]);
    let r = run(
        &Numerics::default(),
        CceOp::Fma,
        Dtype::Fp32,
        &[&[-0.0]],
        Some(&[1.0]),
    );
    assert_eq!(bits(&r), bits(&[-0.0]));
    let mut o = [0u8; 2];
    let s = [1u8, 2];
    reduce_fma(Dtype::Fp8E5, &[&s, &s], &[1.0, 1.0], &mut o).unwrap();
    assert_eq!(
        dec(Dtype::Fp8E5, &Numerics::default(), &o),
        [2f32.powi(-15), 2f32.powi(-14)]
    );
}

#[test]
fn limits_and_bad_requests_are_rejected() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    let src = vec![0u8; 8];
    let mut out = vec![0u8; 8];
    let many: Vec<&[u8]> = vec![&src[..]; 33];
    let e = reduce(CceOp::Add, Dtype::Bf16, &many, &mut out).unwrap_err();
    assert!(
        e.message().contains("33 sources") && e.message().contains("DMA abort"),
        "{e}"
    );
    reduce(CceOp::Add, Dtype::Bf16, &many[..32], &mut out).unwrap();
    assert!(reduce(CceOp::Add, Dtype::Bf16, &[], &mut out).is_err());
    let short = [0u8; 6];
    let e = reduce(CceOp::Max, Dtype::Fp16, &[&src, &short], &mut out).unwrap_err();
    assert!(e.message().contains("source 1 is 6 bytes"), "{e}");
    assert!(reduce(CceOp::Add, Dtype::Fp32, &[&src[..6]], &mut out[..6]).is_err());
    for d in [
        Dtype::Int8,
        Dtype::Int32,
        Dtype::Uint64,
        Dtype::Fp32r,
        Dtype::Invalid,
    ] {
        let e = reduce(CceOp::Add, d, &[&src], &mut out).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::DmaAbort);
        assert!(e.message().contains("cannot be reduced"), "{e}");
    }
    let e = reduce(CceOp::Add, Dtype::Int32, &[&src], &mut out).unwrap_err();
    assert!(e.message().contains("integer"), "{e}");
    assert!(reduce(CceOp::Ext, Dtype::Bf16, &[&src], &mut out).is_err());
    assert!(reduce(CceOp::Fma, Dtype::Bf16, &[&src], &mut out).is_err());
    assert!(reduce_fma(Dtype::Bf16, &[&src, &src], &[1.0], &mut out).is_err());
    let n = Numerics::default();
    assert!(reduce_with(&n, CceOp::Add, Dtype::Bf16, &[&src], Some(&[1.0]), &mut out).is_err());
    let mut io = src.clone();
    assert!(reduce_in_place_with(&n, CceOp::Add, Dtype::Bf16, &mut io, 2, &[&src], None).is_err());
    assert!(
        reduce_in_place_with(&n, CceOp::Add, Dtype::Bf16, &mut io, 0, &[&short], None).is_err()
    );
}

/// Throughput of ADD over 16 Mi elements (never asserted). Run with
/// `cargo test --release -p opennrt cce -- --ignored --nocapture`.
#[test]
#[ignore]
fn cce_bench_add_throughput() {
    const N: usize = 16 << 20;
    let mut dst = vec![0u8; N * 4];
    let src = vec![1u8; N * 4];
    dst.copy_from_slice(&src); // fault the pages in
    let mut best = f64::MAX;
    for _ in 0..3 {
        let t = Instant::now();
        std::hint::black_box(&mut dst).copy_from_slice(std::hint::black_box(&src));
        best = best.min(t.elapsed().as_secs_f64());
    }
    std::hint::black_box(&dst);
    let memcpy = (N * 4) as f64 / best / 1e9;
    println!("memcpy (single thread, 64 MiB): {memcpy:.2} GB/s copied");
    for d in [Dtype::Fp32, Dtype::Bf16] {
        for ns in [2usize, 8] {
            let srcs: Vec<Vec<u8>> = (0..ns).map(|s| pseudo_random(N, s as u32, d)).collect();
            let refs: Vec<&[u8]> = srcs.iter().map(|b| &b[..]).collect();
            let mut out = vec![0u8; srcs[0].len()];
            let mut best = f64::MAX;
            for _ in 0..3 {
                let t = Instant::now();
                reduce(CceOp::Add, d, &refs, &mut out).unwrap();
                best = best.min(t.elapsed().as_secs_f64());
            }
            let bytes = (ns + 1) * out.len();
            println!(
                "CCE ADD {d:>16} {ns} sources: {:7.1} M elements/s, {:6.2} GB/s moved ({:.2} × memcpy)",
                N as f64 / best / 1e6,
                bytes as f64 / best / 1e9,
                bytes as f64 / best / 1e9 / memcpy
            );
        }
    }
}

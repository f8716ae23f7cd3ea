//! NEFF models through the C ABI, ranks as threads of this process (docs/neff.md;
//! docs/contract/abi.md §3.4, §5.9): generated NEFFs for every op × {fp32, bf16} × {2, 3, 8}
//! ranks run through `nrt_load_collectives` + `nrt_execute` with exact results (checked
//! against `runtime::verifiable`'s reference, computed from the inputs alone; the
//! variable-size ops with non-uniform tables, leaving uncovered output bytes alone); a bad
//! all-to-all-v table and ranks whose NEFFs differ fail everywhere naming the problem; the real NEFF of testdata loads under
//! LNC=2 with its I/O list, fails to execute with the documented status, and is refused under
//! LNC=1 naming both sizes.
//!
//! One test: the phases set process-wide variables and initialise the runtime in turn.

use opennrt::status::nrt_status::*;
use std::ffi::{c_char, CStr, CString};
use std::ptr::null_mut;

use opennrt::abi;
use opennrt::abi::types::{
    nrt_model_t, nrt_tensor_info_array_t, nrt_tensor_info_t, nrt_tensor_placement_t,
    nrt_tensor_set_t, nrt_tensor_t,
};
use opennrt::isa::enums::Dtype;
use opennrt::lower::cases::A2avRecv;
use opennrt::lower::request::{
    encode_metadata, A2avMeta, CollectiveOp, CollectiveRequest, ReduceOp,
};
use opennrt::neff::build::{build, BuildOp, BuildSpec};
use opennrt::runtime::verifiable;

fn init() {
    // SAFETY: valid NUL-terminated strings.
    let st = unsafe { abi::nrt_init(0, c"".as_ptr(), c"".as_ptr()) };
    assert_eq!(st, NRT_SUCCESS, "nrt_init");
}

fn close() {
    abi::nrt_close();
}

/// Rank r's all-to-all-v metadata rows for a built variable-size NEFF: non-uniform, with
/// zero counts and gaps. all_to_all_v: `lower::cases::a2av_meta`'s table (in = out =
/// count·R). all_gather_v: rank r sends its last `c_r = (3r + 1) mod (count + 1)` elements to
/// every peer; receive windows packed in peer order.
fn variable_rows(spec: &BuildSpec) -> Vec<[Vec<u64>; 4]> {
    let n = spec.ranks as usize;
    match spec.op {
        BuildOp::AllToAllV => {
            let m =
                opennrt::lower::cases::a2av_meta(spec.ranks, spec.count, A2avRecv::Packed).unwrap();
            let t = m.table.unwrap();
            (0..n)
                .map(|r| {
                    [
                        t.send_counts[r].clone(),
                        t.send_displs[r].clone(),
                        t.recv_counts[r].clone(),
                        t.recv_displs[r].clone(),
                    ]
                })
                .collect()
        }
        BuildOp::AllGatherV => {
            let c = |r: usize| (3 * r as u64 + 1) % (spec.count + 1);
            let mut displs = vec![0; n];
            for p in 1..n {
                displs[p] = displs[p - 1] + c(p - 1);
            }
            (0..n)
                .map(|r| {
                    [
                        vec![c(r); n],
                        vec![spec.count - c(r); n],
                        (0..n).map(c).collect(),
                        displs.clone(),
                    ]
                })
                .collect()
        }
        _ => Vec::new(),
    }
}

/// The request a built NEFF's collective is, for the reference.
fn request_of(spec: &BuildSpec) -> CollectiveRequest {
    let n = spec.ranks;
    let (op, reduce) = match spec.op {
        BuildOp::AllReduce => (CollectiveOp::AllReduce, Some(ReduceOp::Add)),
        BuildOp::AllGather => (CollectiveOp::AllGather, None),
        BuildOp::ReduceScatter => (CollectiveOp::ReduceScatter, Some(ReduceOp::Add)),
        BuildOp::AllToAll => (CollectiveOp::AllToAll, None),
        BuildOp::Permute => (CollectiveOp::Permute, None),
        BuildOp::SendRecv => (CollectiveOp::PermuteImplicit, None),
        BuildOp::AllToAllV | BuildOp::AllGatherV => (CollectiveOp::AllToAllV, None),
    };
    let mut r = CollectiveRequest::new(op, spec.dtype, reduce, spec.count, (0..n).collect(), 0);
    if op == CollectiveOp::Permute {
        r.pairs = (0..n).map(|i| (i, (i + 1) % n)).collect();
    }
    if spec.op.is_variable() {
        let esize = spec.dtype.size_bytes().unwrap() as u64;
        let rows: Vec<Vec<Vec<u64>>> = variable_rows(spec)
            .into_iter()
            .map(|r| r.to_vec())
            .collect();
        let meta = A2avMeta::from_bitmap(
            0x0F,
            spec.input_bytes() / esize,
            spec.output_bytes() / esize,
            None,
        )
        .unwrap()
        .with_table(n, &rows)
        .unwrap();
        r.a2av = Some(meta);
    }
    r
}

/// A device tensor on `vnc` holding `data` (or zeros of `len`).
fn tensor(vnc: i32, name: &str, len: usize, data: Option<&[u8]>) -> *mut nrt_tensor_t {
    let mut t = null_mut();
    let cname = CString::new(name).unwrap();
    // SAFETY: valid out-parameter and name.
    let st = unsafe {
        abi::nrt_tensor_allocate(
            nrt_tensor_placement_t::NRT_TENSOR_PLACEMENT_DEVICE as u32,
            vnc,
            len,
            cname.as_ptr(),
            &mut t,
        )
    };
    assert_eq!(st, NRT_SUCCESS, "allocate {name}");
    if let Some(d) = data {
        // SAFETY: `d` has `len` bytes.
        let st = unsafe { abi::nrt_tensor_write(t, d.as_ptr().cast(), 0, d.len()) };
        assert_eq!(st, NRT_SUCCESS);
    }
    t
}

fn set_of(entries: &[(&str, *mut nrt_tensor_t)]) -> *mut nrt_tensor_set_t {
    let mut s = null_mut();
    // SAFETY: valid out-parameter.
    assert_eq!(unsafe { abi::nrt_allocate_tensor_set(&mut s) }, NRT_SUCCESS);
    for (name, t) in entries {
        let cname = CString::new(*name).unwrap();
        // SAFETY: live set and tensor.
        let st = unsafe { abi::nrt_add_tensor_to_tensor_set(s, cname.as_ptr(), *t) };
        assert_eq!(st, NRT_SUCCESS);
    }
    s
}

/// Rank `rank` of a job: load `neff`, run it `times` times with `input` (and `metadata0` for
/// the variable-size ops) into an output tensor that starts as `out_init`, return the status of
/// the first failing call (or 0), the output and the metadata tensor's bytes after the runs.
fn rank_run(
    neff: &[u8],
    rank: u32,
    world: u32,
    input: &[u8],
    meta: Option<&[u8]>,
    out_init: &[u8],
    times: u32,
) -> (i32, Vec<u8>, Vec<u8>) {
    let out_len = out_init.len();
    let vnc = rank as i32;
    let mut m: *mut nrt_model_t = null_mut();
    // SAFETY: `neff` is readable; `m` writable.
    let st = unsafe {
        abi::nrt_load_collectives(
            neff.as_ptr().cast(),
            neff.len(),
            vnc,
            1,
            rank,
            world,
            &mut m,
        )
    } as i32;
    if st != 0 {
        return (st, Vec::new(), Vec::new());
    }
    let tin = tensor(vnc, "in", input.len(), Some(input));
    let tout = tensor(vnc, "out", out_len, Some(out_init));
    let tmeta = meta.map(|m| tensor(vnc, "meta", m.len(), Some(m)));
    let mut in_list = vec![("input0", tin)];
    if let Some(t) = tmeta {
        in_list.push(("metadata0", t));
    }
    let ins = set_of(&in_list);
    let outs = set_of(&[("output0", tout)]);
    let mut status = 0;
    for _ in 0..times {
        // SAFETY: live handles.
        status = unsafe { abi::nrt_execute(m, ins, outs) } as i32;
        if status != 0 {
            break;
        }
    }
    let mut out = vec![0u8; out_len];
    let mut meta_after = vec![0u8; meta.map_or(0, <[u8]>::len)];
    // SAFETY: `out` has `out_len` bytes, `meta_after` the metadata tensor's.
    unsafe {
        if let Some(t) = tmeta {
            let n = meta_after.len();
            assert_eq!(
                abi::nrt_tensor_read(t, meta_after.as_mut_ptr().cast(), 0, n),
                NRT_SUCCESS
            );
        }
        assert_eq!(
            abi::nrt_tensor_read(tout, out.as_mut_ptr().cast(), 0, out_len),
            NRT_SUCCESS
        );
        let (mut a, mut b) = (ins, outs);
        abi::nrt_destroy_tensor_set(&mut a);
        abi::nrt_destroy_tensor_set(&mut b);
        let (mut a, mut b) = (tin, tout);
        abi::nrt_tensor_free(&mut a);
        abi::nrt_tensor_free(&mut b);
        if let Some(mut t) = tmeta {
            abi::nrt_tensor_free(&mut t);
        }
        assert_eq!(abi::nrt_unload(m), NRT_SUCCESS);
    }
    (status, out, meta_after)
}

/// Every op × dtype on `n` ranks (threads), twice each (the second run reuses the load).
fn generated_neffs_run_exactly(n: u32) {
    for dtype in [Dtype::Fp32, Dtype::Bf16] {
        for op in BuildOp::ALL {
            let count = 3 * 64 + 5; // not a multiple of anything the lowering likes
            let spec = BuildSpec::new(op, n, count, dtype);
            let neff = build(&spec).unwrap();
            let req = request_of(&spec);
            let inputs = verifiable::inputs(&req).unwrap();
            let zeros = vec![0u8; spec.output_bytes() as usize];
            assert_eq!(inputs[0].len() as u64, spec.input_bytes(), "{op:?}");
            let metas: Vec<Vec<u8>> = variable_rows(&spec)
                .iter()
                .map(|rows| encode_metadata(n, rows).unwrap())
                .collect();
            let results: Vec<(i32, Vec<u8>, Vec<u8>)> = std::thread::scope(|s| {
                let hs: Vec<_> = (0..n)
                    .map(|r| {
                        let (neff, input) = (&neff, &inputs[r as usize]);
                        let meta = metas.get(r as usize).map(Vec::as_slice);
                        let zeros = &zeros;
                        s.spawn(move || rank_run(neff, r, n, input, meta, zeros, 2))
                    })
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap()).collect()
            });
            for (r, (st, _, _)) in results.iter().enumerate() {
                assert_eq!(*st, 0, "{op:?} {dtype:?} n={n} rank {r}");
            }
            let got: Vec<Vec<u8>> = results.into_iter().map(|(_, o, _)| o).collect();
            let checked = verifiable::check(&req, &inputs, &got).unwrap();
            assert_eq!(checked.wrong, 0, "{op:?} {dtype:?} n={n}: {checked:?}");
        }
    }
}

/// The variable-size ops write only their receive windows: output bytes no window covers keep
/// what the tensor held (here 0xEE), as the device's DMA leaves them (docs/neff.md §1.3).
fn variable_ops_keep_uncovered_output_bytes(n: u32) {
    for op in [BuildOp::AllToAllV, BuildOp::AllGatherV] {
        let spec = BuildSpec::new(op, n, 11, Dtype::Fp32);
        let neff = build(&spec).unwrap();
        let req = request_of(&spec);
        let inputs = verifiable::inputs(&req).unwrap();
        let want_zero_gaps = verifiable::expected(&req, &inputs).unwrap();
        let rows = variable_rows(&spec);
        let fill = vec![0xEEu8; spec.output_bytes() as usize];
        let got: Vec<Vec<u8>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..n as usize)
                .map(|r| {
                    let meta = encode_metadata(n, &rows[r]).unwrap();
                    let (neff, input, fill) = (&neff, &inputs[r], &fill);
                    s.spawn(move || {
                        let (st, out, _) = rank_run(neff, r as u32, n, input, Some(&meta), fill, 1);
                        assert_eq!(st, 0, "{op:?} rank {r}");
                        out
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut gaps = 0;
        for r in 0..n as usize {
            let mut want = vec![0xEEu8; fill.len()];
            for (d, c) in rows[r][3].iter().zip(&rows[r][2]) {
                let (a, b) = (*d as usize * 4, (*d + *c) as usize * 4);
                want[a..b].copy_from_slice(&want_zero_gaps[r][a..b]);
            }
            gaps += want.iter().filter(|&&b| b == 0xEE).count();
            assert_eq!(got[r], want, "{op:?} n={n} rank {r}");
        }
        assert!(gaps > 0, "{op:?}: the table leaves some output uncovered");
    }
}

/// A table one rank got wrong (rank 1 sends past its input) fails with NRT_INVALID on every
/// rank (each resolves the same gathered table, docs/neff.md §1.3), well before the timeout.
fn a_bad_table_fails_every_rank(n: u32) {
    let spec = BuildSpec::new(BuildOp::AllToAllV, n, 8, Dtype::Fp32);
    let neff = build(&spec).unwrap();
    let good = spec.uniform_metadata().unwrap();
    let mut bad = good.clone();
    bad[0][0] = 8 * u64::from(n) + 1;
    let input = vec![0u8; spec.input_bytes() as usize];
    let zeros = vec![0u8; spec.output_bytes() as usize];
    let t0 = std::time::Instant::now();
    let st: Vec<i32> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..n)
            .map(|r| {
                let rows = if r == 1 { &bad } else { &good };
                let meta = encode_metadata(n, rows).unwrap();
                let (neff, input, zeros) = (&neff, &input, &zeros);
                s.spawn(move || rank_run(neff, r, n, input, Some(&meta), zeros, 1).0)
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(st, vec![2; n as usize], "NRT_INVALID on every rank");
    assert!(t0.elapsed().as_secs() < 15, "failed before the timeout");
}

/// src1_bitmap 0x03 (docs/contract/isa.md §9 rule 9): row 2 is an output — the runtime writes
/// the counts each rank received into it — and row 3 is derived (peer p's data lands at
/// `p·(out/R)`). The built word's bitmap is patched to make such a NEFF.
fn received_counts_are_written_back() {
    use opennrt::neff::build::{container, HeaderFields};
    use opennrt::neff::{NeffHeader, Payload};
    let n = 2;
    let spec = BuildSpec::new(BuildOp::AllToAllV, n, 4, Dtype::Fp32);
    let file = build(&spec).unwrap();
    let h = NeffHeader::parse(&file).unwrap();
    let p = Payload::read(&h, &file).unwrap();
    let members: Vec<(String, Vec<u8>)> = p
        .names()
        .map(|m| {
            let mut b = p.get(m).unwrap().to_vec();
            if m == "sg00/SP.bin" {
                assert_eq!((b[0], b[64], b[64 + 42]), (0xD9, 0xDA, 0x0F));
                b[64 + 42] = 0x03; // 0xDA byte 42: src1_bitmap
            }
            (m.to_string(), b)
        })
        .collect();
    let neff = container(
        &members,
        &HeaderFields {
            name: h.name.clone(),
            ..HeaderFields::default()
        },
    )
    .unwrap();
    // Rank r sends r + 1 elements to each peer from the start of its block for that peer;
    // rows 2 and 3 hold garbage (0xFFFF_FFFF: an output and a derived row are not read).
    let rows = |r: u64| {
        [
            vec![r + 1; 2],
            vec![0, 4],
            vec![u64::from(u32::MAX); 2],
            vec![7; 2],
        ]
    };
    let inputs: Vec<Vec<u8>> = (0..n)
        .map(|r| {
            (0..8u32)
                .flat_map(|i| ((10 * r + i) as f32).to_le_bytes())
                .collect()
        })
        .collect();
    let zeros = vec![0u8; 32];
    let got: Vec<(i32, Vec<u8>, Vec<u8>)> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..n)
            .map(|r| {
                let meta = encode_metadata(n, &rows(u64::from(r))).unwrap();
                let (neff, input, zeros) = (&neff, &inputs[r as usize], &zeros);
                s.spawn(move || rank_run(neff, r, n, input, Some(&meta), zeros, 1))
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let f32s = |b: &[u8]| -> Vec<f32> {
        b.chunks(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    };
    // By hand: rank 0 receives 1 element of rank 0's block 0 at 0 and 2 elements of rank 1's
    // block 0 at 4 (row 3 derived: p·8/2); rank 1 receives rank 0's element 4 and rank 1's
    // elements 14, 15.
    assert_eq!(got[0].0, 0);
    assert_eq!(got[1].0, 0);
    assert_eq!(f32s(&got[0].1), [0.0, 0.0, 0.0, 0.0, 10.0, 11.0, 0.0, 0.0]);
    assert_eq!(f32s(&got[1].1), [4.0, 0.0, 0.0, 0.0, 14.0, 15.0, 0.0, 0.0]);
    for (r, (_, _, meta)) in got.iter().enumerate() {
        let back = opennrt::lower::request::decode_metadata(n, meta).unwrap();
        assert_eq!(back[2], [1, 2], "rank {r}: row 2 holds the counts received");
        assert_eq!(back[3], [7, 7], "rank {r}: row 3 is left alone");
        assert_eq!(
            back[0],
            rows(r as u64)[0],
            "rank {r}: the inputs are left alone"
        );
    }
}

/// A permute whose pairs leave ranks 0 and 2 untargeted (only 0 → 1): their output tensors
/// keep what they held; rank 1 gets rank 0's input.
fn permute_leaves_non_targets_alone() {
    let n = 3;
    let mut spec = BuildSpec::new(BuildOp::Permute, n, 16, Dtype::Fp32);
    spec.pairs = Some(vec![(0, 1)]);
    let neff = build(&spec).unwrap();
    let inputs: Vec<Vec<u8>> = (0..n).map(|r| vec![r as u8 + 1; 64]).collect();
    let fill = vec![0xEEu8; 64];
    let got: Vec<Vec<u8>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..n)
            .map(|r| {
                let (neff, input, fill) = (&neff, &inputs[r as usize], &fill);
                s.spawn(move || {
                    let (st, out, _) = rank_run(neff, r, n, input, None, fill, 1);
                    assert_eq!(st, 0, "rank {r}");
                    out
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(got[1], inputs[0]);
    assert_eq!(got[0], fill, "rank 0 is no target");
    assert_eq!(got[2], fill, "rank 2 is no target");
}

/// Rank 1 carries two collectives, rank 0 one: both fail with NRT_INVALID (the sequence check
/// names the counts), within the timeout.
fn mismatched_neffs_fail_everywhere() {
    let one = build(&BuildSpec::new(BuildOp::AllReduce, 2, 64, Dtype::Fp32)).unwrap();
    let mut two_spec = BuildSpec::new(BuildOp::AllReduce, 2, 64, Dtype::Fp32);
    two_spec.ops = 2;
    let two = build(&two_spec).unwrap();
    let input = vec![0u8; 256];
    let t0 = std::time::Instant::now();
    let st: Vec<i32> = std::thread::scope(|s| {
        let a = s.spawn(|| rank_run(&one, 0, 2, &input, None, &input, 1).0);
        let b = s.spawn(|| rank_run(&two, 1, 2, &input, None, &input, 1).0);
        vec![a.join().unwrap(), b.join().unwrap()]
    });
    assert_eq!(st, [2, 2], "NRT_INVALID on both ranks");
    assert!(t0.elapsed().as_secs() < 30, "failed before the timeout");
}

fn tensor_info(m: *mut nrt_model_t) -> Vec<(String, i32, usize, i32, Vec<u32>)> {
    let mut info: *mut nrt_tensor_info_array_t = null_mut();
    // SAFETY: live model, writable out-parameter; the array is read within its count.
    unsafe {
        assert_eq!(abi::nrt_get_model_tensor_info(m, &mut info), NRT_SUCCESS);
        let n = (*info).tensor_count as usize;
        let first = std::ptr::addr_of!((*info).tensor_array).cast::<nrt_tensor_info_t>();
        let out = (0..n)
            .map(|i| {
                let e = &*first.add(i);
                let name = CStr::from_ptr(e.name.as_ptr() as *const c_char)
                    .to_string_lossy()
                    .into_owned();
                let shape = if e.shape.is_null() {
                    Vec::new()
                } else {
                    std::slice::from_raw_parts(e.shape, e.ndim as usize).to_vec()
                };
                (name, e.usage as i32, e.size, e.dtype as i32, shape)
            })
            .collect();
        assert_eq!(abi::nrt_free_model_tensor_info(info), NRT_SUCCESS);
        assert_eq!(
            abi::nrt_free_model_tensor_info(info),
            NRT_INVALID_HANDLE,
            "a second free"
        );
        out
    }
}

/// The real NEFF: LNC=2 loads with its I/O, execute fails with NRT_FAILURE; LNC=1 refuses it.
fn the_real_neff() {
    let Some(neff) = opennrt::testdata::read(opennrt::testdata::REAL_NEFF, "the real-NEFF phase")
    else {
        return;
    };
    std::env::set_var("OPENNRT_INSTANCE_TYPE", "trn2.48xlarge");
    std::env::set_var("NEURON_LOGICAL_NC_CONFIG", "2");
    init();
    let mut m: *mut nrt_model_t = null_mut();
    // SAFETY: readable NEFF, writable out-parameter.
    let st = unsafe { abi::nrt_load(neff.as_ptr().cast(), neff.len(), -1, 1, &mut m) };
    assert_eq!(st, NRT_SUCCESS);
    // testdata README: inputs x, y (65,536 B), output output0 (32,768 B, float16 128×128);
    // the NEFF's neff.json signature: x float16 [128, 256], y float16 [256, 128] (usage 0 =
    // input, 1 = output; dtype 7 = NRT_DTYPE_FLOAT16).
    let info = tensor_info(m);
    assert_eq!(
        info,
        [
            ("x".to_string(), 0, 65536, 7, vec![128, 256]),
            ("y".to_string(), 0, 65536, 7, vec![256, 128]),
            ("output0".to_string(), 1, 32768, 7, vec![128, 128]),
        ]
    );
    let x = tensor(0, "x", 65536, None);
    let y = tensor(0, "y", 65536, None);
    let o = tensor(0, "o", 32768, None);
    let ins = set_of(&[("x", x), ("y", y)]);
    let outs = set_of(&[("output0", o)]);
    let only_x = set_of(&[("x", x)]);
    // SAFETY: live handles.
    unsafe {
        assert_eq!(
            abi::nrt_execute(m, only_x, outs),
            NRT_INVALID,
            "y is missing"
        );
        assert_eq!(
            abi::nrt_execute(m, ins, outs),
            NRT_FAILURE,
            "compute: NRT_FAILURE"
        );
        assert_eq!(abi::nrt_unload(m), NRT_SUCCESS);
        assert_eq!(abi::nrt_unload(m), NRT_INVALID_HANDLE, "a second unload");
    }
    close();
    std::env::set_var("NEURON_LOGICAL_NC_CONFIG", "1");
    init();
    let mut m: *mut nrt_model_t = null_mut();
    // SAFETY: `neff` has `neff.len()` readable bytes and `m` is a live, writable local.
    let st = unsafe { abi::nrt_load(neff.as_ptr().cast(), neff.len(), 0, 1, &mut m) };
    assert_eq!(st, NRT_INVALID, "LNC 1 refuses an LNC 2 NEFF");
    assert!(m.is_null(), "nothing written on failure");
    close();
    std::env::remove_var("OPENNRT_INSTANCE_TYPE");
    std::env::remove_var("NEURON_LOGICAL_NC_CONFIG");
}

/// `nrta_execute_schedule` on the compute XU: both ranks queue, poll to completion, and get the
/// all-reduce; the getters describe the model.
fn scheduled_execution_and_getters() {
    let spec = BuildSpec::new(BuildOp::AllReduce, 2, 32, Dtype::Fp32);
    let neff = build(&spec).unwrap();
    let req = request_of(&spec);
    let inputs = verifiable::inputs(&req).unwrap();
    let got: Vec<Vec<u8>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..2u32)
            .map(|r| {
                let (neff, input) = (&neff, &inputs[r as usize]);
                s.spawn(move || {
                    let vnc = r as i32;
                    let mut m: *mut nrt_model_t = null_mut();
                    // SAFETY: readable NEFF, writable out-parameters, live handles below.
                    unsafe {
                        let st = abi::nrt_load_collectives(
                            neff.as_ptr().cast(),
                            neff.len(),
                            vnc,
                            1,
                            r,
                            2,
                            &mut m,
                        );
                        assert_eq!(st, NRT_SUCCESS);
                        let mut n = 0u32;
                        assert_eq!(abi::nrt_get_model_vnc_count(m, &mut n), NRT_SUCCESS);
                        assert_eq!(n, 1);
                        let mut info = opennrt::abi::types::nrt_model_info_t { vnc: 99 };
                        let mut size = 0usize;
                        let st = abi::nrt_get_model_info(m, &mut info, 4, &mut size);
                        assert_eq!((st as i32, info.vnc, size), (0, r, 4));
                        let tin = tensor(vnc, "in", input.len(), Some(input));
                        let tout = tensor(vnc, "out", 128, None);
                        let mut stats = opennrt::abi::types::nrt_vnc_memory_stats_t {
                            bytes_used: 0,
                            bytes_limit: 0,
                        };
                        let st = abi::nrt_get_vnc_memory_stats(r, &mut stats, 16, &mut size);
                        assert_eq!(st, NRT_SUCCESS);
                        assert!(stats.bytes_used >= 256 && stats.bytes_limit > stats.bytes_used);
                        let ins = set_of(&[("input0", tin)]);
                        let outs = set_of(&[("output0", tout)]);
                        let mut ret: i32 = -1;
                        let mut seq = 0u64;
                        let st = abi::nrta_execute_schedule(
                            m,
                            ins,
                            outs,
                            0,
                            (&mut ret as *mut i32).cast(),
                            &mut seq,
                        );
                        assert_eq!(st, NRT_SUCCESS);
                        let mut done = false;
                        while !done {
                            assert_eq!(abi::nrta_is_completed(seq, &mut done), NRT_SUCCESS);
                        }
                        assert_eq!(std::ptr::read_volatile(&ret), 0, "exec_ret");
                        let mut out = vec![0u8; 128];
                        abi::nrt_tensor_read(tout, out.as_mut_ptr().cast(), 0, 128);
                        assert_eq!(abi::nrt_unload(m), NRT_SUCCESS);
                        out
                    }
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let checked = verifiable::check(&req, &inputs, &got).unwrap();
    assert_eq!(checked.wrong, 0, "{checked:?}");
}

/// Sizes are 64-bit (NEFFs with inputs over 4 GiB exist): a model whose input var is 5 GiB
/// loads without allocating it and reports its size exactly; binding a small tensor to it is
/// refused naming the var.
fn a_five_gib_input_is_described_exactly() {
    use opennrt::neff::build::{container, HeaderFields};
    let big: u64 = 5 << 30;
    let def = format!(
        "{{\"var\": {{\"big\": {{\"type\": \"input\", \"var_id\": 0, \"size\": {big}}}, \
         \"out\": {{\"type\": \"output\", \"var_id\": 1, \"size\": 4}}}}}}"
    );
    let members = vec![
        (
            "kelf-0.json".to_string(),
            br#"{"graphs":[{"definition":"sg00/def.json","name":"sg00"}],"version":"0.5","target":"opennrt"}"#.to_vec(),
        ),
        ("sg00/def.json".to_string(), def.into_bytes()),
    ];
    let neff = container(&members, &HeaderFields::default()).unwrap();
    let mut m: *mut nrt_model_t = null_mut();
    // SAFETY: readable NEFF, writable out-parameter, live handles below.
    unsafe {
        let st = abi::nrt_load(neff.as_ptr().cast(), neff.len(), 0, 1, &mut m);
        assert_eq!(st, NRT_SUCCESS);
        let info = tensor_info(m);
        assert_eq!(info[0].0, "big");
        assert_eq!(info[0].2 as u64, big, "a 64-bit size");
        let small = tensor(0, "small", 16, None);
        let out = tensor(0, "o", 4, None);
        let ins = set_of(&[("big", small)]);
        let outs = set_of(&[("out", out)]);
        assert_eq!(
            abi::nrt_execute(m, ins, outs),
            NRT_INVALID,
            "16 B bound to a 5 GiB var"
        );
        assert_eq!(abi::nrt_unload(m), NRT_SUCCESS);
    }
}

#[test]
fn neff_models_through_the_c_abi() {
    std::env::set_var("NEURON_RT_EXEC_TIMEOUT", "20");
    for n in [2, 3, 8] {
        init();
        generated_neffs_run_exactly(n);
        if n == 2 {
            mismatched_neffs_fail_everywhere();
            received_counts_are_written_back();
            scheduled_execution_and_getters();
            a_five_gib_input_is_described_exactly();
        }
        if n == 3 {
            variable_ops_keep_uncovered_output_bytes(3);
            a_bad_table_fails_every_rank(3);
            permute_leaves_non_targets_alone();
        }
        close();
    }
    the_real_neff();
}

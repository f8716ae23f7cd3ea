//! The async collective path end to end through the exported functions: 4 ranks (threads) ×
//! every `nrt_cc_op_type_t` × every `nrt_dtype_t` the op allows × every `nrt_op_type_t` the
//! op allows × out of place / in place / list forms, checked with `runtime::verifiable`'s
//! independent reference (issue 5 item 4: "all ops ..., every dtype and nrt_op_type_t").

use super::*;
use crate::abi::handle::testing;
use crate::abi::nrt_async::{nrta_cc_prepare, nrta_cc_schedule};
use crate::abi::tensor::{nrt_tensor_allocate, nrt_tensor_free, nrt_tensor_read, nrt_tensor_write};
use crate::lower::request::{CollectiveOp, ReduceOp};
use crate::lower::request_api::dtype_of;
use crate::runtime::verifiable;

const RANKS: u32 = 4;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Form {
    OutOfPlace,
    InPlace,
    Lists,
}

struct Case {
    cc_op: u32,
    dtype: u32,
    op: u32,
    count: u64,
    form: Form,
}

fn op_of(cc_op: u32) -> CollectiveOp {
    [
        CollectiveOp::AllGather,
        CollectiveOp::AllReduce,
        CollectiveOp::ReduceScatter,
    ][cc_op as usize]
}

fn alloc(vnc: u32, bytes: u64) -> usize {
    let mut t = std::ptr::null_mut();
    // SAFETY: valid out-pointer and name.
    let st = unsafe { nrt_tensor_allocate(0, vnc as i32, bytes as usize, c"t".as_ptr(), &mut t) };
    assert_eq!(st as i32, 0);
    t as usize
}

/// One rank of one case: returns its output bytes (the whole output, read back).
fn rank(c: &Case, r: u32, input: Vec<u8>, esz: u64) -> Vec<u8> {
    let n = u64::from(RANKS);
    let cop = op_of(c.cc_op);
    let (in_b, out_b) = match cop {
        CollectiveOp::AllGather => (c.count * esz, n * c.count * esz),
        CollectiveOp::ReduceScatter => (n * c.count * esz, c.count * esz),
        _ => (c.count * esz, c.count * esz),
    };
    let group: Vec<u32> = (0..RANKS).collect();
    let mut comm = nrt_cc_comm_t {
        replica_group: group.as_ptr().cast_mut(),
        rank: r,
        rank_n: RANKS,
        ctx_device_id: r,
        ctx_device_count: RANKS,
        vnc: r,
    };
    let (mut ins, mut outs): (Vec<*mut nrt_tensor_t>, Vec<*mut nrt_tensor_t>) = match c.form {
        Form::OutOfPlace => (vec![alloc(r, in_b) as _], vec![alloc(r, out_b) as _]),
        Form::InPlace => {
            let t = alloc(r, in_b.max(out_b)) as _;
            (vec![t], vec![t])
        }
        Form::Lists => match cop {
            CollectiveOp::AllGather => (
                vec![alloc(r, in_b) as _],
                (0..n).map(|_| alloc(r, out_b / n) as _).collect(),
            ),
            _ => (
                (0..n).map(|_| alloc(r, in_b / n) as _).collect(),
                vec![alloc(r, out_b) as _],
            ),
        },
    };
    // Stage the input where the API takes it: the rank's block in place for an all-gather.
    let at = if c.form == Form::InPlace && cop == CollectiveOp::AllGather {
        u64::from(r) * c.count * esz
    } else {
        0
    };
    let mut off = 0usize;
    for &t in &ins {
        let len = if ins.len() == 1 {
            input.len()
        } else {
            input.len() / ins.len()
        };
        // SAFETY: live tensor; the size is the tensor's (lists) or the staged block.
        let st = unsafe { nrt_tensor_write(t, input[off..].as_ptr().cast(), at as usize, len) };
        assert_eq!(st as i32, 0);
        off += len;
    }
    let mut li = nrt_tensor_list_t {
        tensors: ins.as_mut_ptr(),
        num_tensors: ins.len(),
    };
    let mut lo = nrt_tensor_list_t {
        tensors: outs.as_mut_ptr(),
        num_tensors: outs.len(),
    };
    let mut ctx = std::ptr::null_mut();
    let mut ret = NRT_STATUS::NRT_FAILURE;
    let mut seq = 0u64;
    // SAFETY: every pointer is valid for the call; `ret` outlives the drain below.
    unsafe {
        let st = nrta_cc_prepare(
            &mut comm, &mut li, &mut lo, c.dtype, c.op, c.cc_op, &mut ctx,
        );
        assert_eq!(st as i32, 0, "prepare rank {r}");
        assert_eq!(
            nrta_cc_schedule(&mut ctx, (r % 3) as i32, &mut ret, &mut seq) as i32,
            0
        );
    }
    let sem = seq;
    while !crate::runtime::xu::is_completed(sem).unwrap() {
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
    assert_eq!(ret, NRT_STATUS::NRT_SUCCESS, "rank {r} exec_ret");
    // The whole output: for in-place reduce-scatter only the rank's block is the result.
    let mut got = Vec::new();
    let (read_from, read_at, read_len) = match (c.form, cop) {
        (Form::InPlace, CollectiveOp::ReduceScatter) => {
            (&outs, u64::from(r) * c.count * esz, c.count * esz)
        }
        _ => (&outs, 0, 0),
    };
    for &t in read_from.iter() {
        let len = if read_len > 0 {
            read_len
        } else {
            out_b / read_from.len() as u64
        };
        let mut v = vec![0u8; len as usize];
        // SAFETY: live tensor, `len` bytes inside it.
        let st =
            unsafe { nrt_tensor_read(t, v.as_mut_ptr().cast(), read_at as usize, len as usize) };
        assert_eq!(st as i32, 0);
        got.extend(v);
    }
    let mut all: Vec<_> = ins.iter().chain(outs.iter()).map(|&t| t as usize).collect();
    all.sort();
    all.dedup();
    for t in all {
        let mut t = t as *mut nrt_tensor_t;
        // SAFETY: live handle, freed once.
        unsafe { nrt_tensor_free(&mut t) };
    }
    got
}

fn run(c: Case) {
    let cop = op_of(c.cc_op);
    let d = dtype_of(c.dtype, cop).unwrap();
    // FP32R moves as 4-byte words in an all-gather (lowered as the FP32 copy).
    let d = if d == crate::isa::enums::Dtype::Fp32r {
        crate::isa::enums::Dtype::Fp32
    } else {
        d
    };
    let reduce = cop
        .is_reducing()
        .then(|| ReduceOp::from_nrt_op(c.op, "test").unwrap());
    let group: Vec<u32> = (0..RANKS).collect();
    let req = crate::lower::request::CollectiveRequest::new(cop, d, reduce, c.count, group, 0);
    let esz = req.elem_bytes().unwrap();
    let inputs = verifiable::inputs(&req).unwrap();
    let c = std::sync::Arc::new(c);
    let hs: Vec<_> = (0..RANKS)
        .map(|r| {
            let (c, input) = (c.clone(), inputs[r as usize].clone());
            std::thread::spawn(move || rank(&c, r, input, esz))
        })
        .collect();
    let got: Vec<Vec<u8>> = hs.into_iter().map(|h| h.join().unwrap()).collect();
    let chk = verifiable::check(&req, &inputs, &got).unwrap();
    assert_eq!(
        chk.wrong, 0,
        "{cop:?} {d:?} op {} {:?}: {:?}",
        c.op, c.form, chk.first
    );
}

#[test]
fn every_op_dtype_and_redop_through_the_exported_functions() {
    testing::init(|| {
        crate::runtime::comm::reset();
        for r in 0..RANKS {
            assert_eq!(
                crate::abi::collectives::nrt_cc_global_comm_init(r, r, RANKS) as i32,
                0
            );
        }
        let mut n = 0;
        for cc_op in 0..3u32 {
            let cop = op_of(cc_op);
            for dtype in 1..=15u32 {
                if dtype_of(dtype, cop).is_err() {
                    continue;
                }
                let ops: &[u32] = if cop.is_reducing() { &[0, 2, 3] } else { &[0] };
                for &op in ops {
                    for form in [Form::OutOfPlace, Form::InPlace, Form::Lists] {
                        if form == Form::Lists && cop == CollectiveOp::AllReduce {
                            continue;
                        }
                        run(Case {
                            cc_op,
                            dtype,
                            op,
                            count: 37,
                            form,
                        });
                        n += 1;
                    }
                }
            }
        }
        // 15 AG dtypes × 3 forms + 6 CCE dtypes × 3 redops × (2 + 3).
        assert_eq!(n, 15 * 3 + 6 * 3 * 5, "cases run");
        crate::runtime::xu::shutdown();
        crate::runtime::cc::reset();
        crate::runtime::comm::reset();
    });
}

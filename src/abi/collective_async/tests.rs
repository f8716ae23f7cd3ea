//! The async collective path end to end through the exported functions: 4 ranks (threads) ×
//! every `nrt_cc_op_type_t` × every `nrt_dtype_t` the op allows × every `nrt_op_type_t` the
//! op allows × out of place / in place / list forms, checked with `runtime::verifiable`'s
//! independent reference.

use super::*;
use crate::abi::collective_async::{nrta_cc_prepare, nrta_cc_schedule};
use crate::abi::handle::testing;
use crate::abi::tensor::{nrt_tensor_allocate, nrt_tensor_free, nrt_tensor_read, nrt_tensor_write};
use crate::lower::request::api::dtype_of;
use crate::lower::request::{CollectiveOp, ReduceOp};
use crate::runtime::verifiable;
use crate::status::nrt_status::*;

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
    assert_eq!(st, NRT_SUCCESS);
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
        assert_eq!(st, NRT_SUCCESS);
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
        assert_eq!(st, NRT_SUCCESS, "prepare rank {r}");
        assert_eq!(
            nrta_cc_schedule(&mut ctx, (r % 3) as i32, &mut ret, &mut seq),
            NRT_SUCCESS
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
        assert_eq!(st, NRT_SUCCESS);
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
                crate::abi::collectives::nrt_cc_global_comm_init(r, r, RANKS),
                NRT_SUCCESS
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
        crate::runtime::collective::reset();
        crate::runtime::comm::reset();
    });
}

/// One rank's tensors kept across collectives (`resident_*` tests): what a training loop does.
struct Held {
    r: u32,
    group: Vec<u32>,
    input: usize,
    output: usize,
}

impl Held {
    fn new(r: u32, group: Vec<u32>, in_b: u64, out_b: u64, in_place: bool) -> Held {
        let vnc = group[r as usize];
        let input = alloc(vnc, in_b.max(if in_place { out_b } else { 0 }));
        let output = if in_place { input } else { alloc(vnc, out_b) };
        Held {
            r,
            group,
            input,
            output,
        }
    }

    fn write(&self, t: usize, at: usize, bytes: &[u8]) {
        // SAFETY: live tensor; the callers stay inside its size.
        let st = unsafe { nrt_tensor_write(t as _, bytes.as_ptr().cast(), at, bytes.len()) };
        assert_eq!(st, NRT_SUCCESS);
    }

    fn read(&self, t: usize, at: usize, len: usize) -> Vec<u8> {
        let mut v = vec![0u8; len];
        // SAFETY: live tensor, `len` bytes inside it.
        let st = unsafe { nrt_tensor_read(t as _, v.as_mut_ptr().cast(), at, len) };
        assert_eq!(st, NRT_SUCCESS);
        v
    }

    /// Prepare, schedule (queue 0) and wait for one collective; returns its status.
    fn collective(&self, cc_op: u32, dtype: u32) -> NRT_STATUS {
        let n = self.group.len() as u32;
        let vnc = self.group[self.r as usize];
        let mut comm = nrt_cc_comm_t {
            replica_group: self.group.as_ptr().cast_mut(),
            rank: self.r,
            rank_n: n,
            ctx_device_id: vnc,
            ctx_device_count: RANKS,
            vnc,
        };
        let mut ins = [self.input as *mut nrt_tensor_t];
        let mut outs = [self.output as *mut nrt_tensor_t];
        let mut li = nrt_tensor_list_t {
            tensors: ins.as_mut_ptr(),
            num_tensors: 1,
        };
        let mut lo = nrt_tensor_list_t {
            tensors: outs.as_mut_ptr(),
            num_tensors: 1,
        };
        let mut ctx = std::ptr::null_mut();
        let mut ret = NRT_STATUS::NRT_FAILURE;
        let mut seq = 0u64;
        // SAFETY: every pointer is valid for the calls; `ret` outlives the wait below.
        unsafe {
            let st = nrta_cc_prepare(&mut comm, &mut li, &mut lo, dtype, 0, cc_op, &mut ctx);
            assert_eq!(st, NRT_SUCCESS, "prepare rank {}", self.r);
            let st = nrta_cc_schedule(&mut ctx, 0, &mut ret, &mut seq);
            assert_eq!(st, NRT_SUCCESS, "schedule rank {}", self.r);
        }
        while !crate::runtime::xu::is_completed(seq).unwrap() {
            std::hint::spin_loop();
        }
        // SAFETY: written before the completion was published (runtime::xu).
        unsafe { std::ptr::read_volatile(&ret) }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let both = [self.input, self.output];
        for &t in &both[..if self.input == self.output { 1 } else { 2 }] {
            let mut t = t as *mut nrt_tensor_t;
            // SAFETY: live handle, freed once.
            unsafe { nrt_tensor_free(&mut t) };
        }
    }
}

/// Repeated collectives on the same tensors, the inputs changed between runs and the output
/// tensors full of garbage: every result exact, out-of-place inputs untouched, an in-place
/// reduce-scatter's other blocks untouched, and the machine resident (loaded once, re-armed).
#[test]
fn resident_repeated_collectives_on_the_same_tensors_are_exact() {
    testing::init(|| {
        crate::runtime::comm::reset();
        for r in 0..RANKS {
            assert_eq!(
                crate::abi::collectives::nrt_cc_global_comm_init(r, r, RANKS),
                NRT_SUCCESS
            );
        }
        let count = 300u64;
        let f32_code = 10u32; // NRT_DTYPE_FLOAT32
        for cc_op in 0..3u32 {
            for in_place in [false, true] {
                let cop = op_of(cc_op);
                let n = u64::from(RANKS);
                let (in_b, out_b) = match cop {
                    CollectiveOp::AllGather => (count * 4, n * count * 4),
                    CollectiveOp::ReduceScatter => (n * count * 4, count * 4),
                    _ => (count * 4, count * 4),
                };
                let group: Vec<u32> = (0..RANKS).collect();
                let ranks: Vec<Held> = (0..RANKS)
                    .map(|r| Held::new(r, group.clone(), in_b, out_b, in_place))
                    .collect();
                for salt in 0..3u64 {
                    let mut req = crate::lower::request::CollectiveRequest::new(
                        cop,
                        crate::isa::enums::Dtype::Fp32,
                        cop.is_reducing().then_some(ReduceOp::Add),
                        count,
                        group.clone(),
                        0,
                    );
                    req.in_place = in_place;
                    let mut inputs = verifiable::inputs(&req).unwrap();
                    // Other inputs every run: the salt shifts every element.
                    for (r, v) in inputs.iter_mut().enumerate() {
                        for w in v.chunks_exact_mut(4) {
                            let x = f32::from_le_bytes(w.try_into().unwrap());
                            let y = x + ((salt + r as u64) % 3) as f32;
                            w.copy_from_slice(&y.to_le_bytes());
                        }
                    }
                    std::thread::scope(|s| {
                        let hs: Vec<_> = ranks
                            .iter()
                            .map(|h| {
                                let input = &inputs[h.r as usize];
                                s.spawn(move || {
                                    let at = match (in_place, cop) {
                                        (true, CollectiveOp::AllGather) => {
                                            h.r as usize * count as usize * 4
                                        }
                                        _ => 0,
                                    };
                                    if !in_place {
                                        h.write(h.output, 0, &vec![0xFF; out_b as usize]);
                                    } else if cop == CollectiveOp::AllGather {
                                        h.write(h.input, 0, &vec![0xFF; out_b as usize]);
                                    }
                                    h.write(h.input, at, input);
                                    assert_eq!(
                                        h.collective(cc_op, f32_code),
                                        NRT_STATUS::NRT_SUCCESS
                                    );
                                    let (rd_at, rd_len) = match (in_place, cop) {
                                        (true, CollectiveOp::ReduceScatter) => {
                                            (h.r as usize * count as usize * 4, out_b as usize)
                                        }
                                        _ => (0, out_b as usize),
                                    };
                                    let got = h.read(h.output, rd_at, rd_len);
                                    if !in_place {
                                        assert_eq!(
                                            &h.read(h.input, 0, input.len()),
                                            input,
                                            "input kept"
                                        );
                                    } else if cop == CollectiveOp::ReduceScatter {
                                        let all = h.read(h.input, 0, in_b as usize);
                                        for (b, blk) in all.chunks(out_b as usize).enumerate() {
                                            if b != h.r as usize {
                                                assert_eq!(
                                                    blk,
                                                    &input[b * out_b as usize..][..out_b as usize],
                                                    "block {b} kept"
                                                );
                                            }
                                        }
                                    }
                                    got
                                })
                            })
                            .collect();
                        let got: Vec<Vec<u8>> = hs.into_iter().map(|h| h.join().unwrap()).collect();
                        let chk = verifiable::check(&req, &inputs, &got).unwrap();
                        assert_eq!(
                            chk.wrong, 0,
                            "{cop:?} in place {in_place} run {salt}: {:?}",
                            chk.first
                        );
                    });
                }
                assert!(
                    crate::runtime::collective::resident_held_bytes() > 0,
                    "{cop:?}: a machine stays resident between runs"
                );
            }
        }
        crate::runtime::xu::shutdown();
        crate::runtime::collective::reset();
        assert_eq!(
            crate::runtime::collective::resident_held_bytes(),
            0,
            "nrt_close frees resident machines"
        );
        crate::runtime::comm::reset();
    });
}

/// Collectives of several groups and sizes interleaved on the same ranks (each rank's thread
/// issues them in one order; every group's ranks agree): all exact.
#[test]
fn resident_interleaved_groups_and_sizes_are_exact() {
    testing::init(|| {
        crate::runtime::comm::reset();
        for r in 0..RANKS {
            assert_eq!(
                crate::abi::collectives::nrt_cc_global_comm_init(r, r, RANKS),
                NRT_SUCCESS
            );
        }
        let f32_code = 10u32;
        // (group, count): pairs, the whole world, two sizes each.
        let plan: Vec<(Vec<u32>, u64)> = vec![
            (vec![0, 1], 64),
            (vec![2, 3], 64),
            (vec![0, 1, 2, 3], 1000),
            (vec![0, 1], 5000),
            (vec![2, 3], 17),
            (vec![0, 1, 2, 3], 3),
        ];
        for round in 0..4u64 {
            std::thread::scope(|s| {
                let hs: Vec<_> = (0..RANKS)
                    .map(|me| {
                        let plan = &plan;
                        s.spawn(move || {
                            let mut outs = Vec::new();
                            for (k, (group, count)) in plan.iter().enumerate() {
                                let Some(r) = group.iter().position(|&g| g == me) else {
                                    continue;
                                };
                                let h =
                                    Held::new(r as u32, group.clone(), count * 4, count * 4, false);
                                let x: Vec<u8> = (0..*count)
                                    .map(|e| ((e + round + u64::from(me)) % 7) as f32)
                                    .flat_map(f32::to_le_bytes)
                                    .collect();
                                h.write(h.input, 0, &x);
                                assert_eq!(h.collective(1, f32_code), NRT_STATUS::NRT_SUCCESS);
                                outs.push((k, h.read(h.output, 0, (count * 4) as usize)));
                            }
                            outs
                        })
                    })
                    .collect();
                let got: Vec<Vec<(usize, Vec<u8>)>> =
                    hs.into_iter().map(|h| h.join().unwrap()).collect();
                for (me, outs) in got.iter().enumerate() {
                    for (k, out) in outs {
                        let (group, count) = &plan[*k];
                        for (e, w) in out.chunks_exact(4).enumerate() {
                            let want: f32 = group
                                .iter()
                                .map(|&g| ((e as u64 + round + u64::from(g)) % 7) as f32)
                                .sum();
                            let v = f32::from_le_bytes(w.try_into().unwrap());
                            assert_eq!(v, want, "round {round} rank {me} collective {k} ({group:?} x {count}) element {e}");
                        }
                    }
                }
            });
        }
        crate::runtime::xu::shutdown();
        crate::runtime::collective::reset();
        crate::runtime::comm::reset();
    });
}

//! Tests of `runtime::multi_process::run`: ranks in threads, each running only its own TOP_SPs on
//! device segments in shared memory (the multi-process path, met in-process), checked against
//! `runtime::verifiable`'s independent reference and against the one-machine path; a program
//! mismatch, a job-wide hang and a failing peer.

use super::*;
use crate::isa::enums::Dtype;
use crate::isa::udma::Direction;
use crate::lower::request::{CollectiveOp, ReduceOp};
use crate::runtime::collective::{prepare, VecIo};
use crate::runtime::verifiable;

fn reqs(op: CollectiveOp, d: Dtype, count: u64, n: u32) -> Vec<CollectiveRequest> {
    let red = op.is_reducing().then_some(ReduceOp::Add);
    (0..n)
        .map(|r| CollectiveRequest::new(op, d, red, count, (0..n).collect(), r))
        .collect()
}

/// Run `reqs[r]` on thread r through [`run`] (or the one-machine path), with `lowered[r]`
/// replacing the prepared program when given.
fn run_threads(
    kind: &'static str,
    reqs: Vec<CollectiveRequest>,
    inputs: Vec<Vec<u8>>,
    lowered: Option<Vec<Arc<Lowered>>>,
    shared: bool,
) -> Vec<Result<Vec<u8>>> {
    let key = GroupKey {
        kind,
        slot: 1,
        group: reqs[0].group.clone(),
    };
    let instance = crate::runtime::collective::meetings().ticket(&key, 0);
    let hs: Vec<_> = reqs
        .into_iter()
        .zip(inputs)
        .enumerate()
        .map(|(r, (req, input))| {
            let key = key.clone();
            let l = lowered.as_ref().map(|v| v[r].clone());
            std::thread::spawn(move || {
                let lowered = match l {
                    Some(l) => l,
                    None => prepare(&req, req.group.len() as u32)?,
                };
                let out = Arc::new(Mutex::new(Vec::new()));
                let io = VecIo {
                    input,
                    output: out.clone(),
                };
                let a = Arrival {
                    req,
                    lowered,
                    io: Box::new(io),
                };
                match shared {
                    true => run(&key, instance, a)?,
                    false => crate::runtime::collective::meet_here(&key, instance, a)?,
                }
                let v = out.lock().clone();
                Ok(v)
            })
        })
        .collect();
    hs.into_iter().map(|h| h.join().unwrap()).collect()
}

/// Run `rs` on the shared path (or the one-machine path), every rank must succeed; on the
/// shared path the outputs must match the independent reference exactly (`what` names the case).
fn run_ok(
    kind: &'static str,
    rs: &[CollectiveRequest],
    inputs: &[Vec<u8>],
    shared: bool,
    what: &str,
) -> Vec<Vec<u8>> {
    let outs: Vec<Vec<u8>> = run_threads(kind, rs.to_vec(), inputs.to_vec(), None, shared)
        .into_iter()
        .map(|o| o.unwrap())
        .collect();
    if shared {
        let c = verifiable::check(&rs[0], inputs, &outs).unwrap();
        assert_eq!(c.wrong, 0, "{what}: {:?}", c.first);
    }
    outs
}

/// Every fp32 element of every rank's input `base` plus `by`.
fn shifted(base: &[Vec<u8>], by: f32) -> Vec<Vec<u8>> {
    base.iter()
        .map(|v| {
            v.chunks_exact(4)
                .flat_map(|w| (f32::from_le_bytes(w.try_into().unwrap()) + by).to_le_bytes())
                .collect()
        })
        .collect()
}

#[test]
fn every_op_matches_the_reference_and_the_one_machine_path() {
    for (k, (op, d, count, n)) in [
        (CollectiveOp::AllReduce, Dtype::Fp32, 1000, 2),
        (CollectiveOp::AllReduce, Dtype::Bf16, 4099, 8),
        (CollectiveOp::AllGather, Dtype::Bf16, 77, 3),
        (CollectiveOp::ReduceScatter, Dtype::Fp16, 33, 5),
        (CollectiveOp::AllReduce, Dtype::Fp32, 257, 4),
        (CollectiveOp::ReduceScatter, Dtype::Fp32, 700, 8),
        (CollectiveOp::AllToAll, Dtype::Bf16, 96, 4),
    ]
    .into_iter()
    .enumerate()
    {
        const KINDS: [&str; 7] = ["sr-0", "sr-1", "sr-2", "sr-3", "sr-4", "sr-5", "sr-6"];
        let rs = reqs(op, d, count, n);
        let inputs = verifiable::inputs(&rs[0]).unwrap();
        let what = format!("{op:?} {d:?} on {n} ranks");
        let outs = run_ok(KINDS[k], &rs, &inputs, true, &what);
        let one = run_ok(KINDS[k], &rs, &inputs, false, &what);
        assert_eq!(
            outs, one,
            "{op:?} {d:?} on {n} ranks: shared vs one machine"
        );
    }
}

/// A repeat of the same collective re-arms its resident segments (no reload, `fill`): with
/// other inputs every round — the data of the last round must not leak into the next — and a
/// size whose streams are longer than their rings (the fed rings' first lap is written again).
#[test]
fn repeated_runs_on_resident_segments_with_other_inputs_are_exact() {
    for (kind, op, count, n) in [
        ("sr-res-0", CollectiveOp::AllReduce, 4099u64, 4u32),
        ("sr-res-1", CollectiveOp::ReduceScatter, 70_000, 2),
        ("sr-res-2", CollectiveOp::AllGather, 513, 3),
    ] {
        let rs = reqs(op, Dtype::Fp32, count, n);
        let base = verifiable::inputs(&rs[0]).unwrap();
        for round in 0..3u32 {
            let inputs = shifted(&base, (round % 2) as f32);
            run_ok(kind, &rs, &inputs, true, &format!("{op:?} round {round}"));
        }
    }
}

#[test]
fn in_place_and_repeated_runs_reuse_segments() {
    let mut rs = reqs(CollectiveOp::AllReduce, Dtype::Fp32, 3000, 3);
    rs.iter_mut().for_each(|r| r.in_place = true);
    let inputs = verifiable::inputs(&rs[0]).unwrap();
    for round in 0..3 {
        run_ok("sr-ip", &rs, &inputs, true, &format!("round {round}"));
    }
}

fn tampered(
    req: &CollectiveRequest,
    f: impl Fn(&mut crate::lower::emit::EmittedProgram),
) -> Arc<Lowered> {
    let l = prepare(req, req.group.len() as u32).unwrap();
    let mut emitted = l.emitted.clone();
    f(&mut emitted);
    Arc::new(Lowered::new(
        l.program.clone(),
        l.map.clone(),
        emitted,
        l.world,
    ))
}

/// Another program on one rank is refused on every rank, naming both.
#[test]
fn a_program_mismatch_fails_every_rank() {
    // Checks the report text a user reads, on purpose.
    let rs = reqs(CollectiveOp::AllReduce, Dtype::Fp32, 500, 2);
    let good = prepare(&rs[0], 2).unwrap();
    let bad = tampered(&rs[0], |e| e.ranks[1].topsps[0].slot_spad[0] ^= 1);
    let inputs = verifiable::inputs(&rs[0]).unwrap();
    for o in run_threads("sr-digest", rs, inputs, Some(vec![good, bad]), true) {
        let e = o.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
        assert!(e.message().contains("disagree on the program"), "{e}");
        assert!(e.message().contains("rank 1 (global id 1)"), "{e}");
    }
}

/// After a group's first collective its ranks meet on the go board (`go_board`), whose name
/// is already gone from /dev/shm; a mismatch met there still gets the root's field-by-field
/// verdict, on every rank.
#[test]
fn later_collectives_meet_on_the_board_and_a_mismatch_there_is_still_named() {
    let rs = reqs(CollectiveOp::AllReduce, Dtype::Fp32, 640, 3);
    let inputs = verifiable::inputs(&rs[0]).unwrap();
    let key = GroupKey {
        kind: "sr-board",
        slot: 1,
        group: rs[0].group.clone(),
    };
    let board_of = || go_board::held(&key).map(|b| (b, go_board::still_linked(&key)));
    assert!(board_of().is_none());
    for round in 0..3 {
        run_ok("sr-board", &rs, &inputs, true, &format!("round {round}"));
        let (b, linked) = board_of().expect("rank 0 created the board");
        assert!(b.all_attached(), "round {round}: every rank attached");
        assert!(!linked, "round {round}: rank 0 unlinked the board's name");
        let name = b.name().trim_start_matches('/').to_string();
        let left = shm::list("/opennrt-0-");
        assert!(
            !left.iter().any(|n| n.contains(&name)),
            "{name} still in /dev/shm"
        );
    }
    // Rank 2 prepares another count: met on the board, the signatures differ, and the root's
    // check names the field on every rank.
    let mut bad = rs.clone();
    bad[2] = CollectiveRequest::new(
        CollectiveOp::AllReduce,
        Dtype::Fp32,
        Some(ReduceOp::Add),
        641,
        rs[0].group.clone(),
        2,
    );
    let ins: Vec<Vec<u8>> = bad
        .iter()
        .map(|r| verifiable::inputs(r).unwrap()[r.rank as usize].clone())
        .collect();
    for o in run_threads("sr-board", bad, ins, None, true) {
        let e = o.unwrap_err();
        assert_eq!(e.status_name(), "NRT_INVALID", "{e}");
        let f = e.fields();
        assert_eq!(f.field.as_deref(), Some("count"), "{e:?}");
        assert_eq!(
            (f.rank, f.actual.as_deref()),
            (Some(2), Some("641")),
            "{e:?}"
        );
    }
    // And the group goes on afterwards.
    for o in run_threads("sr-board", rs.clone(), inputs.clone(), None, true) {
        assert!(o.is_ok());
    }
}

/// A rank whose TOP_SPs are missing: the other blocks for good, every executor is blocked or
/// done, and the waiting rank reports the job-wide hang with its stuck step.
#[test]
fn a_job_wide_hang_is_diagnosed_not_waited_out() {
    // Checks the report text a user reads, on purpose.
    let rs = reqs(CollectiveOp::AllReduce, Dtype::Fp32, 1001, 2);
    let l = tampered(&rs[0], |e| e.ranks[1].topsps.clear());
    let inputs = verifiable::inputs(&rs[0]).unwrap();
    let t = std::time::Instant::now();
    let outs = run_threads("sr-hang", rs, inputs, Some(vec![l.clone(), l]), true);
    assert!(
        t.elapsed() < std::time::Duration::from_secs(20),
        "hang waited out"
    );
    let e = outs[0].as_ref().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::CollectivesHang, "{e}");
    let msg = e.message();
    for want in [
        "rank 0 (chip 0 TOP_SP",
        "waits semaphore",
        "every rank of the run is blocked or done",
        "rank 1 (global id 1, process",
        "Done",
    ] {
        assert!(msg.contains(want), "{want:?} missing in: {msg}");
    }
}

/// A rank whose DMA aborts fails with the abort; its peer stops waiting at once and names it.
#[test]
fn a_failing_peer_is_named() {
    // Checks the report text a user reads, on purpose.
    use crate::isa::udma::Descriptor;
    let rs = reqs(CollectiveOp::AllReduce, Dtype::Fp32, 1001, 2);
    let l = tampered(&rs[0], |e| {
        let img = &mut e.ranks[0].topsps[0];
        for d in img.m2s.iter_mut() {
            if let Ok(Descriptor::TxData { ctrl, meta, addr }) =
                Descriptor::decode(d, Direction::M2S)
            {
                if ctrl.length > 4 {
                    let addr = addr + (1 << 35);
                    *d = Descriptor::TxData { ctrl, meta, addr }.encode();
                    return;
                }
            }
        }
    });
    let inputs = verifiable::inputs(&rs[0]).unwrap();
    let outs = run_threads("sr-abort", rs, inputs, Some(vec![l.clone(), l]), true);
    let e0 = outs[0].as_ref().unwrap_err();
    assert_eq!(e0.kind(), ErrorKind::DmaAbort, "{e0}");
    let e1 = outs[1].as_ref().unwrap_err();
    assert_eq!(e1.kind(), ErrorKind::CollectivesHang, "{e1}");
    assert!(
        e1.message().contains("rank 0 (global id 0, process"),
        "{e1}"
    );
    assert!(e1.message().contains("failed"), "{e1}");
}

/// Rank 1 waits a TRIGGER nobody raises: rank 0 runs until it needs rank 1, and its hang
/// report names rank 1's not-yet-posted S2M descriptor in rank 1's own ring — read from shared
/// memory with the indices rank 1 published.
#[test]
fn the_hang_report_walks_the_other_executors_rings() {
    // Checks the report text a user reads, on purpose.
    let rs = reqs(CollectiveOp::AllReduce, Dtype::Fp32, 1001, 2);
    let l = tampered(&rs[0], |e| {
        for t in &mut e.ranks[1].topsps {
            t.neff.trigger += 4 * 250; // semaphore 250: never raised
        }
    });
    let inputs = verifiable::inputs(&rs[0]).unwrap();
    let outs = run_threads("sr-remote-ring", rs, inputs, Some(vec![l.clone(), l]), true);
    let e0 = outs[0].as_ref().unwrap_err();
    assert_eq!(e0.kind(), ErrorKind::CollectivesHang, "{e0}");
    let msg = e0.message();
    assert!(
        msg.contains("every rank of the run is blocked or done"),
        "{msg}"
    );
    assert!(
        msg.contains("(not posted) of rank 1 (another executor"),
        "{msg}"
    );
    let e1 = outs[1].as_ref().unwrap_err();
    assert!(e1.message().contains("entry start (trigger)"), "{e1}");
}

/// A device tensor of the test, in shared memory or on the heap.
fn device_tensor(bytes: u64, name: &str, shared: bool) -> crate::runtime::tensor::Tensor {
    use crate::runtime::tensor::{Placement, Tensor};
    Tensor::allocate_in(Placement::Device, Some(0), bytes, name, shared).unwrap()
}

/// Run `rs` through [`run`] on threads, rank r's data `inputs[r]` from a heap tensor and its
/// result into `outputs[r]`.
fn run_into(
    key: &GroupKey,
    rs: &[CollectiveRequest],
    inputs: &[Vec<u8>],
    outputs: &[crate::runtime::tensor::Tensor],
) {
    use crate::runtime::collective::io::TensorIo;
    let instance = crate::runtime::collective::meetings().ticket(key, 0);
    let hs: Vec<_> = rs
        .iter()
        .zip(inputs)
        .zip(outputs)
        .map(|((req, input), out)| {
            let (key, req, out) = (key.clone(), req.clone(), out.clone());
            let tin = device_tensor(input.len() as u64, "in", false);
            tin.write(0, input).unwrap();
            std::thread::spawn(move || {
                let lowered = prepare(&req, req.group.len() as u32)?;
                let io = TensorIo::new(&req, vec![tin], vec![out]);
                let a = Arrival {
                    req,
                    lowered,
                    io: Box::new(io),
                };
                run(&key, instance, a)
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap().unwrap();
    }
}

/// The bytes of rank `gid`'s own output buffer in its pooled segment (`run_of` its lowered).
fn segment_output(key: &GroupKey, req: &CollectiveRequest) -> Vec<u8> {
    let gid = key.group[req.rank as usize];
    let c = CACHE.lock();
    let p = c.free[&(key.clone(), gid)]
        .iter()
        .find(|p| p.loaded.is_some())
        .expect("the rank's segment is pooled");
    let l = p.loaded.as_ref().unwrap();
    let off = plan(l).unwrap().layouts[req.rank as usize]
        .buf_off(Buf::Output)
        .unwrap();
    let mut v = vec![0u8; l.map.buffers().output as usize];
    p.seg.read(off, &mut v).unwrap();
    v
}

/// Outputs in place (`outputs`): a rank whose output is a device tensor in shared memory gets
/// its result from the engines, straight into the tensor — its segment's own output buffer
/// stays as loaded, all zero — on a first run (root), on the board, on doorbell repeats, and
/// after its output changes (the peers map the new tensor; the old one keeps the old result).
/// A rank with a heap output beside them is copied out of its segment. Freed, the tensors leave
/// no name in /dev/shm.
#[test]
fn outputs_in_shared_memory_are_written_in_place() {
    let rs = reqs(CollectiveOp::AllReduce, Dtype::Fp32, 2000, 3);
    let key = GroupKey {
        kind: "sr-out",
        slot: 1,
        group: rs[0].group.clone(),
    };
    let base = verifiable::inputs(&rs[0]).unwrap();
    let bytes = base[0].len() as u64;
    let set = |tag: &str, shared: [bool; 3]| -> Vec<crate::runtime::tensor::Tensor> {
        (0..3)
            .map(|r| device_tensor(bytes, &format!("{tag}{r}"), shared[r]))
            .collect()
    };
    let (a, b, c) = (
        set("a", [true; 3]),
        set("b", [true; 3]),
        set("c", [false, true, true]),
    );
    let names: Vec<String> = a
        .iter()
        .chain(&b)
        .map(|t| t.shared_object().unwrap().object.name().to_string())
        .collect();
    let mut kept = Vec::new();
    for (round, outs, heap) in [(0, &a, 9), (1, &a, 9), (2, &a, 9), (3, &b, 9), (4, &c, 0)] {
        let inputs = shifted(&base, round as f32);
        run_into(&key, &rs, &inputs, outs);
        let got: Vec<Vec<u8>> = outs
            .iter()
            .map(|t| {
                let mut v = vec![0u8; bytes as usize];
                t.read(0, &mut v).unwrap();
                v
            })
            .collect();
        let check = verifiable::check(&rs[0], &inputs, &got).unwrap();
        assert_eq!(check.wrong, 0, "round {round}: {:?}", check.first);
        for (r, req) in rs.iter().enumerate() {
            let seg = segment_output(&key, req);
            match r == heap {
                true => assert_eq!(seg, got[r], "round {round}: rank {r} copied out"),
                false => assert!(
                    seg.iter().all(|&x| x == 0),
                    "round {round}: rank {r}'s result went through its segment"
                ),
            }
        }
        kept.push(got);
    }
    for (r, t) in a.iter().enumerate() {
        let mut v = vec![0u8; bytes as usize];
        t.read(0, &mut v).unwrap();
        assert_eq!(
            v, kept[2][r],
            "rank {r}: the old output kept the result of round 2"
        );
    }
    drop((a, b, c));
    let left = shm::list(&shm::prefix(shm::NO_JOB, std::process::id()));
    for n in &names {
        assert!(
            !left.contains(n),
            "{n} is still in /dev/shm after its tensor was freed"
        );
    }
}

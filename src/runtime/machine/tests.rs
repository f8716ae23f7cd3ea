//! End to end on the software device: the real lowering (`lower` + `address_map` + `emit`) of
//! ring all-reduce, all-gather and reduce-scatter, executed by [`execute`], compared bit for bit
//! with a direct oracle. Inputs are small integers so every summation order is exact in fp32
//! and bf16 (|sum| ≤ 256). Negative cases: a corrupted descriptor and a missing TOP_SP.

use super::*;
use crate::dtype::{bf16_to_f32, f32_to_bf16, Dtype};
use crate::error::ErrorKind;
use crate::lower::emit::emit;
use crate::lower::pipeline::{address_map, lower, LowerConfig};
use crate::lower::program::Algorithm;
use crate::lower::request::{CollectiveOp, CollectiveRequest, ReduceOp};

struct Case {
    prog: Program,
    em: EmittedProgram,
    map: AddressMap,
    inputs: Vec<Vec<f32>>,
    want: Vec<Vec<f32>>,
    dtype: Dtype,
}

fn enc(d: Dtype, v: &[f32]) -> Vec<u8> {
    match d {
        Dtype::Fp32 => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        Dtype::Bf16 => v
            .iter()
            .flat_map(|x| f32_to_bf16(*x).to_le_bytes())
            .collect(),
        _ => unreachable!("test dtypes"),
    }
}

fn dec(d: Dtype, b: &[u8]) -> Vec<f32> {
    match d {
        Dtype::Fp32 => b
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect(),
        Dtype::Bf16 => b
            .chunks_exact(2)
            .map(|c| bf16_to_f32(u16::from_le_bytes([c[0], c[1]])))
            .collect(),
        _ => unreachable!("test dtypes"),
    }
}

fn case(op: CollectiveOp, dtype: Dtype, world: u32, count: u64, ring: bool) -> Case {
    let reduce = matches!(op, CollectiveOp::AllReduce | CollectiveOp::ReduceScatter);
    let req = CollectiveRequest::new(
        op,
        dtype,
        reduce.then_some(ReduceOp::Add),
        count,
        (0..world).collect(),
        0,
    );
    let mut cfg = LowerConfig::for_world(world).unwrap();
    if ring {
        cfg.select.forced = Some(Algorithm::Ring);
    }
    let prog = lower(&req, &cfg).unwrap();
    let map = address_map(&prog, &cfg.topology).unwrap();
    let em = emit(&prog, &map).unwrap();
    let esz = dtype.size_bytes().unwrap() as u64;
    let n_in = map.buffers().input / esz;
    let inputs: Vec<Vec<f32>> = (0..u64::from(world))
        .map(|r| {
            (0..n_in)
                .map(|e| ((e * 7 + r * 13) % 97) as f32 - 40.0)
                .collect()
        })
        .collect();
    let w = world as usize;
    let c = count as usize;
    let sum = |e: usize| -> f32 { inputs.iter().map(|v| v[e]).sum() };
    let want: Vec<Vec<f32>> = (0..w)
        .map(|r| match op {
            CollectiveOp::AllReduce => (0..c).map(sum).collect(),
            CollectiveOp::AllGather => inputs.concat(),
            CollectiveOp::ReduceScatter => (0..c).map(|e| sum(r * c + e)).collect(),
            _ => unreachable!("test ops"),
        })
        .collect();
    Case {
        prog,
        em,
        map,
        inputs,
        want,
        dtype,
    }
}

fn run(c: &Case) -> Result<Vec<Vec<f32>>> {
    let ins: Vec<Vec<u8>> = c.inputs.iter().map(|v| enc(c.dtype, v)).collect();
    let outs = execute(&c.prog, &c.em, &c.map, &ins)?;
    Ok(outs.iter().map(|o| dec(c.dtype, o)).collect())
}

fn check(op: CollectiveOp, dtype: Dtype, world: u32, count: u64, ring: bool) {
    let c = case(op, dtype, world, count, ring);
    let got = run(&c).unwrap_or_else(|e| panic!("{op:?} {dtype:?} x{world} ring={ring}: {e}"));
    for (r, (g, w)) in got.iter().zip(&c.want).enumerate() {
        assert!(
            g == w,
            "{op:?} {dtype:?} x{world} ring={ring}: rank {r} differs"
        );
    }
}

#[test]
fn all_reduce_forced_ring() {
    for world in [2, 3, 4] {
        check(CollectiveOp::AllReduce, Dtype::Fp32, world, 1001, true);
        check(CollectiveOp::AllReduce, Dtype::Bf16, world, 777, true);
    }
}

#[test]
fn all_reduce_default_selection() {
    for world in [2, 3, 4] {
        check(CollectiveOp::AllReduce, Dtype::Fp32, world, 1024, false);
        check(CollectiveOp::AllReduce, Dtype::Bf16, world, 513, false);
    }
}

#[test]
fn all_gather() {
    for world in [2, 3, 4] {
        check(CollectiveOp::AllGather, Dtype::Fp32, world, 300, true);
        check(CollectiveOp::AllGather, Dtype::Bf16, world, 301, false);
    }
}

#[test]
fn reduce_scatter() {
    for world in [2, 3, 4] {
        check(CollectiveOp::ReduceScatter, Dtype::Fp32, world, 300, true);
        check(CollectiveOp::ReduceScatter, Dtype::Bf16, world, 257, false);
    }
}

/// Rewrite the address of the first M2S data descriptor (longer than a semaphore word) of
/// rank 0's first TOP_SP.
fn corrupt(c: &mut Case, f: impl Fn(u64) -> u64) {
    use crate::isa::udma::Descriptor;
    let img = &mut c.em.ranks[0].topsps[0];
    for d in img.m2s.iter_mut() {
        if let Ok(Descriptor::TxData { ctrl, meta, addr }) = Descriptor::decode(d, Direction::M2S) {
            if ctrl.length > 4 {
                *d = Descriptor::TxData {
                    ctrl,
                    meta,
                    addr: f(addr),
                }
                .encode();
                return;
            }
        }
    }
    panic!("no data descriptor");
}

#[test]
fn corrupt_address_aborts() {
    // Checks the report text a user reads, on purpose.
    let mut c = case(CollectiveOp::AllReduce, Dtype::Fp32, 2, 1001, true);
    corrupt(&mut c, |a| a + (1 << 35));
    let e = run(&c).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::DmaAbort, "{e}");
    assert!(e.to_string().contains("chip 0 TOP_SP 0 M2S"), "{e}");
}

#[test]
fn corrupt_address_gives_wrong_result() {
    let mut c = case(CollectiveOp::AllReduce, Dtype::Fp32, 2, 1001, true);
    corrupt(&mut c, |a| a + 4);
    let got = run(&c).unwrap();
    assert!(got != c.want, "a shifted source must change the result");
}

#[test]
fn missing_rank_is_a_hang() {
    // Checks the report text a user reads, on purpose.
    let mut c = case(CollectiveOp::AllReduce, Dtype::Fp32, 2, 1001, true);
    c.em.ranks[1].topsps.clear();
    let e = run(&c).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::CollectivesHang);
    let msg = e.to_string();
    for want in [
        "rank 0 (chip 0 TOP_SP",
        "cc_op entry 0 (CTRL slot 0)",
        "SLOT SPAD record",
        "waits semaphore",
        "no pending descriptor signals it",
    ] {
        assert!(msg.contains(want), "{want:?} missing in: {msg}");
    }
    assert!(!msg.contains("rank 1"), "{msg}");
}

#[test]
fn untriggered_topsp_is_named_as_the_signaller() {
    // Checks the report text a user reads, on purpose.
    let c = case(CollectiveOp::AllReduce, Dtype::Fp32, 2, 1001, true);
    let ins: Vec<Vec<u8>> = c.inputs.iter().map(|v| enc(c.dtype, v)).collect();
    let mut m = load(&c.prog, &c.em, &c.map, &ins).unwrap();
    let chip = c.map.chip_id(1).unwrap();
    let dev = c.map.device_topsp(1, 0).unwrap();
    m.mem
        .sem_block_mut(chip, BlockId::TopSp(dev))
        .unwrap()
        .sub(0, 1);
    let e = m.run().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::CollectivesHang);
    let msg = e.to_string();
    assert!(
        msg.contains(&format!(
            "rank 1 (chip {chip} TOP_SP {dev}): cc_op entry 0 (CTRL slot 0), entry start (trigger)"
        )),
        "{msg}"
    );
    assert!(msg.contains("(not posted) of rank 1"), "{msg}");
}

#[test]
fn report_counts() {
    let c = case(CollectiveOp::AllReduce, Dtype::Fp32, 2, 1001, true);
    let ins: Vec<Vec<u8>> = c.inputs.iter().map(|v| enc(c.dtype, v)).collect();
    let (outs, rep) = execute_with_report(&c.prog, &c.em, &c.map, &ins).unwrap();
    assert_eq!(
        outs,
        c.want.iter().map(|w| enc(c.dtype, w)).collect::<Vec<_>>()
    );
    let (_, s2m) = c.em.descriptor_counts();
    assert!(rep.packets > 0 && rep.packets as usize <= s2m);
    // Every rank receives at least the other rank's whole buffer's worth of data.
    assert!(rep.bytes >= 2 * 4004, "{rep:?}");
    let again = execute_with_report(&c.prog, &c.em, &c.map, &ins).unwrap().1;
    assert_eq!(again, rep, "deterministic");
}

/// A stream much longer than its ring (the emitter wraps it with RING_ID laps, here 32-slot
/// rings) runs lap by lap through the queue's feed and gives the exact result; the same
/// program with rings as long as the stream gives the same bytes.
#[test]
fn wrapped_ring_runs_lap_by_lap() {
    use crate::lower::emit::{emit_with, EmitOptions};
    let mut c = case(CollectiveOp::AllReduce, Dtype::Fp32, 2, 1 << 16, true);
    let long = run(&c).unwrap();
    c.em = emit_with(&c.prog, &c.map, &EmitOptions { max_ring: 32 }).unwrap();
    let img = &c.em.ranks[0].topsps[0];
    assert!(
        img.m2s.len() > 2 * img.m2s_ring_len as usize,
        "the stream laps the ring: {} descriptors, {}-slot ring",
        img.m2s.len(),
        img.m2s_ring_len
    );
    let got = run(&c).unwrap();
    assert_eq!(got, c.want, "exact result through a wrapped ring");
    assert_eq!(got, long);
}

/// A corrupted descriptor of a later lap (written by the feed, not by the loader) still aborts
/// with the descriptor named.
#[test]
fn corrupt_descriptor_in_a_later_lap_aborts() {
    // Checks the report text a user reads, on purpose.
    use crate::lower::emit::{emit_with, EmitOptions};
    let mut c = case(CollectiveOp::AllReduce, Dtype::Fp32, 2, 1 << 14, true);
    c.em = emit_with(&c.prog, &c.map, &EmitOptions { max_ring: 32 }).unwrap();
    let img = &mut c.em.ranks[1].topsps[0];
    let at = img.s2m.len() - 3;
    img.s2m[at][3] ^= 3; // a wrong RING_ID for its lap
    let e = run(&c).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::DmaAbort, "{e}");
    let msg = e.to_string();
    assert!(msg.contains(&format!("S2M queue descriptor {at}")), "{msg}");
    assert!(msg.contains("stale descriptor"), "{msg}");
}

/// `Machine::timeout` (NEURON_RT_EXEC_TIMEOUT) stops a run that is still going: with a zero
/// timeout the first pass is already late, and the error carries the state of that moment.
#[test]
fn exec_timeout_stops_the_run_with_a_report() {
    // Checks the report text a user reads, on purpose.
    let c = case(CollectiveOp::AllReduce, Dtype::Fp32, 2, 1001, true);
    let ins: Vec<Vec<u8>> = c.inputs.iter().map(|v| enc(c.dtype, v)).collect();
    let mut m = load(&c.prog, &c.em, &c.map, &ins).unwrap();
    m.timeout = Some(std::time::Duration::ZERO);
    let e = m.run().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::CollectivesHang, "{e}");
    let msg = e.to_string();
    assert!(msg.contains("execution timeout"), "{msg}");
    assert!(msg.contains("NEURON_RT_EXEC_TIMEOUT"), "{msg}");
    assert!(msg.contains("entry start (trigger)"), "{msg}");
    // No timeout: the same machine state runs to the exact result.
    let mut m = load(&c.prog, &c.em, &c.map, &ins).unwrap();
    m.timeout = None;
    m.run().unwrap();
}

/// Run a hand-built two-entry program (`lower::verify::testprog`) on the device; the number
/// of wrong elements against the independent reference.
fn wrong_elements(p: &Program) -> u64 {
    use crate::runtime::verifiable;
    let topo = LowerConfig::for_world(p.request.rank_n()).unwrap().topology;
    let map = address_map(p, &topo).unwrap();
    let em = emit(p, &map).unwrap();
    let ins = verifiable::inputs(&p.request).unwrap();
    let outs = verifiable::execute_staged(p, &em, &map, &ins).unwrap();
    verifiable::check(&p.request, &ins, &outs).unwrap().wrong
}

/// The orders the verifier relies on between entries on two TOP_SPs (`verify::lanes`) are
/// ones the device gives: the leg join (HIER-2CH's fix, `compose::leg_join`) and the reporter's
/// completion wait (docs/contract/lowering.md §6.3). Both programs verify and are exact on the device.
#[test]
fn entries_on_two_topsps_run_in_the_verified_order() {
    use crate::lower::verify::{testprog, verify};
    for p in [
        testprog::staged_all_gather(4099, true),
        testprog::reporter_ordered_all_gather(4099),
    ] {
        verify(&p).unwrap();
        assert_eq!(wrong_elements(&p), 0);
    }
}

/// NCFW dispatch: every cc_op entry of a real program has a handler in the firmware image of
/// its arch; an image whose dispatch table lacks the AlgoType entries (only the default Fault
/// is left) refuses the same sequencer, naming the slot and algo_type (docs/contract/device.md §9.1).
#[test]
fn cc_op_entries_dispatch_through_the_firmware_image() {
    // Checks the report text a user reads, on purpose.
    use crate::device::topsp::Sequencer;
    use crate::ncfw::{image_for, DispatchClass, FirmwareImage};
    let c = case(CollectiveOp::AllReduce, Dtype::Fp32, 2, 1001, true);
    let img = &c.em.ranks[0].topsps[0];
    let cfg = seq_config(img);
    let seq = Sequencer::load(&img.ctrl_spad, &img.slot_spad, cfg).unwrap();
    let arch = crate::ncfw::Arch::from_id(c.map.gen().ncfw_arch_id()).unwrap();
    let (iram, dram) = image_for(arch);
    let mut fw = FirmwareImage::parse(iram, dram).unwrap();
    check_dispatch(&seq, &fw, 0, img.topsp).unwrap();
    fw.dispatch.retain(|d| d.class != DispatchClass::AlgoType);
    let e = check_dispatch(&seq, &fw, 0, img.topsp).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid);
    let msg = e.to_string();
    assert!(
        msg.contains("CTRL slot 0: algo_type 0 has no handler"),
        "{msg}"
    );
}

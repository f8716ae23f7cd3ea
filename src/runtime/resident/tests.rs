use super::*;
use crate::lower::request::{CollectiveOp, CollectiveRequest, ReduceOp};
use crate::runtime::collective::VecIo;
use parking_lot::Mutex;

/// A 64-element fp32 sum all-reduce over 2 ranks, prepared.
fn all_reduce_2x64() -> std::sync::Arc<crate::runtime::collective::Lowered> {
    let req = CollectiveRequest::new(
        CollectiveOp::AllReduce,
        crate::isa::enums::Dtype::Fp32,
        Some(ReduceOp::Add),
        64,
        vec![0, 1],
        0,
    );
    crate::runtime::collective::prepare(&req, 2).unwrap()
}

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// One machine, three runs with other inputs each: exact; then a corrupted descriptor in
/// the resident machine's ring makes the next run fail (fidelity: the resident machine
/// executes its bytes, it does not remember results), and a fresh load runs again.
#[test]
fn a_resident_machine_reruns_exactly_and_still_executes_its_bytes() {
    let l = all_reduce_2x64();
    let mut res = Resident::build(&l.program, &l.emitted, &l.map).unwrap();
    let run = scaled_run;
    for k in [1.0f32, 5.0, 2.0] {
        let want = f32s(
            &(0..64)
                .map(|e| 2.0 * e as f32 + 3.0 * k)
                .collect::<Vec<_>>(),
        );
        let got = run(&mut res, k).unwrap();
        assert_eq!(got, vec![want.clone(), want], "run with k = {k}");
    }
    assert_eq!(res.runs(), 3);
    // Corrupt rank 0's first M2S descriptor in the loaded ring.
    let img = &l.emitted.ranks[0].topsps[0];
    let chip = l.map.chip_id(0).unwrap();
    res.machine
        .as_mut()
        .unwrap()
        .mem
        .write(chip, img.neff.m2s_ring_base, &[0xA5; 16])
        .unwrap();
    let broken = run(&mut res, 1.0);
    let want = f32s(&(0..64).map(|e| 2.0 * e as f32 + 3.0).collect::<Vec<_>>());
    assert!(
        broken
            .as_ref()
            .map_or(true, |o| o[0] != want || o[1] != want),
        "a corrupted descriptor must fail or corrupt the run, got {broken:?}"
    );
    let mut fresh = Resident::build(&l.program, &l.emitted, &l.map).unwrap();
    assert_eq!(run(&mut fresh, 1.0).unwrap(), vec![want.clone(), want]);
}

/// What a run came to: every rank's output, or the error's kind and whole text (a DMA abort
/// names the descriptor, a hang report every stuck sequencer).
type Outcome = std::result::Result<Vec<Vec<u8>>, (crate::error::ErrorKind, String)>;

/// Run `res` (2 ranks) on the 64-element inputs of scale `k`: every rank's output.
fn scaled_run(res: &mut Resident, k: f32) -> crate::error::Result<Vec<Vec<u8>>> {
    let outs: Vec<Arc<Mutex<Vec<u8>>>> = (0..2).map(|_| Default::default()).collect();
    let ios: Vec<VecIo> = (0..2)
        .map(|r| VecIo {
            input: f32s(
                &(0..64)
                    .map(|e| e as f32 + k * (r as f32 + 1.0))
                    .collect::<Vec<_>>(),
            ),
            output: outs[r].clone(),
        })
        .collect();
    let refs: Vec<&dyn RankIo> = ios.iter().map(|i| i as &dyn RankIo).collect();
    res.run(&refs)
        .map(|_| outs.iter().map(|o| o.lock().clone()).collect())
}

/// [`scaled_run`], with an error as its kind and whole text.
fn outcome(res: &mut Resident, k: f32) -> Outcome {
    scaled_run(res, k).map_err(|e| (e.kind(), e.to_string()))
}

/// Packets the resident's engines replayed so far (their caches are shared with the clones
/// each run starts from).
fn replayed(res: &Resident) -> u64 {
    res.agents.iter().map(|a| a.pair.replay_hits()).sum()
}

/// The replayed run: a descriptor corrupted between two runs is seen by the second run. Each
/// corruption (through the memory's ordinary write path, as a test or a user would write it)
/// is applied to a resident machine that has run twice (the second run replayed its packets)
/// and to a fresh one before its first run; both must come to exactly the same outcome —
/// the same outputs, or the same error text — and it is never the clean result.
#[test]
fn the_replayed_run_sees_a_descriptor_corrupted_between_two_runs() {
    use crate::isa::udma::{Descriptor, Direction};
    let l = all_reduce_2x64();
    let clean = f32s(&(0..64).map(|e| 2.0 * e as f32 + 3.0).collect::<Vec<_>>());
    let chip = l.map.chip_id(0).unwrap();
    let img = &l.emitted.ranks[0].topsps[0];
    let (m2s, s2m) = (img.neff.m2s_ring_base, img.neff.s2m_ring_base);
    assert!(img.m2s.len() >= 2 && !img.s2m.is_empty());
    // A valid RX descriptor whose destination moved by one element: it decodes, so only the
    // bytes tell it from the kept one.
    let mut moved = Descriptor::decode(&img.s2m[0], Direction::S2M).unwrap();
    if let Descriptor::RxData { addr, .. } = &mut moved {
        *addr += 4;
    }
    // The same descriptor with a length the TX packet does not carry.
    let mut longer = Descriptor::decode(&img.s2m[0], Direction::S2M).unwrap();
    if let Descriptor::RxData { ctrl, .. } = &mut longer {
        ctrl.length += 4;
    }
    // The second M2S descriptor with the RING_ID of another lap.
    let mut stale = img.m2s[1];
    stale[3] ^= 1;
    // The last M2S descriptor without LAST (bit 27): its packet never ends.
    let last = img.m2s.len() as u64 - 1;
    assert!(last < u64::from(img.m2s_ring_len));
    let mut unlast = img.m2s[last as usize];
    unlast[3] ^= 0x08;
    let cases: [(&str, u64, [u8; 16]); 5] = [
        ("RX destination moved", s2m, moved.encode()),
        ("RX length changed", s2m, longer.encode()),
        ("stale RING_ID", m2s + 16, stale),
        ("garbage", m2s, [0xA5; 16]),
        ("last M2S descriptor's flags", m2s + 16 * last, unlast),
    ];
    for (what, at, bytes) in cases {
        let mut warm = Resident::build(&l.program, &l.emitted, &l.map).unwrap();
        for k in [1.0f32, 2.0] {
            assert_eq!(
                outcome(&mut warm, k),
                Ok(vec![
                    f32s(
                        &(0..64)
                            .map(|e| 2.0 * e as f32 + 3.0 * k)
                            .collect::<Vec<_>>()
                    );
                    2
                ])
            );
        }
        assert!(replayed(&warm) > 0, "the second run replays its packets");
        let mut cold = Resident::build(&l.program, &l.emitted, &l.map).unwrap();
        for res in [&mut warm, &mut cold] {
            res.machine
                .as_mut()
                .unwrap()
                .mem
                .write(chip, at, &bytes)
                .unwrap();
        }
        let (w, c) = (outcome(&mut warm, 1.0), outcome(&mut cold, 1.0));
        assert_eq!(w, c, "{what}: the replayed run and a fresh machine differ");
        assert_ne!(
            w,
            Ok(vec![clean.clone(), clean.clone()]),
            "{what}: not seen"
        );
    }
}

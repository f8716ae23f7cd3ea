use super::*;
use crate::lower::request::{CollectiveOp, CollectiveRequest, ReduceOp};
use crate::runtime::collective::VecIo;
use parking_lot::Mutex;

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// One machine, three runs with other inputs each: exact; then a corrupted descriptor in
/// the resident machine's ring makes the next run fail (fidelity: the resident machine
/// executes its bytes, it does not remember results), and a fresh load runs again.
#[test]
fn a_resident_machine_reruns_exactly_and_still_executes_its_bytes() {
    let req = CollectiveRequest::new(
        CollectiveOp::AllReduce,
        crate::isa::enums::Dtype::Fp32,
        Some(ReduceOp::Add),
        64,
        vec![0, 1],
        0,
    );
    let l = crate::runtime::collective::prepare(&req, 2).unwrap();
    let mut res = Resident::build(&l.program, &l.emitted, &l.map).unwrap();
    let run = |res: &mut Resident, k: f32| {
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
            .map(|_| outs.iter().map(|o| o.lock().clone()).collect::<Vec<_>>())
    };
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

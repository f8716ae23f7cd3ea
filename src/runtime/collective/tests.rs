//! Tests of `runtime::collective`: collectives of several ranks (threads) through prepare, the
//! rendezvous and the software device, checked against `runtime::verifiable`'s reference.

use super::*;
use crate::isa::enums::Dtype;
use crate::lower::request::{CollectiveOp, ReduceOp};
use crate::runtime::verifiable;

fn run_threads(reqs: Vec<CollectiveRequest>, inputs: Vec<Vec<u8>>) -> Vec<Result<Vec<u8>>> {
    let key = GroupKey {
        kind: "cc-test",
        slot: 1,
        group: reqs[0].group.clone(),
    };
    let hs: Vec<_> = reqs
        .into_iter()
        .zip(inputs)
        .map(|(req, input)| {
            let key = key.clone();
            std::thread::spawn(move || {
                let world = req.group.iter().max().map_or(1, |m| m + 1);
                let lowered = prepare(&req, world)?;
                let out = Arc::new(Mutex::new(Vec::new()));
                let t = meetings().ticket(&key, req.rank);
                let io = VecIo {
                    input,
                    output: out.clone(),
                };
                run(
                    &key,
                    t,
                    Arrival {
                        req,
                        lowered,
                        io: Box::new(io),
                    },
                )?;
                let v = out.lock().clone();
                Ok(v)
            })
        })
        .collect();
    hs.into_iter().map(|h| h.join().unwrap()).collect()
}

fn reqs(op: CollectiveOp, d: Dtype, count: u64, n: u32) -> Vec<CollectiveRequest> {
    let red = op.is_reducing().then_some(ReduceOp::Add);
    (0..n)
        .map(|r| CollectiveRequest::new(op, d, red, count, (0..n).collect(), r))
        .collect()
}

#[test]
fn ranks_in_threads_get_the_reference_result() {
    for (op, d, count, n) in [
        (CollectiveOp::AllReduce, Dtype::Fp32, 1000, 4),
        (CollectiveOp::AllGather, Dtype::Bf16, 77, 3),
        (CollectiveOp::ReduceScatter, Dtype::Fp16, 33, 5),
    ] {
        let rs = reqs(op, d, count, n);
        let inputs = verifiable::inputs(&rs[0]).unwrap();
        let outs: Vec<Vec<u8>> = run_threads(rs.clone(), inputs.clone())
            .into_iter()
            .map(|o| o.unwrap())
            .collect();
        let c = verifiable::check(&rs[0], &inputs, &outs).unwrap();
        assert_eq!(c.wrong, 0, "{op:?} {d:?} on {n} ranks: {:?}", c.first);
    }
}

#[test]
fn a_count_mismatch_fails_every_rank_naming_both_counts() {
    let mut rs = reqs(CollectiveOp::AllReduce, Dtype::Fp32, 64, 3);
    rs[2].count = 32;
    let inputs: Vec<Vec<u8>> = rs.iter().map(|r| vec![0u8; r.count as usize * 4]).collect();
    for o in run_threads(rs, inputs) {
        let e = o.unwrap_err();
        assert_eq!(e.status_name(), "NRT_INVALID", "{e}");
        let f = e.fields();
        assert_eq!(f.field.as_deref(), Some("count"), "{e:?}");
        assert_eq!(
            (f.expected.as_deref(), f.actual.as_deref()),
            (Some("64"), Some("32"))
        );
        assert_eq!(
            (f.rank, f.step),
            (Some(2), Some(0)),
            "rank 2, the first collective"
        );
    }
}

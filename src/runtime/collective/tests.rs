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

/// A [`Finish`] that reports rank `.1`'s result on a channel.
struct Report(std::sync::mpsc::Sender<(u32, Result<()>)>, u32);

impl Finish for Report {
    fn done(self: Box<Self>, result: Result<()>) {
        self.0.send((self.1, result)).unwrap();
    }
    fn defer(self: Box<Self>, rest: Box<dyn FnOnce() -> Result<()> + Send>) {
        std::thread::spawn(move || self.done(rest()));
    }
}

/// Without waiting, one thread can arrive for every rank of a group: nobody blocks, the last
/// arrival runs the collective and every rank's result reaches its `Finish`.
#[test]
fn a_user_collective_without_waiting_reports_every_rank_through_its_finish() {
    let rs = reqs(CollectiveOp::AllReduce, Dtype::Fp32, 100, 3);
    let inputs = verifiable::inputs(&rs[0]).unwrap();
    let key = GroupKey {
        kind: "cc-test-nowait",
        slot: 1,
        group: rs[0].group.clone(),
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let mut outs = Vec::new();
    for (req, input) in rs.iter().cloned().zip(inputs.clone()) {
        let out = Arc::new(Mutex::new(Vec::new()));
        outs.push(out.clone());
        let arrival = Arrival {
            lowered: prepare(&req, 3).unwrap(),
            io: Box::new(VecIo { input, output: out }),
            req,
        };
        let rank = arrival.req.rank;
        let t = meetings().ticket(&key, rank);
        let finish = Box::new(Report(tx.clone(), rank));
        run_user(&key, t, arrival, Wait::NoWait(finish)).unwrap();
    }
    let mut results: Vec<(u32, Result<()>)> = (0..3)
        .map(|_| rx.recv_timeout(std::time::Duration::from_secs(60)).unwrap())
        .collect();
    results.sort_by_key(|(r, _)| *r);
    for (r, res) in &results {
        assert!(res.is_ok(), "rank {r}: {res:?}");
    }
    let outs: Vec<Vec<u8>> = outs.iter().map(|o| o.lock().clone()).collect();
    let c = verifiable::check(&rs[0], &inputs, &outs).unwrap();
    assert_eq!(c.wrong, 0, "{:?}", c.first);
}

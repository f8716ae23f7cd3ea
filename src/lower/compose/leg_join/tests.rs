use super::*;
use crate::lower::program::Algorithm;

fn entry(tapes: &[(u8, u8)]) -> Entry {
    Entry::for_test(Algorithm::Ring, None, vec![3], tapes, || {
        vec![join_step(3, None, vec![])]
    })
}

fn waits_of(e: &Entry, channel: u8) -> Option<Wait> {
    let t = e.tapes.iter().find(|t| t.channel == channel).unwrap();
    t.steps[0].wait
}

fn signalled(e: &Entry, channel: u8) -> Vec<u8> {
    let t = e.tapes.iter().find(|t| t.channel == channel).unwrap();
    let last = t.steps.last().unwrap();
    last.signals.iter().map(|s| s.sem.topsp).collect()
}

/// HIER-2CH's shape: a one-channel leg (TOP_SP 0) before a two-channel leg (TOP_SPs 0, 1):
/// only TOP_SP 1 needs the join, and it waits for channel 0's tape.
#[test]
fn one_channel_then_two() {
    let (mut a, mut b) = (entry(&[(0, 0)]), entry(&[(0, 0), (1, 1)]));
    assert_eq!(join_entries(&mut a, &mut b, 3, 40), 1);
    assert_eq!(signalled(&a, 0), vec![1]);
    assert_eq!(waits_of(&b, 0), None);
    let w = waits_of(&b, 1).unwrap();
    assert_eq!(
        (w.sem, w.target, w.consume),
        (
            Sem {
                rank: 3,
                topsp: 1,
                id: 40
            },
            1,
            1
        )
    );
}

/// Three channels on two TOP_SPs both sides: each TOP_SP's lowest channel waits for the
/// other TOP_SP's tapes; later tapes of a TOP_SP get no wait.
#[test]
fn three_channels_on_two_topsps() {
    let (mut a, mut b) = (
        entry(&[(0, 0), (1, 1), (2, 0)]),
        entry(&[(2, 0), (0, 0), (1, 1)]),
    );
    assert_eq!(join_entries(&mut a, &mut b, 3, 9), 2);
    assert_eq!(waits_of(&b, 0).unwrap().target, 1);
    assert_eq!(waits_of(&b, 1).unwrap().target, 2);
    assert_eq!(waits_of(&b, 2), None);
    assert_eq!(signalled(&a, 0), vec![1]);
    assert_eq!(signalled(&a, 1), vec![0]);
    assert_eq!(signalled(&a, 2), vec![1]);
    assert_eq!(b.tapes[0].steps.len(), 1, "channel 2 keeps its steps");
}

/// Both legs on one TOP_SP: the TOP_SP's own walk orders them, nothing is added.
#[test]
fn one_topsp_needs_nothing() {
    let (mut a, mut b) = (entry(&[(0, 0)]), entry(&[(0, 0)]));
    let before = (a.clone(), b.clone());
    assert_eq!(join_entries(&mut a, &mut b, 3, 9), 0);
    assert_eq!((a, b), before);
}

/// HIER-2CH at the lowering level: hierarchical programs whose legs use different
/// algorithms / channel splits on two channels (intra mesh → inter ring; ring → single-
/// cycle ring → ring; inter RDH → intra ring) verify with their joins and are rejected by
/// the verifier without them (what `opennrt verify` would have said before the fix).
#[test]
fn hier_programs_need_their_joins() {
    use crate::lower::cases::{Case, Lowered};
    use crate::lower::request::CollectiveOp;
    use crate::lower::verify::verify;
    let cases = [
        (CollectiveOp::ReduceScatter, 4, "custom:2x1x2", 2049),
        (CollectiveOp::AllReduce, 8, "custom:2x1x4", 65536),
        (CollectiveOp::AllGather, 32, "custom:8x1x4", 4099),
    ];
    for (op, n, topo, count) in cases {
        let c = Case {
            topology: Some(topo.into()),
            dtype: crate::isa::enums::Dtype::Fp32,
            ..Case::new(op, Some(Algorithm::Hier), n, count)
        };
        let Ok(Lowered::Program(b)) = c.lower() else {
            panic!("{} does not lower", c.name(false));
        };
        let (_, _, mut p) = *b;
        let algs: Vec<Algorithm> = p.ranks[0].entries.iter().map(|e| e.algorithm).collect();
        assert!(
            algs.windows(2).any(|w| w[0] != w[1]),
            "{}: {algs:?}",
            c.name(false)
        );
        verify(&p).unwrap_or_else(|e| panic!("{}: {e}", c.name(false)));
        let mut joins = 0;
        for t in p
            .ranks
            .iter_mut()
            .flat_map(|r| &mut r.entries)
            .flat_map(|e| &mut e.tapes)
        {
            let before = t.steps.len();
            t.steps
                .retain(|s| *s != join_step(s.chunk, s.wait, s.signals.clone()));
            joins += before - t.steps.len();
        }
        assert!(joins > 0, "{}: no join steps", c.name(false));
        assert!(
            verify(&p).is_err(),
            "{}: verifies without its joins",
            c.name(false)
        );
    }
}

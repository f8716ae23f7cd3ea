use super::*;
use crate::lower::program::Algorithm;

fn entry(tapes: &[(u8, u8)]) -> Entry {
    Entry::for_test(Algorithm::Ring, None, vec![0], tapes, Vec::new)
}

/// A TOP_SP runs only the entries it drives, its tapes in channel order (emit.rs layout).
#[test]
fn lanes_follow_the_emitted_layout() {
    let rp = RankProgram {
        rank: 0,
        scratch_elems: 0,
        entries: vec![entry(&[(0, 0)]), entry(&[(2, 0), (1, 1), (0, 0)])],
    };
    let l = RankLanes::new(&rp, &[1]);
    assert_eq!(l.lanes.len(), 2);
    assert_eq!(l.lanes[0].items, vec![(0, 0), (1, 2), (1, 0)]);
    // TOP_SP 1's first tape is entry 1's: nothing orders it after entry 0.
    assert_eq!(l.lanes[1].items, vec![(1, 1)]);
    assert_eq!(l.slot[1], vec![(0, 2), (1, 0), (0, 1)]);
    assert!(reporter_waits(&rp.entries[1], 0));
    assert!(!reporter_waits(&rp.entries[1], 1));
    assert!(!reporter_waits(&rp.entries[0], 0));
    assert_eq!(l.unfinished_peers(&rp.entries[1], 1, 0), vec![1]);
    assert!(!l.done());
}

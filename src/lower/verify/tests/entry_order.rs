//! The verifier's model of the order between entries (`lanes`, docs/contract/device.md §8.3,
//! docs/contract/lowering.md §6.3) on two-entry programs: an entry does not wait for another
//! TOP_SP's earlier entry (HIER-2CH: that program used to verify and then lost data on the device),
//! except where the reporter's completion wait orders it; the leg join (`compose::leg_join`)
//! supplies the rest.

use crate::isa::slot::CHAIN_SEM;
use crate::lower::program::{Sem, Wait};
use crate::lower::verify::testprog::*;
use crate::lower::verify::*;

/// HIER-2CH's shape without a join: TOP_SP 1 starts entry 1 while TOP_SP 0 is still staging
/// in entry 0, and reads the scratch before the peer's input is there.
#[test]
fn another_topsps_earlier_entry_is_not_waited_for() {
    // Checks the report text a user reads, on purpose.
    let e = verify(&staged_all_gather(16, false)).unwrap_err();
    assert!(
        matches!(e, VerifyError::UninitRead { ref at, .. } if at.entry == 1 && at.channel == 1),
        "{e}"
    );
    assert!(
        e.to_string().contains(
            "rank 0 entry 1 (deliver) channel 1 step 0 direct_copy chunk 1: reads uninitialised scratch of rank 0 at elements [0, 16)"
        ),
        "{e}"
    );
}

/// The same program with the leg join verifies: channel 1 waits for channel 0's end of entry 0.
#[test]
fn the_leg_join_orders_the_topsps() {
    let p = staged_all_gather(16, true);
    let first = &p.ranks[0].entries[1].tapes[1].steps[0];
    assert_eq!(
        first.wait,
        Some(Wait {
            sem: Sem {
                rank: 0,
                topsp: 1,
                id: 9
            },
            target: 1,
            consume: 1
        })
    );
    let r = verify(&p).unwrap();
    assert_eq!(r.entries, 4);
}

/// The reporter of an entry waits for the entry's other TOP_SPs (`ring_wait_complete`), so
/// reading in entry 1 on TOP_SP 0 what TOP_SP 1 received in entry 0 needs no join.
#[test]
fn the_reporter_waits_for_the_other_topsps() {
    verify(&reporter_ordered_all_gather(16)).unwrap();
}

/// A reporter stuck in its completion wait is named in the deadlock report, with the
/// completion semaphore and the other TOP_SP's blocked step.
#[test]
fn a_stuck_completion_wait_is_reported() {
    let mut p = reporter_ordered_all_gather(16);
    // Rank 1 never sends: rank 0's TOP_SP 1 blocks in entry 0, so its reporter does too.
    p.ranks[1].entries[0].tapes[1].steps[0].signals.clear();
    let VerifyError::Deadlock { blocked } = verify(&p).unwrap_err() else {
        panic!("expected a deadlock");
    };
    let chain = blocked
        .iter()
        .find(|b| b.sem.id == CHAIN_SEM)
        .expect("the reporter's completion wait is reported");
    assert_eq!(
        (
            chain.at.rank,
            chain.at.entry,
            chain.at.channel,
            chain.sem.topsp,
            chain.value,
            chain.target
        ),
        (0, 0, 0, 0, 0, 1)
    );
    assert_eq!(chain.pending.len(), 1);
    assert_eq!((chain.pending[0].entry, chain.pending[0].channel), (0, 1));
    assert!(blocked
        .iter()
        .any(|b| b.at.rank == 0 && b.at.channel == 1 && b.sem.id == 8 && b.pending.is_empty()));
}

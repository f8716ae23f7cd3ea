//! Tests of the barrier planner: leaders, roots, step shapes, READ-window addresses
//! (docs/contract/device.md §7.1, §9.2; docs/contract/carrier.md Appendix A) and the host views
//! (docs/contract/device.md §7.2). Execution is tested in `device::barrier`'s tests.

use super::*;
use crate::isa::evtsem::{topsp_base, Route, SemAddr, SocAddr};

fn topo(spec: &str, world: u32) -> Topology {
    Topology::parse(spec, world).unwrap()
}

/// The (route, TOP_SP, window, idx) an address names.
fn names(a: u64) -> (Route, u8, SemWindow, u8) {
    let s = SocAddr::decode(a).unwrap();
    let sa = SemAddr::decode(s.on_chip()).unwrap();
    (s.route, sa.topsp, sa.window, sa.idx)
}

/// trn2.48xlarge (LNC 2): 4 ranks × 4 TOP_SPs per chip. 8 ranks = 2 chips, 2 roots.
#[test]
fn golden_two_chips() {
    let t = topo("trn2.48xlarge", 8);
    let p = plan_device_barrier(&t, &(0..8).collect::<Vec<_>>()).unwrap();
    p.check_shape().unwrap();
    assert_eq!(p.shape, StepShape::STANDARD);
    assert_eq!(p.peer_type, BarrierType::InterChip);
    assert_eq!(p.participants.len(), 32);
    assert_eq!(p.roots, vec![0, 16]);
    let root = &p.participants[0];
    assert_eq!(
        (root.rank, root.topsp, root.chip, root.device_topsp),
        (0, 0, 0, 0)
    );
    assert_eq!(root.role, Role::ChipLeader);
    assert_eq!(root.children, (1..16).collect::<Vec<_>>());
    assert_eq!(root.release_next, Some(1));
    assert_eq!(p.participants[15].release_next, None);
    // Member rank 1 TOP_SP 2 (device TOP_SP 6): arrives at TOP_SP 0's BARRIER0, in READ form:
    // 0x8280000000 + 0x1000 + 4·2 (docs/contract/device.md §5.1, §9.2); waits its own BARRIER1 ≥ 1;
    // passes the release to the next TOP_SP in order.
    let m = &p.configs[6];
    assert_eq!(p.participants[6].device_topsp, 6);
    assert_eq!(m.steps[0].barrier_sema, [0x82_8000_1008, 0, 0, 0]);
    assert_eq!(m.steps[0].target_sema_val, [0; 4]);
    assert_eq!(m.steps[1].barrier_sema, [0; 4]);
    assert_eq!(m.steps[2].barrier_sema[0], topsp_base(6) + 0x1000 + 4 * 3);
    assert_eq!(m.steps[2].target_sema_val[0], 1);
    assert_eq!(m.steps[3].barrier_sema[0], topsp_base(7) + 0x100C);
    // Root 0: gathers 15, signals root 16's BARRIER1 on chip 1 (routed: id-valid bit 54, chip
    // 1 at bits 53:48), waits one signal, starts the release.
    let r = &p.configs[0];
    assert_eq!(r.steps[0].barrier_sema[0], 0x82_8000_1008);
    assert_eq!(r.steps[0].target_sema_val[0], 15);
    assert_eq!(r.steps[1].barrier_sema, [0x0041_0082_8000_100C, 0, 0, 0]);
    assert_eq!(r.steps[2].barrier_sema[0], 0x82_8000_100C);
    assert_eq!(r.steps[2].target_sema_val[0], 1);
    assert_eq!(r.steps[3].barrier_sema[0], topsp_base(1) + 0x100C);
    // The second root, on chip 1, reaches root 0 with chip id 0 routed.
    assert_eq!(
        p.configs[16].steps[1].barrier_sema[0],
        0x0040_0082_8000_100C
    );
    // Every DMA field stays 0.
    for c in &p.configs {
        assert_eq!(c.dma_sync_sema, [0; 4]);
        assert!(c.steps.iter().all(|s| s.m2s_val == 0 && s.s2m_val == 0));
    }
}

/// Every stored address is READ-window form (docs/contract/device.md §9.2) of id 2 or 3.
#[test]
fn addresses_are_read_window_barrier_ids() {
    let t = topo("trn1.32xlarge:nodes=2", 64);
    let p = plan_device_barrier(&t, &(0..64).collect::<Vec<_>>()).unwrap();
    for c in &p.configs {
        for st in &c.steps {
            for (_, a, _) in st.active() {
                let (_, _, w, idx) = names(a);
                assert_eq!(w, SemWindow::Read);
                assert!(idx == GATHER_SEM || idx == RELEASE_SEM);
            }
        }
    }
}

/// Fan-in is free, fan-out between roots is bounded by the shape: 32 chips (2 nodes) → node
/// leaders; 64 one-chip nodes → block leaders; a switch allows 3 roots.
#[test]
fn leader_levels_and_root_bounds() {
    let t = topo("trn1.32xlarge:nodes=2", 64);
    let p = plan_device_barrier(&t, &(0..64).collect::<Vec<_>>()).unwrap();
    assert_eq!(p.roots.len(), 2);
    assert!(p
        .roots
        .iter()
        .all(|&r| p.participants[r].role == Role::NodeLeader));
    let chip_leaders = p
        .participants
        .iter()
        .filter(|q| q.role >= Role::ChipLeader)
        .count();
    assert_eq!(chip_leaders, 32);

    let t = topo("custom:64x1x2:gen=v2", 64);
    let p = plan_device_barrier(&t, &(0..64).map(|r| r * 2).collect::<Vec<_>>()).unwrap();
    p.check_shape().unwrap();
    assert_eq!(p.roots.len(), 5);
    assert!(p
        .roots
        .iter()
        .all(|&r| p.participants[r].role == Role::BlockLeader));

    let t = topo("custom:4x2x2:gen=v3:fabric=switch", 16);
    let p = plan_device_barrier(&t, &(0..16).collect::<Vec<_>>()).unwrap();
    p.check_shape().unwrap();
    assert_eq!(p.shape, StepShape::SWITCH);
    assert_eq!(p.peer_type, BarrierType::InterRack);
    assert_eq!(p.roots.len(), 3);
    let t = topo("trn2-ultraserver", 4);
    let p = plan_device_barrier(&t, &[0, 64, 128, 192]).unwrap();
    assert_eq!(p.peer_type, BarrierType::IntraPod);
    assert_eq!(p.roots.len(), 4);
}

/// Structural balance: every GATHER gets as many arrivals as its owner waits for, every
/// RELEASE as many signals as its owner waits for; each participant is released at most once.
#[test]
fn signals_match_waits() {
    for (spec, group) in [
        ("trn2.48xlarge", (0..64).collect::<Vec<u32>>()),
        ("custom:64x1x2:gen=v2", (0..64).map(|r| r * 2).collect()),
        ("trn1.32xlarge:nodes=2", vec![0, 5, 33, 40, 63]),
        ("trn2.3xlarge", vec![2]),
    ] {
        let t = topo(spec, 4);
        let p = plan_device_barrier(&t, &group).unwrap();
        let key = |i: usize, a: u64| {
            let (route, sp, _, idx) = names(a);
            let chip = match route {
                Route::Chip(c) => c,
                _ => p.participants[i].chip,
            };
            (chip, sp, idx)
        };
        let mut incs = std::collections::BTreeMap::new();
        let mut waits = std::collections::BTreeMap::new();
        for (i, c) in p.configs.iter().enumerate() {
            let me = (p.participants[i].chip, p.participants[i].device_topsp);
            for st in &c.steps {
                for (_, a, t) in st.active() {
                    let k = key(i, a);
                    if (k.0, k.1) == me {
                        *waits.entry(k).or_insert(0) += t;
                    } else {
                        assert_eq!(t, 0, "{spec}: ENTRY with a target");
                        *incs.entry(k).or_insert(0) += 1;
                    }
                }
            }
        }
        assert_eq!(incs, waits, "{spec}");
    }
}

#[test]
fn bad_groups_are_rejected() {
    let t = topo("trn2.48xlarge", 64);
    assert!(plan_device_barrier(&t, &[]).is_err());
    assert!(plan_device_barrier(&t, &[1, 1]).is_err());
    assert!(plan_device_barrier(&t, &[64]).is_err());
    assert!(plan_host_barrier(&t, &[], false).is_err());
}

/// docs/contract/device.md §7.2 (ids: module doc): leaders own START and DONE, non-leaders name the
/// leader's DONE and no START.
#[test]
fn host_views() {
    assert_eq!(host_barrier_ids(true), (7, 6));
    assert_eq!(host_barrier_ids(false), (3, 2));
    let t = topo("trn1.32xlarge", 4);
    let h = plan_host_barrier(&t, &[0, 3], true).unwrap();
    assert!(h.host_cc);
    assert_eq!(h.entries.len(), 6); // 3 TOP_SPs per v2 rank
    let l = &h.entries[3]; // rank 1 = global 3: device 1 core 1 → device TOP_SPs 3..6
    assert!(l.leader);
    assert_eq!((l.chip, l.device_topsp), (1, 3));
    assert_eq!(l.config.barrier_start, topsp_base(3) + 0x1000 + 4 * 7);
    assert_eq!(l.config.barrier_done, topsp_base(3) + 0x1000 + 4 * 6);
    let n = &h.entries[5];
    assert!(!n.leader);
    assert_eq!(n.config.barrier_start, 0);
    assert_eq!(n.config.barrier_done, l.config.barrier_done);
    let h = plan_host_barrier(&t, &[0], false).unwrap();
    assert_eq!(h.entries[0].config.barrier_done, 0x82_8000_1008);
    assert_eq!(h.entries[0].config.barrier_start, 0x82_8000_100C);
}

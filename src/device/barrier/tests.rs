//! Executing lowered barrier configs on the machine: completion over single- and multi-node
//! topologies, semaphore balance, the barrier property (no TOP_SP leaves while one participant
//! is missing, and the report names it), corrupted bytes, and the host barrier (docs/contract/device.md §7).
//! Configs always travel as their 0x128 bytes (encode → decode), as they would to the device.

use super::*;
use crate::isa::barrier_cfg::BARRIER_CONFIG_BYTES;
use crate::lower::barrier_cfg::{plan_device_barrier, plan_host_barrier, DeviceBarrierPlan};
use crate::lower::topology::Topology;
use crate::ncfw::ctx_layout::Arch;

type Cfgs = Vec<(u8, u8, BarrierConfig)>;

fn plan(spec: &str, world: u32, group: &[u32]) -> DeviceBarrierPlan {
    let t = Topology::parse(spec, world).unwrap();
    let p = plan_device_barrier(&t, group).unwrap();
    p.check_shape().unwrap();
    p
}

/// The device decodes the bytes the lowering encoded.
fn device_cfgs(p: &DeviceBarrierPlan) -> Cfgs {
    p.participants
        .iter()
        .zip(p.encoded())
        .map(|(q, b)| (q.chip, q.device_topsp, BarrierConfig::decode(&b).unwrap()))
        .collect()
}

fn machine_for(cfgs: &Cfgs) -> Machine {
    Machine::new(cfgs.iter().map(|c| c.0).max().unwrap_or(0) + 1)
}

/// Every semaphore of every TOP_SP block of the machine is 0.
fn assert_balanced(m: &Machine, what: &str) {
    for chip in 0..m.mem.chips() {
        for t in 0..16 {
            let b = m.mem.sems(chip).unwrap().block(BlockId::TopSp(t)).unwrap();
            let nz: Vec<_> = b.nonzero().collect();
            assert!(nz.is_empty(), "{what}: chip {chip} TOP_SP {t} left {nz:?}");
        }
    }
}

/// Single- and multi-node cases of 1, 2, 3, 4, 5, 8, 16 and 64 ranks.
fn cases() -> Vec<(&'static str, u32, Vec<u32>)> {
    let mut v = Vec::new();
    for n in [1u32, 2, 3, 4, 5, 8, 16, 64] {
        // One trn2.48xlarge node: 64 logical cores, 4 TOP_SPs each.
        v.push(("trn2.48xlarge", 64, (0..n).collect()));
        // Two trn1.32xlarge nodes, ranks alternating between them (3 TOP_SPs each).
        v.push((
            "trn1.32xlarge:nodes=2",
            64,
            (0..n).map(|r| (r % 2) * 32 + r / 2).collect(),
        ));
    }
    v.push((
        "custom:64x1x2:gen=v2",
        128,
        (0..64).map(|r| 2 * r).collect(),
    )); // 5 block roots
    v.push(("custom:4x2x2:gen=v3:fabric=switch", 16, (0..16).collect())); // {1,2,2,1}
    v.push(("trn2-ultraserver", 256, vec![0, 1, 64, 130, 200, 255])); // pod, 4 nodes
    v
}

#[test]
fn completes_and_balances() {
    for (spec, world, group) in cases() {
        let p = plan(spec, world, &group);
        let cfgs = device_cfgs(&p);
        let mut m = machine_for(&cfgs);
        let what = format!("{spec} {} ranks", group.len());
        let rep = run_device_barrier(&mut m, &cfgs).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(rep.topsps, p.participants.len(), "{what}");
        assert_eq!(
            rep.signals, rep.decrements,
            "{what}: every signal consumed once"
        );
        if p.participants.len() > 1 {
            assert!(rep.signals > 0, "{what}");
        }
        assert_balanced(&m, &what);
        // Balanced means reusable: the same machine runs the barrier again.
        let again = run_device_barrier(&mut m, &cfgs).unwrap();
        assert_eq!(again.signals, rep.signals, "{what}");
        assert_balanced(&m, &what);
    }
}

/// The barrier property: with any one participant absent, no other TOP_SP finishes (leaves),
/// the run is a CollectivesHang, and the report names the absent TOP_SP.
#[test]
fn missing_participant_hangs_and_is_named() {
    // Checks the report text a user reads, on purpose.
    let small = [
        ("trn2.48xlarge", 64, vec![0u32, 1, 2, 3, 4]), // 2 chips, 20 TOP_SPs
        ("trn1.32xlarge:nodes=2", 64, vec![0, 32, 1, 33, 2]),
        ("custom:8x1x1:gen=v2", 8, (0..8).collect()), // 8 one-chip nodes → block leaders
    ];
    for (spec, world, group) in small {
        let p = plan(spec, world, &group);
        let cfgs = device_cfgs(&p);
        for drop in 0..cfgs.len() {
            let mut rest = cfgs.clone();
            let (chip, sp, _) = rest.remove(drop);
            let mut m = machine_for(&cfgs);
            let e = run_device_barrier(&mut m, &rest).unwrap_err();
            let what = format!("{spec}: without chip {chip} TOP_SP {sp}");
            assert_eq!(e.kind(), ErrorKind::CollectivesHang, "{what}: {e}");
            let msg = e.message();
            let n = rest.len();
            assert!(
                msg.contains(&format!("{n} of {n} agents cannot finish")),
                "{what}: {msg}"
            );
            assert!(
                msg.contains(&format!(
                    "missing participant: chip {chip} TOP_SP {sp} runs no barrier"
                )),
                "{what}: {msg}"
            );
        }
    }
}

/// A dropped member of a 2-chip trn2 group: the leader's wait is reported with its value and
/// remaining target, and everybody else waits for the release.
#[test]
fn hang_report_details() {
    // Checks the report text a user reads, on purpose.
    let p = plan("trn2.48xlarge", 64, &[0, 1, 2, 3, 4]);
    let mut cfgs = device_cfgs(&p);
    cfgs.remove(5); // rank 1 TOP_SP 1 (device TOP_SP 5) never arrives
    let mut m = machine_for(&cfgs);
    let e = run_device_barrier(&mut m, &cfgs).unwrap_err();
    let msg = e.message();
    assert!(
        msg.contains(
            "* chip 0 TOP_SP 0: step 0 slot 0 waits semaphore 2 of chip 0 TOP_SP 0 \
             (READ 0x8280001008) >= 15, value 14; no running TOP_SP will signal it"
        ),
        "{msg}"
    );
    assert!(
        msg.contains(
            "* chip 0 TOP_SP 1: step 2 slot 0 waits semaphore 3 of chip 0 TOP_SP 1 \
             (READ 0x82c000100c) >= 1, value 0; still to signal it: chip 0 TOP_SP 0 (step 3 \
             slot 0)"
        ),
        "{msg}"
    );
    assert!(
        msg.contains(
            "missing participant: chip 0 TOP_SP 5 runs no barrier, but is signalled \
             (semaphore 3 by chip 0 TOP_SP 4 step 3 slot 0)"
        ),
        "{msg}"
    );
    // The second root (chip 1) got no signal from root 0 and waits in step 2.
    assert!(
        msg.contains("* chip 1 TOP_SP 0: step 2 slot 0 waits semaphore 3"),
        "{msg}"
    );
}

/// Corrupted bytes: a retargeted semaphore hangs; the rules of the module doc reject the rest.
#[test]
fn corrupted_configs() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    let p = plan("trn2.48xlarge", 64, &[0, 1, 2, 3, 4]);
    let cfgs = device_cfgs(&p);
    let patch = |i: usize, f: &dyn Fn(&mut [u8; BARRIER_CONFIG_BYTES])| {
        let mut c = cfgs.clone();
        let mut b = c[i].2.encode();
        f(&mut b);
        c[i].2 = BarrierConfig::decode(&b).unwrap();
        let mut m = machine_for(&c);
        run_device_barrier(&mut m, &c)
    };
    // Member 3 arrives at semaphore 4 instead of 2 (byte 4 of step 0's barrier_sema[0]).
    let e = patch(3, &|b| b[4] = 0x10).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::CollectivesHang, "{e}");
    assert!(e.message().contains(">= 15, value 14"), "{e}");
    let invalid = |r: Result<BarrierReport>, needle: &str| {
        let e = r.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
        assert!(e.message().contains(needle), "want {needle:?}: {e}");
    };
    // A slot beyond {1,4,4,1}: step 0 slot 1 (0x0C).
    invalid(
        patch(3, &|b| b[0x0C] = 0x08),
        "beyond the {1,4,4,1} step shape",
    );
    // A target on an ENTRY (step 0 target_sema_val[0] at 0x24).
    invalid(
        patch(3, &|b| b[0x24] = 1),
        "ENTRY on a peer's semaphore carries a target",
    );
    // An EXIT with target 0 (the root's step 0 target).
    invalid(
        patch(0, &|b| b[0x24] = 0),
        "EXIT on an own semaphore with target 0",
    );
    // INC-window form instead of READ (+0x800).
    invalid(patch(3, &|b| b[5] = 0x18), "READ-window");
    // A DMA field: m2s_val of step 1, or queue_id.
    invalid(patch(3, &|b| b[0x34] = 1), "DMA/descriptor-ring fields");
    invalid(patch(3, &|b| b[0x122] = 1), "DMA/descriptor-ring fields");
    // A chip the machine lacks (chip id 9, id-valid).
    invalid(patch(3, &|b| b[10] = 0x49), "no chip 9");
    // The host view is live.
    invalid(patch(3, &|b| b[0x124] = 0), "execute_device_barrier is 0");
    let mut dup = cfgs.clone();
    dup.push(dup[2]);
    invalid(
        run_device_barrier(&mut machine_for(&dup), &dup),
        "has two configs",
    );
}

fn host_cfgs(spec: &str, world: u32, group: &[u32], host_cc: bool) -> (Cfgs, Vec<bool>) {
    let t = Topology::parse(spec, world).unwrap();
    let h = plan_host_barrier(&t, group, host_cc).unwrap();
    let cfgs = h
        .entries
        .iter()
        .zip(h.encoded())
        .map(|(e, b)| (e.chip, e.device_topsp, BarrierConfig::decode(&b).unwrap()))
        .collect();
    (cfgs, h.entries.iter().map(|e| e.leader).collect())
}

/// docs/contract/device.md §7.2: the host arms, leaders signal, host and non-leaders pass; every leader's
/// `barrier_completed` is 1; semaphores return to 0 — in both id modes.
#[test]
fn host_barrier_round_trip() {
    for host_cc in [false, true] {
        let (cfgs, leaders) = host_cfgs("trn2.48xlarge:nodes=2", 128, &[0, 5, 64, 127], host_cc);
        let mut m = machine_for(&cfgs);
        let rep = run_host_barrier(&mut m, &cfgs).unwrap();
        let want: Vec<(u8, u8, u8)> = cfgs
            .iter()
            .zip(&leaders)
            .filter(|(_, &l)| l)
            .map(|(c, _)| (c.0, c.1, 1))
            .collect();
        assert_eq!(want.len(), 4);
        assert_eq!(rep.barrier_completed, want);
        assert_eq!(rep.run.topsps, 16);
        // Per leader: 1 arm + (1 host + 3 non-leaders) done; all consumed.
        assert_eq!(rep.run.signals, 4 * 5);
        assert_eq!(rep.run.decrements, rep.run.signals);
        assert_balanced(&m, "host barrier");
    }
    // The host sees it in neff_ctx.barrier_completed (docs/contract/carrier.md §3.3: runtime NEFF ctx + 0x5C).
    for arch in [Arch::V2, Arch::V3] {
        let l = arch.layout();
        let mut ctx = vec![0u8; l.min_size];
        write_barrier_completed(&mut ctx, &l, 1).unwrap();
        let at = if arch == Arch::V2 { 0x3060 } else { 0x4280 } + 0x5C;
        assert_eq!(ctx[at], 1);
        assert_eq!(ctx.iter().filter(|&&b| b != 0).count(), 1);
        assert!(write_barrier_completed(&mut ctx[..at], &l, 1).is_err());
    }
}

/// A missing leader: its non-leaders wait on its DONE forever and the host never completes it.
#[test]
fn host_barrier_missing_leader_hangs() {
    // Checks the report text a user reads, on purpose.
    let (mut cfgs, leaders) = host_cfgs("trn1.32xlarge", 32, &[0, 1], false);
    let dropped = leaders.iter().rposition(|&l| l).unwrap();
    let (chip, sp, _) = cfgs.remove(dropped);
    let mut m = machine_for(&cfgs);
    let e = run_host_barrier(&mut m, &cfgs).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::CollectivesHang, "{e}");
    let msg = e.message();
    assert!(
        msg.contains(&format!(
            "waits semaphore 2 of chip {chip} TOP_SP {sp} (READ {:#x}) >= 1, value 0; no running \
             TOP_SP will signal it",
            0x82_8000_1008u64 + (u64::from(sp) << 30)
        )),
        "{msg}"
    );
    assert!(
        !msg.contains("* host"),
        "the host is done with the present leader: {msg}"
    );
    // A device view is refused by the host barrier, and a non-leader naming its own DONE too.
    let p = plan("trn1.32xlarge", 32, &[0]);
    let d = device_cfgs(&p);
    let e = run_host_barrier(&mut machine_for(&d), &d).unwrap_err();
    assert!(e.message().contains("execute_device_barrier is 1"), "{e}");
    let bad = vec![(
        0u8,
        1u8,
        BarrierConfig::Host(HostBarrier {
            barrier_start: 0,
            barrier_done: 0x82_C000_1008,
        }),
    )];
    let e = run_host_barrier(&mut machine_for(&bad), &bad).unwrap_err();
    assert!(e.message().contains("nobody arms it"), "{e}");
}

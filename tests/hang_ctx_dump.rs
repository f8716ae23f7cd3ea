//! The live CC context of the software device's TOP_SPs, end to end: a real ring all-reduce on
//! the device, stuck (rank 1's program dropped) or finished, imaged by `Machine::cc_context`
//! and dumped by `Machine::ctx_log`. The dump of a stuck TOP_SP must show the semaphore the hang
//! report says it waits and where it is; a finished one must show completion. Offsets are the
//! spec's (docs/contract/carrier.md §3.1, §3.7), not the builder's.

#[path = "common/hang_ctx.rs"]
mod hang_ctx;

use hang_ctx::{algo_off, ctx_size, json, loaded, topsps, without_host_addrs};
use opennrt::device::executor::Machine;
use opennrt::device::sema::BlockId;
use opennrt::error::ErrorKind;
use opennrt::ncfw::Arch;
use serde_json::Value;

/// The number after `key` in `line`, in base `radix`.
fn num_after(line: &str, key: &str, radix: u32) -> Option<u64> {
    let rest = &line[line.find(key)? + key.len()..];
    let end = rest
        .find(|c: char| !c.is_ascii_hexdigit())
        .unwrap_or(rest.len());
    u64::from_str_radix(&rest[..end], radix).ok()
}

/// The expected arch of a topology: trn1.32xlarge (the default) is v2, key 5; trn2 is v3, key
/// 12 (docs/contract/carrier.md §2.1).
fn arch_of(topology: Option<&str>) -> Arch {
    match topology {
        None => Arch::V2,
        Some(_) => Arch::V3,
    }
}

/// Run the stuck machine `m`; check every stuck TOP_SP's dump against the hang report's line
/// for it. Returns the stages seen (0 start, 1 records, 2 completions).
fn check_stuck(mut m: Machine) -> Vec<u8> {
    // Checks the report text a user reads, on purpose.
    let mut stages = vec![];
    let e = m.run().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::CollectivesHang);
    let report = e.to_string();
    let stuck = m.stuck_topsps();
    assert!(!stuck.is_empty(), "{report}");
    for &(chip, t) in &stuck {
        let who = format!("chip {chip} TOP_SP {t}): cc_op entry ");
        let line = report
            .lines()
            .find(|l| l.contains(&who))
            .unwrap_or_else(|| panic!("{who:?} not in {report}"));
        if opennrt::device::settings::hang_dump_dir().is_none() {
            let offer = format!(
                "CC context of chip {chip} TOP_SP {t} (arch {}): Machine::ctx_log({chip}, {t})",
                m.arch.id()
            );
            assert!(report.contains(&offer), "{offer:?} not in {report}");
        }
        let entry = num_after(line, "cc_op entry ", 10).unwrap();
        let read = num_after(line, "(READ 0x", 16).unwrap();
        let read_str = format!("0x{read:016X}");

        let img = m.cc_context(chip, t).unwrap();
        assert_eq!(img.len(), ctx_size(m.arch));
        let state = img[algo_off(m.arch) + 0x200];
        let j = json(&m.ctx_log(chip, t).unwrap());
        assert!(j["model_name"]
            .as_str()
            .unwrap()
            .ends_with(&format!("chip {chip} TOP_SP {t}")));
        let top = &j["ncfw_ctx_top_sp"];
        assert_eq!(top["neff"]["op"]["id"], entry, "{line}");
        assert_eq!(top["algo"]["hierarchical"]["run_state"], u64::from(state));
        assert_ne!(state, 3, "stuck, not done: {line}");
        if let Some(rec) = num_after(line, "SLOT SPAD record ", 10) {
            assert_eq!(state, 1, "in its records: {line}");
            // The lead channel's runtime row runs; its static recv_sema is the waited
            // semaphore in the READ form (device.md §9.2).
            let rows = top["algo"]["ring"]["channels"].as_array().unwrap();
            let running: Vec<&Value> = rows.iter().filter(|r| r["run_state"] == 1).collect();
            assert_eq!(running.len(), 1, "one lane per TOP_SP");
            let c = running[0]["channel_id"].as_u64().unwrap() as usize;
            assert_eq!(running[0]["slot_idx"], rec / 64);
            let stat = &top["configs"]["algo"]["ring"]["channels"][c];
            assert_eq!(stat["recv_sema"]["addr"]["soc_addr"], read_str.as_str());
            let list = top["neff"]["op"]["ctrl_entry"]["cc_op"]["ring"]["channel_list"]
                .as_u64()
                .unwrap();
            assert_eq!(
                list.trailing_zeros() as usize,
                c,
                "the lowest listed channel"
            );
        } else if line.contains("entry start (trigger)") {
            assert_eq!(state, 0);
            let key = if entry == 0 {
                "trigger"
            } else {
                "trigger_next"
            };
            let sem = &top["configs"]["neff"][key]["addr"]["soc_addr"];
            assert_eq!(sem, read_str.as_str());
        } else {
            assert!(line.contains("collecting completions"), "{line}");
            assert_eq!(state, 2);
            let sem = &top["configs"]["neff"]["complete_prev"]["addr"]["soc_addr"];
            assert_eq!(sem, read_str.as_str());
        }
        stages.push(state);
    }
    stages
}

#[test]
fn stuck_topsp_dump_shows_its_wait_and_position() {
    for topology in [None, Some("trn2.48xlarge")] {
        let (m, _) = loaded(topology, true);
        assert_eq!(m.arch, arch_of(topology), "{topology:?}");
        let stages = check_stuck(m);
        assert!(stages.iter().all(|&s| s == 1), "waiting in the records");
    }
}

/// Rank 1's TOP_SP 0 never triggered (device.md §8.2): it waits at the start, the others wait
/// in their records.
#[test]
fn untriggered_topsp_dump_shows_the_trigger() {
    let (mut m, map) = loaded(Some("trn2.48xlarge"), false);
    let (chip, dev) = (map.chip_id(1).unwrap(), map.device_topsp(1, 0).unwrap());
    let block = m.mem.sem_block_mut(chip, BlockId::TopSp(dev)).unwrap();
    block.sub(0, 1);
    let stages = check_stuck(m);
    assert!(stages.contains(&0) && stages.contains(&1), "{stages:?}");
}

#[test]
fn finished_topsps_show_completion() {
    for topology in [None, Some("trn2.48xlarge")] {
        let (mut m, map) = loaded(topology, false);
        m.run().unwrap();
        assert!(m.stuck_topsps().is_empty());
        assert_eq!(m.ctx_dump_offer(), "", "nothing stuck, nothing offered");
        let all = topsps(&m, &map);
        for r in 0..2 {
            assert!(all.iter().any(|x| x.0 == r), "rank {r} has TOP_SPs");
        }
        for (r, chip, t) in all {
            let img = m.cc_context(chip, t).unwrap();
            assert_eq!(
                img[algo_off(m.arch) + 0x200],
                3,
                "rank {r} TOP_SP {t}: done"
            );
            let j = json(&m.ctx_log(chip, t).unwrap());
            let top = &j["ncfw_ctx_top_sp"];
            let op_num = top["configs"]["neff"]["op_num"].as_u64().unwrap();
            assert_eq!(top["neff"]["op"]["id"], op_num - 1, "the last entry");
            let rows = top["algo"]["ring"]["channels"].as_array().unwrap();
            let done = rows.iter().filter(|r| r["run_state"] == 3).count();
            assert_eq!(done, 1, "the lead channel's row shows completion");
        }
    }
}

#[test]
fn dumps_are_written_for_every_stuck_topsp() {
    let (mut m, _) = loaded(Some("trn2.48xlarge"), true);
    m.run().unwrap_err();
    let dir = std::env::temp_dir().join(format!("opennrt-ctx-dumps-{}", std::process::id()));
    let files = m.write_ctx_dumps(&dir).unwrap();
    let stuck = m.stuck_topsps();
    assert_eq!(files.len(), stuck.len());
    for (f, &(chip, t)) in files.iter().zip(&stuck) {
        let stem = format!("chip{chip}_topsp{t}");
        assert_eq!(f, &dir.join(format!("{stem}.json")));
        let text = std::fs::read_to_string(f).unwrap();
        let again = m.ctx_log(chip, t).unwrap();
        assert_eq!(without_host_addrs(&text), without_host_addrs(&again));
        json(&text);
        let raw = std::fs::read(dir.join(format!("{stem}.ctx"))).unwrap();
        assert_eq!(raw, m.cc_context(chip, t).unwrap());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

//! Shared by the live-CC-context integration tests: a real 2-rank ring all-reduce (the pipeline
//! `lower` → `address_map` → `emit`, loaded by `runtime::machine::load`), spec offsets, and
//! a JSON reader for `ctx_log` text.

#![allow(dead_code)] // each test binary uses a part of it

use opennrt::device::executor::Machine;
use opennrt::dtype::Dtype;
use opennrt::lower::addrmap::AddressMap;
use opennrt::lower::emit::emit;
use opennrt::lower::pipeline::{address_map, lower, LowerConfig};
use opennrt::lower::program::Algorithm;
use opennrt::lower::request::{CollectiveOp, CollectiveRequest, ReduceOp};
use opennrt::lower::topology::Topology;
use opennrt::ncfw::Arch;
use opennrt::runtime::machine::load;
use serde_json::Value;

/// A loaded (triggered, not yet run) 2-rank fp32 ring all-reduce of 1001 elements on
/// `topology` (`None`: the default, trn1.32xlarge); `drop_rank1` removes rank 1's program, so
/// rank 0 waits for data that never comes.
pub fn loaded(topology: Option<&str>, drop_rank1: bool) -> (Machine, AddressMap) {
    try_loaded(topology, drop_rank1).unwrap()
}

/// [`loaded`], with the loader's error instead of a panic.
pub fn try_loaded(
    topology: Option<&str>,
    drop_rank1: bool,
) -> opennrt::Result<(Machine, AddressMap)> {
    let world = 2;
    let req = CollectiveRequest::new(
        CollectiveOp::AllReduce,
        Dtype::Fp32,
        Some(ReduceOp::Add),
        1001,
        (0..world).collect(),
        0,
    );
    let mut cfg = LowerConfig::for_world(world).unwrap();
    if let Some(t) = topology {
        cfg.topology = Topology::parse(t, world).unwrap();
    }
    cfg.select.forced = Some(Algorithm::Ring);
    let prog = lower(&req, &cfg).unwrap();
    let map = address_map(&prog, &cfg.topology).unwrap();
    let mut em = emit(&prog, &map).unwrap();
    if drop_rank1 {
        em.ranks[1].topsps.clear();
    }
    let n = map.buffers().input as usize;
    let inputs: Vec<Vec<u8>> = (0..world)
        .map(|r| {
            (0..n)
                .map(|i| ((i / 4) as u8 % 7) * (r as u8 + 1))
                .collect()
        })
        .collect();
    let m = load(&prog, &em, &map, &inputs)?;
    Ok((m, map))
}

/// Every (rank, chip, device TOP_SP) the machine holds.
pub fn topsps(m: &Machine, map: &AddressMap) -> Vec<(u32, u8, u8)> {
    let mut out = vec![];
    for r in 0..map.ranks() {
        for t in 0..map.topsps_per_rank() {
            let (chip, dev) = (map.chip_id(r).unwrap(), map.device_topsp(r, t).unwrap());
            if m.cc_context(chip, dev).is_some() {
                out.push((r, chip, dev));
            }
        }
    }
    out
}

/// Spec offsets of the runtime `algo` context: 0x30C0 on v2, 0x42E0 on v3+ (docs/contract/carrier.md §3.1).
pub fn algo_off(arch: Arch) -> usize {
    match arch {
        Arch::V2 => 0x30C0,
        _ => 0x42E0,
    }
}

/// Minimum context size: 0x32C6 (v2) / 0x44E6 (v3+) (docs/contract/carrier.md §3.1).
pub fn ctx_size(arch: Arch) -> usize {
    match arch {
        Arch::V2 => 0x32C6,
        _ => 0x44E6,
    }
}

/// Parse `ctx_log` text, quoting the glibc `%p` values first (docs/contract/carrier.md §5 item 5).
pub fn json(text: &str) -> Value {
    let mut s = String::new();
    for line in text.lines() {
        match line.split_once("\": ") {
            Some((k, v)) if v.starts_with("0x") || v.starts_with("(nil)") => {
                let (val, comma) = v.strip_suffix(',').map_or((v, ""), |x| (x, ","));
                s.push_str(&format!("{k}\": \"{val}\"{comma}\n"));
            }
            _ => {
                s.push_str(line);
                s.push('\n');
            }
        }
    }
    serde_json::from_str(&s).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// The text with the `%p` lines that print addresses of the caller's buffer removed
/// (`pring_base_addr`, `pring_total_desc_num`: different on every call, docs/contract/carrier.md §5 item 5).
pub fn without_host_addrs(text: &str) -> String {
    let keep = text.lines().filter(|l| !l.contains("\"pring_"));
    keep.collect::<Vec<_>>().join("\n")
}

//! What a run must fit before its first size starts, checked up front so a run that cannot work
//! is refused at once with the reason (exit status 2) instead of failing every size after a
//! timeout with the reason only in a log file.
//!
//! * Ranks ([`cores`]): each rank owns one logical core of the simulated instance (rank `r`
//!   runs on core `r`, `NEURON_RT_VISIBLE_CORES`; across hosts core `r mod (r/N)` of its
//!   host), so the ranks of one host may not exceed the instance's logical cores: the
//!   instance of `OPENNRT_INSTANCE_TYPE` (else `NEURON_RT_FAKE_INSTANCE_TYPE`, else
//!   trn1.32xlarge, 32 logical cores) at its logical-core size, as `nrt_init` reads them
//!   (`opennrt::runtime::config`). The refusal names the instances that are large enough.
//! * Sizes ([`size`]): a rank's `input0` and `output0` are NEFF vars, which the NEFF loader
//!   takes up to [`MAX_VAR_BYTES`] (2^48) bytes; and the software device's device memory is
//!   this host's memory, which holds every rank's tensors at once, so their sum may not exceed
//!   the host's physical memory (beyond it the allocation fails or the kernel kills a worker).

use opennrt::neff::build::MAX_VAR_BYTES;
use opennrt::runtime::config::{env_lookup, Config, INSTANCE_TYPES};

/// The variables that name the simulated instance, as `nrt_init` reads them.
const INSTANCE_VARS: [&str; 2] = ["OPENNRT_INSTANCE_TYPE", "NEURON_RT_FAKE_INSTANCE_TYPE"];

/// The configuration a worker's `nrt_init` sees for instance `inst` (`None`: the environment's),
/// without the core selection the launcher sets per worker anyway.
fn config(inst: Option<&str>) -> Result<Config, String> {
    Config::from_lookup(|k| match k {
        "NEURON_RT_VISIBLE_CORES" | "NEURON_RT_NUM_CORES" => None,
        k if INSTANCE_VARS.contains(&k) && inst.is_some() => {
            (k == INSTANCE_VARS[0]).then(|| inst.unwrap_or_default().to_string())
        }
        k => env_lookup(k),
    })
    .map_err(|e| e.message().to_string())
}

/// `Err` when `ranks` ranks (on each of `hosts` hosts) do not fit the simulated instance's
/// logical cores.
pub fn cores(ranks: u32, hosts: u32) -> Result<(), String> {
    let c = config(None)?;
    let total = c.total_cores();
    if ranks <= total {
        return Ok(());
    }
    let larger: Vec<String> = INSTANCE_TYPES
        .iter()
        .filter_map(|t| {
            let n = config(Some(t.name)).ok()?.total_cores();
            (n >= ranks).then(|| format!("{} ({n})", t.name))
        })
        .collect();
    let pick = if larger.is_empty() {
        "no simulated instance has that many; lower -r".to_string()
    } else {
        format!(
            "pick a larger one with OPENNRT_INSTANCE_TYPE: {}",
            larger.join(", ")
        )
    };
    let what = if hosts > 1 {
        format!(
            "-r/--nworkers {} over -N/--nnodes {hosts} puts {ranks} ranks on each host, which \
             need one logical core each",
            ranks * hosts
        )
    } else {
        format!("-r/--nworkers {ranks} needs one logical core per rank")
    };
    Err(format!(
        "{what}, but the simulated instance {} has {total} (logical-core size {}); {pick}",
        c.instance.name, c.lnc
    ))
}

/// This host's physical memory in bytes (0 when unknown: then it is not checked).
fn physical_memory() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let (pages, page) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    u64::try_from(pages).unwrap_or(0) * u64::try_from(page).unwrap_or(0)
}

/// `Err` when one rank's `input0` of `in_wire` bytes and `output0` of `out_wire` bytes (as
/// the collective runs them, fp32 when widened) do not fit: a NEFF var or, over `ranks`
/// ranks, this host's memory. `what` names the size in the message.
pub fn size(what: &str, ranks: u32, in_wire: u64, out_wire: u64) -> Result<(), String> {
    for (name, b) in [("input0", in_wire), ("output0", out_wire)] {
        if b > MAX_VAR_BYTES {
            return Err(format!(
                "{what}: one rank's {name} would be {b} B, above the NEFF loader's limit of \
                 2^48 B per var; lower -e/--maxbytes"
            ));
        }
    }
    let all = u128::from(ranks) * (u128::from(in_wire) + u128::from(out_wire));
    let phys = physical_memory();
    if phys > 0 && all > u128::from(phys) {
        return Err(format!(
            "{what}: the {ranks} ranks' input0 and output0 ({in_wire} B + {out_wire} B each, \
             {all} B in all) do not fit this host's {phys} B of memory, which is the software \
             device's device memory; lower -e/--maxbytes or -r/--nworkers"
        ));
    }
    Ok(())
}

//! Which processes of a job share a host, in the one sense that matters here: they can map
//! each other's device segments, because they see the same `/dev/shm` (docs/design.md §2.7).
//!
//! A process's **host key** is `<boot id>:<device>:<inode>` of its `/dev/shm`: the kernel's
//! boot id (`/proc/sys/kernel/random/boot_id`, a random UUID per boot, so two machines never
//! share it) and the identity of the directory it mounts there. Two processes on one machine
//! in different mount namespaces, each with its own tmpfs on `/dev/shm` (a container, or the
//! test hosts of `capi-tests/hosts/`), differ in the device; processes that share the tmpfs
//! agree. Choice: never infer it from a host name or an address — two containers on one
//! machine share an address space for names but not a `/dev/shm`, and one machine has many
//! addresses.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;

use once_cell::sync::Lazy;
use parking_lot::Mutex;

use crate::error::Result;
use crate::lower::topology::{Topology, JOB_TOPOLOGY, TOPOLOGY_ENV};

static KEY: Lazy<String> = Lazy::new(|| {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| format!("no-boot-id-{}", std::process::id()));
    match std::fs::metadata("/dev/shm") {
        Ok(m) => format!("{boot}:{:x}:{:x}", m.dev(), m.ino()),
        // Without /dev/shm no segment can be shared: a key of this process alone.
        Err(_) => format!("{boot}:pid{}", std::process::id()),
    }
});

/// This process's host key (module doc).
pub fn key() -> &'static str {
    &KEY
}

/// The lowering's topology for a job whose global ids live on `hosts` (host keys by global
/// id), as an `OPENNRT_TOPOLOGY` value: the hosts are the nodes. `None` when one host holds
/// them all (the default topology stands) or when the hosts do not hold equal, node-major
/// blocks of ranks (global id g on the (g / per)-th host), which no topology can describe.
/// `base` is the topology the lowering would take otherwise: its instance with `nodes=H` when
/// a node of it has exactly the ranks of a host, else `custom:Hx<per>x1` of its generation
/// with one rank per device and a switch between nodes (EFA).
pub fn topology_of(
    hosts: &[String],
    base: &Topology,
) -> std::result::Result<Option<String>, String> {
    let mut order: Vec<&str> = Vec::new();
    for h in hosts {
        if order.last() != Some(&h.as_str()) {
            if order.contains(&h.as_str()) {
                return Err(format!(
                    "global ids of host {} are not contiguous (ranks must be numbered host by host)",
                    order.len()
                ));
            }
            order.push(h);
        }
    }
    let n_hosts = order.len() as u32;
    if n_hosts <= 1 {
        return Ok(None);
    }
    let world = hosts.len() as u32;
    if world % n_hosts != 0 {
        return Err(format!(
            "{world} ranks on {n_hosts} hosts: the hosts do not hold the same number of ranks"
        ));
    }
    let per = world / n_hosts;
    if let Some(h) = (0..n_hosts).find(|&h| {
        hosts[(h * per) as usize..((h + 1) * per) as usize]
            .iter()
            .any(|k| k.as_str() != order[h as usize])
    }) {
        return Err(format!(
            "host {h} does not hold {per} ranks like the others (ranks must be numbered host by host)"
        ));
    }
    Ok(Some(match base.instance {
        Some(inst) if base.logical_cores_per_node() == per => {
            format!("{}:nodes={n_hosts}:lnc={}", inst.name, base.lnc)
        }
        _ => format!(
            "custom:{n_hosts}x{per}x1:lnc=1:gen={}:fabric=switch",
            base.generation.name()
        ),
    }))
}

/// Cached per world size: the topology [`job_topology`] derived (`None`: the default).
static DERIVED: Lazy<Mutex<HashMap<u32, Option<String>>>> =
    Lazy::new(|| Mutex::new(HashMap::new()));

/// The lowering's topology for a world of `world` ranks of this process's job, derived from
/// its hosts ([`topology_of`]; asked of the root once per world size), when
/// `OPENNRT_TOPOLOGY=job` and the job spans hosts; `None` otherwise, or when the hosts hold no
/// node-major shape (logged once: the lowering then sees one node; results are still exact).
///
/// Choice: only on request. The root answers once every global id of the world has joined, so
/// a collective prepared before the world is whole waits for it here; by default, preparing
/// never waits for the other processes (a pending collective that a refused join must fail,
/// `capi-tests/mp`): a collective of the whole world learns the hosts from its first go
/// meeting instead ([`topology_for_world`]), and a smaller group keeps the default shape.
pub fn job_topology(config: &crate::runtime::config::Config, world: u32) -> Result<Option<String>> {
    let asked = config.lowering.get(TOPOLOGY_ENV);
    if world < 2 || asked.as_deref().map(str::trim) != Some(JOB_TOPOLOGY) {
        return Ok(None);
    }
    if let Some(t) = DERIVED.lock().get(&world) {
        return Ok(t.clone());
    }
    let Some(hosts) = super::bootstrap::job_hosts(world)? else {
        return Ok(None);
    };
    derive(config, world, &hosts)
}

/// The lowering's topology for a world whose global ids live on `hosts` ([`topology_of`]),
/// logged and cached per world size like [`job_topology`]'s: how a collective of the whole
/// world, met at the root, learns where its ranks are when `OPENNRT_TOPOLOGY` is not set
/// (`run`, "The job's topology"). `None` when no variable may change it, or one host holds
/// every rank.
pub fn topology_for_world(
    config: &crate::runtime::config::Config,
    hosts: &[String],
) -> Result<Option<String>> {
    let world = hosts.len() as u32;
    if world < 2 || config.lowering.get(TOPOLOGY_ENV).is_some() {
        return Ok(None);
    }
    if let Some(t) = DERIVED.lock().get(&world) {
        return Ok(t.clone());
    }
    derive(config, world, hosts)
}

fn derive(
    config: &crate::runtime::config::Config,
    world: u32,
    hosts: &[String],
) -> Result<Option<String>> {
    let base = config.lower_config(world)?.topology;
    let t = match topology_of(hosts, &base) {
        Ok(t) => t,
        Err(why) => {
            crate::log_warn!(
                "cc",
                "a {world}-rank world spans hosts, but {why}: the lowering sees one node of {} \
                 (set OPENNRT_TOPOLOGY to choose the shape)",
                base.name
            );
            None
        }
    };
    if let Some(t) = &t {
        crate::log_info!(
            "cc",
            "a {world}-rank world spans hosts: the lowering's topology is {t} (the hosts as nodes)"
        );
    }
    DERIVED.lock().insert(world, t.clone());
    Ok(t)
}

/// Forget the derived topologies (`nrt_close`).
pub fn reset() {
    DERIVED.lock().clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_names_the_boot_and_the_shm_directory() {
        let k = key();
        let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
        assert!(k.starts_with(boot.trim()), "{k}");
        let m = std::fs::metadata("/dev/shm").unwrap();
        assert!(k.ends_with(&format!(":{:x}:{:x}", m.dev(), m.ino())), "{k}");
        assert_eq!(k, key(), "stable within the process");
    }

    fn hosts(per_host: &[&str]) -> Vec<String> {
        per_host.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_hosts_are_the_nodes() {
        let trn1 = Topology::for_world(4).unwrap();
        assert_eq!(topology_of(&hosts(&["a", "a", "a", "a"]), &trn1), Ok(None));
        assert_eq!(
            topology_of(&hosts(&["a", "a", "b", "b"]), &trn1)
                .unwrap()
                .as_deref(),
            Some("custom:2x2x1:lnc=1:gen=v2:fabric=switch")
        );
        let t = topology_of(&hosts(&["a", "b", "c", "d"]), &trn1)
            .unwrap()
            .unwrap();
        let parsed = Topology::parse(&t, 4).unwrap();
        assert_eq!(
            (parsed.nodes, parsed.logical_cores_per_node()),
            (4, 1),
            "{t}"
        );
        // A whole trn1.32xlarge per host: the instance itself, with nodes.
        let big = Topology::for_world(64).unwrap();
        let mut two: Vec<&str> = vec!["a"; 32];
        two.extend(vec!["b"; 32]);
        let t = topology_of(&hosts(&two), &big).unwrap().unwrap();
        assert!(t.starts_with("trn1.32xlarge:nodes=2"), "{t}");
        assert_eq!(Topology::parse(&t, 64).unwrap().nodes, 2);
    }

    #[test]
    fn job_means_the_default_outside_a_job() {
        let get = |k: &str| (k == TOPOLOGY_ENV).then(|| JOB_TOPOLOGY.to_string());
        let t = Topology::from_lookup(get, 4).unwrap();
        assert_eq!(t.name, Topology::for_world(4).unwrap().name);
    }

    #[test]
    fn shapes_no_topology_can_describe_are_refused() {
        let trn1 = Topology::for_world(4).unwrap();
        for bad in [
            &["a", "b", "a", "b"][..],
            &["a", "a", "a", "b"],
            &["a", "b", "b"],
        ] {
            assert!(topology_of(&hosts(bad), &trn1).is_err(), "{bad:?}");
        }
    }
}

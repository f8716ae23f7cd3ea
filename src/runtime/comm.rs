//! The global communicators of this process (docs/contract/abi.md §3.5, §5.7, §5.10–§5.11;
//! docs/design.md §2.6).
//!
//! The vendor keeps two collective worlds per process: context slot 0 for NEFF-embedded
//! collectives and the host barrier / all-gather (`nrt_build_global_comm`, and implicitly the
//! first `nrt_barrier`), and slot 1 for the standalone collectives of `nrta_cc_*`
//! (`nrt_cc_global_comm_init`). Each logical core the process owns joins a world once, as one
//! global device id (its rank); the world's size is fixed by the first call and is immutable
//! afterwards (a different size on re-entry is `NRT_INVALID`, docs/contract/abi.md §3.5 **\[H\]**).
//!
//! Choices (the spec leaves them open):
//! * A core may join a world again with the same id and size (idempotent); a different id for
//!   the same core, or an id another core of this process already holds, is `NRT_INVALID`.
//! * `NEURON_RT_ROOT_COMM_ID` is optional while every rank of the world lives in this process
//!   (the rendezvous is in memory); when set it is validated (`host:port`, `[v6]:port`, port
//!   1–65535) and recorded, and it is what the multi-process bootstrap binds.
//! * With `NEURON_RT_ROOT_COMM_ID` set, every join also registers the core's global id with the
//!   job's root (`runtime::multi_process::bootstrap`; the process owning global id 0 is the root, so a job whose
//!   ranks are all here stays in memory). Without it the world must fit in this process's
//!   cores.

use std::collections::BTreeMap;

use parking_lot::Mutex;

use crate::error::{Error, Result};

/// Which collective context a world belongs to (docs/contract/abi.md §3.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Slot {
    /// Slot 0: NEFF collectives, `nrt_build_global_comm`, `nrt_barrier`, `nrt_all_gather`.
    Neff = 0,
    /// Slot 1: host-driven collectives (`nrt_cc_global_comm_init`, `nrta_cc_*`).
    HostCc = 1,
}

/// One world as this process sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct World {
    /// Number of ranks (global device ids `0..count`).
    pub count: u32,
    /// The local cores that joined and their global ids.
    pub members: BTreeMap<u32, u32>,
    /// `NEURON_RT_ROOT_COMM_ID` as read when the world was created.
    pub root_comm_id: Option<String>,
}

impl World {
    /// The local core holding global id `gid`.
    pub fn vnc_of(&self, gid: u32) -> Option<u32> {
        self.members
            .iter()
            .find(|(_, &g)| g == gid)
            .map(|(&v, _)| v)
    }
}

static WORLDS: Mutex<BTreeMap<Slot, World>> = Mutex::new(BTreeMap::new());

/// Validate a root comm id: `host:port` or `[ipv6]:port`, port 1–65535, host non-empty.
pub fn parse_root_comm_id(s: &str) -> Result<(String, u16)> {
    let bad = |why: &str| {
        Error::invalid(format!(
            "NEURON_RT_ROOT_COMM_ID={s:?}: {why} (expected host:port or [ipv6]:port, docs/contract/abi.md §5.10)"
        ))
    };
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let (h, p) = rest
            .split_once("]:")
            .ok_or_else(|| bad("unclosed [ipv6]"))?;
        (h, p)
    } else {
        s.rsplit_once(':').ok_or_else(|| bad("no port"))?
    };
    if host.is_empty() {
        return Err(bad("empty host"));
    }
    if !s.starts_with('[') && host.contains(':') {
        return Err(bad("an IPv6 address must be bracketed"));
    }
    let port: u16 = port
        .parse()
        .map_err(|_| bad("the port is not a number below 65536"))?;
    if port == 0 {
        return Err(bad("port 0"));
    }
    Ok((host.to_string(), port))
}

/// Join core `vnc` (process-relative, `< visible_cores`) to the world of `slot` as global id
/// `gid` of `count`. `root` is `NEURON_RT_ROOT_COMM_ID` if set.
pub fn join(
    slot: Slot,
    vnc: u32,
    gid: u32,
    count: u32,
    visible_cores: u32,
    root: Option<String>,
) -> Result<()> {
    if vnc >= visible_cores {
        return Err(Error::invalid(format!(
            "vnc {vnc} is not one of this process's {visible_cores} logical cores \
             (NEURON_RT_VISIBLE_CORES / NEURON_RT_NUM_CORES)"
        )));
    }
    if count == 0 {
        return Err(Error::invalid(
            "g_device_count = 0: a world needs at least one rank",
        ));
    }
    if gid >= count {
        return Err(Error::invalid(format!(
            "g_device_id {gid} is not below g_device_count {count}"
        )));
    }
    if let Some(r) = &root {
        parse_root_comm_id(r)?;
    }
    // The local rules first; the bootstrap (which may wait for the root) runs without the lock
    // so the other cores of this process can join meanwhile.
    if check_local(slot, vnc, gid, count)? {
        return Ok(());
    }
    // With a root comm id the job may span processes (each process owning cores of its own,
    // even when its visible cores could hold the world): the join goes through the job's root,
    // which is this process when it owns global id 0. Without one, the world must fit here.
    match root.as_deref() {
        Some(r) => crate::runtime::multi_process::bootstrap::join(slot as u8, gid, count, r)?,
        None if count > visible_cores => {
            return Err(Error::invalid(format!(
                "a world of {count} ranks, but this process owns {visible_cores} logical \
                 core(s): the other ranks are other processes, which needs \
                 NEURON_RT_ROOT_COMM_ID=host:port (docs/contract/abi.md §5.10)"
            )))
        }
        None => {}
    }
    let mut worlds = WORLDS.lock();
    let w = worlds.entry(slot).or_insert_with(|| World {
        count,
        members: BTreeMap::new(),
        root_comm_id: root.clone(),
    });
    if let Some(other) = w.vnc_of(gid).filter(|&v| v != vnc) {
        return Err(Error::invalid(format!(
            "global id {gid} is already held by vnc {other} of this process"
        )));
    }
    w.members.insert(vnc, gid);
    crate::log_info!(
        "comm",
        "vnc {vnc} joined the {slot:?} world as rank {gid} of {count} (root comm id {:?})",
        w.root_comm_id
    );
    Ok(())
}

/// The rules a join must pass in this process; `Ok(true)` when the core already joined as
/// this id (idempotent).
fn check_local(slot: Slot, vnc: u32, gid: u32, count: u32) -> Result<bool> {
    let worlds = WORLDS.lock();
    let Some(w) = worlds.get(&slot) else {
        return Ok(false);
    };
    if w.count != count {
        return Err(Error::invalid(format!(
            "the {slot:?} world has {} ranks; it cannot be re-created with {count} \
             (the world is immutable once set, docs/contract/abi.md §3.5)",
            w.count
        ))
        .with_field("count")
        .with_values(w.count, count));
    }
    match w.members.get(&vnc) {
        Some(&g) if g == gid => return Ok(true),
        Some(&g) => {
            return Err(Error::invalid(format!(
                "vnc {vnc} already joined the {slot:?} world as global id {g}, not {gid}"
            )))
        }
        None => {}
    }
    if let Some(other) = w.vnc_of(gid) {
        return Err(Error::invalid(format!(
            "global id {gid} is already held by vnc {other} of this process"
        )));
    }
    Ok(false)
}

/// The world of `slot`, if created.
pub fn world(slot: Slot) -> Option<World> {
    WORLDS.lock().get(&slot).cloned()
}

/// Check that core `vnc` joined `slot`'s world as `gid` of `count` (what a communicator names).
pub fn check_member(slot: Slot, vnc: u32, gid: u32, count: u32) -> Result<()> {
    let w = world(slot).ok_or_else(|| {
        Error::invalid(format!(
            "no {slot:?} world: call {} first",
            match slot {
                Slot::HostCc => "nrt_cc_global_comm_init",
                Slot::Neff => "nrt_build_global_comm",
            }
        ))
    })?;
    match w.members.get(&vnc) {
        Some(&g) if g == gid && w.count == count => Ok(()),
        Some(&g) => Err(Error::invalid(format!(
            "comm names vnc {vnc} as global id {gid} of {count}, but vnc {vnc} joined the \
             {slot:?} world as global id {g} of {}",
            w.count
        ))),
        None => Err(Error::invalid(format!(
            "vnc {vnc} has not joined the {slot:?} world (global comm init for this core first)"
        ))),
    }
}

/// Forget every world (`nrt_close`).
pub fn reset() {
    WORLDS.lock().clear();
}

#[cfg(test)]
mod tests;

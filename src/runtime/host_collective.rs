//! `nrt_barrier` and `nrt_all_gather` (docs/contract/abi.md §3.5, §5.8).
//!
//! * **Barrier.** The vendor runs a tiny all-reduce NEFF (128-byte payload) on the device; so
//!   do we: every caller contributes 32 FP32 ones, the all-reduce over global ids
//!   `0..g_device_count` is lowered, emitted and executed on the software device like any other
//!   collective (`runtime::collective`), and each rank checks that it got `g_device_count` in every
//!   element (a wrong value is a device fault, `NRT_FAILURE`). The first barrier creates the
//!   slot-0 world (the vendor's "the first barrier also performs the global bootstrap"); a
//!   failure to build the barrier's collective is sticky for the core (§3.5 **\[H\]**).
//! * **All-gather.** Host memory, exchanged through the host rendezvous like the vendor's
//!   bootstrap sockets (no device): `output` is zeroed, the caller's slice copied to
//!   `output + g_device_id·size`, then every other rank's slice lands at its place. Ranks
//!   passing different sizes fail on every rank naming both sizes.
//!
//! Both wait for the other ranks at most `NEURON_RT_EXEC_TIMEOUT` and then fail with
//! `NRT_TIMEOUT` naming the ranks that never came, or with `NRT_NETWORK_PROXY_FAILURE` when
//! the job spans hosts and the network proxy has lost a peer process meanwhile.

use std::collections::HashMap;
use std::sync::Arc;

use once_cell::sync::Lazy;
use parking_lot::Mutex;

use crate::error::{Error, ErrorKind, Result};
use crate::isa::enums::Dtype;
use crate::lower::request::{CollectiveOp, CollectiveRequest, ReduceOp};
use crate::runtime::collective::{self, Arrival, VecIo};
use crate::runtime::comm::{self, Slot};
use crate::runtime::rendezvous::{GroupKey, Rendezvous};
use crate::runtime::sys_trace;

/// FP32 elements of the barrier's all-reduce (128 bytes, docs/contract/abi.md §3.5 **\[M\]**).
pub const BARRIER_ELEMS: u64 = 32;

/// Absolute logical cores whose barrier failed to build: sticky for the life of the process
/// (docs/contract/abi.md §3.5 **\[H\]**), so neither `nrt_close` nor a later `nrt_init` clears it.
static BROKEN: Lazy<Mutex<HashMap<u32, crate::error::Error>>> =
    Lazy::new(|| Mutex::new(HashMap::new()));

static GATHERS: Lazy<Rendezvous<Vec<u8>, Arc<Vec<u8>>>> = Lazy::new(Rendezvous::new);

fn root_comm_id() -> Option<String> {
    crate::runtime::process::config()
        .ok()
        .and_then(|c| c.root_comm_id.clone())
}

/// Join the slot-0 world and name the `kind` exchange over all of its ranks.
fn join_world(
    kind: &'static str,
    vnc: u32,
    gid: u32,
    count: u32,
    visible: u32,
) -> Result<GroupKey> {
    comm::join(Slot::Neff, vnc, gid, count, visible, root_comm_id())?;
    Ok(GroupKey {
        kind,
        slot: Slot::Neff as u8,
        group: (0..count).collect(),
    })
}

/// `nrt_barrier(vnc, gid, count)` on a process owning `visible` cores (one `cc_exec_running`
/// run of the system trace).
pub fn barrier(vnc: u32, gid: u32, count: u32, visible: u32) -> Result<()> {
    let name = || "barrier".to_string();
    sys_trace::record(sys_trace::CC_EXEC, vnc, name, || {
        barrier_run(vnc, gid, count, visible)
    })
}

fn barrier_run(vnc: u32, gid: u32, count: u32, visible: u32) -> Result<()> {
    let key = join_world("barrier", vnc, gid, count, visible)?;
    let core = crate::runtime::process::config()?.first_core + vnc;
    if let Some(e) = BROKEN.lock().get(&core) {
        return Err(e
            .clone()
            .context("the barrier of this core failed to build earlier (sticky)"));
    }
    let req = CollectiveRequest::new(
        CollectiveOp::AllReduce,
        Dtype::Fp32,
        Some(ReduceOp::Add),
        BARRIER_ELEMS,
        key.group.clone(),
        gid,
    );
    let lowered = match collective::prepare(&req, count) {
        Ok(l) => l,
        Err(e) => {
            BROKEN.lock().insert(core, e.clone());
            return Err(e.context("building the barrier's all-reduce"));
        }
    };
    let out = Arc::new(Mutex::new(Vec::new()));
    let io = VecIo {
        input: (0..BARRIER_ELEMS)
            .flat_map(|_| 1f32.to_le_bytes())
            .collect(),
        output: out.clone(),
    };
    let instance = collective::meetings().ticket(&key, gid);
    collective::run(
        &key,
        instance,
        Arrival {
            req,
            lowered,
            io: Box::new(io),
        },
    )?;
    let got = out.lock();
    let want = count as f32;
    let wrong = got
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .position(|v| v != want);
    if got.len() as u64 != BARRIER_ELEMS * 4 || wrong.is_some() {
        return Err(Error::failure(format!(
            "barrier #{instance}: the device all-reduce returned a wrong value at element \
             {wrong:?} (expected {want} in all {BARRIER_ELEMS}); device fault"
        )));
    }
    Ok(())
}

/// `nrt_all_gather`: `input` of this rank; `output` receives `count · input.len()` bytes (one
/// `cc_exec_running` run of the system trace).
pub fn all_gather(
    vnc: u32,
    gid: u32,
    count: u32,
    visible: u32,
    input: &[u8],
    output: &mut [u8],
) -> Result<()> {
    let name = || "all_gather".to_string();
    sys_trace::record(sys_trace::CC_EXEC, vnc, name, || {
        all_gather_run(vnc, gid, count, visible, input, output)
    })
}

fn all_gather_run(
    vnc: u32,
    gid: u32,
    count: u32,
    visible: u32,
    input: &[u8],
    output: &mut [u8],
) -> Result<()> {
    let key = join_world("all_gather", vnc, gid, count, visible)?;
    let size = input.len();
    if output.len() != size * count as usize {
        return Err(Error::invalid(format!(
            "the output holds {} bytes, not g_device_count {count} × rank_input_size {size}",
            output.len()
        )));
    }
    output.fill(0);
    let own = gid as usize * size;
    output[own..own + size].copy_from_slice(input);
    let instance = GATHERS.ticket(&key, gid);
    if crate::runtime::multi_process::bootstrap::is_member() {
        let deadline = crate::runtime::process::config()?.exec_timeout();
        let out = Arc::new(Mutex::new(Vec::new()));
        let io = VecIo {
            input: input.to_vec(),
            output: out.clone(),
        };
        let a = crate::runtime::multi_process::bootstrap::RemoteArrival {
            kind: "all_gather",
            slot: key.slot,
            group: &key.group,
            instance,
            rank: gid,
            in_len: size as u64,
            out_len: output.len() as u64,
        };
        crate::runtime::multi_process::bootstrap::remote_run(&a, &io, deadline)?;
        output.copy_from_slice(&out.lock());
        return Ok(());
    }
    let all = gather_here(&key, instance, gid, input.to_vec())?;
    output.copy_from_slice(&all);
    Ok(())
}

/// The rendezvous of host all-gathers.
pub fn gathers() -> &'static Rendezvous<Vec<u8>, Arc<Vec<u8>>> {
    &GATHERS
}

/// Arrive with `input` at host all-gather `instance` of `key` held in this process; returns
/// every rank's input concatenated in rank order. Ranks passing different sizes fail on every
/// rank naming both sizes.
pub fn gather_here(
    key: &GroupKey,
    instance: u64,
    rank: u32,
    input: Vec<u8>,
) -> Result<Arc<Vec<u8>>> {
    let deadline = crate::runtime::process::config()?.exec_timeout();
    let lost = || crate::runtime::multi_process::proxy::running().and_then(|p| p.any_lost());
    let met = GATHERS.meet(key, instance, rank, input, deadline, |parts| {
        if let Some(r) = parts.iter().position(|p| p.len() != parts[0].len()) {
            let e = Error::invalid(format!(
                "nrt_all_gather #{instance}: rank 0 passed rank_input_size {}, rank {r} passed {}",
                parts[0].len(),
                parts[r].len()
            ))
            .with_op("nrt_all_gather")
            .with_rank(r as u32)
            .with_step(instance)
            .with_field("rank_input_size")
            .with_values(parts[0].len(), parts[r].len());
            return parts.iter().map(|_| Err(e.clone())).collect();
        }
        let joined = Arc::new(parts.concat());
        parts.iter().map(|_| Ok(joined.clone())).collect()
    });
    met.map_err(|e| network_cause(e, lost))
}

/// A host all-gather whose ranks never all arrived, in the process that holds its meeting
/// (the job's root), may have waited on a rank behind a cut cable. When the network proxy
/// has lost a peer process (`lost`: why, or `None`), the network is the cause: the timeout
/// becomes `NRT_NETWORK_PROXY_FAILURE` naming the silent host, as the ranks on the far side
/// of the cut report it, and as a device collective's meeting does
/// (`runtime::multi_process::run`). Found by capi-tests/hosts/chaos.sh: with host 1's cable
/// cut, host 1's rank failed with 1206 and the root with `NRT_TIMEOUT` ("rank 1 never
/// arrived"), which hides the cause.
fn network_cause(e: Error, lost: impl FnOnce() -> Option<String>) -> Error {
    if e.kind() != ErrorKind::Timeout {
        return e;
    }
    match lost() {
        Some(why) => Error::new(
            ErrorKind::NetworkProxy,
            format!("{}; a process on another host: {why}", e.message()),
        ),
        None => e,
    }
}

/// Fail pending and later host all-gathers with `NRT_CLOSED` (`nrt_close`).
pub fn abort() {
    GATHERS.abort_all(&Error::new(
        crate::error::ErrorKind::Closed,
        "nrt_close while nrt_all_gather was pending",
    ));
}

/// Forget the meetings (`nrt_close`, after [`abort`]); sticky barrier failures stay.
pub fn reset() {
    GATHERS.reset();
}

#[cfg(test)]
mod tests;

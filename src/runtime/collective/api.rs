//! The `nrta_cc_prepare` / `nrta_cc_schedule` path behind the ABI (docs/contract/abi.md §3.6, §5.4,
//! §5.7): the ABI layer converts and checks the C arguments and calls [`prepare`] and
//! [`schedule`]; everything else about a host-driven collective happens here.
//!
//! * [`prepare`] checks the tensors (device tensors of the communicator's core; NCCL's in-place
//!   layout), builds the request (`lower::request::api`), checks that the core joined the world
//!   as the communicator says, and lowers + emits the collective (`runtime::collective::prepare`, cached
//!   by signature).
//! * [`schedule`] takes the rank's ticket — its place in the group's order of collectives — and
//!   hands the run to the collectives XU `queue` of the core. Two ways (docs/design.md §2.10):
//!   - **on the caller's thread** when the XU is idle and the group meets in this process: the
//!     rank arrives without waiting ([`crate::runtime::rendezvous::Rendezvous::arrive`]); the
//!     last rank to arrive runs the resident machine right there, inside its own schedule
//!     call, and completes every rank's request (status into `*exec_ret`, then the XU's
//!     completed counter, then the eventfds). No thread hand-off is on the critical path: a
//!     poller of `nrta_is_completed` sees its request complete the moment the run ends.
//!   - **on the caller's thread, then maybe the worker** when the ranks run in several
//!     processes (`runtime::multi_process::run`), the XU is idle and the collective is small
//!     ([`INLINE_MAX_BYTES`]): the rank loads and arrives here, waits briefly for its peers,
//!     and runs here if all arrived; otherwise the XU's worker finishes it.
//!   - **on the XU's worker** otherwise (the XU has work queued — FIFO order — or a large
//!     collective across processes): the worker meets the other ranks, runs, completes.
//!
//!   Every way runs the collective through `runtime::collective::run_user`, the one entry of
//!   user collectives: without waiting ([`Wait::NoWait`], the request being the [`Finish`])
//!   on the caller's thread, blocking on the worker.
//!
//! Choice: the vendor prepares on a background worker; OpenNRT prepares in the call, so a bad
//! argument or a lowering refusal is the call's own status instead of a later `exec_ret`.

use std::sync::Arc;

use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::lower::request::api::ApiComm;
use crate::lower::request::{nrt_cc_op, CollectiveRequest};
use crate::runtime::collective::io::TensorIo;
use crate::runtime::collective::{self, Arrival, Finish, Lowered, Wait};
use crate::runtime::comm::{self, Slot};
use crate::runtime::rendezvous::GroupKey;
use crate::runtime::sys_trace;
use crate::runtime::tensor::{Placement, Tensor};
use crate::runtime::xu::{self, ExecRet, XuType};

/// A prepared collective: what a `nrt_cc_context_t` holds until its schedule.
#[derive(Debug)]
pub struct Prepared {
    req: CollectiveRequest,
    comm: ApiComm,
    lowered: Arc<Lowered>,
    inputs: Vec<Tensor>,
    outputs: Vec<Tensor>,
}

impl Prepared {
    /// The request (its rank set).
    pub fn request(&self) -> &CollectiveRequest {
        &self.req
    }
}

/// `nrt_cc_comm_t` as the boundary read it: the communicator a collective runs on. The
/// boundary names it through the runtime (it calls the runtime only); the type is the
/// lowering's own view of those fields.
pub use crate::lower::request::api::ApiComm as CommArgs;

/// `nrta_cc_prepare` past its C arguments: `cc_op` is the raw `nrt_cc_op_type_t`, `dtype` and
/// `op` the raw `nrt_dtype_t` / `nrt_op_type_t`.
pub fn prepare(
    api: CommArgs,
    inputs: Vec<Tensor>,
    outputs: Vec<Tensor>,
    dtype: u32,
    op: u32,
    cc_op: u32,
) -> Result<Prepared> {
    for (name, list) in [("input", &inputs), ("output", &outputs)] {
        for (i, t) in list.iter().enumerate() {
            if t.placement() != Placement::Device || t.vnc() != Some(api.vnc) {
                return Err(Error::invalid(format!(
                    "{name}.tensors[{i}] ({:?}) is a {:?} tensor{}; a collective on comm.vnc {} \
                     needs device tensors of that core",
                    t.name(),
                    t.placement(),
                    t.vnc().map_or(String::new(), |v| format!(" on vnc {v}")),
                    api.vnc
                )));
            }
        }
    }
    let same = inputs.len() == 1
        && outputs.len() == 1
        && inputs[0].storage_key() == outputs[0].storage_key()
        && inputs[0].size() == outputs[0].size();
    let mut in_sizes: Vec<u64> = inputs.iter().map(Tensor::size).collect();
    let mut out_sizes: Vec<u64> = outputs.iter().map(Tensor::size).collect();
    if same {
        // NCCL's in-place layout (`runtime::collective::io`): the rank's block is the input of an
        // all-gather and the result of a reduce-scatter, so that side is one of rank_n equal
        // blocks.
        let n = u64::from(api.rank_n.max(1));
        let block = match cc_op {
            nrt_cc_op::ALLGATHER => Some(&mut in_sizes[0]),
            nrt_cc_op::REDUCESCATTER => Some(&mut out_sizes[0]),
            _ => None,
        };
        if let Some(b) = block {
            if *b % n != 0 {
                return Err(Error::invalid(format!(
                    "in place: the tensor's {} bytes are not rank_n = {n} equal blocks",
                    inputs[0].size()
                )));
            }
            *b /= n;
        }
    }
    let req = CollectiveRequest::from_api(&api, &in_sizes, &out_sizes, same, dtype, op, cc_op)?;
    comm::check_member(
        Slot::HostCc,
        api.vnc,
        api.ctx_device_id,
        api.ctx_device_count,
    )?;
    let lowered = collective::prepare(&req, api.ctx_device_count)?;
    Ok(Prepared {
        req,
        comm: api,
        lowered,
        inputs,
        outputs,
    })
}

/// `nrta_cc_schedule` past its C arguments (module doc): returns the request's encoded
/// sequence id. On error nothing was queued and the prepared collective comes back with the
/// error, so the caller may keep it (the context stays valid).
pub fn schedule(
    p: Prepared,
    queue: u32,
    exec_ret: ExecRet,
) -> std::result::Result<u64, (Error, Box<Prepared>)> {
    let key = GroupKey {
        kind: "cc",
        slot: Slot::HostCc as u8,
        group: p.req.group.clone(),
    };
    let (rank, lnc) = (p.req.rank, p.comm.vnc);
    let here = !crate::runtime::multi_process::run::wanted(&key.group);
    if here || bytes_of(&p) <= INLINE_MAX_BYTES {
        match xu::begin_inline(lnc, XuType::Collectives, queue, exec_ret) {
            Ok(Some((request, seq))) => {
                let ticket = collective::meetings().ticket(&key, rank);
                let end = traced_end(&p, lnc);
                let inline = Box::new(Inline { request, end });
                // With NoWait the result goes to `inline` (the request), never back here.
                let _started = collective::run_user(&key, ticket, arrival(p), Wait::NoWait(inline));
                return Ok(seq);
            }
            Ok(None) => {}
            Err(e) => return Err((e, Box::new(p))),
        }
    }
    let ticket = collective::meetings().ticket(&key, rank);
    // Queued: the flight record shows it scheduled until the worker enters it.
    let flight = crate::runtime::flight_recorder::scheduled(&key, ticket, &p.req, &p.lowered);
    // The payload moves into the job through this slot; a failed submit hands it back.
    let payload = Arc::new(Mutex::new(Some(p)));
    let job_payload = payload.clone();
    let job_key = key.clone();
    let job = Box::new(move || {
        let Some(p) = job_payload.lock().take() else {
            return Err(Error::failure("collective context vanished"));
        };
        let name = op_name(&p);
        let r = sys_trace::record(
            sys_trace::CC_EXEC,
            lnc,
            || name,
            || collective::run_user(&job_key, ticket, arrival(p), Wait::Block),
        );
        logged(r, rank)
    });
    match xu::submit(lnc, XuType::Collectives, queue, exec_ret, job) {
        Ok(seq) => Ok(seq),
        Err(e) => {
            collective::meetings().untake(&key, rank, ticket);
            crate::runtime::flight_recorder::withdraw(flight);
            let p = payload.lock().take().expect("the job never ran");
            Err((e, Box::new(p)))
        }
    }
}

/// The largest collective (input plus output bytes of this rank) whose rank in several
/// processes starts on the caller's thread ([`Wait::NoWait`]). Choice: 1 MiB. Below it the
/// thread hand-off is most of the time; above it the run is, and `nrta_cc_schedule` should
/// return at once so that the caller overlaps it with its own work.
pub const INLINE_MAX_BYTES: u64 = 1 << 20;

fn bytes_of(p: &Prepared) -> u64 {
    p.inputs.iter().chain(&p.outputs).map(Tensor::size).sum()
}

/// What ends a rank's collective run off the worker: its trace span closes, and its result
/// (logged if an error) becomes the request's.
fn traced_end(p: &Prepared, lnc: u32) -> impl FnOnce(Result<()>) -> Result<()> {
    let rank = p.req.rank;
    let span = sys_trace::begin(sys_trace::CC_EXEC, lnc, || op_name(p));
    move |r: Result<()>| {
        if let Some(s) = span {
            s.end(&r);
        }
        logged(r, rank)
    }
}

/// A request run on the caller's thread ([`xu::begin_inline`]) as the [`Finish`] of its
/// collective: the result ends the run (`end`: trace span, log) and completes the request; the
/// rest of a run that must wait for peers goes to the XU's worker.
struct Inline<E> {
    request: xu::InlineRequest,
    end: E,
}

impl<E: FnOnce(Result<()>) -> Result<()> + Send + 'static> Finish for Inline<E> {
    fn done(self: Box<Self>, result: Result<()>) {
        self.request.complete((self.end)(result));
    }
    fn defer(self: Box<Self>, rest: Box<dyn FnOnce() -> Result<()> + Send>) {
        let Inline { request, end } = *self;
        request.hand_over(Box::new(move || end(rest())));
    }
}

/// The name a collective's trace events carry: its operation's command-line name
/// (`all_reduce`), as `nrt_barrier`'s events carry `barrier`.
fn op_name(p: &Prepared) -> String {
    p.req.op.name().to_string()
}

/// A rank's arrival at its collective: its request, the lowered program and its tensors.
fn arrival(p: Prepared) -> Arrival {
    let io = TensorIo::new(&p.req, p.inputs, p.outputs);
    Arrival {
        req: p.req,
        lowered: p.lowered,
        io: Box::new(io),
    }
}

/// The result of a finished collective, its error logged once, here (the XU writes its
/// status to `exec_ret`).
fn logged(r: Result<()>, rank: u32) -> Result<()> {
    r.inspect_err(|e| crate::log_error!("nrta_cc_schedule", "rank {rank}: {e}"))
}

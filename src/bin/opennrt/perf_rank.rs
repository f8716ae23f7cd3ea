//! `opennrt perf-rank` (hidden): one process of `opennrt perf --procs P`. The
//! parent ([`crate::perf_procs`]) starts this binary once per process with the environment that
//! makes it own `N/P` logical cores (`NEURON_RT_VISIBLE_CORES`, and `NEURON_RT_ROOT_COMM_ID`
//! when the world spans several processes) and the job on the command line ([`RankJob`]).
//!
//! Everything goes through the C API, called directly as the `extern "C"` functions of
//! `opennrt::abi` (the same code `libnrt.so.1` exports): `nrt_init`, then one thread per core
//! (vnc `v` is global rank `proc · N/P + v`) doing `nrt_cc_global_comm_init`, and per size
//! `nrt_tensor_allocate` / `nrt_tensor_write` of the verifiable input
//! (`opennrt::runtime::verifiable`), one warm-up and `--iters` timed iterations of
//! `nrta_cc_prepare` → `nrt_barrier` → `nrta_cc_schedule` → wait (an eventfd registered with
//! `nrta_event_register_seq_id_completion`), `nrt_tensor_read`, `nrt_tensor_free`; at the end
//! `nrt_close`. Global rank 0 times each timed iteration from just before its schedule to its
//! completion (the prepare and the barrier are outside); the median is reported.
//!
//! Every rank's result is checked against the verifiable reference, computed from the inputs
//! alone. Choice (memory): the reference API takes every rank's inputs, so a process builds all
//! N ranks' inputs; in a multi-process run the processes take turns (one at a time, separated by
//! `nrt_barrier`s) to build the inputs they write and, after the run, to build the reference and
//! compare their own ranks, so only one process at a time holds a copy of every rank's data.
//!
//! Output: one JSON line per size on stdout ([`SizeLine`]); the process holding global rank 0
//! adds the timings. Exit status: 0, 1 if any element was wrong, 3 on a runtime error (named on
//! stderr). Choice: the process holding rank 0 (the job's root, which other processes' collectives
//! meet at) waits for end-of-file on stdin before `nrt_close` when `--wait-stdin` is given, so it
//! never leaves while another process still expects an answer from it; the parent closes that
//! pipe once every other process has exited.

use std::ffi::{c_int, c_void};
use std::ptr::null_mut;
use std::time::Instant;

use opennrt::abi;
use opennrt::abi::status::{nrt_status, NRT_STATUS};
use opennrt::abi::types::{
    nrt_cc_comm_t, nrt_cc_context_t, nrt_framework_type_t, nrt_tensor_list_t,
    nrt_tensor_placement_t, nrt_tensor_t, nrta_seq_t,
};
use opennrt::isa::enums::Dtype;
use opennrt::lower::request::{CollectiveOp, CollectiveRequest, ReduceOp};
use opennrt::runtime::verifiable;
use serde::{Deserialize, Serialize};

use crate::args::{self, fail, Opt, Spec};

/// The job of one process, as the parent passes it (see [`RankJob::to_args`]).
#[derive(Debug, Clone, PartialEq)]
pub struct RankJob {
    /// All-reduce, all-gather or reduce-scatter.
    pub op: CollectiveOp,
    /// World size N.
    pub n: u32,
    /// Processes P (P divides N).
    pub procs: u32,
    /// This process's index (owns global ranks `proc · N/P ..`).
    pub proc_index: u32,
    /// Element type.
    pub dtype: Dtype,
    /// Reduce op (reducing ops).
    pub redop: ReduceOp,
    /// Per-rank element counts, one row each.
    pub counts: Vec<u64>,
    /// Timed iterations per size.
    pub iters: u32,
    /// Check every element.
    pub check: bool,
    /// Wait for end-of-file on stdin before `nrt_close` (the root of a multi-process job).
    pub wait_stdin: bool,
}

/// One size's report of one process (one JSON line on stdout).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SizeLine {
    /// The reporting process.
    pub proc_index: u32,
    /// Per-rank element count (the request's `count`).
    pub count: u64,
    /// Global rank 0's timed iterations in seconds (only from the process that holds it).
    pub times: Option<Vec<f64>>,
    /// Wrong elements over this process's ranks (`None`: not checked).
    pub wrong: Option<u64>,
    /// The first wrong element, readable.
    pub first: Option<String>,
}

const CMD: &str = "perf-rank";

impl RankJob {
    /// Ranks per process.
    pub fn per_proc(&self) -> u32 {
        self.n / self.procs
    }

    /// The command line of `opennrt perf-rank` for this job.
    pub fn to_args(&self) -> Vec<String> {
        let counts: Vec<String> = self.counts.iter().map(u64::to_string).collect();
        let mut v = vec![
            CMD.to_string(),
            "--op".into(),
            self.op.name().to_string(),
            "--ranks".into(),
            self.n.to_string(),
            "--procs".into(),
            self.procs.to_string(),
            "--proc".into(),
            self.proc_index.to_string(),
            "--dtype".into(),
            self.dtype.short_name().to_string(),
            "--redop".into(),
            format!("{:?}", self.redop).to_lowercase(),
            "--counts".into(),
            counts.join(","),
            "--iters".into(),
            self.iters.to_string(),
            "--check".into(),
            u8::from(self.check).to_string(),
        ];
        if self.wait_stdin {
            v.push("--wait-stdin".into());
        }
        v
    }

    /// The hidden helper's grammar (written by `perf --procs`, never by people).
    const SPEC: Spec = Spec {
        cmd: CMD,
        usage: "usage: opennrt perf-rank (started by opennrt perf --procs)",
        opts: &[
            Opt::val("--op", "OP", "the op"),
            Opt::val("--ranks", "N", "world size"),
            Opt::val("--procs", "P", "processes"),
            Opt::val("--proc", "I", "this process"),
            Opt::val("--dtype", "T", "element type"),
            Opt::val("--redop", "R", "reduce op"),
            Opt::val("--counts", "C,..", "element counts of the rows"),
            Opt::val("--iters", "K", "timed runs per row"),
            Opt::val("--check", "0|1", "check the results"),
            Opt::switch("--wait-stdin", "start when stdin closes"),
        ],
        notes: "",
    };

    /// Parse the arguments after `perf-rank` (exit 2 on a bad one: only the parent writes them).
    pub fn parse(a: &[String]) -> RankJob {
        let mut j = RankJob {
            op: CollectiveOp::AllReduce,
            n: 0,
            procs: 1,
            proc_index: 0,
            dtype: Dtype::Fp32,
            redop: ReduceOp::Add,
            counts: Vec::new(),
            iters: 1,
            check: true,
            wait_stdin: false,
        };
        for (k, v) in Self::SPEC.parse(a) {
            match k {
                "--op" => j.op = args::op(CMD, &v),
                "--ranks" => j.n = args::num(CMD, k, &v),
                "--procs" => j.procs = args::num(CMD, k, &v),
                "--proc" => j.proc_index = args::num(CMD, k, &v),
                "--dtype" => j.dtype = args::dtype(CMD, &v),
                "--redop" => j.redop = args::redop(CMD, &v),
                "--counts" => {
                    j.counts = v.split(',').map(|c| args::num(CMD, k, c)).collect();
                }
                "--iters" => j.iters = args::num::<u32>(CMD, k, &v).max(1),
                "--check" => j.check = v != "0",
                "--wait-stdin" => j.wait_stdin = true,
                other => args::unhandled(CMD, other),
            }
        }
        if j.n == 0 || j.procs == 0 || j.n % j.procs != 0 || j.proc_index >= j.procs {
            fail(CMD, "--ranks, --procs and --proc do not describe a job");
        }
        if j.op.nrt_cc_op().is_none() {
            fail(
                CMD,
                "only all_reduce, all_gather and reduce_scatter have a C API op",
            );
        }
        j
    }

    /// The request of a row, for the verifiable data (group `0..N`).
    fn request(&self, count: u64) -> CollectiveRequest {
        CollectiveRequest::new(
            self.op,
            self.dtype,
            self.op.is_reducing().then_some(self.redop),
            count,
            (0..self.n).collect(),
            0,
        )
    }
}

/// A status as a result naming the call.
fn ok(st: NRT_STATUS, what: &str) -> Result<(), String> {
    if st == nrt_status::NRT_SUCCESS {
        Ok(())
    } else {
        Err(format!("{what}: {st:?} ({})", st as i32))
    }
}

/// A rank's two tensors. The handles are the runtime's (any thread may use them).
struct Tensors {
    tin: *mut nrt_tensor_t,
    tout: *mut nrt_tensor_t,
}

// SAFETY: tensor handles are process-wide runtime objects; the runtime locks each tensor, and
// this program uses a rank's tensors from one thread at a time (phases are joined in between).
unsafe impl Send for Tensors {}
// SAFETY: `&Tensors` only copies the handle values out to the runtime, which locks each tensor;
// a rank's tensors are used from one thread at a time (phases are joined in between).
unsafe impl Sync for Tensors {}

impl Drop for Tensors {
    fn drop(&mut self) {
        // SAFETY: the handles came from nrt_tensor_allocate (or are NULL: a no-op).
        unsafe {
            abi::nrt_tensor_free(&mut self.tin);
            abi::nrt_tensor_free(&mut self.tout);
        }
    }
}

/// Run `f(vnc)` on one thread per core of this process and collect the results in vnc order;
/// the errors of every failing core, joined.
fn on_cores<T: Send>(
    k: u32,
    f: impl Fn(u32) -> Result<T, String> + Sync,
) -> Result<Vec<T>, String> {
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..k)
            .map(|v| {
                let f = &f;
                s.spawn(move || f(v))
            })
            .collect();
        let mut out = Vec::with_capacity(k as usize);
        let mut errs = Vec::new();
        for (v, h) in hs.into_iter().enumerate() {
            match h.join() {
                Ok(Ok(t)) => out.push(t),
                Ok(Err(e)) => errs.push(e),
                Err(_) => errs.push(format!("vnc {v}: the rank's thread panicked")),
            }
        }
        if errs.is_empty() {
            Ok(out)
        } else {
            Err(errs.join("; "))
        }
    })
}

/// `nrt_barrier` on every core of this process (every rank of the world calls it).
fn barrier(j: &RankJob) -> Result<(), String> {
    let base = j.proc_index * j.per_proc();
    on_cores(j.per_proc(), |v| {
        let st = abi::nrt_barrier(v as i32, base + v, j.n);
        ok(st, &format!("rank {}: nrt_barrier", base + v))
    })
    .map(drop)
}

/// Run `f` in this process's turn: the processes go one at a time, separated by barriers (one
/// process: just `f`). A failing `f` still takes part in the barriers, so no peer waits for it.
fn in_turn<T>(j: &RankJob, f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    if j.procs == 1 {
        return f();
    }
    let mut f = Some(f);
    let mut got = None;
    for t in 0..j.procs {
        if t == j.proc_index {
            got = f.take().map(|f| f());
        }
        barrier(j)?;
    }
    got.expect("every process has a turn")
}

/// Block until `seq` completes: an eventfd registered for it (docs/contract/abi.md §5.6) is read.
fn wait(fd: c_int, seq: nrta_seq_t) -> Result<(), String> {
    ok(
        abi::nrta_event_register_seq_id_completion(seq, fd),
        "nrta_event_register_seq_id_completion",
    )?;
    let mut v = 0u64;
    let r = loop {
        // SAFETY: `v` is 8 writable bytes; `fd` is this thread's open eventfd.
        let r = unsafe { libc::read(fd, (&mut v as *mut u64).cast::<c_void>(), 8) };
        if r < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        break r;
    };
    abi::nrta_event_register_seq_id_completion(seq, -1);
    if r == 8 {
        Ok(())
    } else {
        Err(format!(
            "reading the completion eventfd: {}",
            std::io::Error::last_os_error()
        ))
    }
}

/// Allocate rank `gid`'s input and output tensors on core `vnc`.
fn allocate(vnc: u32, gid: u32, in_b: usize, out_b: usize) -> Result<Tensors, String> {
    let mut t = Tensors {
        tin: null_mut(),
        tout: null_mut(),
    };
    let place = nrt_tensor_placement_t::NRT_TENSOR_PLACEMENT_DEVICE as u32;
    // SAFETY: the name is NUL-terminated, the out-pointers are writable.
    unsafe {
        ok(
            abi::nrt_tensor_allocate(place, vnc as c_int, in_b, c"in".as_ptr(), &mut t.tin),
            &format!("rank {gid}: nrt_tensor_allocate (input, {in_b} B)"),
        )?;
        ok(
            abi::nrt_tensor_allocate(place, vnc as c_int, out_b, c"out".as_ptr(), &mut t.tout),
            &format!("rank {gid}: nrt_tensor_allocate (output, {out_b} B)"),
        )?;
    }
    Ok(t)
}

/// One rank's part of a row: a warm-up and `iters` timed iterations, then its result. Returns
/// the timings (global rank 0 only) and the output bytes.
fn run_rank(
    j: &RankJob,
    count: u64,
    vnc: u32,
    t: &Tensors,
    out_b: usize,
) -> Result<(Vec<f64>, Vec<u8>), String> {
    let gid = j.proc_index * j.per_proc() + vnc;
    let cc_op = j.op.nrt_cc_op().expect("checked at parse");
    let redop = j.redop.nrt_op();
    let mut group: Vec<u32> = (0..j.n).collect();
    // SAFETY: plain eventfd creation; closed below.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(format!(
            "rank {gid}: eventfd: {}",
            std::io::Error::last_os_error()
        ));
    }
    let run = |group: &mut Vec<u32>| -> Result<Vec<f64>, String> {
        let mut times = Vec::new();
        for it in 0..=j.iters {
            let what = |call: &str| format!("rank {gid}: count {count}: {call}");
            let mut comm = nrt_cc_comm_t {
                replica_group: group.as_mut_ptr(),
                rank: gid,
                rank_n: j.n,
                ctx_device_id: gid,
                ctx_device_count: j.n,
                vnc,
            };
            let (mut tin, mut tout) = (t.tin, t.tout);
            let mut li = nrt_tensor_list_t {
                tensors: &mut tin,
                num_tensors: 1,
            };
            let mut lo = nrt_tensor_list_t {
                tensors: &mut tout,
                num_tensors: 1,
            };
            let mut ctx: *mut nrt_cc_context_t = null_mut();
            let dtype = u32::from(j.dtype.as_u8());
            // SAFETY: every pointer is to a live local; the tensors are live.
            let st = unsafe {
                abi::nrta_cc_prepare(&mut comm, &mut li, &mut lo, dtype, redop, cc_op, &mut ctx)
            };
            ok(st, &what("nrta_cc_prepare"))?;
            ok(abi::nrt_barrier(vnc as i32, gid, j.n), &what("nrt_barrier"))?;
            // Written by the runtime at completion: an i32 (any status value may arrive).
            let mut exec_ret: i32 = -1;
            let mut seq: nrta_seq_t = 0;
            let start = Instant::now();
            // SAFETY: `ctx` came from nrta_cc_prepare; `exec_ret` stays alive and unmoved until
            // the completion is seen below.
            let st = unsafe {
                abi::nrta_cc_schedule(
                    &mut ctx,
                    0,
                    (&mut exec_ret as *mut i32).cast::<NRT_STATUS>(),
                    &mut seq,
                )
            };
            ok(st, &what("nrta_cc_schedule"))?;
            wait(fd, seq).map_err(|e| what(&e))?;
            let dt = start.elapsed().as_secs_f64();
            // SAFETY: completion was signalled after the runtime wrote `exec_ret` (xu.rs).
            let ret = unsafe { std::ptr::read_volatile(&exec_ret) };
            if ret != nrt_status::NRT_SUCCESS as i32 {
                return Err(what(&format!("the collective completed with status {ret}")));
            }
            if it > 0 && gid == 0 {
                times.push(dt);
            }
        }
        Ok(times)
    };
    let times = run(&mut group);
    // SAFETY: `fd` is the eventfd created above, deregistered after each wait.
    unsafe { libc::close(fd) };
    let times = times?;
    let mut out = vec![0u8; out_b];
    // SAFETY: `out` has `out_b` writable bytes, the output tensor's size.
    let st = unsafe { abi::nrt_tensor_read(t.tout, out.as_mut_ptr().cast(), 0, out_b) };
    ok(st, &format!("rank {gid}: nrt_tensor_read"))?;
    Ok((times, out))
}

/// Compare this process's ranks' results with the reference: (wrong elements, the first).
fn check(
    j: &RankJob,
    req: &CollectiveRequest,
    kept: Option<Vec<Vec<u8>>>,
    got: Vec<Vec<u8>>,
) -> Result<(u64, Option<String>), String> {
    let e = |e: opennrt::Error| format!("count {}: reference: {e}", req.count);
    if j.procs == 1 {
        // Every rank is here: the streaming check of the whole world.
        let inputs = match kept {
            Some(i) => i,
            None => verifiable::inputs(req).map_err(e)?,
        };
        let c = verifiable::check(req, &inputs, &got).map_err(e)?;
        return Ok((c.wrong, c.first.map(|m| m.to_string())));
    }
    let base = j.proc_index * j.per_proc();
    let inputs = verifiable::inputs(req).map_err(e)?;
    let want = verifiable::expected_of(req, &inputs, base..base + j.per_proc()).map_err(e)?;
    drop(inputs);
    let (mut wrong, mut first) = (0, None);
    for (v, g) in got.into_iter().enumerate() {
        let gid = base + v as u32;
        let (g, w) = ([g], std::slice::from_ref(&want[v]));
        wrong += verifiable::count_wrong(req, &g, w);
        if first.is_none() {
            first = verifiable::first_mismatch(req, &g, w).map(|mut m| {
                m.rank = gid;
                m.to_string()
            });
        }
    }
    Ok((wrong, first))
}

/// One row: allocate, write, run, read, check; the process's report line.
fn row(j: &RankJob, count: u64) -> Result<SizeLine, String> {
    let req = j.request(count);
    let esz = j.dtype.size_bytes().unwrap_or(1) as u64;
    let (in_b, out_b) = (
        (req.input_elems() * esz) as usize,
        (req.output_elems() * esz) as usize,
    );
    let base = j.proc_index * j.per_proc();
    let ts = on_cores(j.per_proc(), |v| allocate(v, base + v, in_b, out_b))?;
    let e = |e: opennrt::Error| format!("count {count}: verifiable inputs: {e}");
    let kept = in_turn(j, || {
        let inputs = verifiable::inputs(&req).map_err(e)?;
        for (v, t) in ts.iter().enumerate() {
            let data = &inputs[base as usize + v];
            // SAFETY: `data` has `in_b` readable bytes, the input tensor's size.
            let st = unsafe { abi::nrt_tensor_write(t.tin, data.as_ptr().cast(), 0, in_b) };
            ok(st, &format!("rank {}: nrt_tensor_write", base as usize + v))?;
        }
        Ok((j.procs == 1).then_some(inputs))
    })?;
    let ran = on_cores(j.per_proc(), |v| {
        run_rank(j, count, v, &ts[v as usize], out_b)
    })?;
    drop(ts);
    let mut times = None;
    let mut got = Vec::with_capacity(ran.len());
    for (v, (t, out)) in ran.into_iter().enumerate() {
        if base == 0 && v == 0 {
            times = Some(t);
        }
        got.push(out);
    }
    let (wrong, first) = if j.check {
        let (w, f) = in_turn(j, || check(j, &req, kept, got))?;
        (Some(w), f)
    } else {
        (None, None)
    };
    Ok(SizeLine {
        proc_index: j.proc_index,
        count,
        times,
        wrong,
        first,
    })
}

/// `opennrt perf-rank ...`: run the job, print a line per size, exit 0 / 1 (wrong elements) /
/// 3 (runtime error).
pub fn perf_rank_cmd(a: &[String]) -> i32 {
    let j = RankJob::parse(a);
    // The check's world-sized buffers (every rank's input, in turn) are freed after each
    // row. With glibc's default, a freed 16 MiB buffer raises the mmap threshold, the next
    // ones come from the heap and stay resident after free: every process of a 32-rank,
    // 16 MiB job kept about 1 GiB (capi-tests/hosts/scale.sh). Large buffers always mapped
    // go back to the system when freed.
    // SAFETY: plain mallopt, before any other thread runs.
    unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20) };
    let fw = nrt_framework_type_t::NRT_FRAMEWORK_TYPE_NO_FW as u32;
    // SAFETY: NULL version strings are allowed.
    let st = unsafe { abi::nrt_init(fw, std::ptr::null(), std::ptr::null()) };
    if let Err(e) = ok(st, "nrt_init") {
        eprintln!("opennrt perf-rank (process {}): {e}", j.proc_index);
        return 3;
    }
    let base = j.proc_index * j.per_proc();
    let mut code = 0;
    let joined = on_cores(j.per_proc(), |v| {
        let st = abi::nrt_cc_global_comm_init(v, base + v, j.n);
        ok(st, &format!("rank {}: nrt_cc_global_comm_init", base + v))
    });
    let mut result = joined.map(drop);
    for &count in &j.counts {
        if result.is_err() {
            break;
        }
        result = row(&j, count).map(|line| {
            if line.wrong.unwrap_or(0) > 0 {
                code = 1;
            }
            println!(
                "{}",
                serde_json::to_string(&line).expect("a report line serialises")
            );
        });
    }
    if let Err(e) = result {
        eprintln!("opennrt perf-rank (process {}): {e}", j.proc_index);
        code = 3;
    }
    if j.wait_stdin {
        opennrt::launch::wait_for_release();
    }
    abi::nrt_close();
    code
}

#[cfg(test)]
mod tests;

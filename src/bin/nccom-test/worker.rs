//! The hidden worker (`nccom-test __worker <job>`): what neuron-bench is to the vendor's
//! nccom-test. It runs one size's NEFF on the ranks of its [`Job`] through the C ABI, called
//! directly as the `extern "C"` functions of `opennrt::abi` (the code `libnrt.so.1` exports):
//!
//! `nrt_init(NO_FW)`; per rank (one thread each with `--threads`, vnc = the rank's index; else
//! the one rank on vnc 0 of the core `NEURON_RT_VISIBLE_CORES` gives it)
//! `nrt_load_collectives(neff, vnc, 1, rank, world)`, `nrt_tensor_allocate` of `input0` and
//! `output0` (device placement), `nrt_tensor_write` of the input (the check data, or zeros),
//! `nrt_tensor_memset` of the output (for `alltoallv`/`allgv` also `metadata0`, written with
//! the rank's rows of the job's table, `crate::metadata`), two tensor sets, `warmup` untimed and `iters` timed
//! `nrt_execute`s (each timed alone, from just before the call to its return), `nrt_tensor_read`
//! of the output, the check, and the frees and `nrt_unload`; at the end `nrt_close`. An
//! integer reduction's tensors are fp32: the input is widened before the executions and the
//! output narrowed after them ([`crate::widen`]).
//!
//! Answers: one [`RankLine`] per rank on stdout (rank 0 adds its times). Exit status 0; 1 when
//! a check found wrong elements; 3 on a runtime error (named on stderr, which the parent sends
//! to the size's log file); 2 for a bad job.

use std::ffi::c_void;
use std::io::Write;
use std::ptr::null_mut;
use std::time::Instant;

use opennrt::abi;
use opennrt::abi::status::{nrt_status, NRT_STATUS};
use opennrt::abi::types::{
    nrt_framework_type_t, nrt_model_t, nrt_tensor_placement_t, nrt_tensor_set_t, nrt_tensor_t,
};

use crate::check;
use crate::dtypes;
use crate::job::{Job, RankLine};
use crate::widen;

/// A status as a result naming the call.
fn ok(st: NRT_STATUS, what: &str) -> Result<(), String> {
    if st == nrt_status::NRT_SUCCESS {
        Ok(())
    } else {
        Err(format!("{what}: {st:?} ({})", st as i32))
    }
}

/// One rank's runtime objects, released in reverse order of creation when dropped.
struct Rank {
    model: *mut nrt_model_t,
    tin: *mut nrt_tensor_t,
    tout: *mut nrt_tensor_t,
    tmeta: *mut nrt_tensor_t,
    in_set: *mut nrt_tensor_set_t,
    out_set: *mut nrt_tensor_set_t,
}

impl Drop for Rank {
    fn drop(&mut self) {
        // SAFETY: every handle came from the runtime's allocators (or is NULL: a no-op), and
        // nothing uses them after this.
        unsafe {
            abi::nrt_destroy_tensor_set(&mut self.in_set);
            abi::nrt_destroy_tensor_set(&mut self.out_set);
            abi::nrt_tensor_free(&mut self.tin);
            abi::nrt_tensor_free(&mut self.tout);
            if !self.tmeta.is_null() {
                abi::nrt_tensor_free(&mut self.tmeta);
            }
            if !self.model.is_null() {
                abi::nrt_unload(self.model);
            }
        }
    }
}

/// Allocate a device tensor of `bytes` named `name` on `vnc`.
fn tensor(vnc: u32, bytes: u64, name: &std::ffi::CStr) -> Result<*mut nrt_tensor_t, String> {
    let mut t = null_mut();
    let place = nrt_tensor_placement_t::NRT_TENSOR_PLACEMENT_DEVICE as u32;
    // SAFETY: the name is NUL-terminated; the out-pointer is writable.
    let st = unsafe {
        abi::nrt_tensor_allocate(place, vnc as i32, bytes as usize, name.as_ptr(), &mut t)
    };
    ok(st, &format!("nrt_tensor_allocate ({name:?}, {bytes} B)"))?;
    Ok(t)
}

/// A tensor set holding `t` under `name`.
fn set_of(name: &std::ffi::CStr, t: *mut nrt_tensor_t) -> Result<*mut nrt_tensor_set_t, String> {
    let mut s = null_mut();
    // SAFETY: the out-pointer is writable.
    let st = unsafe { abi::nrt_allocate_tensor_set(&mut s) };
    ok(st, "nrt_allocate_tensor_set")?;
    // SAFETY: `s` and `t` are live; the name is NUL-terminated.
    let st = unsafe { abi::nrt_add_tensor_to_tensor_set(s, name.as_ptr(), t) };
    if let Err(e) = ok(st, "nrt_add_tensor_to_tensor_set") {
        // SAFETY: `s` came from nrt_allocate_tensor_set.
        unsafe { abi::nrt_destroy_tensor_set(&mut s) };
        return Err(e);
    }
    Ok(s)
}

/// Run one rank: load, write, execute, read, check.
fn run_rank(job: &Job, rank: u32, vnc: u32, neff: &[u8]) -> Result<RankLine, String> {
    let mut r = Rank {
        model: null_mut(),
        tin: null_mut(),
        tout: null_mut(),
        tmeta: null_mut(),
        in_set: null_mut(),
        out_set: null_mut(),
    };
    // SAFETY: `neff` has `neff.len()` readable bytes; the out-pointer is writable.
    let st = unsafe {
        abi::nrt_load_collectives(
            neff.as_ptr().cast::<c_void>(),
            neff.len(),
            vnc as i32,
            1,
            rank,
            job.world,
            &mut r.model,
        )
    };
    ok(st, "nrt_load_collectives")?;
    let (in_wire, out_wire) = (job.wire_bytes(job.in_bytes), job.wire_bytes(job.out_bytes));
    r.tin = tensor(vnc, in_wire, c"input0")?;
    r.tout = tensor(vnc, out_wire, c"output0")?;
    let data = job.data();
    let esz = dtypes::size(data.dtype);
    let input = data.input(rank, job.in_bytes / esz);
    // An integer reduction runs in fp32: widen on the host, before any timed execution.
    let wire_in = if job.widened() {
        widen::widen(data.dtype, &input)
    } else {
        input.clone()
    };
    // SAFETY: `wire_in` has `in_wire` readable bytes, the input tensor's size.
    let st = unsafe { abi::nrt_tensor_write(r.tin, wire_in.as_ptr().cast(), 0, wire_in.len()) };
    ok(st, "nrt_tensor_write (input0)")?;
    // SAFETY: the output tensor is live and `out_wire` long.
    let st = unsafe { abi::nrt_tensor_memset(r.tout, 0, 0, out_wire as usize) };
    ok(st, "nrt_tensor_memset (output0)")?;
    r.in_set = set_of(c"input0", r.tin)?;
    if let Some(table) = &job.table {
        let layout = job
            .layout(rank)
            .ok_or_else(|| format!("rank {rank} is in no replica subgroup"))?;
        let rows = table
            .get(layout.pos)
            .ok_or_else(|| format!("the table has no rows for position {}", layout.pos))?;
        let g = layout.members.len() as u32;
        let bytes = opennrt::lower::request::encode_metadata(g, rows)
            .map_err(|e| format!("metadata0: {}", e.message()))?;
        r.tmeta = tensor(vnc, bytes.len() as u64, c"metadata0")?;
        // SAFETY: `bytes` is the metadata tensor's size.
        let st = unsafe { abi::nrt_tensor_write(r.tmeta, bytes.as_ptr().cast(), 0, bytes.len()) };
        ok(st, "nrt_tensor_write (metadata0)")?;
        // SAFETY: the set and the tensor are live; the name is NUL-terminated.
        let st =
            unsafe { abi::nrt_add_tensor_to_tensor_set(r.in_set, c"metadata0".as_ptr(), r.tmeta) };
        ok(st, "nrt_add_tensor_to_tensor_set (metadata0)")?;
    }
    r.out_set = set_of(c"output0", r.tout)?;
    let exec = |it: &str| -> Result<(), String> {
        // SAFETY: the model and both sets are live for the whole loop.
        let st = unsafe { abi::nrt_execute(r.model, r.in_set, r.out_set) };
        ok(st, &format!("nrt_execute ({it})"))
    };
    for w in 0..job.warmup {
        exec(&format!("warm-up {}", w + 1))?;
    }
    let mut times = Vec::with_capacity(job.iters as usize);
    for i in 0..job.iters {
        let t = Instant::now();
        exec(&format!("iteration {}", i + 1))?;
        let us = t.elapsed().as_secs_f64() * 1e6;
        let ops = job.ops_per_exec.max(1);
        let samples = match job.samples_per_exec {
            0 => ops,
            n => n,
        };
        times.extend(std::iter::repeat_n(us / f64::from(ops), samples as usize));
    }
    let mut line = RankLine {
        rank,
        times_us: (rank == 0).then_some(times),
        wrong: None,
        first: None,
        digest: None,
        dumped: None,
    };
    if data.mode.is_none() {
        return Ok(line);
    }
    let mut out = vec![0u8; out_wire as usize];
    // SAFETY: `out` has `out_wire` writable bytes, the output tensor's size.
    let st = unsafe { abi::nrt_tensor_read(r.tout, out.as_mut_ptr().cast(), 0, out.len()) };
    ok(st, "nrt_tensor_read (output0)")?;
    drop(r);
    if job.widened() {
        out = widen::narrow(data.dtype, &out);
    }
    let layout = job
        .layout(rank)
        .ok_or_else(|| format!("rank {rank} is in no replica subgroup"))?;
    let v = check::compare(&data, &layout, &out);
    line.digest = Some(check::digest(&out));
    line.wrong = Some(v.wrong);
    line.first = v.first;
    if v.wrong > 0 {
        if let Some(dir) = &job.dump_dir {
            line.dumped = dump(dir, rank, &input, &out, &check::golden(&data, &layout));
        }
    }
    Ok(line)
}

/// Write a failed rank's input, output and golden tensors into `dir`; the files' pattern.
fn dump(
    dir: &std::path::Path,
    rank: u32,
    input: &[u8],
    out: &[u8],
    golden: &[u8],
) -> Option<String> {
    std::fs::create_dir_all(dir).ok()?;
    for (name, bytes) in [("input", input), ("output", out), ("golden", golden)] {
        std::fs::write(dir.join(format!("rank{rank}_{name}.bin")), bytes).ok()?;
    }
    Some(
        dir.join(format!("rank{rank}_{{input,output,golden}}.bin"))
            .display()
            .to_string(),
    )
}

/// Run every rank of the job: one thread each with `--threads`, else the job's one rank.
fn run_all(job: &Job, neff: &[u8]) -> Vec<Result<RankLine, String>> {
    if !job.threads {
        return job
            .ranks
            .iter()
            .map(|&r| run_rank(job, r, 0, neff))
            .collect();
    }
    std::thread::scope(|s| {
        let hs: Vec<_> = job
            .ranks
            .iter()
            .enumerate()
            .map(|(v, &r)| s.spawn(move || run_rank(job, r, v as u32, neff)))
            .collect();
        hs.into_iter()
            .zip(&job.ranks)
            .map(|(h, r)| {
                h.join()
                    .unwrap_or_else(|_| Err(format!("rank {r}: its thread panicked")))
            })
            .collect()
    })
}

/// `nccom-test __worker <job>`: run the job; the exit status (see the module doc).
pub fn main(args: &[String]) -> i32 {
    let job = match args.first().map(|a| Job::from_arg(a)) {
        Some(Ok(j)) => j,
        Some(Err(e)) => {
            eprintln!("nccom-test worker: {e}");
            return 2;
        }
        None => {
            eprintln!("nccom-test worker: no job given");
            return 2;
        }
    };
    let neff = match std::fs::read(&job.neff) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("nccom-test worker: {}: {e}", job.neff.display());
            return 3;
        }
    };
    let fw = nrt_framework_type_t::NRT_FRAMEWORK_TYPE_NO_FW as u32;
    // SAFETY: empty NUL-terminated version strings.
    let st = unsafe { abi::nrt_init(fw, c"".as_ptr(), c"".as_ptr()) };
    let mut code = 0;
    if let Err(e) = ok(st, "nrt_init") {
        eprintln!("nccom-test worker (ranks {:?}): {e}", job.ranks);
        code = 3;
    } else {
        let stdout = std::io::stdout();
        for (res, r) in run_all(&job, &neff).into_iter().zip(&job.ranks) {
            match res {
                Ok(line) => {
                    if line.wrong.unwrap_or(0) > 0 && code == 0 {
                        code = 1;
                    }
                    let mut o = stdout.lock();
                    let _ = writeln!(
                        o,
                        "{}",
                        serde_json::to_string(&line).expect("a line serialises")
                    );
                    let _ = o.flush();
                }
                Err(e) => {
                    eprintln!("nccom-test worker: rank {r}: {e}");
                    code = 3;
                }
            }
        }
    }
    if job.wait_stdin {
        opennrt::launch::wait_for_release();
    }
    abi::nrt_close();
    code
}

#[cfg(test)]
mod tests;

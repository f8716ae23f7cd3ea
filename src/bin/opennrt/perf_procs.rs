//! `opennrt perf --procs P`: the same benchmark through the C API, once with
//! every rank in one process and once with the ranks spread over P processes, so in-process and
//! multi-process figures are compared in one run.
//!
//! The parent measures nothing but the memcpy figure: it starts this binary's hidden
//! `perf-rank` subcommand ([`crate::perf_rank`]) — first one process owning all N logical cores
//! (`NEURON_RT_VISIBLE_CORES=0-(N-1)`, one thread per core), then P processes owning N/P cores
//! each (`NEURON_RT_VISIBLE_CORES=<range>`, global rank = process index · N/P + vnc, and
//! `NEURON_RT_ROOT_COMM_ID=127.0.0.1:<port>` for the bootstrap of docs/contract/abi.md §5.11; the
//! port is a free one found by binding port 0 and closing it). It collects the processes'
//! report lines, checks every exit status, and prints for each size one nccl-tests-style row
//! with both modes and the busbw ratio (P processes / 1 process), `# Avg bus bandwidth` per
//! mode, the memcpy figure and the summary at the largest size.
//!
//! Choices: only the ops of the C API's `nrt_cc_op_type_t` (all-reduce, all-gather,
//! reduce-scatter); out-of-place only (separate input and output tensors; in place is not
//! measured); every process gets `NEURON_RT_EXEC_TIMEOUT=60` unless the caller set it, and the
//! parent kills what is still running after `--deadline` seconds per mode (default 600), or
//! [`GRACE`] after the first process of a mode failed (its peers normally fail by themselves at
//! once, as the runtime fails the collectives a dead process misses). `--alg` reaches the
//! processes as `OPENNRT_CC_ALGO`.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::args::{self, fail};
use crate::perf_cmd::{self, Opts};
use crate::perf_rank::{cc_op_of, RankJob, SizeLine};
use crate::perf_run::{self, Measured};

/// How long the other processes of a mode may run on after one of them failed.
const GRACE: Duration = Duration::from_secs(20);

/// The execution timeout each process gets unless the caller set one (seconds).
const EXEC_TIMEOUT_S: &str = "60";

/// One mode's outcome: the report lines of its processes and what went wrong.
#[derive(Debug, Default)]
struct Outcome {
    lines: Vec<SizeLine>,
    failures: Vec<String>,
}

/// A started process of a mode.
#[derive(Debug)]
struct Proc {
    index: u32,
    child: Child,
    stdin: Option<ChildStdin>,
    reader: Option<JoinHandle<Vec<SizeLine>>>,
    done: bool,
}

/// `a-b` (or `a`): the cores of process `p` of a job with `k` ranks per process.
fn core_range(p: u32, k: u32) -> String {
    let lo = p * k;
    if k == 1 {
        lo.to_string()
    } else {
        format!("{lo}-{}", lo + k - 1)
    }
}

/// The firmware carrier cargo builds next to this binary (`target/<profile>/libncfw.so`), for
/// `OPENNRT_NCFW_PATH`: `nrt_init` dlopens `libncfw.so` (docs/contract/carrier.md §1.2), which libnrt.so.1
/// finds through its `RUNPATH=$ORIGIN` but this binary does not. `None` when the caller set the
/// variable or no carrier is there (then `nrt_init` says what is missing).
fn carrier_next_to(exe: &std::path::Path) -> Option<std::path::PathBuf> {
    if opennrt::runtime::config::env_lookup("OPENNRT_NCFW_PATH").is_some() {
        return None;
    }
    let c = exe.parent()?.join("libncfw.so");
    c.is_file().then_some(c)
}

/// A TCP port that was free a moment ago (bound to port 0 and closed).
fn free_port() -> std::io::Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

/// Read a process's stdout: its report lines; anything else is passed on to stderr.
fn read_lines(index: u32, out: std::process::ChildStdout) -> Vec<SizeLine> {
    let mut v = Vec::new();
    for line in BufReader::new(out).lines().map_while(Result::ok) {
        match serde_json::from_str::<SizeLine>(&line) {
            Ok(l) => v.push(l),
            Err(_) => eprintln!("[process {index}] {line}"),
        }
    }
    v
}

/// Why a process ended as it did, for the failure list.
fn describe_exit(status: std::process::ExitStatus) -> String {
    match status.code() {
        Some(1) => "exited with status 1: wrong elements".into(),
        Some(3) => "exited with status 3: a runtime error (its message is above)".into(),
        Some(c) => format!("exited with status {c}"),
        None => format!("ended by a signal ({status})"),
    }
}

/// Start the processes of one mode (`procs` processes, `--procs` job), wait for them
/// ([`wait_all`]) and collect their lines.
fn run_mode(template: &RankJob, procs: u32, o: &Opts, deadline: Duration) -> Outcome {
    let mut out = Outcome::default();
    let mode = mode_name(procs);
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            out.failures
                .push(format!("{mode}: cannot find this binary: {e}"));
            return out;
        }
    };
    let root = if procs > 1 {
        match free_port() {
            Ok(p) => Some(format!("127.0.0.1:{p}")),
            Err(e) => {
                out.failures.push(format!("{mode}: no free port: {e}"));
                return out;
            }
        }
    } else {
        None
    };
    let carrier = carrier_next_to(&exe);
    let k = template.n / procs;
    let mut ps: Vec<Proc> = Vec::new();
    for p in 0..procs {
        let job = RankJob {
            procs,
            proc_index: p,
            wait_stdin: procs > 1 && p == 0,
            ..template.clone()
        };
        let mut cmd = Command::new(&exe);
        cmd.args(job.to_args())
            .env("NEURON_RT_VISIBLE_CORES", core_range(p, k))
            .stdin(if job.wait_stdin {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        match &root {
            Some(r) => cmd.env("NEURON_RT_ROOT_COMM_ID", r),
            None => cmd.env_remove("NEURON_RT_ROOT_COMM_ID"),
        };
        if opennrt::runtime::config::env_lookup("NEURON_RT_EXEC_TIMEOUT").is_none() {
            cmd.env("NEURON_RT_EXEC_TIMEOUT", EXEC_TIMEOUT_S);
        }
        if let Some(c) = &carrier {
            cmd.env("OPENNRT_NCFW_PATH", c);
        }
        if let Some(a) = o.setup.alg {
            cmd.env("OPENNRT_CC_ALGO", a.name());
        }
        match cmd.spawn() {
            Ok(mut child) => {
                let stdout = child.stdout.take().expect("stdout is piped");
                let reader = std::thread::spawn(move || read_lines(p, stdout));
                ps.push(Proc {
                    index: p,
                    stdin: child.stdin.take(),
                    child,
                    reader: Some(reader),
                    done: false,
                });
            }
            Err(e) => {
                out.failures
                    .push(format!("{mode}: cannot start process {p}: {e}"));
                break;
            }
        }
    }
    let incomplete = ps.len() < procs as usize;
    wait_all(&mut ps, &mode, k, deadline, incomplete, &mut out);
    for p in &mut ps {
        if let Some(r) = p.reader.take() {
            out.lines.extend(r.join().unwrap_or_default());
        }
    }
    out
}

/// Wait until every process has exited: close the root's stdin once every other process has
/// exited, record each failure, and kill what still runs after the deadline or [`GRACE`] after
/// the first failure (`incomplete`: not every process could be started, which is one).
fn wait_all(
    ps: &mut [Proc],
    mode: &str,
    k: u32,
    deadline: Duration,
    incomplete: bool,
    out: &mut Outcome,
) {
    let started = Instant::now();
    let mut failed_at = incomplete.then_some(started);
    loop {
        for p in ps.iter_mut().filter(|p| !p.done) {
            match p.child.try_wait() {
                Ok(Some(st)) => {
                    p.done = true;
                    if !st.success() {
                        out.failures.push(format!(
                            "{mode}: process {} (global ranks {}) {}",
                            p.index,
                            core_range(p.index, k),
                            describe_exit(st)
                        ));
                        failed_at.get_or_insert_with(Instant::now);
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    p.done = true;
                    out.failures
                        .push(format!("{mode}: process {}: wait: {e}", p.index));
                }
            }
        }
        // The root leaves only when nobody needs it any more.
        if ps.iter().skip(1).all(|p| p.done) {
            if let Some(p) = ps.first_mut() {
                drop(p.stdin.take());
            }
        }
        if ps.iter().all(|p| p.done) {
            break;
        }
        let late = started.elapsed() > deadline;
        let abandoned = failed_at.is_some_and(|t| t.elapsed() > GRACE);
        if late || abandoned {
            for p in ps.iter_mut().filter(|p| !p.done) {
                let _ = p.child.kill();
                let _ = p.child.wait();
                p.done = true;
                out.failures.push(format!(
                    "{mode}: process {} killed {}",
                    p.index,
                    if late {
                        format!("after the deadline ({} s, --deadline)", deadline.as_secs())
                    } else {
                        format!("{} s after another process failed", GRACE.as_secs())
                    }
                ));
            }
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn mode_name(procs: u32) -> String {
    if procs == 1 {
        "1 process".into()
    } else {
        format!("{procs} processes")
    }
}

/// A mode's measurement of one size (`None`: no complete report).
fn measured(
    o: &Outcome,
    count: u64,
    procs: u32,
    bytes: f64,
    first: &mut Vec<String>,
) -> Option<Measured> {
    let lines: Vec<&SizeLine> = o.lines.iter().filter(|l| l.count == count).collect();
    if lines.len() != procs as usize {
        return None;
    }
    let mut times = lines.iter().find_map(|l| l.times.clone())?;
    if times.is_empty() {
        return None;
    }
    times.sort_by(f64::total_cmp);
    let wrong = lines.iter().map(|l| l.wrong).sum::<Option<u64>>();
    if let Some(f) = lines.iter().find_map(|l| l.first.clone()) {
        first.push(format!(
            "{}: count {count}: first wrong element: {f}",
            mode_name(procs)
        ));
    }
    Some(Measured {
        time: times[times.len() / 2],
        bytes,
        wrong,
        moved: None,
    })
}

/// `opennrt perf --procs P ...`: both modes, the table, exit 1 on any wrong element or failed
/// process.
pub fn perf_procs(o: &Opts, procs: u32, deadline: Duration) -> i32 {
    let c = "perf";
    let s = &o.setup;
    if cc_op_of(s.op).is_none() {
        fail(
            c,
            &format!(
                "--procs runs through the C API, whose collectives (nrt_cc_op_type_t) are \
                 all_reduce, all_gather and reduce_scatter; {} is not one of them",
                args::op_name(s.op)
            ),
        );
    }
    if procs == 0 || s.n % procs != 0 {
        fail(c, &format!("--procs {procs} must divide --ranks {}", s.n));
    }
    let esz = s.dtype.size_bytes().unwrap_or(1) as u64;
    let counts = perf_cmd::counts(o, esz);
    let template = RankJob {
        op: s.op,
        n: s.n,
        procs: 1,
        proc_index: 0,
        dtype: s.dtype,
        redop: s.redop,
        counts: counts.clone(),
        iters: s.iters,
        check: s.check,
        wait_stdin: false,
    };
    let redop = if s.op.is_reducing() {
        format!("{:?}", s.redop).to_lowercase()
    } else {
        "none".into()
    };
    let factor = perf_run::busbw_factor(s.op, s.n);
    let mem = perf_cmd::memcpy_bw();
    let multi = mode_name(procs);
    println!(
        "# opennrt perf --procs {procs}: {} on {} ranks through the C API, {} {redop}, {} \
         iteration(s) per size (median of global rank 0's schedule-to-completion), check {}",
        args::op_name(s.op),
        s.n,
        args::dtype_name(s.dtype),
        s.iters,
        if s.check { "on" } else { "off" }
    );
    println!(
        "# 1 process: {} ranks, one thread per core; {multi}: {} rank(s) each, one thread per \
         core, NEURON_RT_ROOT_COMM_ID on 127.0.0.1",
        s.n,
        s.n / procs
    );
    println!(
        "# single-thread memcpy: {:.3} GB/s (measured now); busbw factor {factor:.4}",
        mem / 1e9
    );
    println!("# out-of-place only; ratio = busbw ({multi}) / busbw (1 process)");
    let _ = std::io::stdout().flush();
    let one = run_mode(&template, 1, o, deadline);
    let many = run_mode(&template, procs, o, deadline);
    println!("#{:>41} | {:^35} | {:^35} |", "", "1 process", multi);
    println!(
        "#{:>11} {:>12} {:>9} {:>6} | {:>9} {:>8} {:>8} {:>7} | {:>9} {:>8} {:>8} {:>7} | {:>6}",
        "size",
        "count",
        "type",
        "redop",
        "time",
        "algbw",
        "busbw",
        "#wrong",
        "time",
        "algbw",
        "busbw",
        "#wrong",
        "ratio"
    );
    println!(
        "#{:>11} {:>12} {:>9} {:>6} | {:>9} {:>8} {:>8} {:>7} | {:>9} {:>8} {:>8} {:>7} | {:>6}",
        "(B)",
        "(elements)",
        "",
        "",
        "(us)",
        "(GB/s)",
        "(GB/s)",
        "",
        "(us)",
        "(GB/s)",
        "(GB/s)",
        "",
        ""
    );
    let mut firsts = Vec::new();
    let (mut wrong, mut sums, mut rows) = (0u64, [0.0f64; 2], [0u32; 2]);
    let mut last = (None, None, 0u64);
    for &count in &counts {
        let size = count * perf_run::blocks(s.op, s.n) * esz;
        let m1 = measured(&one, count, 1, size as f64, &mut firsts);
        let mp = measured(&many, count, procs, size as f64, &mut firsts);
        let (b1, bp) = (perf_cmd::busbw(&m1, factor), perf_cmd::busbw(&mp, factor));
        for (i, b) in [b1, bp].into_iter().enumerate() {
            if let Some(b) = b {
                sums[i] += b;
                rows[i] += 1;
            }
        }
        wrong += [m1, mp]
            .iter()
            .flatten()
            .filter_map(|m| m.wrong)
            .sum::<u64>();
        let ratio = ratio(b1, bp);
        println!(
            "{:>12} {:>12} {:>9} {:>6} | {} | {} | {:>6}",
            size,
            count * perf_run::blocks(s.op, s.n),
            args::dtype_name(s.dtype),
            redop,
            perf_cmd::half(&m1, factor),
            perf_cmd::half(&mp, factor),
            ratio
        );
        last = (b1, bp, size);
    }
    let checked = if s.check {
        format!("{wrong} wrong elements")
    } else {
        "not checked (--check 0)".into()
    };
    println!("# Out of bounds values : {checked}");
    for (i, name) in ["1 process".to_string(), multi.clone()].iter().enumerate() {
        println!(
            "# Avg bus bandwidth ({name}) : {:.6}",
            if rows[i] > 0 {
                sums[i] / f64::from(rows[i])
            } else {
                0.0
            }
        );
    }
    let vs_mem = |b: Option<f64>| b.map_or("N/A".into(), |b| format!("{:.4}", b * 1e9 / mem));
    println!(
        "# largest size busbw / single-thread memcpy: 1 process {}, {multi} {}",
        vs_mem(last.0),
        vs_mem(last.1)
    );
    println!(
        "# --procs {procs} vs 1 process at {}: busbw ratio {}",
        human(last.2),
        ratio(last.0, last.1).trim()
    );
    for f in &firsts {
        eprintln!("opennrt perf: {f}");
    }
    for f in one.failures.iter().chain(&many.failures) {
        eprintln!("opennrt perf: {f}");
    }
    i32::from(wrong > 0 || !one.failures.is_empty() || !many.failures.is_empty())
}

/// busbw(P processes) / busbw(1 process), or N/A.
fn ratio(one: Option<f64>, many: Option<f64>) -> String {
    match (one, many) {
        (Some(a), Some(b)) if a > 0.0 => format!("{:.3}", b / a),
        _ => "N/A".into(),
    }
}

/// `64 MiB (67108864 B)`.
fn human(b: u64) -> String {
    let (v, u) = match b {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => (b >> 30, "GiB"),
        b if b >= 1 << 20 && b % (1 << 20) == 0 => (b >> 20, "MiB"),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => (b >> 10, "KiB"),
        b => return format!("{b} B"),
    };
    format!("{v} {u} ({b} B)")
}

#[cfg(test)]
mod tests;

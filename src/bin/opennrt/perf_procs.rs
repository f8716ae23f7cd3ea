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
//! measured). The processes get the launcher environment of [`opennrt::launch`], and the
//! parent kills what is still running after `--deadline` seconds per mode (default 600), or
//! [`GRACE`] after the first process of a mode failed (its peers normally fail by themselves at
//! once, as the runtime fails the collectives a dead process misses). `--alg` reaches the
//! processes as `OPENNRT_CC_ALGO`.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use opennrt::launch::{self, core_range, Strays, Watch, Worker, GRACE};

use crate::args::fail;
use crate::perf_cmd::{self, Opts};
use crate::perf_rank::{RankJob, SizeLine};
use crate::perf_run::{self, Measured};

/// One mode's outcome: the report lines of its processes and what went wrong.
type Outcome = launch::Outcome<SizeLine>;

/// Start the processes of one mode (`procs` processes, `--procs` job), wait for them
/// ([`launch::run`]) and collect their lines; each failure is prefixed with the mode.
fn run_mode(template: &RankJob, procs: u32, o: &Opts, deadline: Duration) -> Outcome {
    let mode = mode_name(procs);
    let failed = |why: String| Outcome::failed(format!("{mode}: {why}"));
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => return failed(format!("cannot find this binary: {e}")),
    };
    let root = if procs > 1 {
        match launch::root_comm_id() {
            Ok(r) => Some(r),
            Err(e) => return failed(format!("no free port: {e}")),
        }
    } else {
        None
    };
    let carrier = launch::carrier_next_to(&exe);
    // Process 0 holds the bootstrap root when there is one: it waits for its release.
    let hold_root = root.is_some();
    let k = template.n / procs;
    let workers = (0..procs)
        .map(|p| {
            let job = RankJob {
                procs,
                proc_index: p,
                wait_stdin: hold_root && p == 0,
                ..template.clone()
            };
            let cores = core_range(p * k, k);
            let mut command = Command::new(&exe);
            command.args(job.to_args()).stderr(Stdio::inherit());
            launch::set_rank_env(&mut command, &cores, root.as_deref(), carrier.as_deref());
            if let Some(a) = o.setup.alg {
                command.env("OPENNRT_CC_ALGO", a.name());
            }
            Worker {
                name: format!("process {p} (global ranks {cores})"),
                command,
                strays: Strays::Stderr,
            }
        })
        .collect();
    let watch = Watch {
        deadline,
        grace: GRACE,
        hold_root,
    };
    let mut out: Outcome = launch::run(workers, &watch);
    for f in &mut out.failures {
        *f = format!("{mode}: {f}");
    }
    out
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
    if s.op.nrt_cc_op().is_none() {
        fail(
            c,
            &format!(
                "--procs runs through the C API, whose collectives (nrt_cc_op_type_t) are \
                 all_reduce, all_gather and reduce_scatter; {} is not one of them",
                s.op.name()
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
        s.op.name(),
        s.n,
        s.dtype.short_name(),
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
            s.dtype.short_name(),
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

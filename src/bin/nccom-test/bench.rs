//! One run: check what the command line asks for, then per size build the NEFF, start the
//! workers ([`crate::launch`]), judge their answers and print the row (or the failure line);
//! at the end the average line (or the error count) and the JSON report.
//!
//! Choices the vendor's docs leave open:
//! * A size is one NEFF with one trigger; every rank runs `-w` untimed then `-n` timed
//!   executions, each timed alone, and rank 0's times make the statistics. With `-I` or `-W`
//!   (as the vendor's guide says) the `-n` + `-w` operations go into one NEFF, which runs
//!   `W` times untimed (0 when only `-I` is given) then `I` times timed (1 when only `-W` is);
//!   the operations inside one execution cannot be timed apart, so each timed execution gives
//!   `-n` samples of `1/(n+w)`-th of its time (its mean operation).
//! * A size that rounds to no element per block is skipped with a note on stderr; sizes that
//!   round to the same bytes are run once.
//! * A failed run prints `<size>    Failure running neuron-bench - log file <log>` (the
//!   vendor's words: the workers stand in for neuron-bench); a failed check prints
//!   `<size>    Failure checking results - log file <log>` with the first wrong element and
//!   the dumped tensors on stderr. Under a failed run stderr also shows the workers' own error
//!   lines from the log ([`worker_said`]), so the reason is on screen. Either counts one error; a run with errors ends with
//!   `N errors found - test failed` and exit status 1 instead of the average line.
//! * Logs are `<tmp>/nccom_test_log_<pid>_<n>.log`, removed after a good size unless
//!   `--debug`; the NEFFs live in `<tmp>/nccom_test_<pid>/`, removed at the end unless
//!   `--debug`; dumps go to `<tmp>/nccom_test_dump_<pid>_<size>/` and stay.
//! * An integer all-reduce or reduce-scatter runs an fp32 collective, the worker widening and
//!   narrowing on the host ([`crate::widen`]); sizes and bandwidths stay in the user's type.
//!   Any other reduction on a type the software device's CCE does not reduce is refused up
//!   front with the ISA validator's own reason (the check every NEFF trigger meets at load).
//! * `--custom-src-target-pairs` applies to permute only; a permute without it sends each
//!   subgroup member to the next (the NEFF builder's default).
//! * `alltoallv` and `allgv` run the table of `--variable-size-op-metadata` at every size, or
//!   equal blocks without it ([`crate::metadata`]); a size whose buffers cannot hold the
//!   file's windows is refused up front, naming the size and the window.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use opennrt::lower::pipeline::LowerConfig;

use crate::algo;
use crate::args::Opts;
use crate::custom;
use crate::dtypes;
use crate::job::{Job, RankLine};
use crate::launch::{self, Outcome, Plan};
use crate::limits;
use crate::metadata::{self, Rows};
use crate::neffgen::{self, NeffSpec};
use crate::ops::{self, Op, Sizes, Sizing};
use crate::report;
use crate::sweep;
use crate::table::{self, Col, Row};
use crate::units::gbps;
use crate::widen;

/// Kill a size's workers still running after this long.
const DEADLINE: Duration = Duration::from_secs(900);

/// A checked run: the options and everything derived from them.
#[derive(Debug, Clone)]
pub struct Setup {
    /// The command line.
    pub opts: Opts,
    /// The replica subgroups (global ranks).
    pub groups: Vec<Vec<u32>>,
    /// The subgroups came from `--custom-replica-groups`.
    pub custom_groups: bool,
    /// Permute pairs (global ranks).
    pub pairs: Vec<(u32, u32)>,
    /// The pairs came from `--custom-src-target-pairs`.
    pub custom_pairs: bool,
    /// The group size.
    pub g: u32,
    /// The sizes to run.
    pub sizes: Vec<Sizing>,
    /// Requested sizes too small for one element per block.
    pub skipped: Vec<u64>,
    /// The table's columns.
    pub cols: Vec<Col>,
    /// The variable-size ops' table from `--variable-size-op-metadata` (else equal blocks
    /// per size).
    pub table: Option<Vec<Rows>>,
    /// `--plot FILE` (taken off the command line by `main`, [`crate::plot`]).
    pub plot: Option<std::path::PathBuf>,
    /// The hosts and mpirun of a run across hosts ([`crate::mpi`]).
    pub mpi: Option<crate::mpi::Mpi>,
}

impl Setup {
    /// The table of a variable-size op at size `z` (`None` for the fixed-size ops).
    pub fn table_for(&self, z: &Sizing) -> Option<Vec<Rows>> {
        let op = self.opts.op;
        op.is_variable().then(|| {
            self.table
                .clone()
                .unwrap_or_else(|| metadata::uniform(op, self.g, z.count))
        })
    }
}

/// Check the command line's request; `Err` is a refusal (exit status 2).
pub fn prepare(opts: Opts) -> Result<Setup, String> {
    let op = opts.op;
    if op.is_reducing() && !widen::applies(op, opts.dtype) {
        if let Err(e) = opennrt::isa::validate::rule_10_dtype(0xC8, "dtype", 0, opts.dtype, true) {
            return Err(format!(
                "{} of {} is refused by the software device: {} ({}); use -d fp32, bf16, fp16 \
                 or fp8",
                op.nccom_name(),
                opts.dtype_words(),
                e.reason,
                e.rule
            ));
        }
    }
    if opts.neff_iters.is_some() || opts.neff_warmup.is_some() {
        let ops = u64::from(opts.iters) + u64::from(opts.warmup);
        if ops > u64::from(opennrt::neff::build::MAX_OPS) {
            return Err(format!(
                "-I/-W put the -n + -w = {ops} operations in one NEFF, which holds at most {}; \
                 lower -n or -w",
                opennrt::neff::build::MAX_OPS
            ));
        }
    }
    // A bad topology or selection variable is refused here, once, rather than at every size.
    LowerConfig::from_lookup(opennrt::runtime::config::env_lookup, opts.ranks)
        .map_err(|e| e.message().to_string())?;
    // Each host runs -r / -N ranks, one logical core each, and holds their tensors.
    let per_node = opts.ranks / opts.nnodes.max(1);
    limits::cores(per_node, opts.nnodes.max(1))?;
    let mpi = crate::mpi::setup(&opts)?;
    let (groups, custom_groups) = match &opts.replica_groups {
        Some(p) => (custom::groups(p, opts.ranks)?, true),
        None => (vec![(0..opts.ranks).collect()], false),
    };
    let (pairs, custom_pairs) = match (&opts.pairs, op) {
        (Some(p), Op::Permute) => (custom::pairs(p, opts.ranks)?, true),
        (Some(_), _) => {
            return Err(format!(
                "--custom-src-target-pairs applies to permute, not {}",
                op.nccom_name()
            ))
        }
        (None, Op::Permute) => (custom::ring_pairs(&groups), false),
        (None, _) => (Vec::new(), false),
    };
    let g = groups[0].len() as u32;
    let esz = dtypes::size(opts.dtype);
    let mut sizes: Vec<Sizing> = Vec::new();
    let mut skipped = Vec::new();
    for s in sweep::sizes(opts.minbytes, opts.maxbytes, opts.step)? {
        let z = ops::size_for(op, g, esz, s);
        if z.count == 0 {
            skipped.push(s);
        } else if sizes.last().is_none_or(|l| l.bytes != z.bytes) {
            sizes.push(z);
        }
    }
    if sizes.is_empty() {
        return Err(format!(
            "no size to run: every size from {} B to {} B holds less than one {} element per \
             rank block for {} on {} ranks; raise -b/--minbytes",
            opts.minbytes,
            opts.maxbytes,
            opts.dtype_words(),
            op.nccom_name(),
            g
        ));
    }
    // The sizes grow, but a widened type changes the wire bytes: check each (cheap).
    for z in &sizes {
        let wire = |b: u64| {
            if widen::applies(op, opts.dtype) {
                b / esz * widen::WIRE_SIZE
            } else {
                b
            }
        };
        limits::size(
            &format!("size {} B", z.bytes),
            per_node,
            wire(z.in_bytes),
            wire(z.out_bytes),
        )?;
    }
    if let Some(p) = &opts.report {
        writable(p).map_err(|e| format!("--report-to-json-file {}: {e}", p.display()))?;
    }
    let table = match &opts.metadata {
        Some(p) => Some(metadata::load(p, op, g)?),
        None => None,
    };
    if let (Some(rows), Some(path)) = (&table, &opts.metadata) {
        for z in &sizes {
            metadata::check_fits(rows, z.in_bytes / esz, z.out_bytes / esz).map_err(|e| {
                format!(
                    "--variable-size-op-metadata {}: size {} B ({} elements in, {} out per \
                     rank, of {}) cannot hold the table: {e}",
                    path.display(),
                    z.bytes,
                    z.in_bytes / esz,
                    z.out_bytes / esz,
                    opts.dtype_words()
                )
            })?;
        }
    }
    let cols = table::columns(&opts.stats, opts.show_io_size, opts.show_algorithm);
    Ok(Setup {
        opts,
        plot: None,
        mpi,
        groups,
        custom_groups,
        pairs,
        custom_pairs,
        g,
        sizes,
        skipped,
        cols,
        table,
    })
}

/// Check before the first size that the JSON report can be written where asked (a file that
/// was not there is created and removed again), so an unwritable path is not found only after
/// the whole sweep.
fn writable(p: &Path) -> std::io::Result<()> {
    let existed = p.exists();
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(p)?;
    if !existed {
        std::fs::remove_file(p)?;
    }
    Ok(())
}

/// How a size ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Measured (and checked, with `--check`).
    Row(Row),
    /// Failed: the table's text and the details for stderr and the log.
    Failed {
        /// After the size on the failure line.
        line: String,
        /// What went wrong, one item each.
        details: Vec<String>,
    },
}

/// Judge a size's answers.
pub fn evaluate(
    s: &Setup,
    z: &Sizing,
    out: &Outcome,
    log: &Path,
    algorithm: Option<String>,
) -> Verdict {
    let run_failed = |details: Vec<String>| Verdict::Failed {
        line: format!("Failure running neuron-bench - log file {}", log.display()),
        details,
    };
    let check_failed = |details: Vec<String>| Verdict::Failed {
        line: format!("Failure checking results - log file {}", log.display()),
        details,
    };
    let line_of = |r: u32| out.lines.iter().find(|l| l.rank == r);
    let missing: Vec<u32> = (0..s.opts.ranks)
        .filter(|&r| line_of(r).is_none())
        .collect();
    if s.opts.check.is_some() && missing.is_empty() {
        let mut details = Vec::new();
        for l in &out.lines {
            if l.wrong.unwrap_or(0) > 0 {
                details.push(format!(
                    "rank {}: {} wrong element(s); first: {}{}",
                    l.rank,
                    l.wrong.unwrap_or(0),
                    l.first.as_deref().unwrap_or("?"),
                    l.dumped
                        .as_ref()
                        .map(|d| format!("; tensors dumped to {d}"))
                        .unwrap_or_default()
                ));
            }
        }
        if matches!(s.opts.op, Op::AllReduce | Op::AllGather) {
            details.extend(identity(&s.groups, &out.lines));
        }
        if !details.is_empty() {
            return check_failed(details);
        }
    }
    if !out.failures.is_empty() || !missing.is_empty() {
        let mut d = out.failures.clone();
        if !missing.is_empty() {
            d.push(format!("no result from rank(s) {missing:?}"));
        }
        return run_failed(d);
    }
    let times = match line_of(0).and_then(|l| l.times_us.clone()) {
        Some(t) if !t.is_empty() => t,
        _ => return run_failed(vec!["rank 0 reported no times".into()]),
    };
    let stats = s.opts.stats.iter().map(|&st| (st, st.of(&times))).collect();
    let avg = crate::stats::Stat::Avg.of(&times);
    let algbw = gbps(z.bytes, avg);
    Verdict::Row(Row {
        size: z.bytes,
        count: z.elems,
        total_in: z.in_bytes,
        total_out: z.out_bytes,
        dtype: dtypes::name(s.opts.dtype),
        times: stats,
        algbw,
        busbw: algbw * s.opts.op.busbw_factor(s.g),
        algorithm,
    })
}

/// The cross-rank identity check: every rank of a subgroup holds the same output.
pub fn identity(groups: &[Vec<u32>], lines: &[RankLine]) -> Vec<String> {
    let digest = |r: u32| {
        lines
            .iter()
            .find(|l| l.rank == r)
            .and_then(|l| l.digest.clone())
    };
    let mut v = Vec::new();
    for grp in groups {
        let first = grp[0];
        for &r in &grp[1..] {
            if digest(r) != digest(first) {
                v.push(format!(
                    "ranks {first} and {r} hold different outputs (cross-rank identity check)"
                ));
            }
        }
    }
    v
}

/// The job template of a size (the launcher fills in the ranks).
fn job_of(s: &Setup, z: &Sizing, neff: PathBuf, dump: PathBuf) -> Job {
    let o = &s.opts;
    let (warmup, iters, ops, samples) = match (o.neff_iters, o.neff_warmup) {
        (None, None) => (o.warmup, o.iters, 1, 1),
        (i, w) => (w.unwrap_or(0), i.unwrap_or(1), o.iters + o.warmup, o.iters),
    };
    Job {
        neff,
        op: o.op.nccom_name().into(),
        dtype: dtypes::name(o.dtype).into(),
        world: o.ranks,
        count: z.count,
        in_bytes: z.in_bytes,
        out_bytes: z.out_bytes,
        warmup,
        iters,
        ops_per_exec: ops,
        samples_per_exec: samples,
        check: o.check.map(|m| m.name().to_string()),
        seed: o.seed,
        ranks: Vec::new(),
        threads: o.threads,
        groups: s.groups.clone(),
        pairs: s.pairs.clone(),
        wait_stdin: false,
        dump_dir: Some(dump),
        table: s.table_for(z),
    }
}

/// The NEFF of a size.
fn spec_of(s: &Setup, z: &Sizing, ops: u32) -> NeffSpec {
    NeffSpec {
        op: s.opts.op,
        ranks: s.opts.ranks,
        count: z.count,
        dtype: widen::wire_dtype(s.opts.op, s.opts.dtype),
        ops,
        groups: s.custom_groups.then(|| s.groups.clone()),
        pairs: s.custom_pairs.then(|| s.pairs.clone()),
    }
}

/// Append lines to a log file (best effort).
fn append(log: &Path, lines: &[String]) {
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(log)
    {
        for l in lines {
            let _ = writeln!(f, "nccom-test: {l}");
        }
    }
}

/// Most worker lines [`worker_said`] shows.
const SAID_LINES: usize = 8;

/// The workers' own error lines in a failed size's log (their stderr), so the reason is on
/// screen and not only in the file: the lines a worker wrote itself (`nccom-test worker…`) and
/// the runtime's error lines; when there are none, the log's last lines. At most
/// [`SAID_LINES`], the last ones (the first failure usually causes the rest).
pub fn worker_said(log: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.is_empty())
        .collect();
    let own: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.starts_with("nccom-test worker") || l.contains("ERROR"))
        .collect();
    let pick = if own.is_empty() { lines } else { own };
    let skip = pick.len().saturating_sub(SAID_LINES);
    pick[skip..].iter().map(|l| l.to_string()).collect()
}

/// After SIGINT or SIGTERM (the workers are already killed, [`opennrt::launch::stop`]): remove
/// the NEFF directory and the size's log unless `--debug`, say so; the exit status 128 +
/// the signal. `None` when no signal came.
fn stopped(o: &Opts, dir: &Path, log: &Path) -> Option<i32> {
    let sig = opennrt::launch::stop::requested()?;
    if !o.debug {
        let _ = std::fs::remove_dir_all(dir);
        let _ = std::fs::remove_file(log);
    }
    eprintln!(
        "nccom-test: stopped by {}: every worker was killed{}",
        opennrt::launch::stop::name(sig),
        if o.debug {
            ""
        } else {
            " and the temporary files removed"
        }
    );
    Some(128 + sig)
}

/// Run every size; the exit status (0, or 1 when any size failed).
pub fn run(s: &Setup) -> i32 {
    let o = &s.opts;
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("nccom-test: cannot find this binary: {e}");
            return 1;
        }
    };
    let pid = std::process::id();
    let tmp = std::env::temp_dir();
    let dir = tmp.join(format!("nccom_test_{pid}"));
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("nccom-test: {}: {e}", dir.display());
        return 1;
    }
    let plan = Plan {
        exe,
        threads: o.threads,
        world: o.ranks,
        deadline: DEADLINE,
        debug: o.debug,
        mpi: s.mpi.clone(),
    };
    for sk in &s.skipped {
        eprintln!(
            "nccom-test: size {sk} B holds less than one {} element per rank block for {} on \
             {} ranks; skipped",
            o.dtype_words(),
            o.op.nccom_name(),
            s.g
        );
    }
    opennrt::launch::stop::stop_on_signals();
    println!("{}", table::header(&s.cols));
    let _ = std::io::stdout().flush();
    let (mut rows, mut errors) = (Vec::new(), 0usize);
    let mut progress = if o.non_interactive {
        opennrt::progress::Progress::off("nccom-test", s.sizes.len() as u64)
    } else {
        opennrt::progress::Progress::new("nccom-test", s.sizes.len() as u64)
    };
    for (i, z) in s.sizes.iter().enumerate() {
        let log = tmp.join(format!("nccom_test_log_{pid}_{i}.log"));
        if let Some(code) = stopped(o, &dir, &log) {
            return code;
        }
        progress.update(i as u64, &format!("size {} B", z.bytes));
        let neff_path = dir.join(format!("size_{}.neff", z.bytes));
        let dump = tmp.join(format!("nccom_test_dump_{pid}_{}", z.bytes));
        let template = job_of(s, z, neff_path.clone(), dump);
        let algorithm = o.show_algorithm.then(|| {
            algo::chosen(
                o.op,
                widen::wire_dtype(o.op, o.dtype),
                z.count,
                o.ranks,
                &s.groups[0],
                &s.pairs,
            )
            .map(str::to_string)
            .unwrap_or_else(|e| {
                eprintln!("nccom-test: size {}: no algorithm: {e}", z.bytes);
                "-".into()
            })
        });
        let built = neffgen::build(&spec_of(s, z, template.ops_per_exec)).and_then(|b| {
            let want = (
                template.wire_bytes(z.in_bytes),
                template.wire_bytes(z.out_bytes),
            );
            if (b.in_bytes, b.out_bytes) != want {
                return Err(format!(
                    "the builder's tensors ({} B in, {} B out) are not the {} B in, {} B out \
                     this size needs",
                    b.in_bytes, b.out_bytes, want.0, want.1
                ));
            }
            std::fs::write(&neff_path, b.bytes).map_err(|e| format!("{}: {e}", neff_path.display()))
        });
        let verdict = match built {
            Err(e) => {
                append(&log, &[format!("building the NEFF: {e}")]);
                Verdict::Failed {
                    line: format!("Failure running neuron-bench - log file {}", log.display()),
                    details: vec![format!("building the NEFF: {e}")],
                }
            }
            Ok(()) => {
                let out = launch::run(&template, &plan, &log);
                evaluate(s, z, &out, &log, algorithm)
            }
        };
        progress.finish();
        if let Some(code) = stopped(o, &dir, &log) {
            return code;
        }
        match verdict {
            Verdict::Row(r) => {
                println!("{}", table::line(&s.cols, &r));
                rows.push(r);
                if !o.debug {
                    let _ = std::fs::remove_file(&log);
                    let _ = std::fs::remove_file(&neff_path);
                }
            }
            Verdict::Failed { line, details } => {
                errors += 1;
                println!("{}", table::failure(z.bytes, &line));
                // Read before `append` adds our own lines: what the workers said themselves.
                let said = worker_said(&log);
                append(&log, &details);
                for d in &details {
                    eprintln!("nccom-test: size {}: {d}", z.bytes);
                }
                for w in &said {
                    eprintln!("nccom-test: size {}: worker said: {w}", z.bytes);
                }
            }
        }
        let _ = std::io::stdout().flush();
    }
    if !o.debug {
        let _ = std::fs::remove_dir_all(&dir);
    }
    if let Some(p) = &o.report {
        if let Err(e) = report::write(p, &s.cols, &rows) {
            eprintln!("nccom-test: --report-to-json-file {}: {e}", p.display());
            errors += 1;
        }
    }
    if let Err(e) = crate::plot::write(s, &rows) {
        eprintln!("nccom-test: --plot {e}");
        errors += 1;
    }
    if errors == 0 {
        let bw: Vec<f64> = rows.iter().map(|r| r.busbw).collect();
        println!("{}", table::average(&bw));
        0
    } else {
        println!("{}", table::errors(errors));
        1
    }
}

#[cfg(test)]
mod tests;

//! Starting a size's workers and collecting their answers, as the vendor's nccom-test runs
//! neuron-bench once per NEFF.
//!
//! Default: one process per rank, this same binary re-executed as a worker
//! ([`crate::worker`]), rank `r` with `NEURON_RT_VISIBLE_CORES=r` (so its vnc 0 is core `r`)
//! and, with more than one rank, `NEURON_RT_ROOT_COMM_ID=127.0.0.1:<port>` for the bootstrap
//! of docs/contract/abi.md §5.11 (a port that was free a moment ago: bound to port 0 and
//! closed). `--threads`: one worker process owning every core
//! (`NEURON_RT_VISIBLE_CORES=0-(R-1)`, no root id) with a thread per rank. The environment is
//! only ever set on the child's `Command`; the parent's own is never changed.
//!
//! Every worker also gets `NEURON_RT_EXEC_TIMEOUT=60` unless the caller set it, and
//! `OPENNRT_NCFW_PATH` pointing at the `libncfw.so` cargo builds next to this binary (unless
//! set): `nrt_init` dlopens the carrier (docs/contract/carrier.md §1.2), which `libnrt.so.1`
//! finds through its RUNPATH but this binary does not. The workers' stderr, and any stdout line
//! that is not an answer, go to the size's log file. The parent kills what still runs after
//! the deadline, or [`GRACE`] after the first worker failed (its peers normally fail by
//! themselves as their collectives time out). The process of rank 0 holds the bootstrap root:
//! it waits for end-of-file on stdin before `nrt_close`, and the parent closes that pipe once
//! every other worker has exited.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::job::{Job, RankLine};

/// How long the other workers of a size may run on after one failed.
pub const GRACE: Duration = Duration::from_secs(20);

/// The execution timeout each worker gets unless the caller set one (seconds).
const EXEC_TIMEOUT_S: &str = "60";

/// How a size's workers run.
#[derive(Debug, Clone)]
pub struct Plan {
    /// This binary.
    pub exe: PathBuf,
    /// One process, a thread per rank.
    pub threads: bool,
    /// World size.
    pub world: u32,
    /// Kill what still runs after this long.
    pub deadline: Duration,
    /// Print the workers' command lines.
    pub debug: bool,
}

/// What a size's workers answered and what went wrong.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Every answer.
    pub lines: Vec<RankLine>,
    /// Every failure, readable.
    pub failures: Vec<String>,
}

/// A started worker.
#[derive(Debug)]
struct Proc {
    name: String,
    child: Child,
    stdin: Option<ChildStdin>,
    reader: Option<JoinHandle<Vec<RankLine>>>,
    done: bool,
}

/// `a-b` (or `a`): `n` cores from `lo`, as `NEURON_RT_VISIBLE_CORES` spells a range.
pub fn core_range(lo: u32, n: u32) -> String {
    if n <= 1 {
        lo.to_string()
    } else {
        format!("{lo}-{}", lo + n - 1)
    }
}

/// A TCP port that was free a moment ago.
pub fn free_port() -> std::io::Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

/// The carrier next to `exe` for `OPENNRT_NCFW_PATH`, unless the caller set the variable.
pub fn carrier_next_to(exe: &Path) -> Option<PathBuf> {
    if opennrt::runtime::config::env_lookup("OPENNRT_NCFW_PATH").is_some() {
        return None;
    }
    let c = exe.parent()?.join("libncfw.so");
    c.is_file().then_some(c)
}

/// Why a worker ended as it did.
pub fn describe_exit(status: std::process::ExitStatus) -> String {
    match status.code() {
        Some(1) => "exited with status 1: wrong elements".into(),
        Some(2) => "exited with status 2: a bad job".into(),
        Some(3) => "exited with status 3: a runtime error (see the log)".into(),
        Some(c) => format!("exited with status {c}"),
        None => format!("ended by a signal ({status})"),
    }
}

/// Read a worker's stdout: its answers; anything else goes to the log.
fn read_lines(out: std::process::ChildStdout, mut log: Option<File>) -> Vec<RankLine> {
    let mut v = Vec::new();
    for line in BufReader::new(out).lines().map_while(Result::ok) {
        match serde_json::from_str::<RankLine>(&line) {
            Ok(l) => v.push(l),
            Err(_) => {
                if let Some(f) = log.as_mut() {
                    let _ = writeln!(f, "{line}");
                }
            }
        }
    }
    v
}

/// The jobs of a size: one per process.
pub fn jobs(template: &Job, plan: &Plan) -> Vec<Job> {
    if plan.threads {
        return vec![Job {
            ranks: (0..plan.world).collect(),
            threads: true,
            wait_stdin: false,
            ..template.clone()
        }];
    }
    (0..plan.world)
        .map(|r| Job {
            ranks: vec![r],
            threads: false,
            wait_stdin: r == 0 && plan.world > 1,
            ..template.clone()
        })
        .collect()
}

/// The command of one worker process.
fn command(plan: &Plan, job: &Job, root: Option<&str>, carrier: Option<&Path>) -> Command {
    let mut cmd = Command::new(&plan.exe);
    let cores = if plan.threads {
        core_range(0, plan.world)
    } else {
        core_range(job.ranks[0], 1)
    };
    cmd.args(job.to_args())
        .env("NEURON_RT_VISIBLE_CORES", cores)
        .stdin(if job.wait_stdin {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped());
    match root {
        Some(r) => cmd.env("NEURON_RT_ROOT_COMM_ID", r),
        None => cmd.env_remove("NEURON_RT_ROOT_COMM_ID"),
    };
    if opennrt::runtime::config::env_lookup("NEURON_RT_EXEC_TIMEOUT").is_none() {
        cmd.env("NEURON_RT_EXEC_TIMEOUT", EXEC_TIMEOUT_S);
    }
    if let Some(c) = carrier {
        cmd.env("OPENNRT_NCFW_PATH", c);
    }
    cmd
}

/// Run one size: start its workers, wait for them, collect their answers. The workers'
/// stderr goes to `log` (the caller appends the failures it reports).
pub fn run(template: &Job, plan: &Plan, log: &Path) -> Outcome {
    let mut out = Outcome::default();
    let logf = match File::create(log) {
        Ok(f) => Some(f),
        Err(e) => {
            out.failures
                .push(format!("cannot create the log file {}: {e}", log.display()));
            None
        }
    };
    let root = if !plan.threads && plan.world > 1 {
        match free_port() {
            Ok(p) => Some(format!("127.0.0.1:{p}")),
            Err(e) => {
                out.failures.push(format!("no free port: {e}"));
                return out;
            }
        }
    } else {
        None
    };
    let carrier = carrier_next_to(&plan.exe);
    let jobs = jobs(template, plan);
    let mut ps: Vec<Proc> = Vec::new();
    for job in &jobs {
        let name = format!(
            "worker of rank(s) {}",
            core_range(job.ranks[0], job.ranks.len() as u32)
        );
        let mut cmd = command(plan, job, root.as_deref(), carrier.as_deref());
        let err = logf.as_ref().and_then(|f| f.try_clone().ok());
        cmd.stderr(err.map_or(Stdio::null(), Stdio::from));
        if plan.debug {
            eprintln!("nccom-test: starting {name}: {cmd:?}");
        }
        match cmd.spawn() {
            Ok(mut child) => {
                let stdout = child.stdout.take().expect("stdout is piped");
                let l = logf.as_ref().and_then(|f| f.try_clone().ok());
                let reader = std::thread::spawn(move || read_lines(stdout, l));
                ps.push(Proc {
                    name,
                    stdin: child.stdin.take(),
                    child,
                    reader: Some(reader),
                    done: false,
                });
            }
            Err(e) => {
                out.failures.push(format!("cannot start the {name}: {e}"));
                break;
            }
        }
    }
    let incomplete = ps.len() < jobs.len();
    wait_all(&mut ps, plan.deadline, incomplete, &mut out);
    for p in &mut ps {
        if let Some(r) = p.reader.take() {
            out.lines.extend(r.join().unwrap_or_default());
        }
    }
    out
}

/// Wait until every worker has exited: close rank 0's stdin once every other one has, record
/// each failure, and kill what still runs after the deadline or [`GRACE`] after the first
/// failure (`incomplete`: not every worker could be started, which is one).
fn wait_all(ps: &mut [Proc], deadline: Duration, incomplete: bool, out: &mut Outcome) {
    let started = Instant::now();
    let mut failed_at = incomplete.then_some(started);
    loop {
        for p in ps.iter_mut().filter(|p| !p.done) {
            match p.child.try_wait() {
                Ok(Some(st)) => {
                    p.done = true;
                    if !st.success() {
                        out.failures
                            .push(format!("the {} {}", p.name, describe_exit(st)));
                        failed_at.get_or_insert_with(Instant::now);
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    p.done = true;
                    out.failures.push(format!("the {}: wait: {e}", p.name));
                }
            }
        }
        if ps.iter().skip(1).all(|p| p.done) {
            if let Some(p) = ps.first_mut() {
                drop(p.stdin.take());
            }
        }
        if ps.iter().all(|p| p.done) {
            return;
        }
        let late = started.elapsed() > deadline;
        let abandoned = failed_at.is_some_and(|t| t.elapsed() > GRACE);
        if late || abandoned {
            for p in ps.iter_mut().filter(|p| !p.done) {
                let _ = p.child.kill();
                let _ = p.child.wait();
                p.done = true;
                out.failures.push(if late {
                    format!("the {} was killed after {} s", p.name, deadline.as_secs())
                } else {
                    format!(
                        "the {} was killed {} s after another worker failed",
                        p.name,
                        GRACE.as_secs()
                    )
                });
            }
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[cfg(test)]
mod tests;

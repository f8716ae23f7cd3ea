//! Starting rank processes as a job launcher does, and watching them to the end: the tools'
//! side of the one-rank-per-process contract (docs/contract/abi.md §5.10–§5.11).
//!
//! `opennrt perf --procs` and `nccom-test` both re-execute their own binary as workers, one
//! process per rank (or per group of ranks), the way neuron-bench and the spectral-DNS driver
//! are started. This module is what they share, so the two tools cannot drift apart:
//!
//! * the launcher environment of a rank process ([`set_rank_env`]): `NEURON_RT_VISIBLE_CORES`
//!   (the process's logical cores, [`core_range`]), `NEURON_RT_ROOT_COMM_ID` (set only when the
//!   job spans processes: a loopback port that was free a moment ago, [`root_comm_id`]),
//!   `NEURON_RT_EXEC_TIMEOUT` = [`EXEC_TIMEOUT_S`] unless the caller set it, and
//!   `OPENNRT_NCFW_PATH` pointing at the `libncfw.so` cargo builds next to the binary
//!   ([`carrier_next_to`]): `nrt_init` dlopens the carrier (docs/contract/carrier.md §1.2),
//!   which `libnrt.so.1` finds through its `RUNPATH` but a tool binary does not. The variables
//!   are set on the child's `Command` only; the parent's own environment is never changed.
//! * [`run`]: spawn the workers, read each one's stdout as JSON answer lines (anything else is
//!   passed on: to a log file or to stderr), and wait. The first worker may hold the bootstrap
//!   root ([`Watch::hold_root`]): it then waits for end-of-file on its stdin before
//!   `nrt_close`, and that pipe is closed once every other worker has exited, so the root
//!   outlives everyone who needs it. What still runs after the deadline, or [`GRACE`] after the
//!   first failure (its peers normally fail by themselves as their collectives time out), is
//!   killed and reported; so is everything on SIGINT or SIGTERM once the tool called
//!   [`stop::stop_on_signals`].
//!
//! Exit statuses the workers of both tools share: 0 done and right, 1 wrong elements, 2 a bad
//! job, 3 a runtime error ([`describe_exit`]).

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;

use crate::runtime::config::env_lookup;

/// How long the other workers may run on after one failed.
pub const GRACE: Duration = Duration::from_secs(20);

/// The execution timeout each worker gets unless the caller set one (seconds).
pub const EXEC_TIMEOUT_S: &str = "60";

/// `lo-hi` (or `lo`): `n` logical cores from `lo`, as `NEURON_RT_VISIBLE_CORES` spells a range.
pub fn core_range(lo: u32, n: u32) -> String {
    if n <= 1 {
        lo.to_string()
    } else {
        format!("{lo}-{}", lo + n - 1)
    }
}

/// A TCP port on the loopback that was free a moment ago (bound to port 0 and closed).
pub fn free_port() -> std::io::Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

/// `NEURON_RT_ROOT_COMM_ID` for a job spread over processes: `127.0.0.1:<free port>`.
pub fn root_comm_id() -> std::io::Result<String> {
    Ok(format!("127.0.0.1:{}", free_port()?))
}

/// The carrier next to `exe` (`target/<profile>/libncfw.so`) for `OPENNRT_NCFW_PATH`. `None`
/// when the caller set the variable or no carrier is there (then `nrt_init` says what is
/// missing).
pub fn carrier_next_to(exe: &Path) -> Option<PathBuf> {
    if env_lookup("OPENNRT_NCFW_PATH").is_some() {
        return None;
    }
    let c = exe.parent()?.join("libncfw.so");
    c.is_file().then_some(c)
}

/// Set the launcher environment of one rank process on `cmd`: its cores, the root id (removed
/// when `None`, so a job of one process never inherits one), the execution timeout unless the
/// caller set it, and the carrier.
pub fn set_rank_env(cmd: &mut Command, cores: &str, root: Option<&str>, carrier: Option<&Path>) {
    cmd.env("NEURON_RT_VISIBLE_CORES", cores);
    match root {
        Some(r) => cmd.env("NEURON_RT_ROOT_COMM_ID", r),
        None => cmd.env_remove("NEURON_RT_ROOT_COMM_ID"),
    };
    if env_lookup("NEURON_RT_EXEC_TIMEOUT").is_none() {
        cmd.env("NEURON_RT_EXEC_TIMEOUT", EXEC_TIMEOUT_S);
    }
    if let Some(c) = carrier {
        cmd.env("OPENNRT_NCFW_PATH", c);
    }
}

/// The worker side of [`Watch::hold_root`]: the process holding the bootstrap root calls this
/// before `nrt_close` and returns once the parent closes its stdin (every other worker has
/// exited). A read error counts as the end.
pub fn wait_for_release() {
    let mut sink = Vec::new();
    let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut sink);
}

/// Why a worker ended as it did (the statuses of the module docs).
pub fn describe_exit(status: ExitStatus) -> String {
    match status.code() {
        Some(1) => "exited with status 1: wrong elements".into(),
        Some(2) => "exited with status 2: a bad job".into(),
        Some(3) => "exited with status 3: a runtime error (its stderr says which)".into(),
        Some(c) => format!("exited with status {c}"),
        None => format!("ended by a signal ({status})"),
    }
}

/// Where a worker's stdout lines that are not answers go.
#[derive(Debug)]
pub enum Strays {
    /// To this process's stderr, each line after `[<name>] `.
    Stderr,
    /// Appended to this file (a size's log).
    Log(File),
}

/// One worker to start: its command (arguments, environment and stderr set by the caller;
/// [`run`] sets stdin and stdout) and the name its failures are reported under.
#[derive(Debug)]
pub struct Worker {
    /// E.g. `the worker of rank(s) 0-2`; failures read `<name> exited with status 1: …`.
    pub name: String,
    /// What to run.
    pub command: Command,
    /// Where its stray stdout lines go.
    pub strays: Strays,
}

/// How [`run`] waits.
#[derive(Debug, Clone, Copy)]
pub struct Watch {
    /// Kill what still runs this long after the start.
    pub deadline: Duration,
    /// Kill what still runs this long after the first failure.
    pub grace: Duration,
    /// The first worker holds the bootstrap root: its stdin is a pipe, closed once every other
    /// worker has exited (the others get no stdin).
    pub hold_root: bool,
}

/// What the workers answered and what went wrong.
#[derive(Debug)]
pub struct Outcome<T> {
    /// Every answer line, in worker order.
    pub lines: Vec<T>,
    /// Every failure, readable, naming its worker.
    pub failures: Vec<String>,
}

impl<T> Outcome<T> {
    /// An outcome with no answers and one failure: the job could not even be started.
    pub fn failed(why: String) -> Self {
        Outcome {
            lines: Vec::new(),
            failures: vec![why],
        }
    }
}

impl<T> Default for Outcome<T> {
    fn default() -> Self {
        Outcome {
            lines: Vec::new(),
            failures: Vec::new(),
        }
    }
}

/// A started worker.
#[derive(Debug)]
struct Proc<T> {
    name: String,
    child: Child,
    stdin: Option<ChildStdin>,
    reader: Option<JoinHandle<Vec<T>>>,
    done: bool,
}

/// Read a worker's stdout: the lines that parse as `T` are its answers; the rest are strays.
fn read_lines<T: DeserializeOwned>(out: ChildStdout, name: String, mut strays: Strays) -> Vec<T> {
    let mut v = Vec::new();
    for line in BufReader::new(out).lines().map_while(Result::ok) {
        match serde_json::from_str::<T>(&line) {
            Ok(l) => v.push(l),
            Err(_) => match &mut strays {
                Strays::Stderr => eprintln!("[{name}] {line}"),
                Strays::Log(f) => {
                    let _ = writeln!(f, "{line}");
                }
            },
        }
    }
    v
}

/// Start every worker in order (stopping at the first that cannot start), wait for all of them
/// as [`Watch`] says, and collect their answers.
pub fn run<T>(workers: Vec<Worker>, watch: &Watch) -> Outcome<T>
where
    T: DeserializeOwned + Send + 'static,
{
    let mut out = Outcome::default();
    let wanted = workers.len();
    let mut ps: Vec<Proc<T>> = Vec::new();
    for (i, w) in workers.into_iter().enumerate() {
        let Worker {
            name,
            mut command,
            strays,
        } = w;
        let holds_root = watch.hold_root && i == 0;
        command
            .stdin(if holds_root {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped());
        match command.spawn() {
            Ok(mut child) => {
                let stdout = child.stdout.take().expect("stdout is piped");
                let reader_name = name.clone();
                let reader = std::thread::spawn(move || read_lines(stdout, reader_name, strays));
                ps.push(Proc {
                    name,
                    stdin: child.stdin.take(),
                    child,
                    reader: Some(reader),
                    done: false,
                });
            }
            Err(e) => {
                out.failures.push(format!("cannot start {name}: {e}"));
                break;
            }
        }
    }
    let incomplete = ps.len() < wanted;
    wait_all(&mut ps, watch, incomplete, &mut out.failures);
    for p in &mut ps {
        if let Some(r) = p.reader.take() {
            out.lines.extend(r.join().unwrap_or_default());
        }
    }
    out
}

/// Wait until every worker has exited: close the root's stdin once every other one has, record
/// each failure, and kill what still runs after the deadline or the grace after the first
/// failure (`incomplete`: not every worker could be started, which is one).
fn wait_all<T>(ps: &mut [Proc<T>], watch: &Watch, incomplete: bool, failures: &mut Vec<String>) {
    let started = Instant::now();
    let mut failed_at = incomplete.then_some(started);
    loop {
        for p in ps.iter_mut().filter(|p| !p.done) {
            match p.child.try_wait() {
                Ok(Some(st)) => {
                    p.done = true;
                    if !st.success() {
                        failures.push(format!("{} {}", p.name, describe_exit(st)));
                        failed_at.get_or_insert_with(Instant::now);
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    p.done = true;
                    failures.push(format!("{}: wait: {e}", p.name));
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
            return;
        }
        if let Some(sig) = stop::requested() {
            for p in ps.iter_mut().filter(|p| !p.done) {
                let _ = p.child.kill();
                let _ = p.child.wait();
                p.done = true;
                failures.push(format!(
                    "{} was killed: {} received",
                    p.name,
                    stop::name(sig)
                ));
            }
            return;
        }
        let late = started.elapsed() > watch.deadline;
        let abandoned = failed_at.is_some_and(|t| t.elapsed() > watch.grace);
        if late || abandoned {
            for p in ps.iter_mut().filter(|p| !p.done) {
                let _ = p.child.kill();
                let _ = p.child.wait();
                p.done = true;
                failures.push(if late {
                    format!(
                        "{} was killed after the deadline ({} s)",
                        p.name,
                        watch.deadline.as_secs()
                    )
                } else {
                    format!(
                        "{} was killed {} s after another worker failed",
                        p.name,
                        watch.grace.as_secs()
                    )
                });
            }
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

pub mod stop;

#[cfg(test)]
mod tests;

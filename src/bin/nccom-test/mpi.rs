//! Ranks on several hosts through Open MPI's `mpirun`, as the vendor's nccom-test starts
//! neuron-bench across hosts (`-s/--hosts`, `--hosts-file`, `-N`).
//!
//! Per size the parent writes, next to the size's NEFF, a hand-off file ([`Handoff`]: the job
//! template, ranks per host, the root id and the variables to pass on) and runs
//!
//! ```text
//! mpirun [--allow-run-as-root] -np R -H h1:P,h2:P,… --map-by slot --bind-to none
//!        [--output-filename D/size_<B>] [$OPENNRT_MPIRUN_ARGS] <this binary> __mpi_worker <hand-off>
//! ```
//!
//! with `P = R / N`. Each process mpirun starts is this binary's [`worker_main`]: it learns its
//! global rank `g` from `OMPI_COMM_WORLD_RANK`, takes the job of rank `g` from the hand-off
//! file and runs the ordinary worker ([`crate::worker`]) as its child with the launcher
//! environment of a rank process: `NEURON_RT_VISIBLE_CORES = g mod P` (its core on its host;
//! the worker's global id is `g`, from the job), `NEURON_RT_ROOT_COMM_ID = <first host>:<port>`
//! (or the parent's `NEURON_RT_ROOT_COMM_ID`, which overrides it as the vendor's tool honours
//! it) and the OpenNRT/Neuron variables of the parent's environment ([`forwarded_env`]), which
//! mpirun would not carry to another host. The child's answer lines go to
//! `<answers>/rank<g>.json` next to the NEFF (a rank 0 answer with many times is too long to
//! cross mpirun's output forwarding whole); when the child has exited the wrapper prints one
//! [`Closed`] line on stdout, which mpirun forwards to the parent.
//!
//! Rank 0's process holds the bootstrap root and waits for end-of-file on its stdin before
//! `nrt_close` (as with local workers): mpirun forwards its stdin to rank 0, and the parent
//! closes mpirun's stdin once every other rank's [`Closed`] line arrived (or one reported a
//! failure). When a process fails, mpirun ends the job itself; the parent kills mpirun after the
//! deadline or on SIGINT/SIGTERM (SIGTERM first, so mpirun takes the remote processes down).
//!
//! Paths: the NEFFs, hand-off and answer files live in `$TMPDIR/nccom_test_<pid>/` (else
//! `/tmp`), which must be one directory that every host sees at the same path (NFS), as the
//! vendor's tool needs for its NEFFs; this binary must be at the same path on every host too.
//! `mpirun` comes from `PATH` and must be Open MPI's (4.x options); `OMPI_MCA_plm_rsh_agent`
//! (mpirun reads it) picks the ssh stand-in.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use opennrt::launch::{self, describe_exit};
use opennrt::runtime::config::{env_lookup, VARIABLES};
use serde::{Deserialize, Serialize};

use crate::args::Opts;
use crate::job::{Job, RankLine};
use crate::launch::{Outcome, Plan};

/// The hidden first argument of the process mpirun starts on every host.
pub const MPI_WORKER_ARG: &str = "__mpi_worker";

/// Extra words for mpirun's command line (split at whitespace), before the program.
pub const EXTRA_ARGS_ENV: &str = "OPENNRT_MPIRUN_ARGS";

/// The variables every rank process gets from its wrapper, not from the parent.
const PER_RANK: [&str; 3] = [
    "NEURON_RT_VISIBLE_CORES",
    "NEURON_RT_NUM_CORES",
    "NEURON_RT_ROOT_COMM_ID",
];

/// Variables outside OpenNRT's table that a rank needs as the parent has them (libfabric's).
const ALSO_FORWARDED: [&str; 2] = ["FI_PROVIDER", "FI_LOG_LEVEL"];

/// How long mpirun may take to end its job after SIGTERM before it is killed.
const TERM_GRACE: Duration = Duration::from_secs(10);

/// How the ranks of a run are spread over hosts.
#[derive(Debug, Clone, PartialEq)]
pub struct Mpi {
    /// Open MPI's mpirun.
    pub mpirun: PathBuf,
    /// The hosts, in rank order.
    pub hosts: Vec<String>,
    /// Ranks on each host (`-r` / `-N`).
    pub per_node: u32,
    /// `--mpi-log-dir`: mpirun's `--output-filename <dir>/size_<bytes>` for each size.
    pub log_dir: Option<PathBuf>,
    /// `OPENNRT_MPIRUN_ARGS`.
    pub extra: Vec<String>,
    /// `NEURON_RT_ROOT_COMM_ID` of the parent's environment (else `<first host>:<port>`).
    pub root: Option<String>,
    /// Pass `--allow-run-as-root` (we run as root).
    pub as_root: bool,
    /// The variables passed on to every rank ([`forwarded_env`]).
    pub env: Vec<(String, String)>,
}

/// What the parent hands to the processes mpirun starts: one file per size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Handoff {
    /// The size's job; `ranks` and `wait_stdin` are each process's own.
    pub job: Job,
    /// Ranks on each host: rank `g` owns core `g % per_node` of its host.
    pub per_node: u32,
    /// `NEURON_RT_ROOT_COMM_ID` (`None` for a world of one rank).
    pub root: Option<String>,
    /// Variables to set on the worker (the parent's, [`forwarded_env`]).
    pub env: Vec<(String, String)>,
    /// Where each process writes its answer lines, `rank<g>.json`.
    pub answers: PathBuf,
}

/// The line a process mpirun started prints once its worker has exited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Closed {
    /// The global rank.
    pub closed: u32,
    /// The worker's exit status (128 + the signal when a signal ended it).
    pub status: i32,
}

/// `prog` in the directories of `path` (a `PATH` value): the first executable file.
pub fn find_program(prog: &str, path: Option<&str>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    path?
        .split(':')
        .filter(|d| !d.is_empty())
        .map(|d| Path::new(d).join(prog))
        .find(|p| {
            p.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// The variables of `get` that every rank gets as the parent has them: OpenNRT's and Neuron's
/// ([`VARIABLES`], without the per-rank ones) and libfabric's provider choice.
pub fn forwarded_env(get: impl Fn(&str) -> Option<String>) -> Vec<(String, String)> {
    VARIABLES
        .iter()
        .map(|v| v.name)
        .filter(|n| !PER_RANK.contains(n))
        .chain(ALSO_FORWARDED)
        .filter_map(|n| get(n).map(|v| (n.to_string(), v)))
        .collect()
}

/// The run's mpirun, hosts and variables, checked before the first size; `Err` is a refusal
/// (exit status 2). `None` when every rank runs here (no hosts given).
pub fn setup(o: &Opts) -> Result<Option<Mpi>, String> {
    if o.hosts.is_empty() {
        return Ok(None);
    }
    let install = "install Open MPI (Debian/Ubuntu: apt install openmpi-bin)";
    let mpirun = find_program("mpirun", env_lookup("PATH").as_deref()).ok_or_else(|| {
        format!("--hosts runs the ranks through Open MPI's mpirun, which is not on PATH: {install}")
    })?;
    let version = Command::new(&mpirun)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{}: {e}; {install}", mpirun.display()))?;
    let said = String::from_utf8_lossy(&version.stdout);
    if !said.contains("Open MPI") {
        return Err(format!(
            "{} is not Open MPI's mpirun (its --version says {:?}); nccom-test uses Open MPI's \
             options: {install}",
            mpirun.display(),
            said.lines().next().unwrap_or("")
        ));
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let as_root = unsafe { libc::geteuid() } == 0;
    Ok(Some(Mpi {
        mpirun,
        hosts: o.hosts.clone(),
        per_node: o.ranks / o.nnodes,
        log_dir: o.mpi_log_dir.clone(),
        extra: env_lookup(EXTRA_ARGS_ENV)
            .map(|v| v.split_whitespace().map(String::from).collect())
            .unwrap_or_default(),
        root: env_lookup("NEURON_RT_ROOT_COMM_ID").filter(|v| !v.trim().is_empty()),
        as_root,
        env: forwarded_env(env_lookup),
    }))
}

impl Mpi {
    /// mpirun's `-H` list: every host with its slots, `h1:P,h2:P`.
    pub fn host_list(&self) -> String {
        self.hosts
            .iter()
            .map(|h| format!("{h}:{}", self.per_node))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The root id of a size whose root listens on `port` (unless the environment named one).
    pub fn root_id(&self, port: u16) -> String {
        self.root
            .clone()
            .unwrap_or_else(|| format!("{}:{port}", self.hosts[0]))
    }

    /// The host of global rank `g`.
    pub fn host_of(&self, g: u32) -> &str {
        &self.hosts[(g / self.per_node) as usize]
    }

    /// mpirun's command line for `world` ranks running `exe`'s wrapper on `handoff`, with
    /// `--output-filename logs` when given (a size's directory under `--mpi-log-dir`).
    pub fn command(&self, exe: &Path, handoff: &Path, world: u32, logs: Option<&Path>) -> Command {
        let mut c = Command::new(&self.mpirun);
        if self.as_root {
            c.arg("--allow-run-as-root");
        }
        c.args(["-np", &world.to_string(), "-H", &self.host_list()]);
        c.args(["--map-by", "slot", "--bind-to", "none"]);
        if let Some(d) = logs {
            c.arg("--output-filename").arg(d);
        }
        c.args(&self.extra);
        c.arg(exe).arg(MPI_WORKER_ARG).arg(handoff);
        c
    }
}

/// The hand-off file and answer directory of a size, next to its NEFF.
fn paths(neff: &Path) -> (PathBuf, PathBuf) {
    (
        neff.with_extension("mpi.json"),
        neff.with_extension("answers"),
    )
}

/// SIGTERM `child` (mpirun then ends its processes on every host), and SIGKILL it if it is
/// still there after [`TERM_GRACE`].
fn terminate(child: &mut Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        // SAFETY: `pid` is our child, not yet reaped (so not reused); kill has no memory
        // effects.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let t = Instant::now();
        while t.elapsed() < TERM_GRACE {
            if matches!(child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Read mpirun's stdout: the [`Closed`] lines, and everything else into `log`. Drop `stdin`
/// (rank 0's, the root's release) once ranks 1.. have all closed or one failed.
fn read_mpirun(
    out: std::process::ChildStdout,
    mut stdin: Option<ChildStdin>,
    world: u32,
    mut log: Option<File>,
) -> Vec<Closed> {
    let mut closed = Vec::new();
    let mut others = BTreeSet::new();
    if world <= 1 {
        drop(stdin.take());
    }
    for line in BufReader::new(out).lines().map_while(Result::ok) {
        match serde_json::from_str::<Closed>(&line) {
            Ok(c) => {
                closed.push(c);
                if c.closed != 0 {
                    others.insert(c.closed);
                }
                if c.status != 0 || others.len() as u32 + 1 >= world {
                    drop(stdin.take());
                }
            }
            Err(_) => {
                if let Some(f) = &mut log {
                    let _ = writeln!(f, "{line}");
                }
            }
        }
    }
    closed
}

/// An exit status as [`describe_exit`] words it, from [`Closed::status`].
fn status_words(status: i32) -> String {
    let st = if status > 128 {
        ExitStatus::from_raw(status - 128)
    } else {
        ExitStatus::from_raw((status & 0xff) << 8)
    };
    describe_exit(st)
}

/// Run one size across the hosts: write the hand-off, run mpirun, collect every rank's
/// answers and failures. mpirun's stderr and stray stdout lines go to `log`.
pub fn run(template: &Job, plan: &Plan, m: &Mpi, log: &Path) -> Outcome {
    let logf = match File::create(log) {
        Ok(f) => f,
        Err(e) => {
            return Outcome::failed(format!("cannot create the log file {}: {e}", log.display()))
        }
    };
    let world = plan.world;
    let root = if world > 1 {
        match launch::free_port() {
            Ok(p) => Some(m.root_id(p)),
            Err(e) => return Outcome::failed(format!("no free port: {e}")),
        }
    } else {
        None
    };
    let (handoff_path, answers) = paths(&template.neff);
    let _ = std::fs::remove_dir_all(&answers);
    if let Err(e) = std::fs::create_dir_all(&answers) {
        return Outcome::failed(format!("{}: {e}", answers.display()));
    }
    let handoff = Handoff {
        job: template.clone(),
        per_node: m.per_node,
        root,
        env: m.env.clone(),
        answers: answers.clone(),
    };
    let text = serde_json::to_string(&handoff).expect("a hand-off serialises");
    if let Err(e) = std::fs::write(&handoff_path, text) {
        return Outcome::failed(format!("{}: {e}", handoff_path.display()));
    }
    // mpirun names its files <dir>/1/rank.<g>/… for every size: one directory per size.
    let logs = m
        .log_dir
        .as_ref()
        .map(|d| d.join(template.neff.file_stem().unwrap_or_else(|| "size".as_ref())));
    let mut cmd = m.command(&plan.exe, &handoff_path, world, logs.as_deref());
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(logf.try_clone().map_or(Stdio::null(), Into::into));
    if plan.debug {
        eprintln!("nccom-test: starting mpirun: {cmd:?}");
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return Outcome::failed(format!("cannot start {}: {e}", m.mpirun.display())),
    };
    let stdout = child.stdout.take().expect("stdout is piped");
    let stdin = child.stdin.take();
    let reader = std::thread::spawn(move || read_mpirun(stdout, stdin, world, Some(logf)));
    let mut out = Outcome::default();
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break Some(st),
            Ok(None) => {}
            Err(e) => {
                out.failures.push(format!("mpirun: wait: {e}"));
                terminate(&mut child);
                break None;
            }
        }
        if let Some(sig) = opennrt::launch::stop::requested() {
            terminate(&mut child);
            out.failures.push(format!(
                "mpirun and its ranks were stopped: {} received",
                opennrt::launch::stop::name(sig)
            ));
            break None;
        }
        if started.elapsed() > plan.deadline {
            terminate(&mut child);
            out.failures.push(format!(
                "mpirun was stopped after the deadline ({} s)",
                plan.deadline.as_secs()
            ));
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let closed = reader.join().unwrap_or_default();
    for c in closed.iter().filter(|c| c.status != 0) {
        out.failures.push(format!(
            "the worker of rank {} (on {}) {}",
            c.closed,
            m.host_of(c.closed.min(world - 1)),
            status_words(c.status)
        ));
    }
    if let Some(st) = status.filter(|s| !s.success()) {
        let gone: Vec<u32> = (0..world)
            .filter(|g| !closed.iter().any(|c| c.closed == *g))
            .collect();
        let how = match st.code() {
            Some(c) => format!("exited with status {c}"),
            None => format!("was ended by a signal ({st})"),
        };
        out.failures.push(format!(
            "mpirun {how}{}; its own words are in the log",
            if gone.is_empty() {
                String::new()
            } else {
                format!(" (no exit reported by rank(s) {gone:?}: not started, or killed)")
            }
        ));
    }
    for g in 0..world {
        let f = answers.join(format!("rank{g}.json"));
        if let Ok(text) = std::fs::read_to_string(&f) {
            out.lines.extend(
                text.lines()
                    .filter_map(|l| serde_json::from_str::<RankLine>(l).ok()),
            );
        }
    }
    if !plan.debug {
        let _ = std::fs::remove_dir_all(&answers);
        let _ = std::fs::remove_file(&handoff_path);
    }
    out
}

/// The job of global rank `g` from a hand-off, its core on its host, or why not. `local` is
/// `OMPI_COMM_WORLD_LOCAL_RANK` and `size` `OMPI_COMM_WORLD_SIZE` when mpirun set them.
pub fn rank_job(
    h: &Handoff,
    g: u32,
    local: Option<u32>,
    size: Option<u32>,
) -> Result<(Job, u32), String> {
    let world = h.job.world;
    if let Some(s) = size.filter(|&s| s != world) {
        return Err(format!(
            "mpirun started {s} processes (OMPI_COMM_WORLD_SIZE) for a job of {world} ranks"
        ));
    }
    if g >= world || h.per_node == 0 {
        return Err(format!("rank {g} is not in a job of {world} ranks"));
    }
    let core = g % h.per_node;
    if let Some(l) = local.filter(|&l| l != core) {
        return Err(format!(
            "rank {g} is local rank {l} on its host (OMPI_COMM_WORLD_LOCAL_RANK), but the job \
             puts {} ranks on each host in order, so it should be {core}: mpirun did not map \
             by slot (a --map-by or -H in {EXTRA_ARGS_ENV}?)",
            h.per_node
        ));
    }
    let job = Job {
        ranks: vec![g],
        threads: false,
        wait_stdin: g == 0 && world > 1,
        ..h.job.clone()
    };
    Ok((job, core))
}

/// A number variable mpirun sets (`None` when unset; `Err` when it is no number).
fn ompi_number(name: &str) -> Result<Option<u32>, String> {
    env_lookup(name)
        .map(|v| {
            v.trim()
                .parse()
                .map_err(|_| format!("{name}={v:?} is not a rank"))
        })
        .transpose()
}

/// `nccom-test __mpi_worker <hand-off>`: what mpirun runs on every host (see the module doc).
/// The exit status is the worker's (2 for a bad hand-off or environment).
pub fn worker_main(args: &[String]) -> i32 {
    match wrapper(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("nccom-test worker: {e}");
            2
        }
    }
}

/// The body of [`worker_main`]; `Err` is a bad hand-off or environment.
fn wrapper(args: &[String]) -> Result<i32, String> {
    let path = args.first().ok_or("no hand-off file given")?;
    let text = std::fs::read_to_string(path).map_err(|e| {
        format!("{path}: {e} (the directory of the NEFFs must be shared by every host)")
    })?;
    let h: Handoff =
        serde_json::from_str(&text).map_err(|e| format!("{path}: bad hand-off: {e}"))?;
    let g = ompi_number("OMPI_COMM_WORLD_RANK")?.ok_or(
        "OMPI_COMM_WORLD_RANK is unset: this process was not started by Open MPI's mpirun",
    )?;
    let (job, core) = rank_job(
        &h,
        g,
        ompi_number("OMPI_COMM_WORLD_LOCAL_RANK")?,
        ompi_number("OMPI_COMM_WORLD_SIZE")?,
    )?;
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
    let carrier = if h.env.iter().any(|(k, _)| k == "OPENNRT_NCFW_PATH") {
        None
    } else {
        launch::carrier_next_to(&exe)
    };
    let mut cmd = Command::new(&exe);
    cmd.args(job.to_args());
    launch::set_rank_env(
        &mut cmd,
        &core.to_string(),
        h.root.as_deref(),
        carrier.as_deref(),
    );
    cmd.envs(h.env.iter().map(|(k, v)| (k, v)));
    cmd.stdin(if job.wait_stdin {
        Stdio::inherit()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped());
    // SAFETY: the closure runs in the child between fork and exec and calls only prctl, which
    // is async-signal-safe; it allocates nothing.
    unsafe {
        cmd.pre_exec(|| {
            // The worker dies with this process (mpirun killing the job kills us).
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("rank {g}: cannot start the worker: {e}"))?;
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut answers = Vec::new();
    {
        let mut o = std::io::stdout().lock();
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if serde_json::from_str::<RankLine>(&line).is_ok() {
                answers.push(line);
            } else {
                let _ = writeln!(o, "{line}");
            }
        }
    }
    let st = child
        .wait()
        .map_err(|e| format!("rank {g}: wait for the worker: {e}"))?;
    let mut code = st.code().unwrap_or_else(|| 128 + st.signal().unwrap_or(0));
    let file = h.answers.join(format!("rank{g}.json"));
    let part = h.answers.join(format!(".rank{g}.json.part"));
    let body: String = answers.iter().map(|l| format!("{l}\n")).collect();
    if let Err(e) = std::fs::write(&part, body).and_then(|()| std::fs::rename(&part, &file)) {
        eprintln!(
            "nccom-test worker: rank {g}: {}: {e} (the directory of the NEFFs must be shared \
             by every host)",
            file.display()
        );
        if code == 0 {
            code = 3;
        }
    }
    let mut o = std::io::stdout().lock();
    let closed = Closed {
        closed: g,
        status: code,
    };
    let _ = writeln!(
        o,
        "{}",
        serde_json::to_string(&closed).expect("a line serialises")
    );
    let _ = o.flush();
    Ok(code)
}

#[cfg(test)]
mod tests;

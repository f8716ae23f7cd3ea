//! Starting a size's workers and collecting their answers, as the vendor's nccom-test runs
//! neuron-bench once per NEFF.
//!
//! Default: one process per rank, this same binary re-executed as a worker
//! ([`crate::worker`]), rank `r` owning core `r` (so its vnc 0 is core `r`), with the launcher
//! environment of [`opennrt::launch`] (the root id on the loopback when there is more than one
//! rank; rank 0's process holds the bootstrap root). `--threads`: one worker process owning
//! every core (`NEURON_RT_VISIBLE_CORES=0-(R-1)`, no root id) with a thread per rank. The
//! workers' stderr, and any stdout line that is not an answer, go to the size's log file.
//! With hosts (`--hosts`, `--hosts-file`) the ranks run through mpirun instead
//! ([`crate::mpi`]).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use opennrt::launch::{self, core_range, Strays, Watch, Worker, GRACE};

use crate::job::{Job, RankLine};

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
    /// Run the ranks on several hosts through mpirun ([`crate::mpi`]).
    pub mpi: Option<crate::mpi::Mpi>,
}

/// What a size's workers answered and what went wrong.
pub type Outcome = launch::Outcome<RankLine>;

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

/// The command of one worker process (stdin and stdout are [`launch::run`]'s).
fn command(plan: &Plan, job: &Job, root: Option<&str>, carrier: Option<&Path>) -> Command {
    let mut cmd = Command::new(&plan.exe);
    let cores = if plan.threads {
        core_range(0, plan.world)
    } else {
        core_range(job.ranks[0], 1)
    };
    cmd.args(job.to_args());
    launch::set_rank_env(&mut cmd, &cores, root, carrier);
    cmd
}

/// Run one size: start its workers, wait for them, collect their answers. The workers'
/// stderr and stray stdout lines go to `log` (the caller appends the failures it reports).
pub fn run(template: &Job, plan: &Plan, log: &Path) -> Outcome {
    if let Some(m) = &plan.mpi {
        return crate::mpi::run(template, plan, m, log);
    }
    let logf = match File::create(log) {
        Ok(f) => Some(f),
        Err(e) => {
            return Outcome::failed(format!("cannot create the log file {}: {e}", log.display()))
        }
    };
    let jobs = jobs(template, plan);
    let root = if jobs.len() > 1 {
        match launch::root_comm_id() {
            Ok(r) => Some(r),
            Err(e) => return Outcome::failed(format!("no free port: {e}")),
        }
    } else {
        None
    };
    let carrier = launch::carrier_next_to(&plan.exe);
    let copy = || logf.as_ref().and_then(|f| f.try_clone().ok());
    let workers = jobs
        .iter()
        .map(|job| {
            let name = format!(
                "the worker of rank(s) {}",
                core_range(job.ranks[0], job.ranks.len() as u32)
            );
            let mut command = command(plan, job, root.as_deref(), carrier.as_deref());
            command.stderr(copy().map_or(std::process::Stdio::null(), Into::into));
            if plan.debug {
                eprintln!("nccom-test: starting {name}: {command:?}");
            }
            Worker {
                name,
                command,
                strays: copy().map_or(Strays::Stderr, Strays::Log),
            }
        })
        .collect();
    let watch = Watch {
        deadline: plan.deadline,
        grace: GRACE,
        hold_root: jobs.first().is_some_and(|j| j.wait_stdin),
    };
    launch::run(workers, &watch)
}

#[cfg(test)]
mod tests;

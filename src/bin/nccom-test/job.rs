//! What the parent tells a worker process and what it answers: the worker's job travels as one
//! JSON argument after the hidden `__worker` word (`nccom-test __worker '{…}'`), and every rank
//! the worker runs answers with one JSON line on stdout ([`RankLine`]). Anything else the
//! worker writes goes to the size's log file.

use std::path::PathBuf;

use opennrt::isa::enums::Dtype;
use serde::{Deserialize, Serialize};

use crate::check::{Data, Layout, Mode};
use crate::dtypes;
use crate::metadata::Rows;
use crate::ops::Op;
use crate::widen;

/// The hidden first argument that makes this binary a worker.
pub const WORKER_ARG: &str = "__worker";

/// One worker process's job: one size, one NEFF, the ranks it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    /// The NEFF file every rank loads.
    pub neff: PathBuf,
    /// The operation's long name.
    pub op: String,
    /// The element type's name.
    pub dtype: String,
    /// World size (`ctx_device_count`).
    pub world: u32,
    /// Elements per block.
    pub count: u64,
    /// One rank's input in bytes of the job's type (`input0` holds it as fp32 when the
    /// collective is widened, [`Job::wire_bytes`]).
    pub in_bytes: u64,
    /// One rank's output in bytes of the job's type (as `in_bytes`).
    pub out_bytes: u64,
    /// Untimed executions.
    pub warmup: u32,
    /// Timed executions.
    pub iters: u32,
    /// Collectives per execution (a timed sample is one execution's time divided by this).
    pub ops_per_exec: u32,
    /// Samples one timed execution gives (`-n` of its `ops_per_exec` operations; the rest,
    /// `-w`, are its warm-up). 0 reads as `ops_per_exec`.
    #[serde(default)]
    pub samples_per_exec: u32,
    /// `--check` mode (`None`: zero-filled input, nothing checked).
    pub check: Option<String>,
    /// The check data's seed.
    pub seed: u64,
    /// The global ranks this process runs (one, or all of them with `--threads`).
    pub ranks: Vec<u32>,
    /// One thread per rank on vnc = its index in `ranks` (`--threads`); else one rank, vnc 0.
    pub threads: bool,
    /// The replica subgroups (global ranks), for the golden result.
    pub groups: Vec<Vec<u32>>,
    /// Permute pairs (global ranks).
    pub pairs: Vec<(u32, u32)>,
    /// Wait for end-of-file on stdin before `nrt_close` (the process of rank 0, which the
    /// others' bootstrap meets at).
    pub wait_stdin: bool,
    /// Where to dump input, output and golden tensors of a failed check.
    pub dump_dir: Option<PathBuf>,
    /// The variable-size ops' table: every position's `metadata0` rows (the same for every
    /// subgroup), which the worker writes and the golden result follows.
    #[serde(default)]
    pub table: Option<Vec<Rows>>,
}

/// One rank's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankLine {
    /// The global rank.
    pub rank: u32,
    /// Per-operation times in microseconds (rank 0 only).
    pub times_us: Option<Vec<f64>>,
    /// Wrong elements (`None`: not checked).
    pub wrong: Option<u64>,
    /// The first wrong element, readable.
    pub first: Option<String>,
    /// The output's digest (checked runs).
    pub digest: Option<String>,
    /// Where the tensors of a failed check were dumped.
    pub dumped: Option<String>,
}

impl Job {
    /// The command line after the binary.
    pub fn to_args(&self) -> Vec<String> {
        vec![
            WORKER_ARG.to_string(),
            serde_json::to_string(self).expect("a job serialises"),
        ]
    }

    /// The job of a worker's argument, or why not.
    pub fn from_arg(a: &str) -> Result<Job, String> {
        let j: Job = serde_json::from_str(a).map_err(|e| format!("bad job: {e}"))?;
        j.op_kind()?;
        j.element_type()?;
        j.mode()?;
        Ok(j)
    }

    /// The operation.
    pub fn op_kind(&self) -> Result<Op, String> {
        Op::from_nccom_word(&self.op).ok_or_else(|| format!("bad job: unknown op {:?}", self.op))
    }

    /// The element type.
    pub fn element_type(&self) -> Result<Dtype, String> {
        Dtype::from_nccom_name(&self.dtype)
            .ok_or_else(|| format!("bad job: unknown type {:?}", self.dtype))
    }

    /// The check mode.
    pub fn mode(&self) -> Result<Option<Mode>, String> {
        self.check
            .as_deref()
            .map(|m| Mode::parse(m).ok_or_else(|| format!("bad job: unknown check {m:?}")))
            .transpose()
    }

    /// The input data of every rank.
    pub fn data(&self) -> Data {
        let d = Data::new(
            self.element_type().unwrap_or(Dtype::Uint8),
            self.mode().ok().flatten(),
            self.seed,
        );
        if self.widened() {
            let g = self.groups.iter().map(Vec::len).max().unwrap_or(1) as u32;
            d.widened(g)
        } else {
            d
        }
    }

    /// The collective runs widened to fp32 ([`crate::widen`]): an integer reduction.
    pub fn widened(&self) -> bool {
        match (self.op_kind(), self.element_type()) {
            (Ok(op), Ok(d)) => widen::applies(op, d),
            _ => false,
        }
    }

    /// The bytes of a tensor that holds `bytes` of the job's type, in the type the collective
    /// runs in (fp32 when widened).
    pub fn wire_bytes(&self, bytes: u64) -> u64 {
        match self.element_type() {
            Ok(d) if self.widened() => bytes / dtypes::size(d) * widen::WIRE_SIZE,
            _ => bytes,
        }
    }

    /// The golden layout of global rank `rank`.
    pub fn layout(&self, rank: u32) -> Option<Layout> {
        let l = Layout::of(
            self.op_kind().ok()?,
            self.count,
            &self.groups,
            &self.pairs,
            rank,
        )?;
        Some(match &self.table {
            Some(t) => l.with_table(t),
            None => l,
        })
    }
}

#[cfg(test)]
mod tests;

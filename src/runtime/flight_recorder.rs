//! The flight recorder (docs/hangs.md §1): every rank keeps its last N user collectives, so
//! that a hang shows at once which rank never entered which collective.
//!
//! * Recording. [`crate::runtime::collective::run_user`], the one entry of every collective a
//!   user asked for, records the rank's arrival ([`enter`]) and its result ([`finish`]);
//!   `nrta_cc_schedule` records the collective as scheduled before it is queued
//!   ([`scheduled`]), so a rank whose collective waits behind others in its queue shows it.
//!   Each rank (global id) has a fixed ring of `OPENNRT_FLIGHT_RECORDER_ENTRIES` records
//!   (default 2,000; `0` turns the recorder off) behind a lock of its own: ranks never share a
//!   lock here, and a record is a few words plus two reference counts (no allocation once the
//!   ring is full, beyond an `Arc` for a group the ring has not seen last).
//! * Reporting. A user collective that fails with a timeout, a hang or a lost network peer
//!   ([`reports`]) makes the process report every rank's record once ([`on_failure`]): into
//!   the log (an analysis of the process's ranks and the tail of each ring), and, when
//!   `OPENNRT_FLIGHT_RECORDER_DIR` is set, into one file per rank there
//!   (`flight-<job>-rank<gid>.json`, [`file_name`]). `nrt_close` writes the files again
//!   ([`on_close`]), so a rank that never failed (the one that never came) has its file too.
//!   In a job spanning processes without the variable, the log says once where to set it.
//! * Reading. [`read_dir`] reads the files, and [`analyse()`] lines the ranks up by group and
//!   instance and names the first collective some rank never entered or never finished
//!   (`opennrt flight-recorder DIR`).
//!
//! The file is JSON Lines: a [`Header`] line, then one [`Record`] per line, oldest first.
//! Times are nanoseconds of a monotonic clock from the process's anchor, whose wall-clock time
//! is in the header (`anchor_unix_ns`), so that files of several processes and hosts line up.

pub mod analyse;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use once_cell::sync::{Lazy, OnceCell};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::error::{Error, ErrorKind, Result};
use crate::lower::request::CollectiveRequest;
use crate::runtime::collective::Lowered;
use crate::runtime::rendezvous::GroupKey;

pub use analyse::{analyse, Analysis, Finding, Standing};

/// The variable that sets how many collectives each rank keeps (`0`: off).
pub const ENTRIES_ENV: &str = "OPENNRT_FLIGHT_RECORDER_ENTRIES";
/// The variable that names the directory of the rank files.
pub const DIR_ENV: &str = "OPENNRT_FLIGHT_RECORDER_DIR";
/// Records per rank when [`ENTRIES_ENV`] is unset.
pub const DEFAULT_ENTRIES: usize = 2000;
/// The most records per rank [`ENTRIES_ENV`] accepts.
pub const MAX_ENTRIES: usize = 1_000_000;
/// The `format` of a file's header line.
pub const FORMAT: &str = "opennrt-flight-recorder";
/// The `version` of the file format.
pub const VERSION: u32 = 1;
/// Records of each rank the log shows on a failure (the files hold all).
const LOG_TAIL: usize = 8;

/// Where a collective is, as its rank saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Queued by the rank (`nrta_cc_schedule`), not yet entered.
    Scheduled,
    /// The rank entered it (arrived) and has no result yet.
    Running,
    /// It ran on the rank.
    Done,
    /// It failed on the rank ([`Record::error`] names the status).
    Failed,
}

impl State {
    /// The name the file and the reports use.
    pub fn name(self) -> &'static str {
        match self {
            State::Scheduled => "scheduled",
            State::Running => "running",
            State::Done => "done",
            State::Failed => "failed",
        }
    }
}

/// One collective as one rank recorded it (a line of a rank file).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The rank's own sequence number: its n-th recorded collective, from 0.
    pub seq: u64,
    /// The collective's instance in its group: the k-th collective of this kind on the group,
    /// the same on every rank of it.
    pub instance: u64,
    /// The kind of exchange: `cc` (`nrta_cc_schedule`) or `neff` (a NEFF's collectives); each
    /// kind numbers its instances on its own.
    pub kind: String,
    /// The operation (`CollectiveOp::name`: `all_reduce`).
    pub op: String,
    /// The element type (`Dtype::short_name`: `fp32`).
    pub dtype: String,
    /// Elements per rank block.
    pub count: u64,
    /// The group's global ids, in rank order.
    pub group: Vec<u32>,
    /// The rank's index in `group`.
    pub rank: u32,
    /// The global id of the rank (`group[rank]`).
    pub gid: u32,
    /// The algorithms of the lowered program, `+`-joined in entry order (`ring`, `hier+ring`).
    pub algorithm: String,
    /// Where it is.
    pub state: State,
    /// The status a failed collective returned (`NRT_TIMEOUT`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// When it was scheduled (ns from the anchor).
    pub scheduled_ns: u64,
    /// When the rank entered it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_ns: Option<u64>,
    /// When it ended on the rank (done or failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_ns: Option<u64>,
}

/// The first line of a rank file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    /// [`FORMAT`].
    pub format: String,
    /// [`VERSION`].
    pub version: u32,
    /// The job: its tag in a job of several processes, `local-<pid>` otherwise.
    pub job: String,
    /// The rank's global id.
    pub gid: u32,
    /// The writing process.
    pub pid: u32,
    /// The writing host's name.
    pub host: String,
    /// Records the ring keeps.
    pub capacity: u64,
    /// Collectives the rank recorded in all (more than the lines when the ring wrapped).
    pub recorded: u64,
    /// Wall-clock time of the monotonic clock's zero (ns since the Unix epoch).
    pub anchor_unix_ns: u64,
    /// When the file was written (ns from the anchor).
    pub written_ns: u64,
    /// Why it was written (`NRT_TIMEOUT: collective #3 ...`, `nrt_close`).
    pub reason: String,
}

/// A rank file as read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankFile {
    /// Where it was read from (empty for one made in memory).
    pub path: PathBuf,
    /// Its header.
    pub header: Header,
    /// Its records, oldest first.
    pub records: Vec<Record>,
}

impl RankFile {
    /// True when the ring wrapped: the rank recorded more collectives than it kept.
    pub fn wrapped(&self) -> bool {
        self.header.recorded > self.records.len() as u64
    }

    /// The wall-clock time of `ns` of this file's clock (ns since the Unix epoch).
    pub fn wall_ns(&self, ns: u64) -> u64 {
        self.header.anchor_unix_ns.saturating_add(ns)
    }

    /// The file's text: the header line, then one line per record.
    pub fn to_json_lines(&self) -> String {
        let mut s = serde_json::to_string(&self.header).expect("a header always serializes");
        s.push('\n');
        for r in &self.records {
            s.push_str(&serde_json::to_string(r).expect("a record always serializes"));
            s.push('\n');
        }
        s
    }

    /// Parse a file's text ([`RankFile::to_json_lines`]); `path` names it in errors.
    pub fn parse(path: &Path, text: &str) -> Result<RankFile> {
        let bad =
            |line: usize, why: String| Error::invalid(format!("{}:{line}: {why}", path.display()));
        let mut lines = text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty());
        let (_, first) = lines
            .next()
            .ok_or_else(|| bad(1, "empty: no header line".into()))?;
        let header: Header = serde_json::from_str(first)
            .map_err(|e| bad(1, format!("not a flight-recorder header: {e}")))?;
        if header.format != FORMAT || header.version != VERSION {
            return Err(bad(
                1,
                format!(
                    "format {:?} version {}, expected {FORMAT:?} version {VERSION}",
                    header.format, header.version
                ),
            ));
        }
        let mut records = Vec::new();
        for (i, l) in lines {
            let r: Record =
                serde_json::from_str(l).map_err(|e| bad(i + 1, format!("not a record: {e}")))?;
            if r.group.get(r.rank as usize) != Some(&r.gid) || r.gid != header.gid {
                return Err(bad(
                    i + 1,
                    format!(
                        "record #{} of global id {} (rank {} of group {:?}) in the file of \
                         global id {}",
                        r.seq, r.gid, r.rank, r.group, header.gid
                    ),
                ));
            }
            records.push(r);
        }
        Ok(RankFile {
            path: path.to_path_buf(),
            header,
            records,
        })
    }
}

/// The file name of global id `gid` of job `job`.
pub fn file_name(job: &str, gid: u32) -> String {
    format!("flight-{job}-rank{gid}.json")
}

/// Read every rank file (`flight-*.json`) of `dir`, in name order. No file is an error.
pub fn read_dir(dir: &Path) -> Result<Vec<RankFile>> {
    let rd = std::fs::read_dir(dir)
        .map_err(|e| Error::invalid(format!("cannot read the directory {}: {e}", dir.display())))?;
    let mut paths: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("flight-") && n.ends_with(".json"))
        })
        .collect();
    paths.sort();
    if paths.is_empty() {
        return Err(Error::invalid(format!(
            "{} holds no flight-recorder file (flight-<job>-rank<gid>.json)",
            dir.display()
        )));
    }
    paths
        .iter()
        .map(|p| {
            let text = std::fs::read_to_string(p)
                .map_err(|e| Error::invalid(format!("cannot read {}: {e}", p.display())))?;
            RankFile::parse(p, &text)
        })
        .collect()
}

/// The monotonic clock's zero and its wall-clock time.
static ANCHOR: Lazy<(Instant, u64)> = Lazy::new(|| {
    let wall = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    (Instant::now(), wall)
});

/// Nanoseconds from the anchor.
fn now_ns() -> u64 {
    ANCHOR.0.elapsed().as_nanos() as u64
}

/// A record in the ring: [`Record`] without a string of its own.
#[derive(Debug, Clone)]
struct Slot {
    seq: u64,
    instance: u64,
    kind: &'static str,
    op: &'static str,
    dtype: &'static str,
    count: u64,
    group: Arc<[u32]>,
    rank: u32,
    algorithm: Arc<str>,
    state: State,
    error: Option<&'static str>,
    scheduled_ns: u64,
    started_ns: Option<u64>,
    ended_ns: Option<u64>,
}

impl Slot {
    fn record(&self) -> Record {
        Record {
            seq: self.seq,
            instance: self.instance,
            kind: self.kind.to_string(),
            op: self.op.to_string(),
            dtype: self.dtype.to_string(),
            count: self.count,
            group: self.group.to_vec(),
            rank: self.rank,
            gid: self.group[self.rank as usize],
            algorithm: self.algorithm.to_string(),
            state: self.state,
            error: self.error.map(str::to_string),
            scheduled_ns: self.scheduled_ns,
            started_ns: self.started_ns,
            ended_ns: self.ended_ns,
        }
    }
}

/// One rank's ring: the last `cap` records, `slots[seq % cap]`.
#[derive(Debug, Default)]
struct RingInner {
    cap: usize,
    slots: Vec<Slot>,
    next_seq: u64,
    last_group: Option<Arc<[u32]>>,
    /// Records in state scheduled (none: entering searches nothing).
    scheduled: usize,
}

impl RingInner {
    /// The group as an `Arc`, shared with the previous record when it is the same group.
    fn group(&mut self, g: &[u32]) -> Arc<[u32]> {
        match &self.last_group {
            Some(a) if **a == *g => a.clone(),
            _ => {
                let a: Arc<[u32]> = g.into();
                self.last_group = Some(a.clone());
                a
            }
        }
    }

    fn push(&mut self, s: Slot) {
        self.scheduled += usize::from(s.state == State::Scheduled);
        if self.slots.len() < self.cap {
            if self.slots.capacity() == 0 {
                // The whole ring at once: no reallocation on the hot path later.
                self.slots.reserve_exact(self.cap);
            }
            self.slots.push(s);
        } else {
            let i = (s.seq % self.cap as u64) as usize;
            let old = std::mem::replace(&mut self.slots[i], s);
            self.scheduled -= usize::from(old.state == State::Scheduled && old.seq != WITHDRAWN);
        }
    }

    fn get_mut(&mut self, seq: u64) -> Option<&mut Slot> {
        if self.cap == 0 {
            return None;
        }
        let i = (seq % self.cap as u64) as usize;
        self.slots.get_mut(i).filter(|s| s.seq == seq)
    }

    /// The records, oldest first.
    fn records(&self) -> Vec<Record> {
        let mut v: Vec<&Slot> = self.slots.iter().filter(|s| s.seq != WITHDRAWN).collect();
        v.sort_by_key(|s| s.seq);
        v.into_iter().map(Slot::record).collect()
    }
}

/// One rank's ring, behind a lock only this rank's threads and a report take.
#[derive(Debug, Default)]
struct Ring(Mutex<RingInner>);

/// Global ids below this have a ring in [`RINGS`] (an index, no lock); others in [`MORE`].
const DIRECT: usize = 4096;

static RINGS: Lazy<Box<[OnceCell<Box<Ring>>]>> =
    Lazy::new(|| (0..DIRECT).map(|_| OnceCell::new()).collect());
static MORE: Lazy<Mutex<HashMap<u32, &'static Ring>>> = Lazy::new(Default::default);

/// Records per rank in force (`0`: off), set by `nrt_init` ([`configure`]).
static CAPACITY: AtomicUsize = AtomicUsize::new(DEFAULT_ENTRIES);
/// The rank files' directory, set by `nrt_init`.
static DIR: Mutex<Option<PathBuf>> = Mutex::new(None);
/// Whether this process reported since `nrt_init` (one report per failure episode).
static REPORTED: AtomicBool = AtomicBool::new(false);
/// Why it reported (the files `nrt_close` writes say it too).
static REPORT_REASON: Mutex<Option<String>> = Mutex::new(None);

fn ring(gid: u32) -> &'static Ring {
    match RINGS.get(gid as usize) {
        Some(c) => c.get_or_init(Default::default),
        None => MORE
            .lock()
            .entry(gid)
            .or_insert_with(|| Box::leak(Box::default())),
    }
}

/// Every ring in use, with its global id.
fn rings() -> Vec<(u32, &'static Ring)> {
    let mut v: Vec<(u32, &'static Ring)> = RINGS
        .iter()
        .enumerate()
        .filter_map(|(g, c)| c.get().map(|r| (g as u32, &**r)))
        .collect();
    v.extend(MORE.lock().iter().map(|(g, r)| (*g, *r)));
    v.retain(|(_, r)| r.0.lock().next_seq > 0);
    v
}

/// Apply `nrt_init`'s configuration: the ring size and the directory. Forgets every record.
pub fn configure(entries: usize, dir: Option<PathBuf>) {
    CAPACITY.store(entries, Ordering::Release);
    *DIR.lock() = dir;
    reset();
}

/// Forget every record (after `nrt_close` wrote them).
pub fn reset() {
    REPORTED.store(false, Ordering::Release);
    REPORT_REASON.lock().take();
    for (_, r) in rings() {
        *r.0.lock() = RingInner::default();
    }
}

/// A record being written: the rank and its sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token {
    gid: u32,
    seq: u64,
}

/// The algorithms of a lowered program, `+`-joined in the order of rank 0's entries.
pub fn algorithm_label(l: &Lowered) -> String {
    let mut names: Vec<&str> = Vec::new();
    if let Some(r) = l.program.ranks.first() {
        for e in &r.entries {
            let n = e.algorithm.name();
            if !names.contains(&n) {
                names.push(n);
            }
        }
    }
    if names.is_empty() {
        "none".into()
    } else {
        names.join("+")
    }
}

/// What a record says of its collective, besides its place and times.
#[derive(Debug, Clone)]
struct What {
    kind: &'static str,
    op: &'static str,
    dtype: &'static str,
    count: u64,
    rank: u32,
    algorithm: Arc<str>,
}

impl What {
    fn of(key: &GroupKey, req: &CollectiveRequest, lowered: &Lowered) -> What {
        What {
            kind: key.kind,
            op: req.op.name(),
            dtype: req.dtype.short_name(),
            count: req.count,
            rank: req.rank,
            algorithm: lowered.algorithm_label().clone(),
        }
    }
}

impl Ring {
    /// A new record of collective `instance` of `group` in `state`; its sequence number.
    fn open(&self, cap: usize, instance: u64, group: &[u32], w: What, state: State) -> u64 {
        let now = now_ns();
        let mut g = self.0.lock();
        if g.cap != cap {
            *g = RingInner {
                cap,
                ..RingInner::default()
            };
        }
        let seq = g.next_seq;
        g.next_seq += 1;
        let group = g.group(group);
        g.push(Slot {
            seq,
            instance,
            kind: w.kind,
            op: w.op,
            dtype: w.dtype,
            count: w.count,
            group,
            rank: w.rank,
            algorithm: w.algorithm,
            state,
            error: None,
            scheduled_ns: now,
            started_ns: (state == State::Running).then_some(now),
            ended_ns: None,
        });
        seq
    }

    /// The rank enters collective `instance` of `group`: its scheduled record (among the last
    /// 64) becomes running, or a new running record is opened.
    fn enter(&self, cap: usize, instance: u64, group: &[u32], w: impl FnOnce() -> What) -> u64 {
        {
            let mut g = self.0.lock();
            if g.scheduled > 0 {
                let next = g.next_seq;
                let from = next.saturating_sub(64.min(g.cap as u64));
                for seq in (from..next).rev() {
                    let Some(s) = g.get_mut(seq) else { continue };
                    if s.state == State::Scheduled && s.instance == instance && *s.group == *group {
                        s.state = State::Running;
                        s.started_ns = Some(now_ns());
                        g.scheduled -= 1;
                        return seq;
                    }
                }
            }
        }
        self.open(cap, instance, group, w(), State::Running)
    }

    /// The result of record `seq` (if the ring still holds it).
    fn finish(&self, seq: u64, result: &Result<()>) {
        let mut g = self.0.lock();
        if let Some(s) = g.get_mut(seq) {
            s.ended_ns = Some(now_ns());
            match result {
                Ok(()) => s.state = State::Done,
                Err(e) => {
                    s.state = State::Failed;
                    s.error = Some(e.status_name());
                }
            }
        }
    }

    /// Forget record `seq`.
    fn withdraw(&self, seq: u64) {
        let mut g = self.0.lock();
        if let Some(s) = g.get_mut(seq) {
            let was = s.state == State::Scheduled;
            s.seq = WITHDRAWN;
            g.scheduled -= usize::from(was);
        }
    }
}

/// The ring size in force and the rank's global id, when the recorder is on.
fn recording(key: &GroupKey, req: &CollectiveRequest) -> Option<(usize, u32)> {
    let cap = CAPACITY.load(Ordering::Relaxed);
    let gid = *key.group.get(req.rank as usize).filter(|_| cap > 0)?;
    Some((cap, gid))
}

/// Record that the rank queued collective `instance` of `key` (`nrta_cc_schedule`).
pub fn scheduled(
    key: &GroupKey,
    instance: u64,
    req: &CollectiveRequest,
    lowered: &Lowered,
) -> Option<Token> {
    let (cap, gid) = recording(key, req)?;
    let w = What::of(key, req, lowered);
    let seq = ring(gid).open(cap, instance, &key.group, w, State::Scheduled);
    Some(Token { gid, seq })
}

/// Record that the rank entered collective `instance` of `key`: its scheduled record becomes
/// running, or a new record is made.
pub fn enter(
    key: &GroupKey,
    instance: u64,
    req: &CollectiveRequest,
    lowered: &Lowered,
) -> Option<Token> {
    let (cap, gid) = recording(key, req)?;
    let seq = ring(gid).enter(cap, instance, &key.group, || What::of(key, req, lowered));
    Some(Token { gid, seq })
}

/// Record the rank's result of the collective of `t`; a failure that [`reports`] makes the
/// process report ([`on_failure`]).
pub fn finish(t: Option<Token>, result: &Result<()>) {
    if let Some(t) = t {
        ring(t.gid).finish(t.seq, result);
    }
    if let Err(e) = result {
        if reports(e.kind()) {
            on_failure(e);
        }
    }
}

/// Forget the record of `t`: its collective was never queued (a refused submit), and its
/// instance goes to the rank's next collective.
pub fn withdraw(t: Option<Token>) {
    if let Some(t) = t {
        ring(t.gid).withdraw(t.seq);
    }
}

/// The `seq` of a withdrawn slot (never a record's).
const WITHDRAWN: u64 = u64::MAX;

/// The failures that make a report: a timeout, a hang, a lost peer on another host.
pub fn reports(kind: ErrorKind) -> bool {
    matches!(
        kind,
        ErrorKind::Timeout | ErrorKind::CollectivesHang | ErrorKind::NetworkProxy
    )
}

/// This process's job, as the file names spell it.
fn job() -> String {
    crate::runtime::multi_process::bootstrap::job_tag()
        .unwrap_or_else(|| format!("local-{}", std::process::id()))
}

fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: `buf` is valid for `buf.len()` bytes of writing; gethostname NUL-terminates
    // within them or fails.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown".into();
    }
    let n = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// Every rank of this process as a rank file (in memory), written now for `reason`.
pub fn snapshot(reason: &str) -> Vec<RankFile> {
    let (job, host, pid) = (job(), host_name(), std::process::id());
    let written_ns = now_ns();
    rings()
        .into_iter()
        .map(|(gid, r)| {
            let g = r.0.lock();
            RankFile {
                path: PathBuf::new(),
                header: Header {
                    format: FORMAT.into(),
                    version: VERSION,
                    job: job.clone(),
                    gid,
                    pid,
                    host: host.clone(),
                    capacity: g.cap as u64,
                    recorded: g.next_seq,
                    anchor_unix_ns: ANCHOR.1,
                    written_ns,
                    reason: reason.to_string(),
                },
                records: g.records(),
            }
        })
        .collect()
}

/// Write `files` into `dir` (each through a temporary name, then renamed); the paths written.
pub fn write_files(dir: &Path, files: &[RankFile]) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::failure(format!("{DIR_ENV}: cannot create {}: {e}", dir.display())))?;
    let mut out = Vec::new();
    for f in files {
        let path = dir.join(file_name(&f.header.job, f.header.gid));
        let tmp = dir.join(format!(".{}.tmp", file_name(&f.header.job, f.header.gid)));
        std::fs::write(&tmp, f.to_json_lines())
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|e| {
                Error::failure(format!("{DIR_ENV}: cannot write {}: {e}", path.display()))
            })?;
        out.push(path);
    }
    Ok(out)
}

/// Write this process's rank files for `reason` if the directory is set; log the outcome.
fn write_if_set(reason: &str, files: &[RankFile]) {
    let Some(dir) = DIR.lock().clone() else {
        if crate::runtime::multi_process::bootstrap::job_tag().is_some() {
            crate::runtime::log::write_once(
                crate::runtime::log::Level::Warning,
                "flight_recorder_dir_unset",
                "flight_recorder",
                format_args!(
                    "the flight record of this process's ranks is only in this log: set \
                     {DIR_ENV}=<dir> in every process of the job to write one file per rank \
                     there, then read them all with `opennrt flight-recorder <dir>`"
                ),
            );
        }
        return;
    };
    match write_files(&dir, files) {
        Ok(paths) => crate::log_info!(
            "flight_recorder",
            "{reason}: wrote {} rank file(s) into {} (read them with `opennrt flight-recorder {}`)",
            paths.len(),
            dir.display(),
            dir.display()
        ),
        Err(e) => crate::log_error!("flight_recorder", "{e}"),
    }
}

/// A user collective failed with `e` ([`reports`]): the first time since `nrt_init`, log
/// every rank's record of this process (an analysis and each ring's tail) and write the rank
/// files.
pub fn on_failure(e: &Error) {
    if CAPACITY.load(Ordering::Relaxed) == 0 || REPORTED.swap(true, Ordering::AcqRel) {
        return;
    }
    let reason = format!("{}: {}", e.status_name(), first_line(e.message()));
    *REPORT_REASON.lock() = Some(reason.clone());
    let files = snapshot(&reason);
    crate::log_error!("flight_recorder", "{}", log_report(&files));
    write_if_set(&reason, &files);
}

/// `nrt_close`: write the rank files (if the directory is set and anything was recorded),
/// then forget the records.
pub fn on_close() {
    if CAPACITY.load(Ordering::Relaxed) != 0 {
        let reason = match REPORT_REASON.lock().clone() {
            Some(r) => format!("nrt_close after {r}"),
            None => "nrt_close".to_string(),
        };
        let files = snapshot(&reason);
        if !files.is_empty() {
            write_if_set(&reason, &files);
        }
    }
    reset();
}

fn first_line(s: &str) -> &str {
    let l = s.lines().next().unwrap_or("");
    match l.char_indices().nth(300) {
        Some((i, _)) => &l[..i],
        None => l,
    }
}

/// The log's report: the analysis of this process's ranks, then the last records of each.
pub fn log_report(files: &[RankFile]) -> String {
    let mut s = format!(
        "flight recorder: the last collectives of the {} rank(s) of this process",
        files.len()
    );
    // In a job of several processes the other ranks' records are in their own processes: only
    // what this process's ranks show, without a verdict.
    let lines = match crate::runtime::multi_process::bootstrap::job_tag() {
        None => analyse(files).lines(),
        Some(_) => {
            let a = analyse::analyse_partial(files);
            let mut l: Vec<String> = a.findings.iter().take(1).map(Finding::line).collect();
            l.push(format!(
                "the other ranks of the job are in their own processes' logs and files \
                 ({DIR_ENV}); `opennrt flight-recorder <dir>` lines them all up"
            ));
            l
        }
    };
    for l in lines {
        s.push_str("\n  ");
        s.push_str(&l);
    }
    for f in files {
        let skip = f.records.len().saturating_sub(LOG_TAIL);
        s.push_str(&format!(
            "\n  rank {} (last {} of {} recorded):",
            f.header.gid,
            f.records.len() - skip,
            f.header.recorded
        ));
        for r in &f.records[skip..] {
            s.push_str("\n    ");
            s.push_str(&analyse::describe_record(f, r));
        }
    }
    s
}

#[cfg(test)]
mod tests;

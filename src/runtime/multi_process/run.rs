//! Device collectives whose ranks run in several processes (docs/design.md §2.7):
//! every rank runs its own TOP_SPs in its own executor, on HBM and semaphores in shared memory.
//!
//! One collective, as rank `r` runs it ([`run`], or [`begin`] then [`Pending::finish`]):
//!
//! 1. **Load.** Take a device segment of the rank's group from the process's pool (or create
//!    `/opennrt-<job tag>-<pid>-d<gid>-<n>`, [`super::segment::Layout`]) and fill it as
//!    `machine::load_from` fills a machine: the constant page, zeroed data buffers with the
//!    rank's input, the SPAD images, the first lap of every ring, zeroed EVT_SEM blocks.
//! 2. **Go.** Meet the other ranks at the job's root (`runtime::multi_process::bootstrap`; in-process when
//!    this process is the root or alone) with the request, a digest of the emitted program and
//!    the segment's name. The last arrival checks that every rank prepared the same collective —
//!    op, dtype, count, reduce op, group, in-place, tensor lists, then the program itself — and
//!    hands every rank all segment names; a mismatch fails every rank, naming both ranks and
//!    the field. From a group's second collective on, the ranks meet on the group's go board
//!    in shared memory instead (`runtime::multi_process::go_board`: a slot per rank with its segment and a
//!    signature of what it prepared; any difference goes to the root for the same verdict),
//!    and a repeat of the same collective on doorbells ("Repeats", below).
//! 3. **Run.** Map the peers' segments (cached per process), build a machine holding every
//!    rank's regions and semaphore blocks, but only this rank's TOP_SPs, and run it. Its DMA
//!    engines write straight into the peers' HBM and semaphores; a write into a peer's block
//!    wakes the peer's executor through the run's futex (`segment`). Waits sleep on that
//!    futex, never spin. The rank's result is in its output tensor already when that tensor is
//!    its output buffer ("Outputs in place"), else it is copied out of its own segment.
//! 4. **Done.** Wait — in shared memory, on the rank's futex word — until every other rank has
//!    finished (done or failed), so that no segment is reused while a peer may still write into
//!    it; then every peer has mapped the segment and its name is unlinked — nothing of it stays
//!    in `/dev/shm`, and the memory goes with the last mapping.
//!
//! **Repeats: doorbells.** When a rank's last successful run of the group ran the same
//! collective (the same go signature, `go_board::signature`) on the segment its pool hands it
//! now (the pool hands back the segment that ran the same program), the ranks meet without
//! the root or the board (`Repeat`): a rank arms its segment for the run
//! (`segment::Header::arm`, after loading), rings the doorbells of the group's ranks on its
//! host (bumps their wake words), waits only until each of them has armed its own with the
//! same signature, and runs. On one host the go board stays the way back: a rank whose pool
//! handed it another segment, or that prepared another collective, arrives on the board
//! *before* it arms, so a repeating peer that sees it armed sees it on the board too, and a
//! peer that sees another signature or a board arrival meets on the board as well — whose
//! verdict (go, or the root's field-by-field error) is the same for every rank.
//!
//! Across hosts a board is impossible (it is rank 0's shared memory), and a meeting at the
//! root costs a network round trip, so there the doorbell meeting is the only fast one: a
//! rank on another host may start earlier; its proxy's messages carry the run and the
//! signature, and this process's proxy holds them until this segment is armed for that run,
//! and refuses a signature that differs (`proxy`, "Runs"). Nor does a rank wait for the ranks
//! on other hosts to finish (`SegPeers::wait_finished`). A run that fails goes back to the
//! root.
//!
//! **Outputs in place.** In a job, device tensors live in named shared memory, and a rank whose
//! output is one publishes it with its segment; on one host every rank's machine maps that
//! rank's output buffer from the tensor, so the result is written in place and never copied
//! (`outputs`). A different output tensor is a different meeting: the repeat of a rank whose
//! output changed goes to the board, and a kept machine fits only the same outputs.
//!
//! **Two halves, for the caller's thread.** [`begin`] loads, arms and publishes the arrival
//! (doorbells, board) without waiting for anyone; [`Pending::met`] says whether every rank
//! has arrived, so that [`Pending::finish`] — meet, run, wait for the peers to finish — cannot
//! wait for a rank that has not scheduled the collective yet. `nrta_cc_schedule` runs the
//! first half on the caller's thread and the second there too when the meeting is complete
//! within a short wait, else on the XU's worker (`runtime::collective::api`).
//!
//! **The job's topology.** Without `OPENNRT_TOPOLOGY`, a collective is prepared for the
//! default shape (one node), since preparing must not wait for the other processes. The first
//! go meeting of a collective of the whole world answers with every rank's host key; when
//! they span hosts, `host::topology_for_world` names the shape whose nodes are the hosts, and
//! if it lowers the collective to another program (`for_job`) every rank — each deciding
//! from the same answer — drops its segment, lowers again and meets again at the root
//! (`JOB_ROUND`). The new program is kept by the old one's go signature, so later runs use
//! it from the start.
//!
//! **Faults.** A peer that fails publishes it in its header; a dead process is reported by the
//! bootstrap ([`crate::runtime::multi_process::bootstrap::job_error`]); either makes every waiting executor
//! fail at once with `NRT_EXEC_HW_ERR_COLLECTIVES` naming the rank. A run in which every rank
//! is blocked or done is a job-wide hang, reported by each rank with its stuck TOP_SPs; a run
//! that outlives `NEURON_RT_EXEC_TIMEOUT` fails with the state of every rank.
//!
//! Choice: which path a collective takes is decided per process, so that every rank of every
//! group decides the same — in a job bootstrapped through `NEURON_RT_ROOT_COMM_ID` every
//! collective runs here (even a group whose ranks all live in one of its processes), otherwise
//! all ranks run in one machine (`runtime::collective::meet_here`). `OPENNRT_SHARED_DEVICE=1` sends
//! every collective of a multi-rank group here, even without a job (tests use it). Peers' mappings are cached until `nrt_close`; a segment replaced
//! by a larger one stays mapped in the peers until then.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use once_cell::sync::Lazy;
use parking_lot::Mutex;

use super::go_board;
use super::segment::{header, rank_image, Layout, PeerSeg, RankState, SegPeers, QUEUE_WORDS_AT};
use super::shadow::RemoteSem;
use super::wire::{SegmentAt, TensorAt};
use super::{host, proxy};
use crate::device::executor::Machine;
use crate::device::peers::WriteLog;
use crate::device::sema::{BlockId, SemBlock, SemNotify};
use crate::error::{Error, ErrorKind, Result};
use crate::isa::memmap::CONST_WORDS;
use crate::lower::program::Buf;
use crate::lower::request::CollectiveRequest;
use crate::runtime::collective::{check_requests, Arrival, Lowered};
use crate::runtime::fault_injection;
use crate::runtime::machine::{byte_bases, new_machine, topsp_agent, TopspAgent};
use crate::runtime::multi_process::shm::{self, Segment};
use crate::runtime::rendezvous::{GroupKey, Rendezvous};

/// The variable that sends every multi-rank collective through shared segments.
pub const SHARED_DEVICE_ENV: &str = "OPENNRT_SHARED_DEVICE";

/// What a rank brings to the go meeting.
#[derive(Debug, Clone)]
pub struct GoArrival {
    /// Its request.
    pub req: CollectiveRequest,
    /// Digest of the emitted program it will run.
    pub digest: u64,
    /// Its device segment.
    pub seg: SegmentAt,
}

/// Every rank's device segment, in rank order.
pub type Segments = Arc<Vec<SegmentAt>>;

static GO: Lazy<Rendezvous<GoArrival, Segments>> = Lazy::new(Rendezvous::new);

/// A rank's pooled segment: whether its name is already unlinked.
#[derive(Debug)]
struct Pooled {
    seg: Arc<Segment>,
    unlinked: bool,
    /// The collective whose program the segment holds (its last successful run): a repeat
    /// of it re-arms instead of reloading ([`fill`]).
    loaded: Option<Arc<Lowered>>,
}

/// Free segments per (group, global id), and peers' segments mapped by name.
#[derive(Debug, Default)]
struct Cache {
    free: HashMap<(GroupKey, u32), Vec<Pooled>>,
    peers: HashMap<String, Arc<Segment>>,
    next: u64,
    /// The machine of each (group, global id)'s last successful run, kept to run the same
    /// collective on the same segments again without building it ([`Built`]).
    built: HashMap<(GroupKey, u32), Built>,
    /// Each (group, global id)'s last successful run that spanned hosts ([`Repeat`]).
    repeats: HashMap<(GroupKey, u32), Repeat>,
}

/// A run that spanned hosts and succeeded: a repeat of it meets without the root (module doc,
/// "Repeats across hosts").
#[derive(Debug)]
struct Repeat {
    /// Its go signature.
    sig: u64,
    /// This rank's segment.
    own: String,
    /// Every rank's segment, as the go meeting answered.
    names: Segments,
}

/// A rank's machine between runs: its memory maps every rank's segment (regions and EVT_SEM
/// blocks) and its TOP_SPs as loaded. Valid for the same collective on the very same segments
/// (the pool and the peer mappings hand them out again); the segments' contents are re-armed
/// by [`fill`], not here — this machine never clears a block, since the peers' blocks are
/// theirs to re-arm.
#[derive(Debug)]
struct Built {
    lowered: Arc<Lowered>,
    segs: Vec<PeerSeg>,
    /// Per rank, the output tensor its output buffer maps (`outputs::bound_outputs`).
    outputs: Vec<Option<TensorAt>>,
    mem: crate::device::memory::Memory,
    agents: Vec<TopspAgent>,
    arch: crate::ncfw::Arch,
    timeout: Option<Duration>,
}

impl Built {
    fn fits(&self, l: &Arc<Lowered>, segs: &[PeerSeg], outputs: &[Option<TensorAt>]) -> bool {
        Arc::ptr_eq(&self.lowered, l)
            && self.segs.len() == segs.len()
            && self.segs.iter().zip(segs).all(|(a, b)| a.same(b))
            && self.outputs == outputs
    }

    /// A machine from it: the kept memory, the TOP_SPs as loaded with TRIGGER raised.
    fn machine(&self, mem: crate::device::memory::Memory, peers: Arc<SegPeers>) -> Result<Machine> {
        let mut m = Machine::new(0);
        m.mem = mem;
        m.arch = self.arch;
        m.timeout = self.timeout;
        for a in &self.agents {
            a.clone().attach(&mut m)?;
        }
        m.peers = Some(peers);
        Ok(m)
    }
}

static CACHE: Lazy<Mutex<Cache>> = Lazy::new(|| Mutex::new(Cache::default()));

/// The go meeting held in this process (the root, or a process alone).
pub fn go_meetings() -> &'static Rendezvous<GoArrival, Segments> {
    &GO
}

/// Whether a collective of `group` runs here: in a job bootstrapped through
/// `NEURON_RT_ROOT_COMM_ID` (every process of it decides the same, whatever the group), or
/// when [`SHARED_DEVICE_ENV`] asks for it. A single rank runs alone in either case.
pub fn wanted(group: &[u32]) -> bool {
    if group.len() < 2 {
        return false;
    }
    let forced = crate::runtime::process::config().is_ok_and(|c| c.shared_device);
    forced || crate::runtime::multi_process::bootstrap::job_tag().is_some()
}

/// What every multi-process run of one lowered collective needs (cached in
/// [`Lowered::shared`]).
#[derive(Debug)]
pub struct SharedPlan {
    /// [`digest`] of the emitted program.
    pub digest: u64,
    /// Every rank's device-segment layout.
    pub layouts: Vec<Layout>,
}

fn plan(l: &Lowered) -> Result<&SharedPlan> {
    l.shared.get_or_try_init(|| {
        Ok(SharedPlan {
            digest: digest(l),
            layouts: (0..l.map.ranks())
                .map(|q| Layout::of(l, q))
                .collect::<Result<Vec<_>>>()?,
        })
    })
}

/// A digest of everything the device runs (the cross-process program check).
pub fn digest(l: &Lowered) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for r in &l.emitted.ranks {
        r.rank.hash(&mut h);
        for t in &r.topsps {
            (t.topsp, &t.ctrl_spad, &t.slot_spad, &t.m2s, &t.s2m).hash(&mut h);
            (t.m2s_ring_len, t.s2m_ring_len).hash(&mut h);
        }
    }
    h.finish()
}

/// The go meeting's check (module doc, step 2), run by the last arrival.
pub fn go_check(key: &GroupKey, instance: u64, all: &[GoArrival]) -> Result<Segments> {
    let reqs: Vec<&CollectiveRequest> = all.iter().map(|a| &a.req).collect();
    check_requests(key, instance, &reqs)?;
    if let Some(q) = all.iter().position(|a| a.digest != all[0].digest) {
        return Err(Error::invalid(format!(
            "collective #{instance} of {key}: ranks disagree on the program: rank 0 (global id \
             {}) lowered digest {:#018x}, rank {q} (global id {}) {:#018x} (same request, other \
             lowering settings — e.g. an OPENNRT_/NCCL_ algorithm variable set in one process only)",
            key.group[0], all[0].digest, key.group[q], all[q].digest
        ))
        .with_rank(q as u32)
        .with_step(instance)
        .with_field("program")
        .with_values(
            format!("{:#018x}", all[0].digest),
            format!("{:#018x}", all[q].digest),
        ));
    }
    Ok(Arc::new(all.iter().map(|a| a.seg.clone()).collect()))
}

/// A segment of at least `len` bytes for rank `gid` of `key`: the pooled one that ran `l`
/// last (a repeat re-arms it and meets on doorbells), else the largest pooled one that fits,
/// else a new one.
fn take_segment(key: &GroupKey, gid: u32, len: usize, l: &Arc<Lowered>) -> Result<Pooled> {
    let mut c = CACHE.lock();
    let free = c.free.entry((key.clone(), gid)).or_default();
    let same = |p: &Pooled| p.loaded.as_ref().is_some_and(|x| Arc::ptr_eq(x, l));
    let fits = free
        .iter()
        .position(same)
        .or_else(|| free.iter().position(|p| p.seg.len() >= len));
    if let Some(i) = fits {
        return Ok(free.swap_remove(i));
    }
    c.next += 1;
    let job = crate::runtime::multi_process::bootstrap::job_tag();
    let job = job.as_deref().unwrap_or(shm::NO_JOB);
    let name = format!("{}d{gid}-{}", shm::prefix(job, std::process::id()), c.next);
    drop(c);
    Ok(Pooled {
        seg: Arc::new(Segment::create(&name, len)?),
        unlinked: false,
        loaded: None,
    })
}

/// Return a segment to the pool after a done meeting: every peer has mapped it, so its name
/// goes now — a pooled segment is reused only by the group that mapped it.
fn give_segment(key: &GroupKey, gid: u32, mut p: Pooled) {
    if !p.unlinked {
        p.seg.unlink();
        p.unlinked = true;
    }
    let mut c = CACHE.lock();
    let free = c.free.entry((key.clone(), gid)).or_default();
    // Keep this one (the next repeat takes it back) and the largest other.
    free.sort_by_key(|p| std::cmp::Reverse(p.seg.len()));
    free.truncate(1);
    free.push(p);
    free.sort_by_key(|p| std::cmp::Reverse(p.seg.len()));
}

fn peer_segment(name: &str, len: u64) -> Result<Arc<Segment>> {
    if let Some(s) = CACHE.lock().peers.get(name) {
        return Ok(s.clone());
    }
    let s = Arc::new(Segment::open(name, len as usize)?);
    CACHE.lock().peers.insert(name.to_string(), s.clone());
    Ok(s)
}

/// The instance bit of a go meeting's second round, in which every rank of a group that spans
/// hosts hands over its network address (module doc, "Several hosts").
const NET_ROUND: u64 = 1 << 62;

/// Whether the ranks of a go answer live on more than one host.
fn spans_hosts(names: &[SegmentAt]) -> bool {
    names.iter().any(|a| a.host != host::key())
}

/// A group whose go answer spans hosts: start this process's network proxy (its segment is a
/// target from now on), and when some rank's process had no network address in the answer,
/// meet again with every address — every rank decides this from the same answer, so all of
/// them take the second round or none.
fn reach_network(
    key: &GroupKey,
    instance: u64,
    r: u32,
    mut go: GoArrival,
    names: Segments,
    own: &Arc<Segment>,
) -> Result<Segments> {
    let lost_after = crate::runtime::process::config()?.net_peer_timeout;
    let p = proxy::start(
        crate::runtime::multi_process::bootstrap::network_address()?,
        lost_after,
    )?;
    p.arm(own);
    if names.iter().all(|a| !a.net.is_empty()) {
        return Ok(names);
    }
    go.seg.net = proxy::address();
    crate::runtime::multi_process::bootstrap::meet_go(key, instance | NET_ROUND, r, go).map_err(
        |e| {
            e.context(format!(
                "collective #{instance} of {key}: exchanging network addresses"
            ))
        },
    )
}

/// The segments of a repeat: `Some` when this rank's last successful run of the group ran
/// the same collective (go signature `sig`) and used the segment it holds now (module doc,
/// "Repeats"). Every rank of a group that runs the same collectives in the same order decides
/// the same: each one's pool hands back the segment that ran the same program last
/// ([`take_segment`]).
fn repeat_of(
    key: &GroupKey,
    r: u32,
    sig: u64,
    own: &Segment,
    output: Option<&TensorAt>,
) -> Option<Segments> {
    let c = CACHE.lock();
    let last = c.repeats.get(&(key.clone(), key.group[r as usize]))?;
    // On one host the peers map this rank's output: another tensor is another meeting.
    let same_output = spans_hosts(&last.names)
        || last.names.get(r as usize).map(|n| n.output.as_ref()) == Some(output);
    (last.sig == sig && last.own == own.name() && same_output).then(|| last.names.clone())
}

/// Keep (or, after a run that failed, forget) what a repeat of (`key`, `gid`)'s run needs.
fn remember_repeat(key: &GroupKey, gid: u32, last: Option<Repeat>) {
    let mut c = CACHE.lock();
    match last {
        Some(rep) => c.repeats.insert((key.clone(), gid), rep),
        None => c.repeats.remove(&(key.clone(), gid)),
    };
}

/// The segments of the ranks other than `r` on this host, mapped, with their ranks.
fn local_peers(names: &Segments, r: u32) -> Result<Vec<(usize, Arc<Segment>)>> {
    names
        .iter()
        .enumerate()
        .filter(|(q, at)| *q != r as usize && at.host == host::key())
        .map(|(q, at)| Ok((q, peer_segment(&at.name, at.len)?)))
        .collect()
}

/// A repeat's arrival: this rank's segment is armed; wake the ranks on this host that wait
/// for it (their doorbells: the wake words of their segments).
fn ring_doorbells(local: &[(usize, Arc<Segment>)]) {
    for (_, s) in local {
        header(s).bump_wake(super::segment::futex_wake_all);
    }
}

/// How the doorbell meeting of a repeat ended.
enum Armed<'b> {
    /// Every rank on this host armed its segment for the run, with the same signature.
    Go,
    /// A rank here armed another collective, or went to the board (its pool handed it another
    /// segment): meet on the board, whose verdict is the same on every rank.
    ToBoard(&'b go_board::Board),
}

/// The doorbell meeting's verdict now, `None` while a rank here has not armed for run `run`
/// (`board`: the group's board, where a repeat goes when the ranks disagree).
fn armed_verdict<'b>(
    key: &GroupKey,
    run: u64,
    r: u32,
    local: &[(usize, Arc<Segment>)],
    sig: u64,
    board: Option<&'b go_board::Board>,
) -> Option<Result<Armed<'b>>> {
    let mut all = true;
    for (q, s) in local {
        // Before the header: a peer arrives on the board before it arms (`arrive`).
        if let Some(b) = board.filter(|b| b.arrived(*q) > run) {
            return Some(Ok(Armed::ToBoard(b)));
        }
        match header(s).armed() {
            Some((at, theirs)) if at == run && theirs != sig => {
                if let Some(b) = board {
                    return Some(Ok(Armed::ToBoard(b)));
                }
                return Some(Err(Error::invalid(format!(
                    "collective #{run} of {key}: rank {q} (global id {}) prepared another \
                     collective than rank {r} (go signatures {theirs:#018x} and {sig:#018x}: \
                     op, dtype, count, group or program differ)",
                    key.group[*q]
                ))
                .with_rank(*q as u32)
                .with_step(run)));
            }
            Some((at, _)) if at >= run => {}
            _ => all = false,
        }
    }
    all.then_some(Ok(Armed::Go))
}

/// The go of a repeat, for the ranks on this host: wait until `verdict` (the
/// [`armed_verdict`] of every one of them having armed its segment for run `run`) is in
/// (ranks on other hosts are not waited for: the proxy holds what they send until this segment
/// is armed). A rank that arms rings the others' doorbells ([`ring_doorbells`]).
fn wait_armed<'b>(
    key: &GroupKey,
    run: u64,
    r: u32,
    names: &Segments,
    own: &Segment,
    verdict: impl Fn() -> Option<Result<Armed<'b>>>,
) -> Result<Armed<'b>> {
    let deadline = crate::runtime::multi_process::bootstrap::meet_deadline(false)?;
    let start = std::time::Instant::now();
    let here = names.iter().filter(|at| at.host == host::key()).count();
    let crowded = super::segment::oversubscribed(here);
    loop {
        if let Some(v) = verdict() {
            return v;
        }
        if super::segment::spin_then_yield(crowded, || verdict().is_some()) {
            continue;
        }
        if let Some(e) = run_error().or_else(crate::runtime::multi_process::bootstrap::root_left) {
            return Err(e);
        }
        // A rank here may wait for a peer that stopped because another host went silent.
        let lost = proxy::running().and_then(|p| {
            names
                .iter()
                .filter(|at| at.host != host::key())
                .find_map(|at| p.lost(&at.net))
        });
        if let Some(why) = lost {
            return Err(Error::new(
                ErrorKind::NetworkProxy,
                format!(
                    "collective #{run} of {key}: rank {r} waits for the ranks on its host to \
                     load the collective; a process of the group on another host: {why}"
                ),
            ));
        }
        if deadline.is_some_and(|d| start.elapsed() >= d) {
            return Err(Error::new(
                ErrorKind::Timeout,
                format!(
                    "collective #{run} of {key}: rank {r} waited {:.1} s for the ranks on its \
                     host to load the collective",
                    start.elapsed().as_secs_f64()
                ),
            ));
        }
        header(own).sleep_unless(|| verdict().is_some(), Duration::from_millis(10));
    }
}

/// How this rank reaches peer `at`: its segment mapped when it is on this host, its shadow and
/// the proxy's link to its process otherwise.
fn reach_peer(at: &SegmentAt, own: &Arc<Segment>) -> Result<PeerSeg> {
    if at.host == host::key() {
        return Ok(PeerSeg::Local(peer_segment(&at.name, at.len)?));
    }
    let p = proxy::running().ok_or_else(|| {
        Error::failure("a peer is on another host but this process has no network proxy")
    })?;
    let shadow = p.shadow(at, own)?;
    // Whatever an earlier run wrote and never signalled is not this run's to send.
    shadow.take_written();
    Ok(PeerSeg::Remote(shadow, p.link(at, own)))
}

/// Wait until no send of an earlier run still reads this rank's shadows in place (`proxy`'s
/// `Lent`): the executor is about to write into them.
fn wait_returned(segs: &[PeerSeg]) -> Result<()> {
    let shadows: Vec<&Arc<super::shadow::Shadow>> = segs
        .iter()
        .filter_map(|s| match s {
            PeerSeg::Remote(sh, _) => Some(sh),
            PeerSeg::Local(_) => None,
        })
        .collect();
    let returned = || shadows.iter().all(|s| s.lent() == 0);
    if returned() {
        return Ok(());
    }
    let start = std::time::Instant::now();
    let limit = crate::runtime::multi_process::bootstrap::meet_deadline(false)?;
    loop {
        if returned() {
            return Ok(());
        }
        if let Some(e) = run_error() {
            return Err(e);
        }
        if let Some(why) = proxy::running().and_then(|p| p.any_lost()) {
            return Err(Error::new(ErrorKind::NetworkProxy, why));
        }
        if limit.is_some_and(|d| start.elapsed() >= d) {
            return Err(Error::new(
                ErrorKind::NetworkProxy,
                format!(
                    "the last run's sends to another host had not completed after {:.1} s",
                    start.elapsed().as_secs_f64()
                ),
            ));
        }
        match start.elapsed() < Duration::from_micros(200) {
            true => std::thread::yield_now(),
            false => std::thread::sleep(Duration::from_micros(50)),
        }
    }
}

/// The ranks on other hosts that have not finished and whose processes this one has not heard
/// from for `ran_for` (the whole run so far), named with their network addresses; `None` when
/// every remote rank spoke (or there are none).
fn silent_remote(names: &[SegmentAt], peers: &SegPeers, ran_for: Duration) -> Option<String> {
    let p = proxy::running()?;
    let quiet: Vec<String> = names
        .iter()
        .enumerate()
        .filter(|(q, at)| {
            peers.segments()[*q].is_remote() && !peers.finished(*q) && {
                p.silent_for(&at.net).is_none_or(|t| t >= ran_for)
            }
        })
        .map(|(q, at)| format!("rank {q} at {}", proxy::describe(&at.net)))
        .collect();
    (!quiet.is_empty()).then(|| quiet.join(", "))
}

/// Why a run cannot go on: a dead process or broken world (the bootstrap), or a failed network
/// proxy.
fn run_error() -> Option<Error> {
    crate::runtime::multi_process::bootstrap::job_error().or_else(proxy::error)
}

/// Write rank `r`'s part of `l` into its segment (module doc, step 1). `resident`: the
/// segment holds `l`'s program from its last run already, so only what the hardware re-arms is
/// written (docs/design.md §2.10, as `runtime::resident` does in one process): the header, the
/// EVT_SEM blocks and queue words, the first lap of a ring whose feed overwrote it, and the
/// input. Otherwise everything: the constant page, zeroed data buffers, SPADs and rings.
fn fill(
    seg: &Arc<Segment>,
    l: &Lowered,
    r: u32,
    lay: &Layout,
    a: &Arrival,
    run: u64,
    resident: bool,
) -> Result<()> {
    header(seg).reset(run);
    for &(_, off) in &lay.sems {
        let b = SemBlock::external(seg.clone(), off, None).map_err(Error::failure)?;
        b.clear();
        seg.write(off + QUEUE_WORDS_AT, &[0u8; 32])?;
    }
    if !resident {
        let words: Vec<u8> = (0..CONST_WORDS).flat_map(u32::to_le_bytes).collect();
        let cp = lay.const_page;
        seg.with_mut(cp.off, cp.len as usize, |b| {
            b.fill(0);
            b[..words.len()].copy_from_slice(&words);
        })?;
        for (_, p) in &lay.bufs {
            seg.with_mut(p.off, p.len as usize, |b| b.fill(0))?;
        }
    }
    let input = l.map.buffers().input as usize;
    let (at, _) = byte_bases(&l.program, r)?;
    let inp = lay.buf_off(Buf::Input)?;
    seg.with_mut(inp + at as usize, input, |dst| a.io.input_into(dst))??;
    for (t, places) in rank_image(l, r)?.topsps.iter().zip(&lay.topsps) {
        let [ctrl, slot, m2s, s2m] = *places;
        if !resident {
            seg.write(ctrl.off, &t.ctrl_spad)?;
            seg.write(slot.off, &t.slot_spad)?;
        }
        for (p, stream, len) in [(m2s, &t.m2s, t.m2s_ring_len), (s2m, &t.s2m, t.s2m_ring_len)] {
            if resident && stream.len() <= len as usize {
                continue;
            }
            let first = stream.len().min(len as usize);
            let lap: Vec<u8> = stream[..first].iter().flatten().copied().collect();
            seg.with_mut(p.off, p.len as usize, |b| {
                if !resident {
                    b.fill(0);
                }
                b[..lap.len()].copy_from_slice(&lap);
            })?;
        }
    }
    Ok(())
}

/// The machine of rank `r`: every rank's regions and blocks, rank `r`'s TOP_SPs — the one kept
/// from the last run of the same collective on the same segments, or a new one.
fn build(
    key: &GroupKey,
    l: &Arc<Lowered>,
    r: u32,
    lays: &[Layout],
    segs: &[PeerSeg],
    outputs: Vec<Option<TensorAt>>,
    peers: Arc<SegPeers>,
) -> Result<(Machine, Built)> {
    let gid = key.group[r as usize];
    let kept = CACHE.lock().built.remove(&(key.clone(), gid));
    if let Some(mut b) = kept.filter(|b| b.fits(l, segs, &outputs)) {
        let mem = std::mem::replace(&mut b.mem, crate::device::memory::Memory::new(0));
        return Ok((b.machine(mem, peers)?, b));
    }
    let chips = lays.iter().map(|l| l.chip).max().unwrap_or(0) + 1;
    let (mut m, fw) = new_machine(&l.map, chips)?;
    let out_bytes = l.map.buffers().output;
    for (q, (lay, seg)) in lays.iter().zip(segs).enumerate() {
        let ext = seg.bytes();
        let log: Option<Arc<dyn WriteLog>> = match seg {
            PeerSeg::Remote(shadow, _) => Some(shadow.clone()),
            PeerSeg::Local(_) => None,
        };
        let output = outputs[q].as_ref();
        let out_place = lay.bufs.iter().find(|(b, _)| *b == Buf::Output);
        for p in lay.regions() {
            match (output, out_place) {
                // The rank's output tensor is its output buffer (`outputs`).
                (Some(t), Some((_, o))) if o.off == p.off => {
                    let object = outputs::object(t).map_err(|e| {
                        e.context(format!(
                            "mapping the output tensor of rank {q} (global id {})",
                            key.group[q]
                        ))
                    })?;
                    m.mem
                        .map_external(lay.chip, p.base, object, t.offset as usize, out_bytes)?;
                }
                _ => m
                    .mem
                    .map_shadow(lay.chip, p.base, ext.clone(), p.off, p.len, log.clone())?,
            }
        }
        for &(dev, off) in &lay.sems {
            let notify: Option<Arc<dyn SemNotify>> = match seg {
                _ if q as u32 == r => None,
                PeerSeg::Remote(shadow, link) => Some(Arc::new(RemoteSem {
                    shadow: shadow.clone(),
                    block: off,
                    link: link.clone(),
                })),
                PeerSeg::Local(_) => Some(peers.notify_for(q)),
            };
            let b = SemBlock::external(ext.clone(), off, notify).map_err(Error::failure)?;
            m.mem.attach_sem_block(lay.chip, BlockId::TopSp(dev), b)?;
        }
    }
    let chip = lays[r as usize].chip;
    let mut agents = Vec::new();
    for t in &rank_image(l, r)?.topsps {
        agents.push(topsp_agent(&fw, &l.map, r, chip, t)?);
    }
    let built = Built {
        lowered: l.clone(),
        segs: segs.to_vec(),
        outputs,
        mem: std::mem::replace(&mut m.mem, crate::device::memory::Memory::new(0)),
        agents,
        arch: m.arch,
        timeout: m.timeout,
    };
    let mut b = built;
    let mem = std::mem::replace(&mut b.mem, crate::device::memory::Memory::new(0));
    Ok((b.machine(mem, peers)?, b))
}

/// Keep rank `gid`'s machine after a successful run ([`Built`]).
fn keep_built(key: &GroupKey, gid: u32, mut b: Built, m: &mut Machine) {
    b.mem = std::mem::replace(&mut m.mem, crate::device::memory::Memory::new(0));
    CACHE.lock().built.insert((key.clone(), gid), b);
}

/// Where one rank's time goes (logged at DEBUG).
#[derive(Debug)]
struct Phases {
    last: std::cell::Cell<std::time::Instant>,
    seen: std::cell::RefCell<Vec<(&'static str, std::time::Duration)>>,
}

impl Phases {
    fn new() -> Phases {
        Phases {
            last: std::cell::Cell::new(std::time::Instant::now()),
            seen: std::cell::RefCell::new(Vec::new()),
        }
    }
    fn mark(&self, what: &'static str) {
        let now = std::time::Instant::now();
        self.seen.borrow_mut().push((what, now - self.last.get()));
        self.last.set(now);
    }
    fn report(&self) -> String {
        let parts: Vec<String> = self
            .seen
            .borrow()
            .iter()
            .map(|(w, d)| format!("{w} {d:?}"))
            .collect();
        parts.join(", ")
    }
}

/// The instance bit of a go meeting held again with the program lowered for the job's
/// topology (module doc, "The job's topology").
const JOB_ROUND: u64 = 1 << 61;

/// How one attempt at a run ended.
enum Attempt {
    /// It ran (or failed: the `Err` of [`attempt`]).
    Ran,
    /// The go answer showed a world across hosts whose topology gives another program: run
    /// this one instead.
    Relower(Arc<Lowered>),
}

/// The programs lowered for the job's topology, by the go signature of the program prepared
/// for the default one (module doc, "The job's topology").
static FOR_JOB: Lazy<Mutex<HashMap<u64, Arc<Lowered>>>> = Lazy::new(|| Mutex::new(HashMap::new()));

/// Run rank `a.req.rank`'s part of collective `instance` of `key` (module doc).
pub fn run(key: &GroupKey, instance: u64, a: Arrival) -> Result<()> {
    begin(key, instance, a)?.finish()
}

/// A rank that has loaded its segment and arrived at its go meeting, and has not run yet
/// ([`begin`]). Whoever holds it runs the rest with [`Pending::finish`]: the caller's own
/// thread when the meeting is complete already ([`Pending::met`]), the XU's worker otherwise.
pub struct Pending {
    key: GroupKey,
    instance: u64,
    a: Arrival,
    at: Arrived,
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending")
            .field("key", &self.key)
            .field("instance", &self.instance)
            .finish_non_exhaustive()
    }
}

/// Load rank `a.req.rank`'s part of collective `instance` of `key` into its segment and arrive
/// at the go meeting, without waiting for anyone (the first half of [`run`]).
pub fn begin(key: &GroupKey, instance: u64, a: Arrival) -> Result<Pending> {
    let default_sig = go_board::signature(&a.req, plan(&a.lowered)?.digest);
    let known = FOR_JOB.lock().get(&default_sig).cloned();
    let (l, lowered_for_job) = match known {
        Some(l) => (l, true),
        None => (a.lowered.clone(), false),
    };
    let sig = match Arc::ptr_eq(&l, &a.lowered) {
        true => default_sig,
        false => go_board::signature(&a.req, plan(&l)?.digest),
    };
    let at = arrive(key, instance, instance, &a, l, lowered_for_job, sig)?;
    Ok(Pending {
        key: key.clone(),
        instance,
        a,
        at,
    })
}

impl Pending {
    /// Whether every rank has arrived, so that [`Pending::finish`] runs without waiting for
    /// a peer to arrive: always false for a meeting at the root.
    pub fn met(&self) -> bool {
        let (r, run) = (self.a.req.rank, self.instance);
        let board = self.at.on_board.as_deref();
        let all_on = |b: &go_board::Board| b.others_arrived(run, r as usize);
        match (&self.at.early, &self.at.repeat, board) {
            (Some(_), _, _) => true,
            // The ranks on other hosts may not have arrived: only the worker may wait.
            (None, Some(names), _) if spans_hosts(names) => false,
            (None, Some(_), _) => {
                match armed_verdict(&self.key, run, r, &self.at.local, self.at.sig, board) {
                    Some(Ok(Armed::Go) | Err(_)) => true,
                    Some(Ok(Armed::ToBoard(b))) => all_on(b),
                    None => false,
                }
            }
            (None, None, Some(b)) => all_on(b),
            (None, None, None) => false,
        }
    }

    /// Wait for the meeting, run and wait for the peers to finish (the second half of
    /// [`run`]).
    pub fn finish(self) -> Result<()> {
        let Pending {
            key,
            instance,
            a,
            at,
        } = self;
        match attempt(&key, instance, &a, at)? {
            Attempt::Ran => Ok(()),
            Attempt::Relower(l) => {
                let default_sig = go_board::signature(&a.req, plan(&a.lowered)?.digest);
                FOR_JOB.lock().insert(default_sig, l.clone());
                let sig = go_board::signature(&a.req, plan(&l)?.digest);
                let at = arrive(&key, instance, instance | JOB_ROUND, &a, l, true, sig)?;
                match attempt(&key, instance, &a, at)? {
                    Attempt::Ran => Ok(()),
                    Attempt::Relower(_) => Err(Error::failure(format!(
                        "collective #{instance} of {key}: lowered for the job's topology twice"
                    ))),
                }
            }
        }
    }
}

/// The program of collective `l` for the job's topology, when the first go answer `names` of
/// a group of the whole world shows ranks on several hosts and that topology lowers it
/// otherwise (module doc, "The job's topology"); `None` to run `l` as it is.
fn for_job(
    key: &GroupKey,
    a: &Arrival,
    l: &Lowered,
    names: &[SegmentAt],
) -> Result<Option<Arc<Lowered>>> {
    let world = l.world as usize;
    if key.group.len() != world || !spans_hosts(names) {
        return Ok(None);
    }
    let mut hosts = vec![String::new(); world];
    for (&gid, at) in key.group.iter().zip(names) {
        match hosts.get_mut(gid as usize) {
            Some(h) => *h = at.host.clone(),
            None => return Ok(None),
        }
    }
    if hosts.iter().any(String::is_empty) {
        return Ok(None);
    }
    let config = crate::runtime::process::config()?;
    let Some(t) = host::topology_for_world(&config, &hosts)? else {
        return Ok(None);
    };
    let job = crate::runtime::collective::prepare_for_topology(&a.req, l.world, l.forced, &t)?;
    Ok((plan(&job)?.digest != plan(l)?.digest).then_some(job))
}

/// What [`arrive`] leaves for [`attempt`]: a rank with its segment loaded and armed, and
/// its arrival published where the ranks meet.
struct Arrived {
    /// The instance of the meeting at the root (`JOB_ROUND` set in a second round).
    meet_at: u64,
    l: Arc<Lowered>,
    /// `l` is lowered for the job's topology already, so never again.
    lowered_for_job: bool,
    own: Pooled,
    sig: u64,
    /// Every rank's segment, when this run is a repeat that meets on doorbells
    /// ([`repeat_of`]).
    repeat: Option<Segments>,
    /// A repeat's ranks on this host but this one, their segments mapped (empty otherwise).
    local: Vec<(usize, Arc<Segment>)>,
    /// The group's go board, every rank attached: where the ranks meet when this is no
    /// repeat, and where a repeat goes when a peer did not arm for it.
    on_board: Option<Arc<go_board::Board>>,
    go: GoArrival,
    clock: Phases,
    /// Publishing the arrival failed: the meeting fails with this.
    early: Option<Error>,
}

/// The first half of one attempt at [`run`] with program `l` (`lowered_for_job`: already
/// lowered for the job's topology, so never again), meeting at the root as `meet_at`: load
/// and arm the segment, then publish the arrival — ring the local peers' doorbells for a
/// repeat, arrive on the go board — without waiting for anyone.
fn arrive(
    key: &GroupKey,
    instance: u64,
    meet_at: u64,
    a: &Arrival,
    l: Arc<Lowered>,
    lowered_for_job: bool,
    sig: u64,
) -> Result<Arrived> {
    let r = a.req.rank;
    let gid = key.group[r as usize];
    let plan = plan(&l)?;
    let lays = &plan.layouts;
    let clock = Phases::new();
    let mut own = take_segment(key, gid, lays[r as usize].total, &l)?;
    let run_tag = instance;
    let resident = own.loaded.as_ref().is_some_and(|p| Arc::ptr_eq(p, &l));
    own.loaded = Some(l.clone());
    if let Err(e) = fill(&own.seg, &l, r, &lays[r as usize], a, run_tag, resident) {
        own.seg.unlink();
        return Err(e.context(format!("collective #{instance} of {key}: loading rank {r}")));
    }
    let on_board = go_board::held(key).filter(|b| b.all_attached());
    let output = outputs::own_output(a, &l);
    // A repeat on one host keeps the board as its way back (`armed_verdict`).
    let repeat = repeat_of(key, r, sig, &own.seg, output.as_ref())
        .filter(|names| on_board.is_some() || spans_hosts(names));
    if r == 0 && repeat.is_none() {
        let name = match on_board {
            Some(_) => None,
            None => go_board::board_to_name(key),
        };
        header(&own.seg).set_board(name.as_deref().unwrap_or(""));
    }
    clock.mark(if resident { "re-arm" } else { "load" });
    let go = GoArrival {
        req: a.req.clone(),
        digest: plan.digest,
        seg: SegmentAt {
            name: own.seg.name().to_string(),
            len: own.seg.len() as u64,
            host: super::host::key().to_string(),
            // Empty until this process has a proxy; then every rank's address is in the
            // first round's answer and reach_network needs no second round.
            net: proxy::address(),
            output,
        },
    };
    // On the board, the arrival goes before the arming: a repeating peer that sees this
    // segment armed sees this rank on the board too (`armed_verdict`).
    let mut early = match (&repeat, &on_board) {
        (None, Some(b)) => b.arrive(r as usize, instance, sig, &go.seg).err(),
        _ => None,
    };
    header(&own.seg).arm(run_tag, sig);
    if let Some(p) = proxy::running() {
        // Peers on other hosts may write into it from now on; what they sent early lands now.
        p.arm(&own.seg);
    }
    let local = match repeat.as_ref().map(|names| local_peers(names, r)) {
        Some(Ok(local)) => local,
        Some(Err(e)) => {
            early = Some(e);
            Vec::new()
        }
        None => Vec::new(),
    };
    ring_doorbells(&local);
    Ok(Arrived {
        meet_at,
        l,
        lowered_for_job,
        own,
        sig,
        repeat,
        local,
        on_board,
        go,
        clock,
        early,
    })
}

/// The second half of one attempt at [`run`] ([`arrive`] did the first): meet, run, wait
/// for the peers to finish.
fn attempt(key: &GroupKey, instance: u64, a: &Arrival, at: Arrived) -> Result<Attempt> {
    let (l, own, go, clock, early) = (at.l, at.own, at.go, at.clock, at.early);
    let (meet_at, lowered_for_job, sig) = (at.meet_at, at.lowered_for_job, at.sig);
    let (repeat, local, on_board) = (at.repeat, at.local, at.on_board);
    let r = a.req.rank;
    let gid = key.group[r as usize];
    let plan = plan(&l)?;
    let lays = &plan.layouts;
    let run_tag = instance;
    let net_go = go.clone();
    let met = match (early, &repeat, &on_board) {
        (Some(e), _, _) => Err(e),
        (None, Some(names), b) => {
            let b = b.as_deref();
            let verdict = || armed_verdict(key, instance, r, &local, sig, b);
            match wait_armed(key, instance, r, names, &own.seg, verdict) {
                Ok(Armed::Go) => Ok(names.clone()),
                Ok(Armed::ToBoard(b)) => go_board::meet_on_board(b, key, instance, r, sig, go),
                Err(e) => Err(e),
            }
        }
        (None, None, Some(b)) => go_board::wait_on_board(b, key, instance, r, go),
        (None, None, None) => {
            crate::runtime::multi_process::bootstrap::meet_go(key, meet_at, r, go)
        }
    };
    if let (Ok(names), None, None, false) = (&met, &repeat, &on_board, lowered_for_job) {
        // A world across hosts, met for the first time: maybe another program for its
        // topology. Nobody ran this segment's program: it goes.
        match for_job(key, a, &l, names) {
            Ok(None) => {}
            Ok(Some(job)) => {
                own.seg.unlink();
                return Ok(Attempt::Relower(job));
            }
            // Every rank fails alike (same request, same hosts): all keep the program they
            // prepared, which is legal on one node (an algorithm forced with OPENNRT_CC_ALGO
            // that the hosts' topology refuses, say), from now on.
            Err(e) => {
                crate::log_warn!(
                    "cc",
                    "collective #{instance} of {key}: not lowered again for the job's hosts, so \
                     it runs as prepared for one node: {}",
                    e.message()
                );
                FOR_JOB.lock().insert(sig, l.clone());
            }
        }
    }
    let met = met.and_then(|names| match (repeat.is_none(), spans_hosts(&names)) {
        (true, true) => reach_network(key, meet_at, r, net_go, names, &own.seg),
        _ => Ok(names),
    });
    // A rank that never arrived may be behind a cut cable: the network is then the cause.
    let met = met.map_err(|e| match proxy::running().and_then(|p| p.any_lost()) {
        Some(why) if e.kind() == ErrorKind::Timeout => Error::new(
            ErrorKind::NetworkProxy,
            format!("{}; a process on another host: {why}", e.message()),
        ),
        _ => e,
    });
    let names = match met {
        Ok(n) => n,
        Err(e) => {
            // Nobody received its name, and a pooled segment must be mapped by its peers
            // already: drop it, name and all (a failed job must not leave it behind). Its
            // header says why, for a straggler that still finds it on the board later: its
            // executor then fails at once naming this rank, instead of waiting out the timeout.
            header(&own.seg).fail(&format!("gave up before the run: {}", e.message()));
            own.seg.unlink();
            if r == 0 {
                go_board::drop_unattached_board(key);
            }
            return Err(e);
        }
    };
    clock.mark(match (&repeat, &on_board) {
        (Some(_), _) => "go (armed)",
        (None, Some(_)) => "go (board)",
        (None, None) => "go (root)",
    });
    let peers = (|| -> Result<Arc<SegPeers>> {
        let mut segs = Vec::with_capacity(names.len());
        for (q, at) in names.iter().enumerate() {
            segs.push(match q as u32 == r {
                true => PeerSeg::Local(own.seg.clone()),
                false => reach_peer(at, &own.seg).map_err(|e| {
                    e.context(format!(
                        "this rank had not started its first step: reaching the device segment \
                         of rank {q} (global id {})",
                        key.group[q]
                    ))
                })?,
            });
        }
        let peers = SegPeers::new(segs, lays.clone(), r as usize, key.group.clone(), run_error);
        if let (true, Some(p), PeerSeg::Local(e)) =
            (peers.spans_hosts(), proxy::running(), peers.epoch_segment())
        {
            p.set_epoch(&own.seg, e);
            // The rank and the proxy of every process here, each on a core of its own.
            let here = peers.segments().iter().filter(|s| !s.is_remote()).count();
            p.set_spin(!super::segment::oversubscribed(2 * here));
        }
        Ok(Arc::new(peers))
    })();
    if let (None, Ok(p)) = (&on_board, &peers) {
        if let PeerSeg::Local(s0) = &p.segments()[0] {
            go_board::attach_board(key, r, s0);
        }
    }
    let ran = peers.as_ref().map_err(Clone::clone).and_then(|peers| {
        peers.check_loaded(run_tag)?;
        wait_returned(peers.segments())?;
        let bound = outputs::bound_outputs(&names, l.map.buffers().output);
        let in_place = bound[r as usize].is_some();
        let (mut m, built) = build(key, &l, r, lays, peers.segments(), bound, peers.clone())?;
        clock.mark("map+build");
        if fault_injection::kills_in_run(gid) && key.kind == "cc" {
            fault_injection::kill_in_run(gid, |max| peers.others_started(max));
        }
        let started = std::time::Instant::now();
        m.run()
            .map_err(|e| match silent_remote(&names, peers, started.elapsed()) {
                Some(who) if run_error().is_none() && e.kind() == ErrorKind::CollectivesHang => {
                    Error::new(
                        ErrorKind::NetworkProxy,
                        format!(
                            "no word from {who} since this collective started {:.1} s ago: the \
                         network between the hosts is down, or that process stopped ({})",
                            started.elapsed().as_secs_f64(),
                            e.message()
                        ),
                    )
                }
                _ => e,
            })?;
        keep_built(key, gid, built, &mut m);
        clock.mark("run");
        if in_place {
            // The engines wrote the result into the output tensor itself.
            return Ok(());
        }
        let (_, at) = byte_bases(&l.program, r)?;
        let out = l.map.buffers().output as usize;
        let place = lays[r as usize].buf_off(Buf::Output)?;
        own.seg
            .with_mut(place + at as usize, out, |o| a.io.output(o))?
    });
    if let Err(e) = &ran {
        if header(&own.seg).state() != RankState::Failed {
            header(&own.seg).fail_as(super::segment::cause_code(e.kind()), e.message());
        }
    }
    // "Done": no segment is reused while a peer may still write into it. Every rank waits, in
    // shared memory, until every other has finished (done or failed) — or its process died.
    let done = match &peers {
        Ok(p) => {
            p.wake_all();
            // After a failed run the segment is never reused, so the wait only lets the peers
            // finish: once the root has left, a peer that died meanwhile is reported by no one
            // (a root that fails at once on a broken link may leave before it notices the
            // death), and the wait would last out its deadline.
            let failed = ran.is_err();
            p.wait_finished(
                crate::runtime::multi_process::bootstrap::meet_deadline(true)?,
                || match failed {
                    true => crate::runtime::multi_process::bootstrap::root_left(),
                    false => None,
                },
            )
        }
        Err(e) => Err(e.clone()),
    };
    clock.mark("done");
    if r == 0 {
        go_board::unlink_board(key);
    }
    crate::log_debug!(
        "cc",
        "collective #{instance} of {key}: rank {r} (global id {gid}) on the shared device: {}",
        clock.report()
    );
    let last = match (&ran, &done) {
        (Ok(()), Ok(())) => Some(Repeat {
            sig,
            own: own.seg.name().to_string(),
            names: names.clone(),
        }),
        _ => None,
    };
    remember_repeat(key, gid, last);
    match done {
        Ok(()) => give_segment(key, gid, own),
        // A peer may still be writing: never reuse this segment.
        Err(_) => own.seg.unlink(),
    }
    let ran = ran.map_err(|e| {
        let death = crate::runtime::multi_process::bootstrap::job_error();
        let e = match (e.kind(), death) {
            // A dead peer's segment is gone, its state never written: the death is the cause.
            (ErrorKind::Resource | ErrorKind::Invalid | ErrorKind::Failure, Some(job)) => {
                Error::new(job.kind(), format!("{} ({})", job.message(), e.message()))
            }
            (ErrorKind::Invalid, None) => Error::failure(e.message()),
            _ => e,
        };
        e.context(format!(
            "collective #{instance} of {key} on the shared software device (rank {r}, global id {gid})"
        ))
    });
    ran?;
    done.map_err(|e| {
        e.context(format!(
            "collective #{instance} of {key} on the shared software device (rank {r}, global id \
             {gid}), waiting for the other ranks to finish after this one did"
        ))
    })?;
    Ok(Attempt::Ran)
}

/// Forget pooled and mapped segments (`nrt_close`; pooled ones are unlinked already), and stop
/// the network proxy.
pub fn reset() {
    proxy::shutdown();
    host::reset();
    let mut c = CACHE.lock();
    c.free.clear();
    c.peers.clear();
    c.built.clear();
    c.repeats.clear();
    outputs::reset();
    FOR_JOB.lock().clear();
    go_board::reset();
    GO.reset();
}

/// Fail pending go meetings (`nrt_close`).
pub fn abort(why: &Error) {
    GO.abort_all(why);
    go_board::abort();
}

mod outputs;

#[cfg(test)]
mod tests;

//! One rank's simulated device in shared memory (docs/design.md §2.7): the
//! *device segment* that holds the rank's HBM regions and EVT_SEM blocks, so that a DMA engine
//! of another process writes into this rank's HBM and increments its semaphores as
//! cross-device DMA does, and the words through which the executors of one run wait for each
//! other ([`SegPeers`], the runtime's side of `device::peers`).
//!
//! **Layout** ([`Layout::of`]; every process computes it from the same lowered program, so only
//! the segment's name travels):
//!
//! | bytes | what |
//! |---|---|
//! | 0 .. 4096 | [`Header`]: state words, the run's epoch and waiter count (used in rank 0's segment), the failure message |
//! | 4096 .. | per TOP_SP of the rank, in image order: its EVT_SEM block ([`SEM_WORDS_BYTES`]) and its queue indices (4 × u64) |
//! | then, each 4 KiB aligned | the constant page, the data buffers (`machine::buffer_regions`), per TOP_SP its CTRL SPAD, SLOT SPAD, M2S ring and S2M ring |
//!
//! **Waking.** Every write into a *peer's* semaphore block goes through a [`SemNotify`] of
//! that peer ([`SegPeers::notify_for`]): it bumps the run's epoch (a 32-bit word in rank 0's
//! header, what hang detection compares) and the peer's own wake word, and `FUTEX_WAKE`s the
//! peer if its executor sleeps — only the rank written to wakes, not every executor of the run.
//! Sleepers use `FUTEX_WAIT` on their own wake word (the shared, not the private, futex: the
//! waiters are in several processes). A rank that ends (done or failed) wakes everyone.

use std::sync::atomic::{
    AtomicU32, AtomicU64,
    Ordering::{Relaxed, SeqCst},
};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::device::peers::{Peers, RemoteRing};
use crate::device::sema::{ExternalBytes, SemNotify, SEM_WORDS_BYTES};
use crate::error::{Error, ErrorKind, Result};
use crate::isa::memmap::{align_buf, CONST_PAGE_BYTES};
use crate::lower::emit::EmittedRank;
use crate::lower::program::Buf;
use crate::runtime::collective::Lowered;
use crate::runtime::machine::buffer_regions;
use crate::runtime::multi_process::shadow::{Shadow, Signal};
use crate::runtime::multi_process::shm::Segment;

// SAFETY: a Segment is a live MAP_SHARED mapping of `len()` bytes (page aligned) until dropped.
unsafe impl ExternalBytes for Segment {
    fn base_ptr(&self) -> *mut u8 {
        self.as_ptr()
    }
    fn len(&self) -> usize {
        Segment::len(self)
    }
}

/// Bytes of the header page.
pub const HEADER_BYTES: usize = 4096;
/// Bytes per TOP_SP after the header: its EVT_SEM block, then its queue indices (`[M2S head,
/// M2S tail, S2M head, S2M tail]`, four u64, published for peers' hang reports).
const SEM_SLOT_BYTES: usize = QUEUE_WORDS_AT + 64;
/// Offset of a TOP_SP's queue indices from its EVT_SEM block.
pub const QUEUE_WORDS_AT: usize = SEM_WORDS_BYTES.next_multiple_of(64);
const PAGE: u64 = 4096;
const MAGIC: u32 = 0x4f4e_5244; // "ONRD"
const MSG_BYTES: usize = 2048;

/// A rank's state in its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum RankState {
    /// Filling its segment (not yet running).
    Loading = 0,
    /// Its executor is running.
    Running = 1,
    /// Its executor cannot progress (at the epoch in `blocked_at`).
    Blocked = 2,
    /// Its TOP_SPs are all done.
    Done = 3,
    /// It failed (the message says why).
    Failed = 4,
}

impl RankState {
    fn from_u32(v: u32) -> RankState {
        match v {
            1 => RankState::Running,
            2 => RankState::Blocked,
            3 => RankState::Done,
            4 => RankState::Failed,
            _ => RankState::Loading,
        }
    }
}

/// The words at the start of every device segment (module doc).
#[repr(C)]
pub struct Header {
    magic: AtomicU32,
    /// The run's epoch (rank 0's segment).
    epoch: AtomicU32,
    /// This rank's wake word: bumped by every write into its blocks from another executor.
    wake: AtomicU32,
    /// This rank's executor sleeps on `wake`.
    waiters: AtomicU32,
    state: AtomicU32,
    blocked_at: AtomicU32,
    msg_len: AtomicU32,
    pid: AtomicU32,
    /// Why it failed, as [`cause_code`] (0: not said).
    cause: AtomicU32,
    _pad: AtomicU32,
    run: AtomicU64,
    /// The run whose loading ended, plus one (0: none yet): peers on other hosts may write
    /// into the segment for that run from then on (`proxy` holds what comes earlier), and a
    /// repeat's local peers wait for it instead of a go meeting (`run`, "Repeats across hosts").
    armed: AtomicU64,
    /// The go signature of the armed run (`go_board::signature`): what every rank of the
    /// collective must agree on.
    armed_sig: AtomicU64,
    msg: [u8; MSG_BYTES],
    /// Rank 0: the name of its group's go board while it is linked (`runtime::multi_process::go_board`).
    board_len: AtomicU32,
    board: [u8; BOARD_NAME_BYTES],
}

const BOARD_NAME_BYTES: usize = 128;

const _: () = assert!(std::mem::size_of::<Header>() <= HEADER_BYTES);

impl std::fmt::Debug for Header {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Header")
            .field("state", &self.state())
            .field("pid", &self.pid())
            .finish_non_exhaustive()
    }
}

/// Where one region of a rank lives: on-chip base, bytes, offset in the segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    /// On-chip base address (bits 47:0).
    pub base: u64,
    /// Bytes.
    pub len: u64,
    /// Offset in the segment.
    pub off: usize,
}

/// One rank's device segment layout (module doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// The rank's chip.
    pub chip: u8,
    /// Per TOP_SP image (in order): device TOP_SP and the offset of its EVT_SEM block.
    pub sems: Vec<(u8, usize)>,
    /// The constant page.
    pub const_page: Place,
    /// The data buffers.
    pub bufs: Vec<(Buf, Place)>,
    /// Per TOP_SP image: CTRL SPAD, SLOT SPAD, M2S ring, S2M ring.
    pub topsps: Vec<[Place; 4]>,
    /// Total bytes.
    pub total: usize,
}

impl Layout {
    /// The layout of rank `r` of `l`.
    pub fn of(l: &Lowered, r: u32) -> Result<Layout> {
        let map = &l.map;
        let img = rank_image(l, r)?;
        let mut at = HEADER_BYTES as u64;
        let mut sems = Vec::new();
        for t in &img.topsps {
            sems.push((map.device_topsp(r, t.topsp)?, at as usize));
            at += SEM_SLOT_BYTES as u64;
        }
        let mut place = |base: u64, len: u64| {
            at = at.next_multiple_of(PAGE);
            let p = Place {
                base,
                len,
                off: at as usize,
            };
            at += len;
            p
        };
        let const_page = place(map.const_addr(r, 0)?, CONST_PAGE_BYTES);
        let mut bufs = Vec::new();
        for (b, n) in buffer_regions(&map.buffers()) {
            if n > 0 {
                bufs.push((b, place(map.buf_on_chip(r, b, 0)?, align_buf(n))));
            }
        }
        let mut topsps = Vec::new();
        for t in &img.topsps {
            let n = &t.neff;
            topsps.push([
                place(n.ctrl_spad_base, (t.ctrl_spad.len() as u64).max(1)),
                place(n.slot_spad_base, (t.slot_spad.len() as u64).max(1)),
                place(n.m2s_ring_base, u64::from(t.m2s_ring_len) * 16),
                place(n.s2m_ring_base, u64::from(t.s2m_ring_len) * 16),
            ]);
        }
        Ok(Layout {
            chip: map.chip_id(r)?,
            sems,
            const_page,
            bufs,
            topsps,
            total: at.next_multiple_of(PAGE) as usize,
        })
    }

    /// Segment offset of data buffer `b`; in place the output is the input's storage.
    pub fn buf_off(&self, b: Buf) -> Result<usize> {
        let find = |b: Buf| self.bufs.iter().find(|(x, _)| *x == b).map(|(_, p)| p.off);
        let found = match b {
            Buf::Output => find(Buf::Output).or_else(|| find(Buf::Input)),
            b => find(b),
        };
        found.ok_or_else(|| Error::failure(format!("device segment: no {b:?} buffer")))
    }

    /// Every region `(on-chip base, bytes, offset)`.
    pub fn regions(&self) -> impl Iterator<Item = Place> + '_ {
        let bufs = self.bufs.iter().map(|(_, p)| *p);
        std::iter::once(self.const_page)
            .chain(bufs)
            .chain(self.topsps.iter().flatten().copied())
    }
}

/// Rank `r`'s emitted images.
pub fn rank_image(l: &Lowered, r: u32) -> Result<&EmittedRank> {
    let img = l.emitted.ranks.iter().find(|e| e.rank == r);
    img.ok_or_else(|| Error::invalid(format!("device segment: no images of rank {r}")))
}

/// The header of `seg`.
pub fn header(seg: &Segment) -> &Header {
    header_of(seg)
}

/// The header page at the start of `bytes`: a device segment, or the shadow of one (whose
/// header is what the remote rank last said, `shadow`).
pub fn header_of(bytes: &dyn ExternalBytes) -> &Header {
    assert!(bytes.len() >= HEADER_BYTES, "a device segment");
    // SAFETY: segments and shadows are page-aligned mappings, here at least HEADER_BYTES
    // long; every field is an atomic or plain bytes, valid for any contents.
    unsafe { &*(bytes.base_ptr() as *const Header) }
}

impl Header {
    /// Start a run: state Loading, no message, this process's pid, run tag `run`.
    pub fn reset(&self, run: u64) {
        self.magic.store(MAGIC, SeqCst);
        self.msg_len.store(0, SeqCst);
        self.blocked_at.store(0, SeqCst);
        self.pid.store(std::process::id(), SeqCst);
        self.run.store(run, SeqCst);
        self.state.store(RankState::Loading as u32, SeqCst);
    }
    /// The rank's state.
    pub fn state(&self) -> RankState {
        RankState::from_u32(self.state.load(SeqCst))
    }
    /// Set the state.
    pub fn set_state(&self, s: RankState) {
        self.state.store(s as u32, SeqCst);
    }
    /// Record a failure: the message first, then the state that makes peers read it.
    pub fn fail(&self, why: &str) {
        self.fail_as(0, why);
    }
    /// [`Header::fail`] with its cause ([`cause_code`]): a peer that fails because of this
    /// one reports the same kind (a network loss stays 1206 on every rank it reaches).
    pub fn fail_as(&self, cause: u32, why: &str) {
        if self.state() == RankState::Failed {
            return;
        }
        self.cause.store(cause, SeqCst);
        let n = why.len().min(MSG_BYTES);
        // SAFETY: `msg` is plain bytes only this rank writes, and only before it publishes
        // Failed (SeqCst) after which readers read it.
        unsafe {
            let p = self.msg.as_ptr() as *mut u8;
            std::ptr::copy_nonoverlapping(why.as_ptr(), p, n);
        }
        self.msg_len.store(n as u32, SeqCst);
        self.set_state(RankState::Failed);
    }
    /// The kind of the failure, when the failing rank said it.
    pub fn cause(&self) -> Option<ErrorKind> {
        kind_of_code(self.cause.load(SeqCst))
    }
    /// The failure message.
    pub fn message(&self) -> String {
        let n = (self.msg_len.load(SeqCst) as usize).min(MSG_BYTES);
        String::from_utf8_lossy(&self.msg[..n]).into_owned()
    }
    fn pid(&self) -> u32 {
        self.pid.load(SeqCst)
    }
    /// Name the group's go board ("" for none); rank 0 only, while it loads (before its go).
    pub fn set_board(&self, name: &str) {
        let n = if name.len() <= BOARD_NAME_BYTES {
            name.len()
        } else {
            0
        };
        // SAFETY: `board` is plain bytes only this rank writes, before the go meeting after
        // which peers read it.
        unsafe {
            let p = self.board.as_ptr() as *mut u8;
            std::ptr::copy_nonoverlapping(name.as_ptr(), p, n);
        }
        self.board_len.store(n as u32, SeqCst);
    }
    /// The go board named by [`Header::set_board`], if any.
    pub fn board(&self) -> Option<String> {
        let n = (self.board_len.load(SeqCst) as usize).min(BOARD_NAME_BYTES);
        (n > 0).then(|| String::from_utf8_lossy(&self.board[..n]).into_owned())
    }
    /// What a remote rank said about itself in run `run` (the header of its shadow, written by
    /// the network proxy): a later run starts afresh, an earlier one is stale, and within a run
    /// a failure is final.
    pub fn told(&self, run: u64, state: u32, why: &str) {
        let at = self.run.load(SeqCst);
        let fresh = self.magic.load(SeqCst) != MAGIC || run > at;
        if !fresh && run < at {
            return;
        }
        if fresh {
            self.magic.store(MAGIC, SeqCst);
            self.msg_len.store(0, SeqCst);
            self.state.store(RankState::Loading as u32, SeqCst);
            self.run.store(run, SeqCst);
        }
        match RankState::from_u32(state & 0xffff) {
            RankState::Failed => self.fail_as(state >> 16, why),
            s if self.state() != RankState::Failed => self.set_state(s),
            _ => {}
        }
    }
    /// Bump the epoch word (this header's rank holds its host's epoch for the run).
    pub fn bump_epoch(&self) {
        self.epoch.fetch_add(1, SeqCst);
    }
    /// Bump the wake word and wake the rank if it sleeps on it.
    pub fn bump_wake(&self, wake_all: fn(&AtomicU32)) {
        self.wake.fetch_add(1, SeqCst);
        if self.waiters.load(SeqCst) > 0 {
            wake_all(&self.wake);
        }
    }
    /// Loading run `run` ended: its collective's go signature is `sig` (the header's
    /// `armed` field).
    pub fn arm(&self, run: u64, sig: u64) {
        self.armed_sig.store(sig, SeqCst);
        self.armed.store(run + 1, SeqCst);
    }
    /// The armed run and its signature, if the segment was ever armed ([`Header::arm`]).
    pub fn armed(&self) -> Option<(u64, u64)> {
        let a = self.armed.load(SeqCst);
        (a > 0).then(|| (a - 1, self.armed_sig.load(SeqCst)))
    }
    /// Sleep on this rank's wake word for up to `max`, unless `ready()` holds once registered
    /// as a waiter (whoever makes it hold bumps the wake word afterwards, so no wake is lost).
    pub fn sleep_unless(&self, ready: impl Fn() -> bool, max: Duration) {
        self.waiters.fetch_add(1, SeqCst);
        let w = self.wake.load(SeqCst);
        if !ready() {
            futex_wait(&self.wake, w, max);
        }
        self.waiters.fetch_sub(1, SeqCst);
    }
    /// Whether this header was reset for run `run` (its owner loaded it for this collective).
    pub fn is_run(&self, run: u64) -> bool {
        self.magic.load(SeqCst) == MAGIC && self.run.load(SeqCst) == run
    }
}

/// A failure's kind as a header word: its place in [`ErrorKind::ALL`] plus one (0: none).
pub fn cause_code(kind: ErrorKind) -> u32 {
    ErrorKind::ALL
        .iter()
        .position(|&k| k == kind)
        .map_or(0, |i| i as u32 + 1)
}

/// The kind of a [`cause_code`] (`None` for 0 or an unknown code).
fn kind_of_code(code: u32) -> Option<ErrorKind> {
    (code as usize)
        .checked_sub(1)
        .and_then(|i| ErrorKind::ALL.get(i).copied())
}

pub(crate) fn futex_wait(word: &AtomicU32, seen: u32, max: Duration) {
    let ts = libc::timespec {
        tv_sec: max.as_secs() as libc::time_t,
        tv_nsec: max.subsec_nanos() as libc::c_long,
    };
    // SAFETY: a shared futex wait on a live, aligned 32-bit word with a relative timeout.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            seen,
            &ts as *const libc::timespec,
            std::ptr::null::<u32>(),
            0,
        );
    }
}

pub(crate) fn futex_wake_all(word: &AtomicU32) {
    // SAFETY: a shared futex wake on a live, aligned 32-bit word.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, i32::MAX);
    }
}

/// How this executor reaches one rank of the run: the rank's own device segment, mapped (a
/// rank on this host, or this rank), or the shadow of it with the link to its process (a rank
/// on another host, `shadow`).
#[derive(Debug, Clone)]
pub enum PeerSeg {
    /// A segment in this host's shared memory.
    Local(Arc<Segment>),
    /// Another host's rank: its shadow, and where its signals and this rank's state go.
    Remote(Arc<Shadow>, Arc<dyn Signal>),
}

impl PeerSeg {
    /// The bytes the machine maps.
    pub fn bytes(&self) -> Arc<dyn ExternalBytes> {
        match self {
            PeerSeg::Local(s) => s.clone(),
            PeerSeg::Remote(s, _) => s.clone(),
        }
    }
    fn ptr(&self) -> *mut u8 {
        match self {
            PeerSeg::Local(s) => s.as_ptr(),
            PeerSeg::Remote(s, _) => s.base_ptr(),
        }
    }
    fn len(&self) -> usize {
        match self {
            PeerSeg::Local(s) => Segment::len(s),
            PeerSeg::Remote(s, _) => ExternalBytes::len(&**s),
        }
    }
    /// The segment's name.
    pub fn name(&self) -> &str {
        match self {
            PeerSeg::Local(s) => s.name(),
            PeerSeg::Remote(s, _) => s.name(),
        }
    }
    /// Whether the rank is on another host.
    pub fn is_remote(&self) -> bool {
        matches!(self, PeerSeg::Remote(..))
    }
    /// Its header page (for a remote rank: what it last said, module doc of `shadow`).
    pub fn header(&self) -> &Header {
        match self {
            PeerSeg::Local(s) => header_of(&**s),
            PeerSeg::Remote(s, _) => header_of(&**s),
        }
    }
    /// Whether two handles name the same memory.
    pub fn same(&self, o: &PeerSeg) -> bool {
        match (self, o) {
            (PeerSeg::Local(a), PeerSeg::Local(b)) => Arc::ptr_eq(a, b),
            (PeerSeg::Remote(a, _), PeerSeg::Remote(b, _)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

/// The executors of one run as rank `me` sees them through the ranks' device segments.
#[derive(Debug)]
pub struct SegPeers {
    segs: Vec<PeerSeg>,
    layouts: Vec<Layout>,
    me: usize,
    /// The lowest rank on this host: its header's epoch word is the run's epoch on this host
    /// (every local executor and the proxy's receiver bump it).
    epoch_rank: usize,
    /// Global ids in rank order (for messages).
    group: Vec<u32>,
    /// Why the job failed (a dead process), checked while waiting.
    job_error: fn() -> Option<Error>,
    /// More ranks than cores ([`oversubscribed`]): waits hardly spin.
    oversubscribed: bool,
}

impl SegPeers {
    /// The peers of rank `me` of `group`, whose segments are `segs` (rank order).
    pub fn new(
        segs: Vec<PeerSeg>,
        layouts: Vec<Layout>,
        me: usize,
        group: Vec<u32>,
        job_error: fn() -> Option<Error>,
    ) -> SegPeers {
        let local = segs.iter().filter(|s| !s.is_remote()).count();
        SegPeers {
            oversubscribed: oversubscribed(local),
            epoch_rank: segs.iter().position(|s| !s.is_remote()).unwrap_or(me),
            segs,
            layouts,
            me,
            group,
            job_error,
        }
    }
    fn hdr(&self, q: usize) -> &Header {
        self.segs[q].header()
    }
    fn remote(&self, q: usize) -> bool {
        self.segs[q].is_remote()
    }
    /// Whether any rank of the run is on another host.
    pub fn spans_hosts(&self) -> bool {
        self.segs.iter().any(PeerSeg::is_remote)
    }
    /// The segment holding this host's epoch word (the proxy's receiver bumps it too).
    pub fn epoch_segment(&self) -> &PeerSeg {
        &self.segs[self.epoch_rank]
    }
    /// Tell every remote rank this rank's state (ordered after every signal sent before), with
    /// the cause of a failure ([`cause_code`]) in the upper half of the state word.
    fn tell_remote(&self, state: RankState, cause: u32, why: &str) {
        let run = self.hdr(self.me).run.load(SeqCst);
        for s in &self.segs {
            if let PeerSeg::Remote(_, link) = s {
                link.state(run, state as u32 | (cause << 16), why);
            }
        }
    }
    /// The queue words of rank `q`'s TOP_SP with its EVT_SEM block at `sem_off`.
    fn queue_words(&self, q: usize, sem_off: usize) -> &[AtomicU64; 4] {
        let off = sem_off + QUEUE_WORDS_AT;
        assert!(off + 32 <= self.segs[q].len(), "laid out");
        // SAFETY: in bounds (above), 8-aligned (offsets are multiples of 64 in a page-aligned
        // mapping); atomics accept any bytes.
        unsafe { &*(self.segs[q].ptr().add(off) as *const [AtomicU64; 4]) }
    }
    fn run_word(&self) -> &AtomicU32 {
        &self.hdr(self.epoch_rank).epoch
    }
    /// Rank `q` may have something to do: bump the epoch and wake `q` if it sleeps (a rank on
    /// another host is woken by the proxy's messages instead).
    fn wake(&self, q: usize) {
        if self.remote(q) {
            return;
        }
        self.run_word().fetch_add(1, SeqCst);
        let h = self.hdr(q);
        h.wake.fetch_add(1, SeqCst);
        if h.waiters.load(SeqCst) > 0 {
            futex_wake_all(&h.wake);
        }
    }
    /// Wake every rank (this one ended, or changed its state).
    pub fn wake_all(&self) {
        (0..self.segs.len()).for_each(|q| self.wake(q));
    }
    /// Every rank's segment, in rank order.
    pub fn segments(&self) -> &[PeerSeg] {
        &self.segs
    }
    /// Check that every rank's segment was loaded for run `run` (the go meeting guarantees it;
    /// anything else is a protocol fault, reported rather than run into).
    pub fn check_loaded(&self, run: u64) -> Result<()> {
        // A remote rank's shadow holds what it last said, maybe of an earlier run: the go
        // meeting is the only check for it.
        match (0..self.segs.len()).find(|&q| !self.remote(q) && !self.hdr(q).is_run(run)) {
            None => Ok(()),
            Some(q) => Err(Error::failure(format!(
                "device segment {:?} of {} is not loaded for this collective (run {run}): a \
                 stale or foreign segment",
                self.segs[q].name(),
                self.who(q)
            ))),
        }
    }
    /// Whether rank `q` has finished this rank's run (done or failed, or moved on to a later one).
    pub fn finished(&self, q: usize) -> bool {
        let run = self.hdr(self.me).run.load(SeqCst);
        let h = self.hdr(q);
        let (at, ended) = (
            h.run.load(SeqCst),
            matches!(h.state(), RankState::Done | RankState::Failed),
        );
        match self.remote(q) {
            // A shadow lags: only this run's end (or a later run) counts.
            true => at > run || (at == run && ended),
            false => at != run || ended,
        }
    }
    /// Wait until every other rank of this run on this host has finished (done or failed):
    /// after that nobody writes into this rank's segment again. Fails if a process of the job
    /// died, or after `deadline`, naming the ranks still running.
    ///
    /// Ranks on other hosts are not waited for: everything one of them writes into this
    /// segment comes through the proxy, on one ordered link, before the semaphore change that
    /// says it is there, and this rank consumed every change meant for it before it finished
    /// (a verified program's semaphores balance). What such a rank sends for a later run is
    /// held by the proxy until this segment is armed for it (`proxy`, "Runs").
    ///
    /// `give_up` is asked too, while waiting: an error from it ends the wait with it.
    pub fn wait_finished(
        &self,
        deadline: Option<Duration>,
        give_up: impl Fn() -> Option<Error>,
    ) -> Result<()> {
        let start = std::time::Instant::now();
        let me = self.hdr(self.me);
        let finished = |q: usize| self.remote(q) || self.finished(q);
        spin_then_yield(self.oversubscribed, || {
            (0..self.segs.len()).all(|q| q == self.me || finished(q))
        });
        loop {
            me.waiters.fetch_add(1, SeqCst);
            let w = me.wake.load(SeqCst);
            let running: Vec<usize> = (0..self.segs.len())
                .filter(|&q| q != self.me && !finished(q))
                .collect();
            if running.is_empty() {
                me.waiters.fetch_sub(1, SeqCst);
                return Ok(());
            }
            if let Some(e) = (self.job_error)()
                .or_else(|| self.lost_remote())
                .or_else(&give_up)
            {
                me.waiters.fetch_sub(1, SeqCst);
                return Err(e);
            }
            if deadline.is_some_and(|d| start.elapsed() >= d) {
                me.waiters.fetch_sub(1, SeqCst);
                let who: Vec<String> = running.iter().map(|&q| self.who(q)).collect();
                return Err(Error::new(
                    ErrorKind::Timeout,
                    format!(
                        "{} still running {:.1} s after this rank finished",
                        who.join(", "),
                        start.elapsed().as_secs_f64()
                    ),
                ));
            }
            futex_wait(&me.wake, w, crate::device::peers::POLL);
            me.waiters.fetch_sub(1, SeqCst);
        }
    }
    /// Whether every other rank of this run has started its executor (left `Loading`),
    /// waiting for it up to `max`. Only the in-run fault injection needs it: a process that
    /// dies "inside the run" must die after its peers have mapped every segment and are
    /// stepping, or a peer still mapping meets a missing name instead of a stuck step.
    pub fn others_started(&self, max: Duration) -> bool {
        let start = std::time::Instant::now();
        let run = self.hdr(self.me).run.load(SeqCst);
        let started = |q: usize| {
            let h = self.hdr(q);
            q == self.me
                || self.remote(q)
                || h.run.load(SeqCst) != run
                || h.state() != RankState::Loading
        };
        while start.elapsed() < max {
            if (0..self.segs.len()).all(started) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        false
    }
    /// The first rank on another host that has not finished and whose process is lost
    /// (`proxy`'s liveness: its network went silent), as the error of this run.
    fn lost_remote(&self) -> Option<Error> {
        (0..self.segs.len())
            .filter(|&q| q != self.me && !self.finished(q))
            .find_map(|q| match &self.segs[q] {
                PeerSeg::Remote(_, link) => link.lost().map(|why| {
                    Error::new(ErrorKind::NetworkProxy, format!("{}: {why}", self.who(q)))
                        .with_rank(q as u32)
                }),
                PeerSeg::Local(_) => None,
            })
    }
    /// The [`SemNotify`] of rank `q`'s blocks as this executor writes them.
    pub fn notify_for(self: &Arc<Self>, q: usize) -> Arc<dyn SemNotify> {
        Arc::new(RankWake {
            peers: self.clone(),
            q,
        })
    }
    fn who(&self, q: usize) -> String {
        match self.remote(q) {
            true => format!(
                "rank {q} (global id {}, process {} on another host)",
                self.group[q],
                self.hdr(q).pid()
            ),
            false => format!(
                "rank {q} (global id {}, process {})",
                self.group[q],
                self.hdr(q).pid()
            ),
        }
    }
}

/// Wakes one rank (module doc).
#[derive(Debug)]
struct RankWake {
    peers: Arc<SegPeers>,
    q: usize,
}

impl SemNotify for RankWake {
    fn changed(&self, _: u8, _: crate::device::sema::SemOp) {
        self.peers.wake(self.q);
    }
}

/// How a waiter of the shared device spins, then yields, before it sleeps on its futex
/// (`OPENNRT_WAIT_SPIN_US`, `OPENNRT_WAIT_YIELD_US`; applied at `nrt_init` by [`set_waits`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Waits {
    /// How long it spins when every rank of the job can have a core of its own. Default
    /// 20 µs, a few steps of a small collective: a peer on the other core usually answers
    /// well within it, and a futex sleep + wake costs two context switches (tens of µs on
    /// this VM).
    pub spin: Duration,
    /// Until when (from the wait's start) it yields before it sleeps. Default 300 µs:
    /// yielding hands the core to a runnable peer at a fraction of a futex round trip's cost.
    pub yield_until: Duration,
}

impl Default for Waits {
    fn default() -> Waits {
        Waits {
            spin: Duration::from_nanos(DEFAULT_SPIN_NS),
            yield_until: Duration::from_nanos(DEFAULT_YIELD_NS),
        }
    }
}

const DEFAULT_SPIN_NS: u64 = 20_000;
const DEFAULT_YIELD_NS: u64 = 300_000;

/// The waits in force, in nanoseconds (read by every wait, so atomics).
static SPIN_NS: AtomicU64 = AtomicU64::new(DEFAULT_SPIN_NS);
static YIELD_NS: AtomicU64 = AtomicU64::new(DEFAULT_YIELD_NS);

/// Apply `w` to every later wait of this process (`nrt_init`).
pub fn set_waits(w: Waits) {
    SPIN_NS.store(w.spin.as_nanos().min(u64::MAX as u128) as u64, Relaxed);
    YIELD_NS.store(
        w.yield_until.as_nanos().min(u64::MAX as u128) as u64,
        Relaxed,
    );
}

/// The spin when the job has more ranks than the machine has cores: about 2 µs. A waiter
/// then most likely waits for a rank that needs its core, so it yields almost at once
/// (2000 spin-loop hints were 53 µs on this AMD EPYC, burnt while the peer it waited for
/// could not run: 8 processes at 4 KiB took 1.8 ms per all-reduce).
const SPIN_OVERSUBSCRIBED: u32 = 64;

/// Whether `ranks` ranks on this machine (one thread or process each) outnumber its cores.
pub(crate) fn oversubscribed(ranks: usize) -> bool {
    static CPUS: once_cell::sync::Lazy<usize> = once_cell::sync::Lazy::new(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    ranks > *CPUS
}

/// The first phases of every wait on the shared device: spin (briefly, or hardly at all when
/// `oversubscribed`), then yield, until `ready()` holds (returns true) or [`Waits::yield_until`] has
/// passed (returns false: the caller sleeps on its futex and checks everything else).
pub(crate) fn spin_then_yield(oversubscribed: bool, ready: impl Fn() -> bool) -> bool {
    let start = Instant::now();
    if oversubscribed {
        for _ in 0..SPIN_OVERSUBSCRIBED {
            if ready() {
                return true;
            }
            std::hint::spin_loop();
        }
    } else {
        let spin = Duration::from_nanos(SPIN_NS.load(Relaxed));
        while start.elapsed() < spin {
            for _ in 0..32 {
                if ready() {
                    return true;
                }
                std::hint::spin_loop();
            }
        }
    }
    let yield_until = Duration::from_nanos(YIELD_NS.load(Relaxed));
    while start.elapsed() < yield_until {
        if ready() {
            return true;
        }
        std::thread::yield_now();
    }
    ready()
}

impl Peers for SegPeers {
    fn epoch(&self) -> u32 {
        self.run_word().load(SeqCst)
    }
    fn wait(&self, seen: u32, max: Duration) {
        // Spin, then yield, before sleeping (`spin_then_yield`): a peer on the other core
        // usually answers within microseconds, and on an oversubscribed machine the waiter
        // hands its core to the rank it waits for.
        if spin_then_yield(self.oversubscribed, || self.epoch() != seen) {
            return;
        }
        // A writer bumps the epoch before the wake word, so either the check sees it or the
        // futex word has moved.
        self.hdr(self.me).sleep_unless(|| self.epoch() != seen, max);
    }
    fn running(&self) {
        self.hdr(self.me).set_state(RankState::Running);
    }
    fn blocked(&self, seen: u32) {
        let h = self.hdr(self.me);
        h.blocked_at.store(seen, SeqCst);
        h.set_state(RankState::Blocked);
    }
    fn done(&self) {
        self.hdr(self.me).set_state(RankState::Done);
        self.tell_remote(RankState::Done, 0, "");
        self.wake_all();
    }
    fn failed(&self, e: &Error) {
        let cause = cause_code(e.kind());
        if self.hdr(self.me).state() != RankState::Failed {
            self.tell_remote(RankState::Failed, cause, e.message());
        }
        self.hdr(self.me).fail_as(cause, e.message());
        self.wake_all();
    }
    fn all_blocked(&self, seen: u32) -> Option<String> {
        // Across hosts there is no one epoch to agree on: a hang is the execution timeout's.
        if self.spans_hosts() {
            return None;
        }
        let stuck = (0..self.segs.len()).all(|q| {
            let h = self.hdr(q);
            match h.state() {
                RankState::Done => true,
                RankState::Blocked => h.blocked_at.load(SeqCst) == seen,
                _ => false,
            }
        });
        (stuck && self.epoch() == seen).then(|| self.states())
    }
    fn states(&self) -> String {
        let all: Vec<String> = (0..self.segs.len())
            .map(|q| format!("{}: {:?}", self.who(q), self.hdr(q).state()))
            .collect();
        all.join(", ")
    }
    fn publish_queues(&self, chip: u8, topsp: u8, idx: [u64; 4]) {
        let lay = &self.layouts[self.me];
        if lay.chip != chip {
            return;
        }
        if let Some(&(_, off)) = lay.sems.iter().find(|(d, _)| *d == topsp) {
            let w = self.queue_words(self.me, off);
            for (word, v) in w.iter().zip(idx) {
                word.store(v, SeqCst);
            }
        }
    }
    fn remote_rings(&self) -> Vec<RemoteRing> {
        let mut out = Vec::new();
        for (q, lay) in self
            .layouts
            .iter()
            .enumerate()
            .filter(|(q, _)| *q != self.me && !self.remote(*q))
        {
            for (&(topsp, off), places) in lay.sems.iter().zip(&lay.topsps) {
                let w = self.queue_words(q, off);
                out.push(RemoteRing {
                    rank: q as u32,
                    chip: lay.chip,
                    topsp,
                    base: places[3].base,
                    len: places[3].len / 16,
                    head: w[2].load(SeqCst),
                    tail: w[3].load(SeqCst),
                });
            }
        }
        out
    }
    fn check(&self) -> Result<()> {
        // A dead process first: it is the cause when a peer failed because of it.
        if let Some(e) = (self.job_error)() {
            return Err(e);
        }
        if let Some(e) = self.lost_remote() {
            return Err(e);
        }
        // A rank on another host whose process left (`nrt_close`) sends nothing more; its
        // "done" would have come before its goodbye, on the same link. It is a missing
        // participant, as a dead one is (1200, docs/contract/abi.md §5.8; the bootstrap says
        // the same of a process that left). When that process had lost a peer first, the
        // network is the cause (its failed collective's kind does not reach a rank already in
        // the next one), so the kind is the network's, as there.
        if let Some(q) = (0..self.segs.len()).find(|&q| {
            q != self.me
                && !self.finished(q)
                && matches!(&self.segs[q], PeerSeg::Remote(_, link) if link.left())
        }) {
            let after_loss =
                matches!(&self.segs[q], PeerSeg::Remote(_, link) if link.left_after_loss());
            let e = match after_loss {
                true => Error::new(
                    ErrorKind::NetworkProxy,
                    format!(
                        "{} left the job (nrt_close) before it finished this collective, after \
                         its process had lost a peer on another host (no word within \
                         OPENNRT_NET_PEER_TIMEOUT)",
                        self.who(q)
                    ),
                ),
                false => Error::new(
                    ErrorKind::CollectivesHang,
                    format!(
                        "{} left the job (nrt_close) before it finished this collective",
                        self.who(q)
                    ),
                ),
            };
            return Err(e.with_rank(q as u32));
        }
        for q in (0..self.segs.len()).filter(|&q| q != self.me) {
            let h = self.hdr(q);
            if h.state() == RankState::Failed {
                // This rank is stuck because of the peer: a hang, unless the peer lost the
                // network (then the network is every rank's cause).
                let kind = match h.cause() {
                    Some(ErrorKind::NetworkProxy) => ErrorKind::NetworkProxy,
                    _ => ErrorKind::CollectivesHang,
                };
                return Err(Error::new(
                    kind,
                    format!("{} failed: {}", self.who(q), h.message()),
                ));
            }
        }
        Ok(())
    }
}

//! The network proxy (docs/design.md §2.7, "Several hosts"): how the ranks of one collective
//! that live on different hosts reach each other, as the vendor's host proxy threads carry the
//! inter-node legs over EFA (`enc_proxy_task`, which posts the sends and receives and bumps the
//! device semaphores on completion).
//!
//! One proxy per process, started the first time one of its collectives spans hosts: one
//! libfabric RDM endpoint (`net::fabric`, libfabric loaded then and only then), bound to the
//! address the process's bootstrap connection uses (so it is on the interface that reaches the
//! other hosts), and one thread that owns it. The endpoint's address travels in the go meeting
//! ([`super::wire::SegmentAt::net`]).
//!
//! **What travels.** Messages, each one libfabric send. Each carries its sender's proxy id and
//! its number on the link from that sender to this process; the receiver applies every
//! sender's messages in that order, holding back one that completes early (the provider
//! completes receives in any order: a large message, sent by rendezvous, after later small
//! ones):
//!
//! | kind | header fields | body |
//! |---|---|---|
//! | `DATA` | target segment id, byte offset, run, go signature, sender's segment id | bytes the sender's DMA wrote into its shadow of the target (at most [`CHUNK`] per message) |
//! | `SEM` | target segment id, EVT_SEM block offset, index and change, run, go signature, sender's segment id | — |
//! | `STATE` | sender's segment id and bytes, run, state | the sender's segment name, NUL, why it failed |
//! | `PING` | — | — (the sender is alive: sent on a new link and every [`HEARTBEAT`] of silence) |
//! | `BYE` | arg: 1 when the sender lost a peer before it stopped, else 0 | — (the sender's proxy stops: `nrt_close`; it is not lost, only gone) |
//!
//! The sender's executor hands a semaphore change with the ranges written before it
//! (`shadow::RemoteSem`); the proxy sends the data, then the change. The receiver copies the
//! data into its segment, then applies the change to its block and wakes its executor (the
//! host's epoch and the rank's wake word, as a local peer's write does), so data is visible
//! before its signal, exactly as the descriptor orders them.
//!
//! **Runs.** `DATA` and `SEM` carry the run (the collective's number in its group) and the go
//! signature of the sender's collective (`go_board::signature`), as the sender's segment was
//! armed for it (`segment::Header::arm`). The receiver applies a message only to a segment
//! armed for that very run: one for a later run is held, in arrival order, until the rank has
//! loaded that run and arms its segment ([`Proxy::arm`]); one for an earlier run is stale and
//! dropped with a warning. So a peer on another host may start a run before this rank has
//! loaded it, with no meeting in between (`run`, "Repeats across hosts"). A signature that
//! differs from the armed one means the two ranks run different collectives: the sender's
//! shadow is marked failed with both signatures, and this rank's run fails naming it.
//!
//! **Credits.** At most [`WINDOW`] sends per peer are outstanding; the rest wait in that
//! peer's queue, in order. The receiver keeps [`RECVS`] buffers posted, each re-posted once
//! handled; the provider holds what arrives beyond them (rxm's unexpected queue) rather than
//! dropping it.
//!
//! **Faults.** A failed send or receive completion fails the proxy with `NRT_NETWORK_PROXY_FAILURE`
//! (naming the peer), and every rank waiting in a run spanning hosts sees it at once through
//! [`error`]. A cut cable fails nothing by itself (TCP only retries), so liveness is the
//! proxy's own: every linked peer hears from this process at least every [`HEARTBEAT`], and a
//! peer process silent for longer than `OPENNRT_NET_PEER_TIMEOUT` (while it has not said
//! goodbye) is *lost*: a run waiting on one of its ranks fails with
//! `NRT_NETWORK_PROXY_FAILURE` naming the rank, its host's address and the step this rank is
//! stuck at ([`Signal::lost`]). At shutdown the proxy says goodbye to every peer and drains
//! what it still has to send, except to lost peers.

use std::collections::{HashMap, VecDeque};
use std::io::IoSlice;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use once_cell::sync::Lazy;
use parking_lot::Mutex;

use super::segment::{cause_code, futex_wake_all, header, header_of, RankState};
use super::shadow::{seg_id, Shadow, Signal};
use super::shm::Segment;
use super::wire::SegmentAt;
use crate::device::sema::{ExternalBytes, SemBlock, SemOp};
use crate::error::{Error, ErrorKind, Result};
use crate::net::fabric::{CompletionKind, Endpoint, Waker};

/// Largest data payload of one message. Choice: 1 MiB, large enough that a 64 MiB leg is 64
/// messages, small enough that the receive pool stays [`RECVS`] MiB.
pub const CHUNK: usize = 1 << 20;
/// The smallest `DATA` payload sent from the shadow in place (`Lent`); a smaller one is
/// copied into its frame. Choice: 64 KiB. A lent range holds the rank's next run until its
/// send completes (tens of µs after the peer has it), which cost a 4 KiB all-reduce on
/// 2 hosts × 1 rank about 50 µs; copying 64 KiB costs a few µs.
pub const LEND_FROM: usize = 64 << 10;
/// Outstanding sends per peer.
pub const WINDOW: usize = 32;
/// Receive buffers kept posted.
pub const RECVS: usize = 16;
/// Bytes of a message header.
const HEAD: usize = 72;
/// Where a header carries its sender's proxy id and its sequence number on that link.
const FROM_AT: usize = 40;
const SEQ_AT: usize = 48;
/// Where a header carries the go signature and the sender's segment id (module doc, "Runs").
const SIG_AT: usize = 56;
const SRC_AT: usize = 64;
const MAGIC: u32 = 0x5850_4e4f; // "ONPX"
const DATA: u32 = 1;
const SEM: u32 = 2;
const STATE: u32 = 3;
const PING: u32 = 4;
const BYE: u32 = 5;
/// How long the proxy keeps polling its completion queue (yielding between polls) after its
/// last send or completion before it sleeps in `fi_cq_sread`, when its host has a core for it
/// ([`Proxy::set_spin`]): a collective's next message usually comes within it, and a wake from
/// `fi_cq_sread` costs tens of µs here. Choice: 100 µs, measured on this 2-core machine with
/// 2 hosts × 1 rank at 4 KiB (nrt_allreduce, 3 runs of 1000): no spin 270–360 µs per
/// all-reduce, 50 µs 265–276, 100 µs 201–239, 200 µs 200–254.
const SPIN_FOR: Duration = Duration::from_micros(100);
/// How often the proxy tells each peer process it links to that it is alive, when it has sent
/// that peer nothing else for as long. Choice: 0.5 s, ten beats within the default
/// [`crate::runtime::config::NET_PEER_TIMEOUT_ENV`].
pub const HEARTBEAT: Duration = Duration::from_millis(500);

/// A message header (module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Head {
    kind: u32,
    seg: u64,
    off: u64,
    arg: u64,
    run: u64,
    sig: u64,
    src: u64,
}

impl Head {
    fn encode(&self) -> [u8; HEAD] {
        let mut b = [0u8; HEAD];
        b[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        b[4..8].copy_from_slice(&self.kind.to_le_bytes());
        b[8..16].copy_from_slice(&self.seg.to_le_bytes());
        b[16..24].copy_from_slice(&self.off.to_le_bytes());
        b[24..32].copy_from_slice(&self.arg.to_le_bytes());
        b[32..40].copy_from_slice(&self.run.to_le_bytes());
        b[SIG_AT..SRC_AT].copy_from_slice(&self.sig.to_le_bytes());
        b[SRC_AT..HEAD].copy_from_slice(&self.src.to_le_bytes());
        b
    }
    /// The sender's proxy id and the message's number on its link to this process.
    fn link_seq(b: &[u8]) -> (u64, u64) {
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        (u64_at(FROM_AT), u64_at(SEQ_AT))
    }
    fn decode(b: &[u8]) -> Option<Head> {
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        (b.len() >= HEAD && u32_at(0) == MAGIC).then(|| Head {
            kind: u32_at(4),
            seg: u64_at(8),
            off: u64_at(16),
            arg: u64_at(24),
            run: u64_at(32),
            sig: u64_at(SIG_AT),
            src: u64_at(SRC_AT),
        })
    }
}

/// A semaphore change as a header's `arg`: index (bits 7:0), change (15:8), value (63:32).
fn sem_arg(idx: u8, op: SemOp) -> u64 {
    let (code, v): (u64, i32) = match op {
        SemOp::Set(v) => (0, v),
        SemOp::Add(v) => (1, v),
        SemOp::Sub(v) => (2, v),
        SemOp::Event(on) => (3, i32::from(on)),
    };
    u64::from(idx) | (code << 8) | (u64::from(v as u32) << 32)
}

fn sem_of(arg: u64) -> Option<(u8, SemOp)> {
    let v = (arg >> 32) as u32 as i32;
    let op = match (arg >> 8) & 0xff {
        0 => SemOp::Set(v),
        1 => SemOp::Add(v),
        2 => SemOp::Sub(v),
        3 => SemOp::Event(v != 0),
        _ => return None,
    };
    Some((arg as u8, op))
}

/// One message waiting to be sent or in flight: its header (and, for a small message, its
/// body) in one heap buffer, and for `DATA` the written bytes of a shadow, sent in place
/// ([`Lent`]). The provider reads both until the send completes, so neither may move or
/// change while the frame itself moves between queues.
#[derive(Debug)]
struct Frame {
    bytes: Vec<u8>,
    lent: Option<Lent>,
}

impl Frame {
    fn new(head: &Head, body: &[u8]) -> Frame {
        let mut bytes = Vec::with_capacity(HEAD + body.len());
        bytes.extend_from_slice(&head.encode());
        bytes.extend_from_slice(body);
        Frame { bytes, lent: None }
    }
}

/// Bytes of a shadow that a `DATA` frame sends in place, without a copy. The shadow counts
/// them lent until the frame is dropped (its send completed, or the proxy gave it up), and
/// a rank does not start a run while its shadows have bytes lent (`run`), so nothing the
/// executor writes changes a send in flight. Within a run, a program writes a range of a
/// peer again only after that peer said it consumed it, so after it arrived: after the
/// provider read it.
#[derive(Debug)]
struct Lent {
    shadow: Arc<Shadow>,
    off: usize,
    len: usize,
}

impl Lent {
    fn new(shadow: &Arc<Shadow>, off: usize, len: usize) -> Lent {
        shadow.lend();
        Lent {
            shadow: shadow.clone(),
            off,
            len,
        }
    }
    fn bytes(&self) -> &[u8] {
        // SAFETY: in bounds of the live shadow (the range came from its write log), which
        // the executor does not write while it is lent (type doc).
        unsafe { std::slice::from_raw_parts(self.shadow.base_ptr().add(self.off), self.len) }
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        self.shadow.give_back();
    }
}

/// A segment of this process that peers on other hosts write into.
#[derive(Debug)]
struct Target {
    seg: Arc<Segment>,
    /// The segment whose header holds this host's epoch for the segment's run.
    epoch: Mutex<Option<Arc<Segment>>>,
    /// `DATA` and `SEM` messages for a run the segment is not armed for yet, in arrival order
    /// (module doc, "Runs"); the lock also orders a message's check against [`Proxy::arm`].
    held: Mutex<Vec<Vec<u8>>>,
}

impl Target {
    fn wake(&self) {
        wake(&self.seg, self.epoch.lock().as_ref());
    }
}

/// A remote rank's shadow and the local segments whose ranks wait on what it says.
#[derive(Debug)]
struct ShadowEntry {
    shadow: Arc<Shadow>,
    watchers: Mutex<Vec<Arc<Segment>>>,
}

/// The process's proxy (module doc).
#[derive(Debug)]
pub struct Proxy {
    addr: Vec<u8>,
    provider: String,
    queue: Mutex<Vec<(Vec<u8>, Frame)>>,
    waker: Waker,
    targets: Mutex<HashMap<u64, Arc<Target>>>,
    shadows: Mutex<HashMap<u64, Arc<ShadowEntry>>>,
    failed: Mutex<Option<Error>>,
    /// Per peer process ([`peer_id`] of its endpoint address): when it last sent anything, or
    /// when this process first linked to it.
    alive: Mutex<HashMap<u64, Instant>>,
    /// Peer processes that said goodbye.
    closed: Mutex<std::collections::HashSet<u64>>,
    /// Peer processes whose goodbye said they had lost a peer before they left ([`BYE`]'s arg).
    closed_lost: Mutex<std::collections::HashSet<u64>>,
    /// Whether this process found a peer lost ([`Proxy::lost`]): its goodbye says so, so a
    /// rank that waits on one of its ranks in a later collective reports the network as the
    /// cause, not a plain departure (found by capi-tests/hosts/chaos.sh: 15 % packet loss).
    lost_seen: AtomicBool,
    /// The endpoint address of every peer process this one linked to.
    linked: Mutex<HashMap<u64, Vec<u8>>>,
    /// How long a linked peer process may stay silent before it is lost (module doc).
    lost_after: Duration,
    stop: AtomicBool,
    /// Whether the proxy polls for [`SPIN_FOR`] before it sleeps ([`Proxy::set_spin`]).
    spin: AtomicBool,
    stopping_since: Mutex<Option<Instant>>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

static PROXY: Lazy<Mutex<Option<Arc<Proxy>>>> = Lazy::new(|| Mutex::new(None));

/// This process's endpoint address, empty while it has no proxy.
pub fn address() -> Vec<u8> {
    PROXY
        .lock()
        .as_ref()
        .map(|p| p.addr.clone())
        .unwrap_or_default()
}

/// The proxy, if this process started one.
pub fn running() -> Option<Arc<Proxy>> {
    PROXY.lock().clone()
}

/// The proxy's failure, if it failed.
pub fn error() -> Option<Error> {
    let p = PROXY.lock().clone();
    p.and_then(|p| p.failed.lock().clone())
}

/// A peer process's id on the wire: [`seg_id`] of its endpoint address in hex (a header's
/// sender field).
fn peer_id(addr: &[u8]) -> u64 {
    seg_id(&hex(addr))
}

/// The process's proxy, started on first use (module doc), its endpoint bound to `bind`; a
/// linked peer silent for `lost_after` is lost.
pub fn start(bind: Option<std::net::IpAddr>, lost_after: Duration) -> Result<Arc<Proxy>> {
    let mut g = PROXY.lock();
    if let Some(p) = &*g {
        return Ok(p.clone());
    }
    let mut ep = Endpoint::open(bind).map_err(|e| {
        e.context("a collective spans hosts: opening this process's network endpoint")
    })?;
    let p = Arc::new(Proxy {
        addr: ep.name()?,
        provider: ep.provider(),
        queue: Mutex::new(Vec::new()),
        waker: ep.waker(),
        targets: Mutex::new(HashMap::new()),
        shadows: Mutex::new(HashMap::new()),
        failed: Mutex::new(None),
        alive: Mutex::new(HashMap::new()),
        closed: Mutex::new(std::collections::HashSet::new()),
        closed_lost: Mutex::new(std::collections::HashSet::new()),
        lost_seen: AtomicBool::new(false),
        linked: Mutex::new(HashMap::new()),
        lost_after,
        stop: AtomicBool::new(false),
        spin: AtomicBool::new(false),
        stopping_since: Mutex::new(None),
        thread: Mutex::new(None),
    });
    let mut bufs: Vec<Box<[u8]>> = (0..RECVS)
        .map(|_| vec![0u8; HEAD + CHUNK].into_boxed_slice())
        .collect();
    for (i, b) in bufs.iter_mut().enumerate() {
        // SAFETY: the buffers move into the thread with the endpoint and outlive it there.
        if !unsafe { ep.post_recv(b.as_mut_ptr(), b.len(), i as u64)? } {
            return Err(Error::new(
                ErrorKind::NetworkProxy,
                "posting the proxy's receive buffers: the provider is out of resources",
            ));
        }
    }
    let me = p.clone();
    let t = std::thread::Builder::new()
        .name("opennrt-proxy".into())
        .spawn(move || {
            let watch = me.clone();
            let served =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| me.serve(ep, bufs)));
            if served.is_err() {
                // Every waiting rank finds the failure at once instead of its peers' silence.
                watch.fail(Error::new(
                    ErrorKind::NetworkProxy,
                    "the network proxy's thread panicked (a bug: please report it with this log)",
                ));
            }
        })
        .map_err(|e| Error::resource(format!("spawning the network proxy: {e}")))?;
    *p.thread.lock() = Some(t);
    crate::log_info!(
        "net",
        "network proxy up: libfabric provider {:?}, endpoint bound to {}",
        p.provider,
        bind.map_or("the provider's default".to_string(), |a| a.to_string())
    );
    *g = Some(p.clone());
    Ok(p)
}

/// Stop the proxy (`nrt_close`): its thread ends, its endpoint closes.
pub fn shutdown() {
    let p = PROXY.lock().take();
    if let Some(p) = p {
        p.stop.store(true, SeqCst);
        p.waker.wake();
        if let Some(t) = p.thread.lock().take() {
            let _ = t.join();
        }
    }
}

impl Proxy {
    /// `seg` is armed for a run (`segment::Header::arm`): peers on other hosts write into it
    /// from now on, and what they sent for that run before is applied now, in order (module
    /// doc, "Runs").
    pub fn arm(&self, seg: &Arc<Segment>) {
        let t = {
            let mut m = self.targets.lock();
            let t = m.entry(seg_id(seg.name())).or_insert_with(|| {
                Arc::new(Target {
                    seg: seg.clone(),
                    epoch: Mutex::new(None),
                    held: Mutex::new(Vec::new()),
                })
            });
            t.clone()
        };
        let mut held = t.held.lock();
        let armed = header(&t.seg).armed();
        for m in std::mem::take(&mut *held) {
            if let Some(h) = Head::decode(&m) {
                match fate(armed, &h) {
                    Fate::Hold => held.push(m),
                    f => self.apply(&t, &h, &m[HEAD..], f),
                }
            }
        }
    }
    /// Whether the proxy may poll briefly before it sleeps (`SPIN_FOR`): only while this
    /// host's ranks of the run leave a core for it; otherwise its polling would take the core
    /// from the rank it waits for.
    pub fn set_spin(&self, on: bool) {
        self.spin.store(on, SeqCst);
    }
    /// The run of `seg` keeps this host's epoch in `epoch`'s header.
    pub fn set_epoch(&self, seg: &Segment, epoch: &Arc<Segment>) {
        if let Some(t) = self.targets.lock().get(&seg_id(seg.name())) {
            *t.epoch.lock() = Some(epoch.clone());
        }
    }
    /// The shadow of remote segment `at`, kept across runs (its header is what the remote rank
    /// last said); `watcher`'s rank is woken whenever the remote rank says something.
    pub fn shadow(&self, at: &SegmentAt, watcher: &Arc<Segment>) -> Result<Arc<Shadow>> {
        let e = self.entry(&at.name, at.len as usize)?;
        let mut w = e.watchers.lock();
        if !w.iter().any(|s| Arc::ptr_eq(s, watcher)) {
            w.push(watcher.clone());
        }
        Ok(e.shadow.clone())
    }
    fn entry(&self, name: &str, len: usize) -> Result<Arc<ShadowEntry>> {
        let mut m = self.shadows.lock();
        if let Some(e) = m
            .get(&seg_id(name))
            .filter(|e| ExternalBytes::len(&*e.shadow) >= len)
        {
            return Ok(e.clone());
        }
        let e = Arc::new(ShadowEntry {
            shadow: Arc::new(Shadow::new(name, len)?),
            watchers: Mutex::new(Vec::new()),
        });
        m.insert(seg_id(name), e.clone());
        Ok(e)
    }
    /// The link from this process's segment `own` to the process holding remote `peer`.
    pub fn link(self: &Arc<Self>, peer: &SegmentAt, own: &Arc<Segment>) -> Arc<dyn Signal> {
        let id = peer_id(&peer.net);
        let new = {
            let mut a = self.alive.lock();
            let new = !a.contains_key(&id);
            a.entry(id).or_insert_with(Instant::now);
            new
        };
        if new {
            self.linked.lock().insert(id, peer.net.clone());
            // The peer hears of this process now, so both sides beat from the first run on
            // (a peer that has nothing to send this process in a long run is not silent).
            self.post(&peer.net, vec![ping(PING)]);
        }
        Arc::new(Link {
            proxy: self.clone(),
            to: peer.net.clone(),
            target: seg_id(&peer.name),
            own: own.clone(),
        })
    }
    /// How long ago the peer process at endpoint `addr` last sent this process anything, or
    /// this process linked to it (`None`: never linked).
    pub fn silent_for(&self, addr: &[u8]) -> Option<Duration> {
        self.alive.lock().get(&peer_id(addr)).map(Instant::elapsed)
    }
    /// Why the peer process at endpoint `addr` counts as lost: silent for longer than the
    /// proxy allows while it has not said goodbye (`None`: alive, gone, or never linked).
    pub fn lost(&self, addr: &[u8]) -> Option<String> {
        let id = peer_id(addr);
        if self.closed.lock().contains(&id) {
            return None;
        }
        let quiet = self.silent_for(addr)?;
        (quiet > self.lost_after).then(|| {
            self.lost_seen.store(true, SeqCst);
            format!(
                "no word from its host ({}) for {:.1} s, though every process's network proxy \
                 speaks at least every {:.1} s: the network between the hosts is down, or that \
                 process stopped (OPENNRT_NET_PEER_TIMEOUT = {} s)",
                describe(addr),
                quiet.as_secs_f64(),
                HEARTBEAT.as_secs_f64(),
                self.lost_after.as_secs_f64()
            )
        })
    }
    /// Whether the peer process at endpoint `addr` said goodbye (`nrt_close`).
    pub fn has_left(&self, addr: &[u8]) -> bool {
        self.closed.lock().contains(&peer_id(addr))
    }
    /// Whether the peer process at endpoint `addr` said goodbye after it had lost a peer.
    pub fn left_after_loss(&self, addr: &[u8]) -> bool {
        self.closed_lost.lock().contains(&peer_id(addr))
    }
    /// Why some linked peer process counts as lost (silent past the proxy's limit, without a
    /// goodbye), for a failure that cannot tell which rank it waited for (a go meeting whose
    /// ranks never all arrived).
    pub fn any_lost(&self) -> Option<String> {
        let linked: Vec<Vec<u8>> = self.linked.lock().values().cloned().collect();
        linked.iter().find_map(|a| self.lost(a))
    }
    fn post(&self, to: &[u8], frames: Vec<Frame>) {
        self.queue
            .lock()
            .extend(frames.into_iter().map(|f| (to.to_vec(), f)));
        self.waker.wake();
    }
    fn fail(&self, e: Error) {
        let mut f = self.failed.lock();
        if f.is_none() {
            crate::log_error!("net", "{}", e.message());
            *f = Some(e);
        }
        drop(f);
        // Every waiter rechecks and finds the failure.
        for t in self.targets.lock().values() {
            t.wake();
        }
    }

    /// The proxy thread (module doc).
    fn serve(self: Arc<Self>, mut ep: Endpoint, mut bufs: Vec<Box<[u8]>>) {
        let mut peers: HashMap<Vec<u8>, u64> = HashMap::new();
        let mut queued: HashMap<u64, VecDeque<Frame>> = HashMap::new();
        let mut inflight: HashMap<u64, (u64, Frame)> = HashMap::new();
        let mut per_peer: HashMap<u64, usize> = HashMap::new();
        let mut names: HashMap<u64, String> = HashMap::new();
        let mut next_ctx = RECVS as u64;
        let mut done = Vec::new();
        // Receive buffers completed in this round: (buffer, bytes or None for a failed one).
        let mut ready: Vec<(usize, Option<usize>)> = Vec::new();
        // Per peer: the next number this process stamps on a message to it.
        let mut link_seq: HashMap<u64, u64> = HashMap::new();
        // Per sender: the next number expected from it, and what arrived ahead of it.
        let mut expect: HashMap<u64, u64> = HashMap::new();
        let mut early: HashMap<u64, std::collections::BTreeMap<u64, Vec<u8>>> = HashMap::new();
        let me = peer_id(&self.addr);
        // Per peer: its endpoint address, and when this process last posted to it.
        let mut addrs: HashMap<u64, Vec<u8>> = HashMap::new();
        let mut last_sent: HashMap<u64, Instant> = HashMap::new();
        let mut beat = Instant::now();
        let mut said_bye = false;
        let mut last_active = Instant::now();
        loop {
            // Stopping: goodbye to every peer; what was handed over is still sent (a rank's
            // last "done" among it), for at most a few seconds, except to a lost peer.
            if self.stop.load(SeqCst) {
                if !said_bye {
                    said_bye = true;
                    let to: Vec<Vec<u8>> = addrs.values().cloned().collect();
                    let lost = self.lost_seen.load(SeqCst);
                    for a in to {
                        self.post(&a, vec![bye(lost)]);
                    }
                }
                // A peer that is lost or said goodbye will not take what is left for it.
                let closed = self.closed.lock().clone();
                let gone = |fi: &u64| {
                    addrs
                        .get(fi)
                        .is_some_and(|a| closed.contains(&peer_id(a)) || self.lost(a).is_some())
                };
                for (fi, q) in queued.iter_mut() {
                    if gone(fi) {
                        q.clear();
                    }
                }
                // Pings and goodbyes get a short grace only: nothing depends on their arrival.
                let stopping = *self.stopping_since.lock().get_or_insert_with(Instant::now);
                let grace = stopping.elapsed() > Duration::from_millis(200);
                let idle = self.queue.lock().is_empty()
                    && inflight
                        .values()
                        .all(|(fi, f)| gone(fi) || (grace && is_beat(&f.bytes)))
                    && queued.values().all(VecDeque::is_empty);
                // A broken job (a failed operation, a dead process) has nobody left to tell.
                let broken =
                    self.failed.lock().is_some() || super::bootstrap::job_error().is_some();
                if idle || broken || stopping.elapsed() > Duration::from_secs(5) {
                    break;
                }
            }
            // Every linked peer hears from this process at least every HEARTBEAT.
            if beat.elapsed() >= HEARTBEAT / 2 && !said_bye {
                beat = Instant::now();
                let closed = self.closed.lock().clone();
                for (&fi, a) in &addrs {
                    let quiet = last_sent.get(&fi).is_none_or(|t| t.elapsed() >= HEARTBEAT);
                    let q = queued.entry(fi).or_default();
                    if quiet && q.is_empty() && !closed.contains(&peer_id(a)) {
                        q.push_back(ping(PING));
                    }
                }
            }
            let new = std::mem::take(&mut *self.queue.lock());
            let mut busy = !new.is_empty();
            for (to, f) in new {
                let fi = match peers.get(&to) {
                    Some(&a) => a,
                    None => match ep.insert(&to) {
                        Ok(a) => {
                            peers.insert(to.clone(), a);
                            names.insert(a, describe(&to));
                            addrs.insert(a, to.clone());
                            a
                        }
                        Err(e) => {
                            self.fail(e.context("adding a peer's network address"));
                            continue;
                        }
                    },
                };
                queued.entry(fi).or_default().push_back(f);
            }
            for (&fi, q) in queued.iter_mut() {
                while per_peer.get(&fi).copied().unwrap_or(0) < WINDOW {
                    if q.is_empty() {
                        break;
                    }
                    let seq = *link_seq.entry(fi).or_default();
                    let f = q.front_mut().expect("front");
                    f.bytes[FROM_AT..SEQ_AT].copy_from_slice(&me.to_le_bytes());
                    f.bytes[SEQ_AT..SIG_AT].copy_from_slice(&seq.to_le_bytes());
                    let lent = f.lent.as_ref().map_or(&[][..], Lent::bytes);
                    let both = [IoSlice::new(&f.bytes), IoSlice::new(lent)];
                    let iov = if lent.is_empty() {
                        &both[..1]
                    } else {
                        &both[..]
                    };
                    // SAFETY: the frame's heap buffer stays alive and unchanged (in `inflight`)
                    // until its completion; moving the frame does not move it.
                    match unsafe { ep.post_send(fi, iov, next_ctx) } {
                        Ok(true) => {
                            last_sent.insert(fi, Instant::now());
                            let f = q.pop_front().expect("front");
                            *link_seq.entry(fi).or_default() += 1;
                            inflight.insert(next_ctx, (fi, f));
                            *per_peer.entry(fi).or_default() += 1;
                            next_ctx += 1;
                            busy = true;
                        }
                        Ok(false) => break,
                        Err(e) => {
                            self.fail(e.context(format!("sending to {}", names[&fi])));
                            q.clear();
                            break;
                        }
                    }
                }
            }
            done.clear();
            let polling = busy || !inflight.is_empty();
            let warm = self.spin.load(SeqCst) && last_active.elapsed() < SPIN_FOR;
            let got = match (polling, warm) {
                (true, _) => ep.poll(&mut done),
                (false, true) => {
                    let r = ep.poll(&mut done);
                    if done.is_empty() {
                        std::thread::yield_now();
                    }
                    r
                }
                (false, false) => ep.wait_poll(&mut done, Duration::from_millis(50)),
            };
            if polling || !done.is_empty() {
                last_active = Instant::now();
            }
            if let Err(e) = got {
                self.fail(e.context("reading the network proxy's completions"));
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
            for c in done.drain(..) {
                if let Some(why) = &c.error {
                    let fi = inflight.get(&c.ctx).map(|(fi, _)| *fi);
                    // A receive (or an operation the provider no longer knows) names no
                    // peer: name every peer process this one talks to, so the error still
                    // says which hosts the job lost.
                    let peer = match fi {
                        Some(fi) => names[&fi].clone(),
                        None => {
                            let mut all: Vec<&str> = names.values().map(String::as_str).collect();
                            all.sort_unstable();
                            format!("a peer (one of {})", all.join(", "))
                        }
                    };
                    // A send to a peer that said goodbye may fail: it is gone, not broken.
                    let gone = fi
                        .and_then(|fi| addrs.get(&fi))
                        .is_some_and(|a| self.closed.lock().contains(&peer_id(a)));
                    match gone {
                        true => crate::log_debug!(
                            "net",
                            "network proxy: a send to {peer}, which has left, failed: {why}"
                        ),
                        false => self.fail(Error::new(
                            ErrorKind::NetworkProxy,
                            format!("network proxy: an operation with {peer} failed: {why}"),
                        )),
                    }
                }
                match c.kind {
                    CompletionKind::Sent => {
                        if let Some((fi, _sent)) = inflight.remove(&c.ctx) {
                            *per_peer.entry(fi).or_default() -= 1;
                        }
                    }
                    CompletionKind::Received { len } => {
                        let i = c.ctx as usize;
                        if i < bufs.len() {
                            let len = if c.error.is_none() { Some(len) } else { None };
                            ready.push((i, len));
                        }
                    }
                }
            }
            // The provider may complete receives in any order (a large message, sent by
            // rendezvous, after a later small one; one peer's messages in buffers posted in
            // another order): every message carries its number on its link, and messages are
            // applied in the order their sender posted them, so a semaphore change never
            // overtakes the data sent before it.
            for (i, len) in ready.drain(..) {
                if let Some(len) = len.filter(|&n| n >= HEAD) {
                    let msg = &bufs[i][..len.min(bufs[i].len())];
                    let (from, seq) = Head::link_seq(msg);
                    self.alive.lock().insert(from, Instant::now());
                    let next = expect.entry(from).or_default();
                    if seq == *next {
                        self.handle(msg);
                        *next += 1;
                        let held = early.entry(from).or_default();
                        while let Some(m) = held.remove(next) {
                            self.handle(&m);
                            *next += 1;
                        }
                    } else if seq > *next {
                        early.entry(from).or_default().insert(seq, msg.to_vec());
                    } else {
                        crate::log_warn!(
                            "net",
                            "network proxy: dropped a repeated message ({seq} < {next})"
                        );
                    }
                }
                let b = &mut bufs[i];
                // SAFETY: the buffer lives in `bufs` as long as the endpoint.
                match unsafe { ep.post_recv(b.as_mut_ptr(), b.len(), i as u64) } {
                    Ok(true) => {}
                    Ok(false) => self.fail(Error::new(
                        ErrorKind::NetworkProxy,
                        "re-posting a receive buffer: the provider is out of resources",
                    )),
                    Err(e) => self.fail(e.context("re-posting a receive buffer")),
                }
            }
        }
        let broken = self.any_lost().is_some() || self.failed.lock().is_some();
        if broken || !inflight.is_empty() {
            // A connection broken under it (a lost peer, a failed operation) or sends that
            // never completed: libfabric 1.17's rxm dereferences a bad context while it
            // flushes such a connection at close (a SIGSEGV in fi_close, seen after a cut
            // cable), so this endpoint is left open, with the buffers and frames it may still
            // touch, until the process exits.
            crate::log_info!(
                "net",
                "network proxy: leaving the endpoint open ({} sends never completed; a peer \
                 lost or an operation failed: {broken}): closing a broken connection crashes \
                 libfabric 1.17's rxm",
                inflight.len()
            );
            std::mem::forget(ep);
            std::mem::forget(bufs);
            std::mem::forget(inflight);
            return;
        }
        // Close the endpoint before the buffers it may still write into go.
        drop(ep);
        drop(bufs);
    }

    /// Apply one received message (module doc).
    fn handle(&self, msg: &[u8]) {
        let Some(h) = Head::decode(msg) else {
            crate::log_warn!(
                "net",
                "network proxy: dropped a {}-byte message that is not ours",
                msg.len()
            );
            return;
        };
        let body = &msg[HEAD..];
        match h.kind {
            PING => return,
            BYE => {
                let from = Head::link_seq(msg).0;
                if h.arg == 1 {
                    self.closed_lost.lock().insert(from);
                }
                self.closed.lock().insert(from);
                return;
            }
            _ => {}
        }
        match h.kind {
            DATA | SEM => {
                let t = self.targets.lock().get(&h.seg).cloned();
                let Some(t) = t else {
                    crate::log_error!(
                        "net",
                        "network proxy: a peer wrote into segment {:#x}, which this process does \
                         not hold (a stale or foreign message)",
                        h.seg
                    );
                    return;
                };
                let mut held = t.held.lock();
                match fate(header(&t.seg).armed(), &h) {
                    Fate::Hold => held.push(msg.to_vec()),
                    f => self.apply(&t, &h, body, f),
                }
            }
            STATE => {
                let (name, why) = match body.iter().position(|&c| c == 0) {
                    Some(i) => (&body[..i], &body[i + 1..]),
                    None => (body, &[][..]),
                };
                let name = String::from_utf8_lossy(name).into_owned();
                let Ok(e) = self.entry(&name, h.off as usize) else {
                    return;
                };
                super::segment::header_of(&*e.shadow).told(
                    h.run,
                    h.arg as u32,
                    &String::from_utf8_lossy(why),
                );
                for w in e.watchers.lock().iter() {
                    wake(w, None);
                }
            }
            other => crate::log_warn!("net", "network proxy: unknown message kind {other}"),
        }
    }
}

/// What the receiver does with a `DATA` or `SEM` message (module doc, "Runs").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    /// The target is armed for the message's run, with its signature.
    Apply,
    /// The target is not armed for the message's run yet.
    Hold,
    /// The message is of a run before the target's armed run `.0`.
    Stale(u64),
    /// Same run, other signature: the target's is `.0`.
    Mismatch(u64),
}

/// The fate of message `h` for a segment armed as `armed` (`segment::Header::armed`).
fn fate(armed: Option<(u64, u64)>, h: &Head) -> Fate {
    match armed {
        Some((run, _)) if h.run < run => Fate::Stale(run),
        Some((run, sig)) if h.run == run && h.sig != sig => Fate::Mismatch(sig),
        Some((run, _)) if h.run == run => Fate::Apply,
        _ => Fate::Hold,
    }
}

impl Proxy {
    /// Act on a `DATA` or `SEM` message for target `t` by its [`fate`] (not [`Fate::Hold`]);
    /// the caller holds `t.held`.
    fn apply(&self, t: &Target, h: &Head, body: &[u8], fate: Fate) {
        let run = h.run;
        if let Fate::Stale(at) = fate {
            crate::log_warn!(
                "net",
                "network proxy: dropped a message of run {run} for segment {:#x}, which is at \
                 run {at} (stale)",
                h.seg
            );
            return;
        }
        if let Fate::Mismatch(sig) = fate {
            let why = format!(
                "it runs collective #{run} of the group as go signature {:#018x}, and a rank on \
                 this host as {sig:#018x}: the ranks prepared different collectives (op, dtype, \
                 count, group or program)",
                h.sig
            );
            if let Some(e) = self.shadows.lock().get(&h.src) {
                let failed = RankState::Failed as u32 | (cause_code(ErrorKind::Invalid) << 16);
                header_of(&*e.shadow).told(run, failed, &why);
                for w in e.watchers.lock().iter() {
                    wake(w, None);
                }
            }
            crate::log_error!("net", "network proxy: a peer on another host: {why}");
            return;
        }
        if h.kind == DATA {
            if let Err(e) = t.seg.write(h.off as usize, body) {
                crate::log_error!("net", "network proxy: data from a peer: {e}");
            }
            return;
        }
        let (Some((idx, op)), Ok(mut b)) = (
            sem_of(h.arg),
            SemBlock::external(t.seg.clone(), h.off as usize, None),
        ) else {
            crate::log_error!("net", "network proxy: a malformed semaphore change");
            return;
        };
        b.apply(idx, op);
        t.wake();
    }
}

/// Whether a framed message is a [`PING`] or a [`BYE`].
fn is_beat(frame: &[u8]) -> bool {
    Head::decode(frame).is_some_and(|h| h.kind == PING || h.kind == BYE)
}

/// A message with a header only: [`PING`] or [`BYE`].
fn ping(kind: u32) -> Frame {
    let head = Head {
        kind,
        seg: 0,
        off: 0,
        arg: 0,
        run: 0,
        sig: 0,
        src: 0,
    };
    Frame::new(&head, &[])
}

/// A [`BYE`]: `lost` says the sender had lost a peer before it stopped.
fn bye(lost: bool) -> Frame {
    let head = Head {
        kind: BYE,
        seg: 0,
        off: 0,
        arg: u64::from(lost),
        run: 0,
        sig: 0,
        src: 0,
    };
    Frame::new(&head, &[])
}

/// Wake the rank of `seg` (and bump its host's epoch): what a local peer's write does.
fn wake(seg: &Segment, epoch: Option<&Arc<Segment>>) {
    if let Some(e) = epoch {
        header(e).bump_epoch();
    }
    header(seg).bump_wake(futex_wake_all);
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A peer's endpoint address as a person reads it: the socket address inside a `sockaddr_in`
/// or `sockaddr_in6` (what the tcp and sockets providers' names are), else hex.
pub fn describe(addr: &[u8]) -> String {
    let family = addr.get(..2).map(|f| u16::from_ne_bytes([f[0], f[1]]));
    let port = |a: &[u8]| u16::from_be_bytes([a[2], a[3]]);
    match family.map(i32::from) {
        Some(libc::AF_INET) if addr.len() >= 8 => {
            let ip = std::net::Ipv4Addr::new(addr[4], addr[5], addr[6], addr[7]);
            format!("{ip}:{}", port(addr))
        }
        Some(libc::AF_INET6) if addr.len() >= 24 => {
            let b: [u8; 16] = addr[8..24].try_into().expect("16 bytes");
            format!("[{}]:{}", std::net::Ipv6Addr::from(b), port(addr))
        }
        _ => hex(addr),
    }
}

/// From one local segment to the process of one remote rank (module doc).
#[derive(Debug)]
struct Link {
    proxy: Arc<Proxy>,
    to: Vec<u8>,
    target: u64,
    /// This rank's segment: its name and length travel in `STATE`, and its armed run and
    /// signature in `DATA` and `SEM` (module doc, "Runs").
    own: Arc<Segment>,
}

impl Signal for Link {
    fn signal(
        &self,
        shadow: &Arc<Shadow>,
        written: Vec<(usize, usize)>,
        block: usize,
        idx: u8,
        op: SemOp,
    ) {
        let mut frames = Vec::new();
        let (run, sig) = header(&self.own).armed().unwrap_or_default();
        let src = seg_id(self.own.name());
        for (off, n) in written {
            let mut at = 0;
            while at < n {
                let k = (n - at).min(CHUNK);
                let head = Head {
                    kind: DATA,
                    seg: self.target,
                    off: (off + at) as u64,
                    arg: 0,
                    run,
                    sig,
                    src,
                };
                let f = match k < LEND_FROM {
                    true => {
                        // SAFETY: in bounds of the live shadow (the range is from its write log).
                        let b = unsafe {
                            std::slice::from_raw_parts(shadow.base_ptr().add(off + at), k)
                        };
                        Frame::new(&head, b)
                    }
                    false => {
                        let mut f = Frame::new(&head, &[]);
                        f.lent = Some(Lent::new(shadow, off + at, k));
                        f
                    }
                };
                frames.push(f);
                at += k;
            }
        }
        let head = Head {
            kind: SEM,
            seg: self.target,
            off: block as u64,
            arg: sem_arg(idx, op),
            run,
            sig,
            src,
        };
        frames.push(Frame::new(&head, &[]));
        self.proxy.post(&self.to, frames);
    }
    fn state(&self, run: u64, state: u32, why: &str) {
        let head = Head {
            kind: STATE,
            seg: seg_id(self.own.name()),
            off: self.own.len() as u64,
            arg: u64::from(state),
            run,
            sig: 0,
            src: seg_id(self.own.name()),
        };
        let mut owned = self.own.name().as_bytes().to_vec();
        owned.push(0);
        owned.extend(why.as_bytes().iter().take(2000));
        self.proxy.post(&self.to, vec![Frame::new(&head, &owned)]);
    }
    fn lost(&self) -> Option<String> {
        self.proxy.lost(&self.to)
    }
    fn left(&self) -> bool {
        self.proxy.has_left(&self.to)
    }
    fn left_after_loss(&self) -> bool {
        self.proxy.left_after_loss(&self.to)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_addresses_read_as_addresses() {
        let mut v4 = vec![0u8; 16];
        v4[..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
        v4[2..4].copy_from_slice(&4242u16.to_be_bytes());
        v4[4..8].copy_from_slice(&[10, 231, 0, 2]);
        assert_eq!(describe(&v4), "10.231.0.2:4242");
        let mut v6 = vec![0u8; 28];
        v6[..2].copy_from_slice(&(libc::AF_INET6 as u16).to_ne_bytes());
        v6[2..4].copy_from_slice(&7u16.to_be_bytes());
        v6[23] = 1;
        assert_eq!(describe(&v6), "[::1]:7");
        assert_eq!(describe(&[0xab, 0xcd]), "abcd");
    }

    #[test]
    fn a_goodbye_says_whether_its_sender_had_lost_a_peer() {
        for lost in [false, true] {
            let f = bye(lost);
            let h = Head::decode(&f.bytes).expect("a header");
            assert_eq!((h.kind, h.arg), (BYE, u64::from(lost)));
            assert!(is_beat(&f.bytes), "a goodbye is a beat, never held back");
        }
        // A goodbye of an older sender (arg 0) reads as a plain departure.
        assert_eq!(Head::decode(&ping(BYE).bytes).map(|h| h.arg), Some(0));
    }

    #[test]
    fn a_message_waits_for_its_run_and_must_carry_its_signature() {
        let msg = |run, sig| Head {
            kind: DATA,
            seg: 1,
            off: 0,
            arg: 0,
            run,
            sig,
            src: 2,
        };
        // Never armed, or armed for an earlier run: held until the rank loads that run.
        assert_eq!(fate(None, &msg(0, 7)), Fate::Hold);
        assert_eq!(fate(Some((4, 7)), &msg(5, 7)), Fate::Hold);
        assert_eq!(
            fate(Some((4, 7)), &msg(5, 9)),
            Fate::Hold,
            "judged once armed"
        );
        // Its run: applied, or refused when the ranks prepared different collectives.
        assert_eq!(fate(Some((5, 7)), &msg(5, 7)), Fate::Apply);
        assert_eq!(fate(Some((5, 7)), &msg(5, 9)), Fate::Mismatch(7));
        // An earlier run than the armed one: stale.
        assert_eq!(fate(Some((6, 7)), &msg(5, 7)), Fate::Stale(6));
    }

    #[test]
    fn headers_and_semaphore_changes_round_trip() {
        let h = Head {
            kind: SEM,
            seg: 0x1234_5678_9abc_def0,
            off: 4096,
            arg: sem_arg(7, SemOp::Sub(-3)),
            run: 42,
            sig: 0xfeed_f00d,
            src: 7,
        };
        assert_eq!(Head::decode(&h.encode()), Some(h));
        for op in [
            SemOp::Set(-1),
            SemOp::Add(5),
            SemOp::Sub(i32::MIN),
            SemOp::Event(true),
        ] {
            assert_eq!(sem_of(sem_arg(255, op)), Some((255, op)));
        }
        assert_eq!(Head::decode(&[0u8; HEAD]), None, "no magic");
        assert_eq!(Head::decode(&[0u8; 8]), None, "too short");
    }
}

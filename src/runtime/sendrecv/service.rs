//! The service of one logical core: its communicators and requests (shared with the callers'
//! threads under one lock), and the thread that owns its libfabric endpoint.
//!
//! **Progress is the caller's.** The [`Worker`] (the endpoint and what only it touches) sits
//! behind its own lock. A caller that posts a request, or tests one still in flight, takes it
//! if it is free and moves the endpoint itself: it posts, reads completions and answers control
//! messages on its own thread, so a ping-pong crosses no thread of ours (tcp;ofi_rxm moves data
//! only when polled, and on two cores a hand-off to a service thread cost milliseconds,
//! measured). The service thread is the fallback: it keeps polling while it finds work, polls
//! every [`FALLBACK_POLL`] while requests are in flight and nobody else does, checks deadlines
//! and pings silent peers every [`TICK`], and with nothing in flight waits for a queued
//! [`Command`] or the next tick, leaving the worker to callers meanwhile. Lock order: the
//! worker, then the shared state.
//!
//! **A request's slot** goes FREE → STASHED (the caller queued it) → POSTED (its chunks are
//! with the provider) → DONE → FREE (`test_request` reported it), or to ERROR, which it never
//! leaves (docs/contract/abi.md §5.12). A slot keeps a clone of its tensor until the provider
//! has returned every chunk, so memory a failed or cancelled transfer still names stays alive.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::protocol::{self, Control, Handle, TagKind};
use super::{Role, Settings, MAX_PENDING_REQUESTS};
use crate::error::{Error, ErrorKind, Result};
use crate::net::fabric::{Completion, CompletionKind, Endpoint, FI_ETRUNC};
use crate::runtime::tensor::Tensor;

/// How often deadlines and pings are checked.
pub const TICK: Duration = Duration::from_millis(50);
/// How often the service thread polls while requests are in flight.
pub const FALLBACK_POLL: Duration = Duration::from_micros(500);
/// Control receives kept posted.
const CONTROL_RECVS: usize = 8;

/// What a caller asks the thread to do.
#[derive(Debug)]
pub(super) enum Command {
    /// Post the STASHED request in `slot` of communicator `comm`.
    Post { comm: u16, slot: u8 },
    /// A sender found its receiver's handle: say hello.
    Hello { comm: u16, handle: Handle },
}

/// Where a communicator stands.
#[derive(Debug, Clone)]
pub(super) enum Phase {
    /// Looking up or publishing the handle.
    Pending,
    /// The sender said hello to `peer` and waits for the welcome.
    Greeting { peer: u64, peer_comm: u16 },
    /// Connected to `peer`, whose communicator is `peer_comm`.
    Connected { peer: u64, peer_comm: u16 },
    /// Gone, for this reason.
    Failed(Error),
}

/// A request slot's state (module doc).
#[derive(Debug, Clone)]
pub(super) enum SlotState {
    Free,
    Stashed,
    Posted,
    Done,
    Error(Error),
}

/// One request slot.
#[derive(Debug)]
pub(super) struct Slot {
    pub state: SlotState,
    /// Bumped each time the slot is recycled: a request handle names (slot, generation).
    pub gen: u32,
    pub tensor: Option<Tensor>,
    /// First byte and length of the range.
    pub ptr: usize,
    pub len: usize,
    pub seq: u32,
    /// Chunks of the transfer (a receive: 0 until its first chunk arrived).
    pub chunks: u64,
    /// Chunks handed to the provider.
    pub posted: u64,
    /// Chunks the provider has not returned yet.
    pub outstanding: u32,
    /// Bytes moved.
    pub bytes: usize,
}

impl Slot {
    fn free() -> Slot {
        Slot {
            state: SlotState::Free,
            gen: 0,
            tensor: None,
            ptr: 0,
            len: 0,
            seq: 0,
            chunks: 0,
            posted: 0,
            outstanding: 0,
            bytes: 0,
        }
    }
}

/// One communicator.
#[derive(Debug)]
pub(super) struct CommState {
    pub role: Role,
    pub peer_ip: IpAddr,
    pub peer_lnc: u32,
    pub phase: Phase,
    pub deadline: Instant,
    /// The accept's nonce (a receiver), or the handle's (a sender, once found).
    pub nonce: u64,
    pub slots: Vec<Slot>,
    pub next_seq: u32,
    /// Slots STASHED or POSTED.
    pub in_flight: usize,
    pub last_heard: Instant,
    pub last_ping: Instant,
    /// A receiver's peer closed its service after starting this many transfers, at this time:
    /// receives of those still complete (their bytes may be on their way), later ones fail.
    pub peer_left: Option<(u32, Instant)>,
}

impl CommState {
    pub fn new(role: Role, peer_ip: IpAddr, peer_lnc: u32, deadline: Instant) -> CommState {
        let now = Instant::now();
        CommState {
            role,
            peer_ip,
            peer_lnc,
            phase: Phase::Pending,
            deadline,
            nonce: 0,
            slots: (0..MAX_PENDING_REQUESTS).map(|_| Slot::free()).collect(),
            next_seq: 0,
            in_flight: 0,
            last_heard: now,
            last_ping: now,
            peer_left: None,
        }
    }

    /// The error of a receive the peer, closed after `started` transfers, never started.
    pub fn peer_left_error(&self, id: u16, started: u32) -> Error {
        Error::failure(format!(
            "{}: the peer closed its send/recv service after {started} transfer(s)",
            self.describe(id)
        ))
    }

    /// "send communicator 3 (to lnc 1 at 10.0.0.2)", for messages.
    pub fn describe(&self, id: u16) -> String {
        let (what, dir) = match self.role {
            Role::Send => ("send", "to"),
            Role::Recv => ("receive", "from"),
        };
        format!(
            "{what} communicator {id} ({dir} lnc {} at {})",
            self.peer_lnc, self.peer_ip
        )
    }
}

/// The state callers and the thread share.
#[derive(Debug, Default)]
pub(super) struct Inner {
    pub comms: Vec<CommState>,
    pub commands: VecDeque<Command>,
    /// The local address the endpoint is bound to, and its libfabric address.
    pub bound: Option<(IpAddr, Vec<u8>)>,
    /// The thread failed: every call says why.
    pub failed: Option<Error>,
}

/// The service of one logical core.
#[derive(Debug)]
pub(super) struct Service {
    pub lnc: u32,
    pub settings: Settings,
    pub inner: Mutex<Inner>,
    /// The endpoint's side, from the first connect or accept (module doc).
    worker: Mutex<Option<Worker>>,
    /// Wakes the thread before it has an endpoint.
    ready: Condvar,
    stop: AtomicBool,
    pub closed: AtomicBool,
    /// When a caller last moved the endpoint ([`Service::progress`]), in µs since `epoch`: the
    /// thread stays away from the worker while callers poll, so it is never the one holding
    /// the lock when the scheduler takes its core away (measured: 44 ms stalls otherwise).
    caller_progress: AtomicU64,
    epoch: Instant,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Service {
    /// Start the thread of core `lnc`.
    pub fn start(lnc: u32, settings: Settings) -> Result<Arc<Service>> {
        let svc = Arc::new(Service {
            lnc,
            settings,
            inner: Mutex::new(Inner::default()),
            worker: Mutex::new(None),
            ready: Condvar::new(),
            stop: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            caller_progress: AtomicU64::new(0),
            epoch: Instant::now(),
            thread: Mutex::new(None),
        });
        let me = svc.clone();
        let t = std::thread::Builder::new()
            .name(format!("opennrt-sr-{lnc}"))
            .spawn(move || {
                let watch = me.clone();
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| serve(&me)));
                let why = match r {
                    Ok(Ok(())) => return,
                    Ok(Err(e)) => e,
                    Err(_) => Error::failure("the send/recv service thread panicked"),
                };
                crate::log_error!("sendrecv", "lnc {}: {}", watch.lnc, why.message());
                watch.fail_all(why);
            })
            .map_err(|e| {
                Error::failure(format!("starting the send/recv thread of lnc {lnc}: {e}"))
            })?;
        *svc.thread.lock() = Some(t);
        Ok(svc)
    }

    /// Queue a command and wake the thread.
    pub fn command(&self, c: Command) {
        self.inner.lock().commands.push_back(c);
        self.wake();
    }

    fn wake(&self) {
        self.ready.notify_all();
    }

    /// The local address the endpoint is bound to, if it is open.
    pub fn bound(&self) -> Option<IpAddr> {
        self.inner.lock().bound.as_ref().map(|b| b.0)
    }

    /// Install the endpoint bound to `local` (unless another caller was first: then `ep` is
    /// dropped and its address is the one that counts, checked by the caller).
    pub fn install(self: &Arc<Self>, ep: Endpoint, local: IpAddr) -> Result<()> {
        let mut w = self.worker.lock();
        if self.inner.lock().bound.is_some() {
            return Ok(());
        }
        let name = ep.name()?;
        let mut worker = Worker::new(self.clone(), ep, name.clone())?;
        for i in 0..CONTROL_RECVS {
            worker.post_control_recv(i)?;
        }
        *w = Some(worker);
        {
            self.inner.lock().bound = Some((local, name));
        }
        self.ready.notify_all();
        Ok(())
    }

    /// Move the endpoint from the caller's thread if nobody else is (module doc). A failure of
    /// the endpoint itself fails the service.
    pub fn progress(&self) {
        let Some(mut g) = self.worker.try_lock() else {
            return;
        };
        if let Some(w) = g.as_mut() {
            let now = self.epoch.elapsed().as_micros() as u64;
            self.caller_progress.store(now.max(1), Ordering::Relaxed);
            if let Err(e) = w.step() {
                drop(g);
                crate::log_error!("sendrecv", "lnc {}: {}", self.lnc, e.message());
                self.fail_all(e);
            }
        }
    }

    /// Stop the thread and wait for it; the endpoint closes (its peers are told).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        self.wake();
        if let Some(t) = self.thread.lock().take() {
            let _ = t.join();
        }
        let worker = self.worker.lock().take();
        if let Some(mut w) = worker {
            w.say_bye();
        }
        self.closed.store(true, Ordering::Release);
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// The thread is gone: every communicator fails.
    fn fail_all(&self, why: Error) {
        let mut g = self.inner.lock();
        g.failed = Some(why.clone());
        for id in 0..g.comms.len() {
            fail_comm(&mut g, id as u16, why.clone(), None);
        }
    }
}

/// Fail communicator `id` and every request of it still in flight; the provider's chunks of
/// those requests are cancelled through `ep` when the caller owns it.
pub(super) fn fail_comm(g: &mut Inner, id: u16, why: Error, ep: Option<&mut Endpoint>) {
    let Some(c) = g.comms.get_mut(id as usize) else {
        return;
    };
    if matches!(c.phase, Phase::Failed(_)) {
        return;
    }
    let what = c.describe(id);
    let mut failed = 0;
    for s in &mut c.slots {
        if matches!(s.state, SlotState::Stashed | SlotState::Posted) {
            s.state = SlotState::Error(why.clone());
            failed += 1;
            if s.outstanding == 0 {
                s.tensor = None;
            }
        }
    }
    c.in_flight = 0;
    c.phase = Phase::Failed(why.clone());
    if failed > 0 {
        crate::log_warn!(
            "sendrecv",
            "{what} failed with {failed} request(s) in flight: {}",
            why.message()
        );
    } else {
        crate::log_info!("sendrecv", "{what} failed: {}", why.message());
    }
    if let Some(ep) = ep {
        ep.cancel_where(|ctx| {
            let (kind, comm, _, _) = unpack(ctx);
            comm == id && matches!(kind, K_SEND | K_FIRST | K_CHUNK)
        });
    }
}

// Context kinds of posted operations.
const K_SEND: u8 = 1;
const K_FIRST: u8 = 2;
const K_CHUNK: u8 = 3;
const K_CONTROL_SEND: u8 = 4;
const K_CONTROL_RECV: u8 = 5;

fn pack(kind: u8, comm: u16, slot: u8, low: u32) -> u64 {
    (u64::from(kind) << 56) | (u64::from(comm) << 40) | (u64::from(slot) << 32) | u64::from(low)
}

fn unpack(ctx: u64) -> (u8, u16, u8, u32) {
    (
        (ctx >> 56) as u8,
        (ctx >> 40) as u16,
        (ctx >> 32) as u8,
        ctx as u32,
    )
}

/// The endpoint and what only it touches.
#[derive(Debug)]
struct Worker {
    svc: Arc<Service>,
    /// Closed when the worker goes, unless [`Worker::broken`].
    ep: std::mem::ManuallyDrop<Endpoint>,
    /// A connection of the endpoint broke (a network error or a silent peer): the endpoint is
    /// left open at the end, as the collectives' proxy leaves its own, because libfabric
    /// 1.17's rxm can crash in `fi_close` on such a connection (docs/design.md §2 item 12).
    broken: bool,
    addr: Vec<u8>,
    control_bufs: Vec<Box<[u8]>>,
    /// Control messages being sent, by context.
    control_out: HashMap<u64, Box<[u8]>>,
    next_control: u32,
    /// Control messages the provider could not take yet, in order.
    control_waiting: VecDeque<(u64, u16, Box<[u8]>)>,
    /// Requests with chunks the provider refused for now (`-FI_EAGAIN`).
    backlog: VecDeque<(u16, u8)>,
    /// Peer addresses inserted in the address vector.
    peers: HashMap<Vec<u8>, u64>,
    done: Vec<Completion>,
    last_tick: Instant,
}

impl Drop for Worker {
    fn drop(&mut self) {
        if self.broken {
            crate::log_info!(
                "sendrecv",
                "lnc {}: a connection broke; the endpoint stays open until the process exits",
                self.svc.lnc
            );
            // So are the buffers its posted operations may still name.
            std::mem::forget(std::mem::take(&mut self.control_bufs));
            std::mem::forget(std::mem::take(&mut self.control_out));
        } else {
            // SAFETY: dropped once, here, and never used again.
            unsafe { std::mem::ManuallyDrop::drop(&mut self.ep) };
        }
    }
}

/// The service thread (module doc).
fn serve(svc: &Arc<Service>) -> Result<()> {
    loop {
        if svc.stopping() {
            return Ok(());
        }
        let last = svc.caller_progress.load(Ordering::Relaxed);
        let now = svc.epoch.elapsed().as_micros() as u64;
        if last != 0 && now.saturating_sub(last) < FALLBACK_POLL.as_micros() as u64 {
            std::thread::sleep(FALLBACK_POLL);
            continue;
        }
        let mut g = svc.worker.lock();
        let in_flight = match g.as_mut() {
            None => {
                svc.ready.wait_for(&mut g, Duration::from_millis(200));
                continue;
            }
            Some(w) => {
                if w.step()? {
                    continue;
                }
                w.in_flight()
            }
        };
        if in_flight {
            drop(g);
            std::thread::sleep(FALLBACK_POLL);
        } else {
            // Nothing in flight: wait for a command or the next tick, the worker free meanwhile
            // for callers. Not on the completion queue: a blocking read there noticed
            // arrivals and wakes about 4 ms late (one scheduler tick, measured).
            svc.ready.wait_for(&mut g, TICK);
        }
    }
}

impl Worker {
    fn new(svc: Arc<Service>, ep: Endpoint, addr: Vec<u8>) -> Result<Worker> {
        Ok(Worker {
            svc,
            ep: std::mem::ManuallyDrop::new(ep),
            broken: false,
            addr,
            control_bufs: (0..CONTROL_RECVS)
                .map(|_| vec![0u8; protocol::CONTROL_MAX].into_boxed_slice())
                .collect(),
            control_out: HashMap::new(),
            next_control: 0,
            control_waiting: VecDeque::new(),
            backlog: VecDeque::new(),
            peers: HashMap::new(),
            done: Vec::new(),
            last_tick: Instant::now(),
        })
    }

    /// One round without blocking: commands, completions, what the provider refused before,
    /// and deadlines and pings when due. `Ok(true)` when something happened.
    fn step(&mut self) -> Result<bool> {
        let mut busy = self.commands()?;
        self.done.clear();
        self.ep.poll(&mut self.done)?;
        busy |= !self.done.is_empty();
        self.handle_completions()?;
        if !self.control_waiting.is_empty() {
            busy |= self.retry_controls()?;
        }
        if !self.backlog.is_empty() {
            self.retry_backlog()?;
            busy = true;
        }
        if self.last_tick.elapsed() >= TICK {
            self.last_tick = Instant::now();
            self.tick()?;
        }
        Ok(busy)
    }

    fn post_control_recv(&mut self, i: usize) -> Result<()> {
        let buf = &mut self.control_bufs[i];
        // SAFETY: the buffers live in the worker as long as the endpoint (dropped first, in
        // field order) and are only read after their completion.
        let ok = unsafe {
            self.ep.post_trecv(
                buf.as_mut_ptr(),
                buf.len(),
                protocol::CONTROL_TAG,
                protocol::CONTROL_IGNORE,
                pack(K_CONTROL_RECV, 0, 0, i as u32),
            )
        }?;
        if !ok {
            return Err(Error::failure(
                "posting a control receive: the provider is out of resources",
            ));
        }
        Ok(())
    }

    /// Is any request of this service STASHED or POSTED?
    fn in_flight(&self) -> bool {
        self.svc.inner.lock().comms.iter().any(|c| c.in_flight > 0)
    }

    /// Tell every connected peer that this side goes away, and give the messages a moment.
    fn say_bye(&mut self) {
        let byes: Vec<(u16, u64, u16, u32)> = {
            let g = self.svc.inner.lock();
            g.comms
                .iter()
                .enumerate()
                .filter_map(|(i, c)| match c.phase {
                    Phase::Connected { peer, peer_comm } => {
                        Some((i as u16, peer, peer_comm, c.next_seq))
                    }
                    _ => None,
                })
                .collect()
        };
        for (id, peer, peer_comm, started) in byes {
            let _ = self.send_control(
                peer,
                id,
                &Control::Bye {
                    from: id,
                    to: peer_comm,
                    started,
                },
            );
        }
        // Polled, not blocked on: a blocking read notices completions late (module doc).
        let until = Instant::now() + Duration::from_millis(200);
        while !(self.control_out.is_empty() && self.control_waiting.is_empty())
            && Instant::now() < until
        {
            if self.retry_controls().is_err() {
                break;
            }
            self.done.clear();
            if self.ep.poll(&mut self.done).is_err() {
                break;
            }
            for c in std::mem::take(&mut self.done) {
                if unpack(c.ctx).0 == K_CONTROL_SEND {
                    self.control_out.remove(&c.ctx);
                }
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn commands(&mut self) -> Result<bool> {
        let cmds: Vec<Command> = {
            let mut g = self.svc.inner.lock();
            if g.commands.is_empty() {
                return Ok(false);
            }
            g.commands.drain(..).collect()
        };
        for c in cmds {
            match c {
                Command::Post { comm, slot } => {
                    let mut g = self.svc.inner.lock();
                    let Some(s) = g
                        .comms
                        .get_mut(comm as usize)
                        .map(|c| &mut c.slots[slot as usize])
                    else {
                        continue;
                    };
                    if matches!(s.state, SlotState::Stashed) {
                        s.state = SlotState::Posted;
                        drop(g);
                        self.pump(comm, slot)?;
                    }
                }
                Command::Hello { comm, handle } => self.hello(comm, handle)?,
            }
        }
        Ok(true)
    }

    fn peer(&mut self, addr: &[u8]) -> Result<u64> {
        if let Some(&p) = self.peers.get(addr) {
            return Ok(p);
        }
        let p = self.ep.insert(addr)?;
        self.peers.insert(addr.to_vec(), p);
        Ok(p)
    }

    fn hello(&mut self, comm: u16, handle: Handle) -> Result<()> {
        let peer = match self.peer(&handle.addr) {
            Ok(p) => p,
            Err(e) => {
                let mut g = self.svc.inner.lock();
                fail_comm(
                    &mut g,
                    comm,
                    e.context("the receiver's published address"),
                    None,
                );
                return Ok(());
            }
        };
        {
            let mut g = self.svc.inner.lock();
            let Some(c) = g.comms.get_mut(comm as usize) else {
                return Ok(());
            };
            if !matches!(c.phase, Phase::Pending) {
                return Ok(());
            }
            c.phase = Phase::Greeting {
                peer,
                peer_comm: handle.comm,
            };
            c.nonce = handle.nonce;
        }
        let msg = Control::Hello {
            sender_comm: comm,
            receiver_comm: handle.comm,
            nonce: handle.nonce,
            addr: self.addr.clone(),
        };
        self.send_control(peer, comm, &msg)
    }

    /// Send a control message, or queue it while the provider is busy (a new peer's
    /// connection is still forming, for one).
    fn send_control(&mut self, peer: u64, comm: u16, msg: &Control) -> Result<()> {
        let bytes = msg.encode().into_boxed_slice();
        if self.control_waiting.is_empty() {
            if let Some(bytes) = self.try_control(peer, comm, bytes)? {
                self.control_waiting.push_back((peer, comm, bytes));
            }
        } else {
            self.control_waiting.push_back((peer, comm, bytes));
        }
        Ok(())
    }

    /// Post one control message; gives it back when the provider is busy.
    fn try_control(&mut self, peer: u64, comm: u16, bytes: Box<[u8]>) -> Result<Option<Box<[u8]>>> {
        self.next_control = self.next_control.wrapping_add(1);
        let ctx = pack(K_CONTROL_SEND, comm, 0, self.next_control);
        // SAFETY: the bytes move into `control_out` and stay there until the completion.
        let ok = unsafe {
            self.ep.post_tsend(
                peer,
                bytes.as_ptr(),
                bytes.len(),
                protocol::CONTROL_TAG,
                ctx,
            )
        }?;
        if ok {
            self.control_out.insert(ctx, bytes);
            return Ok(None);
        }
        Ok(Some(bytes))
    }

    /// Post the control messages the provider refused before, in order; those of a
    /// communicator that failed meanwhile are dropped (retrying them would only make the
    /// provider dial a dead peer again and again). `Ok(true)` if one went out.
    fn retry_controls(&mut self) -> Result<bool> {
        let failed: Vec<u16> = {
            let g = self.svc.inner.lock();
            (0..g.comms.len() as u16)
                .filter(|&i| matches!(g.comms[i as usize].phase, Phase::Failed(_)))
                .collect()
        };
        self.control_waiting
            .retain(|(_, comm, _)| !failed.contains(comm));
        let mut sent = false;
        while let Some((peer, comm, bytes)) = self.control_waiting.pop_front() {
            if let Some(bytes) = self.try_control(peer, comm, bytes)? {
                self.control_waiting.push_front((peer, comm, bytes));
                break;
            }
            sent = true;
        }
        Ok(sent)
    }

    /// Hand the provider what it will take of a POSTED request's chunks.
    fn pump(&mut self, comm: u16, slot: u8) -> Result<()> {
        let chunk = self.svc.settings.chunk;
        let mut g = self.svc.inner.lock();
        let Some(c) = g.comms.get_mut(comm as usize) else {
            return Ok(());
        };
        let (peer, peer_comm) = match c.phase {
            Phase::Connected { peer, peer_comm } => (peer, peer_comm),
            _ => return Ok(()),
        };
        let role = c.role;
        let s = &mut c.slots[slot as usize];
        if !matches!(s.state, SlotState::Posted) {
            return Ok(());
        }
        loop {
            let i = s.posted;
            let ok = match role {
                Role::Send => {
                    if i >= s.chunks {
                        break;
                    }
                    let at = (i as usize) * chunk;
                    let n = chunk.min(s.len - at);
                    let (kind, low) = match i {
                        0 => (TagKind::First, s.chunks),
                        _ => (TagKind::Chunk, i),
                    };
                    let tag = protocol::data_tag(kind, peer_comm, s.seq, low);
                    // SAFETY: `[ptr + at, + n)` lies in the tensor the slot keeps alive until
                    // every chunk has completed.
                    unsafe {
                        self.ep.post_tsend(
                            peer,
                            (s.ptr + at) as *const u8,
                            n,
                            tag,
                            pack(K_SEND, comm, slot, i as u32),
                        )
                    }?
                }
                Role::Recv => {
                    if i == 0 {
                        let tag = protocol::data_tag(TagKind::First, comm, s.seq, 0);
                        // SAFETY: `[ptr, + min(chunk, len))` lies in the tensor the slot keeps
                        // alive until every chunk has completed.
                        unsafe {
                            self.ep.post_trecv(
                                s.ptr as *mut u8,
                                chunk.min(s.len),
                                tag,
                                protocol::FIRST_IGNORE,
                                pack(K_FIRST, comm, slot, 0),
                            )
                        }?
                    } else if i >= s.chunks {
                        break;
                    } else {
                        // The count was checked against the room (`on_data`): `at < len`.
                        let at = (i as usize) * chunk;
                        let tag = protocol::data_tag(TagKind::Chunk, comm, s.seq, i);
                        let n = chunk.min(s.len - at);
                        // SAFETY: `at < len` (above) and `n ≤ len - at`, so `[ptr + at, + n)`
                        // lies in the tensor the slot keeps alive until every chunk completed.
                        unsafe {
                            self.ep.post_trecv(
                                (s.ptr + at) as *mut u8,
                                n,
                                tag,
                                0,
                                pack(K_CHUNK, comm, slot, i as u32),
                            )
                        }?
                    }
                }
            };
            if !ok {
                self.backlog.push_back((comm, slot));
                break;
            }
            s.posted += 1;
            s.outstanding += 1;
            if role == Role::Recv && s.chunks == 0 {
                // The count comes with the first chunk.
                break;
            }
        }
        Ok(())
    }

    fn retry_backlog(&mut self) -> Result<()> {
        let n = self.backlog.len();
        for _ in 0..n {
            let Some((comm, slot)) = self.backlog.pop_front() else {
                break;
            };
            self.pump(comm, slot)?;
        }
        Ok(())
    }

    fn handle_completions(&mut self) -> Result<()> {
        let done = std::mem::take(&mut self.done);
        for c in &done {
            let (kind, comm, slot, low) = unpack(c.ctx);
            match kind {
                K_CONTROL_RECV => {
                    if c.error.is_none() {
                        let len = match c.kind {
                            CompletionKind::Received { len } => len,
                            CompletionKind::Sent => 0,
                        };
                        let bytes = self.control_bufs[low as usize][..len].to_vec();
                        self.on_control(&bytes)?;
                    } else if !self.svc.stopping() {
                        crate::log_debug!(
                            "sendrecv",
                            "a control receive failed: {}",
                            c.error.as_deref().unwrap_or("")
                        );
                    }
                    if !self.svc.stopping() {
                        self.post_control_recv(low as usize)?;
                    }
                }
                K_CONTROL_SEND => {
                    self.control_out.remove(&c.ctx);
                    if let Some(why) = &c.error {
                        let mut g = self.svc.inner.lock();
                        let what = g.comms.get(comm as usize).map(|s| s.describe(comm));
                        if let Some(what) = what {
                            let e = Error::failure(format!(
                                "{what}: the connection to the peer failed: {why}"
                            ));
                            self.broken = true;
                            fail_comm(&mut g, comm, e, Some(&mut *self.ep));
                        }
                    }
                }
                K_SEND | K_FIRST | K_CHUNK => self.on_data(c, kind, comm, slot)?,
                _ => crate::log_debug!("sendrecv", "a completion of no operation of ours"),
            }
        }
        self.done = done;
        self.done.clear();
        Ok(())
    }

    fn on_data(&mut self, c: &Completion, kind: u8, comm: u16, slot: u8) -> Result<()> {
        let chunk = self.svc.settings.chunk;
        let mut g = self.svc.inner.lock();
        let Some(cs) = g.comms.get_mut(comm as usize) else {
            return Ok(());
        };
        let what = cs.describe(comm);
        let peer = match cs.phase {
            Phase::Connected { peer, peer_comm } => Some((peer, peer_comm, cs.next_seq)),
            _ => None,
        };
        let s = &mut cs.slots[slot as usize];
        s.outstanding = s.outstanding.saturating_sub(1);
        if !matches!(s.state, SlotState::Posted) {
            // Failed meanwhile: the tensor goes once the provider has returned every chunk.
            if s.outstanding == 0 {
                s.tensor = None;
            }
            return Ok(());
        }
        let len = match c.kind {
            CompletionKind::Received { len } => len,
            CompletionKind::Sent => 0,
        };
        let overflow = match &c.error {
            None => {
                cs.last_heard = Instant::now();
                match kind {
                    K_FIRST => {
                        s.chunks = protocol::tag_low(c.tag).max(1);
                        s.bytes += len;
                        // No room for the chunks before the last: the sender sent too much.
                        s.chunks > 1 && (s.chunks as usize - 1).saturating_mul(chunk) >= s.len
                    }
                    K_CHUNK => {
                        s.bytes += len;
                        false
                    }
                    _ => false,
                }
            }
            Some(_) if kind != K_SEND && c.code == FI_ETRUNC => true,
            Some(why) => {
                let e = Error::failure(format!("{what}: a transfer failed in the network: {why}"));
                self.broken = true;
                fail_comm(&mut g, comm, e, Some(&mut *self.ep));
                return Ok(());
            }
        };
        if overflow {
            // The sender's transfer is larger than this receive: its remaining chunks would
            // meet the next receives, so the communicator is out of step and fails, both ends.
            let sent = protocol::tag_low(c.tag);
            s.state = SlotState::Error(
                Error::invalid(format!(
                    "{what}: the sender sent more than the {} bytes this receive posted (transfer {}{})",
                    s.len,
                    s.seq,
                    if kind == K_FIRST { format!(", {sent} chunk(s) of up to {chunk} bytes") } else { String::new() }
                ))
                .with_field("length"),
            );
            if s.outstanding == 0 {
                s.tensor = None;
            }
            cs.in_flight = cs.in_flight.saturating_sub(1);
            let e = Error::failure(format!(
                "{what}: out of step after a send larger than its receive; the communicator is closed"
            ));
            fail_comm(&mut g, comm, e, Some(&mut *self.ep));
            drop(g);
            if let Some((peer, peer_comm, started)) = peer {
                self.send_control(
                    peer,
                    comm,
                    &Control::Bye {
                        from: comm,
                        to: peer_comm,
                        started,
                    },
                )?;
            }
            return Ok(());
        }
        let more = kind == K_FIRST && s.chunks > 1;
        if s.outstanding == 0 && !more && s.posted >= s.chunks.max(1) {
            s.bytes = match kind {
                K_SEND => s.len,
                _ => s.bytes,
            };
            s.tensor = None;
            s.state = SlotState::Done;
            cs.in_flight = cs.in_flight.saturating_sub(1);
        }
        drop(g);
        if more {
            self.pump(comm, slot)?;
        }
        Ok(())
    }

    fn on_control(&mut self, bytes: &[u8]) -> Result<()> {
        let msg = match Control::decode(bytes) {
            Ok(m) => m,
            Err(e) => {
                crate::log_warn!("sendrecv", "lnc {}: dropped {}", self.svc.lnc, e.message());
                return Ok(());
            }
        };
        match msg {
            Control::Hello {
                sender_comm,
                receiver_comm,
                nonce,
                addr,
            } => {
                let peer = match self.peer(&addr) {
                    Ok(p) => p,
                    Err(e) => {
                        crate::log_warn!(
                            "sendrecv",
                            "a hello with an address the provider refuses: {}",
                            e.message()
                        );
                        return Ok(());
                    }
                };
                let welcome = {
                    let mut g = self.svc.inner.lock();
                    match g.comms.get_mut(receiver_comm as usize) {
                        Some(c)
                            if c.role == Role::Recv
                                && matches!(c.phase, Phase::Pending)
                                && c.nonce == nonce =>
                        {
                            c.phase = Phase::Connected {
                                peer,
                                peer_comm: sender_comm,
                            };
                            c.last_heard = Instant::now();
                            crate::log_info!(
                                "sendrecv",
                                "lnc {}: {} connected",
                                self.svc.lnc,
                                c.describe(receiver_comm)
                            );
                            true
                        }
                        _ => false,
                    }
                };
                let reply = match welcome {
                    true => Control::Welcome {
                        sender_comm,
                        receiver_comm,
                        nonce,
                    },
                    false => Control::Refuse { sender_comm, nonce },
                };
                self.send_control(peer, receiver_comm, &reply)?;
            }
            Control::Welcome {
                sender_comm,
                receiver_comm,
                nonce,
            } => {
                let mut g = self.svc.inner.lock();
                let lnc = self.svc.lnc;
                if let Some(c) = g.comms.get_mut(sender_comm as usize) {
                    if let Phase::Greeting { peer, peer_comm } = c.phase {
                        if peer_comm == receiver_comm && c.nonce == nonce {
                            c.phase = Phase::Connected { peer, peer_comm };
                            c.last_heard = Instant::now();
                            crate::log_info!(
                                "sendrecv",
                                "lnc {lnc}: {} connected",
                                c.describe(sender_comm)
                            );
                        }
                    }
                }
            }
            Control::Refuse { sender_comm, nonce } => {
                let relook = {
                    let mut g = self.svc.inner.lock();
                    match g.comms.get_mut(sender_comm as usize) {
                        Some(c)
                            if matches!(c.phase, Phase::Greeting { .. }) && c.nonce == nonce =>
                        {
                            c.phase = Phase::Pending;
                            Some((c.peer_ip, c.peer_lnc, c.deadline))
                        }
                        _ => None,
                    }
                };
                if let Some((ip, peer_lnc, deadline)) = relook {
                    crate::log_debug!(
                        "sendrecv",
                        "communicator {sender_comm}: a stale handle; looking again"
                    );
                    super::connector::spawn_lookup(
                        self.svc.clone(),
                        sender_comm,
                        ip,
                        peer_lnc,
                        deadline,
                    );
                }
            }
            Control::Ping { from, to } => {
                let peer = {
                    let mut g = self.svc.inner.lock();
                    match g.comms.get_mut(to as usize) {
                        Some(c) => match c.phase {
                            Phase::Connected { peer, peer_comm } if peer_comm == from => {
                                c.last_heard = Instant::now();
                                Some(peer)
                            }
                            _ => None,
                        },
                        None => None,
                    }
                };
                if let Some(peer) = peer {
                    self.send_control(peer, to, &Control::Pong { from: to, to: from })?;
                }
            }
            Control::Pong { from, to } => {
                let mut g = self.svc.inner.lock();
                if let Some(c) = g.comms.get_mut(to as usize) {
                    if matches!(c.phase, Phase::Connected { peer_comm, .. } if peer_comm == from) {
                        c.last_heard = Instant::now();
                    }
                }
            }
            Control::Bye { from, to, started } => {
                let mut g = self.svc.inner.lock();
                let Some(c) = g.comms.get_mut(to as usize) else {
                    return Ok(());
                };
                if !matches!(c.phase, Phase::Connected { peer_comm, .. } if peer_comm == from) {
                    return Ok(());
                }
                if c.role == Role::Send {
                    let what = c.describe(to);
                    let e =
                        Error::failure(format!("{what}: the peer closed its send/recv service"));
                    fail_comm(&mut g, to, e, Some(&mut *self.ep));
                } else if c.peer_left.is_none() {
                    // The sender's eager transfers are done on its side before they arrive
                    // here: receives of them stay; the ones it never started fail now.
                    c.peer_left = Some((started, Instant::now()));
                    let e = c.peer_left_error(to, started);
                    let mut unmet = Vec::new();
                    for (i, s) in c.slots.iter_mut().enumerate() {
                        let waiting = matches!(s.state, SlotState::Stashed | SlotState::Posted);
                        if waiting && !protocol::seq_before(s.seq, started) {
                            s.state = SlotState::Error(e.clone());
                            if s.outstanding == 0 {
                                s.tensor = None;
                            }
                            unmet.push(i as u8);
                        }
                    }
                    c.in_flight -= unmet.len();
                    crate::log_info!(
                        "sendrecv",
                        "{}: the peer closed after {started} transfer(s); {} receive(s) still to take, {} failed",
                        c.describe(to),
                        c.in_flight,
                        unmet.len()
                    );
                    if !unmet.is_empty() {
                        self.ep.cancel_where(|ctx| {
                            let (kind, comm, slot, _) = unpack(ctx);
                            comm == to && unmet.contains(&slot) && matches!(kind, K_FIRST | K_CHUNK)
                        });
                    }
                }
            }
        }
        Ok(())
    }

    /// Deadlines of connections, silence of peers, pings.
    fn tick(&mut self) -> Result<()> {
        let now = Instant::now();
        let peer_timeout = self.svc.settings.peer_timeout;
        let ping_every =
            (peer_timeout / 5).clamp(Duration::from_millis(50), Duration::from_secs(1));
        let mut pings = Vec::new();
        {
            let mut g = self.svc.inner.lock();
            for id in 0..g.comms.len() {
                let c = &mut g.comms[id];
                let id = id as u16;
                match c.phase {
                    Phase::Pending | Phase::Greeting { .. } if now >= c.deadline => {
                        // A hello that got no welcome may have left a half-open connection.
                        self.broken |= matches!(c.phase, Phase::Greeting { .. });
                        let e = Error::new(
                            ErrorKind::Timeout,
                            format!(
                                "{}: no connection within {:.0?} (is the peer's {} running, with the same NEURON_RT_ASYNC_SENDRECV_BOOTSTRAP_PORT?)",
                                c.describe(id),
                                self.svc.settings.connect_timeout,
                                match c.role {
                                    Role::Send => "accept",
                                    Role::Recv => "connect",
                                }
                            ),
                        );
                        fail_comm(&mut g, id, e, Some(&mut *self.ep));
                    }
                    Phase::Connected { .. } if c.peer_left.is_some() => {
                        // The peer is gone: no pings. A receive of what it started waits for
                        // the bytes as long as a silent peer is given, counted from the receive
                        // or the last bytes, whichever came later.
                        let (started, at) = c.peer_left.expect("matched");
                        if c.in_flight == 0 && !protocol::seq_before(c.next_seq, started) {
                            let e = c.peer_left_error(id, started);
                            fail_comm(&mut g, id, e, Some(&mut *self.ep));
                        } else if c.in_flight > 0
                            && now.duration_since(at.max(c.last_heard)) > peer_timeout
                        {
                            let e = Error::new(
                                ErrorKind::Timeout,
                                format!(
                                    "{}: the peer closed its send/recv service after {started} transfer(s), and {} receive(s) of them got no bytes within {:.1?} (OPENNRT_NET_PEER_TIMEOUT)",
                                    c.describe(id),
                                    c.in_flight,
                                    peer_timeout
                                ),
                            );
                            fail_comm(&mut g, id, e, Some(&mut *self.ep));
                        }
                    }
                    Phase::Connected { peer, peer_comm } => {
                        if now.duration_since(c.last_heard) > peer_timeout {
                            let e = Error::new(
                                ErrorKind::Timeout,
                                format!(
                                    "{}: the peer has been silent for {:.1?} (OPENNRT_NET_PEER_TIMEOUT)",
                                    c.describe(id),
                                    now.duration_since(c.last_heard)
                                ),
                            );
                            self.broken = true;
                            fail_comm(&mut g, id, e, Some(&mut *self.ep));
                        } else if now.duration_since(c.last_ping) >= ping_every {
                            c.last_ping = now;
                            pings.push((id, peer, peer_comm));
                        }
                    }
                    _ => {}
                }
            }
        }
        for (id, peer, peer_comm) in pings {
            self.send_control(
                peer,
                id,
                &Control::Ping {
                    from: id,
                    to: peer_comm,
                },
            )?;
        }
        Ok(())
    }
}

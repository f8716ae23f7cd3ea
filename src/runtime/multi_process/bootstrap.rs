//! One rank per process (docs/contract/abi.md §5.10–§5.11; docs/design.md §2.6–§2.7): the
//! job's processes, their connection to the root, and collectives whose ranks live in several
//! processes.
//!
//! A world larger than the process's visible cores is multi-process. The process owning global id 0
//! is the job's **root**: it binds `NEURON_RT_ROOT_COMM_ID` ("rank 0's process binds the root
//! port", docs/contract/abi.md §5.11) and every other process connects to it, retrying until
//! `OPENNRT_BOOTSTRAP_TIMEOUT` (seconds, default 30). The root greets every connection with a
//! random nonce; the hello is checked (bounded length and deadline, magic, OpenNRT version, and
//! with `OPENNRT_JOB_SECRET` a proof of the secret over the nonce: `wire`'s "Strangers"); a
//! connection that fails it is refused and logged once at WARNING with its address, and the job
//! goes on. Each core's join is checked by the root against the world it knows (size, duplicate
//! global ids) and refused with a message naming both sides. A refusal that breaks the world (two
//! processes claiming one id) fails every process: the root broadcasts it.
//!
//! **Collectives.** The root is the meeting place. Device collectives (`nrta_cc_*`, the barrier's
//! all-reduce) run on shared simulated devices (`runtime::multi_process::run`): each rank runs its own
//! TOP_SPs on HBM and semaphores in shared memory, and meets the others here before it runs
//! ([`meet_go`]: the requests and program digests are compared, every rank gets every device
//! segment's name; the end of a run is met in shared memory). The root's own ranks meet in its in-memory
//! rendezvous; a member's rank sends [`Msg::Meet`] and the root's handler joins the same
//! rendezvous for it. A host all-gather ([`remote_run`]) stages the member's data in a
//! shared-memory segment (`runtime::multi_process::shm`) that the root maps, gathers and writes back;
//! a member on another host than the root's sends it in the arrival and gets the result in the
//! answer instead (hex in the JSON message, [`wire::INLINE_MAX`] bytes at most).
//!
//! **Faults.** A member's connection ending without its goodbye means the process died: the root
//! unlinks its shared-memory names, fails every open and later meeting in which one of its
//! ranks had not arrived with `NRT_EXEC_HW_ERR_COLLECTIVES`, naming the rank, its process and
//! the collective, and tells every member at once (`WorldFailed`), so that ranks already inside
//! a shared-device run stop waiting ([`job_error`]). A member whose connection to the root
//! ends fails its pending collectives the same way. A live rank that never arrives is the
//! rendezvous timeout (`NRT_TIMEOUT`).

use std::collections::{BTreeMap, HashMap};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::error::{Error, ErrorKind, Result};
use crate::runtime::collective::RankIo;
use crate::runtime::comm::parse_root_comm_id;
use crate::runtime::multi_process::run::{self, go_meetings, GoArrival, Segments};
use crate::runtime::multi_process::shm::{self, Segment};
use crate::runtime::multi_process::wire::{self, Msg, WireError, WireRequest};
use crate::runtime::rendezvous::GroupKey;

mod root;

/// The version a process announces (`OPENNRT_VERSION_OVERRIDE` replaces it, for tests).
pub fn version() -> Result<String> {
    Ok(crate::runtime::process::config()?.version.clone())
}

/// How long a process keeps trying to reach the root (`OPENNRT_BOOTSTRAP_TIMEOUT`).
fn bootstrap_timeout() -> Result<Duration> {
    Ok(crate::runtime::process::config()?.bootstrap_timeout)
}

/// A member process's link to the root.
#[derive(Debug)]
struct Member {
    /// The job's tag, from the root's welcome (`shm::job_tag`).
    tag: String,
    /// Whether the root is on another host (reached over the network), and its address.
    root_elsewhere: bool,
    root_addr: Option<SocketAddr>,
    writer: Mutex<TcpStream>,
    pending: Mutex<HashMap<u64, Sender<Msg>>>,
    failed: Mutex<Option<Error>>,
    closing: AtomicBool,
    /// The root said goodbye (`Msg::Bye`).
    root_left: AtomicBool,
    /// Set when the connection then ended: nothing new can start (`check`), but runs under
    /// way finish ([`job_error`] does not report it; [`root_left`] does).
    left: Mutex<Option<Error>>,
    next_id: AtomicU64,
    staging: Mutex<HashMap<u32, Arc<Segment>>>,
}

#[derive(Debug, Clone)]
enum Job {
    Root(Arc<root::Root>),
    Member(Arc<Member>),
}

static JOB: Mutex<Option<Job>> = Mutex::new(None);
static CONNECTING: Mutex<()> = Mutex::new(());

fn resolve(host: &str, port: u16) -> Result<Vec<SocketAddr>> {
    let addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|e| {
            Error::invalid(format!(
                "NEURON_RT_ROOT_COMM_ID: cannot resolve {host:?}: {e}"
            ))
        })?
        .collect();
    if addrs.is_empty() {
        return Err(Error::invalid(format!(
            "NEURON_RT_ROOT_COMM_ID: {host:?} resolves to no address"
        )));
    }
    Ok(addrs)
}

/// Register core's global id `gid` of a `count`-rank world `slot` with the job at `root`
/// (`host:port`), becoming the root when `gid` is 0 or connecting to it otherwise.
pub fn join(slot: u8, gid: u32, count: u32, root_id: &str) -> Result<()> {
    let (host, port) = parse_root_comm_id(root_id)?;
    if gid == 0 {
        let r = become_root(&host, port)?;
        return r.register_local(slot, gid, count);
    }
    let timeout = bootstrap_timeout()?;
    let deadline = Instant::now() + timeout;
    loop {
        let job = JOB.lock().clone();
        match job {
            Some(Job::Root(r)) => return r.register_local(slot, gid, count),
            Some(Job::Member(m)) => return m.join(slot, gid, count),
            None => {}
        }
        // One connection per process: threads of this process wait for each other here.
        let guard = CONNECTING.lock();
        if JOB.lock().is_some() {
            continue;
        }
        match connect(&host, port) {
            Ok(m) => {
                let mut job = JOB.lock();
                if let Some(Job::Root(r)) = job.clone() {
                    // This process became the root while connecting (to itself): drop the link.
                    drop(job);
                    m.discard();
                    return r.register_local(slot, gid, count);
                }
                *job = Some(Job::Member(m.clone()));
                drop(job);
                drop(guard);
                return m.join(slot, gid, count);
            }
            Err(e) if e.kind() == ErrorKind::Timeout && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) if e.kind() == ErrorKind::Timeout => {
                return Err(Error::new(
                    ErrorKind::Timeout,
                    format!(
                        "no root at {root_id} after {:?} ({}): the process \
                         owning global id 0 never listened",
                        timeout,
                        crate::runtime::config::BOOTSTRAP_TIMEOUT_ENV
                    ),
                ))
            }
            Err(e) => return Err(e),
        }
    }
}

fn become_root(host: &str, port: u16) -> Result<Arc<root::Root>> {
    let mut job = JOB.lock();
    match job.clone() {
        Some(Job::Root(r)) => return Ok(r),
        Some(Job::Member(_)) => {
            return Err(Error::invalid(
                "global id 0 joins a process that already joined the job as a member: the \
                 process owning global id 0 is the root and must be the one listening",
            ))
        }
        None => {}
    }
    let mut last = None;
    for a in resolve(host, port)? {
        match TcpListener::bind(a) {
            Ok(l) => {
                let r = root::Root::start(l)?;
                *job = Some(Job::Root(r.clone()));
                return Ok(r);
            }
            Err(e) => last = Some((a, e)),
        }
    }
    let (a, e) = last.expect("resolve returns at least one address");
    Err(Error::invalid(format!(
        "cannot listen on NEURON_RT_ROOT_COMM_ID {host}:{port} ({a}): {e}{}",
        if e.kind() == std::io::ErrorKind::AddrInUse {
            " — the port is in use (another job on this port?)"
        } else {
            ""
        }
    )))
}

/// Connect to the root and say hello. `Timeout` kind = nobody listening yet (retry).
fn connect(host: &str, port: u16) -> Result<Arc<Member>> {
    let mut stream = None;
    for a in resolve(host, port)? {
        if let Ok(s) = TcpStream::connect_timeout(&a, Duration::from_secs(2)) {
            stream = Some(s);
            break;
        }
    }
    let mut s = stream.ok_or_else(|| Error::new(ErrorKind::Timeout, "root not listening"))?;
    s.set_nodelay(true).ok();
    // The root speaks first (its challenge) and answers the hello at once: a listener that
    // stays silent is not a job's root.
    s.set_read_timeout(Some(wire::HELLO_DEADLINE)).ok();
    let silent = |what: &str, e: Error| {
        Error::failure(format!(
            "the process listening on {host}:{port} (NEURON_RT_ROOT_COMM_ID) did not {what} \
             within {} s, as a job's root does: {e}",
            wire::HELLO_DEADLINE.as_secs()
        ))
    };
    let nonce = match wire::recv(&mut s).map_err(|e| silent("send its challenge", e))? {
        Some(Msg::Challenge { nonce }) => wire::unhex(&nonce)?,
        Some(Msg::Reject { reason }) => return Err(Error::invalid(reason)),
        other => {
            return Err(Error::failure(format!(
                "the root at {host}:{port} greeted this process with {other:?}, not a challenge"
            )))
        }
    };
    let (magic, version, pid, me) = (
        wire::MAGIC,
        version()?,
        std::process::id(),
        super::host::key().to_string(),
    );
    let proof = crate::runtime::process::config()?
        .job_secret
        .as_ref()
        .map(|k| wire::hex(&wire::proof(k.bytes(), &nonce, magic, &version, pid, &me)));
    wire::send(
        &mut s,
        &Msg::Hello {
            magic,
            version,
            pid,
            host: me,
            proof,
        },
    )?;
    let (tag, root_host);
    match wire::recv(&mut s).map_err(|e| silent("answer the hello", e))? {
        Some(Msg::Welcome { tag: t, host: h }) => (tag, root_host) = (t, h),
        Some(Msg::Reject { reason }) => return Err(Error::invalid(reason)),
        other => {
            return Err(Error::failure(format!(
                "the root at {host}:{port} answered the hello with {other:?}"
            )))
        }
    }
    s.set_read_timeout(None)
        .map_err(|e| Error::failure(format!("socket: {e}")))?;
    let reader = s
        .try_clone()
        .map_err(|e| Error::failure(format!("socket: {e}")))?;
    let root_addr = s.peer_addr().ok();
    let m = Arc::new(Member {
        tag,
        root_elsewhere: !root_host.is_empty() && root_host != super::host::key(),
        root_addr,
        writer: Mutex::new(s),
        pending: Mutex::new(HashMap::new()),
        failed: Mutex::new(None),
        closing: AtomicBool::new(false),
        root_left: AtomicBool::new(false),
        left: Mutex::new(None),
        next_id: AtomicU64::new(1),
        staging: Mutex::new(HashMap::new()),
    });
    let m2 = m.clone();
    std::thread::Builder::new()
        .name("opennrt-member".into())
        .spawn(move || m2.read_loop(reader))
        .map_err(|e| Error::resource(format!("spawn: {e}")))?;
    Ok(m)
}

impl Member {
    fn read_loop(&self, mut r: TcpStream) {
        loop {
            match wire::recv(&mut r) {
                Ok(Some(Msg::WorldFailed {
                    error,
                    dead_pid,
                    dead_host,
                })) => {
                    // The root cannot reach a dead process's shared memory on this host.
                    if dead_pid != 0 && dead_host == super::host::key() {
                        let n = shm::unlink_pid(&self.tag, dead_pid)
                            + shm::unlink_pid(shm::NO_JOB, dead_pid);
                        crate::log_info!(
                            "bootstrap",
                            "unlinked {n} shared-memory objects of dead process {dead_pid}"
                        );
                    }
                    self.world_failed(error.error())
                }
                Ok(Some(
                    m @ (Msg::Joined { .. }
                    | Msg::Done { .. }
                    | Msg::Segments { .. }
                    | Msg::HostsOf { .. }),
                )) => {
                    let id = match &m {
                        Msg::Joined { id, .. }
                        | Msg::Done { id, .. }
                        | Msg::Segments { id, .. }
                        | Msg::HostsOf { id, .. } => *id,
                        _ => unreachable!(),
                    };
                    if let Some(tx) = self.pending.lock().remove(&id) {
                        let _ = tx.send(m);
                    }
                }
                Ok(Some(Msg::Bye)) => self.root_left.store(true, Ordering::SeqCst),
                Ok(Some(other)) => {
                    crate::log_warn!("bootstrap", "unexpected message from the root: {other:?}")
                }
                Ok(None) | Err(_) => {
                    if self.root_left.load(Ordering::SeqCst) {
                        // What waits for the root now can never complete: a participant that
                        // left, which the contract surfaces as NRT_TIMEOUT or a 1200-class
                        // error (docs/contract/abi.md §5.8), never NRT_FAILURE. The chaos test
                        // saw a survivor's pending collective fail with NRT_FAILURE when the
                        // root timed out on a stopped rank first and closed.
                        let e = Error::new(
                            ErrorKind::CollectivesHang,
                            "the job's root process (global id 0) left the job (nrt_close)",
                        );
                        crate::log_info!("bootstrap", "{e}");
                        self.left.lock().get_or_insert(e);
                        self.pending.lock().clear();
                    } else if !self.closing.load(Ordering::SeqCst) {
                        self.fail(Error::new(
                            ErrorKind::CollectivesHang,
                            "the job's root process (global id 0) is gone: its connection ended",
                        ));
                    }
                    return;
                }
            }
        }
    }

    /// Close a link that is not needed (never used for a join).
    fn discard(&self) {
        self.closing.store(true, Ordering::SeqCst);
        let _ = self.writer.lock().shutdown(std::net::Shutdown::Both);
    }

    /// The root says the job failed (a dead process, a broken world): later calls and running
    /// executors get `e`. Calls waiting for the root keep waiting: the root still answers
    /// them (a meeting that completed before the failure succeeds).
    fn world_failed(&self, e: Error) {
        crate::log_error!("bootstrap", "{e}");
        self.failed.lock().get_or_insert(e);
    }

    /// Fail the job for this process: pending calls get `e`, later ones too.
    fn fail(&self, e: Error) {
        crate::log_error!("bootstrap", "{e}");
        self.failed.lock().get_or_insert(e);
        self.pending.lock().clear(); // dropping the senders wakes the waiters
        for (_, s) in self.staging.lock().drain() {
            s.unlink();
        }
        // The job is over: no later process may see its device segments, whoever made them
        // (a dead root cannot unlink its own).
        shm::unlink_job(&self.tag);
    }

    fn check(&self) -> Result<()> {
        if let Some(e) = &*self.failed.lock() {
            return Err(e.clone());
        }
        match &*self.left.lock() {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// Send `m` (built with a fresh id) and wait for its answer.
    fn ask(&self, build: impl FnOnce(u64) -> Msg, wait: Option<Duration>) -> Result<Msg> {
        self.check()?;
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = channel();
        self.pending.lock().insert(id, tx);
        if let Err(e) = wire::send(&mut *self.writer.lock(), &build(id)) {
            self.pending.lock().remove(&id);
            return Err(e);
        }
        // Across hosts, a peer process that the network proxy lost (a cut cable) ends the
        // wait at once: the root's answer would have to cross the same network.
        let lost = || match self.root_elsewhere {
            true => super::proxy::running().and_then(|p| p.any_lost()),
            false => None,
        };
        let start = Instant::now();
        let got = loop {
            let slice = match wait {
                Some(d) => d
                    .saturating_sub(start.elapsed())
                    .min(Duration::from_millis(100)),
                None => Duration::from_millis(100),
            };
            match rx.recv_timeout(slice) {
                Ok(m) => break Ok(m),
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break Err(()),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            }
            if let Some(why) = lost() {
                self.pending.lock().remove(&id);
                return Err(Error::new(
                    ErrorKind::NetworkProxy,
                    format!(
                        "waiting for the job's root to answer: a process on another host: {why}"
                    ),
                ));
            }
            if wait.is_some_and(|d| start.elapsed() >= d) {
                break Err(());
            }
        };
        match got {
            Ok(m) => Ok(m),
            Err(()) => {
                self.pending.lock().remove(&id);
                self.check()?;
                let waited = wait.unwrap_or_default().as_secs_f64();
                Err(match (self.root_elsewhere, self.root_addr) {
                    // The root always answers within the execution timeout (its verdict, when
                    // a rank is missing): across hosts, silence past it is the network's.
                    (true, Some(a)) => Error::new(
                        ErrorKind::NetworkProxy,
                        format!(
                            "the job's root at {a} (on another host) did not answer in {waited:.1} s: the network to the root's host is down, or the root stopped"
                        ),
                    ),
                    _ => Error::new(
                        ErrorKind::Timeout,
                        format!("the root did not answer in {waited:.1} s"),
                    ),
                })
            }
        }
    }

    fn join(&self, slot: u8, gid: u32, count: u32) -> Result<()> {
        let msg = |id| Msg::Join {
            id,
            slot,
            gid,
            count,
        };
        match self.ask(msg, Some(bootstrap_timeout()?))? {
            Msg::Joined { error: None, .. } => Ok(()),
            Msg::Joined { error: Some(e), .. } => Err(e.error()),
            other => Err(Error::failure(format!(
                "unexpected answer to a join: {other:?}"
            ))),
        }
    }

    /// This rank's staging segment, at least `len` bytes.
    fn staging(&self, gid: u32, len: usize) -> Result<Arc<Segment>> {
        let mut st = self.staging.lock();
        if let Some(s) = st.get(&gid) {
            if s.len() >= len {
                return Ok(s.clone());
            }
            s.unlink();
        }
        let cap = len.max(64 << 10).next_power_of_two();
        let n = self.next_id.fetch_add(1, Ordering::SeqCst);
        let name = format!("{}g{gid}-{n}", shm::prefix(&self.tag, std::process::id()));
        let s = Arc::new(Segment::create(&name, cap)?);
        st.insert(gid, s.clone());
        Ok(s)
    }
}

/// What a rank of a member process brings to a collective run at the root.
#[derive(Debug)]
pub struct RemoteArrival<'a> {
    /// "cc", "barrier", "all_gather", "neff", "neff-signature" or "neff-a2av".
    pub kind: &'static str,
    /// World slot.
    pub slot: u8,
    /// Global ids in rank order.
    pub group: &'a [u32],
    /// The collective's number on the group.
    pub instance: u64,
    /// The rank (index in `group`).
    pub rank: u32,
    /// Input bytes.
    pub in_len: u64,
    /// Output bytes.
    pub out_len: u64,
}

impl RemoteArrival<'_> {
    /// The arrival as message `id`: its data staged in segment `shm` of `shm_len` bytes, or
    /// `inline`.
    fn message(&self, id: u64, shm: String, shm_len: u64, inline: Option<String>) -> Msg {
        Msg::Arrive {
            id,
            kind: self.kind.to_string(),
            slot: self.slot,
            group: self.group.to_vec(),
            instance: self.instance,
            rank: self.rank,
            shm,
            shm_len,
            in_len: self.in_len,
            inline,
        }
    }
}

/// Whether collectives of this process run through a root in another process.
pub fn is_member() -> bool {
    matches!(&*JOB.lock(), Some(Job::Member(_)))
}

/// Run one rank's part of a collective whose meeting is at the root: stage the input, arrive,
/// wait for the result (`deadline` plus a margin), store it through `io`.
pub fn remote_run(a: &RemoteArrival, io: &dyn RankIo, deadline: Option<Duration>) -> Result<()> {
    let job = JOB.lock().clone();
    let m = match job {
        Some(Job::Member(m)) => m,
        _ => return Err(Error::failure("remote_run outside a member process")),
    };
    let gid = a.group[a.rank as usize];
    if m.root_elsewhere {
        return remote_run_inline(&m, a, io, deadline);
    }
    let seg = m.staging(gid, a.in_len.max(a.out_len) as usize)?;
    seg.with_mut(0, a.in_len as usize, |dst| io.input_into(dst))??;
    let build = |id| a.message(id, seg.name().to_string(), seg.len() as u64, None);
    let wait = deadline.map(|d| d + Duration::from_secs(10));
    match m.ask(build, wait) {
        Ok(Msg::Done { error: None, .. }) => {
            seg.with_mut(0, a.out_len as usize, |out| io.output(out))?
        }
        Ok(Msg::Done { error: Some(e), .. }) => Err(e.error()),
        Ok(other) => Err(Error::failure(format!(
            "unexpected answer to an arrival: {other:?}"
        ))),
        Err(e) => {
            seg.unlink();
            Err(e)
        }
    }
}

/// [`remote_run`] when the root is on another host and cannot map a staging segment: the input
/// travels in the arrival and the output in the answer, as hex ([`wire::hex`]), so at most
/// [`wire::INLINE_MAX`] bytes each way.
fn remote_run_inline(
    m: &Member,
    a: &RemoteArrival,
    io: &dyn RankIo,
    deadline: Option<Duration>,
) -> Result<()> {
    let biggest = a.in_len.max(a.out_len);
    if biggest > wire::INLINE_MAX as u64 {
        return Err(Error::invalid(format!(
            "a host {} across hosts of {biggest} bytes: its data travels in the bootstrap's \
             messages, at most {} bytes (the root is on another host)",
            a.kind,
            wire::INLINE_MAX
        )));
    }
    let mut input = vec![0u8; a.in_len as usize];
    io.input_into(&mut input)?;
    let inline = wire::hex(&input);
    let build = |id| a.message(id, String::new(), 0, Some(inline.clone()));
    let wait = deadline.map(|d| d + Duration::from_secs(10));
    match m.ask(build, wait)? {
        Msg::Done {
            error: None,
            output: Some(out),
            ..
        } => {
            let out = wire::unhex(&out).map_err(|e| e.context("the root's answer"))?;
            if out.len() as u64 != a.out_len {
                return Err(Error::failure(format!(
                    "the root answered a host {} with {} bytes, not {}",
                    a.kind,
                    out.len(),
                    a.out_len
                )));
            }
            io.output(&out)
        }
        Msg::Done { error: Some(e), .. } => Err(e.error()),
        other => Err(Error::failure(format!(
            "unexpected answer to an inline arrival: {other:?}"
        ))),
    }
}

/// The tag of this process's job, if it is in one (names its shared-memory objects,
/// `shm::job_tag`).
pub fn job_tag() -> Option<String> {
    match &*JOB.lock() {
        Some(Job::Root(r)) => Some(r.tag().to_string()),
        Some(Job::Member(m)) => Some(m.tag.clone()),
        None => None,
    }
}

/// This process's own address on the job's network: where the root listens, or a member's end
/// of its connection to the root — the interface that reaches the other hosts, on which the
/// network proxy opens its endpoint (`runtime::multi_process::proxy`). `None` outside a job, or
/// when the root listens on a wildcard address.
pub fn local_ip() -> Option<std::net::IpAddr> {
    let job = JOB.lock().clone();
    let ip = match job? {
        Job::Root(r) => r.addr().ip(),
        Job::Member(m) => m.writer.lock().local_addr().ok()?.ip(),
    };
    (!ip.is_unspecified()).then_some(ip)
}

/// The address this process's network endpoint binds to: on the interface that
/// `CCOM_SOCKET_IFNAME` / `NCCL_SOCKET_IFNAME` name (`net::iface`), of the root's address
/// family first; otherwise the one its bootstrap connection goes out of ([`local_ip`]).
pub fn network_address() -> Result<Option<std::net::IpAddr>> {
    let cfg = crate::runtime::process::config()?;
    let own = local_ip();
    match &cfg.socket_ifname {
        None => Ok(own),
        Some((var, filter)) => {
            let v6 = own.is_some_and(|ip| ip.is_ipv6());
            let ip = crate::net::iface::address_for(var, filter, v6)?;
            crate::log_info!(
                "net",
                "{var}={}: the network endpoint uses {ip}",
                filter.text()
            );
            Ok(Some(ip))
        }
    }
}

/// The host key of every global id of the job's world of `world` ranks (`None` outside a
/// job), from the root once every one of them has joined.
pub fn job_hosts(world: u32) -> Result<Option<Vec<String>>> {
    let job = JOB.lock().clone();
    match job {
        None => Ok(None),
        Some(Job::Root(r)) => r.host_map(world).map(Some),
        Some(Job::Member(m)) => {
            let wait = bootstrap_timeout()? + Duration::from_secs(3);
            match m.ask(|id| Msg::Hosts { id, world }, Some(wait))? {
                Msg::HostsOf { error: Some(e), .. } => Err(e.error()),
                Msg::HostsOf { hosts, .. } => Ok(Some(hosts)),
                other => Err(Error::failure(format!(
                    "the root answered a hosts question with {other:?}"
                ))),
            }
        }
    }
}

/// Why this process's job cannot go on (a dead process, a broken world), if it cannot.
///
/// A root that left cleanly (`nrt_close`) is not such a failure: runs already under way
/// finish without it (a repeat across hosts may still be finishing on one host when the
/// root's host is done with it), and what needs the root next fails then ([`root_left`]).
pub fn job_error() -> Option<Error> {
    let job = JOB.lock().clone();
    match job {
        Some(Job::Root(r)) => r.job_error(),
        Some(Job::Member(m)) => m.failed.lock().clone(),
        None => None,
    }
}

/// Why nothing more can start in this process's job: its root left it (`nrt_close`). A
/// rank waiting for a peer that has not arrived gives up with it.
pub fn root_left() -> Option<Error> {
    let job = JOB.lock().clone();
    match job {
        Some(Job::Member(m)) => m.left.lock().clone(),
        _ => None,
    }
}

/// How long a shared-device collective may wait for its ranks: the execution timeout for the
/// go meeting (a rank that never arrives), plus a margin at the end of a run (`done`: the
/// slowest rank may run that long first). A member waits for the root's answer to a go a
/// margin longer still, so the root's verdict (naming the missing rank) is what it reports.
pub fn meet_deadline(done: bool) -> Result<Option<Duration>> {
    let d = crate::runtime::process::config()?.exec_timeout();
    let margin = Duration::from_secs(if done { 10 } else { 0 });
    Ok(d.map(|d| d + margin))
}

/// A member waits for the root's answer a little longer than the root waits for the ranks
/// (its verdict, naming the missing rank, is what the member should report), but not so long
/// that a cut cable to the root holds it past the execution timeout by much.
fn member_wait(d: Option<Duration>) -> Option<Duration> {
    d.map(|d| d + Duration::from_secs(3))
}

/// The "go" meeting of a shared-device collective (`runtime::multi_process::run`): at the root, or
/// in this process when it is the root or alone.
pub fn meet_go(key: &GroupKey, instance: u64, rank: u32, go: GoArrival) -> Result<Segments> {
    let deadline = meet_deadline(false)?;
    let job = JOB.lock().clone();
    let member = match job {
        Some(Job::Member(m)) => m,
        _ => return meet_go_here(key, instance, rank, go, deadline),
    };
    let build = |id| Msg::Meet {
        id,
        kind: key.kind.into(),
        slot: key.slot,
        group: key.group.clone(),
        instance,
        rank,
        req: WireRequest::of(&go.req).ok(),
        digest: go.digest,
        seg: go.seg.clone(),
    };
    match member.ask(build, member_wait(deadline))? {
        Msg::Segments {
            error: None,
            segments,
            ..
        } => Ok(Arc::new(segments)),
        Msg::Segments { error: Some(e), .. } => Err(e.error()),
        other => Err(Error::failure(format!(
            "unexpected answer to a go: {other:?}"
        ))),
    }
}

fn meet_go_here(
    key: &GroupKey,
    instance: u64,
    rank: u32,
    go: GoArrival,
    deadline: Option<Duration>,
) -> Result<Segments> {
    let n = key.group.len();
    go_meetings().meet(
        key,
        instance,
        rank,
        go,
        deadline,
        |all| match run::go_check(key, instance, &all) {
            Ok(s) => (0..n).map(|_| Ok(s.clone())).collect(),
            Err(e) => {
                crate::log_error!("cc", "{e}");
                (0..n).map(|_| Err(e.clone())).collect()
            }
        },
    )
}

/// Leave the job (`nrt_close`): a member says goodbye and unlinks its names; the root stops
/// listening, drops its peers and unlinks every name of the job.
pub fn shutdown() {
    let job = JOB.lock().take();
    match job {
        Some(Job::Member(m)) => {
            m.closing.store(true, Ordering::SeqCst);
            let mut w = m.writer.lock();
            let _ = wire::send(&mut *w, &Msg::Bye);
            let _ = w.shutdown(std::net::Shutdown::Both);
            drop(w);
            m.staging.lock().clear();
            shm::unlink_pid(&m.tag, std::process::id());
            // Tensors allocated before the process joined carry no job tag.
            shm::unlink_pid(shm::NO_JOB, std::process::id());
        }
        Some(Job::Root(r)) => r.stop(),
        None => {}
    }
}

//! The job's root process (see `runtime::multi_process::bootstrap`): listens on the root port, checks every
//! process and join, and is the meeting place of every collective.

use super::*;
use crate::runtime::collective;
use crate::runtime::host_collective;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Owner {
    Local,
    Proc(u64, u32),
}

impl Owner {
    fn describe(self) -> String {
        match self {
            Owner::Local => format!("the root process (pid {})", std::process::id()),
            Owner::Proc(_, pid) => format!("process {pid}"),
        }
    }
}

#[derive(Debug)]
struct World {
    count: u32,
    owners: BTreeMap<u32, Owner>,
}

#[derive(Debug)]
struct Proc {
    writer: Arc<Mutex<TcpStream>>,
    reader: TcpStream,
    segs: HashMap<String, Arc<Segment>>,
    /// Its host key (the hello's), and its address as the root sees it.
    host: String,
    addr: Option<std::net::IpAddr>,
}

/// The root of a job.
#[derive(Debug)]
pub(super) struct Root {
    /// The job's tag (`shm::job_tag` of the bound address).
    tag: String,
    addr: SocketAddr,
    /// `OPENNRT_JOB_SECRET`: every hello must prove it ([`wire::proof`]).
    secret: Option<crate::runtime::config::JobSecret>,
    stopping: AtomicBool,
    next_conn: AtomicU64,
    procs: Mutex<HashMap<u64, Proc>>,
    worlds: Mutex<BTreeMap<u8, World>>,
    failed: Mutex<Option<Error>>,
    /// The first death seen (told to the members when the root leaves).
    death: Mutex<Option<Error>>,
    /// Arrivals still to be answered, and a signal when one is.
    in_flight: Mutex<usize>,
    answered: parking_lot::Condvar,
}

/// A fresh random nonce for a connection's challenge (the kernel's random source).
fn nonce() -> std::io::Result<[u8; wire::NONCE_LEN]> {
    use std::io::Read;
    let mut n = [0u8; wire::NONCE_LEN];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut n)?;
    Ok(n)
}

/// A socket read under a deadline: each read waits at most until `until`, so a peer that
/// trickles bytes cannot stretch the hello past [`wire::HELLO_DEADLINE`].
struct Deadline<'a> {
    s: &'a TcpStream,
    until: Instant,
}

impl std::io::Read for Deadline<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = self.until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        self.s.set_read_timeout(Some(left))?;
        (&*self.s).read(buf)
    }
}

fn kind_of(k: &str) -> Result<&'static str> {
    match k {
        "cc" => Ok("cc"),
        "barrier" => Ok("barrier"),
        "all_gather" => Ok("all_gather"),
        // A NEFF model's collectives, its cross-rank sequence check and its all-to-all-v
        // table exchange (`runtime::model`).
        "neff" => Ok("neff"),
        "neff-signature" => Ok("neff-signature"),
        "neff-a2av" => Ok("neff-a2av"),
        other => Err(Error::failure(format!("unknown collective kind {other:?}"))),
    }
}

impl Root {
    /// The address the root listens on.
    pub(super) fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub(super) fn start(l: TcpListener) -> Result<Arc<Root>> {
        let addr = l
            .local_addr()
            .map_err(|e| Error::failure(format!("listener: {e}")))?;
        let tag = shm::job_tag(&addr);
        let stale = shm::unlink_job(&tag);
        if stale > 0 {
            crate::log_warn!(
                "bootstrap",
                "removed {stale} shared-memory object(s) an earlier job on {addr} left"
            );
        }
        let secret = crate::runtime::process::config()?.job_secret.clone();
        let r = Arc::new(Root {
            tag,
            addr,
            secret,
            stopping: AtomicBool::new(false),
            next_conn: AtomicU64::new(1),
            procs: Mutex::new(HashMap::new()),
            worlds: Mutex::new(BTreeMap::new()),
            failed: Mutex::new(None),
            death: Mutex::new(None),
            in_flight: Mutex::new(0),
            answered: parking_lot::Condvar::new(),
        });
        let r2 = r.clone();
        std::thread::Builder::new()
            .name("opennrt-root".into())
            .spawn(move || r2.accept_loop(l))
            .map_err(|e| Error::resource(format!("spawn: {e}")))?;
        crate::log_info!("bootstrap", "root of the job listening on {addr}");
        Ok(r)
    }

    fn accept_loop(self: Arc<Self>, l: TcpListener) {
        for s in l.incoming() {
            if self.stopping.load(Ordering::SeqCst) {
                return;
            }
            let Ok(s) = s else { continue };
            s.set_nodelay(true).ok();
            let r = self.clone();
            let _ = std::thread::Builder::new()
                .name("opennrt-root-conn".into())
                .spawn(move || r.serve(s));
        }
    }

    fn check(&self) -> Result<()> {
        match &*self.failed.lock() {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// Break the world: every process and every pending or later collective fails with `e`.
    fn fail_world(&self, e: Error) {
        crate::log_error!("bootstrap", "{e}");
        self.failed.lock().get_or_insert(e.clone());
        for p in self.procs.lock().values() {
            let _ = wire::send(
                &mut *p.writer.lock(),
                &Msg::WorldFailed {
                    error: WireError::of(&e),
                    dead_pid: 0,
                    dead_host: String::new(),
                },
            );
        }
        collective::meetings().abort_all(&e);
        host_collective::gathers().abort_all(&e);
        go_meetings().abort_all(&e);
    }

    fn register(&self, slot: u8, gid: u32, count: u32, owner: Owner) -> Result<()> {
        self.check()?;
        let mut worlds = self.worlds.lock();
        let w = worlds.entry(slot).or_insert_with(|| World {
            count,
            owners: BTreeMap::new(),
        });
        if w.count != count {
            let e = Error::invalid(format!(
                "{} joins world slot {slot} as global id {gid} of {count} ranks, but the job's \
                 world has {} ranks",
                owner.describe(),
                w.count
            ));
            drop(worlds);
            self.fail_world(e.clone());
            return Err(e);
        }
        match w.owners.get(&gid) {
            Some(&o) if o == owner => Ok(()),
            Some(&o) => {
                let e = Error::invalid(format!(
                    "global id {gid} (world slot {slot}) is claimed by {} and by {}: each rank \
                     must be one core of one process",
                    o.describe(),
                    owner.describe()
                ));
                drop(worlds);
                self.fail_world(e.clone());
                Err(e)
            }
            None => {
                w.owners.insert(gid, owner);
                Ok(())
            }
        }
    }

    pub(super) fn register_local(&self, slot: u8, gid: u32, count: u32) -> Result<()> {
        self.register(slot, gid, count, Owner::Local)
    }

    /// Log a connection refused before it joined: once, at WARNING, naming its address and
    /// why (the reason also goes back to the peer when it is still there to read it).
    fn stranger(&self, s: &mut TcpStream, from: &str, why: &str, tell: bool) {
        if self.stopping.load(Ordering::SeqCst) {
            return;
        }
        crate::log_warn!(
            "bootstrap",
            "refused a connection from {from} to the job's root port: {why}"
        );
        if tell {
            let _ = wire::send(
                s,
                &Msg::Reject {
                    reason: format!("the job's root refused this process: {why}"),
                },
            );
        }
    }

    /// Greet a new connection and read its hello (within [`wire::HELLO_DEADLINE`], at most
    /// [`wire::MAX_HELLO`] bytes), then check it: magic, version, proof of the job secret.
    /// `None`: the connection is refused (logged once; a real member of another version that
    /// proved the secret, or any in a job without one, also fails the world, as a mismatch of
    /// the job's own processes).
    fn hello(&self, s: &mut TcpStream) -> Option<(u32, String)> {
        let from = s
            .peer_addr()
            .map_or_else(|_| "an unknown address".to_string(), |a| a.to_string());
        let nonce = match nonce() {
            Ok(n) => n,
            Err(e) => {
                crate::log_error!("bootstrap", "no nonce for the connection from {from}: {e}");
                return None;
            }
        };
        if wire::send(
            s,
            &Msg::Challenge {
                nonce: wire::hex(&nonce),
            },
        )
        .is_err()
        {
            self.stranger(s, &from, "the connection ended before its hello", false);
            return None;
        }
        let got = wire::recv_bounded(
            &mut Deadline {
                s,
                until: Instant::now() + wire::HELLO_DEADLINE,
            },
            wire::MAX_HELLO,
        );
        let _ = s.set_read_timeout(None);
        let (magic, v, pid, host, proof) = match got {
            Ok(Msg::Hello {
                magic,
                version,
                pid,
                host,
                proof,
            }) => (magic, version, pid, host, proof),
            Ok(other) => {
                let kind = format!("{other:?}");
                let kind = kind
                    .split([' ', '{', '('])
                    .next()
                    .unwrap_or("?")
                    .to_string();
                let why = format!("its first message is a {kind}, not a hello");
                self.stranger(s, &from, &why, true);
                return None;
            }
            Err(wire::Fault::Silent) => {
                let why = format!(
                    "silent past the hello deadline ({} s)",
                    wire::HELLO_DEADLINE.as_secs()
                );
                self.stranger(s, &from, &why, false);
                return None;
            }
            Err(f) => {
                let why = match f {
                    wire::Fault::Closed => "the connection ended before a whole hello".to_string(),
                    wire::Fault::TooLong(n, max) => format!(
                        "its hello's length prefix says {n} bytes, over the bound of {max} \
                         (wire::MAX_HELLO)"
                    ),
                    wire::Fault::Garbage(e) => format!("bytes that are not a hello ({e})"),
                    other => format!("reading its hello: {other}"),
                };
                self.stranger(s, &from, &why, false);
                return None;
            }
        };
        // The root closing meanwhile: no version to compare, the peer is refused.
        let ours = version().unwrap_or_default();
        let proof = proof.map(|p| wire::unhex(&p).unwrap_or_default());
        let proven = match (&self.secret, &proof) {
            (None, None) => Ok(false),
            (Some(k), Some(p)) => {
                let want = wire::proof(k.bytes(), &nonce, magic, &v, pid, &host);
                if wire::ct_eq(&want, p) {
                    Ok(true)
                } else {
                    Err(format!(
                        "its hello's proof of the job secret is wrong (process {pid}: every \
                         process of the job must have the same {})",
                        crate::runtime::config::JOB_SECRET_ENV
                    ))
                }
            }
            (Some(_), None) => Err(format!(
                "its hello has no proof of the job secret (process {pid}: the root has {} \
                 set, and every process of the job must have the same)",
                crate::runtime::config::JOB_SECRET_ENV
            )),
            (None, Some(_)) => Err(format!(
                "its hello proves a job secret, but the root has none (process {pid}: set the \
                 same {} on every process of the job, or on none)",
                crate::runtime::config::JOB_SECRET_ENV
            )),
        };
        let mismatch = if magic != wire::MAGIC {
            Some(format!(
                "bootstrap magic {magic:#x}, not {:#x} (not an OpenNRT process)",
                wire::MAGIC
            ))
        } else if v != ours {
            Some(format!(
                "process {pid} runs OpenNRT {v}, the root (pid {}) runs OpenNRT {ours}: every \
                 process of a job must run the same version",
                std::process::id()
            ))
        } else {
            None
        };
        match (mismatch, proven) {
            (None, Ok(_)) => Some((pid, host)),
            (Some(why), Err(unproven)) => {
                self.stranger(s, &from, &format!("{why}; and {unproven}"), true);
                None
            }
            (None, Err(why)) => {
                self.stranger(s, &from, &why, true);
                None
            }
            // No secret, or the secret proven: a process of this job that cannot be part of
            // it (another version) fails the world, as before (a wrong magic is no OpenNRT
            // process at all: only refused).
            (Some(why), Ok(_)) if magic != wire::MAGIC => {
                self.stranger(s, &from, &why, true);
                None
            }
            (Some(why), Ok(_)) => {
                let _ = wire::send(
                    s,
                    &Msg::Reject {
                        reason: why.clone(),
                    },
                );
                self.fail_world(Error::invalid(format!("{why} (connection from {from})")));
                None
            }
        }
    }

    fn serve(self: Arc<Self>, mut s: TcpStream) {
        let conn = self.next_conn.fetch_add(1, Ordering::SeqCst);
        let Some((pid, host)) = self.hello(&mut s) else {
            return;
        };
        let (Ok(writer), Ok(reader)) = (s.try_clone(), s.try_clone()) else {
            return;
        };
        let writer = Arc::new(Mutex::new(writer));
        self.procs.lock().insert(
            conn,
            Proc {
                writer: writer.clone(),
                reader,
                segs: HashMap::new(),
                host,
                addr: s.peer_addr().ok().map(|a| a.ip()),
            },
        );
        let welcome = Msg::Welcome {
            tag: self.tag.clone(),
            host: crate::runtime::multi_process::host::key().to_string(),
        };
        if wire::send(&mut *writer.lock(), &welcome).is_err() {
            return;
        }
        if let Some(e) = self.failed.lock().clone() {
            let _ = wire::send(
                &mut *writer.lock(),
                &Msg::WorldFailed {
                    error: WireError::of(&e),
                    dead_pid: 0,
                    dead_host: String::new(),
                },
            );
        }
        let owner = Owner::Proc(conn, pid);
        let mut said_bye = false;
        loop {
            match wire::recv(&mut s) {
                Ok(Some(Msg::Join {
                    id,
                    slot,
                    gid,
                    count,
                })) => {
                    let error = self
                        .register(slot, gid, count, owner)
                        .err()
                        .map(|e| WireError::of(&e));
                    let _ = wire::send(&mut *writer.lock(), &Msg::Joined { id, error });
                }
                Ok(Some(a @ Msg::Arrive { .. })) => {
                    *self.in_flight.lock() += 1;
                    let (r, w) = (self.clone(), writer.clone());
                    let spawned = std::thread::Builder::new()
                        .name("opennrt-root-arrival".into())
                        .spawn(move || r.arrival(conn, a, w));
                    if spawned.is_err() {
                        // The arrival is lost with the closure: uncount it (its member times out).
                        crate::log_error!("bootstrap", "cannot spawn an arrival thread");
                        *self.in_flight.lock() -= 1;
                    }
                }
                Ok(Some(m @ Msg::Meet { .. })) => {
                    *self.in_flight.lock() += 1;
                    let (r, w) = (self.clone(), writer.clone());
                    let spawned = std::thread::Builder::new()
                        .name("opennrt-root-meet".into())
                        .spawn(move || r.meeting(m, w));
                    if spawned.is_err() {
                        crate::log_error!("bootstrap", "cannot spawn a meeting thread");
                        *self.in_flight.lock() -= 1;
                    }
                }
                Ok(Some(Msg::Hosts { id, world })) => {
                    *self.in_flight.lock() += 1;
                    let (r, w) = (self.clone(), writer.clone());
                    let spawned = std::thread::Builder::new()
                        .name("opennrt-root-hosts".into())
                        .spawn(move || {
                            let answer = match r.host_map(world) {
                                Ok(hosts) => Msg::HostsOf {
                                    id,
                                    error: None,
                                    hosts,
                                },
                                Err(e) => Msg::HostsOf {
                                    id,
                                    error: Some(WireError::of(&e)),
                                    hosts: Vec::new(),
                                },
                            };
                            let _ = wire::send(&mut *w.lock(), &answer);
                            *r.in_flight.lock() -= 1;
                            r.answered.notify_all();
                        });
                    if spawned.is_err() {
                        crate::log_error!("bootstrap", "cannot spawn a hosts thread");
                        *self.in_flight.lock() -= 1;
                    }
                }
                Ok(Some(Msg::Bye)) => said_bye = true,
                Ok(Some(other)) => crate::log_warn!(
                    "bootstrap",
                    "unexpected message from process {pid}: {other:?}"
                ),
                Ok(None) | Err(_) => break,
            }
        }
        self.gone(conn, pid, said_bye);
    }

    /// A process's connection ended: without a goodbye it died.
    fn gone(&self, conn: u64, pid: u32, said_bye: bool) {
        let (host, addr) = match self.procs.lock().remove(&conn) {
            Some(p) => (p.host, p.addr),
            None => (String::new(), None),
        };
        let here = host.is_empty() || host == crate::runtime::multi_process::host::key();
        let place = match (here, addr) {
            (true, _) => format!("its process {pid}"),
            (false, Some(ip)) => format!("its process {pid} on host {ip}"),
            (false, None) => format!("its process {pid} on another host"),
        };
        if self.stopping.load(Ordering::SeqCst) {
            return;
        }
        let gids: Vec<(u8, u32)> = self
            .worlds
            .lock()
            .iter()
            .flat_map(|(&slot, w)| {
                w.owners
                    .iter()
                    .filter(|(_, &o)| o == Owner::Proc(conn, pid))
                    .map(move |(&g, _)| (slot, g))
            })
            .collect();
        // Only this host's shared memory is the root's to clean (pids repeat across hosts);
        // a member on the dead process's host cleans its own (`WorldFailed`'s dead_host).
        if !gids.is_empty() && here {
            shm::unlink_pid(&self.tag, pid);
            // Its tensors allocated before it joined carry no job tag.
            shm::unlink_pid(shm::NO_JOB, pid);
        }
        for (slot, gid) in gids {
            // A rank that left with nrt_close is as lost to the collectives waiting for it as a
            // dead one: both are a missing participant (1200-class, docs/contract/abi.md §5.8).
            let e = if said_bye {
                Error::new(
                    ErrorKind::CollectivesHang,
                    format!("global id {gid} left the job ({place} called nrt_close)"),
                )
            } else {
                Error::new(
                    ErrorKind::CollectivesHang,
                    format!("global id {gid} is gone: {place} died (connection to the root ended without nrt_close)"),
                )
            };
            if !said_bye {
                crate::log_error!("bootstrap", "world slot {slot}: {}", e.message());
                let first = self.death.lock().is_none();
                self.death.lock().get_or_insert(e.clone());
                // Ranks of other processes may be inside a shared-device run with the dead
                // one: tell them now, not when they next meet.
                if first {
                    self.broadcast_failure(&e, pid, &host);
                }
            }
            collective::meetings().mark_dead(gid, &e);
            host_collective::gathers().mark_dead(gid, &e);
            go_meetings().mark_dead(gid, &e);
        }
    }

    /// The host key of every global id of a world of `world` ranks, once all of them have
    /// joined some world slot of that size (waiting up to `OPENNRT_BOOTSTRAP_TIMEOUT`).
    pub(super) fn host_map(&self, world: u32) -> Result<Vec<String>> {
        let deadline = Instant::now() + super::bootstrap_timeout()?;
        let own = crate::runtime::multi_process::host::key().to_string();
        loop {
            // A dead process will never join: its death is the answer.
            if let Some(e) = self.job_error() {
                return Err(e);
            }
            let owners: Option<Vec<Owner>> = self
                .worlds
                .lock()
                .values()
                .find(|w| w.count == world && w.owners.len() as u32 == world)
                .map(|w| w.owners.values().copied().collect());
            if let Some(owners) = owners {
                let procs = self.procs.lock();
                return owners
                    .iter()
                    .map(|o| match *o {
                        Owner::Local => Ok(own.clone()),
                        Owner::Proc(conn, pid) => procs
                            .get(&conn)
                            .map(|p| p.host.clone())
                            .ok_or_else(|| Error::failure(format!("process {pid} left the job"))),
                    })
                    .collect();
            }
            if Instant::now() >= deadline {
                return Err(Error::new(
                    ErrorKind::Timeout,
                    format!(
                        "not every global id of a {world}-rank world joined in time                          (OPENNRT_BOOTSTRAP_TIMEOUT), so the job's hosts are not known"
                    ),
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Tell every member process that the job failed (`WorldFailed`).
    fn broadcast_failure(&self, e: &Error, dead_pid: u32, dead_host: &str) {
        let msg = Msg::WorldFailed {
            error: WireError::of(e),
            dead_pid,
            dead_host: dead_host.to_string(),
        };
        let writers: Vec<_> = self
            .procs
            .lock()
            .values()
            .map(|p| p.writer.clone())
            .collect();
        for w in writers {
            let _ = wire::send(&mut *w.lock(), &msg);
        }
    }

    /// The job's tag (names its shared-memory objects).
    pub(super) fn tag(&self) -> &str {
        &self.tag
    }

    /// Why the job cannot go on: a broken world or a dead process.
    pub(super) fn job_error(&self) -> Option<Error> {
        let failed = self.failed.lock().clone();
        failed.or_else(|| self.death.lock().clone())
    }

    /// Answer one shared-device "go" of a member's rank (counted in `in_flight`).
    fn meeting(&self, m: Msg, w: Arc<Mutex<TcpStream>>) {
        let Msg::Meet {
            id,
            kind,
            slot,
            group,
            instance,
            rank,
            req,
            digest,
            seg,
        } = m
        else {
            unreachable!()
        };
        let kind = kind_of(&kind).unwrap_or("cc");
        let key = GroupKey { kind, slot, group };
        let r = self.check().and_then(|()| {
            let req = req
                .ok_or_else(|| Error::failure("a go arrived without its request"))?
                .request()?;
            let go = GoArrival { req, digest, seg };
            meet_go_here(&key, instance, rank, go, meet_deadline(false)?)
        });
        let answer = match r {
            Ok(s) => Msg::Segments {
                id,
                error: None,
                segments: s.to_vec(),
            },
            Err(e) => Msg::Segments {
                id,
                error: Some(WireError::of(&e)),
                segments: Vec::new(),
            },
        };
        let _ = wire::send(&mut *w.lock(), &answer);
        *self.in_flight.lock() -= 1;
        self.answered.notify_all();
    }

    /// Answer one arrival (counted in `in_flight` by the caller, uncounted here).
    fn arrival(&self, conn: u64, a: Msg, w: Arc<Mutex<TcpStream>>) {
        if let Msg::Arrive { id, .. } = a {
            let (output, error) = match self.run_arrival(conn, a) {
                Ok(out) => (out.map(|o| wire::hex(&o)), None),
                Err(e) => (None, Some(WireError::of(&e))),
            };
            let done = Msg::Done { id, error, output };
            let _ = wire::send(&mut *w.lock(), &done);
        }
        *self.in_flight.lock() -= 1;
        self.answered.notify_all();
    }

    fn segment(&self, conn: u64, name: &str, len: u64) -> Result<Arc<Segment>> {
        let mut procs = self.procs.lock();
        let p = procs
            .get_mut(&conn)
            .ok_or_else(|| Error::failure("the arriving process is gone"))?;
        if let Some(s) = p.segs.get(name) {
            return Ok(s.clone());
        }
        let s = Arc::new(Segment::open(name, len as usize)?);
        s.unlink(); // both sides hold it now: nothing stays in /dev/shm
        let stem = name.rsplit_once('-').map_or(name, |(a, _)| a).to_string();
        p.segs.retain(|n, _| !n.starts_with(&format!("{stem}-")));
        p.segs.insert(name.to_string(), s.clone());
        Ok(s)
    }

    /// Run a host all-gather for a member's rank: its input staged in shared memory (the
    /// output goes back there; `None`), or inline (the output is returned, to go inline).
    fn run_arrival(&self, conn: u64, a: Msg) -> Result<Option<Vec<u8>>> {
        self.check()?;
        let Msg::Arrive {
            kind,
            slot,
            group,
            instance,
            rank,
            shm,
            shm_len,
            in_len,
            inline,
            ..
        } = a
        else {
            unreachable!()
        };
        let key = GroupKey {
            kind: kind_of(&kind)?,
            slot,
            group,
        };
        if key.kind != "all_gather" {
            return Err(Error::failure(format!(
                "a staged arrival of kind {kind:?}: device collectives of a job run on shared \
                 device segments (runtime::multi_process::run)"
            )));
        }
        if let Some(hex) = inline {
            let input = wire::unhex(&hex).map_err(|e| e.context("a member's arrival"))?;
            if input.len() as u64 != in_len {
                return Err(Error::invalid(format!(
                    "an inline arrival of {} bytes says it has {in_len}",
                    input.len()
                )));
            }
            let all = host_collective::gather_here(&key, instance, rank, input)?;
            return Ok(Some(all.to_vec()));
        }
        let seg = self.segment(conn, &shm, shm_len)?;
        let mut input = vec![0u8; in_len as usize];
        seg.read(0, &mut input)?;
        let all = host_collective::gather_here(&key, instance, rank, input)?;
        seg.write(0, &all)?;
        Ok(None)
    }

    /// Leave the job. Arrivals already in progress are answered first (collectives that ran
    /// give their results; open ones were failed by `nrt_close` before this), for at most 10 s;
    /// then the members hear the first death (if any) and the goodbye.
    pub(super) fn stop(&self) {
        let until = Instant::now() + Duration::from_secs(10);
        let mut n = self.in_flight.lock();
        while *n > 0 && Instant::now() < until {
            self.answered.wait_until(&mut n, until);
        }
        drop(n);
        self.stopping.store(true, Ordering::SeqCst);
        if let Some(e) = self.death.lock().clone() {
            for p in self.procs.lock().values() {
                let _ = wire::send(
                    &mut *p.writer.lock(),
                    &Msg::WorldFailed {
                        error: WireError::of(&e),
                        dead_pid: 0,
                        dead_host: String::new(),
                    },
                );
            }
        }
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
        for p in self.procs.lock().drain().map(|(_, p)| p) {
            let _ = wire::send(&mut *p.writer.lock(), &Msg::Bye);
            let _ = p.reader.shutdown(std::net::Shutdown::Both);
        }
        shm::unlink_job(&self.tag);
    }
}

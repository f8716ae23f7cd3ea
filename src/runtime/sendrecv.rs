//! Point-to-point tensors between logical cores of any processes and hosts: the core of
//! `nrt_async_sendrecv.h` (docs/contract/abi.md §3.7, §5.12).
//!
//! **Shape.** A logical core's *service* ([`init`] … [`close`]) owns one thread and one
//! libfabric RDM endpoint with tagged messages (`net::fabric`, the transport and provider of
//! the collectives across hosts). A sender's [`connect`] and a receiver's [`accept`] each make a
//! [`Comm`]; they meet through the key-value store at the bootstrap port ([`store`]), where the
//! receiver publishes its endpoint address under `"handle-"` + receiver core + sender core +
//! sender host and the sender takes it ([`connector`]); a hello and a welcome on the endpoint
//! then connect both ends. [`Comm::send`] and [`Comm::recv`] queue a [`Request`] in one of the
//! communicator's 128 slots; the service thread moves the tensor bytes in chunks of
//! [`Settings::chunk`], straight from and into the tensor's memory (no copy), and
//! [`Request::test`] reports completion and the byte count.
//!
//! **Choices** (the contract is silent):
//! * The endpoint binds, at the first connect or accept of a core, to the address the route to
//!   the peer goes out of (or the interface of `CCOM_SOCKET_IFNAME`); every later peer of that
//!   core must be reachable from it, else the call fails saying so.
//! * A receive of `length` bytes takes any send of at most `length` bytes and reports the
//!   size sent. A larger send fails the receive with `NRT_INVALID`; its remaining chunks would
//!   meet the next receives, so the communicator is out of step and fails at both ends.
//! * A peer that closes its service fails what its communicators still wait for at once, except
//!   a receiver's receives of transfers the sender started before it closed (the close says
//!   how many): an eager send is done before its bytes arrive, so they complete as usual, or
//!   fail after `OPENNRT_NET_PEER_TIMEOUT` if the bytes never come. A peer that dies or goes
//!   quiet fails them after `OPENNRT_NET_PEER_TIMEOUT` (each connected communicator pings its
//!   peer five times per period), with `NRT_TIMEOUT`. A transport error
//!   fails the communicator with `NRT_FAILURE` and libfabric's reason. A communicator that
//!   failed fails every later request at once.
//! * A send is done once its tensor may be reused: below the provider's eager size (16 KiB for
//!   tcp;ofi_rxm) that is as soon as the provider has copied the bytes, before the receiver
//!   has posted; above it, once the receiver has taken them.
//! * `connect` and `accept` time out after `OPENNRT_SENDRECV_CONNECT_TIMEOUT`.
//! * `flush` is a full memory fence: a completion is reported only after the provider wrote
//!   the bytes, and device memory is host memory (docs/design.md §2.7), so nothing else is
//!   pending.

pub mod connector;
pub mod protocol;
mod service;
pub mod store;

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::net::fabric::Endpoint;
use crate::net::iface::IfFilter;
use crate::runtime::config::Config;
use crate::runtime::tensor::Tensor;
use service::{CommState, Command, Phase, Service, SlotState};

/// Communicators per logical core (the vendor's connect-task ring holds 128; docs/contract/abi.md
/// §10 item 13).
pub const MAX_COMMUNICATORS_PER_LNC: usize = 128;
/// Requests per communicator not yet reported done (docs/contract/abi.md §3.7).
pub const MAX_PENDING_REQUESTS: usize = 128;
/// Logical cores are numbered 0..128 on the host, whatever the process sees.
pub const LNC_COUNT: u32 = 128;
/// The default chunk: one message up to this size, a pipeline of them beyond.
pub const DEFAULT_CHUNK: usize = 8 << 20;
/// The smallest chunk `OPENNRT_SENDRECV_CHUNK` may set.
pub const MIN_CHUNK: usize = 4096;

/// The feature gate and the port.
pub const ENABLED_ENV: &str = "NEURON_RT_ASYNC_SENDRECV_EXPERIMENTAL_ENABLED";
/// The rendezvous port variable.
pub const PORT_ENV: &str = "NEURON_RT_ASYNC_SENDRECV_BOOTSTRAP_PORT";
/// The connection deadline variable.
pub const CONNECT_TIMEOUT_ENV: &str = "OPENNRT_SENDRECV_CONNECT_TIMEOUT";
/// The chunk size variable.
pub const CHUNK_ENV: &str = "OPENNRT_SENDRECV_CHUNK";

/// Which end of a communicator this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Made by `connect`: sends.
    Send,
    /// Made by `accept`: receives.
    Recv,
}

/// What a service needs to know, from the configuration ([`Settings::from_config`]).
#[derive(Debug, Clone)]
pub struct Settings {
    /// The rendezvous port.
    pub port: u16,
    /// How long a connect or accept may take.
    pub connect_timeout: Duration,
    /// How long a connected peer may stay silent.
    pub peer_timeout: Duration,
    /// Largest message: a tensor range is sent in chunks of this many bytes.
    pub chunk: usize,
    /// `CCOM_SOCKET_IFNAME` / `NCCL_SOCKET_IFNAME`, if set.
    pub ifname: Option<(&'static str, IfFilter)>,
}

impl Settings {
    /// The settings of `nrt_init`'s configuration; an error when the feature is off or the port
    /// unset (the gate of docs/contract/abi.md §3.7).
    pub fn from_config(c: &Config) -> Result<Settings> {
        if !c.sendrecv.enabled {
            return Err(Error::failure(format!(
                "async send/recv is experimental and off: set {ENABLED_ENV}=1 (and {PORT_ENV}) before nrt_init"
            )));
        }
        let port = c.sendrecv.port.ok_or_else(|| {
            Error::failure(format!(
                "{PORT_ENV} is unset: async send/recv needs the port of its rendezvous store (set it before nrt_init)"
            ))
        })?;
        Ok(Settings {
            port,
            connect_timeout: c.sendrecv.connect_timeout,
            peer_timeout: c.net_peer_timeout,
            chunk: c.sendrecv.chunk,
            ifname: c.socket_ifname.clone(),
        })
    }
}

/// A service's registry entry.
#[derive(Debug)]
enum Entry {
    Running(Arc<Service>),
    /// `close` failed (work was in flight): the service still runs, and `init` fails until a
    /// `close` succeeds (docs/contract/abi.md §3.7).
    CloseFailed(Arc<Service>, Error),
}

impl Entry {
    fn service(&self) -> &Arc<Service> {
        match self {
            Entry::Running(s) | Entry::CloseFailed(s, _) => s,
        }
    }
}

static SERVICES: Mutex<BTreeMap<u32, Entry>> = Mutex::new(BTreeMap::new());

fn check_lnc(lnc: u32) -> Result<()> {
    if lnc >= LNC_COUNT {
        return Err(Error::invalid(format!(
            "lnc {lnc} is not a host logical core (0..{LNC_COUNT})"
        ))
        .with_field("lnc"));
    }
    Ok(())
}

fn service(lnc: u32) -> Result<Arc<Service>> {
    check_lnc(lnc)?;
    match SERVICES.lock().get(&lnc) {
        Some(e) => Ok(e.service().clone()),
        None => Err(Error::failure(format!(
            "the send/recv service of lnc {lnc} is not started: call nrt_async_sendrecv_init({lnc}) first"
        ))),
    }
}

/// Start the service of host logical core `lnc`.
pub fn init(lnc: u32, settings: Settings) -> Result<()> {
    check_lnc(lnc)?;
    let mut reg = SERVICES.lock();
    match reg.get(&lnc) {
        Some(Entry::Running(_)) => {
            return Err(Error::failure(format!(
                "the send/recv service of lnc {lnc} is already started (nrt_async_sendrecv_close it first)"
            )))
        }
        Some(Entry::CloseFailed(_, why)) => {
            return Err(Error::failure(format!(
                "the last nrt_async_sendrecv_close({lnc}) failed ({}); close it successfully before starting it again",
                why.message()
            )))
        }
        None => {}
    }
    store::ensure(settings.port)?;
    let svc = Service::start(lnc, settings)?;
    reg.insert(lnc, Entry::Running(svc));
    crate::log_info!("sendrecv", "lnc {lnc}: send/recv service started");
    Ok(())
}

/// Stop the service of `lnc`. Fails, and keeps it running, while a communicator is still
/// connecting or a request is in flight.
pub fn close(lnc: u32) -> Result<()> {
    check_lnc(lnc)?;
    let mut reg = SERVICES.lock();
    let svc = match reg.get(&lnc) {
        Some(e) => e.service().clone(),
        None => {
            return Err(Error::failure(format!(
                "the send/recv service of lnc {lnc} is not started"
            )))
        }
    };
    let busy = {
        let g = svc.inner.lock();
        let mut why = Vec::new();
        for (id, c) in g.comms.iter().enumerate() {
            if matches!(c.phase, Phase::Pending | Phase::Greeting { .. }) {
                why.push(format!("{} is not connected yet", c.describe(id as u16)));
            } else if c.in_flight > 0 {
                why.push(format!(
                    "{} has {} request(s) in flight",
                    c.describe(id as u16),
                    c.in_flight
                ));
            }
        }
        why
    };
    if !busy.is_empty() {
        let e = Error::failure(format!(
            "cannot close the send/recv service of lnc {lnc}: {}",
            busy.join("; ")
        ));
        reg.insert(lnc, Entry::CloseFailed(svc, e.clone()));
        return Err(e);
    }
    reg.remove(&lnc);
    drop(reg);
    svc.stop();
    crate::log_info!("sendrecv", "lnc {lnc}: send/recv service closed");
    Ok(())
}

/// `nrt_close`: stop every service still running (a warning each: the caller should have
/// closed it). Returns how many.
pub fn shutdown_all() -> usize {
    let all: Vec<(u32, Entry)> = std::mem::take(&mut *SERVICES.lock()).into_iter().collect();
    for (lnc, e) in &all {
        crate::log_warn!(
            "sendrecv",
            "nrt_close: the send/recv service of lnc {lnc} was not closed; stopping it"
        );
        e.service().stop();
    }
    all.len()
}

/// Make completed receives of `lnc` visible (module doc: a fence).
pub fn flush(lnc: u32) -> Result<()> {
    let svc = service(lnc)?;
    if let Some(e) = &svc.inner.lock().failed {
        return Err(e.clone());
    }
    std::sync::atomic::fence(Ordering::SeqCst);
    Ok(())
}

/// The local address toward `peer`: the interface variable's, else the route's.
fn local_address(settings: &Settings, peer: IpAddr) -> Result<IpAddr> {
    if let Some((var, filter)) = &settings.ifname {
        return crate::net::iface::address_for(var, filter, peer.is_ipv6());
    }
    let any: IpAddr = match peer {
        IpAddr::V4(_) => IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
        IpAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
    };
    let route = || -> std::io::Result<IpAddr> {
        let s = UdpSocket::bind(SocketAddr::new(any, 0))?;
        s.connect(SocketAddr::new(peer, 9))?;
        Ok(s.local_addr()?.ip())
    };
    route().map_err(|e| {
        Error::invalid(format!(
            "peer_ip {peer}: no route to it from this host ({e})"
        ))
        .with_field("peer_ip")
    })
}

fn parse_peer(peer_ip: &str) -> Result<IpAddr> {
    peer_ip.trim().parse().map_err(|_| {
        Error::invalid(format!(
            "peer_ip {peer_ip:?} is not an IPv4 or IPv6 address"
        ))
        .with_field("peer_ip")
    })
}

fn nonce() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(Instant::now().elapsed().as_nanos());
    h.write_u32(std::process::id());
    h.finish() | 1
}

fn open_comm(lnc: u32, peer_ip: &str, peer_lnc: u32, role: Role) -> Result<Comm> {
    let peer = parse_peer(peer_ip)?;
    check_lnc(peer_lnc).map_err(|e| e.with_field("peer_lnc"))?;
    let svc = service(lnc)?;
    let local = local_address(&svc.settings, peer)?;
    let deadline = Instant::now() + svc.settings.connect_timeout;
    if svc.bound().is_none() {
        let ep = Endpoint::open_tagged(Some(local)).map_err(|e| {
            e.context(format!(
                "opening the send/recv endpoint of lnc {lnc} on {local}"
            ))
        })?;
        crate::log_info!(
            "sendrecv",
            "lnc {lnc}: endpoint on {local} (provider {})",
            ep.provider()
        );
        svc.install(ep, local)?;
    }
    let (id, handle) = {
        let mut g = svc.inner.lock();
        if let Some(e) = &g.failed {
            return Err(e.clone());
        }
        if g.comms.len() >= MAX_COMMUNICATORS_PER_LNC {
            return Err(Error::resource(format!(
                "lnc {lnc} already has {MAX_COMMUNICATORS_PER_LNC} communicators (the most per core until nrt_async_sendrecv_close)"
            )));
        }
        match &g.bound {
            Some((ip, _)) if *ip != local => {
                return Err(Error::invalid(format!(
                    "peer_ip {peer}: lnc {lnc}'s send/recv endpoint is bound to {ip}, but {peer} is reached from {local}; one core talks through one interface (CCOM_SOCKET_IFNAME picks it)"
                ))
                .with_field("peer_ip"))
            }
            _ => {}
        }
        let id = g.comms.len() as u16;
        let mut c = CommState::new(role, peer, peer_lnc, deadline);
        let handle = (role == Role::Recv).then(|| {
            c.nonce = nonce();
            protocol::Handle {
                addr: g.bound.as_ref().map(|b| b.1.clone()).unwrap_or_default(),
                comm: id,
                nonce: c.nonce,
            }
        });
        g.comms.push(c);
        (id, handle)
    };
    match handle {
        None => connector::spawn_lookup(svc.clone(), id, peer, peer_lnc, deadline),
        Some(h) => {
            let key = protocol::handle_key(lnc, peer_lnc, peer);
            connector::spawn_publish(svc.clone(), id, key, h, deadline);
        }
    }
    Ok(Comm { service: svc, id })
}

/// Start connecting core `lnc` (the sender) to core `peer_lnc` at `peer_ip`.
pub fn connect(lnc: u32, peer_ip: &str, peer_lnc: u32) -> Result<Comm> {
    open_comm(lnc, peer_ip, peer_lnc, Role::Send)
}

/// Start accepting, on core `lnc` (the receiver), the sender `peer_lnc` at `peer_ip`.
pub fn accept(lnc: u32, peer_ip: &str, peer_lnc: u32) -> Result<Comm> {
    open_comm(lnc, peer_ip, peer_lnc, Role::Recv)
}

/// A communicator: one end of a connection between two cores.
#[derive(Debug, Clone)]
pub struct Comm {
    service: Arc<Service>,
    id: u16,
}

impl Comm {
    /// The local core.
    pub fn lnc(&self) -> u32 {
        self.service.lnc
    }

    fn with<R>(&self, f: impl FnOnce(&mut CommState) -> R) -> Result<R> {
        if self.service.closed.load(Ordering::Acquire) {
            return Err(Error::invalid_handle(format!(
                "the send/recv service of lnc {} that made this communicator was closed",
                self.service.lnc
            )));
        }
        let mut g = self.service.inner.lock();
        let c = g
            .comms
            .get_mut(self.id as usize)
            .ok_or_else(|| Error::failure("a communicator its service does not know"))?;
        Ok(f(c))
    }

    /// Connected yet? `NRT_TIMEOUT` (or the failure) once the connection cannot form.
    pub fn test(&self) -> Result<bool> {
        self.service.progress();
        self.with(|c| match &c.phase {
            Phase::Connected { .. } => Ok(true),
            Phase::Failed(e) => Err(e.clone()),
            Phase::Pending | Phase::Greeting { .. } => Ok(false),
        })?
    }

    /// Post a send of `len` bytes of `tensor` at `offset`.
    pub fn send(&self, tensor: &Tensor, offset: u64, len: u64) -> Result<Request> {
        self.post(Role::Send, tensor, offset, len)
    }

    /// Post a receive of up to `len` bytes into `tensor` at `offset`.
    pub fn recv(&self, tensor: &Tensor, offset: u64, len: u64) -> Result<Request> {
        self.post(Role::Recv, tensor, offset, len)
    }

    fn post(&self, role: Role, tensor: &Tensor, offset: u64, len: u64) -> Result<Request> {
        let op = match role {
            Role::Send => "send_tensor",
            Role::Recv => "recv_tensor",
        };
        tensor
            .check_range(offset, len, op)
            .map_err(|e| e.with_field("length"))?;
        let chunk = self.service.settings.chunk;
        let chunks = (len as usize).div_ceil(chunk).max(1) as u64;
        if chunks > protocol::MAX_CHUNKS {
            return Err(Error::invalid(format!(
                "{op} of {len} bytes needs {chunks} chunks of {chunk}; at most {} fit a transfer (raise {CHUNK_ENV})",
                protocol::MAX_CHUNKS
            ))
            .with_field("length"));
        }
        let id = self.id;
        let (slot, gen) = self.with(|c| -> Result<(u8, u32)> {
            let what = c.describe(id);
            if c.role != role {
                return Err(Error::invalid(format!(
                    "{op} on {what}: a {} communicator cannot {}",
                    match c.role {
                        Role::Send => "connect (send)",
                        Role::Recv => "accept (receive)",
                    },
                    match role {
                        Role::Send => "send",
                        Role::Recv => "receive",
                    }
                ))
                .with_field("comm"));
            }
            match &c.phase {
                Phase::Connected { .. } => {
                    if let Some((started, _)) = c.peer_left {
                        if !protocol::seq_before(c.next_seq, started) {
                            return Err(c.peer_left_error(id, started));
                        }
                        // The wait for the closed peer's bytes starts again (service::tick).
                        c.peer_left = Some((started, Instant::now()));
                    }
                }
                Phase::Failed(e) => return Err(e.clone()),
                _ => {
                    return Err(Error::invalid(format!(
                        "{op} on {what}: not connected yet (poll nrt_async_sendrecv_test_comm until done)"
                    ))
                    .with_field("comm"))
                }
            }
            let Some(i) = c.slots.iter().position(|s| matches!(s.state, SlotState::Free)) else {
                return Err(Error::resource(format!(
                    "{op} on {what}: {MAX_PENDING_REQUESTS} requests are pending (a request is recycled once nrt_async_sendrecv_test_request reports it done)"
                )));
            };
            let seq = c.next_seq;
            c.next_seq = (c.next_seq + 1) & protocol::SEQ_MASK;
            c.in_flight += 1;
            let s = &mut c.slots[i];
            s.state = SlotState::Stashed;
            s.ptr = tensor.va().addr().wrapping_add(offset as usize);
            s.len = len as usize;
            s.tensor = Some(tensor.clone());
            s.seq = seq;
            s.chunks = match role {
                Role::Send => chunks,
                Role::Recv => 0,
            };
            s.posted = 0;
            s.outstanding = 0;
            s.bytes = 0;
            Ok((i as u8, s.gen))
        })??;
        self.service.command(Command::Post { comm: id, slot });
        self.service.progress();
        Ok(Request {
            service: self.service.clone(),
            comm: id,
            slot,
            gen,
        })
    }
}

/// A posted send or receive.
#[derive(Debug)]
pub struct Request {
    service: Arc<Service>,
    comm: u16,
    slot: u8,
    gen: u32,
}

impl Request {
    /// The core of the service it belongs to.
    pub fn lnc(&self) -> u32 {
        self.service.lnc
    }

    /// `Some(bytes)` once done (the slot is recycled: this request must not be tested again),
    /// `None` while in flight, or the failure (which stays).
    pub fn test(&self) -> Result<Option<usize>> {
        if self.service.closed.load(Ordering::Acquire) {
            return Err(Error::invalid_handle(format!(
                "the send/recv service of lnc {} that made this request was closed",
                self.service.lnc
            )));
        }
        if let r @ (Err(_) | Ok(Some(_))) = self.check() {
            return r;
        }
        // In flight: move the endpoint from this thread (service module doc), then look again.
        self.service.progress();
        self.check()
    }

    fn check(&self) -> Result<Option<usize>> {
        let mut g = self.service.inner.lock();
        let c = g.comms.get_mut(self.comm as usize).ok_or_else(|| {
            Error::failure("a request of a communicator its service does not know")
        })?;
        let s = &mut c.slots[self.slot as usize];
        if s.gen != self.gen {
            return Err(Error::invalid(
                "the request was already reported done and recycled: it must not be tested again",
            )
            .with_field("request"));
        }
        match &s.state {
            SlotState::Stashed | SlotState::Posted => Ok(None),
            SlotState::Done => {
                let n = s.bytes;
                s.state = SlotState::Free;
                s.gen = s.gen.wrapping_add(1);
                s.tensor = None;
                Ok(Some(n))
            }
            SlotState::Error(e) => Err(e.clone()),
            SlotState::Free => Err(Error::invalid(
                "the request was already reported done and recycled: it must not be tested again",
            )
            .with_field("request")),
        }
    }
}

#[cfg(test)]
mod tests;

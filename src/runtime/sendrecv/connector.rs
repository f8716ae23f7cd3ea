//! The rendezvous of one communicator, on a short-lived thread of its own, so `connect` and
//! `accept` return at once (docs/contract/abi.md §3.7).
//!
//! * An **accept** publishes its handle in the store of its own host (127.0.0.1 at the
//!   bootstrap port; serving it if no process does) and keeps the connection open until the
//!   communicator leaves PENDING. If the store goes away meanwhile (its process exited), the
//!   accept publishes again in the next one. A failed accept takes its handle back.
//! * A **connect** asks the store at `peer_ip` for the mirrored key every [`POLL`] until the
//!   handle is there, then gives it to the service thread, which says hello. A store that is not
//!   there yet is tried again: either side may come first.
//!
//! Both give up at the communicator's deadline, where the service thread fails it with
//! `NRT_TIMEOUT`.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::protocol::{handle_key, Handle};
use super::service::{fail_comm, Command, Phase, Service};
use super::store::{self, Client};
use crate::error::Error;

/// How often a connect asks for a handle that is not there yet.
pub const POLL: Duration = Duration::from_millis(10);
/// How often a waiting accept checks that its store is still there.
const CHECK_STORE: Duration = Duration::from_millis(500);

fn pending(svc: &Service, comm: u16) -> bool {
    !svc.closed.load(std::sync::atomic::Ordering::Acquire)
        && svc
            .inner
            .lock()
            .comms
            .get(comm as usize)
            .is_some_and(|c| matches!(c.phase, Phase::Pending))
}

fn fail(svc: &Service, comm: u16, why: Error) {
    let mut g = svc.inner.lock();
    fail_comm(&mut g, comm, why, None);
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) {
    if let Err(e) = std::thread::Builder::new().name(name.into()).spawn(f) {
        crate::log_error!("sendrecv", "starting a rendezvous thread: {e}");
    }
}

/// Look up the receiver's handle for sender communicator `comm` (module doc).
pub(super) fn spawn_lookup(
    svc: Arc<Service>,
    comm: u16,
    peer_ip: IpAddr,
    peer_lnc: u32,
    deadline: Instant,
) {
    spawn("opennrt-sr-connect", move || {
        let at = SocketAddr::new(peer_ip, svc.settings.port);
        let mut last_error = None;
        while pending(&svc, comm) && Instant::now() < deadline {
            let mut client = match Client::connect(at, svc.settings.connect_timeout) {
                Ok(c) => c,
                Err(e) => {
                    if last_error.as_deref() != Some(e.message()) {
                        crate::log_debug!(
                            "sendrecv",
                            "communicator {comm}: {} (trying again)",
                            e.message()
                        );
                        last_error = Some(e.message().to_string());
                    }
                    std::thread::sleep(POLL * 5);
                    continue;
                }
            };
            let key = match client.local_ip() {
                Ok(me) => handle_key(peer_lnc, svc.lnc, me),
                Err(_) => continue,
            };
            crate::log_debug!("sendrecv", "communicator {comm}: looking up {key} at {at}");
            while pending(&svc, comm) && Instant::now() < deadline {
                match client.take(&key) {
                    Ok(Some(v)) => {
                        match Handle::parse(&v) {
                            Ok(handle) => svc.command(Command::Hello { comm, handle }),
                            Err(e) => fail(&svc, comm, e.context(format!("the store at {at}"))),
                        }
                        return;
                    }
                    Ok(None) => std::thread::sleep(POLL),
                    Err(_) => break,
                }
            }
        }
    });
}

/// Publish the handle of receiver communicator `comm` under `key` and keep it published
/// while the communicator waits (module doc).
pub(super) fn spawn_publish(
    svc: Arc<Service>,
    comm: u16,
    key: String,
    handle: Handle,
    deadline: Instant,
) {
    spawn("opennrt-sr-accept", move || {
        let port = svc.settings.port;
        let local = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port);
        let value = handle.to_text();
        let mut client: Option<Client> = None;
        let mut checked = Instant::now();
        while pending(&svc, comm) && Instant::now() < deadline {
            if client.is_none() {
                let c = store::ensure(port).and_then(|_| {
                    let mut c = Client::connect(local, svc.settings.connect_timeout)?;
                    c.put(&key, &value)?;
                    Ok(c)
                });
                match c {
                    Ok(c) => {
                        crate::log_debug!("sendrecv", "communicator {comm}: published {key}");
                        client = Some(c);
                        checked = Instant::now();
                    }
                    Err(e) => {
                        crate::log_debug!(
                            "sendrecv",
                            "communicator {comm}: publishing: {} (trying again)",
                            e.message()
                        );
                        std::thread::sleep(POLL * 5);
                        continue;
                    }
                }
            }
            std::thread::sleep(POLL * 2);
            if checked.elapsed() >= CHECK_STORE {
                checked = Instant::now();
                // A key nobody uses answers NONE: the store is alive.
                if let Some(c) = client.as_mut() {
                    if c.take("opennrt-alive").is_err() {
                        crate::log_info!(
                            "sendrecv",
                            "communicator {comm}: the store went away; publishing again"
                        );
                        client = None;
                    }
                }
            }
        }
        let connected = svc
            .inner
            .lock()
            .comms
            .get(comm as usize)
            .is_some_and(|c| matches!(c.phase, Phase::Connected { .. }));
        if !connected {
            // Take the handle back, so no later connect finds a dead accept.
            let c = client
                .map(Ok)
                .unwrap_or_else(|| Client::connect(local, Duration::from_secs(1)));
            if let Ok(mut c) = c {
                let _ = c.remove(&key, &value);
            }
        }
    });
}

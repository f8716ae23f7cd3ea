//! The rendezvous key-value store at `NEURON_RT_ASYNC_SENDRECV_BOOTSTRAP_PORT`
//! (docs/contract/abi.md §5.12).
//!
//! **Who serves it.** The first process of a host (of a network namespace) whose
//! `nrt_async_sendrecv_init` finds the port free binds it on every address and serves it for
//! as long as the process lives; the other processes of that host are its clients. A client
//! that finds no server tries to become it, so a store whose process exited is taken over by
//! the next one that needs it (what it held is lost; a waiting accept publishes again).
//!
//! **The protocol** is private (all parties run this library): a client first writes
//! [`GREETING`] and reads it back, so a port held by some other program is named as such
//! instead of read as garbage; then one line per request:
//!
//! | request | answer |
//! |---|---|
//! | `PUT <key> <value>` | `OK` — appends `value` to the key's queue |
//! | `TAKE <key>` | `VAL <value>` (the oldest, removed) or `NONE` |
//! | `DEL <key> <value>` | `OK` — removes that value if it is still there |
//!
//! Choice: a key holds a queue, and a lookup takes what it finds, so the k-th `connect` of a
//! sender pairs with the k-th `accept` of its receiver and a handle is used once. Lines are at
//! most [`LINE_MAX`] bytes, a key holds at most [`VALUES_PER_KEY`] values and the store
//! [`KEYS_MAX`] keys; a connection that breaks a rule or stays silent for [`IDLE`] is closed.

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::error::{Error, Result};

/// The first line both sides write.
pub const GREETING: &str = "OPENNRT-SENDRECV-KV 1";
/// Longest request or answer line.
pub const LINE_MAX: usize = 4096;
/// Most values queued under one key.
pub const VALUES_PER_KEY: usize = 128;
/// Most keys the store holds.
pub const KEYS_MAX: usize = 4096;
/// A client connection silent this long is closed.
pub const IDLE: Duration = Duration::from_secs(120);

type Table = Arc<Mutex<HashMap<String, VecDeque<String>>>>;

/// The ports this process serves.
static SERVED: Mutex<Vec<u16>> = Mutex::new(Vec::new());

/// Make sure someone on this host serves `port`: this process if the port is free. `Ok(true)`
/// when this process serves it.
pub fn ensure(port: u16) -> Result<bool> {
    let mut served = SERVED.lock();
    if served.contains(&port) {
        return Ok(true);
    }
    match TcpListener::bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port)) {
        Ok(listener) => {
            let table: Table = Arc::default();
            std::thread::Builder::new()
                .name("opennrt-sr-store".into())
                .spawn(move || serve(listener, table))
                .map_err(|e| Error::failure(format!("starting the send/recv store thread: {e}")))?;
            served.push(port);
            crate::log_info!(
                "sendrecv",
                "serving the send/recv rendezvous store on port {port}"
            );
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            drop(served);
            // Someone holds it: it must be a store.
            Client::connect(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port), IDLE)
                .map(|_| false)
                .map_err(|e| e.context(format!("port {port} is in use")))
        }
        Err(e) => Err(Error::failure(format!(
            "binding the send/recv rendezvous port {port}: {e}"
        ))),
    }
}

fn serve(listener: TcpListener, table: Table) {
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        let table = table.clone();
        let _ = std::thread::Builder::new()
            .name("opennrt-sr-kv".into())
            .spawn(move || {
                let peer = conn.peer_addr().ok();
                if let Err(why) = talk(conn, &table) {
                    crate::log_debug!("sendrecv", "store client {peer:?} dropped: {why}");
                }
            });
    }
}

/// Read one line of at most [`LINE_MAX`] bytes; `Ok(None)` at a clean end of stream.
fn read_line(r: &mut impl BufRead) -> std::io::Result<Option<String>> {
    let mut buf = Vec::new();
    let n = r
        .by_ref()
        .take(LINE_MAX as u64 + 1)
        .read_until(b'\n', &mut buf)?;
    if n == 0 {
        return Ok(None);
    }
    if buf.last() != Some(&b'\n') {
        return Err(std::io::Error::other("a line too long or cut short"));
    }
    buf.pop();
    String::from_utf8(buf)
        .map(Some)
        .map_err(|_| std::io::Error::other("a line that is not UTF-8"))
}

fn talk(conn: TcpStream, table: &Table) -> std::io::Result<()> {
    conn.set_read_timeout(Some(IDLE))?;
    conn.set_nodelay(true)?;
    let mut out = conn.try_clone()?;
    let mut r = BufReader::new(conn);
    if read_line(&mut r)?.as_deref() != Some(GREETING) {
        return Err(std::io::Error::other("no greeting"));
    }
    writeln!(out, "{GREETING}")?;
    while let Some(line) = read_line(&mut r)? {
        let mut words = line.split(' ');
        let answer = match (words.next(), words.next(), words.next(), words.next()) {
            (Some("PUT"), Some(k), Some(v), None) => {
                let mut t = table.lock();
                if !t.contains_key(k) && t.len() >= KEYS_MAX {
                    return Err(std::io::Error::other("the store is full"));
                }
                let q = t.entry(k.to_string()).or_default();
                if q.len() >= VALUES_PER_KEY {
                    return Err(std::io::Error::other("too many values under one key"));
                }
                q.push_back(v.to_string());
                "OK".to_string()
            }
            (Some("TAKE"), Some(k), None, None) => {
                let mut t = table.lock();
                let v = t.get_mut(k).and_then(VecDeque::pop_front);
                if t.get(k).is_some_and(VecDeque::is_empty) {
                    t.remove(k);
                }
                match v {
                    Some(v) => format!("VAL {v}"),
                    None => "NONE".to_string(),
                }
            }
            (Some("DEL"), Some(k), Some(v), None) => {
                let mut t = table.lock();
                if let Some(q) = t.get_mut(k) {
                    q.retain(|x| x != v);
                    if q.is_empty() {
                        t.remove(k);
                    }
                }
                "OK".to_string()
            }
            _ => return Err(std::io::Error::other(format!("a bad request {line:?}"))),
        };
        writeln!(out, "{answer}")?;
    }
    Ok(())
}

/// A connection to a store.
#[derive(Debug)]
pub struct Client {
    r: BufReader<TcpStream>,
    w: TcpStream,
    at: SocketAddr,
}

impl Client {
    /// Connect to the store at `at` and greet it; replies wait at most `timeout`.
    pub fn connect(at: SocketAddr, timeout: Duration) -> Result<Client> {
        let s = TcpStream::connect_timeout(&at, timeout.min(Duration::from_secs(5)))
            .map_err(|e| Error::failure(format!("no send/recv store at {at}: {e}")))?;
        let io = |e: std::io::Error| Error::failure(format!("the send/recv store at {at}: {e}"));
        s.set_read_timeout(Some(timeout)).map_err(io)?;
        s.set_nodelay(true).map_err(io)?;
        let mut w = s.try_clone().map_err(io)?;
        writeln!(w, "{GREETING}").map_err(io)?;
        let mut r = BufReader::new(s);
        match read_line(&mut r) {
            Ok(Some(l)) if l == GREETING => Ok(Client { r, w, at }),
            _ => Err(Error::failure(format!(
                "{at} does not answer as an OpenNRT send/recv store (another program holds the port?)"
            ))),
        }
    }

    /// The address this connection goes out of: how the store's host sees this one.
    pub fn local_ip(&self) -> Result<IpAddr> {
        self.w
            .local_addr()
            .map(|a| a.ip())
            .map_err(|e| Error::failure(format!("the send/recv store at {}: {e}", self.at)))
    }

    fn ask(&mut self, line: &str) -> Result<String> {
        let at = self.at;
        let io = |e: std::io::Error| Error::failure(format!("the send/recv store at {at}: {e}"));
        writeln!(self.w, "{line}").map_err(io)?;
        read_line(&mut self.r)
            .map_err(io)?
            .ok_or_else(|| Error::failure(format!("the send/recv store at {at} hung up")))
    }

    /// Append `value` under `key`.
    pub fn put(&mut self, key: &str, value: &str) -> Result<()> {
        match self.ask(&format!("PUT {key} {value}"))?.as_str() {
            "OK" => Ok(()),
            other => Err(Error::failure(format!(
                "the store refused a PUT: {other:?}"
            ))),
        }
    }

    /// Take the oldest value under `key`, if any.
    pub fn take(&mut self, key: &str) -> Result<Option<String>> {
        let a = self.ask(&format!("TAKE {key}"))?;
        match a.strip_prefix("VAL ") {
            Some(v) => Ok(Some(v.to_string())),
            None if a == "NONE" => Ok(None),
            None => Err(Error::failure(format!(
                "the store answered a TAKE with {a:?}"
            ))),
        }
    }

    /// Remove `value` from `key`'s queue if it is still there.
    pub fn remove(&mut self, key: &str, value: &str) -> Result<()> {
        self.ask(&format!("DEL {key} {value}")).map(|_| ())
    }
}

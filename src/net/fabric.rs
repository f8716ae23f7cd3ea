//! One libfabric RDM endpoint, loaded at run time (docs/design.md §2 item 12).
//!
//! **Loading.** `libfabric.so.1` is `dlopen`ed the first time a process needs the network
//! ([`library`]), as the vendor's libnrt loads its net plugin: `libnrt.so.1` itself links only
//! the toolchain's libraries, and a machine without libfabric runs every single-host job. The
//! failure names the library and the package that provides it.
//!
//! **Calls.** Only six functions are real exports of libfabric (`fi_getinfo`, `fi_freeinfo`,
//! `fi_dupinfo`, `fi_fabric`, `fi_strerror`, `fi_version`); everything else the headers offer
//! (`fi_domain`, `fi_endpoint`, `fi_sendv`, `fi_cq_read`, …) is a `static inline` call through
//! the object's ops table. This module makes those calls through the struct layouts bindgen
//! generated from the 1.17 headers ([`sys`], checked by `tests/fabric_bindings.rs`), one small
//! function each, so no C file is built.
//!
//! **The endpoint** ([`Endpoint::open`]): `FI_EP_RDM` with `FI_MSG` and send-after-send ordering
//! asked for — but completions come in any order (a large receive, by rendezvous, completes
//! after a later small one; seen with tcp;ofi_rxm), so whoever needs order numbers its messages
//! (`runtime::multi_process::proxy` does) — optionally `FI_TAGGED` as well ([`Endpoint::open_tagged`],
//! for `runtime::sendrecv`, which matches each chunk of a tensor to its receive by tag) — a
//! completion queue in the tagged format (every completion carries its tag) with a wait object (so a thread can block in
//! [`Endpoint::wait_poll`] and be woken by a [`Waker`]), an address vector, and no memory
//! registration (message buffers of a provider that asks for `FI_MR_LOCAL` are not supported;
//! tcp, sockets and shm do not ask). Provider: `FI_PROVIDER` if set (libfabric reads it too),
//! else `tcp;ofi_rxm` (Debian's libfabric provides it; `FI_PROVIDER=efa` on EC2).

// Generated: formatted as bindgen writes it, so the bindings test compares it byte for byte.
#[rustfmt::skip]
pub mod sys;

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::io::IoSlice;
use std::ptr::{null, null_mut};
use std::sync::Arc;
use std::time::Duration;

use once_cell::sync::OnceCell;
use parking_lot::Mutex;

use crate::error::{Error, ErrorKind, Result};

/// The library's file name.
pub const LIBRARY: &str = "libfabric.so.1";
/// The provider when `FI_PROVIDER` is unset.
pub const DEFAULT_PROVIDER: &str = "tcp;ofi_rxm";
/// The API version asked for: 1.9, old enough for every libfabric a distribution ships, new
/// enough for everything used here.
const API: u32 = (1 << 16) | 9;
const FI_EAGAIN: isize = 11;
const FI_EAVAIL: isize = 259;
const FI_ETIMEDOUT: isize = libc::ETIMEDOUT as isize;
const FI_ECANCELED: isize = libc::ECANCELED as isize;
/// `FI_ETRUNC`: a message longer than the receive buffer ([`Completion::code`]).
pub const FI_ETRUNC: i32 = 265;

type GetInfo = unsafe extern "C" fn(
    u32,
    *const c_char,
    *const c_char,
    u64,
    *const sys::fi_info,
    *mut *mut sys::fi_info,
) -> c_int;
type FreeInfo = unsafe extern "C" fn(*mut sys::fi_info);
type DupInfo = unsafe extern "C" fn(*const sys::fi_info) -> *mut sys::fi_info;
type Fabric =
    unsafe extern "C" fn(*mut sys::fi_fabric_attr, *mut *mut sys::fid_fabric, *mut c_void) -> c_int;
type StrError = unsafe extern "C" fn(c_int) -> *const c_char;

/// The loaded library: its exports.
#[derive(Debug)]
pub struct Library {
    getinfo: GetInfo,
    freeinfo: FreeInfo,
    dupinfo: DupInfo,
    fabric: Fabric,
    strerror: StrError,
    _lib: libloading::Library,
}

static LIB: OnceCell<std::result::Result<Library, Error>> = OnceCell::new();

/// libfabric, loaded on first use (module doc).
pub fn library() -> Result<&'static Library> {
    LIB.get_or_init(|| load_from(LIBRARY))
        .as_ref()
        .map_err(Clone::clone)
}

fn load_from(name: &str) -> Result<Library> {
    let missing = |why: String| {
        Error::new(
            ErrorKind::NetworkProxy,
            format!(
                "{name} could not be loaded ({why}): a job whose ranks span hosts needs libfabric \
                 (Debian/Ubuntu: apt install libfabric1; RPM: libfabric)"
            ),
        )
    };
    // SAFETY: loading libfabric runs its constructors, which only initialise the library.
    let lib = unsafe { libloading::Library::new(name) }.map_err(|e| missing(e.to_string()))?;
    // SAFETY: each symbol is looked up with the C prototype of libfabric's header.
    unsafe {
        let getinfo = *lib
            .get::<GetInfo>(b"fi_getinfo\0")
            .map_err(|e| missing(e.to_string()))?;
        let freeinfo = *lib
            .get::<FreeInfo>(b"fi_freeinfo\0")
            .map_err(|e| missing(e.to_string()))?;
        let dupinfo = *lib
            .get::<DupInfo>(b"fi_dupinfo\0")
            .map_err(|e| missing(e.to_string()))?;
        let fabric = *lib
            .get::<Fabric>(b"fi_fabric\0")
            .map_err(|e| missing(e.to_string()))?;
        let strerror = *lib
            .get::<StrError>(b"fi_strerror\0")
            .map_err(|e| missing(e.to_string()))?;
        Ok(Library {
            getinfo,
            freeinfo,
            dupinfo,
            fabric,
            strerror,
            _lib: lib,
        })
    }
}

impl Library {
    fn err(&self, call: &str, code: isize) -> Error {
        let code = code.unsigned_abs() as c_int;
        // SAFETY: fi_strerror returns a static string for any code.
        let text = unsafe { CStr::from_ptr((self.strerror)(code)) }.to_string_lossy();
        Error::new(ErrorKind::NetworkProxy, format!("{call}: {text} (-{code})"))
    }
    fn check(&self, call: &str, ret: c_int) -> Result<()> {
        match ret {
            0 => Ok(()),
            r => Err(self.err(call, r as isize)),
        }
    }
}

/// What finished ([`Endpoint::poll`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    /// The `ctx` the operation was posted with.
    pub ctx: u64,
    /// A send or a receive.
    pub kind: CompletionKind,
    /// The message's tag (a tagged receive: the sender's tag; as the provider reports it
    /// otherwise).
    pub tag: u64,
    /// Why it failed, if it did.
    pub error: Option<String>,
    /// The failure's libfabric error number (positive, e.g. `FI_ETRUNC`); 0 on success.
    pub code: i32,
}

/// `FI_ADDR_UNSPEC`: a receive from any peer.
pub const ANY_PEER: u64 = u64::MAX;

/// A completion's operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompletionKind {
    /// A send.
    Sent,
    /// A receive of `len` bytes.
    Received {
        /// Bytes received.
        len: usize,
    },
}

/// The context every posted operation carries: libfabric's scratch space first (providers that
/// ask for `FI_CONTEXT`/`FI_CONTEXT2` write into it), then ours.
#[repr(C)]
struct OpCtx {
    fi: sys::fi_context2,
    ctx: u64,
}

/// The completion queue, shared with [`Waker`]s: closed under the lock, so a wake never
/// touches a closed queue.
#[derive(Debug)]
struct Cq {
    cq: Mutex<*mut sys::fid_cq>,
}

// SAFETY: the pointer is only used under the mutex (signal) or by the endpoint's owner, and the
// domain is opened FI_THREAD_SAFE.
unsafe impl Send for Cq {}
// SAFETY: `&Cq` reaches the pointer only through the mutex, and the domain is opened
// FI_THREAD_SAFE, so concurrent `fi_cq_signal` calls from several threads are allowed.
unsafe impl Sync for Cq {}

/// Wakes a thread blocked in [`Endpoint::wait_poll`] (`fi_cq_signal`).
#[derive(Debug, Clone)]
pub struct Waker {
    cq: Arc<Cq>,
}

impl Waker {
    /// Wake the waiter (nothing once the endpoint is closed).
    pub fn wake(&self) {
        let g = self.cq.cq.lock();
        if !g.is_null() {
            // SAFETY: a live CQ (not yet closed: closing nulls it under this lock).
            unsafe {
                if let Some(f) = (*(**g).ops).signal {
                    f(*g);
                }
            }
        }
    }
}

/// One RDM endpoint (module doc).
#[derive(Debug)]
pub struct Endpoint {
    lib: &'static Library,
    info: *mut sys::fi_info,
    fabric: *mut sys::fid_fabric,
    domain: *mut sys::fid_domain,
    av: *mut sys::fid_av,
    cq: Arc<Cq>,
    ep: *mut sys::fid_ep,
    provider: String,
    tagged: bool,
    /// Contexts of operations not yet completed (freed at close).
    posted: std::collections::HashSet<usize>,
}

// SAFETY: the endpoint's objects are used by one thread at a time (&mut self); the domain is
// FI_THREAD_SAFE for the waker.
unsafe impl Send for Endpoint {}

fn close(lib: &Library, what: &str, fid: *mut sys::fid) {
    if fid.is_null() {
        return;
    }
    // SAFETY: `fid` is a live object of this endpoint, closed once.
    let r = unsafe { ((*(*fid).ops).close.expect("fi_close"))(fid) };
    if r != 0 {
        crate::log_warn!(
            "net",
            "{}",
            lib.err(&format!("fi_close({what})"), r as isize)
        );
    }
}

impl Endpoint {
    /// Open an endpoint on `bind` (the local address to use; `None`: the provider's choice).
    pub fn open(bind: Option<std::net::IpAddr>) -> Result<Endpoint> {
        Self::open_caps(bind, false)
    }

    /// As [`Endpoint::open`], with tagged messages too ([`Endpoint::post_tsend`]).
    pub fn open_tagged(bind: Option<std::net::IpAddr>) -> Result<Endpoint> {
        Self::open_caps(bind, true)
    }

    fn open_caps(bind: Option<std::net::IpAddr>, tagged: bool) -> Result<Endpoint> {
        let lib = library()?;
        // libfabric's own variable, read as libfabric reads it (not one of ours).
        let provider = crate::runtime::config::env_lookup("FI_PROVIDER")
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| DEFAULT_PROVIDER.to_string());
        // SAFETY: fi_dupinfo(NULL) is fi_allocinfo: a zeroed info with its attribute structs.
        let hints = unsafe { (lib.dupinfo)(null()) };
        if hints.is_null() {
            return Err(Error::new(
                ErrorKind::NetworkProxy,
                "fi_allocinfo: out of memory",
            ));
        }
        let prov = CString::new(provider.clone())
            .map_err(|_| Error::invalid(format!("FI_PROVIDER={provider:?}: a NUL byte")))?;
        // SAFETY: `hints` and its attribute structs were allocated by libfabric; the provider
        // name is strdup'ed because fi_freeinfo frees it.
        unsafe {
            (*hints).caps = u64::from(sys::FI_MSG | if tagged { sys::FI_TAGGED } else { 0 });
            (*hints).mode = sys::FI_CONTEXT | sys::FI_CONTEXT2;
            (*(*hints).ep_attr).type_ = sys::FI_EP_RDM;
            (*(*hints).tx_attr).msg_order = u64::from(sys::FI_ORDER_SAS);
            (*(*hints).rx_attr).msg_order = u64::from(sys::FI_ORDER_SAS);
            (*(*hints).domain_attr).threading = sys::FI_THREAD_SAFE;
            (*(*hints).domain_attr).mr_mode = 0;
            (*(*hints).fabric_attr).prov_name = libc::strdup(prov.as_ptr());
        }
        let node = bind.map(|a| CString::new(a.to_string()).expect("an address has no NUL"));
        let mut info = null_mut();
        // SAFETY: valid hints; `info` receives a list we free.
        let r = unsafe {
            (lib.getinfo)(
                API,
                node.as_ref().map_or(null(), |n| n.as_ptr()),
                null(),
                if bind.is_some() { sys::FI_SOURCE } else { 0 },
                hints,
                &mut info,
            )
        };
        // SAFETY: the hints are ours to free.
        unsafe { (lib.freeinfo)(hints) };
        if r != 0 || info.is_null() {
            let at = bind.map_or(String::new(), |a| format!(" on {a}"));
            let what = if tagged {
                "ordered and tagged"
            } else {
                "ordered"
            };
            return Err(lib.err(
                &format!("fi_getinfo: no RDM endpoint with {what} messages from provider {provider:?}{at}"),
                r as isize,
            ));
        }
        let mut ep = Endpoint {
            lib,
            info,
            fabric: null_mut(),
            domain: null_mut(),
            av: null_mut(),
            cq: Arc::new(Cq {
                cq: Mutex::new(null_mut()),
            }),
            ep: null_mut(),
            provider: provider.clone(),
            tagged,
            posted: Default::default(),
        };
        // On error, Drop closes whatever was opened.
        ep.open_objects()?;
        Ok(ep)
    }

    fn open_objects(&mut self) -> Result<()> {
        let lib = self.lib;
        // SAFETY: every call below is the inline function of the 1.17 headers, made through the
        // ops table of a live object of this endpoint (opened just before, checked non-null by
        // its return code), with arguments of the header's types.
        unsafe {
            let info = self.info;
            if let Ok(name) = CStr::from_ptr((*(*info).fabric_attr).prov_name).to_str() {
                self.provider = name.to_string();
            }
            lib.check(
                "fi_fabric",
                (lib.fabric)((*info).fabric_attr, &mut self.fabric, null_mut()),
            )?;
            let f = self.fabric;
            lib.check(
                "fi_domain",
                ((*(*f).ops).domain.expect("fi_domain"))(f, info, &mut self.domain, null_mut()),
            )?;
            let d = self.domain;
            let mut cq_attr = sys::fi_cq_attr {
                format: sys::FI_CQ_FORMAT_TAGGED,
                wait_obj: sys::FI_WAIT_UNSPEC,
                ..Default::default()
            };
            let mut cq = null_mut();
            lib.check(
                "fi_cq_open",
                ((*(*d).ops).cq_open.expect("fi_cq_open"))(d, &mut cq_attr, &mut cq, null_mut()),
            )?;
            *self.cq.cq.lock() = cq;
            let mut av_attr = sys::fi_av_attr {
                type_: sys::FI_AV_TABLE,
                ..Default::default()
            };
            lib.check(
                "fi_av_open",
                ((*(*d).ops).av_open.expect("fi_av_open"))(
                    d,
                    &mut av_attr,
                    &mut self.av,
                    null_mut(),
                ),
            )?;
            lib.check(
                "fi_endpoint",
                ((*(*d).ops).endpoint.expect("fi_endpoint"))(d, info, &mut self.ep, null_mut()),
            )?;
            let ep = self.ep;
            let bind = (*(*ep).fid.ops).bind.expect("fi_ep_bind");
            lib.check(
                "fi_ep_bind(cq)",
                bind(
                    &mut (*ep).fid,
                    &mut (*cq).fid,
                    u64::from(sys::FI_TRANSMIT | sys::FI_RECV),
                ),
            )?;
            lib.check(
                "fi_ep_bind(av)",
                bind(&mut (*ep).fid, &mut (*self.av).fid, 0),
            )?;
            lib.check(
                "fi_enable",
                ((*(*ep).fid.ops).control.expect("fi_control"))(
                    &mut (*ep).fid,
                    sys::FI_ENABLE as c_int,
                    null_mut(),
                ),
            )?;
        }
        Ok(())
    }

    /// The provider in use, e.g. `tcp;ofi_rxm`.
    pub fn provider(&self) -> String {
        self.provider.clone()
    }

    /// This endpoint's address, which a peer [`Endpoint::insert`]s.
    pub fn name(&self) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; 256];
        let mut len = buf.len();
        // SAFETY: fi_getname through the endpoint's cm ops, into a buffer of `len` bytes.
        let r = unsafe {
            let ep = self.ep;
            ((*(*ep).cm).getname.expect("fi_getname"))(
                &mut (*ep).fid,
                buf.as_mut_ptr().cast(),
                &mut len,
            )
        };
        self.lib.check("fi_getname", r)?;
        buf.truncate(len);
        Ok(buf)
    }

    /// Largest message the endpoint takes.
    pub fn max_msg_size(&self) -> usize {
        // SAFETY: the info lives as long as the endpoint.
        unsafe { (*(*self.info).ep_attr).max_msg_size }
    }

    /// Add a peer's address; returns the handle sends take.
    pub fn insert(&mut self, addr: &[u8]) -> Result<u64> {
        let mut fi: sys::fi_addr_t = 0;
        // SAFETY: fi_av_insert of one address of `addr.len()` bytes through the AV's ops.
        let n = unsafe {
            ((*(*self.av).ops).insert.expect("fi_av_insert"))(
                self.av,
                addr.as_ptr().cast(),
                1,
                &mut fi,
                0,
                null_mut(),
            )
        };
        match n {
            1 => Ok(fi),
            r if r < 0 => Err(self.lib.err("fi_av_insert", r as isize)),
            _ => Err(Error::new(
                ErrorKind::NetworkProxy,
                "fi_av_insert: the provider did not take the peer's address",
            )),
        }
    }

    fn context(&mut self, ctx: u64) -> *mut OpCtx {
        let p = Box::into_raw(Box::new(OpCtx {
            fi: sys::fi_context2::default(),
            ctx,
        }));
        self.posted.insert(p as usize);
        p
    }

    fn unpost(&mut self, p: *mut OpCtx) {
        if self.posted.remove(&(p as usize)) {
            // SAFETY: allocated by `context` and not handed back by the provider.
            drop(unsafe { Box::from_raw(p) });
        }
    }

    /// Post a send of the concatenation of `iov` to `to`. `Ok(false)`: the provider is busy
    /// (`-FI_EAGAIN`); poll completions and retry.
    ///
    /// # Safety
    /// The bytes must stay valid and unchanged until the completion carrying `ctx` is returned.
    pub unsafe fn post_send(&mut self, to: u64, iov: &[IoSlice<'_>], ctx: u64) -> Result<bool> {
        let p = self.context(ctx);
        let ep = self.ep;
        // IoSlice is ABI-compatible with struct iovec on Unix.
        // SAFETY: fi_sendv through the endpoint's msg ops, iovecs valid per the contract.
        let r = unsafe {
            ((*(*ep).msg).sendv.expect("fi_sendv"))(
                ep,
                iov.as_ptr().cast(),
                null_mut(),
                iov.len(),
                to,
                p.cast(),
            )
        };
        self.posted_result("fi_sendv", r, p)
    }

    /// Post a receive into `buf` of `len` bytes; `Ok(false)` when busy.
    ///
    /// # Safety
    /// The buffer must stay valid and unused until the completion carrying `ctx` is returned.
    pub unsafe fn post_recv(&mut self, buf: *mut u8, len: usize, ctx: u64) -> Result<bool> {
        let p = self.context(ctx);
        let ep = self.ep;
        // SAFETY: fi_recv through the endpoint's msg ops into a buffer valid per the contract.
        let r = unsafe {
            ((*(*ep).msg).recv.expect("fi_recv"))(
                ep,
                buf.cast(),
                len,
                null_mut(),
                u64::MAX,
                p.cast(),
            )
        };
        self.posted_result("fi_recv", r, p)
    }

    fn tagged_ops(&self, call: &str) -> Result<&sys::fi_ops_tagged> {
        if !self.tagged || self.ep.is_null() {
            return Err(Error::failure(format!(
                "{call}: the endpoint was not opened for tagged messages"
            )));
        }
        // SAFETY: a live endpoint opened with FI_TAGGED has its tagged ops table.
        unsafe { (*self.ep).tagged.as_ref() }
            .ok_or_else(|| Error::failure(format!("{call}: the provider has no tagged operations")))
    }

    /// Post a tagged send of `len` bytes at `buf` to `to`; `Ok(false)` when busy.
    ///
    /// # Safety
    /// The bytes must stay valid and unchanged until the completion carrying `ctx` is returned.
    pub unsafe fn post_tsend(
        &mut self,
        to: u64,
        buf: *const u8,
        len: usize,
        tag: u64,
        ctx: u64,
    ) -> Result<bool> {
        let send = self.tagged_ops("fi_tsend")?.send.expect("fi_tsend");
        let p = self.context(ctx);
        // SAFETY: fi_tsend through the endpoint's tagged ops, the buffer valid per the contract.
        let r = unsafe { send(self.ep, buf.cast(), len, null_mut(), to, tag, p.cast()) };
        self.posted_result("fi_tsend", r, p)
    }

    /// Post a tagged receive into `buf` of `len` bytes from any peer, matching the tags equal
    /// to `tag` in every bit not set in `ignore`; `Ok(false)` when busy.
    ///
    /// # Safety
    /// The buffer must stay valid and unused until the completion carrying `ctx` is returned.
    pub unsafe fn post_trecv(
        &mut self,
        buf: *mut u8,
        len: usize,
        tag: u64,
        ignore: u64,
        ctx: u64,
    ) -> Result<bool> {
        let recv = self.tagged_ops("fi_trecv")?.recv.expect("fi_trecv");
        let p = self.context(ctx);
        // SAFETY: fi_trecv through the endpoint's tagged ops into a buffer valid per the contract.
        let r = unsafe {
            recv(
                self.ep,
                buf.cast(),
                len,
                null_mut(),
                ANY_PEER,
                tag,
                ignore,
                p.cast(),
            )
        };
        self.posted_result("fi_trecv", r, p)
    }

    /// Cancel every posted operation whose context carries `ctx` for which `cancel(ctx)` says
    /// so (`fi_cancel`); each still completes, with an error, through [`Endpoint::poll`].
    pub fn cancel_where(&mut self, cancel: impl Fn(u64) -> bool) {
        let f = {
            // SAFETY: a live endpoint's ops table.
            let ops = unsafe { &*(*self.ep).ops };
            match ops.cancel {
                Some(f) => f,
                None => return,
            }
        };
        for &p in &self.posted {
            // SAFETY: `p` is a live context of ours (in `posted`).
            let ctx = unsafe { (*(p as *const OpCtx)).ctx };
            if cancel(ctx) {
                // SAFETY: fi_cancel of a posted operation's context through the endpoint's ops.
                let r = unsafe { f(&mut (*self.ep).fid, p as *mut c_void) };
                if r != 0 && r != -(libc::ENOENT as isize) {
                    crate::log_debug!("net", "{}", self.lib.err("fi_cancel", r));
                }
            }
        }
    }

    fn posted_result(&mut self, call: &str, r: isize, p: *mut OpCtx) -> Result<bool> {
        match r {
            0 => Ok(true),
            r if r == -FI_EAGAIN => {
                self.unpost(p);
                Ok(false)
            }
            r => {
                self.unpost(p);
                Err(self.lib.err(call, r))
            }
        }
    }

    /// Append every available completion; returns how many.
    pub fn poll(&mut self, out: &mut Vec<Completion>) -> Result<usize> {
        self.read(out, None)
    }

    /// As [`Endpoint::poll`], blocking up to `timeout` for the first one; 0 on timeout or
    /// when woken by a [`Waker`].
    pub fn wait_poll(&mut self, out: &mut Vec<Completion>, timeout: Duration) -> Result<usize> {
        self.read(out, Some(timeout))
    }

    fn read(&mut self, out: &mut Vec<Completion>, wait: Option<Duration>) -> Result<usize> {
        let cq = *self.cq.cq.lock();
        let mut n = 0;
        let mut entries = [sys::fi_cq_tagged_entry::default(); 16];
        let mut first = wait;
        loop {
            // SAFETY: fi_cq_read / fi_cq_sread through the CQ's ops into `entries`.
            let r = unsafe {
                let ops = &*(*cq).ops;
                match first.take() {
                    Some(t) => (ops.sread.expect("fi_cq_sread"))(
                        cq,
                        entries.as_mut_ptr().cast(),
                        entries.len(),
                        null(),
                        t.as_millis().min(i32::MAX as u128) as c_int,
                    ),
                    None => (ops.read.expect("fi_cq_read"))(
                        cq,
                        entries.as_mut_ptr().cast(),
                        entries.len(),
                    ),
                }
            };
            if r > 0 {
                for e in &entries[..r as usize] {
                    out.push(self.completion(e.op_context, e.flags, e.len, e.tag, None, 0));
                }
                n += r as usize;
                continue;
            }
            if r == -FI_EAVAIL {
                let mut e = sys::fi_cq_err_entry::default();
                // SAFETY: fi_cq_readerr through the CQ's ops.
                let got = unsafe { ((*(*cq).ops).readerr.expect("fi_cq_readerr"))(cq, &mut e, 0) };
                if got > 0 {
                    let why = self
                        .lib
                        .err("completion", e.err as isize)
                        .message()
                        .to_string();
                    out.push(self.completion(
                        e.op_context,
                        e.flags,
                        e.len,
                        e.tag,
                        Some(why),
                        e.err,
                    ));
                    n += 1;
                    continue;
                }
            }
            // Nothing (more) to read; a blocking read also ends on its timeout (-FI_ETIMEDOUT)
            // or a wake (-FI_ECANCELED on some providers).
            if r == 0 || r == -FI_EAGAIN || r == -FI_ETIMEDOUT || r == -FI_ECANCELED {
                return Ok(n);
            }
            return Err(self.lib.err("fi_cq_read", r));
        }
    }

    fn completion(
        &mut self,
        op: *mut c_void,
        flags: u64,
        len: usize,
        tag: u64,
        error: Option<String>,
        code: i32,
    ) -> Completion {
        let p = op.cast::<OpCtx>();
        let ctx = match self.posted.remove(&(p as usize)) {
            // SAFETY: one of ours, handed back once by its completion.
            true => unsafe { Box::from_raw(p) }.ctx,
            false => u64::MAX,
        };
        let kind = match flags & u64::from(sys::FI_RECV) != 0 {
            true => CompletionKind::Received { len },
            false => CompletionKind::Sent,
        };
        Completion {
            ctx,
            kind,
            tag,
            error,
            code,
        }
    }

    /// A handle that wakes a thread blocked in [`Endpoint::wait_poll`].
    pub fn waker(&self) -> Waker {
        Waker {
            cq: self.cq.clone(),
        }
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        let lib = self.lib;
        // SAFETY: fids of this endpoint (or null), closed once in dependency order.
        unsafe {
            if !self.ep.is_null() {
                close(lib, "endpoint", &mut (*self.ep).fid);
            }
            if !self.av.is_null() {
                close(lib, "av", &mut (*self.av).fid);
            }
            let mut g = self.cq.cq.lock();
            if !g.is_null() {
                close(lib, "cq", &mut (**g).fid);
                *g = null_mut();
            }
            drop(g);
            if !self.domain.is_null() {
                close(lib, "domain", &mut (*self.domain).fid);
            }
            if !self.fabric.is_null() {
                close(lib, "fabric", &mut (*self.fabric).fid);
            }
            (lib.freeinfo)(self.info);
        }
        for p in std::mem::take(&mut self.posted) {
            // SAFETY: contexts the closed endpoint will never hand back.
            drop(unsafe { Box::from_raw(p as *mut OpCtx) });
        }
    }
}

#[cfg(test)]
mod tests;

//! The private protocol between the processes of one job (docs/contract/abi.md §5.11: "the
//! wire protocol is private and can be our own, since every rank of a job runs the same
//! library").
//!
//! One TCP connection per process to the job's root (the process owning global id 0, listening
//! on `NEURON_RT_ROOT_COMM_ID`). Messages are a 4-byte little-endian length and a JSON body
//! ([`Msg`]). The connection is also the liveness signal: end of stream means the peer process
//! is gone. The hello carries the vendor's sanity magic (`0x61796c69`, "ilya", §5.11) and
//! OpenNRT's version, which must match.
//!
//! Collective data does not travel on the socket: device collectives run on each rank's
//! device segment in shared memory (`runtime::multi_process::run`; the socket carries the "go" and
//! "done" meetings and the segments' names), and a host all-gather stages its data in a named
//! shared-memory segment of the owning process (`runtime::multi_process::shm`), whose name the arrival
//! carries.

use std::io::{Read, Write};

use serde::{Deserialize, Serialize};

use crate::error::{Error, ErrorKind, Result};
use crate::isa::enums::Dtype;
use crate::lower::request::{CollectiveOp, CollectiveRequest, IoForm, ReduceOp};

/// Where a rank's device segment is, as the go meeting hands it to every rank: its
/// shared-memory name and bytes, the host that can map it, and how to reach its process over
/// the network when the host is another one (`runtime::multi_process::run`, step "map peers").
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SegmentAt {
    /// The shared-memory name (`/opennrt-…`).
    pub name: String,
    /// Its bytes.
    pub len: u64,
    /// The owning process's host ([`super::host::key`]): ranks with equal keys share
    /// `/dev/shm` and map each other's segments; others are reached over the network.
    pub host: String,
    /// The owning process's network-proxy endpoint address (libfabric `fi_getname`), empty
    /// until that process has opened one (`runtime::multi_process::proxy`).
    #[serde(default)]
    pub net: Vec<u8>,
    /// The device tensor that is the rank's output buffer, when the rank's result goes into it
    /// in place (`runtime::multi_process::run`, "Outputs in place"); `None`: the result is
    /// copied out of the segment.
    #[serde(default)]
    pub output: Option<TensorAt>,
}

/// Where a rank's output tensor is: the shared-memory object of its storage
/// (`runtime::tensor`, "Shared device memory in a job"), and the tensor's first byte in it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TensorAt {
    /// The object's name (`/opennrt-…-t<n>`).
    pub name: String,
    /// The object's bytes.
    pub len: u64,
    /// The tensor's first byte in the object.
    pub offset: u64,
}

/// The bootstrap sanity magic of the vendor's hello (docs/contract/abi.md §5.11).
pub const MAGIC: u32 = 0x6179_6c69;

/// Largest message body accepted.
const MAX_BODY: u32 = 16 << 20;

/// A request as it crosses processes: the fields every rank must agree on
/// (`runtime::collective::agreed_fields`), which is what the root checks a meeting with. The
/// API-level ops carry their `nrt_cc_op_type_t` value; the ops only a NEFF names (all-to-all,
/// the permutes, send/recv, barrier) carry OpenNRT's own codes [`EXT_OPS`] (the protocol is
/// private: every process of a job runs the same library version, checked at the hello).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireRequest {
    /// `nrt_cc_op_type_t` value.
    pub op: u32,
    /// ISA / `nrt_dtype_t` value.
    pub dtype: u8,
    /// `nrt_op_type_t` value of the reduction, if any.
    pub reduce: Option<u32>,
    /// Elements per rank (the request's count).
    pub count: u64,
    /// Global ids in rank order.
    pub group: Vec<u32>,
    /// The sender's rank in `group`.
    pub rank: u32,
    /// Same tensor in and out.
    pub in_place: bool,
    /// 0 single, 1 output blocks, 2 input blocks.
    pub io_form: u8,
}

/// Wire codes of the ops outside `nrt_cc_op_type_t` (above its values, so the two never
/// collide).
pub const EXT_OPS: [(CollectiveOp, u32); 8] = [
    (CollectiveOp::AllToAll, 0x100),
    (CollectiveOp::AllToAllV, 0x101),
    (CollectiveOp::Permute, 0x102),
    (CollectiveOp::PermuteImplicit, 0x103),
    (CollectiveOp::PermuteReduceImplicit, 0x104),
    (CollectiveOp::Send, 0x105),
    (CollectiveOp::Recv, 0x106),
    (CollectiveOp::Barrier, 0x107),
];

impl WireRequest {
    /// The wire form of a request.
    pub fn of(r: &CollectiveRequest) -> Result<WireRequest> {
        let op = match r.op.nrt_cc_op() {
            Some(code) => code,
            None => EXT_OPS
                .iter()
                .find(|(o, _)| *o == r.op)
                .map(|(_, c)| *c)
                .ok_or_else(|| Error::invalid(format!("{} has no wire code", r.op.label())))?,
        };
        Ok(WireRequest {
            op,
            dtype: r.dtype.as_u8(),
            reduce: r.reduce.map(ReduceOp::nrt_op),
            count: r.count,
            group: r.group.clone(),
            rank: r.rank,
            in_place: r.in_place,
            io_form: match r.io_form {
                IoForm::Single => 0,
                IoForm::OutputBlocks => 1,
                IoForm::InputBlocks => 2,
            },
        })
    }

    /// The request it describes.
    pub fn request(&self) -> Result<CollectiveRequest> {
        let bad = |w: &str| Error::invalid(format!("wire request: bad {w}"));
        let op = match CollectiveOp::from_nrt_cc_op(self.op) {
            Some(op) => op,
            None => EXT_OPS
                .iter()
                .find(|(_, c)| *c == self.op)
                .map(|(o, _)| *o)
                .ok_or_else(|| bad("op"))?,
        };
        let dtype = Dtype::from_u8(self.dtype).ok_or_else(|| bad("dtype"))?;
        let reduce = self
            .reduce
            .map(|v| ReduceOp::from_nrt_op(v, "wire request"))
            .transpose()?;
        let mut r =
            CollectiveRequest::new(op, dtype, reduce, self.count, self.group.clone(), self.rank);
        r.in_place = self.in_place;
        r.io_form = match self.io_form {
            0 => IoForm::Single,
            1 => IoForm::OutputBlocks,
            2 => IoForm::InputBlocks,
            _ => return Err(bad("io_form")),
        };
        Ok(r)
    }
}

/// An error as it crosses processes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireError {
    /// `ErrorKind` by name.
    pub kind: String,
    /// The message.
    pub message: String,
    /// The structured facts.
    #[serde(default)]
    pub fields: crate::error::Fields,
}

const KINDS: [ErrorKind; 17] = ErrorKind::ALL;

impl WireError {
    /// The wire form of `e`.
    pub fn of(e: &Error) -> WireError {
        WireError {
            kind: format!("{:?}", e.kind()),
            message: e.message().to_string(),
            fields: e.fields().clone(),
        }
    }

    /// Back to an error (an unknown kind is a failure).
    pub fn error(&self) -> Error {
        let kind = KINDS
            .iter()
            .copied()
            .find(|k| format!("{k:?}") == self.kind)
            .unwrap_or(ErrorKind::Failure);
        Error::new(kind, self.message.clone()).with_fields(self.fields.clone())
    }
}

/// One message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "t")]
pub enum Msg {
    /// First message of a member process.
    Hello {
        /// [`MAGIC`].
        magic: u32,
        /// OpenNRT version.
        version: String,
        /// Process id (names its shared-memory objects).
        pid: u32,
        /// Its host ([`super::host::key`]): the root unlinks a dead process's shared memory
        /// only on its own host, and pids repeat across hosts.
        #[serde(default)]
        host: String,
    },
    /// The root accepts the process.
    Welcome {
        /// The job's tag (`runtime::multi_process::shm::job_tag`): names every shared-memory object.
        tag: String,
        /// The root's host ([`super::host::key`]): a member on another host reaches it over
        /// the network, so a root that stops answering may be a network fault.
        #[serde(default)]
        host: String,
    },
    /// The root refuses the process or a join; the connection closes.
    Reject {
        /// Why.
        reason: String,
    },
    /// A core of the process joins world `slot` as `gid` of `count`.
    Join {
        /// Matches the answer.
        id: u64,
        /// World slot.
        slot: u8,
        /// Global id.
        gid: u32,
        /// World size.
        count: u32,
    },
    /// The root's answer to a join (`error` None = accepted).
    Joined {
        /// The join.
        id: u64,
        /// Why not.
        error: Option<WireError>,
    },
    /// A rank arrives at a host all-gather; its data is in shared memory, or in `inline` when
    /// the root is on another host.
    Arrive {
        /// Matches the answer.
        id: u64,
        /// "cc", "barrier", "all_gather", "neff", "neff-signature" or "neff-a2av".
        kind: String,
        /// World slot.
        slot: u8,
        /// Global ids in rank order.
        group: Vec<u32>,
        /// The collective's number on this group.
        instance: u64,
        /// The rank.
        rank: u32,
        /// The staging segment.
        shm: String,
        /// Its bytes.
        shm_len: u64,
        /// Input bytes at offset 0.
        in_len: u64,
        /// The input itself ([`hex`]) when the root cannot map `shm` (it is on another host;
        /// `shm` is then empty).
        #[serde(default)]
        inline: Option<String>,
    },
    /// The collective ran (or failed) for arrival `id`; the output is in its segment, or in
    /// `output` for an arrival whose input came inline.
    Done {
        /// The arrival.
        id: u64,
        /// Failure, if any.
        error: Option<WireError>,
        /// The output ([`hex`]) of an inline arrival.
        #[serde(default)]
        output: Option<String>,
    },
    /// A rank of a device collective on shared segments meets the others before it runs
    /// (`runtime::multi_process::run`: loaded, answered with [`Msg::Segments`]).
    Meet {
        /// Matches the answer.
        id: u64,
        /// "cc", "barrier", "neff", "neff-signature" or "neff-a2av".
        kind: String,
        /// World slot.
        slot: u8,
        /// Global ids in rank order.
        group: Vec<u32>,
        /// The collective's number on this group.
        instance: u64,
        /// The rank.
        rank: u32,
        /// The request ("go").
        req: Option<WireRequest>,
        /// Digest of the emitted program ("go").
        digest: u64,
        /// The rank's device segment ("go").
        seg: SegmentAt,
    },
    /// The answer to a [`Msg::Meet`]: every rank's device segment, or why not.
    Segments {
        /// The meeting.
        id: u64,
        /// Failure, if any.
        error: Option<WireError>,
        /// Every rank's segment, in rank order.
        segments: Vec<SegmentAt>,
    },
    /// Where every rank of a world lives: asked before a collective of it is lowered, so that
    /// the lowering's topology has the job's hosts as its nodes (`multi_process::host`).
    Hosts {
        /// Matches the answer.
        id: u64,
        /// The world's size (global ids `0..world`).
        world: u32,
    },
    /// The answer to [`Msg::Hosts`], once every global id of such a world has joined: each
    /// one's host key, in global-id order.
    HostsOf {
        /// The question's id.
        id: u64,
        /// Why there is no answer.
        error: Option<WireError>,
        /// Host keys by global id.
        hosts: Vec<String>,
    },
    /// The process leaves the job (`nrt_close`): its ranks are gone, not dead.
    Bye,
    /// The world cannot go on (a duplicate id, a dead process, …): every rank fails.
    WorldFailed {
        /// Why (kind and message).
        error: WireError,
        /// The process whose death failed it, and its host (pid 0: none): a member on that
        /// host unlinks the dead process's shared memory, which the root cannot reach.
        #[serde(default)]
        dead_pid: u32,
        #[serde(default)]
        dead_host: String,
    },
}

/// Bytes as lowercase hex: how data that cannot travel through shared memory rides in a
/// message (JSON has no byte strings).
pub fn hex(b: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(2 * b.len());
    for &x in b {
        s.push(DIGITS[usize::from(x >> 4)] as char);
        s.push(DIGITS[usize::from(x & 15)] as char);
    }
    s
}

/// The bytes of [`hex`] text; an error names what is wrong with it.
pub fn unhex(s: &str) -> Result<Vec<u8>> {
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    if s.len() % 2 != 0 {
        return Err(Error::invalid(format!(
            "inline data of odd length {} (hex has two digits a byte)",
            s.len()
        )));
    }
    s.as_bytes()
        .chunks_exact(2)
        .enumerate()
        .map(|(i, p)| match (digit(p[0]), digit(p[1])) {
            (Some(h), Some(l)) => Ok(h << 4 | l),
            _ => Err(Error::invalid(format!(
                "inline data: byte {i} is not two lowercase hex digits"
            ))),
        })
        .collect()
}

/// The most bytes a host all-gather's output may carry inline ([`Msg::Arrive`]'s `inline`):
/// its hex must fit one message.
pub const INLINE_MAX: usize = (MAX_BODY as usize / 2) - (64 << 10);

/// Write one message.
pub fn send(w: &mut impl Write, m: &Msg) -> Result<()> {
    let body = serde_json::to_vec(m).map_err(|e| Error::failure(format!("encode {m:?}: {e}")))?;
    let mut buf = Vec::with_capacity(body.len() + 4);
    buf.extend((body.len() as u32).to_le_bytes());
    buf.extend(body);
    w.write_all(&buf)
        .and_then(|_| w.flush())
        .map_err(|e| Error::failure(format!("send to peer: {e}")))
}

/// Read one message; `Ok(None)` at end of stream (the peer is gone).
pub fn recv(r: &mut impl Read) -> Result<Option<Msg>> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Ok(None),
        Err(e) => return Err(Error::failure(format!("receive from peer: {e}"))),
    }
    let n = u32::from_le_bytes(len);
    if n > MAX_BODY {
        return Err(Error::failure(format!(
            "peer sent a {n}-byte message (limit {MAX_BODY})"
        )));
    }
    let mut body = vec![0u8; n as usize];
    match r.read_exact(&mut body) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(Error::failure(format!("receive from peer: {e}"))),
    }
    decode(&body).map(Some)
}

/// The message in one body (the bytes after the 4-byte length [`recv`] reads): what the root
/// makes of whatever a process that connects to its port sends.
///
/// # Errors
/// A failure naming what is malformed.
pub fn decode(body: &[u8]) -> Result<Msg> {
    serde_json::from_slice(body)
        .map_err(|e| Error::failure(format!("peer sent a malformed message: {e}")))
}

#[cfg(test)]
mod tests;

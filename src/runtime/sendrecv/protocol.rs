//! What two send/recv services say to each other: the tags of tensor chunks, the control
//! messages that connect and watch a communicator, and the handle a receiver publishes.
//!
//! **Tags** (64 bits, libfabric tagged messages):
//!
//! | bits | field |
//! |---|---|
//! | 62–63 | kind: 0 control, 1 a tensor's first chunk, 2 a later chunk |
//! | 48–61 | the *receiver's* communicator id (the receiving service matches on it) |
//! | 24–47 | the transfer's sequence number in its communicator (wraps at 2^24) |
//! | 0–23 | first chunk: how many chunks the transfer has; a later chunk: its index |
//!
//! The k-th `send_tensor` of a communicator matches the k-th `recv_tensor` of its peer through
//! the sequence number, so a communicator keeps its order whatever order completions come in.
//! A receive posts its first chunk with the count bits ignored and learns the count from the
//! tag of what arrived; only then does it post the rest. A tensor of up to one chunk (the
//! common case below [`crate::runtime::sendrecv::Settings::chunk`]) is one message.
//!
//! **Control messages** are tagged 0 and start with [`MAGIC`]; each service keeps a few
//! receives posted for them. A stranger's bytes that do not parse are dropped with a log line.

use std::net::IpAddr;

use crate::error::{Error, Result};

/// Tag kinds (bits 62–63).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TagKind {
    /// A control message.
    Control = 0,
    /// A transfer's first chunk; the low bits carry the chunk count.
    First = 1,
    /// A later chunk; the low bits carry its index.
    Chunk = 2,
}

const KIND_SHIFT: u32 = 62;
const COMM_SHIFT: u32 = 48;
const SEQ_SHIFT: u32 = 24;
const LOW_MASK: u64 = (1 << 24) - 1;
/// Sequence numbers wrap at 2^24; at most 128 transfers of a communicator are in flight, so
/// two live transfers never share one.
pub const SEQ_MASK: u32 = (1 << 24) - 1;
/// Most chunks one transfer may have (the low field's range).
pub const MAX_CHUNKS: u64 = LOW_MASK;
/// Communicator ids fit 14 bits.
pub const MAX_COMM_ID: u16 = (1 << 14) - 1;

/// The tag of chunk `low` (or the count, for [`TagKind::First`]) of transfer `seq` to the
/// receiver's communicator `comm`.
pub fn data_tag(kind: TagKind, comm: u16, seq: u32, low: u64) -> u64 {
    ((kind as u64) << KIND_SHIFT)
        | (u64::from(comm & MAX_COMM_ID) << COMM_SHIFT)
        | (u64::from(seq & SEQ_MASK) << SEQ_SHIFT)
        | (low & LOW_MASK)
}

/// Does transfer `a` come before transfer `b` of the same communicator? Sequence numbers wrap
/// at 2^24 and at most 128 transfers are in flight, so `a` precedes `b` when `b` is less than
/// half the range ahead of it.
pub fn seq_before(a: u32, b: u32) -> bool {
    let ahead = b.wrapping_sub(a) & SEQ_MASK;
    ahead != 0 && ahead <= SEQ_MASK / 2
}

/// The tag of every control message.
pub const CONTROL_TAG: u64 = 0;
/// A control receive matches any tag of kind 0.
pub const CONTROL_IGNORE: u64 = (1 << KIND_SHIFT) - 1;
/// A first-chunk receive ignores the count.
pub const FIRST_IGNORE: u64 = LOW_MASK;

/// The low field of a tag: a first chunk's count, a later chunk's index.
pub fn tag_low(tag: u64) -> u64 {
    tag & LOW_MASK
}

/// The first bytes of every control message: "ONSR" and the protocol version.
pub const MAGIC: [u8; 5] = *b"ONSR\x02";
/// Largest control message (a hello carries an endpoint address, at most 256 bytes).
pub const CONTROL_MAX: usize = 512;

/// A control message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Control {
    /// The sender found the receiver's handle: "I am `sender_comm` at `addr`, for your
    /// `receiver_comm` published with `nonce`".
    Hello {
        /// The sender's communicator id.
        sender_comm: u16,
        /// The receiver's communicator id, from its handle.
        receiver_comm: u16,
        /// The handle's nonce (a stale handle of an earlier accept has another).
        nonce: u64,
        /// The sender's endpoint address.
        addr: Vec<u8>,
    },
    /// The receiver took the hello: both ends are connected.
    Welcome {
        /// The sender's communicator id.
        sender_comm: u16,
        /// The receiver's communicator id.
        receiver_comm: u16,
        /// The nonce of the hello.
        nonce: u64,
    },
    /// The receiver refused the hello (no such pending accept): the handle was stale.
    Refuse {
        /// The sender's communicator id.
        sender_comm: u16,
        /// The nonce of the hello.
        nonce: u64,
    },
    /// "Are you there?" from communicator `from` to its peer `to`.
    Ping {
        /// The asking communicator.
        from: u16,
        /// The peer communicator.
        to: u16,
    },
    /// The answer to a [`Control::Ping`].
    Pong {
        /// The answering communicator.
        from: u16,
        /// The asking one.
        to: u16,
    },
    /// Communicator `from` is going away (its service closes). A sender's peer still takes the
    /// transfers `from` started before it left (an eager send is done before the receiver has
    /// posted, so its bytes may still be on their way); everything else of `to` fails.
    Bye {
        /// The closing communicator.
        from: u16,
        /// Its peer.
        to: u16,
        /// How many transfers `from` started (its next sequence number, wrapping at 2^24).
        started: u32,
    },
}

impl Control {
    /// The message's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = MAGIC.to_vec();
        let u16s = |b: &mut Vec<u8>, v: &[u16]| v.iter().for_each(|x| b.extend(x.to_le_bytes()));
        match self {
            Control::Hello {
                sender_comm,
                receiver_comm,
                nonce,
                addr,
            } => {
                b.push(1);
                u16s(&mut b, &[*sender_comm, *receiver_comm]);
                b.extend(nonce.to_le_bytes());
                b.extend((addr.len() as u16).to_le_bytes());
                b.extend(addr);
            }
            Control::Welcome {
                sender_comm,
                receiver_comm,
                nonce,
            } => {
                b.push(2);
                u16s(&mut b, &[*sender_comm, *receiver_comm]);
                b.extend(nonce.to_le_bytes());
            }
            Control::Refuse { sender_comm, nonce } => {
                b.push(3);
                u16s(&mut b, &[*sender_comm]);
                b.extend(nonce.to_le_bytes());
            }
            Control::Ping { from, to } => {
                b.push(4);
                u16s(&mut b, &[*from, *to]);
            }
            Control::Pong { from, to } => {
                b.push(5);
                u16s(&mut b, &[*from, *to]);
            }
            Control::Bye { from, to, started } => {
                b.push(6);
                u16s(&mut b, &[*from, *to]);
                b.extend(started.to_le_bytes());
            }
        }
        b
    }

    /// Parse a received control message; anything malformed is an error saying why.
    pub fn decode(bytes: &[u8]) -> Result<Control> {
        let bad = |why: &str| Error::invalid(format!("a control message {why}"));
        let body = bytes
            .strip_prefix(&MAGIC[..])
            .ok_or_else(|| bad("without the send/recv magic"))?;
        let (&kind, mut rest) = body.split_first().ok_or_else(|| bad("without a kind"))?;
        let mut take = |n: usize| -> Result<&[u8]> {
            if rest.len() < n {
                return Err(bad("cut short"));
            }
            let (a, b) = rest.split_at(n);
            rest = b;
            Ok(a)
        };
        let mut u16_ = || -> Result<u16> { Ok(u16::from_le_bytes(take(2)?.try_into().unwrap())) };
        let msg = match kind {
            1 => {
                let (sender_comm, receiver_comm) = (u16_()?, u16_()?);
                let nonce = u64::from_le_bytes(take(8)?.try_into().unwrap());
                let n = u16::from_le_bytes(take(2)?.try_into().unwrap()) as usize;
                let addr = take(n)?.to_vec();
                Control::Hello {
                    sender_comm,
                    receiver_comm,
                    nonce,
                    addr,
                }
            }
            2 => {
                let (sender_comm, receiver_comm) = (u16_()?, u16_()?);
                let nonce = u64::from_le_bytes(take(8)?.try_into().unwrap());
                Control::Welcome {
                    sender_comm,
                    receiver_comm,
                    nonce,
                }
            }
            3 => {
                let sender_comm = u16_()?;
                let nonce = u64::from_le_bytes(take(8)?.try_into().unwrap());
                Control::Refuse { sender_comm, nonce }
            }
            4 => Control::Ping {
                from: u16_()?,
                to: u16_()?,
            },
            5 => Control::Pong {
                from: u16_()?,
                to: u16_()?,
            },
            6 => Control::Bye {
                from: u16_()?,
                to: u16_()?,
                started: u32::from_le_bytes(take(4)?.try_into().unwrap()),
            },
            k => return Err(bad(&format!("of unknown kind {k}"))),
        };
        if !rest.is_empty() {
            return Err(bad("with trailing bytes"));
        }
        Ok(msg)
    }
}

/// What a receiver publishes in the store: its endpoint address, the accepting communicator's
/// id and a nonce. Written as text, `<comm>.<nonce hex>.<address hex>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handle {
    /// The receiver's endpoint address.
    pub addr: Vec<u8>,
    /// The accepting communicator.
    pub comm: u16,
    /// Tells this accept from an earlier one under the same key.
    pub nonce: u64,
}

impl Handle {
    /// The store value.
    pub fn to_text(&self) -> String {
        let hex: String = self.addr.iter().map(|b| format!("{b:02x}")).collect();
        format!("{}.{:016x}.{hex}", self.comm, self.nonce)
    }

    /// Parse a store value.
    pub fn parse(text: &str) -> Result<Handle> {
        let bad = || Error::invalid(format!("a send/recv handle {text:?} that does not parse"));
        let mut it = text.split('.');
        let comm = it.next().and_then(|c| c.parse().ok()).ok_or_else(bad)?;
        let nonce = it
            .next()
            .and_then(|n| u64::from_str_radix(n, 16).ok())
            .ok_or_else(bad)?;
        let hex = it.next().ok_or_else(bad)?;
        if it.next().is_some() || hex.len() % 2 != 0 || hex.len() > 512 {
            return Err(bad());
        }
        let addr = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).map_err(|_| bad()))
            .collect::<Result<Vec<u8>>>()?;
        Ok(Handle { addr, comm, nonce })
    }
}

/// The store key of an accept (docs/contract/abi.md §5.12): `"handle-"` + receiver core +
/// sender core + the sender's host, as the receiver names it (`accept`'s `peer_ip`) and as the
/// sender sees itself (the address its connection to the receiver's store goes out of).
pub fn handle_key(receiver_lnc: u32, sender_lnc: u32, sender_host: IpAddr) -> String {
    format!("handle-{receiver_lnc}-{sender_lnc}-{sender_host}")
}

//! The instruction words: the common header + EVENTS, the [`Instr`] sum type, and the one-word
//! [`decode`] / [`encode`] pair.
//!
//! * Every TPB word is 64 bytes; the 0xD9 + 0xDA pair is one logical 128-byte word
//!   (docs/contract/isa.md §1, §6).
//! * Decoding is *structural*: the length is right, every enum byte is in its table (an unlisted
//!   code is an error naming the field), and a 0xD9 is followed by a 0xDA (§9 rule 3). Whether
//!   a well-formed word is *acceptable* is [`validate`](super::validate::validate)'s job.
//! * Every reserved or undocumented byte is kept raw in the structs, so `encode(decode(b)) == b`
//!   for every `b` that decodes, and `decode(encode(x)) == x` for every `x` whose reserved
//!   fields are canonical (see `Collective2Ext::tail_reserved`).
//! * Decode never panics: every read is at a constant offset inside a fixed 64-byte array, and
//!   the slice is length-checked first.
//!
//! The word structs live in the children [`trigger`] (the collective trigger words 0xC7, 0xC8,
//! 0xD9 and the 0xDA collective2 ext) and [`other`] (0xCB, 0xDB, 0xBF: the other words of
//! docs/contract/isa.md §8).

pub mod other;
pub mod trigger;

use std::ops::Deref;

use super::enums::{UpdateMode, WaitMode};
use super::isa_error::{rule, IsaError, IsaResult};
use super::layout::rd_u32;
use super::markers::opcode;
use super::validate::rule_03_d9_pairing;
use other::{CurProcessingRankId, Sb2sbCollective, SendRecv};
use trigger::{Collective2, TriggerAllReduce, TriggerCollective};

/// Bytes per instruction word; the stream stride (docs/contract/isa.md §1 **\[H\]**).
pub const WORD: usize = 64;

/// `inst_word_len` of every collective pseudo-op seen: 0x10 four-byte words
/// (docs/contract/isa.md §2). Decode keeps whatever byte is there (the stream stride ignores it);
/// this is what the constructors write.
pub const INST_WORD_LEN: u8 = 0x10;

/// EVENTS, bytes 4–11 (docs/contract/isa.md §2 **\[H\]**).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Events {
    /// Byte 4.
    pub wait_mode: WaitMode,
    /// Byte 5: semaphore or event index.
    pub wait_idx: u8,
    /// Byte 6.
    pub update_mode: UpdateMode,
    /// Byte 7: semaphore or event index.
    pub update_idx: u8,
    /// Bytes 8–11: immediate for the `*_IMM` modes.
    pub semaphore_value: u32,
}

impl Default for Events {
    /// No wait; +1 on completion of semaphore 0 (the update every collective needs, rule 1).
    fn default() -> Self {
        Events {
            wait_mode: WaitMode::None,
            wait_idx: 0,
            update_mode: UpdateMode::SemIncComplete,
            update_idx: 0,
            semaphore_value: 0,
        }
    }
}

/// Bytes 1–11 of a word that carries the common header (everything but 0xDA).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Common {
    /// Byte 1: length in 4-byte words (0x10 on every collective pseudo-op seen).
    pub inst_word_len: u8,
    /// Byte 2.
    pub debug_cmd: u8,
    /// Byte 3.
    pub debug_hint: u8,
    /// Bytes 4–11.
    pub events: Events,
}

impl Default for Common {
    fn default() -> Self {
        Common {
            inst_word_len: INST_WORD_LEN,
            debug_cmd: 0,
            debug_hint: 0,
            events: Events::default(),
        }
    }
}

/// Decode the enum byte at `off` with `from`, or name the field in an error.
pub(crate) fn enum_at<T>(
    b: &[u8; WORD],
    off: usize,
    field: &'static str,
    from: fn(u8) -> Option<T>,
    rule: &'static str,
) -> IsaResult<T> {
    from(b[off]).ok_or_else(|| {
        IsaError::new(
            b[0],
            field,
            off,
            u64::from(b[off]),
            format!("{:#04x} is not a listed {field} code", b[off]),
            rule,
        )
    })
}

impl Common {
    /// Decode bytes 1–11 of word `b`.
    pub fn read(b: &[u8; WORD]) -> IsaResult<Self> {
        Ok(Common {
            inst_word_len: b[1],
            debug_cmd: b[2],
            debug_hint: b[3],
            events: Events {
                wait_mode: enum_at(b, 4, "wait_mode", WaitMode::from_u8, rule::EVENTS)?,
                wait_idx: b[5],
                update_mode: enum_at(b, 6, "update_mode", UpdateMode::from_u8, rule::EVENTS)?,
                update_idx: b[7],
                semaphore_value: rd_u32(b, 8),
            },
        })
    }
    /// Encode bytes 0–11 of a word with `opcode`.
    pub fn write(&self, opcode: u8, b: &mut [u8; WORD]) {
        b[0] = opcode;
        b[1] = self.inst_word_len;
        b[2] = self.debug_cmd;
        b[3] = self.debug_hint;
        b[4] = self.events.wait_mode.as_u8();
        b[5] = self.events.wait_idx;
        b[6] = self.events.update_mode.as_u8();
        b[7] = self.events.update_idx;
        b[8..12].copy_from_slice(&self.events.semaphore_value.to_le_bytes());
    }
}

/// One logical instruction word.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Instr {
    /// 0xC7 PSEUDO_TRIGGER_ALL_REDUCE.
    TriggerAllReduce(TriggerAllReduce),
    /// 0xC8 PSEUDO_TRIGGER_COLLECTIVE.
    TriggerCollective(TriggerCollective),
    /// 0xD9 PSEUDO_TRIGGER_COLLECTIVE2 + 0xDA collective2 ext: one 128-byte logical word.
    Collective2(Collective2),
    /// 0xCB PSEUDO_SEND_RECV.
    SendRecv(SendRecv),
    /// 0xDB PSEUDO_CUR_PROCESSING_RANK_ID.
    CurProcessingRankId(CurProcessingRankId),
    /// 0xBF SB2SB_COLLECTIVE (a real POOL op).
    Sb2sb(Sb2sbCollective),
    /// 0xDA *not* right after a 0xD9: a PSEUDO_DMA_EXT, not a collective ext
    /// (docs/contract/isa.md §6). Kept raw.
    DmaExt {
        /// The word.
        raw: [u8; WORD],
    },
    /// Any other opcode (compute, other pseudo-ops such as barriers): not typed here, kept raw.
    Other {
        /// Byte 0.
        opcode: u8,
        /// The word.
        raw: [u8; WORD],
    },
}

impl Instr {
    /// Opcode of the (first) word.
    pub fn opcode(&self) -> u8 {
        match self {
            Instr::TriggerAllReduce(_) => opcode::TRIGGER_ALL_REDUCE,
            Instr::TriggerCollective(_) => opcode::TRIGGER_COLLECTIVE,
            Instr::Collective2(_) => opcode::TRIGGER_COLLECTIVE2,
            Instr::SendRecv(_) => opcode::SEND_RECV,
            Instr::CurProcessingRankId(_) => opcode::CUR_PROCESSING_RANK_ID,
            Instr::Sb2sb(_) => opcode::SB2SB_COLLECTIVE,
            Instr::DmaExt { .. } => opcode::EXTENSION,
            Instr::Other { opcode, .. } => *opcode,
        }
    }
    /// Bytes the logical word occupies in the stream: 128 for the pair, 64 otherwise.
    pub fn len(&self) -> usize {
        match self {
            Instr::Collective2(_) => 2 * WORD,
            _ => WORD,
        }
    }
    /// Never empty; present for the `len` convention.
    pub fn is_empty(&self) -> bool {
        false
    }
    /// A collective trigger the lowering replaces with a cc-op (0xC7, 0xC8, 0xD9+0xDA, 0xCB).
    pub fn is_collective_trigger(&self) -> bool {
        matches!(
            self,
            Instr::TriggerAllReduce(_)
                | Instr::TriggerCollective(_)
                | Instr::Collective2(_)
                | Instr::SendRecv(_)
        )
    }
    /// The common header + EVENTS, for the words that have one.
    pub fn common(&self) -> Option<&Common> {
        match self {
            Instr::TriggerAllReduce(w) => Some(&w.common),
            Instr::TriggerCollective(w) => Some(&w.common),
            Instr::Collective2(w) => Some(&w.trigger.common),
            Instr::SendRecv(w) => Some(&w.common),
            Instr::CurProcessingRankId(w) => Some(&w.common),
            Instr::Sb2sb(w) => Some(&w.common),
            Instr::DmaExt { .. } | Instr::Other { .. } => None,
        }
    }
    /// Encode (same as [`encode`]).
    pub fn encode(&self) -> Encoded {
        encode(self)
    }
}

/// The bytes of one logical word: 64, or 128 for the 0xD9+0xDA pair. Derefs to `[u8]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Encoded {
    bytes: [u8; 2 * WORD],
    len: usize,
}

impl Encoded {
    fn one(w: [u8; WORD]) -> Self {
        let mut bytes = [0u8; 2 * WORD];
        bytes[..WORD].copy_from_slice(&w);
        Encoded { bytes, len: WORD }
    }
}

impl Deref for Encoded {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// Encode one logical word.
pub fn encode(i: &Instr) -> Encoded {
    match i {
        Instr::TriggerAllReduce(w) => Encoded::one(w.encode()),
        Instr::TriggerCollective(w) => Encoded::one(w.encode()),
        Instr::Collective2(w) => Encoded {
            bytes: w.encode(),
            len: 2 * WORD,
        },
        Instr::SendRecv(w) => Encoded::one(w.encode()),
        Instr::CurProcessingRankId(w) => Encoded::one(w.encode()),
        Instr::Sb2sb(w) => Encoded::one(w.encode()),
        Instr::DmaExt { raw } | Instr::Other { raw, .. } => Encoded::one(*raw),
    }
}

/// Decode the logical word at the start of `bytes` (bytes after it are ignored; the word's
/// length is [`Instr::len`]). A 0xD9 needs the 0xDA at `bytes[64]`; a 0xDA at the start is a
/// PSEUDO_DMA_EXT, because nothing precedes it here. Errors: a slice shorter than one word
/// (or than the pair), an unlisted enum code, a 0xD9 without its 0xDA.
pub fn decode(bytes: &[u8]) -> IsaResult<Instr> {
    let Some(first) = bytes.get(..WORD) else {
        return Err(IsaError::new(
            bytes.first().copied().unwrap_or(0),
            "word",
            bytes.len(),
            bytes.len() as u64,
            format!(
                "an instruction word is {WORD} bytes; only {} given",
                bytes.len()
            ),
            rule::FRAMING,
        ));
    };
    let mut w = [0u8; WORD];
    w.copy_from_slice(first);
    Ok(match w[0] {
        opcode::TRIGGER_ALL_REDUCE => Instr::TriggerAllReduce(TriggerAllReduce::decode(&w)?),
        opcode::TRIGGER_COLLECTIVE => Instr::TriggerCollective(TriggerCollective::decode(&w)?),
        opcode::SEND_RECV => Instr::SendRecv(SendRecv::decode(&w)?),
        opcode::CUR_PROCESSING_RANK_ID => {
            Instr::CurProcessingRankId(CurProcessingRankId::decode(&w)?)
        }
        opcode::SB2SB_COLLECTIVE => Instr::Sb2sb(Sb2sbCollective::decode(&w)?),
        opcode::TRIGGER_COLLECTIVE2 => {
            rule_03_d9_pairing(bytes)?;
            let mut pair = [0u8; 2 * WORD];
            pair.copy_from_slice(&bytes[..2 * WORD]);
            Instr::Collective2(Collective2::decode(&pair)?)
        }
        opcode::EXTENSION => Instr::DmaExt { raw: w },
        op => Instr::Other { opcode: op, raw: w },
    })
}

#[cfg(test)]
mod tests;

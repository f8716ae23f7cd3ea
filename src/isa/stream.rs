//! The stream walker: one engine program as a sequence of logical words.
//!
//! * The stride is a fixed 0x40 per word, whatever `inst_word_len` says (docs/contract/isa.md §1
//!   **\[H\]**); a stream whose length is not a multiple of 64 is rejected.
//! * A 0xD9 takes the word after it as its 0xDA ext (one 128-byte logical word); a 0xD9 not
//!   followed by 0xDA is §9 rule 3. A 0xDA not right after a 0xD9 is a PSEUDO_DMA_EXT (§6).
//! * Opcodes this module does not type are reported as [`Instr::Other`] and skipped over.
//! * Chains (INSTR_CHAINING of the 0xDA, §10): INITIAL opens a chain, BODY continues it,
//!   FINAL closes it; NONE is standalone. Our structural rules, since the spec gives only the
//!   codes: chains do not nest; BODY/FINAL need an open chain; a stream may not end inside a
//!   chain; and while a chain is open no *unchained* collective trigger (0xC7, 0xC8, 0xCB or a
//!   pair with NONE) may appear, because the runtime counts a chain's members in one
//!   `chained_cc_op_n`. Non-trigger words (0xDB, which permute chains use, compute, barriers)
//!   may sit between members.

use super::enums::InstrChaining;
use super::instr::{decode, Instr, WORD};
use super::isa_error::{rule, IsaError, IsaResult};
use super::markers::opcode;

/// One logical word and where it sits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamWord {
    /// Byte offset of the (first) word in the stream.
    pub offset: usize,
    /// The decoded word.
    pub instr: Instr,
}

/// A chain of 0xD9+0xDA pairs: indices into [`DecodedStream::words`], INITIAL first, FINAL last.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Chain {
    /// Member indices in stream order.
    pub members: Vec<usize>,
}

/// A decoded engine program.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DecodedStream {
    /// Every logical word in order.
    pub words: Vec<StreamWord>,
    /// The chains found, in order.
    pub chains: Vec<Chain>,
}

impl DecodedStream {
    /// The collective triggers (what the loader replaces), in order.
    pub fn triggers(&self) -> impl Iterator<Item = &StreamWord> {
        self.words
            .iter()
            .filter(|w| w.instr.is_collective_trigger())
    }
}

fn chain_error(at: usize, value: InstrChaining, reason: &str) -> IsaError {
    IsaError::new(
        opcode::EXTENSION,
        "instr_chaining",
        1,
        u64::from(value.as_u8()),
        reason,
        rule::CHAINING,
    )
    .at(at)
}

/// Walk `bytes` word by word. The first rejected word stops the walk; its error carries
/// `word_at`.
pub fn decode_stream(bytes: &[u8]) -> IsaResult<DecodedStream> {
    if bytes.len() % WORD != 0 {
        let tail = bytes.len() - bytes.len() % WORD;
        return Err(IsaError::new(
            bytes.get(tail).copied().unwrap_or(0),
            "word",
            0,
            (bytes.len() % WORD) as u64,
            format!(
                "stream length {} is not a multiple of the {WORD}-byte word",
                bytes.len()
            ),
            rule::FRAMING,
        )
        .at(tail));
    }
    let mut out = DecodedStream::default();
    let mut open: Option<Chain> = None;
    let mut at = 0;
    while at < bytes.len() {
        let instr = decode(&bytes[at..]).map_err(|e| e.at(at))?;
        let idx = out.words.len();
        let ext_at = at + WORD;
        match (&instr, open.as_mut()) {
            (Instr::Collective2(c), _) => match (c.ext.instr_chaining, open.take()) {
                (InstrChaining::None, None) => {}
                (InstrChaining::Initial, None) => {
                    open = Some(Chain { members: vec![idx] });
                }
                (InstrChaining::Body, Some(mut ch)) => {
                    ch.members.push(idx);
                    open = Some(ch);
                }
                (InstrChaining::Final, Some(mut ch)) => {
                    ch.members.push(idx);
                    out.chains.push(ch);
                }
                (v @ (InstrChaining::Body | InstrChaining::Final), None) => {
                    return Err(chain_error(ext_at, v, "BODY/FINAL without an INITIAL"));
                }
                (v @ (InstrChaining::Initial | InstrChaining::None), Some(_)) => {
                    return Err(chain_error(
                        ext_at,
                        v,
                        "a chain is open: expected BODY or FINAL (chains do not nest)",
                    ));
                }
            },
            (i, Some(_)) if i.is_collective_trigger() => {
                return Err(IsaError::new(
                    i.opcode(),
                    "opcode",
                    0,
                    u64::from(i.opcode()),
                    "an unchained collective trigger inside an open INSTR_CHAINING chain",
                    rule::CHAINING,
                )
                .at(at));
            }
            _ => {}
        }
        at += instr.len();
        out.words.push(StreamWord {
            offset: at - instr.len(),
            instr,
        });
    }
    if let Some(ch) = open {
        let first = ch.members.first().map_or(0, |&i| out.words[i].offset);
        return Err(chain_error(
            first + WORD,
            InstrChaining::Initial,
            "the stream ends inside a chain opened here (no FINAL)",
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests;

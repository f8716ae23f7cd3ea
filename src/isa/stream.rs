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
mod tests {
    use super::*;
    use crate::isa::testutil::{collective2, with_chaining};
    use proptest::prelude::*;

    fn other(op: u8) -> [u8; 64] {
        let mut w = [0u8; 64];
        w[0] = op;
        w
    }

    #[test]
    fn walks_pairs_others_and_dma_ext() {
        let mut s = Vec::new();
        s.extend_from_slice(&other(0x01)); // compute
        s.extend_from_slice(&collective2().encode()); // 0xD9 + 0xDA
        s.extend_from_slice(&other(0xDA)); // lone 0xDA: PSEUDO_DMA_EXT (docs/contract/isa.md §6)
        s.extend_from_slice(&other(0xD5)); // sync barrier, untyped
        let d = decode_stream(&s).unwrap();
        let offs: Vec<(usize, u8)> = d
            .words
            .iter()
            .map(|w| (w.offset, w.instr.opcode()))
            .collect();
        assert_eq!(offs, [(0, 0x01), (64, 0xD9), (192, 0xDA), (256, 0xD5)]);
        assert!(matches!(d.words[2].instr, Instr::DmaExt { .. }));
        assert_eq!(d.triggers().count(), 1);
        assert!(d.chains.is_empty());
    }

    /// docs/contract/isa.md §9 rule 3 through the walker: a 0xD9 followed by something else.
    #[test]
    fn d9_not_followed_by_da_is_rule_3() {
        let mut s = Vec::new();
        s.extend_from_slice(&other(0x01));
        s.extend_from_slice(&collective2().encode()[..64]);
        s.extend_from_slice(&other(0x02));
        let e = decode_stream(&s).unwrap_err();
        assert_eq!(
            (e.opcode, e.field, e.offset, e.value),
            (0xD9, "next_opcode", 64, 0x02)
        );
        assert_eq!((e.rule, e.word_at), (rule::RULE_3, Some(64)));
        // At the very end of the stream.
        let e = decode_stream(&s[..128]).unwrap_err();
        assert_eq!((e.rule, e.word_at), (rule::RULE_3, Some(64)));
    }

    #[test]
    fn chains() {
        let mut s = Vec::new();
        for c in [
            InstrChaining::Initial,
            InstrChaining::Body,
            InstrChaining::Final,
        ] {
            s.extend_from_slice(&with_chaining(c).encode());
            s.extend_from_slice(&other(0x00)); // a non-trigger word between members
        }
        s.extend_from_slice(&with_chaining(InstrChaining::None).encode());
        let d = decode_stream(&s).unwrap();
        assert_eq!(
            d.chains,
            [Chain {
                members: vec![0, 2, 4]
            }]
        );

        let body = with_chaining(InstrChaining::Body).encode();
        let e = decode_stream(&body).unwrap_err();
        assert_eq!(
            (e.opcode, e.field, e.offset, e.value),
            (0xDA, "instr_chaining", 1, 2)
        );
        assert_eq!((e.rule, e.word_at), (rule::CHAINING, Some(64)));

        let mut s = with_chaining(InstrChaining::Initial).encode().to_vec();
        let e = decode_stream(&s).unwrap_err();
        assert_eq!((e.value, e.word_at), (1, Some(64)));
        s.extend_from_slice(&with_chaining(InstrChaining::None).encode());
        let e = decode_stream(&s).unwrap_err();
        assert_eq!((e.value, e.word_at), (0, Some(192)));
    }

    #[test]
    fn ragged_length_is_framing_error() {
        let e = decode_stream(&[0u8; 65]).unwrap_err();
        assert_eq!((e.rule, e.word_at, e.value), (rule::FRAMING, Some(64), 1));
    }

    proptest! {
        #[test]
        fn walker_never_panics(v in prop::collection::vec(any::<u8>(), 0..600)) {
            let _ = decode_stream(&v);
            let n = v.len() / 64 * 64;
            let _ = decode_stream(&v[..n]);
        }
    }
}

//! The stream entry path: every collective trigger of a decoded engine program → one
//! [`CollectiveRequest`] each, in stream order, with INSTR_CHAINING chains resolved
//! (docs/contract/isa.md §6, §10; docs/contract/lowering.md §4.9, §6.3).
//!
//! Each word goes through the one-word lowering of [`request_instr`](super::instr)
//! against a running [`ValidationContext`], so rule 8's stream↔group mapping holds across the
//! whole program. Non-trigger words (0xDB, 0xBF, compute) are validated and skipped.
//!
//! Chains (the walker in `isa::stream` has already checked their structure: INITIAL, BODY…,
//! FINAL, no nesting, no unchained trigger inside): each member stays its own request and gets
//! `chain.index` / `chain.len`. Only the FINAL member keeps a trigger record; it waits on what
//! the chain's first 0xD9 waited on and updates as the FINAL word says (§6.3), so the bundle
//! waits once and signals once. Our rules, since the spec gives only the codes: all members run
//! on the INITIAL word's stream and replica group (one fused cc-op bundle runs on one stream),
//! and with UNIQUE_TENSORS set on any member no tensor or NEFF variable is used by two members.

use std::collections::{BTreeMap, BTreeSet};

use super::instr::{lower_word, InstrContext};
use super::{CollectiveRequest, TensorName};
use crate::error::{Error, Result};
use crate::isa::enums::InstrChaining;
use crate::isa::instr::Instr;
use crate::isa::stream::DecodedStream;
use crate::isa::validate::ValidationContext;

/// Lower every collective trigger of a decoded engine program, in stream order. Every word is
/// validated (with the stream↔group mapping of rule 8 carried along); chains of 0xD9+0xDA pairs
/// (docs/contract/lowering.md §6.3) become one request per member with `chain.index` / `chain.len`
/// set, a single trigger record on the FINAL member that waits like the INITIAL word and updates
/// like the FINAL one, and the chain rules of the module doc checked. Errors name the word's byte
/// offset.
pub fn requests_from_stream(
    stream: &DecodedStream,
    ctx: &InstrContext,
) -> Result<Vec<CollectiveRequest>> {
    let mut running = ValidationContext::default();
    let mut out = Vec::new();
    let mut at_word = BTreeMap::new();
    for (i, w) in stream.words.iter().enumerate() {
        let here = |e: Error| e.context(format_args!("word at byte {:#x}", w.offset));
        let r = lower_word(&w.instr, ctx, &running).map_err(here)?;
        running.observe(&w.instr);
        if let Some(r) = r {
            at_word.insert(i, out.len());
            out.push(r);
        }
    }
    for chain in &stream.chains {
        let len = chain.members.len() as u32;
        let first = &stream.words[chain.members[0]];
        let not_pair = |off: usize| {
            Error::invalid(format!(
                "chain member at byte {off:#x} is not a lowered 0xD9+0xDA pair"
            ))
        };
        let Instr::Collective2(head) = &first.instr else {
            return Err(not_pair(first.offset));
        };
        for &m in &chain.members {
            if !at_word.contains_key(&m) || !matches!(stream.words[m].instr, Instr::Collective2(_))
            {
                return Err(not_pair(stream.words.get(m).map_or(0, |w| w.offset)));
            }
        }
        let mut seen: BTreeMap<TensorName, u32> = BTreeMap::new();
        let unique = chain
            .members
            .iter()
            .any(|&m| out[at_word[&m]].chain.unique_tensors);
        for (k, &m) in chain.members.iter().enumerate() {
            let word = &stream.words[m];
            let Instr::Collective2(c) = &word.instr else {
                return Err(not_pair(word.offset));
            };
            let at = |msg: String| {
                Error::invalid(msg).context(format_args!("word at byte {:#x}", word.offset))
            };
            if (c.ext.stream_id, c.ext.group_id) != (head.ext.stream_id, head.ext.group_id) {
                return Err(at(format!(
                    "chain member {k} runs on stream {} / group {} but the chain's INITIAL word \
                     (byte {:#x}) on stream {} / group {}: a chain is one cc-op bundle on one \
                     stream (docs/contract/lowering.md §6.3)",
                    c.ext.stream_id,
                    c.ext.group_id,
                    first.offset,
                    head.ext.stream_id,
                    head.ext.group_id
                )));
            }
            let req = &mut out[at_word[&m]];
            req.chain.index = k as u32;
            req.chain.len = len;
            if req.chain.role == InstrChaining::Final {
                if let Some(t) = req.trigger.as_mut() {
                    let w0 = head.trigger.common.events;
                    t.wait_mode = w0.wait_mode;
                    t.wait_idx = w0.wait_idx;
                    t.semaphore_value = w0.semaphore_value;
                }
            }
            if unique {
                let names: BTreeSet<TensorName> =
                    [req.operands.src0, req.operands.src1, req.operands.dst]
                        .into_iter()
                        .flatten()
                        .map(|o| o.tensor)
                        .collect();
                for nm in names {
                    if let Some(prev) = seen.insert(nm, k as u32) {
                        return Err(at(format!(
                            "UNIQUE_TENSORS is set on the chain but members {prev} and {k} both \
                             use {nm:?}"
                        )));
                    }
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests;

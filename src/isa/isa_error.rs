//! The error of a rejected instruction word.
//!
//! docs/design.md §4: "a bad pseudo-instruction names the opcode, the field, the byte offset and
//! the rule it broke". [`IsaError`] carries exactly that, plus the bad value, a sentence saying
//! why, and (when the word came from a stream) where the word sits. It converts into the core's
//! [`Error`] with kind `Invalid` (`NRT_INVALID` = 2, docs/contract/isa.md §9).

use std::fmt;

use crate::error::Error;

/// The rule citations used in [`IsaError::rule`]. One place, so every message cites the same way.
pub mod rule {
    /// Stream framing: 64-byte words, fixed 0x40 stride (docs/contract/isa.md §1).
    pub const FRAMING: &str = "docs/contract/isa.md §1";
    /// The EVENTS enums (docs/contract/isa.md §2).
    pub const EVENTS: &str = "docs/contract/isa.md §2";
    /// A wire enum outside its table (docs/contract/isa.md §10).
    pub const ENUMS: &str = "docs/contract/isa.md §10";
    /// INSTR_CHAINING chain structure (docs/contract/isa.md §6, §10).
    pub const CHAINING: &str = "docs/contract/isa.md §6/§10 INSTR_CHAINING";
    /// 0xC8 bytes 33–47 reserved, must be 0 (docs/contract/isa.md §4,
    /// docs/contract/lowering.md §7 item 2).
    pub const C8_RESERVED: &str = "docs/contract/isa.md §4 and docs/contract/lowering.md §7 item 2";
    /// A field too wide for its bits on encode.
    pub const WIDTH: &str = "field width";
    /// docs/contract/isa.md §9 rule 1: update mode.
    pub const RULE_1: &str = "docs/contract/isa.md §9 rule 1";
    /// docs/contract/isa.md §9 rule 2: single stream for plain triggers.
    pub const RULE_2: &str = "docs/contract/isa.md §9 rule 2";
    /// docs/contract/isa.md §9 rule 3: 0xD9 pairing.
    pub const RULE_3: &str = "docs/contract/isa.md §9 rule 3";
    /// docs/contract/isa.md §9 rule 4: address markers.
    pub const RULE_4: &str = "docs/contract/isa.md §9 rule 4";
    /// docs/contract/isa.md §9 rule 5: dma_configs.
    pub const RULE_5: &str = "docs/contract/isa.md §9 rule 5";
    /// docs/contract/isa.md §9 rule 6: reduce op.
    pub const RULE_6: &str = "docs/contract/isa.md §9 rule 6";
    /// docs/contract/isa.md §9 rule 7: cc_dim.
    pub const RULE_7: &str = "docs/contract/isa.md §9 rule 7";
    /// docs/contract/isa.md §9 rule 8: stream, channel and group limits.
    pub const RULE_8: &str = "docs/contract/isa.md §9 rule 8";
    /// docs/contract/isa.md §9 rule 9: ALL_TO_ALL_V metadata.
    pub const RULE_9: &str = "docs/contract/isa.md §9 rule 9";
    /// docs/contract/isa.md §9 rule 10: dtype.
    pub const RULE_10: &str = "docs/contract/isa.md §9 rule 10";
    /// docs/contract/isa.md §9 rule 11: S3D3.
    pub const RULE_11: &str = "docs/contract/isa.md §9 rule 11";
    /// docs/contract/isa.md §9 rule 12: unsupported operation kinds.
    pub const RULE_12: &str = "docs/contract/isa.md §9 rule 12";
}

/// A rejected instruction word: which opcode, which field at which byte, the bad value, why,
/// and the rule. `offset` is measured from the start of the 64-byte word whose `opcode` is named
/// (for the 0xDA half of a 0xD9+0xDA pair: from the 0xDA word).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsaError {
    /// Opcode of the word that holds the bad field.
    pub opcode: u8,
    /// Field name, as the spec spells it.
    pub field: &'static str,
    /// Byte offset of the field inside its 64-byte word.
    pub offset: usize,
    /// The offending value (for a multi-field rule, the value the rule tested).
    pub value: u64,
    /// Why the value is rejected, in words.
    pub reason: String,
    /// The rule broken, e.g. `docs/contract/isa.md §9 rule 1` (see [`rule`]).
    pub rule: &'static str,
    /// Byte position of the word in its stream, when it came from [`decode_stream`](super::decode_stream).
    pub word_at: Option<usize>,
}

impl IsaError {
    /// A new error; `word_at` starts unset.
    pub fn new(
        opcode: u8,
        field: &'static str,
        offset: usize,
        value: u64,
        reason: impl Into<String>,
        rule: &'static str,
    ) -> Self {
        IsaError {
            opcode,
            field,
            offset,
            value,
            reason: reason.into(),
            rule,
            word_at: None,
        }
    }

    /// Record where the word sits in its stream (kept if already set).
    pub fn at(mut self, word_at: usize) -> Self {
        self.word_at.get_or_insert(word_at);
        self
    }
}

impl fmt::Display for IsaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(at) = self.word_at {
            write!(f, "word at byte {at:#x}: ")?;
        }
        write!(
            f,
            "opcode {:#04X}: field {} at byte {} = {:#04x}: {} ({})",
            self.opcode, self.field, self.offset, self.value, self.reason, self.rule
        )
    }
}

impl std::error::Error for IsaError {}

impl From<IsaError> for Error {
    /// `NRT_INVALID` with the message, and the field and its value as structured fields (the
    /// op is the opcode, the step the word's byte position in its stream when known).
    fn from(e: IsaError) -> Self {
        let mut err = Error::invalid(e.to_string())
            .with_op(format!("{:#04x}", e.opcode))
            .with_field(e.field)
            .with_actual(e.value);
        if let Some(at) = e.word_at {
            err = err.with_step(at as u64);
        }
        err
    }
}

/// Result of this module.
pub type IsaResult<T> = Result<T, IsaError>;

#[cfg(test)]
mod tests;

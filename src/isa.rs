//! Every wire format of the hardware contract: encode, decode and validate.
//!
//! The lowering writes these bytes, the software device reads them, and libncfw's `ctx_log`
//! dumps them; none of the three imports another for a byte format (docs/design.md §3).
//!
//! * [`ccop`] — the 8-byte `spad_ctrl_entry` (one cc_op slot of the TOP_SP CTRL scratchpad).
//! * [`enums`] — the enum tables of the pseudo-instruction words with their wire values
//!   (docs/contract/isa.md §2, §10, and the host `enc_op_type` of docs/contract/lowering.md §2.1).
//! * [`memmap`] — the device memory map shared by lowering and device: HBM windows, constant
//!   page, program areas, buffers, the per-TPB EVT_SEM block and the TOP_SP LOCAL_REG registers.
//! * [`markers`] — PSEUDO_ADDR8 / ADDR4 markers and modifier bits, the 0xBF LNC size format,
//!   and the opcodes of the typed words (docs/contract/isa.md §1, §7, §8).
//! * [`operand`] — address operands: PSEUDO_ADDR8, PSEUDO_ADDR8TENSOR2D, ADDR4, TENSOR3D (§7, §8).
//! * [`layout`] — the table-driven offsets of the unsettled 0xDA knobs and the 0xC8 reserved
//!   range (docs/contract/isa.md §6, §4; docs/contract/lowering.md §7 items 1–2), plus the
//!   little-endian byte helpers.
//! * [`instr`] — the common header + EVENTS, the [`Instr`] sum type, one-word [`decode`] and
//!   [`encode`] (docs/contract/isa.md §1–§2), and the word structs in its two children:
//!   * [`instr::trigger`] — the collective trigger words 0xC7, 0xC8, 0xD9, the 0xDA collective2
//!     ext and the 0xD9+0xDA pair (docs/contract/isa.md §3–§6).
//!   * [`instr::other`] — 0xCB SEND_RECV, 0xDB CUR_PROCESSING_RANK_ID, 0xBF SB2SB_COLLECTIVE (§8).
//! * [`stream`] — [`decode_stream`]: the 0x40-stride walker with 0xD9/0xDA pairing and
//!   INSTR_CHAINING chains.
//! * [`validate`](mod@validate) — the twelve rules of docs/contract/isa.md §9, one function each,
//!   behind [`validate()`](validate::validate) and a [`ValidationContext`]; rules 7, 9 and 11
//!   (shapes and placement) sit in its child module `validate::shape`.
//! * [`isa_error`] — [`IsaError`]: opcode, field, byte offset, value, reason and rule of a
//!   rejected word; converts into the core's `Error` (kind Invalid, `NRT_INVALID`).

// Pure computation on bytes and numbers: no unsafe code, and none may creep in.
#![forbid(unsafe_code)]

pub mod barrier_cfg;
pub mod ccop;
pub mod enums;
pub mod evtsem;
pub mod instr;
pub mod isa_error;
pub mod layout;
pub mod markers;
pub mod memmap;
pub mod operand;
pub mod slot;
pub mod stream;
pub mod udma;
pub mod validate;

#[cfg(test)]
mod testutil;

pub use instr::{decode, encode, Encoded, Instr};
pub use isa_error::IsaError;
pub use stream::{decode_stream, DecodedStream};
pub use validate::{validate_stream, ValidationContext};

//! Every wire format of the hardware contract: encode, decode and validate.
//!
//! The lowering writes these bytes, the software device reads them, and libncfw's `ctx_log`
//! dumps them; none of the three imports another for a byte format (design.md §3).
//!
//! * [`ccop`] — the 8-byte `spad_ctrl_entry` (one cc_op slot of the TOP_SP CTRL scratchpad).

pub mod ccop;

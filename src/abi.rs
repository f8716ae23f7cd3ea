//! Every `extern "C"` function of libnrt.so.1 and libncfw.so, and nothing else.
//!
//! The functions here are ordinary Rust functions with the C calling convention; they are not
//! `#[no_mangle]`. The thin crates under `cdylib/` bind the public names to them (libnrt with
//! symbol versions, see `cdylib/nrt/build.rs`). Every body runs through
//! [`boundary::enter`] (see [`boundary`]).
//!
//! All public functions are re-exported flat from this module, so the binding crate can name
//! each one as `opennrt::abi::<symbol>`. `docs/abi-status.md` lists every export with its
//! current behaviour.
//!
//! Beneath the entry files: [`boundary`] (the entry wrapper, pointer primitives, status mapping),
//! [`args`] (argument checks and writers the entry files share; no entry file imports another
//! for argument handling), [`handle`] (the handle table) and [`types`] (the `repr(C)` twins).
//!
//! | module | header / family (docs/contract/abi.md) |
//! |---|---|
//! | [`nrt`] | lifecycle, version, counts, topology and memory getters (§3.1–§3.2) |
//! | [`tensor`] | tensors, tensor sets, `nrt_memcpy_to_device` (§3.3) |
//! | [`model`] | load, execute, model introspection (§3.4) |
//! | [`collectives`] | host-driven collectives and communicator setup (§3.5) |
//! | [`nrt_async`] | the explicit async API, node `NRT_3.0.0` (§3.6) |
//! | [`collective_async`] | the collective path of the async API (`nrta_cc_*`, and OpenNRT's `nrt_cc_prepare` / `nrt_cc_schedule`) |
//! | [`sendrecv`] | point-to-point async send/recv (§3.7) |
//! | [`nrt_experimental`] | trace, network plugin, pool-engine microcode (§3.8) |
//! | [`profile`], [`inspect`], [`inspect_config`], [`debug_stream`] | observability no-ops (§3.9) |
//! | [`sys_trace`] | the system trace over `runtime::sys_trace`: what the device runs (§3.9) |
//! | [`nec`], [`nec_dynamic`] | libnccom reverse-callbacks (§3.10) |
//! | [`ncfw`] | libncfw.so |

pub mod args;
pub mod boundary;
pub mod collective_async;
pub mod collectives;
pub mod debug_stream;
pub mod handle;
pub mod inspect;
pub mod inspect_config;
pub mod model;
pub mod ncfw;
pub mod nec;
pub mod nec_dynamic;
pub mod nrt;
pub mod nrt_async;
pub mod nrt_experimental;
pub mod profile;
pub mod sendrecv;
pub mod status;
pub mod sys_trace;
pub mod tensor;
pub mod tensor_set;
pub mod types;

pub use collective_async::{nrta_cc_prepare, nrta_cc_schedule};
pub use collectives::*;
pub use debug_stream::*;
pub use inspect::*;
pub use inspect_config::*;
pub use model::*;
pub use nec::*;
pub use nec_dynamic::*;
pub use nrt::*;
pub use nrt_async::*;
pub use nrt_experimental::*;
pub use profile::*;
pub use sendrecv::*;
pub use sys_trace::*;
pub use tensor::*;

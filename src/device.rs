//! The software device: a simulated Trainium that executes the lowered bytes — and only them —
//! so that collectives give exact results on a CPU (docs/design.md §1–§2, docs/contract/device.md).
//!
//! The device never imports the lowering: they meet only in the bytes of [`crate::isa`] (the
//! descriptor codec `isa::udma`, EVT_SEM and SoC addresses `isa::evtsem`, the cc_op slot
//! `isa::ccop`, the SLOT SPAD record `isa::slot`, the memory map `isa::memmap`).
//!
//! # Parts
//!
//! * `memory` — the machine's memory by SoC address: regions mapped by the loader (HBM windows,
//!   program areas, the constant page), EVT_SEM windows routed to `sema`. Bad addresses are
//!   errors the DMA engine turns into an abort (`NRT_EXEC_HW_ERR_DMA_ABORT`), never a panic.
//! * `buffer_pool` — large regions recycled between machines (zeroed on reuse).
//! * `sema` — per (chip, TOP_SP) 256 semaphores + 256 events, and the exact comparison of every
//!   wait kind (docs/contract/device.md §5.3).
//! * `cce` — the in-transfer reduce kernels (docs/contract/device.md §2.3, §11), over `crate::dtype`.
//! * `dma` — per (chip, TOP_SP) one M2S and one S2M queue over the rings the emitter
//!   laid out (`isa::memmap` ring bases, power-of-two length, RING_ID laps); a tail increment
//!   makes descriptors valid; the engine consumes whole packets (FIRST..LAST): a TX copy packet
//!   pairs with the next RX packet of the same TOP_SP's S2M queue (lengths must agree), a CCE
//!   packet (compute descriptor + data descriptor per source, "last" on the final source) reduces
//!   into the RX packet's destinations; a 4-byte copy into an EVT_SEM window is a semaphore
//!   write (DMB: after the step's data). Stale RING_ID, length mismatch, bad address or an
//!   invalid dtype nibble abort the engine.
//! * `topsp` — the sequencer: waits TRIGGER (semaphore 0), walks the CTRL SPAD cc_op
//!   entries (`isa::ccop`, continuation marks), for each entry its SLOT SPAD records
//!   (`isa::slot`: wait `sem >= target` then `sem -= consume`; then `repeat` × {S2M tail +=
//!   s2m; M2S tail += m2s}, RX first), END ends the entry; chaining and completion follow the
//!   protocol `lower::emit` documents (`isa::slot::{NEXT_SEM, CHAIN_SEM}`, reporter posts
//!   COMPLETION).
//! * `executor` — one deterministic scheduler for all ranks of the process: agents
//!   (sequencers, DMA queues) run until they block; a semaphore write wakes its waiters; no
//!   busy-waiting. When nothing can run and the collective is not complete, the hang report
//!   names, per stuck rank, the cc_op slot, the record (step), the semaphore (address, index),
//!   its value and target, and the not-yet-executed descriptors in any ring that would write
//!   that semaphore (their chip, TOP_SP and ring index) — status `NRT_EXEC_HW_ERR_COLLECTIVES`.
//!   A doorbell that does not fit its ring's free slots waits (docs/contract/device.md §3.2); rings shorter
//!   than their stream are fed lap by lap (`dma::Feed`). `NEURON_RT_EXEC_TIMEOUT` bounds a run.
//!   `runtime::machine` loads an emitted program.
//! * `barrier` — the device barrier (a `{1,4,4,1}` step machine over BARRIER0/BARRIER1
//!   semaphores, decoded from the 0x128-byte neff_barrier_config of `isa::barrier_cfg`) and the
//!   host barrier (barrier_start / barrier_done), run on the machine's semaphores without
//!   busy-waiting; a missing participant is a diagnosed hang.
//! * `batch` — deferred bulk data: copies and reduces of the DMA engines in dependency levels,
//!   each level split over the machine's cores; the same bytes as in-order execution.
//! * `cc_context` — the live CC context of a TOP_SP in the docs/contract/carrier.md §3 layout of the
//!   machine's arch ([`executor::Machine::cc_context`], [`executor::Machine::ctx_log`]); the hang
//!   report offers it for every stuck TOP_SP (`OPENNRT_HANG_DUMP=<dir>` writes the dumps).

pub mod barrier;
pub mod batch;
pub mod buffer_pool;
pub mod cc_context;
pub mod cce;
pub mod dma;
pub mod executor;
pub mod memory;
pub mod peers;
pub mod sema;
pub mod settings;
pub mod topsp;

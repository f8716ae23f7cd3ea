//! The per-arch layout of the NCFW collective-communication (CC) context
//! (docs/contract/carrier.md §3).
//!
//! The context is an image of the TOP_SP's NCFW context region in the *device* layout: packed,
//! little-endian, with unaligned u64s. Three regions sit back to back (§3.1):
//!
//! | region | key 5 (v2) | keys 12/20/28 (v3+) |
//! |---|---|---|
//! | `configs` (static) | 0x0000, 0x3060 B | 0x0000, 0x4280 B |
//! | `neff` (runtime NEFF ctx) | 0x3060, 0x60 B | 0x4280, 0x60 B |
//! | `algo` (runtime algo ctx) | 0x30C0, 0x206 B | 0x42E0, 0x206 B |
//!
//! The only per-arch difference is the number of mesh events (50 vs 108, §3.2.1), which moves
//! everything after `mesh_events`. Every leaf struct is identical across arches (§5 item 8).
//! Offsets inside a struct live in one small module per struct below; the derived sums the
//! spec's review log lists are checked at compile time at the bottom of this file.

/// Supported arch ids (the runtime's `<GEN>_NX_TOPSP` coretype ordinals,
/// docs/contract/carrier.md §2.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum Arch {
    /// Key 5: NeuronCore-v2 (Trn1, Inf2), "SUNDA".
    V2 = 5,
    /// Key 12: NeuronCore-v3 (Trn2), "CAYMAN".
    V3 = 12,
    /// Key 20: NeuronCore-v4 (Trn3), "MARIANA".
    V4 = 20,
    /// Key 28: NeuronCore-v4+ ("plus" firmware tier), "MARIANA_PLUS".
    V4Plus = 28,
}

impl Arch {
    /// Every supported arch, in key order.
    pub const ALL: [Arch; 4] = [Arch::V2, Arch::V3, Arch::V4, Arch::V4Plus];

    /// The arch for a libncfw key, or `None` for anything else (including 36, v5).
    pub const fn from_id(id: u32) -> Option<Arch> {
        match id {
            5 => Some(Arch::V2),
            12 => Some(Arch::V3),
            20 => Some(Arch::V4),
            28 => Some(Arch::V4Plus),
            _ => None,
        }
    }

    /// The libncfw key.
    pub const fn id(self) -> u32 {
        self as u32
    }

    /// The generation codename.
    pub const fn codename(self) -> &'static str {
        match self {
            Arch::V2 => "SUNDA",
            Arch::V3 => "CAYMAN",
            Arch::V4 => "MARIANA",
            Arch::V4Plus => "MARIANA_PLUS",
        }
    }

    /// The kernel/HAL arch number of the silicon family (2, 3, 4; v4+ runs on v4 silicon).
    pub const fn family(self) -> u32 {
        match self {
            Arch::V2 => 2,
            Arch::V3 => 3,
            Arch::V4 | Arch::V4Plus => 4,
        }
    }

    /// Mesh events per context: 50 on v2, 108 otherwise (docs/contract/carrier.md §3.2.6).
    pub const fn mesh_events(self) -> usize {
        match self {
            Arch::V2 => 50,
            _ => 108,
        }
    }

    /// The context layout of this arch.
    pub const fn layout(self) -> CtxLayout {
        CtxLayout::for_mesh_events(self.mesh_events())
    }
}

/// Top-level offsets of one arch's context (all relative to the start of the context).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CtxLayout {
    /// Mesh events in `algo_configs`.
    pub mesh_events: usize,
    /// `configs.algo.mesh_events[0]`.
    pub mesh_off: usize,
    /// `configs.algo.hierarchical` (one u64).
    pub hier_off: usize,
    /// Size of `algo_configs` = 32 × 148 + N × 80 + 8.
    pub algo_configs_size: usize,
    /// `configs.neff` (`neff_configs`).
    pub neff_configs_off: usize,
    /// `configs.dev` (`dev_configs`).
    pub dev_configs_off: usize,
    /// Size of `configs`.
    pub configs_size: usize,
    /// The runtime NEFF context.
    pub neff_off: usize,
    /// The runtime algorithm context.
    pub algo_off: usize,
    /// Minimum readable context size (`algo_off + 0x206`).
    pub min_size: usize,
}

impl CtxLayout {
    /// The layout for a context with `n` mesh events.
    pub const fn for_mesh_events(n: usize) -> CtxLayout {
        let mesh_off = ring_channel::SIZE * RING_CHANNELS;
        let hier_off = mesh_off + n * mesh_event::SIZE;
        let algo_configs_size = hier_off + 8;
        let neff_configs_off = algo_configs_size;
        let dev_configs_off = neff_configs_off + neff_configs::SIZE;
        let configs_size = dev_configs_off + dev_configs::SIZE;
        let neff_off = configs_size;
        let algo_off = neff_off + runtime_neff::SIZE;
        CtxLayout {
            mesh_events: n,
            mesh_off,
            hier_off,
            algo_configs_size,
            neff_configs_off,
            dev_configs_off,
            configs_size,
            neff_off,
            algo_off,
            min_size: algo_off + runtime_algo::SIZE,
        }
    }
}

/// Ring channels per context (always 32, always dumped).
pub const RING_CHANNELS: usize = 32;

/// Ring channel descriptor, 148 bytes (docs/contract/carrier.md §3.2.2).
pub mod ring_channel {
    pub const SIZE: usize = 148;
    pub const NEXT_NEIGH: usize = 0x00;
    pub const PREV_NEIGH: usize = 0x1C;
    pub const RECV_SEMA: usize = 0x38;
    pub const SEND_SEMA: usize = 0x40;
    pub const POST_SEMA: usize = 0x48;
    pub const DMA_COMPL_SEMA: usize = 0x50;
    pub const KRING_PEER_SEMAS: usize = 0x58;
    pub const DMA_APB_BCAST: usize = 0x78;
    pub const CHANNEL_ID: usize = 0x8C;
    pub const SPAD_SLOT_IDX: usize = 0x8D;
    pub const FOLD_N: usize = 0x8E;
    pub const KANGARING_IS_PRIMARY: usize = 0x8F;
    pub const KANGARING_NUM_PEERS: usize = 0x90;
}

/// `ring_neighbor`, 28 bytes (docs/contract/carrier.md §3.2.3).
pub mod ring_neighbor {
    pub const SIZE: usize = 28;
    pub const NET_IDX_ADDRS: usize = 0;
    /// Capacity of `net_idx_addrs`; the dump loop is clamped to it.
    pub const MAX_ADDRS: usize = 3;
    pub const FOLD_N: usize = 24;
    pub const TYPE: usize = 25;
}

/// `kring_peer_semas`, 32 bytes (docs/contract/carrier.md §3.2.4).
pub mod kring_peer_semas {
    pub const SIZE: usize = 32;
    pub const MINE: usize = 0;
    pub const PEERS: usize = 8;
    pub const PEER_COUNT: usize = 3;
}

/// The barrier's wire format (and the `dma_apb_bcast` record it embeds) belongs to `isa`, which
/// the lowering writes and the device reads; the carrier's layout reads it from there.
pub use crate::isa::barrier_cfg::layout::{
    apb_bcast, barrier_configs, barrier_step, device_barrier,
};

/// Mesh event, 80 bytes (docs/contract/carrier.md §3.2.6).
pub mod mesh_event {
    pub const SIZE: usize = 0x50;
    pub const DMA_APB_BCAST: [usize; 2] = [0x00, 0x14];
    pub const DIRECT_TRIGGER_SEMA: usize = 0x28;
    pub const DIRECT_TRIGGER_SEMA_COUNT: usize = 3;
    pub const EVENT_WAIT_SEMA: usize = 0x40;
    pub const WAIT_VAL: usize = 0x48;
    pub const EVENT_TYPE: usize = 0x4C;
    pub const DMA_TRIGGER: usize = 0x4D;
    pub const DIRECT_TRIGGER: usize = 0x4E;
    pub const WAIT_EVENT: usize = 0x4F;
}

/// `neff_configs`, 3592 bytes (docs/contract/carrier.md §3.2.7).
pub mod neff_configs {
    pub const SIZE: usize = 0xE08;
    pub const DMA_ALLOC_BITMAP: usize = 0x000;
    pub const DMA_ALLOC_ENTRIES: usize = 8;
    pub const DESC_COUNT: usize = 0x040;
    pub const DESC_COUNT_SIZE: usize = 2080;
    pub const SLOT_SPAD_BASE: usize = 0x860;
    pub const SLOT_SPADS: usize = 6;
    pub const CTRL_SPAD_BASE: usize = 0x890;
    pub const BARRIER_CONFIGS: usize = 0x898;
    pub const BASIC_BLOCK_CONFIGS: usize = 0x9C0;
    pub const TRIGGER: usize = 0xDD8;
    pub const TRIGGER_NEXT: usize = 0xDE0;
    pub const COMPLETE: usize = 0xDE8;
    pub const COMPLETE_PREV: usize = 0xDF0;
    pub const TPB_STOP_SEMA: usize = 0xDF8;
    pub const OP_NUM: usize = 0xE00;
    pub const FUNCTION_N: usize = 0xE04;
    pub const TPB_COMPL_ADDR_NUM: usize = 0xE06;
    /// bit0 `leader`, bit1 `dbg_cc_nop`, bit2 `host_cc`.
    pub const FLAGS: usize = 0xE07;
}

/// `basic_block_configs`, 1048 bytes (docs/contract/carrier.md §3.2.11).
pub mod basic_block_configs {
    pub const SIZE: usize = 0x418;
    pub const TABLE: usize = 0x000;
    pub const TABLE_ENTRIES: usize = 256;
    pub const ENTRY_SIZE: usize = 4;
    pub const ENTRY_DESC_COUNT: usize = 0;
    pub const ENTRY_RESET_SECTION_DESC_COUNT: usize = 2;
    pub const ENTRY_TYPE: usize = 3;
    pub const SWITCH_COMPLETED: usize = 0x400;
    pub const PRING_BASE_ADDR: usize = 0x408;
    pub const PRING_TOTAL_DESC_NUM: usize = 0x410;
}

/// `dev_configs`, 0x30 bytes, with `tsync` at +0 (docs/contract/carrier.md §3.2.12).
pub mod dev_configs {
    pub const SIZE: usize = 0x30;
    pub const TSYNC_DMA_APB_RSVD_ADDR: usize = 0x00;
    pub const TSYNC_ENG_TPB: usize = 0x08;
    pub const TSYNC_TIMESTAMP_LOCAL: usize = 0x10;
    pub const TSYNC_TIMESTAMP_TPB: usize = 0x18;
    pub const TSYNC_TIMESTAMP_TPB_VAL: usize = 0x20;
    pub const TSYNC_SIZE: usize = 0x24;
    /// u64, unaligned.
    pub const TPB_CTRL_ACK: usize = 0x24;
    /// `bits[3:0]` = `tpb_id`, `bits[7:4]` = `seng_id`.
    pub const TPB_SENG: usize = 0x2C;
    /// `bits[3:0]` = `dev_id`.
    pub const DEV: usize = 0x2D;
}

/// The runtime NEFF context, 0x60 bytes (docs/contract/carrier.md §3.3), with `op_ctx` (§3.4) and
/// `basic_block_ctx` (§3.6).
pub mod runtime_neff {
    pub const SIZE: usize = 0x60;
    pub const OP: usize = 0x00;
    pub const OP_CTRL_ENTRY: usize = 0x00;
    /// `tpb_compl[2]`, 8-byte stride (Q-N judgement).
    pub const OP_TPB_COMPL: usize = 0x08;
    pub const OP_TPB_COMPL_COUNT: usize = 2;
    pub const OP_ID: usize = 0x18;
    pub const OP_REPORTER: usize = 0x1C;
    pub const OP_SIZE: usize = 0x20;
    pub const BASIC_BLOCK: usize = 0x20;
    pub const BB_SLOT_SPAD_ADDR: usize = 0x20;
    pub const BB_CTRL_SPAD_ADDR: usize = 0x50;
    pub const BB_CURR_ID: usize = 0x58;
    pub const BASIC_BLOCK_SIZE: usize = 0x3C;
    pub const BARRIER_COMPLETED: usize = 0x5C;
}

/// The runtime algorithm context (docs/contract/carrier.md §3.7): 32 ring rows of 16 B,
/// hierarchical, mesh.
pub mod runtime_algo {
    pub const SIZE: usize = 0x206;
    pub const RING: usize = 0x000;
    pub const ROW_SIZE: usize = 16;
    pub const ROW_RECV_CNT: usize = 0x0;
    pub const ROW_SEND_CREDIT: usize = 0x2;
    pub const ROW_REPEAT_CNT: usize = 0x4;
    pub const ROW_M2S_VAL: usize = 0x6;
    pub const ROW_S2M_VAL: usize = 0x8;
    pub const ROW_SLOT_IDX: usize = 0xE;
    pub const ROW_RUN_STATE: usize = 0xF;
    pub const HIER_RUN_STATE: usize = 0x200;
    pub const MESH_EVENT_INDEX: usize = 0x204;
}

// The derived sums of the spec's review log (docs/contract/carrier.md, "Facts checked").
const V2: CtxLayout = Arch::V2.layout();
const V3: CtxLayout = Arch::V3.layout();
const _: () = {
    assert!(ring_channel::SIZE * RING_CHANNELS == 0x1280);
    assert!(ring_channel::KANGARING_NUM_PEERS + 1 + 3 == ring_channel::SIZE);
    assert!(ring_channel::PREV_NEIGH == ring_neighbor::SIZE);
    assert!(ring_channel::DMA_APB_BCAST + apb_bcast::SIZE == ring_channel::CHANNEL_ID);
    assert!(ring_channel::KRING_PEER_SEMAS + kring_peer_semas::SIZE == ring_channel::DMA_APB_BCAST);
    assert!(mesh_event::WAIT_EVENT + 1 == mesh_event::SIZE);
    assert!(50 * mesh_event::SIZE == 0xFA0 && 108 * mesh_event::SIZE == 0x21C0);
    assert!(V2.hier_off == 0x2220 && V3.hier_off == 0x3440);
    assert!(V2.algo_configs_size == 32 * 148 + 50 * 80 + 8);
    assert!(V2.algo_configs_size == 0x2228);
    assert!(V3.algo_configs_size == 32 * 148 + 108 * 80 + 8);
    assert!(V3.algo_configs_size == 0x3448);
    assert!(V2.dev_configs_off == 0x3030 && V3.dev_configs_off == 0x4250);
    assert!(V2.neff_off == 0x3060 && V3.neff_off == 0x4280);
    assert!(V2.algo_off == 0x30C0 && V3.algo_off == 0x42E0);
    assert!(V2.min_size == 0x32C6 && V3.min_size == 0x44E6);
    // The runtime's cayman "ncfw-ctx basic-block slot/ctrl spad" offsets
    // (docs/contract/carrier.md §3.1 cross-check).
    assert!(V3.neff_off + runtime_neff::BB_SLOT_SPAD_ADDR == 0x42A0);
    assert!(V3.neff_off + runtime_neff::BB_CTRL_SPAD_ADDR == 0x42D0);
    // neff_configs members tile the struct.
    assert!(
        neff_configs::DESC_COUNT + neff_configs::DESC_COUNT_SIZE == neff_configs::SLOT_SPAD_BASE
    );
    assert!(
        neff_configs::SLOT_SPAD_BASE + 8 * neff_configs::SLOT_SPADS == neff_configs::CTRL_SPAD_BASE
    );
    assert!(
        neff_configs::BARRIER_CONFIGS + barrier_configs::SIZE == neff_configs::BASIC_BLOCK_CONFIGS
    );
    assert!(neff_configs::BASIC_BLOCK_CONFIGS + basic_block_configs::SIZE == neff_configs::TRIGGER);
    assert!(neff_configs::FLAGS + 1 == neff_configs::SIZE);
    // Barrier: four 52-byte steps, then the DMA sync semaphores; the device view fills the union.
    assert!(barrier_step::SIZE * device_barrier::STEP_COUNT == device_barrier::DMA_SYNC_SEMA);
    assert!(barrier_step::TARGET_SEMA_VAL + 4 * barrier_step::SEMAS == barrier_step::SIZE);
    assert!(device_barrier::QUEUE_ID + 2 == device_barrier::SIZE);
    assert!(device_barrier::SIZE == barrier_configs::GATE);
    // Basic blocks: 256 × 4-byte entries then the semaphore.
    assert!(
        basic_block_configs::TABLE_ENTRIES * basic_block_configs::ENTRY_SIZE
            == basic_block_configs::SWITCH_COMPLETED
    );
    assert!(dev_configs::TSYNC_SIZE == dev_configs::TPB_CTRL_ACK);
    // Runtime NEFF: op_ctx (0x20) then basic_block_ctx (0x3C) then barrier_completed.
    assert!(runtime_neff::OP_SIZE == runtime_neff::BASIC_BLOCK);
    assert!(
        runtime_neff::BASIC_BLOCK + runtime_neff::BASIC_BLOCK_SIZE
            == runtime_neff::BARRIER_COMPLETED
    );
    assert!(
        runtime_neff::OP_TPB_COMPL + 8 * runtime_neff::OP_TPB_COMPL_COUNT == runtime_neff::OP_ID
    );
    assert!(runtime_algo::ROW_SIZE * RING_CHANNELS == runtime_algo::HIER_RUN_STATE);
};

#[cfg(test)]
mod tests;

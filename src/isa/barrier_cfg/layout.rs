//! Byte offsets of the barrier configuration inside a TOP_SP's CC context
//! (docs/contract/carrier.md §3.2.5, §3.2.8–§3.2.10): the wire format that the lowering writes
//! (`lower::emit`), the device reads (`device::barrier`) and the carrier dumps
//! (`ncfw::ctx_layout` re-exports these modules). The constants are the spec's.
/// `dma_apb_bcast`, 20 bytes (docs/contract/carrier.md §3.2.5).
pub mod apb_bcast {
    pub const SIZE: usize = 20;
    pub const M2S_TAIL_PTR: usize = 0;
    pub const S2M_TAIL_PTR: usize = 8;
    pub const MASK: usize = 16;
}

/// `barrier_configs`, 296 bytes: host/device union at +0, gate bit at +0x124
/// (docs/contract/carrier.md §3.2.8).
pub mod barrier_configs {
    pub const SIZE: usize = 0x128;
    pub const UNION: usize = 0x000;
    pub const GATE: usize = 0x124;
    /// `host_barrier` (16 B, docs/contract/carrier.md §3.2.9), relative to the union.
    pub const HOST_BARRIER_START: usize = 0;
    pub const HOST_BARRIER_DONE: usize = 8;
}

/// `device_barrier`, 292 bytes (docs/contract/carrier.md §3.2.10), relative to the union.
pub mod device_barrier {
    pub const SIZE: usize = 0x124;
    pub const STEPS: usize = 0x000;
    pub const STEP_COUNT: usize = 4;
    pub const DMA_SYNC_SEMA: usize = 0x0D0;
    pub const DMA_SYNC_SEMA_COUNT: usize = 4;
    pub const DMA_APB_BCAST: usize = 0x0F0;
    pub const START_NETWORK_PROXY: usize = 0x104;
    pub const DMA_SYNC_SEMA_VALUE: usize = 0x10C;
    pub const TDRBP_LOW: usize = 0x110;
    pub const TDRBP_HIGH: usize = 0x114;
    pub const DESC_COUNT: usize = 0x118;
    pub const TOTAL_DESC_N: usize = 0x11C;
    pub const DMA_ENGINES_BITMAP: usize = 0x120;
    pub const QUEUE_ID: usize = 0x122;
}

/// `barrier_step_config`, 52 bytes (docs/contract/carrier.md §3.2.10).
pub mod barrier_step {
    pub const SIZE: usize = 0x34;
    pub const M2S_VAL: usize = 0x00;
    pub const S2M_VAL: usize = 0x02;
    pub const BARRIER_SEMA: usize = 0x04;
    pub const TARGET_SEMA_VAL: usize = 0x24;
    pub const SEMAS: usize = 4;
}

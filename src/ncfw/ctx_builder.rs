//! A builder for CC-context images in the device layout of [`ctx_layout`](super::ctx_layout).
//!
//! The software device and the tests use it to make real contexts:
//!
//! ```
//! use opennrt::ncfw::{Arch, CcContextBuilder, RingRow};
//! let mut b = CcContextBuilder::new(Arch::V3);
//! b.op_num(3).leader(true).runtime_ring_row(0, &RingRow { recv_cnt: 2, ..Default::default() }).unwrap();
//! let ctx = b.build();
//! assert_eq!(ctx.len(), 0x44E6);
//! ```
//!
//! Every field is written little-endian at its packed (possibly unaligned) offset. Fields not
//! set stay zero. Index arguments are checked and out-of-range indices are errors.

use super::ctx_layout::*;
use crate::error::{Error, Result};
use crate::isa::ccop::{pack_cc_op, CcOpFields, SPAD_CTRL_ENTRY_SIZE};

/// The barrier structures are the wire codec's (`isa::barrier_cfg`,
/// docs/contract/carrier.md §3.2.5, §3.2.10): the context image and the device read the same bytes.
pub use crate::isa::barrier_cfg::{ApbBcast, BarrierStep, DeviceBarrier};

/// `ring_neighbor` (docs/contract/carrier.md §3.2.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RingNeighbor {
    /// SoC addresses; the first `fold_n` are live.
    pub net_idx_addrs: [u64; 3],
    /// Live count of `net_idx_addrs` (the dump clamps it to 3).
    pub fold_n: u8,
    /// 0 local/none, 1 peer-to-peer, 2 P2P pod.
    pub kind: u8,
}

/// One ring channel descriptor (docs/contract/carrier.md §3.2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RingChannel {
    /// Next neighbour.
    pub next_neigh: RingNeighbor,
    /// Previous neighbour.
    pub prev_neigh: RingNeighbor,
    /// Semaphore SoC addresses.
    pub recv_sema: u64,
    /// See `recv_sema`.
    pub send_sema: u64,
    /// See `recv_sema`.
    pub post_sema: u64,
    /// See `recv_sema`.
    pub dma_compl_sema: u64,
    /// Kangaring: this TOP_SP's semaphore.
    pub kring_mine: u64,
    /// Kangaring: the peers' semaphores.
    pub kring_peers: [u64; 3],
    /// Broadcast target.
    pub dma_apb_bcast: ApbBcast,
    /// Stored at +140 (the dump prints the array index instead).
    pub channel_id: u8,
    /// Slot scratchpad index.
    pub spad_slot_idx: u8,
    /// Channel-level fold count.
    pub fold_n: u8,
    /// Kangaring primary flag.
    pub kangaring_is_primary: u8,
    /// 0, 1 or 3.
    pub kangaring_num_peers: u8,
}

/// One mesh event (docs/contract/carrier.md §3.2.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MeshEvent {
    /// The two broadcast targets.
    pub dma_apb_bcast: [ApbBcast; 2],
    /// Direct-trigger semaphores.
    pub direct_trigger_sema: [u64; 3],
    /// Semaphore waited on.
    pub event_wait_sema: u64,
    /// Target value.
    pub wait_val: u32,
    /// Mesh event kind.
    pub event_type: u8,
    /// Flag.
    pub dma_trigger: u8,
    /// Flag.
    pub direct_trigger: u8,
    /// Flag.
    pub wait_event: u8,
}

/// `dev_configs` (docs/contract/carrier.md §3.2.12), `tsync` included.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DevConfigs {
    /// tsync.dma_apb_rsvd_addr.
    pub dma_apb_rsvd_addr: u64,
    /// tsync.eng_tpb.
    pub eng_tpb: u64,
    /// tsync.timestamp_local.
    pub timestamp_local: u64,
    /// tsync.timestamp_tpb.
    pub timestamp_tpb: u64,
    /// tsync.timestamp_tpb_val.
    pub timestamp_tpb_val: u32,
    /// Unaligned u64 at +0x24.
    pub tpb_ctrl_ack: u64,
    /// 4 bits.
    pub tpb_id: u8,
    /// 4 bits.
    pub seng_id: u8,
    /// 4 bits.
    pub dev_id: u8,
}

/// The runtime `basic_block_ctx` (docs/contract/carrier.md §3.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BasicBlockCtx {
    /// Slot scratchpad addresses.
    pub slot_spad_addr: [u64; 6],
    /// CTRL scratchpad address.
    pub ctrl_spad_addr: u64,
    /// Current block.
    pub curr_id: u32,
}

/// One runtime ring row (docs/contract/carrier.md §3.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RingRow {
    /// Receive count.
    pub recv_cnt: u16,
    /// Send credit.
    pub send_credit: u16,
    /// Repeat count.
    pub repeat_cnt: u16,
    /// M2S value.
    pub m2s_val: u16,
    /// S2M value.
    pub s2m_val: u16,
    /// Slot index.
    pub slot_idx: u8,
    /// Run state.
    pub run_state: u8,
}

/// The five sync semaphores of `neff_configs` (docs/contract/carrier.md §3.2.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NeffSemas {
    /// `trigger`.
    pub trigger: u64,
    /// `trigger_next`.
    pub trigger_next: u64,
    /// `complete`.
    pub complete: u64,
    /// `complete_prev`.
    pub complete_prev: u64,
    /// `tpb_stop_sema`.
    pub tpb_stop_sema: u64,
}

/// Builds one CC-context image (see the module doc).
#[derive(Debug, Clone)]
pub struct CcContextBuilder {
    arch: Arch,
    layout: CtxLayout,
    buf: Vec<u8>,
}

fn check_index(what: &str, i: usize, n: usize) -> Result<()> {
    if i < n {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "{what} index {i} is out of range (0..{n})"
        )))
    }
}

impl CcContextBuilder {
    /// A zeroed context of exactly the minimum size for `arch` (0x32C6 / 0x44E6 bytes).
    pub fn new(arch: Arch) -> Self {
        let layout = arch.layout();
        CcContextBuilder {
            arch,
            layout,
            buf: vec![0; layout.min_size],
        }
    }

    /// The arch this context is for.
    pub fn arch(&self) -> Arch {
        self.arch
    }

    /// The finished image.
    pub fn build(&self) -> Vec<u8> {
        self.buf.clone()
    }

    fn u8(&mut self, off: usize, v: u8) {
        self.buf[off] = v;
    }
    fn u16(&mut self, off: usize, v: u16) {
        self.buf[off..off + 2].copy_from_slice(&v.to_le_bytes());
    }
    fn u32(&mut self, off: usize, v: u32) {
        self.buf[off..off + 4].copy_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, off: usize, v: u64) {
        self.buf[off..off + 8].copy_from_slice(&v.to_le_bytes());
    }
    fn apb(&mut self, off: usize, a: &ApbBcast) {
        self.u64(off + apb_bcast::M2S_TAIL_PTR, a.m2s_tail_ptr);
        self.u64(off + apb_bcast::S2M_TAIL_PTR, a.s2m_tail_ptr);
        self.u32(off + apb_bcast::MASK, a.mask);
    }
    fn neighbor(&mut self, off: usize, n: &RingNeighbor) {
        for (i, a) in n.net_idx_addrs.iter().enumerate() {
            self.u64(off + ring_neighbor::NET_IDX_ADDRS + 8 * i, *a);
        }
        self.u8(off + ring_neighbor::FOLD_N, n.fold_n);
        self.u8(off + ring_neighbor::TYPE, n.kind);
    }
    fn nc(&self) -> usize {
        self.layout.neff_configs_off
    }

    /// Static ring channel `idx` (0..32).
    pub fn ring_channel(&mut self, idx: usize, c: &RingChannel) -> Result<&mut Self> {
        use ring_channel as r;
        check_index("ring channel", idx, RING_CHANNELS)?;
        let o = idx * r::SIZE;
        self.neighbor(o + r::NEXT_NEIGH, &c.next_neigh);
        self.neighbor(o + r::PREV_NEIGH, &c.prev_neigh);
        self.u64(o + r::RECV_SEMA, c.recv_sema);
        self.u64(o + r::SEND_SEMA, c.send_sema);
        self.u64(o + r::POST_SEMA, c.post_sema);
        self.u64(o + r::DMA_COMPL_SEMA, c.dma_compl_sema);
        self.u64(
            o + r::KRING_PEER_SEMAS + kring_peer_semas::MINE,
            c.kring_mine,
        );
        for (i, p) in c.kring_peers.iter().enumerate() {
            self.u64(
                o + r::KRING_PEER_SEMAS + kring_peer_semas::PEERS + 8 * i,
                *p,
            );
        }
        self.apb(o + r::DMA_APB_BCAST, &c.dma_apb_bcast);
        self.u8(o + r::CHANNEL_ID, c.channel_id);
        self.u8(o + r::SPAD_SLOT_IDX, c.spad_slot_idx);
        self.u8(o + r::FOLD_N, c.fold_n);
        self.u8(o + r::KANGARING_IS_PRIMARY, c.kangaring_is_primary);
        self.u8(o + r::KANGARING_NUM_PEERS, c.kangaring_num_peers);
        Ok(self)
    }

    /// Static mesh event `idx` (0..50 on v2, 0..108 otherwise).
    pub fn mesh_event(&mut self, idx: usize, e: &MeshEvent) -> Result<&mut Self> {
        use mesh_event as m;
        check_index("mesh event", idx, self.layout.mesh_events)?;
        let o = self.layout.mesh_off + idx * m::SIZE;
        self.apb(o + m::DMA_APB_BCAST[0], &e.dma_apb_bcast[0]);
        self.apb(o + m::DMA_APB_BCAST[1], &e.dma_apb_bcast[1]);
        for (i, s) in e.direct_trigger_sema.iter().enumerate() {
            self.u64(o + m::DIRECT_TRIGGER_SEMA + 8 * i, *s);
        }
        self.u64(o + m::EVENT_WAIT_SEMA, e.event_wait_sema);
        self.u32(o + m::WAIT_VAL, e.wait_val);
        self.u8(o + m::EVENT_TYPE, e.event_type);
        self.u8(o + m::DMA_TRIGGER, e.dma_trigger);
        self.u8(o + m::DIRECT_TRIGGER, e.direct_trigger);
        self.u8(o + m::WAIT_EVENT, e.wait_event);
        Ok(self)
    }

    /// The static hierarchical handle (an opaque u64).
    pub fn hierarchical(&mut self, handle: u64) -> &mut Self {
        let o = self.layout.hier_off;
        self.u64(o, handle);
        self
    }

    /// `dma_alloc_bitmap[idx]` (0..8) = `{queue_id, dma_engines_bitmap}`.
    pub fn dma_alloc_bitmap(
        &mut self,
        idx: usize,
        queue_id: u32,
        dma_engines_bitmap: u32,
    ) -> Result<&mut Self> {
        check_index("dma_alloc_bitmap", idx, neff_configs::DMA_ALLOC_ENTRIES)?;
        let o = self.nc() + neff_configs::DMA_ALLOC_BITMAP + 8 * idx;
        self.u32(o, queue_id);
        self.u32(o + 4, dma_engines_bitmap);
        Ok(self)
    }

    /// Raw bytes of the (undumped) `desc_count[]` region, from its start; at most 2080 bytes.
    pub fn desc_count_raw(&mut self, bytes: &[u8]) -> Result<&mut Self> {
        if bytes.len() > neff_configs::DESC_COUNT_SIZE {
            return Err(Error::invalid(format!(
                "desc_count region is {} bytes, got {}",
                neff_configs::DESC_COUNT_SIZE,
                bytes.len()
            )));
        }
        let o = self.nc() + neff_configs::DESC_COUNT;
        self.buf[o..o + bytes.len()].copy_from_slice(bytes);
        Ok(self)
    }

    /// `slot_spad_base[idx]` (0..6).
    pub fn slot_spad_base(&mut self, idx: usize, addr: u64) -> Result<&mut Self> {
        check_index("slot_spad_base", idx, neff_configs::SLOT_SPADS)?;
        let o = self.nc() + neff_configs::SLOT_SPAD_BASE + 8 * idx;
        self.u64(o, addr);
        Ok(self)
    }

    /// `ctrl_spad_base` (base of the cc_op table).
    pub fn ctrl_spad_base(&mut self, addr: u64) -> &mut Self {
        let o = self.nc() + neff_configs::CTRL_SPAD_BASE;
        self.u64(o, addr);
        self
    }

    /// Write the host view of the barrier union (overwrites the first 16 bytes of the device view).
    pub fn host_barrier(&mut self, barrier_start: u64, barrier_done: u64) -> &mut Self {
        let o = self.nc() + neff_configs::BARRIER_CONFIGS;
        self.u64(o + barrier_configs::HOST_BARRIER_START, barrier_start);
        self.u64(o + barrier_configs::HOST_BARRIER_DONE, barrier_done);
        self
    }

    /// Write the device view of the barrier union (all 292 bytes).
    pub fn device_barrier(&mut self, d: &DeviceBarrier) -> &mut Self {
        use device_barrier as db;
        let o = self.nc() + neff_configs::BARRIER_CONFIGS + barrier_configs::UNION;
        for (s, step) in d.steps.iter().enumerate() {
            let so = o + db::STEPS + s * barrier_step::SIZE;
            self.u16(so + barrier_step::M2S_VAL, step.m2s_val);
            self.u16(so + barrier_step::S2M_VAL, step.s2m_val);
            for i in 0..barrier_step::SEMAS {
                self.u64(
                    so + barrier_step::BARRIER_SEMA + 8 * i,
                    step.barrier_sema[i],
                );
                self.u32(
                    so + barrier_step::TARGET_SEMA_VAL + 4 * i,
                    step.target_sema_val[i],
                );
            }
        }
        for (i, s) in d.dma_sync_sema.iter().enumerate() {
            self.u64(o + db::DMA_SYNC_SEMA + 8 * i, *s);
        }
        self.apb(o + db::DMA_APB_BCAST, &d.dma_apb_bcast);
        self.u64(o + db::START_NETWORK_PROXY, d.start_network_proxy);
        self.u32(o + db::DMA_SYNC_SEMA_VALUE, d.dma_sync_sema_value);
        self.u32(o + db::TDRBP_LOW, d.tdrbp_low);
        self.u32(o + db::TDRBP_HIGH, d.tdrbp_high);
        self.u32(o + db::DESC_COUNT, d.desc_count);
        self.u32(o + db::TOTAL_DESC_N, d.total_desc_n);
        self.u16(o + db::DMA_ENGINES_BITMAP, d.dma_engines_bitmap);
        self.u8(o + db::QUEUE_ID, d.queue_id);
        self
    }

    /// The gate bit `execute_device_barrier` (bit 0 of +0x124; the reserved bits are kept).
    pub fn execute_device_barrier(&mut self, on: bool) -> &mut Self {
        let o = self.nc() + neff_configs::BARRIER_CONFIGS + barrier_configs::GATE;
        self.buf[o] = (self.buf[o] & !1) | u8::from(on);
        self
    }

    /// Basic-block table entry `idx` (0..256). The dump stops at the first zero `desc_count`.
    pub fn basic_block(
        &mut self,
        idx: usize,
        desc_count: u16,
        reset_section_desc_count: u8,
        kind: u8,
    ) -> Result<&mut Self> {
        use basic_block_configs as bb;
        check_index("basic block", idx, bb::TABLE_ENTRIES)?;
        let o = self.nc() + neff_configs::BASIC_BLOCK_CONFIGS + bb::TABLE + bb::ENTRY_SIZE * idx;
        self.u16(o + bb::ENTRY_DESC_COUNT, desc_count);
        self.u8(
            o + bb::ENTRY_RESET_SECTION_DESC_COUNT,
            reset_section_desc_count,
        );
        self.u8(o + bb::ENTRY_TYPE, kind);
        Ok(self)
    }

    /// `basic_block_configs` scalars: the switch semaphore and the prefetch ring.
    pub fn basic_block_switch(
        &mut self,
        switch_completed: u64,
        pring_base_addr: u64,
        pring_total_desc_num: u32,
    ) -> &mut Self {
        use basic_block_configs as bb;
        let o = self.nc() + neff_configs::BASIC_BLOCK_CONFIGS;
        self.u64(o + bb::SWITCH_COMPLETED, switch_completed);
        self.u64(o + bb::PRING_BASE_ADDR, pring_base_addr);
        self.u32(o + bb::PRING_TOTAL_DESC_NUM, pring_total_desc_num);
        self
    }

    /// The trigger / complete semaphores of `neff_configs`.
    pub fn neff_semas(&mut self, s: &NeffSemas) -> &mut Self {
        let o = self.nc();
        self.u64(o + neff_configs::TRIGGER, s.trigger);
        self.u64(o + neff_configs::TRIGGER_NEXT, s.trigger_next);
        self.u64(o + neff_configs::COMPLETE, s.complete);
        self.u64(o + neff_configs::COMPLETE_PREV, s.complete_prev);
        self.u64(o + neff_configs::TPB_STOP_SEMA, s.tpb_stop_sema);
        self
    }

    /// Number of cc_op entries.
    pub fn op_num(&mut self, n: u32) -> &mut Self {
        let o = self.nc() + neff_configs::OP_NUM;
        self.u32(o, n);
        self
    }

    /// `function_n` (not dumped) and `tpb_compl_addr_num`.
    pub fn function_n(&mut self, function_n: u16, tpb_compl_addr_num: u8) -> &mut Self {
        let o = self.nc();
        self.u16(o + neff_configs::FUNCTION_N, function_n);
        self.u8(o + neff_configs::TPB_COMPL_ADDR_NUM, tpb_compl_addr_num);
        self
    }

    fn flag(&mut self, bit: u8, on: bool) -> &mut Self {
        let o = self.nc() + neff_configs::FLAGS;
        self.buf[o] = (self.buf[o] & !(1 << bit)) | (u8::from(on) << bit);
        self
    }
    /// Flag bit 0: this TOP_SP leads.
    pub fn leader(&mut self, on: bool) -> &mut Self {
        self.flag(0, on)
    }
    /// Flag bit 1 (not dumped).
    pub fn dbg_cc_nop(&mut self, on: bool) -> &mut Self {
        self.flag(1, on)
    }
    /// Flag bit 2 (not dumped).
    pub fn host_cc(&mut self, on: bool) -> &mut Self {
        self.flag(2, on)
    }

    /// `dev_configs`. The nibble fields must fit in 4 bits.
    pub fn dev_configs(&mut self, d: &DevConfigs) -> Result<&mut Self> {
        use dev_configs as dc;
        for (name, v) in [
            ("tpb_id", d.tpb_id),
            ("seng_id", d.seng_id),
            ("dev_id", d.dev_id),
        ] {
            if v > 0xF {
                return Err(Error::invalid(format!(
                    "dev_configs.{name} = {v} does not fit in 4 bits"
                ))
                .with_field(format!("dev_configs.{name}"))
                .with_values("0..=15", v));
            }
        }
        let o = self.layout.dev_configs_off;
        self.u64(o + dc::TSYNC_DMA_APB_RSVD_ADDR, d.dma_apb_rsvd_addr);
        self.u64(o + dc::TSYNC_ENG_TPB, d.eng_tpb);
        self.u64(o + dc::TSYNC_TIMESTAMP_LOCAL, d.timestamp_local);
        self.u64(o + dc::TSYNC_TIMESTAMP_TPB, d.timestamp_tpb);
        self.u32(o + dc::TSYNC_TIMESTAMP_TPB_VAL, d.timestamp_tpb_val);
        self.u64(o + dc::TPB_CTRL_ACK, d.tpb_ctrl_ack);
        self.u8(o + dc::TPB_SENG, d.tpb_id | (d.seng_id << 4));
        let keep = self.buf[o + dc::DEV] & 0xF0;
        self.u8(o + dc::DEV, keep | d.dev_id);
        Ok(self)
    }

    /// The runtime op's raw 8-byte `spad_ctrl_entry`.
    pub fn runtime_ctrl_entry(&mut self, slot: [u8; SPAD_CTRL_ENTRY_SIZE]) -> &mut Self {
        let o = self.layout.neff_off + runtime_neff::OP_CTRL_ENTRY;
        self.buf[o..o + SPAD_CTRL_ENTRY_SIZE].copy_from_slice(&slot);
        self
    }

    /// Pack a cc_op into the runtime op's slot with the vendor packer rules
    /// ([`pack_cc_op`]); `channel_id` is the channel the entry is built for.
    pub fn runtime_cc_op(&mut self, f: &CcOpFields, channel_id: u32) -> Result<&mut Self> {
        let o = self.layout.neff_off + runtime_neff::OP_CTRL_ENTRY;
        let mut old = [0u8; SPAD_CTRL_ENTRY_SIZE];
        old.copy_from_slice(&self.buf[o..o + SPAD_CTRL_ENTRY_SIZE]);
        let slot = pack_cc_op(old, f, channel_id)?;
        Ok(self.runtime_ctrl_entry(slot))
    }

    /// The runtime op's other fields: `tpb_compl[2]`, `id`, `reporter`.
    pub fn runtime_op(&mut self, tpb_compl: [u64; 2], id: u32, reporter: u8) -> &mut Self {
        let o = self.layout.neff_off;
        for (i, a) in tpb_compl.iter().enumerate() {
            self.u64(o + runtime_neff::OP_TPB_COMPL + 8 * i, *a);
        }
        self.u32(o + runtime_neff::OP_ID, id);
        self.u8(o + runtime_neff::OP_REPORTER, reporter);
        self
    }

    /// The runtime `basic_block_ctx`.
    pub fn runtime_basic_block(&mut self, b: &BasicBlockCtx) -> &mut Self {
        let o = self.layout.neff_off;
        for (i, a) in b.slot_spad_addr.iter().enumerate() {
            self.u64(o + runtime_neff::BB_SLOT_SPAD_ADDR + 8 * i, *a);
        }
        self.u64(o + runtime_neff::BB_CTRL_SPAD_ADDR, b.ctrl_spad_addr);
        self.u32(o + runtime_neff::BB_CURR_ID, b.curr_id);
        self
    }

    /// The runtime `barrier_completed` byte.
    pub fn barrier_completed(&mut self, v: u8) -> &mut Self {
        let o = self.layout.neff_off + runtime_neff::BARRIER_COMPLETED;
        self.u8(o, v);
        self
    }

    /// Runtime ring row `idx` (0..32).
    pub fn runtime_ring_row(&mut self, idx: usize, r: &RingRow) -> Result<&mut Self> {
        use runtime_algo as ra;
        check_index("runtime ring row", idx, RING_CHANNELS)?;
        let o = self.layout.algo_off + ra::RING + idx * ra::ROW_SIZE;
        self.u16(o + ra::ROW_RECV_CNT, r.recv_cnt);
        self.u16(o + ra::ROW_SEND_CREDIT, r.send_credit);
        self.u16(o + ra::ROW_REPEAT_CNT, r.repeat_cnt);
        self.u16(o + ra::ROW_M2S_VAL, r.m2s_val);
        self.u16(o + ra::ROW_S2M_VAL, r.s2m_val);
        self.u8(o + ra::ROW_SLOT_IDX, r.slot_idx);
        self.u8(o + ra::ROW_RUN_STATE, r.run_state);
        Ok(self)
    }

    /// The runtime hierarchical `run_state`.
    pub fn runtime_hier_run_state(&mut self, v: u8) -> &mut Self {
        let o = self.layout.algo_off + runtime_algo::HIER_RUN_STATE;
        self.u8(o, v);
        self
    }

    /// The runtime mesh `event_index`.
    pub fn runtime_mesh_event_index(&mut self, v: u16) -> &mut Self {
        let o = self.layout.algo_off + runtime_algo::MESH_EVENT_INDEX;
        self.u16(o, v);
        self
    }
}

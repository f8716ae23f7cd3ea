//! The 0x128-byte `neff_barrier_config` (`barrier_configs` of `neff_configs`): encode, decode and
//! the barrier step enums (docs/contract/carrier.md §3.2.8–§3.2.10, §3.2.5;
//! docs/contract/device.md §7; docs/contract/lowering.md §2.9).
//!
//! Layout (offsets from the container; every field little-endian, packed, u64s unaligned as
//! docs/contract/carrier.md §5 item 17 says):
//!
//! | off | size | field |
//! |---|---|---|
//! | 0x000 | 0x124 | union { `host_barrier` 16 B ; `device_barrier` 292 B } (§3.2.8, Q-C) |
//! | 0x124 | 1 | bit 0 `execute_device_barrier` (which view is live); bits 1–7 reserved |
//! | 0x125 | 3 | reserved |
//!
//! `device_barrier` (§3.2.10): `barrier_step_config[4]` (52 B each: `m2s_val` u16 @0, `s2m_val`
//! u16 @2, `barrier_sema[4]` u64 @4, `target_sema_val[4]` u32 @0x24) @0x000, `dma_sync_sema[4]`
//! u64 @0x0D0, `dma_apb_bcast` (20 B: `m2s_tail_ptr` u64, `s2m_tail_ptr` u64, `mask` u32, §3.2.5)
//! @0x0F0, `start_network_proxy` u64 @0x104, `dma_sync_sema_value` u32 @0x10C, `tdrbp_low`/`high`
//! u32 @0x110/0x114, `desc_count` u32 @0x118, `total_desc_n` u32 @0x11C, `dma_engines_bitmap` u16
//! @0x120, `queue_id` u8 @0x122, reserved u8 @0x123. `host_barrier` (§3.2.9): `barrier_start` u64
//! @0, `barrier_done` u64 @8 — the same bytes as step 0's `m2s_val`, `s2m_val` and
//! `barrier_sema[0]` (docs/contract/device.md §7.1).
//!
//! The offsets are in [`layout`] (the carrier's `ctx_log` walks the same ones); this codec
//! reuses them rather than restating them.
//!
//! Choices where the spec is silent:
//! * **Inactive step slot** = `barrier_sema[k] == 0` and `target_sema_val[k] == 0` (0 is never an
//!   EVT_SEM address). The firmware's own step program pads unused entries with
//!   (type [`BarrierType::Max`], op [`BarrierOp::Max`]) (docs/contract/carrier.md Appendix A); that table is
//!   compile-time firmware data, given here by [`StepShape::program`], not part of these bytes.
//! * **Union bytes outside the live view**: [`BarrierConfig::encode`] writes zeros there;
//!   [`BarrierConfig::decode`] ignores them (the other view is not meaningful, Q-C). Both views can
//!   still be read from any bytes with [`HostBarrier::decode`] / [`DeviceBarrier::decode`], as
//!   ctx_log dumps both.
//! * **Reserved bits** (gate bits 1–7, 0x123, 0x125..0x128) are written 0 and ignored on decode:
//!   docs/contract/carrier.md Q-C (3) says only bit 0 matters.

pub mod layout;

use crate::error::{Error, Result};
use layout::{apb_bcast, barrier_configs, barrier_step, device_barrier as db};

/// Bytes of the whole `neff_barrier_config` (docs/contract/carrier.md §3.2.8).
pub const BARRIER_CONFIG_BYTES: usize = barrier_configs::SIZE;
/// Bytes of the `device_barrier` view (docs/contract/carrier.md §3.2.10).
pub const DEVICE_BARRIER_BYTES: usize = db::SIZE;
/// Bytes of the `host_barrier` view (docs/contract/carrier.md §3.2.9).
pub const HOST_BARRIER_BYTES: usize = 16;
/// Steps of the device barrier.
pub const BARRIER_STEPS: usize = db::STEP_COUNT;
/// Semaphore slots per step.
pub const STEP_SLOTS: usize = barrier_step::SEMAS;

/// `barrier_type_t` (docs/contract/lowering.md §2.9, docs/contract/carrier.md Appendix A): what a
/// step entry talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum BarrierType {
    /// Local arrive / release on one chip.
    IntraChip = 0,
    /// Between leaders of an UltraServer pod.
    IntraPod = 1,
    /// Between chip leaders.
    InterChip = 2,
    /// Ring neighbour, local side.
    InterChipRingLocal = 3,
    /// Ring neighbour, remote side.
    InterChipRingRemote = 4,
    /// Switch fabric, inside a rack.
    IntraRack = 5,
    /// Switch fabric, across racks.
    InterRack = 6,
    /// The pad value of an unused entry.
    Max = 7,
}

/// `barrier_operation_t` (docs/contract/lowering.md §2.9): ENTRY increments, EXIT waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum BarrierOp {
    /// A semaphore increment of a peer's `barrier_sema[k]` (docs/contract/device.md §7.1).
    Entry = 0,
    /// `wait_ge_and_dec` on an own semaphore until `target_sema_val[k]`
    /// (docs/contract/device.md §7.1).
    Exit = 1,
    /// The pad value of an unused entry.
    Max = 2,
}

/// One entry of the firmware's barrier step program: `(barrier_type, operation)`.
pub type StepEntry = (BarrierType, BarrierOp);

/// `barrier_step_sizes`: how many entries each of the 4 steps has (docs/contract/device.md §7.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StepShape(pub [u8; BARRIER_STEPS]);

impl StepShape {
    /// `{1, 4, 4, 1}`: the shape on chip-to-chip and pod fabrics.
    pub const STANDARD: StepShape = StepShape([1, 4, 4, 1]);
    /// `{1, 2, 2, 1}`: the shape on a switch fabric.
    pub const SWITCH: StepShape = StepShape([1, 2, 2, 1]);

    /// Active entries of step `s`.
    pub fn slots(self, s: usize) -> usize {
        usize::from(self.0[s])
    }

    /// The firmware step program of this shape (docs/contract/device.md §7.1 table;
    /// docs/contract/carrier.md Appendix A): step 0 (INTRA_CHIP, ENTRY), steps 1–2 (`peer_type`,
    /// ENTRY then EXIT), step 3 (INTRA_CHIP, EXIT); entries beyond the shape padded with (MAX 7,
    /// MAX 2).
    pub fn program(self, peer_type: BarrierType) -> [[StepEntry; STEP_SLOTS]; BARRIER_STEPS] {
        let kinds = [
            (BarrierType::IntraChip, BarrierOp::Entry),
            (peer_type, BarrierOp::Entry),
            (peer_type, BarrierOp::Exit),
            (BarrierType::IntraChip, BarrierOp::Exit),
        ];
        let mut p = [[(BarrierType::Max, BarrierOp::Max); STEP_SLOTS]; BARRIER_STEPS];
        for (s, row) in p.iter_mut().enumerate() {
            for e in row.iter_mut().take(self.slots(s)) {
                *e = kinds[s];
            }
        }
        p
    }
}

/// `dma_apb_bcast` (docs/contract/carrier.md §3.2.5): addresses of the broadcast tail-increment
/// registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ApbBcast {
    /// SoC address of the M2S broadcast tail-increment register.
    pub m2s_tail_ptr: u64,
    /// SoC address of the S2M register.
    pub s2m_tail_ptr: u64,
    /// Engine mask.
    pub mask: u32,
}

/// One `barrier_step_config` (52 bytes, docs/contract/carrier.md §3.2.10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BarrierStep {
    /// Tail increment (M2S) to apply.
    pub m2s_val: u16,
    /// Tail increment (S2M).
    pub s2m_val: u16,
    /// READ-window SoC addresses of semaphores (docs/contract/device.md §9.2); 0 = inactive slot.
    pub barrier_sema: [u64; STEP_SLOTS],
    /// Targets.
    pub target_sema_val: [u32; STEP_SLOTS],
}

impl BarrierStep {
    /// The active slots `(k, address, target)` in slot order.
    pub fn active(&self) -> impl Iterator<Item = (usize, u64, u32)> + '_ {
        (0..STEP_SLOTS)
            .filter(|&k| self.barrier_sema[k] != 0 || self.target_sema_val[k] != 0)
            .map(|k| (k, self.barrier_sema[k], self.target_sema_val[k]))
    }
}

/// The `device_barrier` view (292 bytes, docs/contract/carrier.md §3.2.10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DeviceBarrier {
    /// The four steps.
    pub steps: [BarrierStep; BARRIER_STEPS],
    /// DMA sync semaphores (u64 SoC addresses).
    pub dma_sync_sema: [u64; 4],
    /// Broadcast tail-increment registers.
    pub dma_apb_bcast: ApbBcast,
    /// Network proxy start address.
    pub start_network_proxy: u64,
    /// DMA sync target.
    pub dma_sync_sema_value: u32,
    /// Descriptor ring base, low half.
    pub tdrbp_low: u32,
    /// Descriptor ring base, high half.
    pub tdrbp_high: u32,
    /// Descriptors.
    pub desc_count: u32,
    /// Total descriptors (not dumped by ctx_log).
    pub total_desc_n: u32,
    /// DMA engines.
    pub dma_engines_bitmap: u16,
    /// Queue.
    pub queue_id: u8,
}

/// The `host_barrier` view (16 bytes, docs/contract/carrier.md §3.2.9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HostBarrier {
    /// READ-window SoC address of the semaphore the host arms (0: this TOP_SP is not armed).
    pub barrier_start: u64,
    /// READ-window SoC address of the semaphore the leader increments when the device is done.
    pub barrier_done: u64,
}

/// The live view of a `neff_barrier_config`.
///
/// The size difference of the variants mirrors the wire union (16 vs 292 bytes); configs are
/// built once per TOP_SP and copied rarely, so the value stays unboxed (and `Copy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(clippy::large_enum_variant)]
pub enum BarrierConfig {
    /// `execute_device_barrier = 0`: the host barrier.
    Host(HostBarrier),
    /// `execute_device_barrier = 1`: the device barrier.
    Device(DeviceBarrier),
}

fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}
fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().expect("4 bytes"))
}
fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes"))
}
fn put(b: &mut [u8], o: usize, v: &[u8]) {
    b[o..o + v.len()].copy_from_slice(v);
}

fn need(b: &[u8], n: usize, what: &str) -> Result<()> {
    if b.len() < n {
        return Err(Error::invalid(format!(
            "{what}: {} bytes, need {n} (docs/contract/carrier.md §3.2.8-§3.2.10)",
            b.len()
        ))
        .with_field(what)
        .with_values(n, b.len()));
    }
    Ok(())
}

impl HostBarrier {
    /// Write the 16 bytes at the start of `b` (docs/contract/carrier.md §3.2.9).
    pub fn encode_into(&self, b: &mut [u8]) {
        put(
            b,
            barrier_configs::HOST_BARRIER_START,
            &self.barrier_start.to_le_bytes(),
        );
        put(
            b,
            barrier_configs::HOST_BARRIER_DONE,
            &self.barrier_done.to_le_bytes(),
        );
    }
    /// Read the view from the start of `b`.
    pub fn decode(b: &[u8]) -> Result<HostBarrier> {
        need(b, HOST_BARRIER_BYTES, "host_barrier")?;
        Ok(HostBarrier {
            barrier_start: u64_at(b, barrier_configs::HOST_BARRIER_START),
            barrier_done: u64_at(b, barrier_configs::HOST_BARRIER_DONE),
        })
    }
}

impl DeviceBarrier {
    /// Write the 292 bytes at the start of `b` (docs/contract/carrier.md §3.2.10); byte 0x123 is
    /// written 0.
    pub fn encode_into(&self, b: &mut [u8]) {
        for (s, st) in self.steps.iter().enumerate() {
            let o = db::STEPS + s * barrier_step::SIZE;
            put(b, o + barrier_step::M2S_VAL, &st.m2s_val.to_le_bytes());
            put(b, o + barrier_step::S2M_VAL, &st.s2m_val.to_le_bytes());
            for k in 0..STEP_SLOTS {
                let a = st.barrier_sema[k].to_le_bytes();
                put(b, o + barrier_step::BARRIER_SEMA + 8 * k, &a);
                let t = st.target_sema_val[k].to_le_bytes();
                put(b, o + barrier_step::TARGET_SEMA_VAL + 4 * k, &t);
            }
        }
        for (k, a) in self.dma_sync_sema.iter().enumerate() {
            put(b, db::DMA_SYNC_SEMA + 8 * k, &a.to_le_bytes());
        }
        let bc = &self.dma_apb_bcast;
        put(
            b,
            db::DMA_APB_BCAST + apb_bcast::M2S_TAIL_PTR,
            &bc.m2s_tail_ptr.to_le_bytes(),
        );
        put(
            b,
            db::DMA_APB_BCAST + apb_bcast::S2M_TAIL_PTR,
            &bc.s2m_tail_ptr.to_le_bytes(),
        );
        put(
            b,
            db::DMA_APB_BCAST + apb_bcast::MASK,
            &bc.mask.to_le_bytes(),
        );
        put(
            b,
            db::START_NETWORK_PROXY,
            &self.start_network_proxy.to_le_bytes(),
        );
        put(
            b,
            db::DMA_SYNC_SEMA_VALUE,
            &self.dma_sync_sema_value.to_le_bytes(),
        );
        put(b, db::TDRBP_LOW, &self.tdrbp_low.to_le_bytes());
        put(b, db::TDRBP_HIGH, &self.tdrbp_high.to_le_bytes());
        put(b, db::DESC_COUNT, &self.desc_count.to_le_bytes());
        put(b, db::TOTAL_DESC_N, &self.total_desc_n.to_le_bytes());
        put(
            b,
            db::DMA_ENGINES_BITMAP,
            &self.dma_engines_bitmap.to_le_bytes(),
        );
        b[db::QUEUE_ID] = self.queue_id;
        b[db::QUEUE_ID + 1] = 0;
    }

    /// Read the view from the start of `b`.
    pub fn decode(b: &[u8]) -> Result<DeviceBarrier> {
        need(b, DEVICE_BARRIER_BYTES, "device_barrier")?;
        let mut d = DeviceBarrier::default();
        for (s, st) in d.steps.iter_mut().enumerate() {
            let o = db::STEPS + s * barrier_step::SIZE;
            st.m2s_val = u16_at(b, o + barrier_step::M2S_VAL);
            st.s2m_val = u16_at(b, o + barrier_step::S2M_VAL);
            for k in 0..STEP_SLOTS {
                st.barrier_sema[k] = u64_at(b, o + barrier_step::BARRIER_SEMA + 8 * k);
                st.target_sema_val[k] = u32_at(b, o + barrier_step::TARGET_SEMA_VAL + 4 * k);
            }
        }
        for (k, a) in d.dma_sync_sema.iter_mut().enumerate() {
            *a = u64_at(b, db::DMA_SYNC_SEMA + 8 * k);
        }
        d.dma_apb_bcast = ApbBcast {
            m2s_tail_ptr: u64_at(b, db::DMA_APB_BCAST + apb_bcast::M2S_TAIL_PTR),
            s2m_tail_ptr: u64_at(b, db::DMA_APB_BCAST + apb_bcast::S2M_TAIL_PTR),
            mask: u32_at(b, db::DMA_APB_BCAST + apb_bcast::MASK),
        };
        d.start_network_proxy = u64_at(b, db::START_NETWORK_PROXY);
        d.dma_sync_sema_value = u32_at(b, db::DMA_SYNC_SEMA_VALUE);
        d.tdrbp_low = u32_at(b, db::TDRBP_LOW);
        d.tdrbp_high = u32_at(b, db::TDRBP_HIGH);
        d.desc_count = u32_at(b, db::DESC_COUNT);
        d.total_desc_n = u32_at(b, db::TOTAL_DESC_N);
        d.dma_engines_bitmap = u16_at(b, db::DMA_ENGINES_BITMAP);
        d.queue_id = b[db::QUEUE_ID];
        Ok(d)
    }
}

impl BarrierConfig {
    /// The `execute_device_barrier` bit this view implies.
    pub fn execute_device_barrier(&self) -> bool {
        matches!(self, BarrierConfig::Device(_))
    }

    /// The 0x128 bytes: the live view at 0, the gate bit at 0x124, zeros elsewhere.
    pub fn encode(&self) -> [u8; BARRIER_CONFIG_BYTES] {
        let mut b = [0u8; BARRIER_CONFIG_BYTES];
        match self {
            BarrierConfig::Host(h) => h.encode_into(&mut b[barrier_configs::UNION..]),
            BarrierConfig::Device(d) => d.encode_into(&mut b[barrier_configs::UNION..]),
        }
        b[barrier_configs::GATE] = u8::from(self.execute_device_barrier());
        b
    }

    /// Decode the live view selected by bit 0 of byte 0x124 (`b` must hold 0x128 bytes).
    pub fn decode(b: &[u8]) -> Result<BarrierConfig> {
        need(b, BARRIER_CONFIG_BYTES, "neff_barrier_config")?;
        let u = &b[barrier_configs::UNION..];
        Ok(if b[barrier_configs::GATE] & 1 == 1 {
            BarrierConfig::Device(DeviceBarrier::decode(u)?)
        } else {
            BarrierConfig::Host(HostBarrier::decode(u)?)
        })
    }
}

#[cfg(test)]
mod tests;

//! A sample CC context in which every field has a distinctive value, built with
//! [`CcContextBuilder`]. `opennrt ctx-log` dumps it when no context file is given, and the
//! writer's golden tests check the dump against these values.
//!
//! Address fields get [`sample_addr`]`(region, index, field offset)`, so every address in the
//! dump says where it came from: `0x8RRR_IIII_00FF_FFFF`-style values, e.g. ring channel 3's
//! `recv_sema` is `sample_addr(1, 3, 0x38)` = `0x8001000300000038`.

use super::ctx_builder::*;
use super::ctx_layout::Arch;
use crate::isa::ccop::{CcOpFields, CcOpOperands, DevicePattern, MeshSubType};

/// Region numbers used in [`sample_addr`].
pub mod region {
    /// Static ring channels.
    pub const RING: u16 = 1;
    /// Static mesh events.
    pub const MESH: u16 = 2;
    /// `neff_configs`.
    pub const NEFF: u16 = 3;
    /// Barrier configs.
    pub const BARRIER: u16 = 4;
    /// `dev_configs`.
    pub const DEV: u16 = 5;
    /// Runtime NEFF context.
    pub const RUNTIME: u16 = 6;
}

/// `0x8000_0000_0000_0000 | region << 48 | index << 32 | field`.
pub const fn sample_addr(region: u16, index: u16, field: u32) -> u64 {
    0x8000_0000_0000_0000 | ((region as u64) << 48) | ((index as u64) << 32) | field as u64
}

/// Neighbour `fold_n` of ring channel `c` (0..=4, so clamping to 3 is exercised).
pub const fn sample_next_fold_n(c: usize) -> u8 {
    (c % 5) as u8
}

/// Number of non-zero basic-block table entries in the sample.
pub const SAMPLE_BASIC_BLOCKS: usize = 5;

/// The sample cc_op packed into the runtime op slot: a mesh op (so the two union views differ
/// visibly), with the hidden `safe_mode` bit set.
pub const SAMPLE_CC_OP: CcOpFields = CcOpFields {
    algo_type: DevicePattern::Mesh as u8,
    algo_sub_type: MeshSubType::Switch as u8,
    trigger_next: true,
    reporter: true,
    ring_wait_complete: false,
    ring_send_complete: true,
    safe_mode: true,
    unique_tensors: false,
    operands: CcOpOperands::Mesh {
        sema_shift_offset: 0x1234,
        sema_mask: 0xBEEF,
    },
};

/// A context for `arch` with distinctive values in every field (see the module doc).
pub fn sample_context(arch: Arch) -> Vec<u8> {
    let mut b = CcContextBuilder::new(arch);
    fill(&mut b).expect("sample indices are in range");
    b.build()
}

fn fill(b: &mut CcContextBuilder) -> crate::Result<()> {
    use region::*;
    let a = sample_addr;
    for c in 0..32usize {
        let ci = c as u16;
        let neigh = |base: u32, fold_n: u8, kind: u8| RingNeighbor {
            net_idx_addrs: [
                a(RING, ci, base),
                a(RING, ci, base + 8),
                a(RING, ci, base + 16),
            ],
            fold_n,
            kind,
        };
        b.ring_channel(
            c,
            &RingChannel {
                next_neigh: neigh(0x00, sample_next_fold_n(c), (c % 3) as u8),
                prev_neigh: neigh(0x1C, 1, 2),
                recv_sema: a(RING, ci, 0x38),
                send_sema: a(RING, ci, 0x40),
                post_sema: a(RING, ci, 0x48),
                dma_compl_sema: a(RING, ci, 0x50),
                kring_mine: a(RING, ci, 0x58),
                kring_peers: [a(RING, ci, 0x60), a(RING, ci, 0x68), a(RING, ci, 0x70)],
                dma_apb_bcast: ApbBcast {
                    m2s_tail_ptr: a(RING, ci, 0x78),
                    s2m_tail_ptr: a(RING, ci, 0x80),
                    mask: 0x1000 + c as u32,
                },
                channel_id: 0xEE, // never dumped: the dump prints the index
                spad_slot_idx: 100 + c as u8,
                fold_n: 1 + (c % 3) as u8,
                kangaring_is_primary: (c % 2) as u8,
                kangaring_num_peers: [0, 1, 3][c % 3],
            },
        )?;
    }
    for e in 0..b.arch().mesh_events() {
        let ei = e as u16;
        let apb = |o: u32| ApbBcast {
            m2s_tail_ptr: a(MESH, ei, o),
            s2m_tail_ptr: a(MESH, ei, o + 8),
            mask: 0x2000 + (e as u32) * 2 + o / 0x14,
        };
        b.mesh_event(
            e,
            &MeshEvent {
                dma_apb_bcast: [apb(0x00), apb(0x14)],
                direct_trigger_sema: [a(MESH, ei, 0x28), a(MESH, ei, 0x30), a(MESH, ei, 0x38)],
                event_wait_sema: a(MESH, ei, 0x40),
                wait_val: 5000 + e as u32,
                event_type: (e % 7) as u8,
                dma_trigger: (e % 2) as u8,
                direct_trigger: ((e + 1) % 2) as u8,
                wait_event: 1,
            },
        )?;
    }
    b.hierarchical(0x0123_4567_89AB_CDEF);
    for i in 0..8 {
        b.dma_alloc_bitmap(i, 100 + i as u32, 0x10000 << i)?;
    }
    b.desc_count_raw(&[0xDD; 16])?; // hidden
    for i in 0..6 {
        b.slot_spad_base(i, a(NEFF, i as u16, 0x860))?;
    }
    b.ctrl_spad_base(a(NEFF, 0, 0x890));
    let step = |s: u16| BarrierStep {
        m2s_val: 10 + s,
        s2m_val: 20 + s,
        barrier_sema: [0, 1, 2, 3].map(|i| a(BARRIER, s, 0x100 + i)),
        target_sema_val: [0, 1, 2, 3].map(|i| 40 * (u32::from(s) + 1) + i),
    };
    b.device_barrier(&DeviceBarrier {
        steps: [step(0), step(1), step(2), step(3)],
        dma_sync_sema: [0, 1, 2, 3].map(|i| a(BARRIER, 9, 0xD0 + 8 * i)),
        dma_apb_bcast: ApbBcast {
            m2s_tail_ptr: a(BARRIER, 9, 0xF0),
            s2m_tail_ptr: a(BARRIER, 9, 0xF8),
            mask: 0xF0F0,
        },
        start_network_proxy: a(BARRIER, 9, 0x104),
        dma_sync_sema_value: 777,
        tdrbp_low: 0x89AB_CDEF,
        tdrbp_high: 0x42,
        desc_count: 96,
        total_desc_n: 0xDEAD, // hidden
        dma_engines_bitmap: 0xA5A5,
        queue_id: 7,
    });
    // The host view overlays the first 16 bytes of the device view (a union).
    b.host_barrier(a(BARRIER, 0xB, 0x0), a(BARRIER, 0xB, 0x8));
    b.execute_device_barrier(true);
    for i in 0..SAMPLE_BASIC_BLOCKS {
        b.basic_block(i, 300 + i as u16, 10 + i as u8, 0xAB)?;
    }
    // Entry after the terminator: must not be dumped.
    b.basic_block(SAMPLE_BASIC_BLOCKS + 1, 999, 99, 0)?;
    b.basic_block_switch(a(NEFF, 0, 0xDC0), 0xFEED_FACE_CAFE_BEEF, 4096);
    b.neff_semas(&NeffSemas {
        trigger: a(NEFF, 0, 0xDD8),
        trigger_next: a(NEFF, 0, 0xDE0),
        complete: a(NEFF, 0, 0xDE8),
        complete_prev: a(NEFF, 0, 0xDF0),
        tpb_stop_sema: a(NEFF, 0, 0xDF8),
    });
    b.op_num(7)
        .function_n(0x1234, 2)
        .leader(true)
        .dbg_cc_nop(true);
    b.dev_configs(&DevConfigs {
        dma_apb_rsvd_addr: a(DEV, 0, 0x00),
        eng_tpb: a(DEV, 0, 0x08),
        timestamp_local: a(DEV, 0, 0x10),
        timestamp_tpb: a(DEV, 0, 0x18),
        timestamp_tpb_val: 0x0BAD_F00D,
        tpb_ctrl_ack: 0x1122_3344_5566_7788,
        tpb_id: 5,
        seng_id: 0xA,
        dev_id: 3,
    })?;
    b.runtime_cc_op(&SAMPLE_CC_OP, 0)?;
    b.runtime_op([a(RUNTIME, 0, 0x08), a(RUNTIME, 0, 0x10)], 4242, 1);
    b.runtime_basic_block(&BasicBlockCtx {
        slot_spad_addr: [0, 1, 2, 3, 4, 5].map(|i| a(RUNTIME, 1, 0x20 + 8 * i)),
        ctrl_spad_addr: a(RUNTIME, 1, 0x50),
        curr_id: 31337,
    });
    b.barrier_completed(1);
    for c in 0..32usize {
        let v = c as u16;
        b.runtime_ring_row(
            c,
            &RingRow {
                recv_cnt: 1000 + v,
                send_credit: 2000 + v,
                repeat_cnt: 3000 + v,
                m2s_val: 4000 + v,
                s2m_val: 5000 + v,
                slot_idx: c as u8,
                run_state: 200 + (c % 4) as u8,
            },
        )?;
    }
    b.runtime_hier_run_state(2).runtime_mesh_event_index(77);
    Ok(())
}

#[cfg(test)]
mod tests;

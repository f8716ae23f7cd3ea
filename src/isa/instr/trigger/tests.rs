use super::*;
use crate::isa::operand::PseudoAddr8;

/// docs/contract/isa.md §6: dma_configs@41 (& 7), permute_chain@43, chaining@1, group@2,
/// channel@4, stream@6, dst@8; table-placed knobs land where `layout.rs` says.
#[test]
fn golden_da_offsets() {
    let ext = Collective2Ext {
        instr_chaining: InstrChaining::Body,
        group_id: 0x0102,
        channel_id: 0x0304,
        stream_id: 0x0506,
        dst: Tensor2d::contiguous(PseudoAddr8::var(7, 0x40).unwrap(), 32),
        cc_buf_start_addr: Addr4::sbuf(0x1234).unwrap(),
        cc_buf_size: 0xAABBCCDD,
        unique_tensors: Flag::On,
        dma_configs: DmaConfigs { raw: 3 },
        src1_bitmap: 0x0F,
        permute_chain: 1,
        cross_sb_out: Flag::On,
        tail_reserved: [0; 32],
    };
    let b = ext.encode();
    assert_eq!(&b[..8], &[0xDA, 2, 0x02, 0x01, 0x04, 0x03, 0x06, 0x05]);
    assert_eq!(&b[8..16], &[0x40, 0, 0, 0, 0, 7, 0, 0x10]);
    assert_eq!(
        &b[32..45],
        &[0x34, 0x12, 0, 0, 0xDD, 0xCC, 0xBB, 0xAA, 1, 3, 0x0F, 1, 1]
    );
    assert_eq!(Collective2Ext::decode(&b).unwrap(), ext);
    let mut bad = b;
    bad[40] = 2;
    let e = Collective2Ext::decode(&bad).unwrap_err();
    assert_eq!(
        (e.opcode, e.field, e.offset, e.value),
        (0xDA, "unique_tensors", 40, 2)
    );
}

/// docs/contract/isa.md §4 masks: RS input × rank_n, AG output × rank_n, A2A both.
#[test]
fn c8_counts() {
    let mut b = [0u8; 64];
    b[0] = 0xC8;
    b[6] = 0x13;
    b[13] = 10;
    b[24] = 5;
    b[32] = CollectiveType::ReduceScatter.as_u8();
    let mut w = TriggerCollective::decode(&b).unwrap();
    assert_eq!((w.input_count(4), w.output_count(4)), (20, 5));
    w.ctype = CollectiveType::AllGather;
    assert_eq!((w.input_count(4), w.output_count(4)), (5, 20));
    w.ctype = CollectiveType::AllToAll;
    assert_eq!((w.input_count(4), w.output_count(4)), (20, 20));
    w.ctype = CollectiveType::AllReduce;
    assert_eq!((w.input_count(4), w.output_count(4)), (5, 5));
}

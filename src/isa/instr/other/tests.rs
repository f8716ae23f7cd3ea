use super::*;
use crate::isa::operand::Addr4;

/// docs/contract/isa.md §8: 0xCB tensor_id@12, peer_id@16, is_send@24, offset@48, size@56.
#[test]
fn golden_send_recv_offsets() {
    let mut b = [0u8; 64];
    b[0] = 0xCB;
    b[6] = 0x13;
    b[12] = 9;
    b[16] = 3;
    b[24] = 1;
    b[48] = 0x80;
    b[56] = 0x40;
    let w = SendRecv::decode(&b).unwrap();
    assert_eq!((w.tensor_id, w.peer_id, w.is_send), (9, 3, true));
    assert_eq!((w.offset_bytes, w.size_bytes), (0x80, 0x40));
    assert_eq!(w.enc_op(), EncOpType::Send);
    assert_eq!(w.encode(), b);
    b[24] = 2;
    let e = SendRecv::decode(&b).unwrap_err();
    assert_eq!(
        (e.opcode, e.field, e.offset, e.value),
        (0xCB, "is_send", 24, 2)
    );
}

/// docs/contract/isa.md §8: 0xDB group@12, channel@14, iteration@16, dst_reg@18, stream@20.
#[test]
fn golden_cur_rank_offsets() {
    let mut b = [0u8; 64];
    b[0] = 0xDB;
    for (k, v) in [1u8, 2, 3, 4, 5].into_iter().enumerate() {
        b[12 + 2 * k] = v;
    }
    let w = CurProcessingRankId::decode(&b).unwrap();
    assert_eq!(
        (
            w.group_id,
            w.channel_id,
            w.iteration_id,
            w.dst_reg,
            w.stream_id
        ),
        (1, 2, 3, 4, 5)
    );
    assert_eq!(w.encode(), b);
}

/// docs/contract/isa.md §8: 0xBF lnc@32, channels@33, src@16, dst@48.
#[test]
fn golden_sb2sb_offsets() {
    let w = Sb2sbCollective {
        common: Common::default(),
        in_dtype: Dtype::Bf16,
        out_dtype: Dtype::Bf16,
        reserved0: [0; 2],
        src: Tensor3d {
            addr: Addr4::sbuf(0x100).unwrap(),
            step: [1, 0, 0],
            num: [16, 1, 1],
        },
        lnc_size_fmt: LncSizeFmt::Lnc2,
        num_active_channels: 4,
        reserved1: [0; 14],
        dst: Tensor3d {
            addr: Addr4::sbuf(0x200).unwrap(),
            step: [1, 0, 0],
            num: [16, 1, 1],
        },
    };
    let b = w.encode();
    assert_eq!((b[0], b[12], b[13], b[32], b[33]), (0xBF, 6, 6, 1, 4));
    assert_eq!(&b[16..18], &[0x00, 0x01]);
    assert_eq!(&b[48..50], &[0x00, 0x02]);
    assert_eq!(&b[26..28], &[16, 0]);
    assert_eq!(Sb2sbCollective::decode(&b).unwrap(), w);
    let mut bad = b;
    bad[32] = 4;
    let e = Sb2sbCollective::decode(&bad).unwrap_err();
    assert_eq!(
        (e.field, e.offset, e.value, e.rule),
        ("lnc_size_fmt", 32, 4, rule::RULE_11)
    );
}

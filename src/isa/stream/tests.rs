use super::*;
use crate::isa::testutil::{collective2, with_chaining};
use proptest::prelude::*;

fn other(op: u8) -> [u8; 64] {
    let mut w = [0u8; 64];
    w[0] = op;
    w
}

#[test]
fn walks_pairs_others_and_dma_ext() {
    let mut s = Vec::new();
    s.extend_from_slice(&other(0x01)); // compute
    s.extend_from_slice(&collective2().encode()); // 0xD9 + 0xDA
    s.extend_from_slice(&other(0xDA)); // lone 0xDA: PSEUDO_DMA_EXT (docs/contract/isa.md §6)
    s.extend_from_slice(&other(0xD5)); // sync barrier, untyped
    let d = decode_stream(&s).unwrap();
    let offs: Vec<(usize, u8)> = d
        .words
        .iter()
        .map(|w| (w.offset, w.instr.opcode()))
        .collect();
    assert_eq!(offs, [(0, 0x01), (64, 0xD9), (192, 0xDA), (256, 0xD5)]);
    assert!(matches!(d.words[2].instr, Instr::DmaExt { .. }));
    assert_eq!(d.triggers().count(), 1);
    assert!(d.chains.is_empty());
}

/// docs/contract/isa.md §9 rule 3 through the walker: a 0xD9 followed by something else.
#[test]
fn d9_not_followed_by_da_is_rule_3() {
    let mut s = Vec::new();
    s.extend_from_slice(&other(0x01));
    s.extend_from_slice(&collective2().encode()[..64]);
    s.extend_from_slice(&other(0x02));
    let e = decode_stream(&s).unwrap_err();
    assert_eq!(
        (e.opcode, e.field, e.offset, e.value),
        (0xD9, "next_opcode", 64, 0x02)
    );
    assert_eq!((e.rule, e.word_at), (rule::RULE_3, Some(64)));
    // At the very end of the stream.
    let e = decode_stream(&s[..128]).unwrap_err();
    assert_eq!((e.rule, e.word_at), (rule::RULE_3, Some(64)));
}

#[test]
fn chains() {
    let mut s = Vec::new();
    for c in [
        InstrChaining::Initial,
        InstrChaining::Body,
        InstrChaining::Final,
    ] {
        s.extend_from_slice(&with_chaining(c).encode());
        s.extend_from_slice(&other(0x00)); // a non-trigger word between members
    }
    s.extend_from_slice(&with_chaining(InstrChaining::None).encode());
    let d = decode_stream(&s).unwrap();
    assert_eq!(
        d.chains,
        [Chain {
            members: vec![0, 2, 4]
        }]
    );

    let body = with_chaining(InstrChaining::Body).encode();
    let e = decode_stream(&body).unwrap_err();
    assert_eq!(
        (e.opcode, e.field, e.offset, e.value),
        (0xDA, "instr_chaining", 1, 2)
    );
    assert_eq!((e.rule, e.word_at), (rule::CHAINING, Some(64)));

    let mut s = with_chaining(InstrChaining::Initial).encode().to_vec();
    let e = decode_stream(&s).unwrap_err();
    assert_eq!((e.value, e.word_at), (1, Some(64)));
    s.extend_from_slice(&with_chaining(InstrChaining::None).encode());
    let e = decode_stream(&s).unwrap_err();
    assert_eq!((e.value, e.word_at), (0, Some(192)));
}

#[test]
fn ragged_length_is_framing_error() {
    let e = decode_stream(&[0u8; 65]).unwrap_err();
    assert_eq!((e.rule, e.word_at, e.value), (rule::FRAMING, Some(64), 1));
}

proptest! {
    #[test]
    fn walker_never_panics(v in prop::collection::vec(any::<u8>(), 0..600)) {
        let _ = decode_stream(&v);
        let n = v.len() / 64 * 64;
        let _ = decode_stream(&v[..n]);
    }
}

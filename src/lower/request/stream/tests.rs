//! Tests of the stream path: chains, state carried across words, A2Av and 0xCB words.

use super::*;
use crate::error::ErrorKind;
use crate::isa::enums::{AluOp, CollectiveType, Dtype, Flag, UpdateMode, WaitMode};
use crate::isa::instr::other::SendRecv;
use crate::isa::instr::{Common, Events};
use crate::isa::{decode_stream, encode};
use crate::lower::request::instr::testutil::*;
use crate::lower::request::instr::TensorInfo;
use crate::lower::request::{A2avRow, ChainInfo, CollectiveOp, TriggerEvents};

fn stream_of(words: &[Vec<u8>]) -> DecodedStream {
    decode_stream(&words.concat()).unwrap()
}

/// docs/contract/lowering.md §6.3: a chain is one request per member; only FINAL gets a trigger
/// record, waiting like the INITIAL word and updating like the FINAL one.
#[test]
fn chain_of_collective2_pairs() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    let mut words = Vec::new();
    for (k, role) in [
        InstrChaining::Initial,
        InstrChaining::Body,
        InstrChaining::Final,
    ]
    .into_iter()
    .enumerate()
    {
        let mut p = ar2(10 + k as u16, 20 + k as u16);
        p.ext.instr_chaining = role;
        p.ext.permute_chain = 1;
        p.ext.unique_tensors = Flag::On;
        p.trigger.common.events = Events {
            wait_mode: WaitMode::SemGeImm,
            wait_idx: k as u8,
            update_mode: UpdateMode::SemIncComplete,
            update_idx: 30 + k as u8,
            semaphore_value: 100 + k as u32,
        };
        words.push(encode(&Instr::Collective2(p)).to_vec());
        words.push(vec![0u8; 64]); // a non-trigger word between members
    }
    words.push(encode(&Instr::Collective2(ar2(40, 41))).to_vec());
    let rs = requests_from_stream(&stream_of(&words), &ctx()).unwrap();
    assert_eq!(rs.len(), 4);
    for (k, r) in rs[..3].iter().enumerate() {
        assert_eq!((r.chain.index, r.chain.len), (k as u32, 3));
        assert!(r.chain.safe_mode() && r.chain.unique_tensors);
    }
    assert_eq!(rs[0].trigger, None);
    assert_eq!(rs[1].trigger, None);
    assert_eq!(
        rs[2].trigger,
        Some(TriggerEvents {
            wait_mode: WaitMode::SemGeImm,
            wait_idx: 0,
            semaphore_value: 100,
            update_mode: UpdateMode::SemIncComplete,
            update_idx: 32,
        })
    );
    assert_eq!(rs[3].chain, ChainInfo::default());
    assert!(rs[3].trigger.is_some());
    // Lowered alone, a FINAL word keeps its own events and an unknown length.
    let d = stream_of(&words);
    let alone = CollectiveRequest::from_instr(&d.words[4].instr, &ctx()).unwrap();
    assert_eq!(
        (alone.chain.role, alone.chain.len),
        (InstrChaining::Final, 0)
    );
    assert_eq!(alone.trigger.unwrap().semaphore_value, 102);

    // UNIQUE_TENSORS broken: member 2 reuses member 0's variable.
    let mut w2 = words.clone();
    let mut p = ar2(12, 10);
    p.ext.instr_chaining = InstrChaining::Final;
    p.ext.unique_tensors = Flag::On;
    w2[4] = encode(&Instr::Collective2(p)).to_vec();
    let m = requests_from_stream(&stream_of(&w2), &ctx()).unwrap_err();
    assert_eq!(m.kind(), ErrorKind::Invalid, "{m}");
    assert!(
        m.message().contains("members 0 and 2 both use Var(10)"),
        "{}",
        m.message()
    );
    // A member on another stream / group.
    let mut w3 = words.clone();
    let mut p = ar2(12, 22);
    p.ext.instr_chaining = InstrChaining::Body;
    p.ext.group_id = 1;
    p.ext.stream_id = 1;
    w3[2] = encode(&Instr::Collective2(p)).to_vec();
    let m = requests_from_stream(&stream_of(&w3), &ctx()).unwrap_err();
    assert_eq!(m.kind(), ErrorKind::Invalid, "{m}");
    assert!(
        m.message()
            .starts_with("word at byte 0xc0: chain member 1 runs on stream 1 / group 1"),
        "{}",
        m.message()
    );
}

/// Rule 8 across a stream: stream↔group one-to-one, errors name the word's offset.
#[test]
fn stream_validation_carries_state() {
    let mut a = ar2(1, 2);
    a.ext.stream_id = 1;
    let mut b = ar2(3, 4);
    b.ext.stream_id = 2; // same group 0 on another stream
    let words = [
        encode(&Instr::Collective2(a)).to_vec(),
        encode(&Instr::Collective2(b)).to_vec(),
    ];
    let e = requests_from_stream(&stream_of(&words), &ctx()).unwrap_err();
    assert_eq!(
        e.message(),
        "word at byte 0x80: opcode 0xDA: field group_id at byte 2 = 0x00: group 0 is already \
         mapped to stream 1, not 2 (stream <-> group must be one-to-one) \
         (docs/contract/isa.md §9 rule 8)"
    );
}

/// docs/contract/isa.md §9 rule 9 through a word: bitmap roles; missing bit 1 rejected by
/// validation.
#[test]
fn all_to_all_v_metadata_from_word() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    let mut p = c2(
        CollectiveType::AllToAllV,
        AluOp::Bypass,
        var(1, 40),
        var(2, 48),
    );
    p.trigger.src1 = var(3, 16);
    p.ext.src1_bitmap = 0b0011;
    let r = lower(Instr::Collective2(p)).unwrap();
    let m = r.a2av.clone().unwrap();
    assert_eq!(
        m.rows,
        [
            A2avRow::Input,
            A2avRow::Input,
            A2avRow::Output,
            A2avRow::Derived
        ]
    );
    assert_eq!((m.input_elems, m.output_elems), (40, 48));
    assert_eq!((r.input_elems(), r.output_elems(), r.count), (40, 48, 12));
    assert_eq!(m.metadata.unwrap().tensor, TensorName::Var(3));
    p.ext.src1_bitmap = 0b1111;
    let m = lower(Instr::Collective2(p)).unwrap().a2av.unwrap();
    assert_eq!(m.rows, [A2avRow::Input; 4]);
    p.ext.src1_bitmap = 0b0101;
    let e = err(Instr::Collective2(p), &ctx());
    assert!(
        e.contains("bits 0 (send counts) and 1 (send displacements) must be set")
            && e.contains("rule 9"),
        "{e}"
    );
    p.ext.src1_bitmap = 0b0011;
    p.trigger.src1 = var(3, 15);
    let e = err(Instr::Collective2(p), &ctx());
    assert!(
        e.contains("src1 tensor has wrong num_elem and/or step_elem"),
        "{e}"
    );
    // The metadata is uint32: a 16-entry table needs 64 bytes of its variable.
    let mut c = ctx();
    let info = |bytes| TensorInfo {
        bytes,
        placement: None,
    };
    c.vars = Some(BTreeMap::from([
        (1, info(80)),
        (2, info(96)),
        (3, info(60)),
    ]));
    p.trigger.src1 = var(3, 16);
    let e = err(Instr::Collective2(p), &c);
    assert!(
        e.contains("src1 (A2Av metadata, uint32) walks bytes [0, 64) of variable 3"),
        "{e}"
    );
}

#[test]
fn send_recv_pairs() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    let w = |is_send| {
        Instr::SendRecv(SendRecv {
            common: Common::default(),
            tensor_id: 3,
            peer_id: 20,
            is_send,
            reserved25: [0; 23],
            offset_bytes: 64,
            size_bytes: 256,
        })
    };
    let s = lower(w(true)).unwrap();
    assert_eq!(
        (s.op, s.dtype, s.count, s.rank),
        (CollectiveOp::Send, Dtype::Uint8, 256, 0)
    );
    assert_eq!(s.group, [12, 20]);
    assert_eq!(s.operands.src0.unwrap().offset_bytes, 64);
    let r = lower(w(false)).unwrap();
    assert_eq!(
        (r.op, r.rank, r.group.clone()),
        (CollectiveOp::Recv, 1, vec![20, 12])
    );
    assert!(r.operands.dst.is_some() && r.operands.src0.is_none());
    let mut c = ctx();
    c.tensors = tensors(&[(3, 300)]);
    assert_eq!(
        err(w(true), &c),
        "opcode 0xCB: send of 256 bytes at offset_bytes 64 runs past tensor 3 (300 bytes)"
    );
    let mut me = w(true);
    if let Instr::SendRecv(x) = &mut me {
        x.peer_id = 12;
    }
    assert!(err(me, &ctx()).contains("peer_id = 12 must be another rank's global device id"));
}

//! An engine program: the bytes of a NEFF's `*_instr` member (64-byte instruction slots,
//! 0xD9+0xDA pairs, chains). Decoded as the loader does, validated against the ISA rules with
//! and without a context, and every decoded word must encode back to what decodes to it again.
#![no_main]

use libfuzzer_sys::fuzz_target;
use opennrt::isa::instr::{decode, encode};
use opennrt::isa::stream::decode_stream;
use opennrt::isa::validate::{rule_03_d9_pairing, validate_stream, Arch, ValidationContext};

fuzz_target!(|bytes: &[u8]| {
    let _ = rule_03_d9_pairing(bytes);
    let Ok(stream) = decode_stream(bytes) else {
        return;
    };
    for w in &stream.words {
        let again = encode(&w.instr);
        assert_eq!(again.len(), w.instr.len());
        assert_eq!(
            decode(&again).as_ref(),
            Ok(&w.instr),
            "decode(encode(word)) differs"
        );
    }
    let _ = stream.triggers().count();
    let _ = validate_stream(&stream, &mut ValidationContext::default());
    let mut ctx = ValidationContext {
        collective_streams: Some(1),
        rank_n: Some(4),
        metaring_channel_n: Some(2),
        mesh_available: Some(true),
        arch: Some(Arch::V3),
        ..ValidationContext::default()
    };
    let _ = validate_stream(&stream, &mut ctx);
});

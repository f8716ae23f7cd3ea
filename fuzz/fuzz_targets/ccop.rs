//! cc_op entries: 8-byte CTRL SPAD slots (`SpadCtrlEntry`). Every slot decodes, and decoding
//! is lossless (`unpack(b).pack() == b`); the vendor packer's merge (`pack_cc_op`) of fields
//! taken from the next bytes into a slot must either refuse or give a slot that decodes to
//! those fields.
#![no_main]

use libfuzzer_sys::fuzz_target;
use opennrt::isa::ccop::{pack_cc_op, CcOpFields, CcOpOperands, SpadCtrlEntry};

fuzz_target!(|bytes: &[u8]| {
    let mut chunks = bytes.chunks_exact(8);
    let mut slots = Vec::new();
    for c in chunks.by_ref() {
        let b: [u8; 8] = c.try_into().expect("8 bytes");
        let e = SpadCtrlEntry::unpack(b);
        assert_eq!(
            e.pack().expect("an unpacked slot packs"),
            b,
            "unpack/pack lost bits"
        );
        let _ = (e.channel_list(), e.sema_shift_offset(), e.sema_mask());
        slots.push(b);
    }
    // Fields from pairs of slots: the first is the old slot, the second the fields.
    for pair in slots.chunks_exact(2) {
        let (old, f) = (pair[0], pair[1]);
        let operands = if f[2] & 0x80 != 0 {
            CcOpOperands::Mesh {
                sema_shift_offset: u16::from_le_bytes([f[4], f[5]]),
                sema_mask: u16::from_le_bytes([f[6], f[7]]),
            }
        } else {
            CcOpOperands::Ring {
                channel_list: u32::from_le_bytes([f[4], f[5], f[6], f[7]]),
            }
        };
        let fields = CcOpFields {
            algo_type: f[0],
            algo_sub_type: f[1],
            trigger_next: f[2] & 1 != 0,
            reporter: f[2] & 2 != 0,
            ring_wait_complete: f[2] & 4 != 0,
            ring_send_complete: f[2] & 8 != 0,
            safe_mode: f[2] & 16 != 0,
            unique_tensors: f[2] & 32 != 0,
            operands,
        };
        let channel = u32::from(f[3]);
        if let Ok(slot) = pack_cc_op(old, &fields, channel) {
            let e = SpadCtrlEntry::unpack(slot);
            assert!(e.cc_op);
            assert_eq!(e.algo_type, fields.algo_type);
            assert_eq!(e.algo_sub_type, fields.algo_sub_type);
            assert_eq!(e.trigger_next, fields.trigger_next);
            assert_eq!(e.reporter, fields.reporter);
            assert_eq!(e.union_word, fields.operands.word());
            assert_eq!(e.pad, old[3], "slot byte 3 is kept");
        }
    }
});

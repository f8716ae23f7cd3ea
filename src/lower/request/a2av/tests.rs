use super::*;
use crate::error::ErrorKind;

/// 3 ranks, input and output 9 elements each; rank r sends r+1 elements to every peer,
/// packed from displacement 0.
fn rows3(with_recv: bool) -> Vec<Vec<Vec<u64>>> {
    (0..3u64)
        .map(|r| {
            let c = r + 1;
            let mut v = vec![vec![c; 3], vec![0, c, 2 * c]];
            if with_recv {
                v.push(vec![1, 2, 3]); // what every rank receives from 0, 1, 2
                v.push(vec![0, 1, 3]);
            }
            v
        })
        .collect()
}

fn meta(bitmap: u8) -> A2avMeta {
    A2avMeta::from_bitmap(bitmap, 9, 9, None).unwrap()
}

/// docs/contract/isa.md §9 rule 9: bits 0, 1 inputs; bit 2 clear → row 2 output; bit 3 clear →
/// row 3 derived.
#[test]
fn golden_bitmap_roles() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    use A2avRow::*;
    for (bm, rows) in [
        (0b0011, [Input, Input, Output, Derived]),
        (0b0111, [Input, Input, Input, Derived]),
        (0b1011, [Input, Input, Output, Input]),
        (0b1111, [Input, Input, Input, Input]),
    ] {
        assert_eq!(meta(bm).rows, rows, "{bm:#06b}");
    }
    for bm in [0, 1, 2, 0b1101, 0b1110] {
        let e = A2avMeta::from_bitmap(bm, 6, 9, None).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
        assert!(e
            .message()
            .contains("bits 0 (send counts) and 1 (send displacements) must both be set"));
    }
    let e = A2avMeta::from_bitmap(0x13, 6, 9, None).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert!(e.message().contains("bits 4-7 must be clear"));
}

#[test]
fn resolve_derives_receive_side() {
    let t = meta(0b0011).resolve(3, &rows3(false)).unwrap();
    assert_eq!(t.send_counts[2], [3, 3, 3]);
    // recv_counts is the transpose: every rank gets 1, 2, 3 from ranks 0, 1, 2; this is
    // what the runtime writes into row 2 (an output here).
    assert_eq!(t.recv_counts, vec![vec![1, 2, 3]; 3]);
    // Derived displacements: (9 / 3) · p.
    assert_eq!(t.recv_displs, vec![vec![0, 3, 6]; 3]);
    // Given rows are used when their bits are set.
    let t = meta(0b1111).resolve(3, &rows3(true)).unwrap();
    assert_eq!(t.recv_displs, vec![vec![0, 1, 3]; 3]);
    let m = meta(0b0011).with_table(3, &rows3(false)).unwrap();
    assert!(m.table.is_some());
}

#[test]
fn resolve_rejections() {
    let msg = |m: &A2avMeta, rows: &[Vec<Vec<u64>>]| {
        m.resolve(3, rows).unwrap_err().message().to_string()
    };
    let m = meta(0b0011);
    assert_eq!(
        msg(&m, &rows3(false)[..2]),
        "ALL_TO_ALL_V: metadata rows given for 2 ranks; the group has rank_n = 3"
    );
    let mut r = rows3(false);
    r[1][0].pop();
    assert_eq!(
        msg(&m, &r),
        "ALL_TO_ALL_V: rank 1's send counts (row 0) has 2 entries; it needs rank_n = 3"
    );
    assert_eq!(
        msg(&meta(0b0111), &rows3(false)),
        "ALL_TO_ALL_V: rank 0's receive counts (row 2) is missing; src1_bitmap 0x07 marks it \
             as an input"
    );
    let mut r = rows3(false);
    r[2][1] = vec![0, 3, 7];
    assert_eq!(
        msg(&m, &r),
        "ALL_TO_ALL_V: rank 2 sends 3 elements to peer 2 from displacement 7, past its input \
             of 9 elements"
    );
    let mut r = rows3(true);
    r[1][2] = vec![1, 2, 2];
    assert_eq!(
        msg(&meta(0b1111), &r),
        "ALL_TO_ALL_V: rank 1's receive count from peer 2 is 2 but peer 2 sends it 3"
    );
    let mut r = rows3(true);
    r[0][3] = vec![0, 1, 7];
    assert_eq!(
        msg(&meta(0b1111), &r),
        "ALL_TO_ALL_V: rank 0 receives 3 elements from peer 2 at displacement 7, past its \
             output of 9 elements"
    );
    let mut r = rows3(true);
    r[0][3] = vec![0, 0, 3];
    assert_eq!(
        msg(&meta(0b1111), &r),
        "ALL_TO_ALL_V: on rank 0 the receive windows of peers 0 and 1 overlap (one ends at \
             1, the other starts at 0)"
    );
}

/// The metadata tensor's bytes: row i at byte 4·rank_n·i, little-endian uint32 (docs/contract/isa.md §9 rule 9).
#[test]
fn metadata_round_trips_byte_exact() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    let rows = [vec![1, 2], vec![0, 1], vec![3, 0x0102_0304], vec![0, 3]];
    let b = encode_metadata(2, &rows).unwrap();
    assert_eq!(b.len() as u64, metadata_bytes(2));
    assert_eq!(&b[..8], &[1, 0, 0, 0, 2, 0, 0, 0]);
    assert_eq!(&b[20..24], &[4, 3, 2, 1]);
    assert_eq!(decode_metadata(2, &b).unwrap(), rows.to_vec());
    let e = encode_metadata(2, &[vec![1], vec![0, 1], vec![0, 0], vec![0, 0]]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert!(
        e.message().contains("send counts (row 0) has 1 entries"),
        "{e}"
    );
    let big = [vec![1 << 32, 0], vec![0, 0], vec![0, 0], vec![0, 0]];
    assert!(encode_metadata(2, &big).is_err());
    assert!(decode_metadata(2, &b[..31]).is_err());
}

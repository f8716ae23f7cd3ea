use super::*;
use crate::error::ErrorKind;
use crate::isa::enums::Dtype;
use crate::lower::request::ReduceOp;

pub(crate) fn request(op: CollectiveOp, n: u32, count: u64) -> CollectiveRequest {
    let reduce = matches!(op, CollectiveOp::AllReduce | CollectiveOp::ReduceScatter)
        .then_some(ReduceOp::Add);
    CollectiveRequest::new(op, Dtype::Bf16, reduce, count, (0..n).collect(), 0)
}

#[test]
fn ring_all_reduce_lowers_and_emits() {
    let req = request(CollectiveOp::AllReduce, 4, 8);
    let cfg = LowerConfig::for_world(4).unwrap();
    let p = lower(&req, &cfg).unwrap();
    assert_eq!(p.ranks.len(), 4);
    let map = address_map(&p, &cfg.topology).unwrap();
    let e = crate::lower::emit::emit(&p, &map).unwrap();
    crate::lower::emit::decode_back(&e, &p, &map).unwrap();
}

/// All-to-all-v lowers from its resolved table, and only from it.
#[test]
fn all_to_all_v_needs_its_table() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    use crate::lower::request::A2avMeta;
    let cfg = LowerConfig::for_world(2).unwrap();
    let mut req = request(CollectiveOp::AllToAllV, 2, 3);
    let e = lower(&req, &cfg).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert!(e.message().contains("without A2Av metadata"), "{e}");
    let meta = A2avMeta::from_bitmap(0x03, 4, 6, None).unwrap();
    req.a2av = Some(meta.clone());
    let e = lower(&req, &cfg).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert!(
        e.message().contains("without a resolved counts table"),
        "{e}"
    );
    // Rank 0 sends 1 to itself and 3 to rank 1; rank 1 sends 2 to rank 0, 0 to itself.
    // Derived receive displacements: the block from peer p lands at (6 / 2) · p.
    let rows = vec![vec![vec![1, 3], vec![0, 1]], vec![vec![2, 0], vec![2, 4]]];
    req.a2av = Some(meta.with_table(2, &rows).unwrap());
    assert_eq!((req.input_elems(), req.output_elems()), (4, 6));
    let layout = a2av_layout(&req).unwrap();
    assert_eq!(layout.recv_displs, vec![vec![0, 3]; 2]);
    let p = lower(&req, &cfg).unwrap();
    crate::lower::verify::verify(&p).unwrap();
    let mut t = req.a2av.unwrap().table.unwrap();
    t.send_displs.pop();
    let e = mesh_a2a::A2avLayout::from_table(&t, 2).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert!(e.message().contains("send_displs is not 2 × 2"), "{e}");
}

/// The environment's chunk size is bytes, turned into whole 32-element groups per dtype; one
/// given in elements is taken as given, whatever its bits (no tag bit to collide with).
#[test]
fn chunk_sizes_keep_their_unit() {
    let from = |v: Option<&str>| {
        LowerConfig::from_lookup(
            |k| {
                (k == "NEURON_RT_CC_CHUNK_SIZE")
                    .then(|| v.map(String::from))
                    .flatten()
            },
            2,
        )
        .unwrap()
        .chunk
    };
    assert_eq!(from(None), ChunkSize::Default);
    assert_eq!(from(Some("1000")), ChunkSize::Bytes(1000));
    assert!(
        LowerConfig::from_lookup(|k| (k == "NEURON_RT_CC_CHUNK_SIZE").then(|| "0".into()), 2)
            .is_err()
    );
    assert_eq!(ChunkSize::Default.elems(2), 1 << 20);
    assert_eq!(ChunkSize::Bytes(1000).elems(2), 480);
    assert_eq!(ChunkSize::Bytes(1000).elems(4), 224);
    assert_eq!(ChunkSize::Bytes(10).elems(4), CHUNK_ALIGN_ELEMS);
    assert_eq!(ChunkSize::Elems(100).elems(4), 100);
    assert_eq!(ChunkSize::Elems(1 << 63 | 64).elems(2), 1 << 63 | 64);
}

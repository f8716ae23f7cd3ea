//! CCE packet details (docs/contract/device.md §2.1–§2.3): sources and destinations cut into several
//! descriptors, FMA scales from W3, element-splitting boundaries and partial overlaps.

use super::*;

/// CCE sources and the destination cut into descriptors at different (element-aligned)
/// places: the engine reduces piece by piece and gets the same bytes as one reduce.
#[test]
fn cce_with_segmented_sources_and_destination() {
    let mut r = Rig::new(1, 0, 64);
    let elems = 1500usize;
    let len = 2 * elems as u64;
    let srcs = [DATA, DATA + 0x1_0000, DATA + 0x2_0000];
    let inputs: Vec<Vec<u8>> = (0..3)
        .map(|s| bf16s((0..elems).map(|e| (e % 13) as f32 * 1.25 + s as f32 * 0.5)))
        .collect();
    for (a, b) in srcs.iter().zip(&inputs) {
        r.fill(*a, b);
    }
    let refs: Vec<&[u8]> = inputs.iter().map(|v| &v[..]).collect();
    let mut want = vec![0u8; len as usize];
    cce::reduce(CceOp::Add, Dtype::Bf16, &refs, &mut want).unwrap();
    // Source 1 in two data descriptors (1000 + 2000 bytes).
    let mut t = cce_packet(CceOp::Add, Dtype::Bf16.as_u8(), &srcs, len as u32);
    t[3] = Descriptor::TxData {
        ctrl: ctrl(1000, false, false),
        meta: None,
        addr: srcs[1],
    };
    t.insert(
        4,
        Descriptor::TxData {
            ctrl: ctrl(2000, false, false),
            meta: None,
            addr: srcs[1] + 1000,
        },
    );
    // Destination in place on source 2, in three descriptors.
    let d = srcs[2];
    let rxs = [
        rx(d, 600, true, false),
        rx(d + 600, 1800, false, false),
        rx(d + 2400, 600, false, true),
    ];
    r.submit(&t, &rxs);
    assert_eq!(r.run().unwrap().packets_done, 1);
    assert_eq!(r.get(d, len as usize), want);
}

/// A descriptor boundary inside an element aborts; so does a partial overlap of a source with
/// the destination.
#[test]
fn abort_on_split_element_and_partial_overlap() {
    // Checks the report text a user reads, on purpose.
    let mut r = Rig::new(1, 0, 32);
    let t = cce_packet(CceOp::Add, Dtype::Bf16.as_u8(), &[DATA, DATA + 64], 8);
    r.submit(
        &t,
        &[
            rx(DATA + 128, 3, true, false),
            rx(DATA + 131, 5, false, true),
        ],
    );
    let e = abort_of(&mut r);
    assert_eq!((e.queue, e.index), (Direction::S2M, 0));
    assert!(e.reason.contains("splits a"), "{e}");

    let mut r = Rig::new(1, 0, 32);
    let t = cce_packet(CceOp::Add, Dtype::Bf16.as_u8(), &[DATA, DATA + 64], 8);
    r.submit(&t, &[rx(DATA + 2, 8, true, true)]);
    let e = abort_of(&mut r);
    assert_eq!(e.queue, Direction::M2S);
    assert!(e.reason.contains("overlap"), "{e}");
}

/// FMA: the per-source FP32 scales come from W3 of each compute descriptor.
#[test]
fn cce_fma_uses_per_source_scales() {
    let mut r = Rig::new(1, 0, 32);
    let a = bf16s([1.0f32, 2.0, -3.0, 4.0].into_iter());
    let b = bf16s([0.5f32, 0.25, 8.0, -1.0].into_iter());
    r.fill(DATA, &a);
    r.fill(DATA + 64, &b);
    let mut t = cce_packet(CceOp::Add, Dtype::Bf16.as_u8(), &[DATA, DATA + 64], 8);
    let scales = [2.0f32, -4.0];
    let mut k = 0;
    for d in &mut t {
        if let Descriptor::Cce(c) = d {
            c.meta.op = CceOp::Fma;
            c.meta.op_sel = CceOp::Fma.op_selector();
            c.w2_hi = CceCompute::default_w2_hi(CceOp::Fma);
            c.scale = scales[k].to_bits();
            k += 1;
        }
    }
    r.submit(&t, &[rx(DATA + 128, 8, true, true)]);
    r.run().unwrap();
    let mut want = vec![0u8; 8];
    cce::reduce_fma(Dtype::Bf16, &[&a, &b], &scales, &mut want).unwrap();
    assert_eq!(r.get(DATA + 128, 8), want);
    assert_eq!(want, bf16s([0.0f32, 3.0, -38.0, 12.0].into_iter()));
}

//! Truth tables for the gates of docs/contract/lowering.md §3.2, the mesh flavour (§3.5) and caps
//! (§5.4), the legality rules, and each gate's reason strings.

use crate::error::ErrorKind;
use crate::lower::program::Algorithm;
use crate::lower::request::CollectiveOp;
use crate::lower::select::*;
use crate::lower::topology::{Fabric, Generation};
use CollectiveOp::*;

/// A single-node trn2 LNC 2 context with `rank_n` ranks.
fn intra(op: CollectiveOp, rank_n: u32) -> GateCtx {
    GateCtx {
        op,
        rank_n,
        node_n: 1,
        local_rank_n: rank_n,
        generation: Generation::V3,
        lnc: 2,
        fabric: Fabric::None,
        multi_stream: false,
        rdh_mode: true,
        mesh_enabled: true,
        has_pairs: false,
        op_bytes: 1024,
    }
}

/// `node_n` nodes × `local` ranks.
fn inter(op: CollectiveOp, node_n: u32, local: u32) -> GateCtx {
    GateCtx {
        node_n,
        local_rank_n: local,
        rank_n: node_n * local,
        ..intra(op, 1)
    }
}

#[test]
fn hierarchical_truth_table() {
    // Checks the report text a user reads, on purpose.
    assert!(gate_hierarchical(&inter(AllReduce, 2, 4)).pass);
    assert!(gate_hierarchical(&inter(AllGather, 4, 2)).pass);
    assert!(gate_hierarchical(&inter(ReduceScatter, 2, 2)).pass);
    let g = gate_hierarchical(&intra(AllReduce, 8));
    assert_eq!(g.why, "needs node_n > 1 (inter), but node_n = 1");
    let g = gate_hierarchical(&inter(AllReduce, 4, 1));
    assert_eq!(g.why, "needs local_rank_n > 1, but local_rank_n = 1");
    let g = gate_hierarchical(&GateCtx {
        rank_n: 5,
        ..inter(AllReduce, 2, 3)
    });
    assert_eq!(
        g.why,
        "needs node_n * local_rank_n == rank_n, but 2 * 3 != 5"
    );
    let g = gate_hierarchical(&GateCtx {
        has_pairs: true,
        ..inter(AllReduce, 2, 2)
    });
    assert_eq!(
        g.why,
        "needs no source-target pairs, but the request has pairs"
    );
    let g = gate_hierarchical(&inter(AllToAll, 2, 2));
    assert!(!g.pass && g.why.contains("the op is all-to-all"), "{g}");
}

#[test]
fn kangaring_truth_table() {
    // (lnc, rank_n, pass)
    for (lnc, n, pass) in [
        (2, 4, false),
        (2, 5, true),
        (2, 64, true),
        (1, 8, false),
        (1, 9, true),
        (1, 128, true),
    ] {
        let g = gate_kangaring(&GateCtx {
            lnc,
            ..intra(AllReduce, n)
        });
        assert_eq!(g.pass, pass, "lnc {lnc} rank_n {n}: {g}");
    }
    let g = gate_kangaring(&GateCtx {
        lnc: 2,
        ..intra(AllReduce, 4)
    });
    assert_eq!(
        g.why,
        "needs (lnc == 2 and rank_n > 4) or (lnc == 1 and rank_n > 8), but lnc = 2, rank_n = 4"
    );
    let g = gate_kangaring(&inter(AllReduce, 2, 8));
    assert_eq!(g.why, "needs node_n == 1 (intra only), but node_n = 2");
    let g = gate_kangaring(&GateCtx {
        multi_stream: true,
        ..intra(AllGather, 16)
    });
    assert_eq!(g.why, "needs a single stream, but multi-stream");
    assert!(gate_kangaring(&intra(ReduceScatter, 16)).pass);
    assert!(!gate_kangaring(&intra(Permute, 16)).pass);
}

#[test]
fn single_cycle_ring_truth_table() {
    assert!(gate_single_cycle_ring(&inter(AllReduce, 4, 1)).pass);
    assert!(gate_single_cycle_ring(&inter(AllReduce, 3, 1)).pass);
    let g = gate_single_cycle_ring(&inter(AllGather, 4, 1));
    assert_eq!(
        g.why,
        "needs all-reduce (op_type == ALLREDUCE), but the op is all-gather"
    );
    assert!(!gate_single_cycle_ring(&inter(ReduceScatter, 4, 1)).pass);
    let g = gate_single_cycle_ring(&intra(AllReduce, 1));
    assert_eq!(g.why, "needs node_n > 1 (inter), but node_n = 1");
    let g = gate_single_cycle_ring(&inter(AllReduce, 2, 2));
    assert_eq!(
        g.why,
        "needs rank_n == node_n (one rank per node), but rank_n = 4, node_n = 2"
    );
}

#[test]
fn intra_rdh_truth_table() {
    // Checks the report text a user reads, on purpose.
    for n in [1, 2, 3, 4, 5, 8, 12, 16, 32, 64] {
        let g = gate_intra_rdh(&intra(AllReduce, n.min(32)));
        let want = matches!(n.min(32), 4 | 8 | 16);
        assert_eq!(g.pass, want, "rank_n {n}: {g}");
    }
    // 64 ranks: legal for the gathers (a 64-source reduce exceeds the CCE fan-in).
    assert!(gate_intra_rdh(&intra(AllGather, 64)).pass);
    let g = gate_intra_rdh(&intra(AllReduce, 64));
    assert!(!g.pass && g.why.contains("mesh available"), "{g}");
    let g = gate_intra_rdh(&GateCtx {
        rdh_mode: false,
        ..intra(AllReduce, 8)
    });
    assert_eq!(
        g.why,
        "needs RDH mode (OPENNRT_CC_RDH=1), but RDH mode is off"
    );
    let g = gate_intra_rdh(&GateCtx {
        mesh_enabled: false,
        ..intra(AllReduce, 8)
    });
    assert!(g
        .why
        .starts_with("needs mesh available, but mesh is not (needs mesh enabled"));
    let g = gate_intra_rdh(&GateCtx {
        multi_stream: true,
        ..intra(AllReduce, 8)
    });
    assert_eq!(g.why, "needs a single stream, but multi-stream");
    assert!(!gate_intra_rdh(&inter(AllReduce, 2, 4)).pass);
    let g = gate_intra_rdh(&GateCtx {
        lnc: 4,
        ..intra(AllReduce, 8)
    });
    assert_eq!(g.why, "needs vnc in {1, 2}, but lnc = 4");
    // Passing reasons list every condition.
    let g = gate_intra_rdh(&intra(AllGather, 8));
    assert!(g.why.contains("RDH mode") && g.why.contains("rank_n in {4, 8, 16, 64}"));
}

#[test]
fn inter_rdh_truth_table() {
    for (nodes, pass) in [
        (2, false),
        (4, false),
        (6, false),
        (8, true),
        (16, true),
        (12, false),
    ] {
        let g = gate_inter_rdh(&inter(AllGather, nodes, 1));
        assert_eq!(g.pass, pass, "{nodes}: {g}");
    }
    let g = gate_inter_rdh(&inter(AllReduce, 4, 1));
    assert_eq!(g.why, "needs rank_n a power of two >= 8, but rank_n = 4");
    let g = gate_inter_rdh(&inter(AllReduce, 8, 2));
    assert_eq!(g.why, "needs local_rank_n == 1, but local_rank_n = 2");
    let g = gate_inter_rdh(&GateCtx {
        fabric: Fabric::PodP2p,
        ..inter(AllReduce, 8, 1)
    });
    assert_eq!(
        g.why,
        "needs not a pod fabric, but the fabric is an UltraServer pod"
    );
    let g = gate_inter_rdh(&intra(AllReduce, 8));
    assert_eq!(g.why, "needs node_n > 1 (inter), but node_n = 1");
    assert!(!gate_inter_rdh(&inter(AllToAll, 8, 1)).pass);
}

#[test]
fn mesh_truth_table_and_caps() {
    // Checks the report text a user reads, on purpose.
    assert!(gate_mesh(&intra(AllReduce, 8)).pass);
    let big = GateCtx {
        op_bytes: 0x8001,
        ..intra(AllReduce, 8)
    };
    assert_eq!(
        gate_mesh(&big).why,
        "needs the op size within the mesh cap, but 32769 B > 32768 B"
    );
    assert!(mesh_available(&big).pass);
    // The t0 shape (1 node, 2 ranks) takes up to 256 MiB.
    let t0 = GateCtx {
        op_bytes: 1 << 28,
        ..intra(AllReduce, 2)
    };
    assert!(gate_mesh(&t0).pass);
    assert!(
        !gate_mesh(&GateCtx {
            op_bytes: (1 << 28) + 1,
            ..t0
        })
        .pass
    );
    assert_eq!(mesh_cap(&inter(AllReduce, 2, 2)), 0x8000);
    assert_eq!(mesh_cap(&inter(AllReduce, 512, 1)), (8 << 20) / 512);
    let g = gate_mesh(&GateCtx {
        mesh_enabled: false,
        ..intra(AllReduce, 8)
    });
    assert_eq!(
        g.why,
        "needs mesh enabled (OPENNRT_CC_MESH=1), but mesh is disabled"
    );
    let g = gate_mesh(&intra(AllReduce, 33));
    assert_eq!(
        g.why,
        "needs rank_n <= 32 for a reduce (CCE sources), but rank_n = 33"
    );
    assert!(gate_mesh(&intra(AllGather, 64)).pass);
    assert!(gate_mesh(&intra(AllToAll, 64)).pass);
    assert!(!gate_mesh(&intra(Permute, 4)).pass);
    assert!(!gate_mesh(&intra(Barrier, 4)).pass);
    assert!(gate_mesh(&intra(AllReduce, 8))
        .why
        .ends_with("1024 B <= cap 32768 B"));
}

#[test]
fn ring_truth_table() {
    for op in [
        AllReduce,
        AllGather,
        ReduceScatter,
        Permute,
        PermuteImplicit,
        PermuteReduceImplicit,
        Send,
        Recv,
        Barrier,
    ] {
        assert!(gate_ring(&intra(op, 4)).pass, "{op:?}");
    }
    assert_eq!(
        gate_ring(&intra(AllToAllV, 4)).why,
        "needs any op but all-to-all, but the op is all-to-all-v"
    );
    assert!(!gate_of(Algorithm::Ring, &intra(AllToAll, 4)).pass);
}

#[test]
fn mesh_flavours() {
    assert_eq!(mesh_flavour(&intra(AllReduce, 8)), Some(MESH_TRN2));
    assert_eq!(mesh_flavour(&inter(AllReduce, 8, 1)), Some(MESH_TRN2));
    assert_eq!(mesh_flavour(&inter(AllReduce, 2, 4)), Some(MESH_FULL));
    let pod = GateCtx {
        fabric: Fabric::PodP2p,
        ..inter(AllReduce, 4, 2)
    };
    assert_eq!(mesh_flavour(&pod), Some(MESH_TRN2));
    let sw = GateCtx {
        fabric: Fabric::Switch,
        ..inter(AllReduce, 2, 4)
    };
    assert_eq!(mesh_flavour(&sw), Some(MESH_SWITCH));
    let sw1 = GateCtx {
        fabric: Fabric::Switch,
        ..inter(AllReduce, 4, 1)
    };
    assert_eq!(mesh_flavour(&sw1), Some(MESH_TRN2));
    let v2 = GateCtx {
        generation: Generation::V2,
        lnc: 1,
        ..inter(AllReduce, 2, 4)
    };
    assert_eq!(mesh_flavour(&v2), Some(MESH_FULL));
    assert_eq!(
        mesh_flavour(&GateCtx {
            generation: Generation::V4,
            ..intra(AllGather, 4)
        }),
        Some(MESH_TRN2)
    );
    assert_eq!(MESH_GROUPED, 1);
}

#[test]
fn legality() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    assert!(check_legal(AllReduce, Algorithm::SingleCycleRing, true).is_ok());
    let e = check_legal(AllGather, Algorithm::SingleCycleRing, true).unwrap_err();
    assert_eq!(
        e.message(),
        "single_cycle_ring is illegal for all-gather: SINGLE_CYCLE_RING is all-reduce only, not \
         all-gather (docs/contract/lowering.md §3.2)"
    );
    let e = check_legal(AllReduce, Algorithm::Kangaring, true).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert!(e.message().contains("never on an inter leg"));
    assert!(check_legal(AllReduce, Algorithm::Kangaring, false).is_ok());
    let e = check_legal(AllToAll, Algorithm::Ring, false).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert!(e.message().contains("all-to-all must be MESH"));
    assert!(check_legal(AllToAllV, Algorithm::Mesh, true).is_ok());
    assert!(check_legal(AllReduce, Algorithm::IntraRdh, true).is_err());
    assert!(check_legal(AllReduce, Algorithm::InterRdh, false).is_err());
    let e = check_legal(Permute, Algorithm::Mesh, false).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert!(e.message().contains("point-to-point ring driver"));
    assert!(check_legal(Send, Algorithm::Ring, true).is_ok());
}

#[test]
fn enc_op_mapping() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    assert_eq!(collective_op_from_enc(1).unwrap(), AllReduce);
    assert_eq!(collective_op_from_enc(0).unwrap(), AllGather);
    assert_eq!(collective_op_from_enc(12).unwrap(), AllToAllV);
    for (v, name) in [(2, "BROADCAST"), (3, "REDUCE"), (9, "PERMUTE_REDUCE")] {
        let e = collective_op_from_enc(v).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
        assert!(
            e.message().contains(name) && e.message().contains("not a supported"),
            "{e}"
        );
    }
    assert!(collective_op_from_enc(13).is_err());
}

//! Precedence, HIER decomposition, forcing, env parsing and reason strings of
//! [`crate::lower::select`] (docs/contract/lowering.md §3.3–§3.5, §4.7).

use crate::isa::enums::Dtype;
use crate::lower::program::Algorithm::{self, *};
use crate::lower::request::{CollectiveOp, CollectiveOp::*, CollectiveRequest, ReduceOp};
use crate::lower::select::*;
use crate::lower::topology::Topology;

fn req(op: CollectiveOp, group: Vec<u32>, count: u64) -> CollectiveRequest {
    CollectiveRequest::new(
        op,
        Dtype::Bf16,
        matches!(op, AllReduce | ReduceScatter).then_some(ReduceOp::Add),
        count,
        group,
        0,
    )
}

fn topo(s: &str) -> Topology {
    Topology::parse(s, 0).unwrap()
}

fn auto() -> SelectConfig {
    SelectConfig::default()
}

fn forced(a: Algorithm) -> SelectConfig {
    SelectConfig {
        forced: Some(a),
        ..auto()
    }
}

fn sel(op: CollectiveOp, group: Vec<u32>, count: u64, t: &str, c: &SelectConfig) -> Selection {
    select(&req(op, group, count), &topo(t), c).unwrap()
}

fn err(op: CollectiveOp, group: Vec<u32>, count: u64, t: &str, c: &SelectConfig) -> String {
    let e = select(&req(op, group, count), &topo(t), c).unwrap_err();
    assert_eq!(e.kind(), crate::error::ErrorKind::Invalid, "{e}");
    e.message().to_string()
}

fn range(a: u32, b: u32) -> Vec<u32> {
    (a..b).collect()
}

/// One rank per node on `nodes` trn1.32xlarge nodes.
fn one_per_node(nodes: u32) -> Vec<u32> {
    (0..nodes).map(|n| n * 32).collect()
}

const SMALL: u64 = 1024; // 2 KiB of bf16
const LARGE: u64 = 1 << 22; // 8 MiB of bf16

#[test]
fn trn2_single_node_small_is_mesh_large_is_kangaring_or_ring() {
    let s = sel(AllReduce, range(0, 8), SMALL, "trn2.48xlarge", &auto());
    assert_eq!((s.algorithm, s.mesh_sub_type), (Mesh, Some(MESH_TRN2)));
    assert_eq!(s.legs.len(), 1);
    assert_eq!(s.legs[0].groups, vec![range(0, 8)]);
    assert_eq!(
        (s.legs[0].name.as_str(), s.legs[0].role, s.legs[0].op),
        ("all-reduce", LegRole::Flat, AllReduce)
    );
    let s = sel(AllReduce, range(0, 8), LARGE, "trn2.48xlarge", &auto());
    assert_eq!((s.algorithm, s.mesh_sub_type), (Kangaring, None));
    // LNC 2 needs more than 4 ranks for kangaring.
    let s = sel(AllReduce, range(0, 4), LARGE, "trn2.48xlarge", &auto());
    assert_eq!(s.algorithm, Ring);
    // LNC 1 needs more than 8.
    let s = sel(
        ReduceScatter,
        range(0, 8),
        LARGE,
        "trn2.48xlarge:lnc=1",
        &auto(),
    );
    assert_eq!(s.algorithm, Ring);
    let s = sel(AllGather, range(0, 16), LARGE, "trn1.32xlarge", &auto());
    assert_eq!(s.algorithm, Kangaring);
    // The 2-rank mesh (t0) takes up to 256 MiB.
    let s = sel(AllReduce, vec![0, 1], LARGE, "trn2.48xlarge", &auto());
    assert_eq!(s.algorithm, Mesh);
}

#[test]
fn rdh_mode_puts_intra_rdh_first() {
    let c = SelectConfig {
        rdh: true,
        ..auto()
    };
    let s = sel(AllReduce, range(0, 8), SMALL, "trn2.48xlarge", &c);
    assert_eq!(s.algorithm, IntraRdh);
    assert_eq!(s.mesh_sub_type, None);
    // Not for 6 ranks.
    let s = sel(AllReduce, range(0, 6), SMALL, "trn2.48xlarge", &c);
    assert_eq!(s.algorithm, Mesh);
}

#[test]
fn inter_one_rank_per_node() {
    let t = "trn1.32xlarge:nodes=8";
    // Gathers and scatters: INTER_RDH wins once mesh is over its cap.
    let s = sel(AllGather, one_per_node(8), LARGE, t, &auto());
    assert_eq!(s.algorithm, InterRdh);
    let s = sel(ReduceScatter, one_per_node(8), LARGE, t, &auto());
    assert_eq!(s.algorithm, InterRdh);
    // All-reduce: SINGLE_CYCLE_RING precedes INTER_RDH (docs/contract/lowering.md §3.3)...
    let s = sel(AllReduce, one_per_node(8), LARGE, t, &auto());
    assert_eq!(s.algorithm, SingleCycleRing);
    // ...unless it is not allowed.
    let c = SelectConfig::from_lookup(|k| {
        (k == "OPENNRT_CC_ALGOS").then(|| "ring,mesh,inter_rdh".to_string())
    })
    .unwrap();
    assert_eq!(
        sel(AllReduce, one_per_node(8), LARGE, t, &c).algorithm,
        InterRdh
    );
    // Small: mesh first.
    let s = sel(AllReduce, one_per_node(8), SMALL, t, &auto());
    assert_eq!((s.algorithm, s.mesh_sub_type), (Mesh, Some(MESH_FULL)));
    // Fewer than 8 nodes: no RDH.
    let s = sel(AllGather, one_per_node(4), LARGE, t, &auto());
    assert_eq!(s.algorithm, Ring);
    // Not on a pod fabric.
    let g: Vec<u32> = (0..8).map(|n| n * 64).collect();
    let s = sel(
        AllGather,
        g.clone(),
        LARGE,
        "custom:8x16x8:lnc=2:fabric=pod",
        &auto(),
    );
    assert_eq!(s.algorithm, Ring);
    let s = sel(AllGather, g, LARGE, "custom:8x16x8:lnc=2", &auto());
    assert_eq!(s.algorithm, InterRdh);
}

#[test]
fn single_cycle_ring_is_refused_for_all_gather() {
    // Checks the message a user reads, on purpose.
    let t = "trn1.32xlarge:nodes=8";
    let e = err(
        AllGather,
        one_per_node(8),
        LARGE,
        t,
        &forced(SingleCycleRing),
    );
    assert!(e.contains("SINGLE_CYCLE_RING is all-reduce only"), "{e}");
    assert!(e.starts_with("forced algorithm single_cycle_ring (OPENNRT_CC_ALGO) is illegal for all-gather on 8 ranks"), "{e}");
    // Never chosen automatically for all-gather either.
    for count in [0, SMALL, LARGE] {
        assert_ne!(
            sel(AllGather, one_per_node(8), count, t, &auto()).algorithm,
            SingleCycleRing
        );
    }
    // Legal for all-reduce one rank per node; not within a node.
    assert_eq!(
        sel(
            AllReduce,
            one_per_node(2),
            LARGE,
            t,
            &forced(SingleCycleRing)
        )
        .algorithm,
        SingleCycleRing
    );
    let e = err(AllReduce, range(0, 4), LARGE, t, &forced(SingleCycleRing));
    assert!(
        e.contains("needs node_n > 1 (inter), but node_n = 1"),
        "{e}"
    );
}

#[test]
fn all_to_all_is_always_mesh() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    for (op, group, t) in [
        (AllToAll, range(0, 64), "trn2.48xlarge"),
        (AllToAllV, range(0, 3), "trn1.32xlarge"),
        (AllToAll, one_per_node(8), "trn1.32xlarge:nodes=8"),
        (AllToAll, range(0, 64), "trn1.32xlarge:nodes=2"),
    ] {
        for count in [0, 1, LARGE] {
            let s = sel(op, group.clone(), count, t, &auto());
            assert_eq!(s.algorithm, Mesh, "{op:?} {t} {count}");
            assert!(s.mesh_sub_type.is_some());
        }
    }
    let e = err(AllToAll, range(0, 4), 1, "trn2.48xlarge", &forced(Ring));
    assert!(e.contains("all-to-all must be MESH"), "{e}");
    let off = SelectConfig {
        mesh: false,
        ..auto()
    };
    let e = err(AllToAll, range(0, 4), 1, "trn2.48xlarge", &off);
    assert_eq!(
        e,
        "all-to-all must be MESH (docs/contract/lowering.md §3.3) but mesh is unavailable: needs \
         mesh enabled (OPENNRT_CC_MESH=1), but mesh is disabled"
    );
}

#[test]
fn hier_all_reduce_decomposes_into_three_legs() {
    // 2 nodes of trn2 LNC 2: 64 ranks per node; 128-rank all-reduce of 8 MiB.
    let s = sel(
        AllReduce,
        range(0, 128),
        LARGE,
        "trn2.48xlarge:nodes=2",
        &auto(),
    );
    assert_eq!(s.algorithm, Hier);
    let names: Vec<_> = s
        .legs
        .iter()
        .map(|l| (l.name.as_str(), l.role, l.op, l.algorithm))
        .collect();
    use LegRole::{Inter, Intra};
    assert_eq!(
        names,
        vec![
            ("intra reduce-scatter", Intra, ReduceScatter, Kangaring),
            ("inter all-reduce", Inter, AllReduce, SingleCycleRing),
            ("intra all-gather", Intra, AllGather, Kangaring),
        ]
    );
    assert_eq!(s.legs[0].groups, vec![range(0, 64), range(64, 128)]);
    assert_eq!(s.legs[2].groups, s.legs[0].groups);
    let inter = &s.legs[1].groups;
    assert_eq!(inter.len(), 64);
    assert_eq!(inter[0], vec![0, 64]);
    assert_eq!(inter[63], vec![63, 127]);
    // Every rank appears exactly once per leg.
    for leg in &s.legs {
        let mut all: Vec<u32> = leg.groups.concat();
        all.sort_unstable();
        assert_eq!(all, range(0, 128), "{}", leg.name);
    }
}

#[test]
fn hier_leg_order_per_op() {
    let t = "trn1.32xlarge:nodes=2";
    let s = sel(AllGather, range(0, 64), LARGE, t, &auto());
    assert_eq!(s.algorithm, Hier);
    let names: Vec<_> = s.legs.iter().map(|l| (l.name.as_str(), l.role)).collect();
    assert_eq!(
        names,
        [
            ("inter all-gather", LegRole::Inter),
            ("intra all-gather", LegRole::Intra)
        ]
    );
    assert_eq!(s.legs[0].groups.len(), 32);
    let s = sel(ReduceScatter, range(0, 64), LARGE, t, &auto());
    let names: Vec<_> = s.legs.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["intra reduce-scatter", "inter reduce-scatter"]);
    // Two ranks per node in group order interleaved across nodes.
    let s = sel(AllReduce, vec![0, 32, 1, 33], LARGE, t, &auto());
    assert_eq!(s.algorithm, Hier);
    assert_eq!(s.legs[0].groups, vec![vec![0, 2], vec![1, 3]]);
    assert_eq!(s.legs[1].groups, vec![vec![0, 1], vec![2, 3]]);
    // Inter all-reduce of 2 nodes, large: single-cycle ring; the 2-rank intra legs are the
    // t0 mesh shape (cap 256 MiB).
    assert_eq!(s.legs[1].algorithm, SingleCycleRing);
    assert_eq!(s.legs[0].algorithm, Mesh);
}

#[test]
fn hier_legs_use_slice_sizes_and_never_kangaring_inter() {
    let t = "trn1.32xlarge:nodes=2";
    // Small enough for a flat mesh...
    let s = sel(AllGather, range(0, 64), 8192 / 64, t, &auto());
    assert_eq!(s.algorithm, Mesh);
    // ...and, forced hierarchical, 16 KiB per rank over 32 local ranks: intra slice 512 B →
    // mesh; inter 1 KiB → mesh.
    let s = sel(AllGather, range(0, 64), 8192 / 64, t, &forced(Hier));
    assert_eq!(s.algorithm, Hier, "{:?}", s.reasons);
    assert!(s
        .reasons
        .iter()
        .any(|r| r.starts_with("alg_intra_allg = mesh on 512 B")));
    assert!(s
        .reasons
        .iter()
        .any(|r| r.starts_with("alg_inter_allg = mesh on 1024 B")));
    assert!(s.legs.iter().all(|l| l.algorithm == Mesh));
    assert_eq!(s.legs[0].mesh_sub_type, Some(MESH_FULL));
    for t in [
        "trn1.32xlarge:nodes=4",
        "trn2.48xlarge:nodes=2",
        "trn2-ultraserver",
    ] {
        let tp = topo(t);
        let n = tp.logical_cores();
        for op in [AllReduce, AllGather, ReduceScatter] {
            for count in [0, 1, SMALL, LARGE] {
                let s = select(&req(op, range(0, n), count), &tp, &auto()).unwrap();
                for leg in &s.legs {
                    if leg.role == LegRole::Inter {
                        assert_ne!(leg.algorithm, Kangaring, "{t} {op:?} {count}");
                        assert_ne!(leg.algorithm, IntraRdh);
                    }
                }
            }
        }
    }
}

#[test]
fn forcing() {
    // Checks the report text a user reads, on purpose.
    let t = "trn1.32xlarge:nodes=2";
    // Ring keeps a hierarchical group flat.
    let s = sel(AllReduce, range(0, 64), LARGE, t, &forced(Ring));
    assert_eq!((s.algorithm, s.legs.len()), (Ring, 1));
    assert_eq!(s.legs[0].groups, vec![range(0, 64)]);
    // Hier on one node is illegal.
    let e = err(AllReduce, range(0, 8), LARGE, t, &forced(Hier));
    assert!(e.contains("needs node_n > 1 (inter)"), "{e}");
    // Forced hier legs still choose.
    let s = sel(AllReduce, range(0, 64), SMALL, t, &forced(Hier));
    assert_eq!(s.algorithm, Hier);
    assert_eq!(s.legs.len(), 3);
    // Mesh: the cap is a preference, the fan-in is not.
    let s = sel(
        AllReduce,
        range(0, 8),
        LARGE,
        "trn2.48xlarge",
        &forced(Mesh),
    );
    assert_eq!((s.algorithm, s.mesh_sub_type), (Mesh, Some(MESH_TRN2)));
    let e = err(
        AllReduce,
        range(0, 64),
        SMALL,
        "trn2.48xlarge",
        &forced(Mesh),
    );
    assert!(e.contains("rank_n <= 32"), "{e}");
    // Forcing intra_rdh turns RDH mode on; the rank count still matters.
    let s = sel(
        AllGather,
        range(0, 16),
        LARGE,
        "trn2.48xlarge",
        &forced(IntraRdh),
    );
    assert_eq!(s.algorithm, IntraRdh);
    let e = err(
        AllGather,
        range(0, 12),
        LARGE,
        "trn2.48xlarge",
        &forced(IntraRdh),
    );
    assert!(e.contains("rank_n in {4, 8, 16, 64}"), "{e}");
    // Kangaring across nodes.
    let e = err(AllReduce, range(0, 64), LARGE, t, &forced(Kangaring));
    assert!(e.contains("KANGARING is intra-node only"), "{e}");
    // Inter RDH within a node.
    let e = err(AllReduce, range(0, 8), LARGE, t, &forced(InterRdh));
    assert!(e.contains("INTER_RDH is inter-node only"), "{e}");
    // A forced algorithm outside the allowed set.
    let c = SelectConfig {
        allowed: 1 << Ring as u16,
        ..forced(Mesh)
    };
    let e = err(AllReduce, range(0, 8), SMALL, t, &c);
    assert!(e.ends_with("it is not in OPENNRT_CC_ALGOS"), "{e}");
}

#[test]
fn point_to_point_ops_and_barrier_use_the_ring_driver() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    for op in [
        Permute,
        PermuteImplicit,
        PermuteReduceImplicit,
        Send,
        Recv,
        Barrier,
    ] {
        let s = sel(op, range(0, 16), SMALL, "trn1.32xlarge:nodes=2", &auto());
        assert_eq!(s.algorithm, Ring, "{op:?}");
        let s = sel(op, vec![0, 40], LARGE, "trn1.32xlarge:nodes=2", &auto());
        assert_eq!(s.algorithm, Ring, "{op:?}");
        let e = err(op, range(0, 4), SMALL, "trn1.32xlarge", &forced(Mesh));
        assert!(e.contains("point-to-point ring driver"), "{e}");
    }
    // Explicit pairs block HIER.
    let mut r = req(AllReduce, range(0, 64), LARGE);
    r.pairs = vec![(0, 1)];
    let s = select(&r, &topo("trn1.32xlarge:nodes=2"), &auto()).unwrap();
    assert_eq!(s.algorithm, Ring);
}

#[test]
fn shapes_that_fall_back_to_ring() {
    // Not uniform (3 + 1): no HIER.
    let s = sel(
        AllReduce,
        vec![0, 1, 2, 32],
        LARGE,
        "trn1.32xlarge:nodes=2",
        &auto(),
    );
    assert_eq!(s.algorithm, Ring);
    assert!(s
        .reasons
        .iter()
        .any(|r| r == "gate hier: fail: needs node_n * local_rank_n == rank_n, but 2 * 3 != 4"));
    // Multi-stream blocks kangaring (a stream other than 0 implies it).
    let mut r = req(AllReduce, range(0, 16), LARGE);
    r.stream = 1;
    let s = select(&r, &topo("trn1.32xlarge"), &auto()).unwrap();
    assert_eq!(s.algorithm, Ring);
    assert!(s
        .reasons
        .contains(&"gate kangaring: fail: needs a single stream, but multi-stream".to_string()));
    // A single rank.
    assert_eq!(
        sel(AllReduce, vec![0], LARGE, "trn1.32xlarge", &auto()).algorithm,
        Ring
    );
}

#[test]
fn allowed_mask_and_errors() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    let only_mesh = SelectConfig {
        allowed: 1 << Mesh as u16,
        ..auto()
    };
    let e = err(AllReduce, range(0, 8), LARGE, "trn2.48xlarge", &only_mesh);
    assert!(e.contains("OPENNRT_CC_ALGOS excludes ring"), "{e}");
    let no_kanga = SelectConfig {
        allowed: ALL_ALGORITHMS & !(1 << Kangaring as u16),
        ..auto()
    };
    let s = sel(AllReduce, range(0, 8), LARGE, "trn2.48xlarge", &no_kanga);
    assert_eq!(s.algorithm, Ring);
    assert!(s
        .reasons
        .iter()
        .any(|r| r.starts_with("gate kangaring: pass")
            && r.ends_with("[not allowed by OPENNRT_CC_ALGOS]")));
    // A group outside the topology.
    let e = select(
        &req(AllReduce, vec![0, 64], 1),
        &topo("trn2.48xlarge"),
        &auto(),
    )
    .unwrap_err();
    assert!(e.message().contains("outside"), "{e}");
}

#[test]
fn reason_strings() {
    let s = sel(AllReduce, range(0, 8), SMALL, "trn2.48xlarge", &auto());
    assert_eq!(
        s.reasons[0],
        "all-reduce of 2048 B per rank on 8 ranks (1 node(s), local_rank_n 8) of \
         trn2.48xlarge:nodes=1:lnc=2"
    );
    let gates: Vec<_> = s.reasons[1..8]
        .iter()
        .map(|r| r.split(':').next().unwrap())
        .collect();
    assert_eq!(
        gates,
        [
            "gate hier",
            "gate intra_rdh",
            "gate mesh",
            "gate kangaring",
            "gate single_cycle_ring",
            "gate inter_rdh",
            "gate ring"
        ]
    );
    assert_eq!(
        s.reasons[1],
        "gate hier: fail: needs node_n > 1 (inter), but node_n = 1"
    );
    assert_eq!(
        s.reasons[2],
        "gate intra_rdh: fail: needs RDH mode (OPENNRT_CC_RDH=1), but RDH mode is off"
    );
    assert!(s.reasons[3].starts_with("gate mesh: pass (all-reduce, all-gather"));
    assert_eq!(
        s.reasons[4],
        "gate kangaring: pass (all-reduce, all-gather or reduce-scatter; node_n == 1 (intra \
         only); a single stream; (lnc == 2 and rank_n > 4) or (lnc == 1 and rank_n > 8))"
    );
    assert_eq!(s.reasons[7], "gate ring: pass (any op but all-to-all)");
    assert_eq!(
        s.reasons[8],
        "chose mesh: first passing gate in the flat precedence intra_rdh > mesh > kangaring > \
         single_cycle_ring > inter_rdh (docs/contract/lowering.md §3.3)"
    );
    assert_eq!(
        s.reasons[9],
        "mesh flavour (algo_sub_type) 2 (docs/contract/lowering.md §3.5)"
    );
    assert_eq!(s.reasons.len(), 10);

    let s = sel(AllReduce, range(0, 4), LARGE, "trn2.48xlarge", &auto());
    assert_eq!(
        s.reasons.last().unwrap(),
        "chose ring: no other gate passes; ring is the fallback (docs/contract/lowering.md §3.3)"
    );
    let s = sel(AllToAll, range(0, 4), LARGE, "trn2.48xlarge", &auto());
    assert!(s.reasons.contains(
        &"chose mesh: all-to-all must be MESH (docs/contract/lowering.md §3.3); the size cap does \
          not apply"
            .to_string()
    ));
    let s = sel(
        AllReduce,
        range(0, 16),
        LARGE,
        "trn1.32xlarge",
        &forced(Kangaring),
    );
    assert!(s
        .reasons
        .last()
        .unwrap()
        .starts_with("chose kangaring: forced by OPENNRT_CC_ALGO ("));

    let s = sel(
        AllReduce,
        range(0, 64),
        LARGE,
        "trn1.32xlarge:nodes=2",
        &auto(),
    );
    assert!(s.reasons.contains(
        &"chose hier: no flat-family algorithm applies and the hierarchical gate passes \
          (docs/contract/lowering.md §3.3)"
            .to_string()
    ));
    let slots: Vec<_> = s
        .reasons
        .iter()
        .filter(|r| r.starts_with("alg_"))
        .map(|r| r.split(" (").next().unwrap())
        .collect();
    assert_eq!(
        slots,
        [
            "alg_intra_redsct = kangaring on 262144 B",
            "alg_inter_allr = single_cycle_ring on 524288 B",
            "alg_intra_allg = kangaring on 262144 B"
        ]
    );
    let last = s
        .reasons
        .iter()
        .find(|r| r.starts_with("alg_inter_allr"))
        .unwrap();
    assert!(
        last.contains("mesh: fail: needs the op size within the mesh cap, but 524288 B > 32768 B")
    );
    assert!(last.contains("inter_rdh: fail: needs rank_n a power of two >= 8, but rank_n = 2"));
    let s = sel(
        AllGather,
        range(0, 128),
        LARGE,
        "trn1.32xlarge:nodes=4",
        &auto(),
    );
    let ring_slot = s
        .reasons
        .iter()
        .find(|r| r.starts_with("alg_inter_allg"))
        .unwrap();
    assert!(
        ring_slot.starts_with("alg_inter_allg = ring on"),
        "{ring_slot}"
    );
    assert!(ring_slot.contains("(fallback; mesh: fail"), "{ring_slot}");
}

/// The selection knobs read from the environment (`SelectConfig::from_lookup`).
mod knobs {
    use super::super::*;
    use std::collections::HashMap;
    use Algorithm::{Kangaring, Mesh, Ring};

    #[test]
    fn env_knobs() {
        let look = |vars: &[(&str, &str)]| {
            let m: HashMap<String, String> = vars
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            SelectConfig::from_lookup(|k| m.get(k).cloned())
        };
        assert_eq!(look(&[]).unwrap(), SelectConfig::default());
        let d = SelectConfig::default();
        assert_eq!(
            (d.forced, d.rdh, d.mesh, d.multi_stream),
            (None, false, true, false)
        );
        assert!(Algorithm::ALL.iter().all(|&a| d.allows(a)));
        let c = look(&[("OPENNRT_CC_ALGO", "Kangaring")]).unwrap();
        assert_eq!(c.forced, Some(Kangaring));
        assert_eq!(look(&[("OPENNRT_CC_ALGO", "auto")]).unwrap().forced, None);
        assert_eq!(look(&[("OPENNRT_CC_ALGO", "")]).unwrap().forced, None);
        let e = look(&[("OPENNRT_CC_ALGO", "tree")]).unwrap_err();
        assert_eq!(e.fields().field.as_deref(), Some("OPENNRT_CC_ALGO"));
        assert_eq!(e.fields().actual.as_deref(), Some("tree"));
        // The log line lists the choices.
        assert_eq!(
            e.message(),
            "OPENNRT_CC_ALGO=\"tree\": not an algorithm; use auto or one of ring, hier, mesh, \
             kangaring, single_cycle_ring, intra_rdh, inter_rdh"
        );
        assert!(look(&[("OPENNRT_CC_RDH", "1")]).unwrap().rdh);
        assert!(!look(&[("OPENNRT_CC_MESH", "0")]).unwrap().mesh);
        let e = look(&[("OPENNRT_CC_RDH", "yes")]).unwrap_err();
        assert_eq!(e.message(), "OPENNRT_CC_RDH=\"yes\": must be 0 or 1");
        assert!(look(&[("OPENNRT_CC_MESH", "2")]).is_err());
        let c = look(&[("OPENNRT_CC_ALGOS", "ring, mesh")]).unwrap();
        assert_eq!(c.allowed, (1 << Ring as u16) | (1 << Mesh as u16));
        assert!(c.allows(Mesh) && !c.allows(Kangaring));
        let e = look(&[("OPENNRT_CC_ALGOS", "ring,nccl")]).unwrap_err();
        assert_eq!(e.fields().field.as_deref(), Some("OPENNRT_CC_ALGOS"));
        assert_eq!(e.fields().actual.as_deref(), Some("ring,nccl"));
        assert_eq!(ALL_ALGORITHMS, 0b1011_1111);
    }
}

use super::*;
use crate::error::ErrorKind;
use crate::lower::topology::{Fabric, Generation};

#[test]
fn trn1_placement() {
    let t = Topology::parse("trn1.32xlarge:nodes=2", 64).unwrap();
    let p = t.place(0).unwrap();
    assert_eq!((p.node, p.device, p.core, p.die), (0, 0, 0, 0));
    assert_eq!((p.physical_cores.clone(), p.topsps.clone()), (0..1, 0..3));
    let p = t.place(35).unwrap();
    assert_eq!((p.node, p.device, p.core, p.node_core), (1, 1, 1, 3));
    assert_eq!((p.physical_cores.clone(), p.topsps.clone()), (1..2, 3..6));
    assert!(t.place(64).is_err());
    assert_eq!(t.die_peer(3).unwrap(), None);
}

#[test]
fn trn2_placement_lnc2_and_lnc1() {
    let t = Topology::parse("trn2.48xlarge", 64).unwrap();
    let p = t.place(6).unwrap();
    // 4 logical cores per device: device 1, core 2 → physical 4..6, die 1, TOP_SPs 8..12.
    assert_eq!((p.device, p.core, p.physical_cores.clone()), (1, 2, 4..6));
    assert_eq!((p.die, p.topsps.clone()), (1, 8..12));
    assert_eq!(t.die_peer(6).unwrap(), Some(4));
    assert_eq!(t.die_peer(4).unwrap(), Some(6));
    let t = Topology::parse("trn2.48xlarge:lnc=1", 128).unwrap();
    let p = t.place(11).unwrap();
    assert_eq!((p.device, p.core, p.physical_cores.clone()), (1, 3, 3..4));
    assert_eq!((p.die, p.topsps.clone()), (0, 6..8));
    let p = t.place(12).unwrap();
    assert_eq!((p.die, p.topsps.clone()), (1, 8..10));
    assert_eq!(t.die_peer(12).unwrap(), Some(8));
}

#[test]
fn routing_bits() {
    let t = Topology::parse("trn2.48xlarge", 64).unwrap();
    let p = t.place(4 * 5 + 3).unwrap(); // device 5, core 3 → die 1
    assert_eq!(p.soc_route_bits(), (1 << 54) | (5 << 48) | (1 << 47));
    assert_eq!(
        p.soc_address(0x1234 | (1 << 60)),
        p.soc_route_bits() | 0x1234
    );
    let _ = (SOC_EXIT_SENG, SOC_EXIT_DIE, SOC_NEIGHBOR_ROUTE);
}

#[test]
fn group_shapes() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    let t = Topology::parse("trn1.32xlarge:nodes=4", 128).unwrap();
    // One rank per node.
    let s = t.group_shape(&[0, 32, 64, 96]).unwrap();
    assert_eq!((s.rank_n, s.node_n, s.local_rank_n), (4, 4, 1));
    assert!(s.is_inter() && s.is_uniform());
    assert_eq!(s.inter_groups(), vec![vec![0, 1, 2, 3]]);
    // Two nodes, two ranks each, interleaved in group order.
    let s = t.group_shape(&[0, 32, 1, 33]).unwrap();
    assert_eq!((s.node_n, s.local_rank_n), (2, 2));
    assert_eq!(s.by_node, vec![vec![0, 2], vec![1, 3]]);
    assert_eq!(s.intra_groups(), vec![vec![0, 2], vec![1, 3]]);
    assert_eq!(s.inter_groups(), vec![vec![0, 1], vec![2, 3]]);
    // Not uniform: 3 + 1.
    let s = t.group_shape(&[0, 1, 2, 32]).unwrap();
    assert_eq!((s.node_n, s.local_rank_n, s.is_uniform()), (2, 3, false));
    assert!(s.inter_groups().is_empty());
    // Intra.
    let s = t.group_shape(&[5, 4]).unwrap();
    assert!(s.is_intra() && s.is_uniform());
    // Errors.
    assert!(t.group_shape(&[]).is_err());
    let e = t.group_shape(&[1, 1]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert!(e.message().contains("twice"), "{e}");
    assert!(t.group_shape(&[128]).is_err());
}

#[test]
fn ultraserver_shape() {
    let t = Topology::parse("trn2-ultraserver", 256).unwrap();
    assert_eq!(
        (t.nodes, t.fabric, t.logical_cores()),
        (4, Fabric::PodP2p, 256)
    );
    let s = t.group_shape(&[0, 64, 128, 192]).unwrap();
    assert_eq!((s.node_n, s.local_rank_n), (4, 1));
}

#[test]
fn hardware_data() {
    assert_eq!(cross_die_peer_engine(4), 6);
    assert_eq!(cross_die_peer_engine(6), 4);
    assert_eq!(cross_die_peer_engine(13), 15);
    assert_eq!(kangaring_engines(KangaPath::D2d, true).len(), 8);
    assert_eq!(kangaring_engines(KangaPath::D2d, false), &[4, 5, 6, 7]);
    assert_eq!(
        kangaring_engines(KangaPath::Pcie, true)[4..],
        [8, 9, 10, 11]
    );
    assert_eq!(kangaring_engines(KangaPath::Pcie, false), &[0, 1, 2, 3]);
    // Every d2d engine's cross-die peer is a d2d engine too.
    for &e in kangaring_engines(KangaPath::D2d, true) {
        assert!(kangaring_engines(KangaPath::D2d, true).contains(&cross_die_peer_engine(e)));
    }
}

#[test]
fn c2c_ports_form_a_ring_and_torus() {
    let t = Topology::parse("trn2.48xlarge", 1).unwrap();
    assert_eq!(t.c2c_ports(), 4);
    assert_eq!(t.c2c_peer(0, 0), Some(1));
    assert_eq!(t.c2c_peer(0, 1), Some(15));
    assert_eq!(t.c2c_peer(0, 2), Some(4));
    assert_eq!(t.c2c_peer(0, 3), Some(12));
    assert_eq!(t.c2c_peer(15, 0), Some(0));
    assert_eq!(t.c2c_peer(0, 4), None);
    assert_eq!(t.c2c_peer(16, 0), None);
    // Symmetric: port 0 ↔ 1, 2 ↔ 3.
    for d in 0..16 {
        for (a, b) in [(0, 1), (2, 3)] {
            let peer = t.c2c_peer(d, a).unwrap();
            assert_eq!(t.c2c_peer(peer, b), Some(d));
        }
    }
    let small = Topology::custom(1, 3, 2, 1, Generation::V3, Fabric::None).unwrap();
    assert_eq!(small.c2c_peer(2, 0), Some(0));
    assert_eq!(small.c2c_peer(2, 2), None);
    let one = Topology::parse("trn2.3xlarge", 1).unwrap();
    assert_eq!(one.c2c_peer(0, 0), None);
}

#[test]
fn custom_placement() {
    let t = Topology::parse("custom:2x4x8:lnc=2:gen=v4", 0).unwrap();
    assert_eq!(t.logical_cores(), 32);
    let p = t.place(17).unwrap();
    assert_eq!(
        (p.node, p.device, p.core, p.topsps.clone()),
        (1, 0, 1, 4..8)
    );
    // Every logical core of a device owns disjoint TOP_SPs covering the device's.
    let mut all: Vec<u32> = (0..4).flat_map(|g| t.place(g).unwrap().topsps).collect();
    all.sort_unstable();
    assert_eq!(all, (0..16).collect::<Vec<_>>());
}

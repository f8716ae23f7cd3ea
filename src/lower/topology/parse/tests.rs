use super::*;
use crate::error::ErrorKind;
use crate::lower::topology::{DEFAULT_INSTANCE, INSTANCE_TYPES};
use std::collections::HashMap;

fn lookup(vars: &[(&str, &str)], world: u32) -> Result<Topology> {
    let m: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Topology::from_lookup(|k| m.get(k).cloned(), world)
}

#[test]
fn instance_table_generations() {
    for it in INSTANCE_TYPES {
        let want = if it.arch_name == "trn1" { 5 } else { 12 };
        assert_eq!(it.ncfw_arch_id(), want, "{}", it.name);
        assert_eq!(it.lnc2_allowed, it.generation != Generation::V2);
    }
    assert_eq!(Generation::V4.ncfw_arch_id(), 20);
    assert_eq!(Generation::V2.topsps_per_device(), 6);
    assert_eq!(Generation::V3.topsps_per_device(), 16);
    assert_eq!(Generation::V4.topsps_per_device(), 16);
    assert_eq!(Generation::parse("trn3"), Some(Generation::V4));
    assert_eq!(Generation::parse("V2"), Some(Generation::V2));
    assert_eq!(Generation::parse("v5"), None);
    assert_eq!(InstanceType::by_name(DEFAULT_INSTANCE).unwrap().devices, 16);
}

#[test]
fn instance_forms() {
    let t = Topology::parse("trn2.48xlarge", 8).unwrap();
    assert_eq!((t.nodes, t.lnc, t.generation), (1, 2, Generation::V3));
    assert_eq!(
        (t.logical_cores_per_device(), t.logical_cores_per_node()),
        (4, 64)
    );
    assert_eq!((t.topsps_per_logical_core(), t.dies_per_device()), (4, 2));
    assert_eq!(t.fabric, Fabric::None);
    let t = Topology::parse("trn2.48xlarge:lnc=1", 8).unwrap();
    assert_eq!(
        (
            t.lnc,
            t.logical_cores_per_node(),
            t.topsps_per_logical_core()
        ),
        (1, 128, 2)
    );
    // nodes default to the fewest that hold the world.
    let t = Topology::parse("trn2.48xlarge", 65).unwrap();
    assert_eq!(t.nodes, 2);
    let t = Topology::parse("trn1.32xlarge:nodes=4", 3).unwrap();
    assert_eq!((t.nodes, t.logical_cores()), (4, 128));
    // v2 forces LNC 1.
    let t = Topology::parse("trn1.32xlarge:lnc=2", 1).unwrap();
    assert_eq!(
        (t.lnc, t.topsps_per_logical_core(), t.dies_per_device()),
        (1, 3, 1)
    );
    assert_eq!(t.generation.ncfw_arch_id(), 5);
}

#[test]
fn ultraserver_and_pod_members() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    let t = Topology::parse("trn2-ultraserver", 1).unwrap();
    assert_eq!((t.nodes, t.lnc, t.fabric), (4, 2, Fabric::PodP2p));
    assert_eq!(t.name, "trn2-ultraserver:lnc=2");
    let t = Topology::parse("trn2-ultraserver:lnc=1", 512).unwrap();
    assert_eq!(t.logical_cores(), 512);
    assert!(Topology::parse("trn2-ultraserver:nodes=2", 1).is_err());
    assert!(Topology::parse("trn2-ultraserver", 257).is_err());
    let t = Topology::parse("trn2u.48xlarge", 100).unwrap();
    assert_eq!((t.nodes, t.fabric), (2, Fabric::PodP2p));
    let e = Topology::parse("trn2u.48xlarge:nodes=5", 1).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert!(e.message().contains("pod"), "{e}");
}

#[test]
fn custom_forms() {
    let t = Topology::parse("custom:2x16x8:lnc=2:gen=v3", 128).unwrap();
    assert_eq!(
        (t.nodes, t.devices_per_node, t.cores_per_device, t.lnc),
        (2, 16, 8, 2)
    );
    assert_eq!(
        (t.instance, t.fabric, t.logical_cores()),
        (None, Fabric::None, 128)
    );
    let t = Topology::parse("custom:3x2x2", 12).unwrap();
    assert_eq!((t.lnc, t.generation), (1, Generation::V3));
    let t = Topology::parse("custom:8x1x2:gen=v2:fabric=switch:lnc=2", 16).unwrap();
    assert_eq!(
        (t.lnc, t.fabric, t.topsps_per_logical_core()),
        (1, Fabric::Switch, 3)
    );
    let t = Topology::parse("custom:4x16x8:fabric=pod:gen=trn3", 1).unwrap();
    assert_eq!((t.fabric, t.generation), (Fabric::PodP2p, Generation::V4));
}

#[test]
fn canonical_names_round_trip() {
    for v in [
        "trn1.32xlarge",
        "trn2.48xlarge:lnc=1",
        "trn2-ultraserver",
        "trn2u.48xlarge:nodes=2",
        "custom:2x16x8:lnc=2:gen=v3",
        "custom:1x1x2:gen=v2:fabric=switch",
    ] {
        let t = Topology::parse(v, 1).unwrap();
        assert_eq!(Topology::parse(&t.name, 1).unwrap(), t, "{v} → {}", t.name);
    }
}

#[test]
fn bad_values_list_the_forms() {
    // Checks the message a user reads, on purpose.
    for (v, why) in [
        ("p5.48xlarge", "unknown topology"),
        ("", "unknown topology"),
        ("trn2.48xlarge:lnc=3", "must be 1 or 2"),
        ("trn2.48xlarge:lnc=1:lnc=2", "twice"),
        ("trn2.48xlarge:foo=1", "unknown option"),
        ("trn2.48xlarge:lnc", "key=value"),
        ("trn2.48xlarge:gen=v3", "only to custom"),
        ("trn1.32xlarge:nodes=0", "positive"),
        ("custom", "needs"),
        ("custom:2x16", "not <nodes>x<devices>x<cores>"),
        ("custom:2x16xq", "positive"),
        ("custom:1x1x3:lnc=2", "do not split"),
        ("custom:1x1x32", "TOP_SPs"),
        ("custom:1x1x8:gen=v2", "TOP_SPs"),
        ("custom:1x65x1", "chip id"),
        ("custom:1x2x2:gen=v9", "v2, v3 or v4"),
        ("custom:1x2x2:fabric=torus", "none, pod or switch"),
        ("custom:1x2x2:nodes=2", "from the shape"),
        ("trn1.32xlarge:nodes=1", "does not fit"),
    ] {
        let e = Topology::parse(v, 40).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
        assert!(e.message().contains(why), "{v}: {e}");
        assert!(
            e.message().contains("custom:<nodes>x<devices>x<cores>"),
            "{v}: {e}"
        );
    }
}

#[test]
fn defaults_from_the_world_and_env() {
    let t = lookup(&[], 1).unwrap();
    assert_eq!(
        (t.name.as_str(), t.nodes),
        ("trn1.32xlarge:nodes=1:lnc=1", 1)
    );
    assert_eq!(lookup(&[], 32).unwrap().nodes, 1);
    assert_eq!(lookup(&[], 33).unwrap().nodes, 2);
    assert_eq!(lookup(&[], 64).unwrap().nodes, 2);
    assert_eq!(lookup(&[], 0).unwrap().nodes, 1);
    assert_eq!(Topology::for_world(100).unwrap().nodes, 4);
    assert!(Topology::for_world(u32::MAX).is_err());
    assert!(Topology::parse("custom:65537x1x1", 1).is_err());
    let t = lookup(&[("OPENNRT_TOPOLOGY", "trn2.48xlarge:lnc=1")], 4).unwrap();
    assert_eq!(t.lnc, 1);
    // The runtime's instance variables are the fallback.
    let t = lookup(&[("OPENNRT_INSTANCE_TYPE", "trn2.48xlarge")], 65).unwrap();
    assert_eq!((t.nodes, t.lnc), (2, 2));
    let t = lookup(
        &[
            ("NEURON_RT_FAKE_INSTANCE_TYPE", "trn2.48xlarge"),
            ("NEURON_LOGICAL_NC_CONFIG", "1"),
        ],
        65,
    )
    .unwrap();
    assert_eq!((t.nodes, t.lnc), (1, 1));
    // OPENNRT_TOPOLOGY wins; an empty value is unset.
    let t = lookup(
        &[
            ("OPENNRT_TOPOLOGY", "trn2-ultraserver"),
            ("OPENNRT_INSTANCE_TYPE", "trn1.2xlarge"),
        ],
        2,
    )
    .unwrap();
    assert_eq!(t.nodes, 4);
    assert_eq!(lookup(&[("OPENNRT_TOPOLOGY", " ")], 2).unwrap().nodes, 1);
    assert!(lookup(&[("OPENNRT_TOPOLOGY", "bogus")], 2).is_err());
    assert!(lookup(
        &[
            ("OPENNRT_INSTANCE_TYPE", "trn2.48xlarge"),
            ("NEURON_LOGICAL_NC_CONFIG", "4")
        ],
        2
    )
    .is_err());
}

//! Writes the seeds that are made by OpenNRT's own encoders rather than cut out of NEFFs
//! (fuzz/README.md, "Seeds"): one encoded bootstrap message of every kind (`wire`), the CTRL
//! SPAD tables the lowering emits (`ccop`), an environment per variable (`env_config`), and
//! the `nccom-test` file examples (`nccom_json`). `fuzz/seeds.sh` runs it:
//! `cargo run --release --example seeds -- <corpus dir>`.

use std::path::{Path, PathBuf};

use opennrt::error::Error;
use opennrt::isa::enums::Dtype;
use opennrt::lower::emit::emit;
use opennrt::lower::pipeline::{address_map, lower, LowerConfig};
use opennrt::lower::request::{CollectiveOp, CollectiveRequest, ReduceOp};
use opennrt::runtime::config::vars::VARIABLES;
use opennrt::runtime::multi_process::wire::{
    self, Msg, SegmentAt, TensorAt, WireError, WireRequest,
};

fn put(dir: &Path, name: &str, bytes: &[u8]) {
    std::fs::create_dir_all(dir).expect("corpus dir");
    std::fs::write(dir.join(name), bytes).expect("write seed");
}

fn wire_seeds(dir: &Path) {
    let req = CollectiveRequest::new(
        CollectiveOp::AllReduce,
        Dtype::Bf16,
        Some(ReduceOp::Add),
        1024,
        vec![0, 1, 2, 3],
        1,
    );
    let wreq = WireRequest::of(&req).expect("a wire request");
    let err = WireError::of(&Error::invalid("rank 3 died").with_field("rank"));
    let seg = SegmentAt {
        name: "/opennrt-1234-seg0".into(),
        len: 1 << 20,
        host: "host-a".into(),
        net: vec![1, 2, 3, 4],
        output: Some(TensorAt {
            name: "/opennrt-1234-t7".into(),
            len: 4096,
            offset: 128,
        }),
    };
    let msgs: Vec<(&str, Msg)> = vec![
        (
            "hello",
            Msg::Hello {
                magic: wire::MAGIC,
                version: "0.1.0".into(),
                pid: 4242,
                host: "host-a".into(),
            },
        ),
        (
            "welcome",
            Msg::Welcome {
                tag: "job-abc".into(),
                host: "host-a".into(),
            },
        ),
        (
            "reject",
            Msg::Reject {
                reason: "version 0.0.9 is not 0.1.0".into(),
            },
        ),
        (
            "join",
            Msg::Join {
                id: 1,
                slot: 0,
                gid: 2,
                count: 4,
            },
        ),
        ("joined", Msg::Joined { id: 1, error: None }),
        (
            "joined_error",
            Msg::Joined {
                id: 2,
                error: Some(err.clone()),
            },
        ),
        (
            "arrive_inline",
            Msg::Arrive {
                id: 3,
                kind: "all_gather".into(),
                slot: 0,
                group: vec![0, 1],
                instance: 7,
                rank: 1,
                shm: String::new(),
                shm_len: 0,
                in_len: 4,
                inline: Some(wire::hex(&[0xde, 0xad, 0xbe, 0xef])),
            },
        ),
        (
            "arrive_shm",
            Msg::Arrive {
                id: 4,
                kind: "cc".into(),
                slot: 1,
                group: vec![0, 1, 2, 3],
                instance: 1,
                rank: 0,
                shm: "/opennrt-1234-stage".into(),
                shm_len: 8192,
                in_len: 4096,
                inline: None,
            },
        ),
        (
            "done",
            Msg::Done {
                id: 3,
                error: None,
                output: Some(wire::hex(&[1, 2, 3, 4, 5, 6, 7, 8])),
            },
        ),
        (
            "done_error",
            Msg::Done {
                id: 4,
                error: Some(err.clone()),
                output: None,
            },
        ),
        (
            "meet",
            Msg::Meet {
                id: 5,
                kind: "neff".into(),
                slot: 0,
                group: vec![0, 1, 2, 3],
                instance: 2,
                rank: 1,
                req: Some(wreq),
                digest: 0x1234_5678_9abc_def0,
                seg: seg.clone(),
            },
        ),
        (
            "segments",
            Msg::Segments {
                id: 5,
                error: None,
                segments: vec![seg.clone(), seg],
            },
        ),
        ("hosts", Msg::Hosts { id: 6, world: 4 }),
        (
            "hosts_of",
            Msg::HostsOf {
                id: 6,
                error: None,
                hosts: vec!["host-a".into(), "host-b".into()],
            },
        ),
        ("bye", Msg::Bye),
        (
            "world_failed",
            Msg::WorldFailed {
                error: err,
                dead_pid: 99,
                dead_host: "host-b".into(),
            },
        ),
    ];
    let mut stream = Vec::new();
    for (name, m) in &msgs {
        let mut b = Vec::new();
        wire::send(&mut b, m).expect("encode");
        assert_eq!(
            wire::recv(&mut b.as_slice()).expect("decode").as_ref(),
            Some(m)
        );
        put(dir, name, &b);
        stream.extend_from_slice(&b);
    }
    // A whole conversation in one stream, as the root reads it.
    put(dir, "stream_all_kinds", &stream);
}

fn ccop_seeds(dir: &Path) {
    let cases: [(CollectiveOp, Option<ReduceOp>, u32, u64); 6] = [
        (CollectiveOp::AllReduce, Some(ReduceOp::Add), 2, 8),
        (CollectiveOp::AllReduce, Some(ReduceOp::Max), 8, 1 << 16),
        (CollectiveOp::AllGather, None, 4, 64),
        (CollectiveOp::ReduceScatter, Some(ReduceOp::Add), 16, 1024),
        (CollectiveOp::AllToAll, None, 4, 32),
        (CollectiveOp::Permute, None, 4, 16),
    ];
    for (op, reduce, ranks, count) in cases {
        let req = CollectiveRequest::new(op, Dtype::Fp32, reduce, count, (0..ranks).collect(), 0);
        let cfg = LowerConfig::for_world(ranks).expect("a topology");
        let p = lower(&req, &cfg).expect("lowered");
        let map = address_map(&p, &cfg.topology).expect("an address map");
        let e = emit(&p, &map).expect("emitted");
        let mut seen = std::collections::BTreeSet::new();
        for r in &e.ranks {
            for t in &r.topsps {
                // The table up to its last used slot (the rest of the 4 KiB is zero).
                let used = t
                    .ctrl_spad
                    .iter()
                    .rposition(|&b| b != 0)
                    .map_or(0, |i| i + 1);
                let table = &t.ctrl_spad[..used.div_ceil(8) * 8];
                if !table.is_empty() && seen.insert(table.to_vec()) {
                    let name = format!("{op:?}_r{ranks}_rank{}_topsp{}", r.rank, t.topsp);
                    put(dir, &name.to_lowercase(), table);
                }
            }
        }
    }
}

fn env_seeds(dir: &Path) {
    // One environment per variable: the variable set to a value it accepts (its documented
    // default where that is a plain value, else a typical one).
    let typical = |name: &str| -> &str {
        match name {
            "NEURON_RT_LOG_LEVEL" => "INFO",
            "NEURON_RT_VISIBLE_CORES" => "0-3",
            "NEURON_RT_NUM_CORES" => "2",
            "OPENNRT_INSTANCE_TYPE" | "NEURON_RT_FAKE_INSTANCE_TYPE" => "trn2.48xlarge",
            "NEURON_LOGICAL_NC_CONFIG" | "NEURON_RT_VIRTUAL_CORE_SIZE" => "2",
            "OPENNRT_RESIDENT_BUDGET" => "512M",
            "NEURON_RT_ROOT_COMM_ID" => "127.0.0.1:45654",
            "CCOM_SOCKET_IFNAME" | "NCCL_SOCKET_IFNAME" => "^lo,docker",
            _ => "1",
        }
    };
    for v in VARIABLES {
        put(
            dir,
            &v.name.to_lowercase(),
            format!("{}={}\n", v.name, typical(v.name)).as_bytes(),
        );
    }
    put(
        dir,
        "several",
        b"OPENNRT_INSTANCE_TYPE=trn1.32xlarge\nNEURON_RT_VISIBLE_CORES=4-7\nNEURON_RT_LOG_LEVEL=DEBUG\n\
          OPENNRT_RESIDENT_BUDGET=2G\nNEURON_RT_EXEC_TIMEOUT=0\n",
    );
}

fn nccom_seeds(dir: &Path) {
    // Selector byte: bits 0-2 the file (0 alltoallv metadata, 1 allgv metadata, 2 replica
    // groups, 4 pairs), bits 3-7 the group size minus 1. Texts from docs/contract/nccom-test.md
    // and tests/nccom_test.rs, src/bin/nccom-test/*/tests.rs.
    let g = |n: u8| (n - 1) << 3;
    let seeds: [(&str, u8, &str); 8] = [
        (
            "a2av_g3",
            g(3),
            r#"{"metadata":[{"send_counts":[1,2,3],"send_displs":[0,1,3]}]}"#,
        ),
        (
            "a2av_g2_recv",
            g(2),
            r#"{"metadata":[
        {"send_counts":[0,2],"send_displs":[0,0],"recv_counts":[0,1],"recv_displs":[0,4]},
        {"send_counts":[1,1],"send_displs":[3,0],"recv_counts":[2,1],"recv_displs":[0,2]}]}"#,
        ),
        (
            "a2av_g2_empty_recv",
            g(2),
            r#"{"metadata":[{"send_counts":[1,1],"send_displs":[0,1],"recv_counts":[],"recv_displs":[]}]}"#,
        ),
        (
            "allgv_g2",
            g(2) | 1,
            r#"{"metadata":[{"send_counts":[2],"send_displs":[1]},{"send_counts":[0],"send_displs":[0]}]}"#,
        ),
        (
            "groups_g4",
            g(4) | 2,
            r#"{"replica_groups": [[[0, 2], [1, 3]]]}"#,
        ),
        (
            "groups_g8",
            g(8) | 2,
            r#"{"replica_groups": [[[0,1,2,3],[4,5,6,7]]]}"#,
        ),
        (
            "pairs_g2",
            g(2) | 4,
            r#"{"src_target_pairs": [[[0, 1], [1, 0]]]}"#,
        ),
        (
            "pairs_g4",
            g(4) | 4,
            r#"{"src_target_pairs": [[[0,1],[1,2],[2,3],[3,0]]]}"#,
        ),
    ];
    for (name, sel, text) in seeds {
        let mut b = vec![sel];
        b.extend_from_slice(text.as_bytes());
        put(dir, name, &b);
    }
}

fn main() {
    let root = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "corpus".into()));
    wire_seeds(&root.join("wire"));
    ccop_seeds(&root.join("ccop"));
    env_seeds(&root.join("env_config"));
    nccom_seeds(&root.join("nccom_json"));
}

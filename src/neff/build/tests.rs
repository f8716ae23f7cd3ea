//! The writer against the readers: every built NEFF passes `NeffHeader::parse`,
//! `Payload::read` and `Neff::parse`, carries the fields docs/neff.md §2 lists, and its
//! trigger decodes and validates; every refusal of `build` names what is wrong; `container`
//! writes both packings, long names, and the overrides tests use to damage a NEFF.

use crate::error::ErrorKind;
use std::io::Read;

use super::*;
use crate::isa::enums::CollectiveType;
use crate::isa::instr::Instr;
use crate::isa::stream::decode_stream;
use crate::isa::validate::{validate_stream, ValidationContext};
use crate::neff::{Neff, NeffHeader, ParseOptions, Payload, PkgVersion, VarKind};

fn parsed(file: &[u8]) -> (NeffHeader, Payload) {
    let h = NeffHeader::parse(file).unwrap();
    let p = Payload::read(&h, file).unwrap();
    (h, p)
}

fn json_of(p: &Payload, member: &str) -> Value {
    serde_json::from_slice(p.get(member).unwrap_or_else(|| panic!("{member} missing"))).unwrap()
}

fn md5(b: &[u8]) -> [u8; 16] {
    Md5::digest(b).into()
}

fn gunzip(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(b)
        .read_to_end(&mut out)
        .unwrap();
    out
}

/// (op, input elements, output elements) per rank for a block of `n` over `r` ranks.
fn sizes(op: BuildOp, n: u64, r: u64) -> (u64, u64) {
    match op {
        BuildOp::AllReduce | BuildOp::Permute | BuildOp::SendRecv => (n, n),
        BuildOp::AllGather => (n, n * r),
        BuildOp::ReduceScatter => (n * r, n),
        BuildOp::AllToAll | BuildOp::AllToAllV => (n * r, n * r),
        BuildOp::AllGatherV => (n, n * r),
    }
}

#[test]
fn every_op_builds_a_neff_the_readers_accept() {
    for op in BuildOp::ALL {
        let spec = BuildSpec::new(op, 4, 256, Dtype::Bf16);
        let file = build(&spec).unwrap();
        let (h, p) = parsed(&file);
        let names: Vec<&str> = p.names().collect();
        assert_eq!(
            names,
            [
                "info.json",
                "kelf-0.json",
                "neff.json",
                "sg00/SP.bin",
                "sg00/SP.json",
                "sg00/def.json",
                "sg00/tensor_map.json"
            ],
            "{op:?}"
        );
        // Header (docs/neff.md §2).
        assert_eq!(h.pkg_version, PkgVersion::GzipTar);
        assert_eq!(h.header_size, 1024);
        assert_eq!(h.data_size, file.len() as u64 - 1024);
        assert_eq!((h.version_major, h.version_minor), (2, 0));
        assert_eq!(
            h.build_version,
            format!("opennrt {}", env!("CARGO_PKG_VERSION"))
        );
        assert_eq!(h.num_tpb, 1);
        assert_eq!(h.name, format!("opennrt-{}-r4-n256-bf16", op.name()));
        assert_eq!(h.requested_tpb_count, 1);
        assert_eq!(h.tpb_per_node[0], 1);
        assert!(h.tpb_per_node[1..].iter().all(|&t| t == 0));
        assert_eq!(h.feature_bits, 0);
        assert_eq!(h.lnc_size, 1);
        // The hash is the payload's MD5 (so NEURON_RT_VALIDATE_HASH=1 passes); the uuid the
        // MD5 of the tar inside.
        let packed = &file[1024..];
        assert_eq!(&h.hash[..16], &md5(packed));
        assert_eq!(&h.hash[16..], &[0u8; 16]);
        h.check_hash(&file).unwrap();
        assert_eq!(h.uuid, md5(&gunzip(packed)));

        // def.json vars, sizes per the table of docs/neff.md §2.
        let def = json_of(&p, "sg00/def.json");
        let (ie, oe) = sizes(op, 256, 4);
        let var = &def["var"];
        assert_eq!(var["SB"]["type"], "state-buffer");
        assert_eq!(var["SB"]["var_id"], 0);
        assert_eq!(var["input0"]["type"], "input");
        assert_eq!(var["input0"]["var_id"], 1);
        assert_eq!(var["input0"]["size"], ie * 2);
        assert_eq!(var["output0"]["type"], "output");
        assert_eq!(var["output0"]["var_id"], 2);
        assert_eq!(var["output0"]["size"], oe * 2);
        if op.is_variable() {
            // docs/neff.md §2: metadata0, type input, var_id 3, 4 rows of R uint32.
            assert_eq!(var["metadata0"]["type"], "input");
            assert_eq!(var["metadata0"]["var_id"], 3);
            assert_eq!(var["metadata0"]["size"], 4 * 4 * 4);
            assert_eq!(spec.metadata_bytes(), 64);
        } else {
            assert!(var.get("metadata0").is_none(), "{op:?}");
            assert_eq!(spec.metadata_bytes(), 0);
        }
        assert_eq!(spec.input_bytes(), ie * 2);
        assert_eq!(spec.output_bytes(), oe * 2);
        assert_eq!(def["replica_groups"], json!([[[0, 1, 2, 3]]]));
        assert_eq!(def["cc_streams"]["num_streams"], 1);
        assert_eq!(def["#rank_world_size"], 4);
        assert_eq!(def["sp_instr"], "SP.bin");
        assert_eq!(
            def.get("src_target_pairs").is_some(),
            op == BuildOp::Permute
        );
        let tm = json_of(&p, "sg00/tensor_map.json");
        assert_eq!(tm["output0"]["dtype"], "bfloat16");
        assert_eq!(tm["output0"]["tf_shape"], json!([oe]));
        let neff = json_of(&p, "neff.json");
        // One null node per input (input0, then metadata0), then the kernel node.
        let k = if op.is_variable() { 2 } else { 1 };
        assert_eq!(neff["nodes"][k]["attrs"]["func_name"], "__kelf");
        assert_eq!(neff["nodes"][k]["attrs"]["kelf"], "kelf-0.json");
        assert_eq!(neff["nodes"][k]["attrs"]["num_inputs"], k.to_string());
        assert_eq!(neff["heads"], json!([[k, 0, 0]]));
        if op.is_variable() {
            assert_eq!(neff["nodes"][1]["name"], "metadata0");
            assert_eq!(tm["metadata0"]["dtype"], "uint32");
            assert_eq!(tm["metadata0"]["tf_shape"], json!([16]));
        }
        let kelf = json_of(&p, "kelf-0.json");
        assert_eq!(
            kelf,
            json!({"graphs": [{"definition": "sg00/def.json", "name": "sg00"}],
                   "version": "0.5", "target": "opennrt"})
        );

        // The trigger.
        let s = decode_stream(p.get("sg00/SP.bin").unwrap()).unwrap();
        assert_eq!(s.words.len(), 1);
        let mut ctx = ValidationContext {
            collective_streams: Some(1),
            rank_n: Some(4),
            mesh_available: Some(true),
            ..ValidationContext::default()
        };
        if op.is_variable() {
            let Instr::Collective2(w) = &s.words[0].instr else {
                panic!("{op:?}: not a 0xD9+0xDA: {:?}", s.words[0].instr)
            };
            let (t, e) = (&w.trigger, &w.ext);
            assert_eq!(t.ctype, CollectiveType::AllToAllV);
            assert_eq!(t.op, AluOp::Bypass);
            assert_eq!(t.dtype, Dtype::Bf16);
            assert_eq!(t.src0.start.var_id(), Some(1));
            assert_eq!(t.src0.num_elements(), ie);
            assert_eq!(t.src1.start.var_id(), Some(3));
            assert_eq!(t.src1.num_elements(), 16);
            assert_eq!(e.dst.start.var_id(), Some(2));
            assert_eq!(e.dst.num_elements(), oe);
            assert_eq!(e.src1_bitmap, 0x0F);
            assert_eq!(e.group_id, 0);
            assert_eq!(t.common.events.update_mode, UpdateMode::SemIncComplete);
            validate_stream(&s, &mut ctx).unwrap_or_else(|e| panic!("{op:?}: {e}"));
            continue;
        }
        let Instr::TriggerCollective(w) = &s.words[0].instr else {
            panic!("{op:?}: not a 0xC8: {:?}", s.words[0].instr)
        };
        assert_eq!(w.ctype, op.ctype());
        assert_eq!(w.dtype, Dtype::Bf16);
        assert_eq!(w.num_elements, 256);
        assert_eq!((w.input_tensor_id, w.output_tensor_id), (1, 2));
        assert_eq!(w.group_id, 0);
        assert_eq!(w.input_count(4), ie);
        assert_eq!(w.output_count(4), oe);
        let want_op = if op.is_reducing() {
            AluOp::Add
        } else {
            AluOp::Bypass
        };
        assert_eq!(w.op, want_op);
        assert_eq!(w.common.events.wait_mode, WaitMode::None);
        assert_eq!(w.common.events.update_mode, UpdateMode::SemIncComplete);
        assert_eq!(w.common.events.update_idx, 0);
        validate_stream(&s, &mut ctx).unwrap_or_else(|e| panic!("{op:?}: {e}"));
    }
}

#[test]
fn the_parser_reads_what_the_builder_writes() {
    let mut spec = BuildSpec::new(BuildOp::AllGather, 8, 1000, Dtype::Fp32);
    spec.algorithm = Some("MESH".into());
    spec.ops = 3;
    let file = build(&spec).unwrap();
    let n = Neff::parse(
        &file,
        &ParseOptions {
            validate_hash: true,
        },
    )
    .unwrap();
    assert_eq!(n.kelf, "kelf-0.json");
    assert_eq!(n.target, "opennrt");
    assert_eq!(n.graphs.len(), 1);
    let g = &n.graphs[0];
    let vars: Vec<_> = g
        .vars
        .iter()
        .map(|v| (v.name.as_str(), v.kind, v.var_id, v.size))
        .collect();
    assert_eq!(
        vars,
        [
            ("SB", VarKind::StateBuffer, 0, 0),
            ("input0", VarKind::Input, 1, 4000),
            ("output0", VarKind::Output, 2, 32000)
        ]
    );
    assert_eq!(g.vars[2].dtype.as_deref(), Some("float32"));
    assert_eq!(g.vars[2].shape.as_deref(), Some(&[8000u64][..]));
    assert_eq!(g.replica_groups, vec![vec![(0..8).collect::<Vec<u32>>()]]);
    assert_eq!((g.num_streams, g.rank_world_size), (1, 8));
    assert_eq!(g.algorithm.as_deref(), Some("mesh"));
    assert_eq!(g.programs.len(), 1);
    assert_eq!(g.programs[0].member, "sg00/SP.bin");
    assert_eq!(g.programs[0].census().get(&0xC8), Some(&3));
    assert_eq!(g.programs[0].stream.triggers().count(), 3);
}

#[test]
fn lnc_2_writes_two_identical_graphs() {
    let mut spec = BuildSpec::new(BuildOp::AllReduce, 2, 64, Dtype::Fp16);
    spec.lnc = 2;
    spec.redop = ReduceOp::Max;
    let file = build(&spec).unwrap();
    let (h, p) = parsed(&file);
    assert_eq!(h.lnc_size, 2);
    let kelf = json_of(&p, "kelf-0.json");
    assert_eq!(kelf["graphs"][1]["definition"], "sg01/def.json");
    for m in ["def.json", "SP.json", "SP.bin", "tensor_map.json"] {
        assert_eq!(p.get(&format!("sg00/{m}")), p.get(&format!("sg01/{m}")));
    }
    let s = decode_stream(p.get("sg01/SP.bin").unwrap()).unwrap();
    let Instr::TriggerCollective(w) = &s.words[0].instr else {
        panic!()
    };
    assert_eq!(w.op, AluOp::Max);
    let n = Neff::parse(&file, &ParseOptions::default()).unwrap();
    assert_eq!(n.graphs.len(), 2);
}

#[test]
fn permute_writes_its_pairs() {
    let spec = BuildSpec::new(BuildOp::Permute, 3, 8, Dtype::Int8);
    let (_, p) = parsed(&build(&spec).unwrap());
    let def = json_of(&p, "sg00/def.json");
    assert_eq!(
        def["src_target_pairs"],
        json!([{"group_id": 0, "pairs": [[0, 1], [1, 2], [2, 0]]}])
    );
    let mut spec = BuildSpec::new(BuildOp::Permute, 4, 8, Dtype::Fp32);
    spec.pairs = Some(vec![(0, 3), (3, 0)]);
    let file = build(&spec).unwrap();
    let n = Neff::parse(&file, &ParseOptions::default()).unwrap();
    assert_eq!(n.graphs[0].src_target_pairs[0].pairs, vec![(0, 3), (3, 0)]);
    // Default pairs stay inside each sub-group.
    let mut spec = BuildSpec::new(BuildOp::Permute, 4, 8, Dtype::Fp32);
    spec.replica_groups = Some(vec![vec![vec![0, 2], vec![1, 3]]]);
    let (_, p) = parsed(&build(&spec).unwrap());
    let def = json_of(&p, "sg00/def.json");
    assert_eq!(
        def["src_target_pairs"][0]["pairs"],
        json!([[0, 2], [2, 0], [1, 3], [3, 1]])
    );
    assert_eq!(def["replica_groups"], json!([[[0, 2], [1, 3]]]));
}

#[test]
fn sizes_follow_group_0_sub_groups() {
    let mut spec = BuildSpec::new(BuildOp::AllGather, 8, 10, Dtype::Fp32);
    spec.replica_groups = Some(vec![vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]]]);
    assert_eq!(spec.group_size(), 4);
    assert_eq!((spec.input_bytes(), spec.output_bytes()), (40, 160));
    let (_, p) = parsed(&build(&spec).unwrap());
    assert_eq!(json_of(&p, "sg00/def.json")["var"]["output0"]["size"], 160);
}

#[test]
fn the_same_spec_gives_the_same_bytes() {
    let spec = BuildSpec::new(BuildOp::AllToAll, 16, 4096, Dtype::Fp8E4);
    assert_eq!(build(&spec).unwrap(), build(&spec).unwrap());
    let other = BuildSpec::new(BuildOp::AllToAll, 16, 4097, Dtype::Fp8E4);
    let uuid = |f: &[u8]| NeffHeader::parse(f).unwrap().uuid;
    assert_ne!(uuid(&build(&spec).unwrap()), uuid(&build(&other).unwrap()));
}

#[test]
fn op_names_parse() {
    for (s, op) in [
        ("all_reduce", BuildOp::AllReduce),
        ("allr", BuildOp::AllReduce),
        ("ALL_GATHER", BuildOp::AllGather),
        ("allg", BuildOp::AllGather),
        ("reduce_scatter", BuildOp::ReduceScatter),
        ("redsct", BuildOp::ReduceScatter),
        ("all_to_all", BuildOp::AllToAll),
        ("alltoall", BuildOp::AllToAll),
        ("permute", BuildOp::Permute),
        ("send_recv", BuildOp::SendRecv),
        ("sendrecv", BuildOp::SendRecv),
        ("all_to_all_v", BuildOp::AllToAllV),
        ("alltoallv", BuildOp::AllToAllV),
        ("all_gather_v", BuildOp::AllGatherV),
        ("all_gatherv", BuildOp::AllGatherV),
        ("allgv", BuildOp::AllGatherV),
    ] {
        assert_eq!(BuildOp::parse(s), Some(op), "{s}");
    }
    for op in BuildOp::ALL {
        assert_eq!(BuildOp::parse(op.name()), Some(op));
    }
    assert_eq!(BuildOp::parse("broadcast"), None);
}

#[test]
fn bad_specs_are_refused_naming_the_problem() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    let base = || BuildSpec::new(BuildOp::AllReduce, 4, 16, Dtype::Bf16);
    let cases: Vec<(BuildSpec, &str)> = vec![
        (BuildSpec { ranks: 0, ..base() }, "ranks 0"),
        (
            BuildSpec {
                ranks: 1025,
                ..base()
            },
            "ranks 1025",
        ),
        (BuildSpec { count: 0, ..base() }, "count"),
        (
            BuildSpec {
                dtype: Dtype::Int32,
                ..base()
            },
            "cannot reduce INT32",
        ),
        (
            BuildSpec {
                dtype: Dtype::Fp32r,
                ..base()
            },
            "FP32R",
        ),
        (
            BuildSpec {
                dtype: Dtype::Invalid,
                op: BuildOp::AllGather,
                ..base()
            },
            "INVALID",
        ),
        (
            BuildSpec {
                count: u64::MAX,
                ..base()
            },
            "more than 2^64",
        ),
        (
            BuildSpec {
                count: 1 << 48,
                ..base()
            },
            "above the loader's var limit",
        ),
        (
            BuildSpec {
                algorithm: Some("spiral".into()),
                ..base()
            },
            "unknown algorithm \"spiral\"",
        ),
        (BuildSpec { lnc: 3, ..base() }, "lnc 3"),
        (BuildSpec { ops: 0, ..base() }, "ops 0"),
        (
            BuildSpec {
                ops: 1025,
                ..base()
            },
            "ops 1025",
        ),
        (
            BuildSpec {
                pairs: Some(vec![(0, 1)]),
                ..base()
            },
            "permute only",
        ),
        (
            BuildSpec {
                op: BuildOp::Permute,
                pairs: Some(vec![(0, 4)]),
                ..base()
            },
            "not in replica group 0",
        ),
        (
            BuildSpec {
                op: BuildOp::Permute,
                pairs: Some(vec![(0, 1), (0, 2)]),
                ..base()
            },
            "send once",
        ),
        (
            BuildSpec {
                op: BuildOp::Permute,
                pairs: Some(vec![]),
                ..base()
            },
            "at least one",
        ),
        (
            BuildSpec {
                op: BuildOp::Permute,
                replica_groups: Some(vec![vec![vec![0, 1], vec![2, 3]]]),
                pairs: Some(vec![(0, 2)]),
                ..base()
            },
            "crosses sub-groups",
        ),
        (
            BuildSpec {
                replica_groups: Some(vec![vec![vec![0, 1, 2], vec![3]]]),
                ..base()
            },
            "must fit every sub-group",
        ),
        (
            BuildSpec {
                replica_groups: Some(vec![vec![vec![0, 1], vec![1, 2]]]),
                ..base()
            },
            "appears twice",
        ),
        (
            BuildSpec {
                replica_groups: Some(vec![vec![vec![0, 9]]]),
                ..base()
            },
            "outside the world",
        ),
        (
            BuildSpec {
                replica_groups: Some(vec![]),
                ..base()
            },
            "0 replica groups",
        ),
        (
            BuildSpec {
                replica_groups: Some(vec![vec![]]),
                ..base()
            },
            "no sub-group",
        ),
    ];
    for (spec, want) in cases {
        let Err(e) = build(&spec) else {
            panic!("{spec:?} was built")
        };
        assert_eq!(e.kind(), crate::error::ErrorKind::Invalid, "{spec:?}");
        assert!(
            e.message().contains(want),
            "{spec:?}: {:?} lacks {want:?}",
            e.message()
        );
    }
    // Integer and FP32 copies are fine: only reductions need the CCE.
    for op in [BuildOp::AllGather, BuildOp::AllToAll, BuildOp::SendRecv] {
        build(&BuildSpec::new(op, 2, 3, Dtype::Int64)).unwrap();
    }
    build(&BuildSpec::new(BuildOp::ReduceScatter, 1, 1, Dtype::Fp8E5)).unwrap();
}

fn members(list: &[(&str, &[u8])]) -> Vec<(String, Vec<u8>)> {
    list.iter()
        .map(|(n, d)| (n.to_string(), d.to_vec()))
        .collect()
}

#[test]
fn container_writes_a_raw_tar_with_sha256_for_package_1() {
    let long = format!("sg00/{}.bin", "x".repeat(150));
    let m = members(&[("a.json", b"{}"), (&long, &[7u8; 700]), ("empty", b"")]);
    let h = HeaderFields {
        pkg_version: 1,
        name: "raw".into(),
        ..HeaderFields::default()
    };
    let file = container(&m, &h).unwrap();
    let (hdr, p) = parsed(&file);
    assert_eq!(hdr.pkg_version, PkgVersion::RawTar);
    let tar = &file[1024..];
    assert_eq!(tar.len() % 512, 0);
    assert_eq!(&hdr.hash, &<[u8; 32]>::from(Sha256::digest(tar)));
    assert_eq!(hdr.uuid, md5(tar));
    hdr.check_hash(&file).unwrap();
    assert_eq!(hdr.name, "raw");
    let names: Vec<&str> = p.names().collect();
    assert_eq!(names, ["a.json", "empty", long.as_str()]);
    assert_eq!(p.get(&long), Some(&[7u8; 700][..]));
    assert_eq!(p.get("empty"), Some(&[][..]));
    // Python's tarfile and GNU tar read the same bytes: a plain ustar + pax archive.
    assert_eq!(&tar[257..263], b"ustar\0");
}

#[test]
fn container_overrides_make_damaged_neffs() {
    let m = members(&[("a", b"1")]);
    // A hash override is written as is, and the check then fails.
    let h = HeaderFields {
        hash: Some([0xAB; 32]),
        uuid: Some([1; 16]),
        ..HeaderFields::default()
    };
    let file = container(&m, &h).unwrap();
    let hdr = NeffHeader::parse(&file).unwrap();
    assert_eq!((hdr.hash, hdr.uuid), ([0xAB; 32], [1; 16]));
    assert_eq!(
        hdr.check_hash(&file).unwrap_err().fields().field.as_deref(),
        Some("hash")
    );
    // Fields no reader accepts are written all the same.
    for (h, field) in [
        (
            HeaderFields {
                pkg_version: 3,
                ..HeaderFields::default()
            },
            "pkg_version",
        ),
        (
            HeaderFields {
                version_major: 3,
                ..HeaderFields::default()
            },
            "neff_version_major",
        ),
        (
            HeaderFields {
                feature_bits: 1 << 40,
                ..HeaderFields::default()
            },
            "feature_bits",
        ),
        (
            HeaderFields {
                lnc_size: 4,
                ..HeaderFields::default()
            },
            "lnc_size",
        ),
        (
            HeaderFields {
                data_size: Some(1 << 40),
                ..HeaderFields::default()
            },
            "data_size",
        ),
        (
            HeaderFields {
                header_size: 16,
                ..HeaderFields::default()
            },
            "header_size",
        ),
    ] {
        let file = container(&m, &h).unwrap();
        let e = NeffHeader::parse(&file).unwrap_err();
        assert_eq!(e.fields().field.as_deref(), Some(field), "{e}");
    }
    // A larger header_size moves the payload there.
    let h = HeaderFields {
        header_size: 4096,
        ..HeaderFields::default()
    };
    let file = container(&m, &h).unwrap();
    let (hdr, p) = parsed(&file);
    assert_eq!(hdr.header_size, 4096);
    assert!(file[1024..4096].iter().all(|&b| b == 0));
    assert_eq!(p.get("a"), Some(&b"1"[..]));
    hdr.check_hash(&file).unwrap();
    // Text that does not fit its field is the one refusal.
    let h = HeaderFields {
        name: "n".repeat(257),
        ..HeaderFields::default()
    };
    let e = container(&m, &h).unwrap_err();
    assert_eq!(e.fields().field.as_deref(), Some("name"));
    let h = HeaderFields {
        name: "n".repeat(256),
        build_version: "b".repeat(128),
        ..HeaderFields::default()
    };
    let hdr = NeffHeader::parse(&container(&m, &h).unwrap()).unwrap();
    assert_eq!((hdr.name.len(), hdr.build_version.len()), (256, 128));
}

#[test]
fn hostile_names_are_written_as_given() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    // The payload reader must refuse these; the writer must be able to make them.
    for name in ["../etc/passwd", "/abs", "a//b"] {
        let file = container(&members(&[(name, b"x")]), &HeaderFields::default()).unwrap();
        let h = NeffHeader::parse(&file).unwrap();
        assert!(Payload::read(&h, &file).is_err(), "{name}");
    }
    let file = container(
        &members(&[("dup", b"1"), ("dup", b"2")]),
        &HeaderFields::default(),
    )
    .unwrap();
    let h = NeffHeader::parse(&file).unwrap();
    let e = Payload::read(&h, &file).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert_eq!(e.fields().field.as_deref(), Some("dup"), "{e:?}");
    assert!(e.message().contains("twice"), "{e}");
}

#[test]
fn pax_record_length_counts_itself() {
    for n in [0usize, 1, 80, 89, 90, 91, 985, 994, 995, 5000] {
        let r = pax_record("path", &vec![b'a'; n]);
        let (len, _) = std::str::from_utf8(&r).unwrap().split_once(' ').unwrap();
        assert_eq!(len.parse::<usize>().unwrap(), r.len(), "{n}");
    }
}

/// The equal-blocks tables of docs/neff.md §2 (by hand, 3 ranks, count 4), and the variable
/// ops' 2^32-element operand bound.
#[test]
fn variable_size_ops_tables_and_bounds() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    let a2av = BuildSpec::new(BuildOp::AllToAllV, 3, 4, Dtype::Fp32);
    assert_eq!(
        a2av.uniform_metadata().unwrap(),
        [vec![4, 4, 4], vec![0, 4, 8], vec![4, 4, 4], vec![0, 4, 8]]
    );
    let agv = BuildSpec::new(BuildOp::AllGatherV, 3, 4, Dtype::Fp32);
    assert_eq!(
        agv.uniform_metadata().unwrap(),
        [vec![4, 4, 4], vec![0, 0, 0], vec![4, 4, 4], vec![0, 4, 8]]
    );
    assert_eq!((agv.input_bytes(), agv.output_bytes()), (16, 48));
    assert_eq!(
        BuildSpec::new(BuildOp::AllToAll, 3, 4, Dtype::Fp32).uniform_metadata(),
        None
    );
    let big = BuildSpec::new(BuildOp::AllToAllV, 2, 1 << 31, Dtype::Uint8);
    let e = build(&big).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert!(e.message().contains("2^32 - 1"), "{e}");
    let fits = BuildSpec::new(BuildOp::AllGatherV, 2, 1 << 31, Dtype::Uint8);
    assert!(build(&fits).is_err(), "its output is 2^32 elements");
}

/// The op table is indexed by the variant; nccom-test's words are its own (no canonical name
/// that is not also the vendor's).
#[test]
fn op_table_rows_sit_at_their_variant() {
    for (i, r) in BUILD_OP_NAMES.iter().enumerate() {
        assert_eq!(r.op as usize, i, "{:?}", r.op);
        assert_eq!(BuildOp::ALL[i], r.op);
    }
    assert_eq!(BuildOp::from_nccom_word("ALLR"), Some(BuildOp::AllReduce));
    assert_eq!(BuildOp::from_nccom_word("all_to_all"), None);
    assert_eq!(BuildOp::from_nccom_word(" allr"), None);
    assert_eq!(BuildOp::AllGatherV.nccom_name(), "all_gatherv");
    assert_eq!(BuildOp::SendRecv.nccom_name(), "sendrecv");
}

//! `opennrt neff build` and `opennrt neff info` end to end: the binary writes a NEFF, `info
//! --json` reads it back with the fields docs/neff.md §2 lists, and reads the vendor's NEFF in
//! testdata with the vars and opcode census its README lists.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_opennrt");

/// A scratch directory for this test process, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let p = std::env::temp_dir().join(format!(
            "opennrt-neff-cli-{tag}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&p).unwrap();
        Scratch(p)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn run(args: &[&str]) -> (i32, String, String) {
    let o = Command::new(BIN).args(args).output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn info_json(path: &str) -> Value {
    let (code, out, err) = run(&["neff", "info", path, "--json"]);
    assert_eq!(code, 0, "neff info {path}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

/// `name → (type, size)` of a graph's vars.
fn vars(g: &Value) -> Vec<(String, String, u64)> {
    g["vars"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["name"].as_str().unwrap().to_string(),
                v["type"].as_str().unwrap().to_string(),
                v["size"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn program<'a>(g: &'a Value, engine: &str) -> &'a Value {
    g["programs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["engine"] == engine)
        .unwrap_or_else(|| panic!("no {engine} program"))
}

#[test]
fn build_then_info_round_trips() {
    let dir = Scratch::new("build");
    let file = dir.0.join("rs.neff");
    let path = file.to_str().unwrap();
    let (code, out, err) = run(&[
        "neff", "build", "--op", "redsct", "--ranks", "4", "--count", "1<<10", "--dtype", "fp32",
        "--redop", "max", "--alg", "ring", "--ops", "2", "-o", path,
    ]);
    assert_eq!(code, 0, "{err}");
    let len = std::fs::metadata(&file).unwrap().len();
    assert!(out.contains(path), "{out}");
    assert!(out.contains(&format!("{len} bytes")), "{out}");
    assert!(out.contains("input 16384 B"), "{out}");
    assert!(out.contains("output 4096 B"), "{out}");

    let v = info_json(path);
    assert_eq!(v["bytes"], len);
    let h = &v["header"];
    assert_eq!(h["pkg_version"], 2);
    assert_eq!(h["name"], "opennrt-reduce_scatter-r4-n1024-fp32");
    assert_eq!(h["hash_matches_payload"], true);
    assert_eq!(h["lnc_size"], 1);
    assert_eq!(v["kelf"], "kelf-0.json");
    let g = &v["graphs"][0];
    assert_eq!(
        vars(g),
        [
            ("SB".into(), "state-buffer".into(), 0),
            ("input0".into(), "input".into(), 16384),
            ("output0".into(), "output".into(), 4096)
        ]
    );
    assert_eq!(g["vars"][1]["dtype"], "float32");
    assert_eq!(g["replica_groups"], serde_json::json!([[[0, 1, 2, 3]]]));
    assert_eq!(g["num_streams"], 1);
    assert_eq!(g["rank_world_size"], 4);
    assert_eq!(g["algorithm"], "ring");
    let sp = program(g, "sp");
    assert_eq!(sp["census"], serde_json::json!({"0xc8": 2}));
    let cc = sp["collectives"].as_array().unwrap();
    assert_eq!(cc.len(), 2);
    assert_eq!(cc[1]["offset"], 64);
    let c = &cc[0];
    assert_eq!(c["opcode"], "0xc8");
    assert_eq!(c["ctype"], "REDUCE_SCATTER");
    assert_eq!(c["op"], "MAX");
    assert_eq!(c["dtype"], "FP32");
    assert_eq!(c["count"], 1024);
    assert_eq!(c["group"], 0);
    assert_eq!(c["update"], "SEM_INC_COMPLETE");
    assert_eq!(c["tensors"][0]["var"], "input0");
    assert_eq!(c["tensors"][1]["var"], "output0");

    // The text form names the same things.
    let (code, text, err) = run(&["neff", "info", path]);
    assert_eq!(code, 0, "{err}");
    for want in ["REDUCE_SCATTER", "input0", "0xc8 x2", "matches the payload"] {
        assert!(text.contains(want), "{want:?} not in:\n{text}");
    }
}

#[test]
fn permute_pairs_and_lnc_2_reach_the_neff() {
    let dir = Scratch::new("permute");
    let file = dir.0.join("p.neff");
    let path = file.to_str().unwrap();
    let (code, _, err) = run(&[
        "neff", "build", "--op", "permute", "--ranks", "2", "--count", "8", "--dtype", "bf16",
        "--pairs", "0:1,1:0", "--lnc", "2", "-o", path,
    ]);
    assert_eq!(code, 0, "{err}");
    let v = info_json(path);
    assert_eq!(v["header"]["lnc_size"], 2);
    assert_eq!(v["graphs"].as_array().unwrap().len(), 2);
    assert_eq!(
        v["graphs"][1]["src_target_pairs"],
        serde_json::json!([{"group_id": 0, "pairs": [[0, 1], [1, 0]]}])
    );
}

#[test]
fn bad_requests_fail_with_a_reason() {
    let dir = Scratch::new("bad");
    let path = dir.0.join("x.neff");
    let path = path.to_str().unwrap();
    // A reduction on an integer type: refused by the builder (exit 1), nothing written.
    let (code, _, err) = run(&[
        "neff",
        "build",
        "--op",
        "all_reduce",
        "--ranks",
        "2",
        "--count",
        "4",
        "--dtype",
        "int32",
        "-o",
        path,
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("INT32"), "{err}");
    assert!(!std::path::Path::new(path).exists());
    // Bad usage: exit 2.
    let (code, _, err) = run(&["neff", "build", "--op", "broadcast"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown --op"), "{err}");
    let (code, _, _) = run(&["neff", "build", "--op", "allr", "--ranks", "2"]);
    assert_eq!(code, 2);
    // Not a NEFF: exit 1 naming the problem.
    let junk = dir.0.join("junk");
    std::fs::write(&junk, b"not a neff").unwrap();
    let (code, _, err) = run(&["neff", "info", junk.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("header"), "{err}");
}

#[test]
fn info_reads_the_vendor_neff() {
    let Some(p) = opennrt::testdata::file(
        opennrt::testdata::REAL_NEFF,
        "opennrt neff info of the vendor NEFF",
    ) else {
        return;
    };
    let v = info_json(p.to_str().expect("a UTF-8 path"));
    // README next to the file.
    let h = &v["header"];
    assert_eq!(h["pkg_version"], 2);
    assert_eq!(h["data_size"], 61440);
    assert_eq!(h["name"], "file.neff");
    assert_eq!(h["feature_bits"], 0x209c00);
    assert_eq!(h["lnc_size"], 2);
    assert_eq!(h["hash_matches_payload"], false);
    assert_eq!(v["target"], "cayman");
    let graphs = v["graphs"].as_array().unwrap();
    assert_eq!(graphs.len(), 2);
    for g in graphs {
        let io: Vec<_> = vars(g)
            .into_iter()
            .filter(|(_, t, _)| t == "input" || t == "output")
            .map(|(n, _, s)| (n, s))
            .collect();
        assert_eq!(
            io,
            [
                ("x".into(), 65536),
                ("y".into(), 65536),
                ("output0".into(), 32768)
            ]
        );
        assert_eq!(g["num_streams"], 0);
        assert_eq!(g["rank_world_size"], 0);
        let census = |e: &str| program(g, e)["census"].clone();
        use serde_json::json;
        assert_eq!(census("sp"), json!({"0xb1": 1, "0xcc": 1, "0xd4": 1}));
        assert_eq!(
            census("pe"),
            json!({"0x01": 4, "0x02": 4, "0xa0": 2, "0xb1": 1, "0xcc": 1})
        );
        assert_eq!(
            census("act"),
            json!({"0x23": 1, "0x46": 2, "0xb1": 1, "0xcc": 1})
        );
        assert_eq!(census("dve"), json!({"0xb1": 1, "0xcc": 1}));
        assert_eq!(
            census("pool"),
            json!({"0xa4": 1, "0xb1": 1, "0xcc": 1, "0xd4": 4})
        );
        // No collective in a compute NEFF.
        for p in g["programs"].as_array().unwrap() {
            assert_eq!(p["collectives"], json!([]), "{}", p["engine"]);
        }
    }
    let out0 = &graphs[0]["vars"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "output0")
        .unwrap()
        .clone();
    assert_eq!(out0["dtype"], "float16");
    assert_eq!(out0["shape"], serde_json::json!([128, 128]));
}

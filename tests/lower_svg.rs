//! `opennrt lower --svg`: the picture of a 4-rank ring all-reduce, parsed as XML. The arrows and
//! wait marks it must hold are counted independently, from the program IR that
//! `opennrt lower --json` prints (every step's cross-rank destinations and sources, and its
//! wait), while the picture is read back from the emitted descriptors and SLOT records.

use std::collections::BTreeSet;
use std::process::Command;

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_opennrt");
const REQ: &[&str] = &[
    "lower",
    "--op",
    "all_reduce",
    "--ranks",
    "4",
    "--count",
    "1024",
    "--dtype",
    "fp32",
    "--alg",
    "ring",
];
/// The stroke colours of copy and reduce arrows (src/bin/opennrt/lower_cmd/picture.rs).
const ARROWS: [&str; 2] = ["#1f77b4", "#d62728"];

fn opennrt(extra: &[&str]) -> String {
    let o = Command::new(BIN)
        .args(REQ)
        .args(extra)
        .output()
        .expect("run opennrt");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).expect("utf-8")
}

/// (sends, waits) of the IR: per step, one per peer written to and one per peer read from.
fn expected() -> (usize, usize) {
    let p: Value = serde_json::from_str(&opennrt(&["--json"])).expect("IR JSON");
    let (mut sends, mut waits) = (0, 0);
    for rp in p["ranks"].as_array().expect("ranks") {
        let me = rp["rank"].as_u64().expect("rank");
        for en in rp["entries"].as_array().expect("entries") {
            for tape in en["tapes"].as_array().expect("tapes") {
                for st in tape["steps"].as_array().expect("steps") {
                    waits += usize::from(!st["wait"].is_null());
                    let (mut to, mut from) = (BTreeSet::new(), BTreeSet::new());
                    for t in st["transfers"].as_array().expect("transfers") {
                        if t["len"].as_u64() == Some(0) {
                            continue;
                        }
                        let d = t["dst"]["rank"].as_u64().expect("dst rank");
                        if d != me {
                            to.insert(d);
                        }
                        let srcs: Vec<&Value> = match t["kind"].as_str() {
                            Some("copy") => vec![&t["src"]],
                            _ => t["srcs"].as_array().expect("srcs").iter().collect(),
                        };
                        for s in srcs {
                            let r = s["rank"].as_u64().expect("src rank");
                            if r != me {
                                from.insert(r);
                            }
                        }
                    }
                    sends += to.len() + from.len();
                }
            }
        }
    }
    (sends, waits)
}

#[test]
fn ring_all_reduce_picture_has_a_row_per_rank_and_an_arrow_per_send() {
    let path = std::env::temp_dir().join(format!("opennrt_lower_{}.svg", std::process::id()));
    let path_s = path.to_str().expect("utf-8 path");
    opennrt(&["--quiet", "--svg", path_s]);
    let svg = std::fs::read_to_string(&path).expect("the SVG was written");
    let _ = std::fs::remove_file(&path);
    let doc = roxmltree::Document::parse(&svg).expect("well-formed SVG");
    let texts: Vec<String> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|n| n.text().unwrap_or("").trim().to_string())
        .collect();
    let rows: Vec<&String> = texts.iter().filter(|t| t.starts_with("rank ")).collect();
    assert_eq!(rows, ["rank 0", "rank 1", "rank 2", "rank 3"]);
    let stroke = |n: &roxmltree::Node| n.attribute("stroke").unwrap_or("").to_ascii_lowercase();
    let arrows = doc
        .descendants()
        .filter(|n| n.has_tag_name("polyline") && ARROWS.contains(&stroke(n).as_str()))
        .count();
    let dots = doc
        .descendants()
        .filter(|n| n.has_tag_name("circle"))
        .count();
    let (sends, waits) = expected();
    assert!(sends > 0 && waits > 0);
    assert_eq!(
        arrows, sends,
        "one arrow per cross-rank send of the program"
    );
    assert_eq!(dots, waits, "one mark per semaphore wait");
    // Every arrow has its chunk label; a ring all-reduce both copies and reduces.
    let labels = texts
        .iter()
        .filter(|t| t.starts_with('c') && t[1..].starts_with(|c: char| c.is_ascii_digit()))
        .count();
    assert_eq!(labels, sends);
    assert!(texts.iter().any(|t| t.ends_with(" +")), "no reduce label");
    assert!(texts.iter().any(|t| t.starts_with("step 0")));
}

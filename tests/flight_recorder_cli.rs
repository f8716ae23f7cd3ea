//! `opennrt flight-recorder DIR` on rank files written by hand here (docs/hangs.md §2), not by
//! the recorder: the culprit it names and its exit status (0 consistent, 1 a finding, 2 bad
//! input).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_opennrt");

fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().expect("run opennrt")
}

fn header(gid: u32, recorded: u64) -> String {
    format!(
        r#"{{"format":"opennrt-flight-recorder","version":1,"job":"t","gid":{gid},"pid":1,"host":"h","capacity":2000,"recorded":{recorded},"anchor_unix_ns":0,"written_ns":9000000000,"reason":"nrt_close"}}"#
    )
}

/// A record of global id `gid` in group [0, 1, 2] at instance `i` in `state`.
fn record(gid: u32, i: u64, state: &str) -> String {
    let end = match state {
        "done" | "failed" => format!(r#","ended_ns":{}"#, i * 1000 + 500),
        _ => String::new(),
    };
    let err = match state {
        "failed" => r#","error":"NRT_TIMEOUT""#,
        _ => "",
    };
    format!(
        r#"{{"seq":{i},"instance":{i},"kind":"cc","op":"all_reduce","dtype":"bf16","count":64,"group":[0,1,2],"rank":{gid},"gid":{gid},"algorithm":"ring","state":"{state}"{err},"scheduled_ns":{},"started_ns":{}{end}}}"#,
        i * 1000,
        i * 1000 + 10
    )
}

fn write_dir(name: &str, ranks: &[(u32, Vec<&str>)]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("opennrt-frcli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (gid, states) in ranks {
        let mut text = header(*gid, states.len() as u64) + "\n";
        for (i, s) in states.iter().enumerate() {
            text += &record(*gid, i as u64, s);
            text.push('\n');
        }
        std::fs::write(dir.join(format!("flight-t-rank{gid}.json")), text).unwrap();
    }
    dir
}

fn tool(dir: &Path) -> (i32, String) {
    let o = run(&["flight-recorder", dir.to_str().unwrap()]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    (o.status.code().unwrap_or(-1), out)
}

#[test]
fn a_rank_that_never_entered_is_the_culprit_and_exit_is_1() {
    let dir = write_dir(
        "skip",
        &[
            (0, vec!["done", "done", "failed"]),
            (1, vec!["done", "done", "running"]),
            (2, vec!["done", "done"]),
        ],
    );
    let (code, out) = tool(&dir);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("rank 2 never entered it"), "{out}");
    assert!(
        out.contains("culprit: rank 2 never entered collective #2 of group [0, 1, 2]"),
        "{out}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn consistent_files_exit_0() {
    let all = vec!["done", "done", "done"];
    let dir = write_dir("ok", &[(0, all.clone()), (1, all.clone()), (2, all)]);
    let (code, out) = tool(&dir);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("consistent: 3 rank(s)"), "{out}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_input_exits_2() {
    let dir = write_dir("bad", &[]);
    assert_eq!(tool(&dir).0, 2, "an empty directory");
    std::fs::write(dir.join("flight-t-rank0.json"), "not json\n").unwrap();
    assert_eq!(tool(&dir).0, 2, "a file that is no rank file");
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(tool(&dir).0, 2, "a directory that is not there");
    assert_eq!(run(&["flight-recorder"]).status.code(), Some(2), "no DIR");
}

//! The `nccom-test` binary end to end: every operation with `--check` at small sizes, one
//! process per rank (2 and 3 ranks) and in `--threads` mode; the table's rows (column count,
//! numbers that parse), the `Avg bus bandwidth` line, the JSON report's keys, the
//! variable-size ops with non-uniform `--variable-size-op-metadata` tables, and the exit status
//! 2 of refused command lines.
//!
//! Every run gets `NEURON_RT_EXEC_TIMEOUT=10` so that a broken runtime fails a size in seconds
//! rather than the default minute (the whole file stays well under a minute when it works).

use std::process::{Command, Output};

/// Every operation the NEFF path runs.
const OPS: [&str; 8] = [
    "allr",
    "allg",
    "redsct",
    "alltoall",
    "permute",
    "sendrecv",
    "alltoallv",
    "allgv",
];

/// Run the binary with `args` (whitespace-separated).
fn run(args: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nccom-test"))
        .args(args.split_whitespace())
        .env("NEURON_RT_EXEC_TIMEOUT", "10")
        .output()
        .expect("nccom-test runs")
}

/// Run the binary with `args` and the extra environment `env` (an empty value removes the
/// variable).
fn run_env(args: &str, env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_nccom-test"));
    c.args(args.split_whitespace())
        .env("NEURON_RT_EXEC_TIMEOUT", "10");
    for (k, v) in env {
        if v.is_empty() {
            c.env_remove(k);
        } else {
            c.env(k, v);
        }
    }
    c.output().expect("nccom-test runs")
}

/// Stdout and stderr as text.
fn texts(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A successful run's table: the header's cells and every row's cells. Checks that each row
/// has the header's column count, that every cell but type and algorithm is a number, and
/// that the last line is `Avg bus bandwidth:<TAB>X.XXXXGB/s`.
fn table(args: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let o = run(args);
    let (out, err) = texts(&o);
    assert!(
        o.status.success(),
        "nccom-test {args}: {:?}\n{out}\n{err}",
        o.status
    );
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines.len() >= 3, "nccom-test {args}:\n{out}");
    let header: Vec<String> = lines[0].split_whitespace().map(String::from).collect();
    assert_eq!(header[0], "size(B)", "{out}");
    let last = lines[lines.len() - 1];
    let bw = last
        .strip_prefix("Avg bus bandwidth:\t")
        .and_then(|r| r.strip_suffix("GB/s"))
        .unwrap_or_else(|| panic!("nccom-test {args}: last line {last:?}"));
    let (int, frac) = bw.split_once('.').expect("decimals");
    assert!(
        int.parse::<u64>().is_ok() && frac.len() == 4 && frac.parse::<u64>().is_ok(),
        "{last}"
    );
    let mut rows = Vec::new();
    for l in &lines[1..lines.len() - 1] {
        let cells: Vec<String> = l.split_whitespace().map(String::from).collect();
        assert_eq!(cells.len(), header.len(), "nccom-test {args}: row {l:?}");
        for (h, c) in header.iter().zip(&cells) {
            if h != "type" && h != "algorithm" {
                assert!(c.parse::<f64>().is_ok(), "{h} = {c:?} in {l:?}");
            }
        }
        rows.push(cells);
    }
    (header, rows)
}

/// The size column of each row.
fn sizes(rows: &[Vec<String>]) -> Vec<u64> {
    rows.iter().map(|r| r[0].parse().unwrap()).collect()
}

/// Every op × {fp32, bf16} on two processes.
#[test]
fn every_op_checks_on_two_processes() {
    for (op, dtype) in OPS.iter().flat_map(|op| [(op, "fp32"), (op, "bf16")]) {
        let esz = if dtype == "fp32" { 4 } else { 2 };
        let (header, rows) = table(&format!(
            "-r 2 {op} -b 1kb -e 8kb -f 2 -d {dtype} -n 3 -w 1 --check --non-interactive"
        ));
        assert_eq!(
            header,
            [
                "size(B)",
                "count(elems)",
                "type",
                "time:avg(us)",
                "algbw(GB/s)",
                "busbw(GB/s)"
            ]
        );
        assert_eq!(sizes(&rows), [1024, 2048, 4096, 8192], "{op}");
        assert!(rows
            .iter()
            .all(|r| r[2] == dtype && r[1] == (r[0].parse::<u64>().unwrap() / esz).to_string()));
    }
}

/// Every op × {fp32, bf16} on three processes: sizes round down to whole per-rank blocks
/// where the op splits them.
#[test]
fn every_op_checks_on_three_processes() {
    for (op, dtype) in OPS.iter().flat_map(|op| [(*op, "fp32"), (*op, "bf16")]) {
        let (_, rows) = table(&format!(
            "-r 3 {op} -b 1kb -e 4kb -f 4 -d {dtype} -n 2 -w 1 --check"
        ));
        let want: &[u64] = match op {
            "allr" | "permute" | "sendrecv" => &[1024, 4096],
            _ => &[1020, 4092],
        };
        assert_eq!(sizes(&rows), want, "{op} {dtype}");
    }
}

/// Every op × {fp32, bf16} on eight processes (one rank each), the issue's largest group.
#[test]
fn every_op_checks_on_eight_processes() {
    for op in OPS {
        for dtype in ["fp32", "bf16"] {
            let (_, rows) = table(&format!(
                "-r 8 {op} -b 8kb -e 8kb -d {dtype} -n 2 -w 1 --check"
            ));
            assert_eq!(sizes(&rows), [8192], "{op} {dtype}");
            assert!(rows.iter().all(|r| r[2] == dtype), "{op} {dtype}");
        }
    }
}

#[test]
fn every_op_checks_in_threads_mode() {
    for op in OPS {
        let (_, rows) = table(&format!(
            "-r 4 {op} -b 256 -e 16kb -f 8 -d fp8 -n 2 -w 1 --check all_ones --threads"
        ));
        assert_eq!(rows.len(), 3, "{op}");
        assert!(rows.iter().all(|r| r[2] == "fp8"));
    }
    let (_, rows) = table("-r 2 allg -b 1kb -e 1kb -d int32 -n 2 -w 0 --check --threads --seed 7");
    assert_eq!(sizes(&rows), [1024]);
}

/// `-t`, `--show-algorithm`, `--show-input-output-size` and the JSON report.
#[test]
fn optional_columns_and_the_json_report() {
    let report = std::env::temp_dir().join(format!("nccom_test_it_{}.json", std::process::id()));
    let (header, rows) = table(&format!(
        "allr -r 2 -b 1kb -e 4kb -f 4 -d fp32 -n 5 -w 1 -t avg p25 p50 p90 p99 \
         --show-algorithm --show-input-output-size --report-to-json-file {}",
        report.display()
    ));
    assert_eq!(
        header,
        [
            "size(B)",
            "count(elems)",
            "total_input_size(B)",
            "total_output_size(B)",
            "type",
            "time:avg(us)",
            "time:p25(us)",
            "time:p50(us)",
            "time:p90(us)",
            "time:p99(us)",
            "algbw(GB/s)",
            "busbw(GB/s)",
            "algorithm"
        ]
    );
    assert_eq!(rows.len(), 2);
    for r in &rows {
        assert!(
            ["mesh", "rdh", "kangaring", "ring", "hier"].contains(&r[12].as_str()),
            "{r:?}"
        );
        let (_, decimals) = r[5].split_once('.').expect("the mean has decimals");
        assert!(
            (1..=2).contains(&decimals.len()) && (decimals.len() == 1 || !decimals.ends_with('0')),
            "the mean has 1 or 2 decimals, no trailing zero: {r:?}"
        );
        assert!(!r[6].contains('.'), "percentiles are integers: {r:?}");
    }
    let text = std::fs::read_to_string(&report).unwrap();
    std::fs::remove_file(&report).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    let first = results[0].as_object().unwrap();
    for k in &header {
        assert!(first.contains_key(k.as_str()), "{k} missing from {text}");
    }
    assert_eq!(first["size(B)"], 1024);
    assert_eq!(first["count(elems)"], 256);
    assert_eq!(first["type"], "fp32");
    assert!(first["busbw(GB/s)"].as_f64().unwrap() > 0.0);
    assert!(text.find("\"type\"").unwrap() < text.find("\"algbw(GB/s)\"").unwrap());
    assert!(text.find("\"busbw(GB/s)\"").unwrap() < text.find("\"time:avg(us)\"").unwrap());
}

/// Options it cannot honour, and operations it cannot run, exit 2 with the reason.
#[test]
fn refused_command_lines_exit_2() {
    for (args, why) in [
        ("-r 3 allr -d fp32 --hosts h1 h2", "does not divide"),
        ("-r 2 allr -d fp32 -N 2", "needs the hosts"),
        ("-r 2 allr -d fp32 -S", "not supported"),
        ("-r 2 allr -d fp32 --streams-json s.json", "not supported"),
        (
            "-r 2 allr -d fp32 --variable-size-op-metadata m.json",
            "applies to alltoallv and all_gatherv",
        ),
        (
            "-r 2 alltoallv -d fp32 --variable-size-op-metadata /nonexistent/m.json",
            "--variable-size-op-metadata /nonexistent/m.json",
        ),
        ("-r 2 allr --no-such-flag", "unknown option"),
        ("allr -d fp32", "-r/--nworkers is required"),
        ("-r 4 allg -b 2 -e 3", "uint8 (the default -d/--datatype)"),
        ("-r 2 allr -d fp32 -b 2 -e 3", "no size to run"),
        (
            "-r 2 allr -d fp32 --report-to-json-file /nonexistent/r.json",
            "--report-to-json-file /nonexistent/r.json",
        ),
    ] {
        let o = run(args);
        let (out, err) = texts(&o);
        assert_eq!(o.status.code(), Some(2), "{args}: {out}{err}");
        assert!(err.contains(why), "{args}: {err}");
        assert!(out.is_empty(), "{args}: {out}");
    }
    let o = run("--help");
    assert!(o.status.success());
    assert!(texts(&o).0.starts_with("usage: nccom-test"));
}

/// A temporary directory of this test process, removed when dropped.
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let d = std::env::temp_dir().join(format!("nccom_test_{tag}_{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        TempDir(d)
    }

    /// Write `text` to `name` in the directory; its path.
    fn file(&self, name: &str, text: &str) -> String {
        let p = self.0.join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Non-uniform tables from `--variable-size-op-metadata` (zero counts, gaps, one entry per
/// rank, receive rows derived or given) pass `--check` in processes and threads; a table a
/// size cannot hold and a bad file are refused with exit 2 before anything runs.
#[test]
fn variable_size_ops_run_a_metadata_file() {
    let dir = TempDir::new("metadata");
    let a2av = dir.file(
        "a2av.json",
        r#"{"metadata":[
            {"send_counts":[3,0,5],"send_displs":[0,3,3]},
            {"send_counts":[1,2,0],"send_displs":[7,0,0]},
            {"send_counts":[4,4,4],"send_displs":[0,0,4],"recv_counts":[5,0,4],"recv_displs":[9,0,2]}]}"#,
    );
    let agv = dir.file(
        "agv.json",
        r#"{"metadata":[{"send_counts":[2],"send_displs":[1]},{"send_counts":[0],"send_displs":[0]},
            {"send_counts":[3],"send_displs":[0],"recv_counts":[2,0,3],"recv_displs":[5,0,1]}]}"#,
    );
    for mode in ["", "--threads"] {
        let (_, rows) = table(&format!(
            "-r 3 alltoallv -b 1kb -e 4kb -f 4 -d bf16 -n 2 -w 1 --check \
             --variable-size-op-metadata {a2av} {mode}"
        ));
        assert_eq!(sizes(&rows), [1020, 4092], "alltoallv {mode}");
        let (_, rows) = table(&format!(
            "-r 3 allgv -b 96 -e 384 -f 4 -d fp32 -n 2 -w 1 --check --alltoallv-metadata {agv} \
             {mode}"
        ));
        assert_eq!(sizes(&rows), [96, 384], "allgv {mode}");
    }
    for (args, why) in [
        (
            format!("-r 3 allgv -b 12 -e 96 -f 2 -d fp32 --alltoallv-metadata {agv}"),
            "size 12 B (1 elements in, 3 out per rank, of fp32) cannot hold the table",
        ),
        (
            format!(
                "-r 3 alltoallv -d fp32 --variable-size-op-metadata {}",
                dir.file(
                    "bad.json",
                    r#"{"metadata":[{"send_counts":[1],"send_displs":[0]}]}"#
                )
            ),
            "send_counts has 1 entries; alltoallv on groups of 3 needs 3",
        ),
        (
            format!(
                "-r 2 alltoallv -d fp32 --variable-size-op-metadata {}",
                dir.file(
                    "mismatch.json",
                    r#"{"metadata":[{"send_counts":[1,1],"send_displs":[0,1],"recv_counts":[1,2]}]}"#
                )
            ),
            "mismatch.json: ALL_TO_ALL_V: rank 0's receive count from peer 1 is 2 but peer 1 \
             sends it 1",
        ),
    ] {
        let o = run(&args);
        let (out, err) = texts(&o);
        assert_eq!(o.status.code(), Some(2), "{args}: {out}{err}");
        assert!(err.contains(why), "{args}: {err}");
    }
}

/// Integer all-reduce and reduce-scatter run as the Neuron compiler makes them run: an fp32
/// collective on the device, widened before and narrowed (saturating) after by the workers.
/// `--check` passes for every size and type in processes and threads; the table reports the
/// user's type and sizes; the vendor guide's first command (default uint8) runs.
#[test]
fn integer_reductions_run_widened_to_fp32() {
    for dtype in ["uint8", "int8", "uint16", "int16", "uint32", "int32"] {
        let esz: u64 = dtype
            .trim_start_matches(['u', 'i', 'n', 't'])
            .parse::<u64>()
            .unwrap()
            / 8;
        for op in ["allr", "redsct"] {
            let (_, rows) = table(&format!(
                "-r 2 {op} -b 1kb -e 16kb -f 4 -d {dtype} -n 2 -w 1 --check"
            ));
            assert_eq!(sizes(&rows), [1024, 4096, 16384], "{op} {dtype}");
            for r in &rows {
                assert_eq!(r[2], dtype);
                assert_eq!(r[1], (r[0].parse::<u64>().unwrap() / esz).to_string());
            }
        }
        let (_, rows) = table(&format!(
            "-r 3 allr -b 64 -e 4kb -f 8 -d {dtype} -n 1 -w 0 --check --threads"
        ));
        assert_eq!(rows.len(), 3, "{dtype}");
    }
    // all_ones: every element of an all-reduce is the rank count (an independent expectation).
    let (_, rows) = table("-r 3 allr -b 1kb -e 1kb -d int8 -n 1 -w 0 --check all_ones");
    assert_eq!(rows.len(), 1);
    let (_, rows) = table("-r 2 allr -b 1mb -e 1mb -n 2 -w 1 --check");
    assert_eq!(rows[0][..3], ["1048576", "1048576", "uint8"]);
}

/// `-I` alone (the guide's `-n 15 -w 5 -I 10`) and `-W` alone run one NEFF of `-n` + `-w`
/// operations per size.
#[test]
fn neff_iters_and_warmup_run_alone_or_together() {
    for extra in ["-n 15 -w 5 -I 10", "-n 3 -w 1 -W 2", "-n 2 -w 2 -I 2 -W 1"] {
        let (_, rows) = table(&format!("-r 2 allr -b 1kb -e 1kb -d fp32 --check {extra}"));
        assert_eq!(sizes(&rows), [1024], "{extra}");
    }
}

/// SIGTERM to nccom-test in a long sweep on 8 processes: every worker is gone and the temp
/// directory removed, exit status 128 + 15. The workers are found as the children of the
/// nccom-test process (/proc/<pid>/task/<pid>/children) while it runs.
#[test]
fn sigterm_stops_every_worker_and_removes_the_temp_files() {
    let child = Command::new(env!("CARGO_BIN_EXE_nccom-test"))
        .args("-r 8 allr -d fp32 -b 1kb -e 1gb -f 2 -n 1000 -w 5".split_whitespace())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let children = || {
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
            .unwrap_or_default()
            .split_whitespace()
            .map(String::from)
            .collect::<Vec<_>>()
    };
    // Wait (without a clock assertion) until the workers of a size run.
    let mut workers = Vec::new();
    for _ in 0..6000 {
        workers = children();
        if workers.len() >= 8 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(workers.len() >= 8, "the workers never started: {workers:?}");
    let dir = std::env::temp_dir().join(format!("nccom_test_{pid}"));
    assert!(dir.is_dir());
    // SAFETY: a plain kill(2) of the child this test started.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(128 + 15), "{err}");
    assert!(err.contains("stopped by SIGTERM"), "{err}");
    for w in &workers {
        // A reaped worker has no /proc entry; a zombie or a running one would.
        assert!(
            !std::path::Path::new(&format!("/proc/{w}")).exists()
                || std::fs::read_to_string(format!("/proc/{w}/stat"))
                    .map(|s| !s.contains("nccom-test"))
                    .unwrap_or(true),
            "worker {w} survived"
        );
    }
    assert!(!dir.exists(), "{} was left behind", dir.display());
    let logs: Vec<_> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!("nccom_test_log_{pid}_"))
        })
        .collect();
    assert!(logs.is_empty(), "logs left behind: {logs:?}");
}

#[test]
fn a_failed_workers_own_error_reaches_the_screen() {
    // A carrier that is not there: every worker's nrt_init refuses, legitimately, and says why
    // on its stderr (which goes to the size's log file).
    let o = run_env(
        "-r 2 allr -b 8 -e 8 -d fp32",
        &[("OPENNRT_NCFW_PATH", "/nonexistent/libncfw.so")],
    );
    let (out, err) = texts(&o);
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(
        out.contains("Failure running neuron-bench - log file"),
        "{out}"
    );
    assert!(
        err.contains("worker said: nccom-test worker (ranks [0]): nrt_init"),
        "{err}"
    );
    assert!(
        err.contains("worker said:") && err.contains("/nonexistent/libncfw.so"),
        "the runtime's own reason is not on screen: {err}"
    );
}

/// A run across hosts without Open MPI's mpirun on PATH is refused before any size, naming
/// the package; the ranks of one host must fit its cores (`-r` / `-N` of them).
#[test]
fn hosts_without_mpirun_are_refused_up_front() {
    let o = run_env(
        "-r 4 --hosts h1 h2 allr -b 8 -e 8 -d fp32",
        &[("PATH", "/nonexistent")],
    );
    let (out, err) = texts(&o);
    assert_eq!(o.status.code(), Some(2), "{out}\n{err}");
    assert!(out.is_empty(), "a size started: {out}");
    assert!(
        err.contains("mpirun, which is not on PATH") && err.contains("apt install openmpi-bin"),
        "{err}"
    );
    let o = run_env(
        "-r 66 -N 2 --hosts h1 h2 allr -b 8 -e 8 -d fp32",
        &[
            ("OPENNRT_INSTANCE_TYPE", ""),
            ("NEURON_RT_FAKE_INSTANCE_TYPE", ""),
            ("OPENNRT_TOPOLOGY", ""),
        ],
    );
    let (out, err) = texts(&o);
    assert_eq!(o.status.code(), Some(2), "{out}\n{err}");
    assert!(
        err.contains("-r/--nworkers 66 over -N/--nnodes 2 puts 33 ranks on each host"),
        "{err}"
    );
}

#[test]
fn more_ranks_than_the_instance_has_cores_are_refused_up_front() {
    // trn1.32xlarge (the default) has 32 logical cores: no size starts, no timeout is waited.
    let o = run_env(
        "-r 33 allr -b 8 -e 8 -d fp32",
        &[
            ("OPENNRT_INSTANCE_TYPE", ""),
            ("NEURON_RT_FAKE_INSTANCE_TYPE", ""),
            ("OPENNRT_TOPOLOGY", ""),
        ],
    );
    let (out, err) = texts(&o);
    assert_eq!(o.status.code(), Some(2), "{out}\n{err}");
    assert!(out.is_empty(), "a size started: {out}");
    assert!(
        err.contains("-r/--nworkers 33")
            && err.contains("trn1.32xlarge has 32")
            && err.contains("OPENNRT_INSTANCE_TYPE: trn2.48xlarge"),
        "{err}"
    );
    // A smaller instance refuses fewer ranks.
    let o = run_env(
        "-r 3 allr -b 8 -e 8 -d fp32",
        &[
            ("OPENNRT_INSTANCE_TYPE", "trn1.2xlarge"),
            ("OPENNRT_TOPOLOGY", ""),
        ],
    );
    let (_, err) = texts(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("trn1.2xlarge has 2"), "{err}");
}

#[test]
fn a_size_that_cannot_fit_is_refused_up_front() {
    for (args, why) in [
        // 2^48 B is the NEFF loader's var limit.
        (
            "-r 2 allr -d fp32 -b 300000gb -e 300000gb",
            "limit of 2^48 B per var",
        ),
        // Every rank's tensors live in this host's memory.
        (
            "-r 2 allr -d fp32 -b 1000gb -e 1000gb",
            "do not fit this host's",
        ),
    ] {
        let o = run(args);
        let (out, err) = texts(&o);
        assert_eq!(o.status.code(), Some(2), "nccom-test {args}: {out}\n{err}");
        assert!(out.is_empty(), "nccom-test {args}: a size started: {out}");
        assert!(err.contains(why), "nccom-test {args}: {err}");
    }
}

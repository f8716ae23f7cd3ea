//! `opennrt lower --bench` times the runtime's program cache, so it must reach that cache with
//! the program it printed: the options that change the lowering become the runtime's lowering
//! variables, every timed lookup is a hit, and a chunk size the runtime cannot take (it reads
//! bytes, rounded to 32 elements) is refused rather than timed on some other program. The
//! figures themselves are never asserted.

use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_opennrt");

fn lower(extra: &[&str]) -> Output {
    Command::new(BIN)
        .args(["lower", "--op", "all_reduce", "--quiet", "--bench"])
        .args(extra)
        .output()
        .expect("run opennrt")
}

#[test]
fn bench_times_hits_of_the_runtime_cache() {
    // --topology, --channels, --chunk (a multiple of 32 elements) and --alg all reach it.
    let o = lower(&[
        "--ranks",
        "4",
        "--count",
        "4096",
        "--alg",
        "ring",
        "--channels",
        "1",
        "--chunk",
        "64",
        "--topology",
        "trn2.48xlarge",
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let line = out
        .lines()
        .find(|l| l.starts_with("bench: runtime program cache"))
        .unwrap_or_else(|| panic!("no bench line in:\n{out}"));
    assert!(line.contains("cached lookup median"), "{line}");
    assert!(line.contains("over 1000 hits"), "{line}");
}

#[test]
fn bench_refuses_a_program_the_runtime_would_not_prepare() {
    // 100 elements: the runtime's NEURON_RT_CC_CHUNK_SIZE of 400 B rounds down to 96.
    let o = lower(&[
        "--ranks", "2", "--count", "65536", "--dtype", "fp32", "--alg", "ring", "--chunk", "100",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("nothing timed"), "{err}");
    assert!(!String::from_utf8_lossy(&o.stdout).contains("bench:"));
}

//! The progress line of the long commands (src/progress.rs): nothing on a pipe, an updating
//! `\r` line on a terminal (a pty through util-linux `script`, skipped with a printed reason
//! where it is missing). Only stderr carries it; the table on stdout is never touched.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_opennrt");
const PERF: &[&str] = &[
    "perf",
    "--op",
    "all_reduce",
    "--ranks",
    "2",
    "-b",
    "8",
    "-e",
    "128",
    "-n",
    "1",
];

#[test]
fn piped_output_has_no_progress_bytes() {
    let o = Command::new(BIN).args(PERF).output().expect("run opennrt");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        !o.stderr.contains(&b'\r'),
        "stderr: {:?}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!o.stdout.contains(&b'\r'));
    assert!(!String::from_utf8_lossy(&o.stderr).contains("perf ["));
}

#[test]
fn a_terminal_gets_one_line_that_is_erased() {
    let script = Command::new("script").arg("--version").output();
    if !script.is_ok_and(|o| o.status.success()) {
        eprintln!("skipped: util-linux `script` is not installed (needed for a pty)");
        return;
    }
    // stdout goes to /dev/null inside the pty, so what the pty shows is stderr alone.
    let cmd = format!("{BIN} {} >/dev/null", PERF.join(" "));
    let o = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .output()
        .expect("run script");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
    let shown = String::from_utf8_lossy(&o.stdout);
    assert!(shown.contains("\rperf [0/"), "pty showed {shown:?}");
    // The last thing written erases the line: a carriage return after blanks.
    let tail = shown.trim_end_matches(['\n']);
    assert!(
        tail.ends_with('\r'),
        "the line is not erased at the end: {shown:?}"
    );
}

//! Every `--help` of `opennrt` tells the truth about its parser: `--help` exits 0, every option
//! the help lists is accepted by the parser (with a value when the help shows one), and an
//! option the help does not list is refused as unknown. The parser and the help share one
//! table per subcommand (src/bin/opennrt/args.rs); this checks the binary users run.

use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_opennrt");

/// The subcommands with options, as typed after `opennrt`.
const SUBCOMMANDS: &[&[&str]] = &[
    &["perf"],
    &["lower"],
    &["verify"],
    &["ctx-log"],
    &["flight-recorder"],
    &["neff", "build"],
    &["neff", "info"],
];

/// An option that no subcommand has.
const BOGUS: &str = "--zz-no-such-option";

fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().expect("run opennrt")
}

/// The options a help text lists: each option line starts (after indentation) with `-`; its
/// left column is `--name, -a VALUE` (spellings separated by commas, then an optional value).
fn listed(help: &str) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    for line in help.lines() {
        let t = line.trim_start();
        if !t.starts_with('-') || line.len() == t.len() {
            continue;
        }
        let left = t.split("  ").next().unwrap_or("");
        let words: Vec<&str> = left.split_whitespace().collect();
        let takes_value = words
            .last()
            .is_some_and(|w| !w.starts_with('-') && !w.ends_with(','));
        for w in words {
            let name = w.trim_end_matches(',');
            if name.starts_with('-') {
                out.push((name.to_string(), takes_value));
            }
        }
    }
    out
}

#[test]
fn every_help_exits_zero() {
    for args in [&["--help"][..], &["help"], &["neff", "--help"]]
        .into_iter()
        .chain(SUBCOMMANDS.iter().copied())
    {
        let mut a = args.to_vec();
        if SUBCOMMANDS.contains(&args) {
            a.push("--help");
        }
        let o = run(&a);
        assert!(o.status.success(), "opennrt {a:?} exits {:?}", o.status);
        assert!(
            String::from_utf8_lossy(&o.stdout).starts_with("usage: opennrt"),
            "opennrt {a:?} prints no usage"
        );
    }
}

#[test]
fn every_listed_option_is_accepted_and_nothing_else() {
    for sub in SUBCOMMANDS {
        let mut a = sub.to_vec();
        a.push("--help");
        let help = String::from_utf8(run(&a).stdout).expect("utf-8 help");
        let opts = listed(&help);
        assert!(
            opts.len() > 1,
            "opennrt {sub:?}: no options found in\n{help}"
        );
        for (name, takes_value) in &opts {
            if name == "-h" || name == "--help" {
                continue;
            }
            // The option (and a value), then one the parser must refuse: the refusal proves
            // the parser read past the listed option without calling it unknown, and nothing
            // runs.
            let mut a = sub.to_vec();
            a.push(name);
            if *takes_value {
                a.push("1");
            }
            a.push(BOGUS);
            let o = run(&a);
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(2), "opennrt {a:?}: {err}");
            assert!(
                err.contains(&format!("unknown option {BOGUS}")),
                "opennrt {a:?} did not get past {name}: {err}"
            );
        }
        // Nothing outside the help is accepted.
        let mut a = sub.to_vec();
        a.push(BOGUS);
        let o = run(&a);
        assert_eq!(o.status.code(), Some(2), "opennrt {a:?}");
    }
}

#[test]
fn perf_takes_nccl_tests_short_sizes() {
    let help = String::from_utf8(run(&["perf", "--help"]).stdout).unwrap();
    let names: Vec<String> = listed(&help).into_iter().map(|(n, _)| n).collect();
    for short in ["-b", "-e", "-f"] {
        assert!(
            names.iter().any(|n| n == short),
            "perf --help lacks {short}"
        );
    }
    // A real sweep with the short spellings: 8 B to 32 B by 4 is two rows.
    let o = run(&[
        "perf",
        "--op",
        "all_reduce",
        "--ranks",
        "2",
        "-b",
        "8",
        "-e",
        "32",
        "-f",
        "4",
        "-n",
        "1",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rows = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| !l.starts_with('#'))
        .count();
    assert_eq!(rows, 2);
}

/// `nccom-test --help` against its parser: every option it lists above the refused part is
/// accepted (with a value of the right kind when the help shows one), and the options it once
/// left out are listed.
#[test]
fn nccom_test_help_lists_what_its_parser_accepts() {
    let bin = env!("CARGO_BIN_EXE_nccom-test");
    let o = Command::new(bin)
        .arg("--help")
        .output()
        .expect("run nccom-test");
    assert!(o.status.success(), "nccom-test --help exits {:?}", o.status);
    let help = String::from_utf8(o.stdout).expect("utf-8 help");
    let accepted = help.split("\nRefused").next().unwrap_or("");
    let opts = listed(accepted);
    for want in [
        "--unique-buff",
        "--help",
        "--non-interactive",
        "--plot",
        "--threads",
    ] {
        assert!(
            opts.iter().any(|(n, _)| n == want),
            "{want} is not in\n{help}"
        );
    }
    assert!(
        help.contains("--alltoallv-metadata"),
        "the 2.28 spelling is not in the help"
    );
    for (name, takes_value) in &opts {
        if name == "-h" || name == "--help" {
            continue;
        }
        let value = match name.as_str() {
            "-d" | "--datatype" => "fp32",
            "-c" | "--check" => "random",
            "-t" | "--stats" => "avg",
            _ => "1",
        };
        let mut a = vec!["-r", "2", "allr", name.as_str()];
        if *takes_value {
            a.push(value);
        }
        a.push(BOGUS);
        let o = Command::new(bin).args(&a).output().expect("run nccom-test");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "nccom-test {a:?}: {err}");
        assert!(
            err.contains(&format!("unknown option {BOGUS}")),
            "nccom-test {a:?} did not get past {name}: {err}"
        );
    }
}

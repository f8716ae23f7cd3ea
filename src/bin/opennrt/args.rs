//! Small shared argument helpers for the subcommands (no parser dependency: the grammar is flat
//! `--flag value` pairs).

use opennrt::isa::enums::Dtype;
use opennrt::lower::request::{CollectiveOp, ReduceOp};

/// Print `msg` for `cmd` and exit 2 (bad usage).
pub fn fail(cmd: &str, msg: &str) -> ! {
    eprintln!("opennrt {cmd}: {msg}");
    std::process::exit(2)
}

/// Operation names accepted on the command line (shared with the case matrix).
pub use opennrt::lower::cases::OP_NAMES as OPS;

/// Parse an operation name.
pub fn op(cmd: &str, s: &str) -> CollectiveOp {
    OPS.iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(s))
        .map(|&(_, o)| o)
        .unwrap_or_else(|| {
            let names: Vec<_> = OPS.iter().map(|(n, _)| *n).collect();
            fail(
                cmd,
                &format!("unknown --op {s:?}; use one of {}", names.join(", ")),
            )
        })
}

/// The command-line name of an operation.
pub use opennrt::lower::cases::op_name;

/// Dtype names accepted on the command line (shared with the case matrix); the short FP8
/// names `fp8_e3`, `fp8_e4`, `fp8_e5` are accepted too.
pub use opennrt::lower::cases::DTYPE_NAMES as DTYPES;

/// Short FP8 aliases.
const DTYPE_ALIASES: &[(&str, Dtype)] = &[
    ("fp8_e3", Dtype::Fp8E3),
    ("fp8_e4", Dtype::Fp8E4),
    ("fp8_e5", Dtype::Fp8E5),
];

/// Parse a dtype name.
pub fn dtype(cmd: &str, s: &str) -> Dtype {
    DTYPES
        .iter()
        .chain(DTYPE_ALIASES)
        .find(|(n, _)| n.eq_ignore_ascii_case(s))
        .map(|&(_, d)| d)
        .unwrap_or_else(|| {
            let names: Vec<_> = DTYPES.iter().map(|(n, _)| *n).collect();
            fail(
                cmd,
                &format!("unknown --dtype {s:?}; use one of {}", names.join(", ")),
            )
        })
}

/// Parse a reduce-op name.
pub fn redop(cmd: &str, s: &str) -> ReduceOp {
    match s.to_ascii_lowercase().as_str() {
        "add" | "sum" => ReduceOp::Add,
        "max" => ReduceOp::Max,
        "min" => ReduceOp::Min,
        _ => fail(cmd, &format!("unknown --redop {s:?}; use add, max or min")),
    }
}

/// Parse a number.
pub fn num<T: std::str::FromStr>(cmd: &str, flag: &str, s: &str) -> T {
    let t = s.trim();
    let parsed = if let Some(sh) = t.strip_prefix("1<<") {
        sh.parse::<u32>()
            .ok()
            .and_then(|k| 1u64.checked_shl(k))
            .and_then(|v| v.to_string().parse().ok())
    } else {
        t.parse().ok()
    };
    parsed.unwrap_or_else(|| fail(cmd, &format!("{flag} {s:?} is not a valid number")))
}

/// Iterate `--flag value` pairs; boolean flags are listed in `switches`.
pub fn pairs(cmd: &str, args: &[String], switches: &[&str]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if !a.starts_with("--") {
            fail(cmd, &format!("unexpected argument {a:?}"));
        }
        if switches.contains(&a.as_str()) {
            out.push((a.clone(), String::new()));
        } else {
            let v = it
                .next()
                .unwrap_or_else(|| fail(cmd, &format!("{a} needs a value")));
            out.push((a.clone(), v.clone()));
        }
    }
    out
}

/// The command-line name of a dtype.
pub use opennrt::lower::cases::dtype_name;

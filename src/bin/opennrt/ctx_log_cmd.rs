//! `opennrt ctx-log`: dump a CC context as `libncfw_ctx_log` does.

use std::io::Write as _;

use crate::args::{self, Opt, Spec};
use opennrt::ncfw::{ctx_log, sample_context, Arch, LogStatus, LOG_BUF_SIZE};

/// The options of `opennrt ctx-log`: the parser and `--help` both read this table.
const SPEC: Spec = Spec {
    cmd: "ctx-log",
    usage: "usage: opennrt ctx-log --arch <5|12|20|28> [--ctx FILE] [--model NAME]

Dump a CC context as libncfw_ctx_log does.",
    opts: &[
        Opt::val(
            "--arch",
            "A",
            "the architecture id: 5, 12, 20 or 28 (required)",
        ),
        Opt::val(
            "--ctx",
            "FILE",
            "the context bytes (default: a sample context with distinctive values in every
             field)",
        ),
        Opt::val(
            "--model",
            "NAME",
            "the model name the dump shows (default sample)",
        ),
    ],
    notes: "",
};

fn fail(msg: &str) -> ! {
    args::fail(SPEC.cmd, msg)
}

/// `opennrt ctx-log`: exit 0 on a complete dump, 1 if truncated, 2 on bad arguments or input.
pub(crate) fn ctx_log_cmd(a: &[String]) -> i32 {
    let (mut arch, mut ctx_path, mut model) = (None, None, "sample".to_string());
    if Spec::wants_help(a) {
        println!("{}", SPEC.help());
        return 0;
    }
    for (k, v) in SPEC.parse(a) {
        match k {
            "--arch" => {
                let id: u32 = v
                    .parse()
                    .unwrap_or_else(|_| fail(&format!("--arch {v:?} is not a number")));
                arch = Some(Arch::from_id(id).unwrap_or_else(|| {
                    fail(&format!("unknown arch {id}; expected one of 5, 12, 20, 28"))
                }));
            }
            "--ctx" => ctx_path = Some(v),
            "--model" => model = v,
            other => args::unhandled(SPEC.cmd, other),
        }
    }
    let arch = arch.unwrap_or_else(|| fail("--arch <5|12|20|28> is required"));
    let ctx = match &ctx_path {
        Some(p) => std::fs::read(p).unwrap_or_else(|e| fail(&format!("cannot read {p}: {e}"))),
        None => sample_context(arch),
    };
    let mut buf = vec![0u8; LOG_BUF_SIZE];
    let status =
        ctx_log(&ctx, arch, model.as_bytes(), &mut buf).unwrap_or_else(|e| fail(e.message()));
    let n = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let _ = std::io::stdout().write_all(&buf[..n]);
    match status {
        LogStatus::Complete => 0,
        LogStatus::Truncated => {
            eprintln!("opennrt ctx-log: output truncated to 1 MiB (libncfw_ctx_log returns 28)");
            1
        }
    }
}

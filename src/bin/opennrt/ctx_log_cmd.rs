//! `opennrt ctx-log`: dump a CC context as `libncfw_ctx_log` does.

use std::io::Write as _;

use opennrt::ncfw::{ctx_log, sample_context, Arch, LogStatus, LOG_BUF_SIZE};

const USAGE: &str = "usage:
  ctx-log    dump a CC context as libncfw_ctx_log does:
             opennrt ctx-log --arch <5|12|20|28> [--ctx <file>] [--model <name>]
             without --ctx, dumps a sample context with distinctive values in every field";

fn fail(msg: &str) -> ! {
    eprintln!("opennrt ctx-log: {msg}");
    std::process::exit(2)
}

/// `opennrt ctx-log`: exit 0 on a complete dump, 1 if truncated, 2 on bad arguments or input.
pub(crate) fn ctx_log_cmd(args: &[String]) -> i32 {
    let (mut arch, mut ctx_path, mut model) = (None, None, "sample".to_string());
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .cloned()
                .unwrap_or_else(|| fail(&format!("{name} needs a value")))
        };
        match a.as_str() {
            "--arch" => {
                let v = value("--arch");
                let id: u32 = v
                    .parse()
                    .unwrap_or_else(|_| fail(&format!("--arch {v:?} is not a number")));
                arch = Some(Arch::from_id(id).unwrap_or_else(|| {
                    fail(&format!("unknown arch {id}; expected one of 5, 12, 20, 28"))
                }));
            }
            "--ctx" => ctx_path = Some(value("--ctx")),
            "--model" => model = value("--model"),
            "-h" | "--help" => {
                println!("{USAGE}");
                return 0;
            }
            other => fail(&format!("unknown argument {other:?}\n{USAGE}")),
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

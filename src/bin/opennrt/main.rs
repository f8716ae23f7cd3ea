//! `opennrt`: the command-line tool (docs/design.md §3).
//!
//! * `opennrt lower` — lower one collective and show the selection, the step program, the cc_op
//!   table and descriptor counts (or the IR as JSON);
//! * `opennrt verify` — verify a matrix of (op, algorithm, ranks, count) programs;
//! * `opennrt ctx-log` — dump a CC context as `libncfw_ctx_log` does;
//! * `opennrt neff build` — write a one-collective NEFF every rank loads (docs/neff.md §2);
//!   `opennrt neff info` — show what a NEFF holds as the loader reads it (docs/neff.md §1);
//! * `opennrt perf` — a collective on N simulated ranks, nccl-tests style; with `--procs P`
//!   through the C API in one process and in P processes (hidden helper: `opennrt perf-rank`);
//! * `opennrt flight-recorder DIR` — line up the ranks' flight-recorder files and name the
//!   first collective some rank never entered or never finished (docs/hangs.md);
//! * `opennrt version`.

mod args;
mod ctx_log_cmd;
mod flight_recorder_cmd;
mod lower_cmd;
mod neff_cmd;
mod perf_cmd;
mod perf_procs;
mod perf_rank;
mod perf_run;

const USAGE: &str = "usage: opennrt <command> [options]

commands:
  perf       run a collective on N simulated ranks, nccl-tests style:
             opennrt perf --op all_reduce --ranks 8 [--dtype bf16] [--maxbytes 4M] (--help for more);
             with --procs P the same through the C API in 1 process and in P processes
  lower      lower one collective: opennrt lower --op <op> --ranks N [options] (--help for more)
  verify     verify the lowering over a matrix of cases: opennrt verify [--quick] (--help for more)
  neff       write or inspect a NEFF: opennrt neff build --op <op> --ranks R --count N --dtype T -o FILE;
             opennrt neff info FILE [--json] (opennrt neff --help for more)
  flight-recorder
             name the rank that never entered a collective: opennrt flight-recorder DIR (--help for more)
  ctx-log    dump a CC context: opennrt ctx-log --arch <5|12|20|28> [--ctx FILE] [--model NAME] (--help for more)
  version    print the OpenNRT version";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rest = args.get(1..).unwrap_or(&[]);
    // The device knobs (OPENNRT_DEVICE_THREADS, …) as `nrt_init` would apply them, with the
    // same errors: the subcommands that run the device directly never call `nrt_init`.
    match opennrt::runtime::config::device_settings_from_env() {
        Ok(s) => opennrt::device::settings::apply(&s),
        Err(e) => {
            eprintln!("opennrt: {}", e.message());
            std::process::exit(2);
        }
    }
    let code = match args.first().map(String::as_str) {
        Some("version") | Some("--version") => {
            println!("opennrt {}", env!("CARGO_PKG_VERSION"));
            0
        }
        Some("ctx-log") => ctx_log_cmd::ctx_log_cmd(rest),
        Some("flight-recorder") => flight_recorder_cmd::flight_recorder_cmd(rest),
        Some("lower") => lower_cmd::lower_cmd(rest),
        Some("verify") => lower_cmd::verify_cmd(rest),
        Some("perf") => perf_cmd::perf_cmd(rest),
        Some("neff") => neff_cmd::neff_cmd(rest),
        // Hidden: one process of `opennrt perf --procs P` (started by that command).
        Some("perf-rank") => perf_rank::perf_rank_cmd(rest),
        Some("-h") | Some("--help") | Some("help") => {
            println!("{USAGE}");
            0
        }
        _ => {
            eprintln!("{USAGE}");
            2
        }
    };
    std::process::exit(code)
}

//! `nccom-test`: a front compatible with the vendor's collective benchmark CLI (the Neuron
//! SDK's nccom-test), running on OpenNRT's software device through the NEFF path
//! (docs/neff.md): per size it writes a NEFF with the collective, and every rank loads it with
//! `nrt_load_collectives` and runs it with `nrt_execute`, one process per rank by default
//! (`--threads`: one process, a thread per rank), as the vendor's tool runs neuron-bench.
//!
//! Modules, by idea: [`args`] (the command line), [`ops`] (operations, what a size means, bus
//! factors), [`dtypes`], [`units`] (sizes and GB/s), [`sweep`] (the sizes of a run), [`stats`]
//! (time statistics), [`table`] and [`report`] (output), [`check`] (data and golden results),
//! [`custom`] (replica groups and pairs files), [`metadata`] (the variable-size ops' tables), [`algo`] (`--show-algorithm`), [`neffgen`]
//! (the NEFF of a size), [`job`] (the parent ↔ worker protocol), [`launch`] (starting workers), [`mpi`] (ranks on several hosts through mpirun), [`limits`] (what a run must fit),
//! [`worker`] (the hidden worker that drives the C ABI), [`widen`] (integer reductions run in
//! fp32) and [`mod@bench`] (one run).
//!
//! Exit status: 0; 1 when a size failed (run or check); 2 for a bad or refused command line.

mod algo;
mod args;
mod bench;
mod check;
mod custom;
mod dtypes;
mod job;
mod launch;
mod limits;
mod metadata;
mod mpi;
mod neffgen;
mod ops;
mod plot;
mod report;
mod stats;
mod sweep;
mod table;
mod units;
mod widen;
mod worker;

/// Run the command line; the exit status.
fn run(argv: &[String]) -> i32 {
    if argv.first().map(String::as_str) == Some(job::WORKER_ARG) {
        return worker::main(&argv[1..]);
    }
    if argv.first().map(String::as_str) == Some(mpi::MPI_WORKER_ARG) {
        return mpi::worker_main(&argv[1..]);
    }
    let (argv, plot) = match plot::take(argv) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("nccom-test: {e}");
            return 2;
        }
    };
    let opts = match args::parse(&argv) {
        Ok(args::Parsed::Help) => {
            println!("{}", args::USAGE);
            return 0;
        }
        Ok(args::Parsed::Run(o)) => *o,
        Err(e) => {
            eprintln!("nccom-test: {e}");
            return 2;
        }
    };
    match bench::prepare(opts) {
        Ok(mut s) => {
            s.plot = plot;
            bench::run(&s)
        }
        Err(e) => {
            eprintln!("nccom-test: {e}");
            2
        }
    }
}

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(run(&argv))
}

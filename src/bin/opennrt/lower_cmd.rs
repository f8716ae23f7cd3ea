//! `opennrt lower` and `opennrt verify` (issue item 9).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Instant;

use opennrt::isa::ccop::{SpadCtrlEntry, SPAD_SLOT_CONTINUE_MARK};
use opennrt::isa::enums::Dtype;
use opennrt::lower::cases::{self, Lowered};
use opennrt::lower::emit::{decode_back, emit};
use opennrt::lower::pipeline::{address_map, lower, ChunkSize, LowerConfig};
use opennrt::lower::program::{Algorithm, Program};
use opennrt::lower::request::{CollectiveOp, CollectiveRequest, ReduceOp};
use opennrt::lower::topology::Topology;
use opennrt::lower::verify::verify;
use opennrt::progress::Progress;

use crate::args::{self, fail, Opt, Spec};

mod picture;

/// The options of `opennrt lower`: the parser and `--help` both read this table.
const LOWER: Spec = Spec {
    cmd: "lower",
    usage: "usage: opennrt lower --op <op> --ranks N [options]",
    opts: &[
        Opt::val("--op", "OP", args::OP_HELP),
        Opt::val(
            "--ranks",
            "N",
            "ranks in the replica group (global device ids 0..N)",
        ),
        Opt::val(
            "--count",
            "N",
            "elements (default 8; accepts 1<<20), per op:
             all_reduce, permute, permute_implicit, send_recv: in = out = N;
             permute_reduce_implicit: out = N, in = 2N ([src0 | src1], the second operand
             right after the first);
             all_gather: out = N x ranks (N is one rank's block);
             reduce_scatter: in = N x ranks, out = N;
             all_to_all: in = out = N x ranks;
             all_to_all_v: in = out = N x ranks, with the uneven send counts of the verify
             matrix (each at most N, packed receive windows);
             barrier: no data (N is ignored)",
        ),
        Opt::val(
            "--dtype",
            "T",
            "bf16 (default), fp16, fp32, fp8_e3, fp8_e4, fp8_e5, int8, ... (reductions need a
             CCE dtype)",
        ),
        Opt::val(
            "--redop",
            "R",
            "add (default), max, min (all_reduce, reduce_scatter, permute_reduce_implicit)",
        ),
        Opt::val(
            "--alg",
            "A",
            "force an algorithm: ring, kangaring, single_cycle_ring, mesh, hier, intra_rdh,
             inter_rdh (an algorithm that is illegal for the request is an error)",
        ),
        Opt::val(
            "--topology",
            "T",
            "a topology (see OPENNRT_TOPOLOGY), e.g. trn2.48xlarge, custom:2x16x8:lnc=2",
        ),
        Opt::val("--channels", "C", "ring channels per leg (default 2)"),
        Opt::val("--chunk", "E", "chunk elements (default: 2 MiB worth)"),
        Opt::val(
            "--pairs",
            "L",
            "explicit permute pairs, e.g. 0:1,1:0 (permute; default r -> r+1 mod N)",
        ),
        Opt::val(
            "--rank",
            "R",
            "show only rank R's program (default: all ranks)",
        ),
        Opt::switch("--in-place", "input and output are one tensor"),
        Opt::switch("--json", "print the program IR as JSON instead of text"),
        Opt::switch(
            "--quiet",
            "print only the summary (selection, verification, counts, timings)",
        ),
        Opt::val(
            "--svg",
            "FILE",
            "also draw the emitted program as SVG: ranks as rows, steps as columns, one arrow
             per cross-rank send (read back from the descriptors) labelled with its chunk and
             `+` when it reduces, a dot where a step waits on a semaphore",
        ),
        Opt::switch(
            "--bench",
            "also time the runtime's program cache (the one nrta_cc_prepare and NEFF loads go
             through) on this request: one cold prepare (a miss: lower, verify, emit) and the
             median of 1000 lookups of the same request (numbers for the docs; never asserted)",
        ),
    ],
    notes: "",
};

/// What `opennrt lower` was asked for besides the request.
struct Show {
    rank: Option<u32>,
    json: bool,
    quiet: bool,
    bench: bool,
    svg: Option<String>,
    /// The options that change the lowering, as the runtime takes them: lowering variables
    /// and a forced algorithm (`--bench` prepares through the runtime, which reads no options).
    runtime: RuntimeLowering,
}

/// `--topology`, `--channels`, `--chunk` and `--alg` in the runtime's terms.
#[derive(Default)]
struct RuntimeLowering {
    /// Lowering variables set over the environment's (`runtime::config::LOWERING_VARS`).
    vars: Vec<(&'static str, String)>,
    /// The forced algorithm (a NEFF's, or `--alg`).
    forced: Option<Algorithm>,
}

fn build(a: &[(&str, String)]) -> (CollectiveRequest, LowerConfig, Show) {
    let c = "lower";
    let mut op = None;
    let (mut ranks, mut count, mut dtype, mut redop) = (None, 8u64, Dtype::Bf16, ReduceOp::Add);
    let (mut alg, mut topo, mut channels, mut chunk, mut pairs) =
        (None, None, None, None, Vec::new());
    let mut show = Show {
        rank: None,
        json: false,
        quiet: false,
        bench: false,
        svg: None,
        runtime: RuntimeLowering::default(),
    };
    let mut in_place = false;
    for &(k, ref v) in a {
        match k {
            "--op" => op = Some(args::op(c, v)),
            "--ranks" => ranks = Some(args::num::<u32>(c, k, v)),
            "--count" => count = args::num(c, k, v),
            "--dtype" => dtype = args::dtype(c, v),
            "--redop" => redop = args::redop(c, v),
            "--alg" => {
                alg = Some(Algorithm::parse(v).unwrap_or_else(|| {
                    let names: Vec<_> = Algorithm::ALL.iter().map(|a| a.name()).collect();
                    fail(
                        c,
                        &format!("unknown --alg {v:?}; use one of {}", names.join(", ")),
                    )
                }))
            }
            "--topology" => topo = Some(v.clone()),
            "--channels" => channels = Some(args::num::<u8>(c, k, v)),
            "--chunk" => chunk = Some(args::num::<u64>(c, k, v)),
            "--pairs" => {
                for p in v.split(',').filter(|s| !s.is_empty()) {
                    let (s, t) = p
                        .split_once(':')
                        .unwrap_or_else(|| fail(c, &format!("--pairs entry {p:?} is not src:dst")));
                    pairs.push((args::num(c, "--pairs", s), args::num(c, "--pairs", t)));
                }
            }
            "--rank" => show.rank = Some(args::num::<u32>(c, k, v)),
            "--in-place" => in_place = true,
            "--json" => show.json = true,
            "--quiet" => show.quiet = true,
            "--bench" => show.bench = true,
            "--svg" => show.svg = Some(v.clone()),
            other => args::unhandled(c, other),
        }
    }
    let op = op.unwrap_or_else(|| fail(c, &format!("--op is required\n{}", LOWER.help())));
    let n = ranks.unwrap_or_else(|| fail(c, "--ranks is required"));
    if n == 0 {
        fail(c, "--ranks must be at least 1");
    }
    let reducing = matches!(
        op,
        CollectiveOp::AllReduce | CollectiveOp::ReduceScatter | CollectiveOp::PermuteReduceImplicit
    );
    let req = {
        let mut r = CollectiveRequest::new(
            op,
            dtype,
            reducing.then_some(redop),
            count,
            (0..n).collect(),
            0,
        );
        r.in_place = in_place;
        r.pairs = pairs;
        if op == CollectiveOp::AllToAllV {
            // The lowering needs the counts: use the verify matrix's packed layout.
            r.a2av = Some(
                cases::a2av_meta(n, count, cases::A2avRecv::Packed)
                    .unwrap_or_else(|e| fail(c, e.message())),
            );
        }
        r
    };
    let mut cfg = LowerConfig::from_lookup(opennrt::runtime::config::env_lookup, n)
        .unwrap_or_else(|e| fail(c, e.message()));
    let vars = &mut show.runtime.vars;
    if let Some(t) = topo {
        cfg.topology = Topology::parse(&t, n).unwrap_or_else(|e| fail(c, e.message()));
        vars.push((opennrt::lower::topology::TOPOLOGY_ENV, t));
    }
    if alg.is_some() {
        cfg.select.forced = alg;
        show.runtime.forced = alg;
    }
    if let Some(ch) = channels {
        cfg.channels = ch;
        vars.push(("OPENNRT_CC_CHANNELS", ch.to_string()));
    }
    if let Some(e) = chunk {
        // The runtime takes bytes; `bench_cache` checks the program came out the same.
        let bytes = e.saturating_mul(dtype.size_bytes().unwrap_or(1) as u64);
        vars.push(("NEURON_RT_CC_CHUNK_SIZE", bytes.to_string()));
    }
    if let Some(e) = chunk {
        cfg.chunk = ChunkSize::Elems(e);
    }
    (req, cfg, show)
}

fn print_tables(p: &Program, cfg: &LowerConfig, only: Option<u32>) -> Result<(), String> {
    let map = address_map(p, &cfg.topology).map_err(|e| e.to_string())?;
    let t = Instant::now();
    let e = emit(p, &map).map_err(|e| e.to_string())?;
    let t_emit = t.elapsed();
    let t = Instant::now();
    decode_back(&e, p, &map).map_err(|e| e.to_string())?;
    let t_check = t.elapsed();
    for er in &e.ranks {
        if only.is_some_and(|r| r != er.rank) {
            continue;
        }
        for img in &er.topsps {
            println!(
                "rank {} TOP_SP {}: {} M2S + {} S2M descriptors, {} slot bytes",
                er.rank,
                img.topsp,
                img.m2s.len(),
                img.s2m.len(),
                img.slot_spad.len()
            );
            for (i, slot) in img.ctrl_spad.chunks_exact(8).enumerate() {
                let word = u64::from_le_bytes(slot.try_into().expect("8-byte chunk"));
                if word == SPAD_SLOT_CONTINUE_MARK {
                    println!("  cc_op[{i}] continuation mark");
                    continue;
                }
                let s = SpadCtrlEntry::unpack(slot.try_into().expect("8-byte chunk"));
                if !s.cc_op {
                    continue;
                }
                println!(
                    "  cc_op[{i}] {:02x?} algo_type {} sub {} trigger_next {} reporter {} ring_wait {} ring_send {} safe_mode {} channel_list {:#010x} (mesh shift {} mask {:#06x})",
                    slot, s.algo_type, s.algo_sub_type, u8::from(s.trigger_next), u8::from(s.reporter),
                    u8::from(s.ring_wait_complete), u8::from(s.ring_send_complete), u8::from(s.safe_mode),
                    s.channel_list(), s.sema_shift_offset(), s.sema_mask()
                );
            }
        }
    }
    let (m2s, s2m): (usize, usize) = e
        .ranks
        .iter()
        .flat_map(|r| &r.topsps)
        .fold((0, 0), |(a, b), t| (a + t.m2s.len(), b + t.s2m.len()));
    println!(
        "emitted: {m2s} M2S + {s2m} S2M descriptors over {} ranks in {:.3} ms; decode-back ok in {:.3} ms",
        e.ranks.len(),
        t_emit.as_secs_f64() * 1e3,
        t_check.as_secs_f64() * 1e3
    );
    Ok(())
}

/// `opennrt lower`: exit 0 on success, 1 if lowering, verification or emission fails, 2 on bad
/// arguments.
pub fn lower_cmd(a: &[String]) -> i32 {
    if Spec::wants_help(a) {
        println!("{}", LOWER.help());
        return 0;
    }
    let (req, cfg, show) = build(&LOWER.parse(a));
    let (only, json, quiet, bench) = (show.rank, show.json, show.quiet, show.bench);
    let (svg, runtime) = (show.svg, show.runtime);
    let t = Instant::now();
    let p = match lower(&req, &cfg) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("opennrt lower: {e}");
            return 1;
        }
    };
    let t_cold = t.elapsed();
    if let Some(path) = &svg {
        if let Err(e) = draw_svg(&p, &cfg, path) {
            eprintln!("opennrt lower: --svg {path}: {e}");
            return 1;
        }
    }
    if json {
        println!("{}", p.to_json());
        return 0;
    }
    for line in &p.selection {
        println!("selection: {line}");
    }
    let t = Instant::now();
    match verify(&p) {
        Ok(r) => println!(
            "verified in {:.3} ms: {} steps, {} transfers, exact contributions on every rank, no deadlock, semaphores balanced (max value {})",
            t.elapsed().as_secs_f64() * 1e3,
            r.steps,
            r.transfers,
            r.max_sem_value
        ),
        Err(e) => {
            eprintln!("opennrt lower: verification failed: {e}");
            return 1;
        }
    }
    if !quiet {
        for rp in &p.ranks {
            if only.is_none_or(|r| r == rp.rank) {
                print!("{rp}");
            }
        }
    }
    if let Err(e) = print_tables(&p, &cfg, if quiet { Some(u32::MAX) } else { only }) {
        eprintln!("opennrt lower: emission failed: {e}");
        return 1;
    }
    println!(
        "lowered in {:.3} ms ({} steps over {} ranks)",
        t_cold.as_secs_f64() * 1e3,
        p.step_count(),
        p.ranks.len()
    );
    if bench {
        if let Err(e) = bench_cache(&req, &p, &runtime) {
            eprintln!("opennrt lower: --bench: {e}");
            return 1;
        }
    }
    0
}

/// `--svg`: emit the program and draw what the bytes say ([`picture`]).
fn draw_svg(p: &Program, cfg: &LowerConfig, path: &str) -> Result<(), String> {
    let map = address_map(p, &cfg.topology).map_err(|e| e.to_string())?;
    let e = emit(p, &map).map_err(|e| e.to_string())?;
    let pic = picture::read(&e, p, &map)?;
    let alg = p
        .ranks
        .first()
        .and_then(|r| r.entries.first())
        .map_or("-", |en| en.algorithm.name());
    let title = format!(
        "{} on {} ranks, {} x {}, {alg}: {} sends, {} semaphore waits (from the emitted descriptors)",
        p.request.op.name(),
        p.ranks.len(),
        p.request.count,
        p.request.dtype.short_name(),
        pic.arrows.len(),
        pic.waits.len()
    );
    picture::draw(&pic, &title, path)
}

/// `--bench`: time the runtime's program cache (`runtime::collective::prepare_in`, which every
/// `nrta_cc_prepare` and NEFF load goes through) on `req`, under the environment's lowering
/// variables with `rt` over them. The first prepare is a miss (lower, verify unless
/// `OPENNRT_CC_VERIFY=0`, emit); the 1000 after it are hits and must return that same prepared
/// collective. The cached program must equal `printed` (what this command lowered and showed),
/// or nothing is timed: a figure for some other program would mislead. Not timed: the one read
/// of the runtime's configuration that `prepare_with` adds around the lookup.
fn bench_cache(
    req: &CollectiveRequest,
    printed: &Program,
    rt: &RuntimeLowering,
) -> Result<(), String> {
    let config = opennrt::runtime::process::config().map_err(|e| e.to_string())?;
    let lowering = Arc::new(
        rt.vars
            .iter()
            .fold((*config.lowering).clone(), |l, (k, v)| l.with(k, v)),
    );
    let world = req.rank_n();
    let prepare = || {
        opennrt::runtime::collective::prepare_in(&config, lowering.clone(), req, world, rt.forced)
            .map_err(|e| e.to_string())
    };
    let t = Instant::now();
    let cold = prepare()?;
    let t_cold = t.elapsed();
    if cold.program != *printed {
        return Err(format!(
            "the runtime prepares a different program for these options than the one above \
             (it takes chunk sizes in bytes, NEURON_RT_CC_CHUNK_SIZE, rounded down to {} \
             elements); nothing timed",
            opennrt::lower::compose::CHUNK_ALIGN_ELEMS
        ));
    }
    let mut samples = Vec::with_capacity(1000);
    for _ in 0..1000 {
        let t = Instant::now();
        let hit = prepare()?;
        samples.push(t.elapsed().as_secs_f64() * 1e6);
        if !Arc::ptr_eq(&hit, &cold) {
            return Err("a lookup prepared the collective again instead of hitting".into());
        }
    }
    samples.sort_by(f64::total_cmp);
    println!(
        "bench: runtime program cache: cold prepare ({}emit) {:.3} ms; cached lookup median {:.2} us (p99 {:.2} us) over 1000 hits",
        if config.verify { "lower, verify, " } else { "lower, " },
        t_cold.as_secs_f64() * 1e3,
        samples[500],
        samples[990]
    );
    Ok(())
}

/// The options of `opennrt verify`.
const VERIFY: Spec = Spec {
    cmd: "verify",
    usage: "usage: opennrt verify [--quick]

Lower, verify, emit and decode back every case of the matrix (op x algorithm x ranks x count
x placement x topology); one line per case and a closing `N passed, N failed` line; exit 1 if
any case failed.",
    opts: &[Opt::switch(
        "--quick",
        "ranks 1..16 and counts up to 4099 only (the full matrix adds 32 and 64 ranks and
         1<<20 elements)",
    )],
    notes: "",
};

/// `opennrt verify`: lower, verify, emit and decode back every case of the matrix, on one thread
/// per core; one line per case, in the matrix's order, and a closing `N passed, N failed` line.
/// Exit 1 if any case failed.
///
/// The matrix is [`cases::matrix`] (shared with the device matrix, `tests/device_matrix.rs`):
/// op × algorithm × ranks × count × (in place or not, where it applies) × topology; all-to-all-v
/// also × receive layout ([`cases::A2avRecv`]) with the counts of [`cases::a2av_meta`]. Each
/// case is tried on the machines of [`cases::topologies`] so that every algorithm meets a
/// topology it is legal on. Forcing an algorithm that is illegal for a case is refused by the
/// selector with an error (that refusal is itself checked: it must name `OPENNRT_CC_ALGO`), and
/// the case is not counted.
pub fn verify_cmd(a: &[String]) -> i32 {
    if Spec::wants_help(a) {
        println!("{}", VERIFY.help());
        return 0;
    }
    let mut quick = false;
    for (k, _) in VERIFY.parse(a) {
        match k {
            "--quick" => quick = true,
            other => args::unhandled("verify", other),
        }
    }
    let ranks: &[u32] = if quick {
        &[1, 2, 3, 4, 5, 8, 16]
    } else {
        &[1, 2, 3, 4, 5, 8, 16, 32, 64]
    };
    let counts: &[u64] = if quick {
        &[0, 1, 7, 4099]
    } else {
        &[0, 1, 7, 4099, 1 << 20]
    };
    let (mut passed, mut failed, mut refused) = (0u32, 0u32, 0u32);
    let t_all = Instant::now();
    let matrix = cases::matrix(ranks, counts);
    let mut progress = Progress::new("verify", matrix.len() as u64);
    // The cases are independent (each lowers with its own config), so they run on one thread per
    // core, each taking the next case; the lines are printed in the matrix's order all the same.
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let next = AtomicUsize::new(0);
    let (tx, rx) = mpsc::channel::<(usize, Case)>();
    std::thread::scope(|s| {
        for _ in 0..workers {
            let (tx, next, matrix) = (tx.clone(), &next, &matrix);
            s.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(case) = matrix.get(i) else { break };
                if tx.send((i, run_case(case))).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        let mut done: BTreeMap<usize, Case> = BTreeMap::new();
        let mut printed = 0;
        for (i, result) in rx {
            done.insert(i, result);
            while let Some(result) = done.remove(&printed) {
                let name = matrix[printed].name(false);
                progress.update(printed as u64, &name);
                printed += 1;
                match result {
                    Case::Pass(ms) => {
                        passed += 1;
                        println!("ok   {name} ({ms:.1} ms)");
                    }
                    Case::Illegal => refused += 1,
                    Case::Fail(why) => {
                        failed += 1;
                        println!("FAIL {name}: {why}");
                    }
                }
            }
        }
    });
    progress.finish();
    println!(
        "({refused} forced combinations were refused by the selector as illegal for their request or topology; {:.1} s in all)",
        t_all.elapsed().as_secs_f64()
    );
    println!("{passed} passed, {failed} failed");
    i32::from(failed > 0)
}

enum Case {
    Pass(f64),
    Illegal,
    Fail(String),
}

fn run_case(case: &cases::Case) -> Case {
    let t = Instant::now();
    let (_, cfg, p) = match case.lower() {
        Ok(Lowered::Program(b)) => *b,
        // Selection refuses algorithms that are illegal for the request or topology
        // (docs/contract/lowering.md §3.2); the matrix only counts the legal ones.
        Ok(Lowered::Illegal(_)) => return Case::Illegal,
        Err(e) => return Case::Fail(e.to_string()),
    };
    if let Err(e) = verify(&p) {
        return Case::Fail(format!("verification: {e}"));
    }
    let emitted = address_map(&p, &cfg.topology)
        .and_then(|m| emit(&p, &m).and_then(|e| decode_back(&e, &p, &m)));
    if let Err(e) = emitted {
        return Case::Fail(format!("emission: {e}"));
    }
    Case::Pass(t.elapsed().as_secs_f64() * 1e3)
}

//! The command line, as the vendor's users type it (flags and positional operation word as in
//! the Neuron SDK's nccom-test guide), plus OpenNRT's `--threads`.
//!
//! Grammar: short flags take their value as the next word (`-r 2`); long flags take the next
//! word or `=value` (`--nworkers=2`), and `_` and `-` are the same in long names
//! (`--warmup_iters` = `--warmup-iters`). The operation word may stand anywhere. `-c/--check`
//! takes an optional `random|all_ones`; `-t/--stats` takes one or more of `avg p25 p50 p90 p99`.
//!
//! Several hosts: `-s/--hosts h1 h2 …` (the words up to the next flag or the operation; a
//! word may also hold `h1,h2`) or `--hosts-file FILE` (one host a line, `#` comments, Open
//! MPI's `host slots=N` form accepted), with `-N/--nnodes` (default: the number of hosts) and
//! `--mpi-log-dir DIR`; [`crate::mpi`] runs them through `mpirun`. `-r` stays the total, so
//! `-r` / `-N` ranks go on each host and must be whole.
//!
//! Options OpenNRT cannot honour are refused (exit status 2) with the reason:
//! `-S/--slurm-mode`, `--streams-json`, `--shared-output-buff`, `--coalesced-cc-size-ratio`,
//! `--data-parallel-dimension`. `--variable-size-op-metadata` (alias `--alltoallv-metadata`)
//! names the table of `alltoallv`/`allgv` ([`crate::metadata`]). `--unique-buff` is accepted and changes nothing: each NEFF holds one
//! collective per size, whose buffers are its own already; `--non-interactive` turns the progress
//! line off (src/progress.rs). The seed defaults to 0.

use std::path::PathBuf;

use opennrt::isa::enums::Dtype;

use crate::check::Mode;
use crate::dtypes;
use crate::ops::Op;
use crate::stats::Stat;
use crate::sweep::{self, Step};
use crate::units::parse_bytes;

/// The usage text of `-h/--help`.
pub const USAGE: &str = "usage: nccom-test -r N <operation> [options]

operation (anywhere on the line): all_reduce|allr, all_gather|allg, all_gatherv|allgv,
  reduce_scatter|redsct, sendrecv, alltoall, alltoallv, permute

  -r, --nworkers N            total ranks (required)
  -N, --nnodes N              hosts (default 1, or the number of hosts given); -r / -N
                              ranks run on each host
  -s, --hosts H1 H2 ...       run the ranks on these hosts through Open MPI's mpirun, rank g
                              on host g / (r/N) (the first host holds rank 0 and the root)
  --hosts-file F              the hosts, one a line (# comments; \"host slots=N\" accepted)
  --mpi-log-dir D             mpirun --output-filename D/size_<B>: each rank's output in
                              files, per size
  -b, --minbytes S            smallest size (default 32M); sizes take b, kb, mb, gb
  -e, --maxbytes S            largest size (default 32M)
  -i, --stepbytes S           add S between sizes (default (max-min)/10)
  -f, --stepfactor F          multiply by F between sizes (wins over -i)
  -n, --iters N               timed operations per size (default 20)
  -w, --warmup_iters N        warm-up operations per size (default 5)
  -I, --neff_iters I          put the -n + -w operations in one NEFF per size and run it
                              I times timed (default 1 when only -W is given)
  -W, --neff_warmup_iters W   ... after W untimed runs (default 0 when only -I is given)
  -d, --datatype T            uint8 (default), int8, fp8, uint16, int16, fp16, bf16, uint32,
                              int32, fp32 (also fp8e3, fp8e5)
  -c, --check [random|all_ones]  check every rank's result against a CPU golden result
  --seed N                    seed of the --check data (default 0)
  --custom-replica-groups F   {\"replica_groups\": [[[0,1,..],[..]]]}
  --custom-src-target-pairs F {\"src_target_pairs\": [[[0,1],[1,0],..]]} (permute)
  --variable-size-op-metadata F  (alias --alltoallv-metadata) alltoallv, allgv: {\"metadata\": [{\"send_counts\": [..],
                              \"send_displs\": [..], \"recv_counts\": [..], \"recv_displs\": [..]}]}
                              in elements, one entry or one per rank (default: equal blocks)
  -t, --stats avg p25 p50 p90 p99   time columns (default avg)
  --show-algorithm            add the algorithm column (mesh, rdh, kangaring, ring, hier)
  --show-input-output-size    add total_input_size(B) and total_output_size(B)
  --report-to-json-file F     write the results as JSON
  --plot F                    OpenNRT: write busbw against size as an SVG chart
  --non-interactive           no progress line on stderr (drawn only on a terminal anyway)
  --debug                     keep the NEFFs and logs, print the worker command lines
  --threads                   OpenNRT: run every rank as a thread of one process instead of
                              one process per rank
  --unique-buff               accepted: each size's NEFF has buffers of its own already
  -h, --help                  this text

Several hosts (--hosts, --hosts-file): mpirun (Debian/Ubuntu: apt install openmpi-bin) starts
one process per rank; the nccom-test binary must be at the same path on every host, and the
NEFFs go to $TMPDIR (else /tmp), which must be one directory shared by every host (NFS) as it
is for the vendor's tool. NEURON_RT_ROOT_COMM_ID, if set, overrides <first host>:<port>;
OMPI_MCA_plm_rsh_agent picks mpirun's ssh; OPENNRT_MPIRUN_ARGS adds words to mpirun's line.

Refused with the reason (exit 2): -S/--slurm-mode, --streams-json, --shared-output-buff,
--coalesced-cc-size-ratio, --data-parallel-dimension";

/// Everything a run needs from the command line.
#[derive(Debug, Clone, PartialEq)]
pub struct Opts {
    /// The operation.
    pub op: Op,
    /// Total ranks.
    pub ranks: u32,
    /// Smallest size.
    pub minbytes: u64,
    /// Largest size.
    pub maxbytes: u64,
    /// Step between sizes.
    pub step: Step,
    /// Timed operations per size.
    pub iters: u32,
    /// Warm-up operations per size.
    pub warmup: u32,
    /// `-I`: timed executions of the one NEFF of `-n` + `-w` operations (with `-I` or `-W`;
    /// 1 when only `-W` is given).
    pub neff_iters: Option<u32>,
    /// `-W`: untimed executions of that NEFF first (0 when only `-I` is given).
    pub neff_warmup: Option<u32>,
    /// Element type.
    pub dtype: Dtype,
    /// `-d` was not given: `dtype` is the default (uint8), which messages about it say.
    pub dtype_default: bool,
    /// `--check` and its data.
    pub check: Option<Mode>,
    /// Seed of the check data.
    pub seed: u64,
    /// Time columns, in the order given.
    pub stats: Vec<Stat>,
    /// Add the algorithm column.
    pub show_algorithm: bool,
    /// Add the input and output size columns.
    pub show_io_size: bool,
    /// Keep temporary files, say more.
    pub debug: bool,
    /// `--non-interactive`: no progress line, even on a terminal.
    pub non_interactive: bool,
    /// The JSON report's path.
    pub report: Option<PathBuf>,
    /// `--custom-replica-groups`.
    pub replica_groups: Option<PathBuf>,
    /// `--custom-src-target-pairs`.
    pub pairs: Option<PathBuf>,
    /// `--variable-size-op-metadata`.
    pub metadata: Option<PathBuf>,
    /// One process with a thread per rank.
    pub threads: bool,
    /// `-N/--nnodes`: hosts (1 without `--hosts`).
    pub nnodes: u32,
    /// `-s/--hosts` or `--hosts-file`: the hosts, in rank order (empty: every rank here, no
    /// mpirun).
    pub hosts: Vec<String>,
    /// `--mpi-log-dir`.
    pub mpi_log_dir: Option<PathBuf>,
}

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Parsed {
    /// `-h/--help`.
    Help,
    /// A benchmark run.
    Run(Box<Opts>),
}

impl Opts {
    /// The element type as messages name it: `uint8 (the default -d/--datatype)` when `-d` was
    /// not given, so a refusal of the default says where the type came from.
    pub fn dtype_words(&self) -> String {
        let n = dtypes::name(self.dtype);
        if self.dtype_default {
            format!("{n} (the default -d/--datatype)")
        } else {
            n.to_string()
        }
    }
}

/// Why `-S/--slurm-mode` is refused.
const NO_SLURM: &str = "OpenNRT's nccom-test starts the ranks of other hosts through Open MPI's \
                        mpirun only; under Slurm give the allocation's nodes as the hosts: \
                        --hosts $(scontrol show hostnames)";

/// One host word's check: a name or an IPv4 address, without mpirun's `:slots`.
fn host_word(h: &str, from: &str) -> Result<String, String> {
    if h.contains(':') {
        return Err(format!(
            "{from}: host {h:?}: give host names or IPv4 addresses without \":slots\" (ranks per \
             host are -r / -N; an IPv6 address cannot stand in mpirun's -H list, use its name)"
        ));
    }
    Ok(h.to_string())
}

/// The hosts of a hosts file's text (`what` names the file in messages): one host a line,
/// `#` to the end of a line is a comment, blank lines are skipped, and after the host Open
/// MPI's `slots=N` (also `max_slots=N`) may stand. Each host with its `slots`, if given.
pub fn hosts_file_text(text: &str, what: &str) -> Result<Vec<(String, Option<u32>)>, String> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("");
        let mut words = line.split_whitespace();
        let Some(host) = words.next() else { continue };
        let at = format!("{what} line {}", n + 1);
        let host = host_word(host, &at)?;
        let mut slots = None;
        for w in words {
            let (k, v) = w.split_once('=').unwrap_or((w, ""));
            match k {
                "slots" | "max_slots" | "max-slots" => {
                    let v: u32 = v
                        .parse()
                        .map_err(|_| format!("{at}: {w:?}: {k} takes a whole number (slots=N)"))?;
                    if k == "slots" {
                        slots = Some(v);
                    }
                }
                _ => {
                    return Err(format!(
                        "{at}: {w:?} after the host: only Open MPI's slots=N is understood"
                    ))
                }
            }
        }
        out.push((host, slots));
    }
    if out.is_empty() {
        return Err(format!("{what} names no host"));
    }
    Ok(out)
}

/// The canonical long name of a flag word (short flags map to their long name), `None` for a
/// word that is no flag.
fn long_name(w: &str) -> Option<String> {
    if let Some(l) = w.strip_prefix("--") {
        // `_` is `-` in the name only: an inline value (`--hosts-file=/a_b`) stays as typed.
        return Some(match l.split_once('=') {
            Some((n, v)) => format!("{}={v}", n.replace('_', "-")),
            None => l.replace('_', "-"),
        });
    }
    let s = w.strip_prefix('-')?;
    let long = match s {
        "r" => "nworkers",
        "N" => "nnodes",
        "b" => "minbytes",
        "e" => "maxbytes",
        "i" => "stepbytes",
        "f" => "stepfactor",
        "n" => "iters",
        "w" => "warmup-iters",
        "I" => "neff-iters",
        "W" => "neff-warmup-iters",
        "d" => "datatype",
        "c" => "check",
        "t" => "stats",
        "s" => "hosts",
        "S" => "slurm-mode",
        "h" => "help",
        other => return Some(format!("-{other}")),
    };
    Some(long.to_string())
}

/// A number flag's value.
fn number<T: std::str::FromStr>(flag: &str, v: &str) -> Result<T, String> {
    v.trim()
        .parse()
        .map_err(|_| format!("{flag} {v:?} is not a valid number"))
}

/// Parse the command line (without the program name). `Err` is the message of a bad or
/// refused command line (exit status 2).
pub fn parse(args: &[String]) -> Result<Parsed, String> {
    let mut op = None;
    let mut ranks = None;
    let (mut min, mut max) = (32u64 << 20, 32u64 << 20);
    let (mut stepbytes, mut factor) = (None, None);
    let (mut iters, mut warmup) = (20u32, 5u32);
    let (mut neff_iters, mut neff_warmup) = (None, None);
    let (mut dtype, mut dtype_default) = (Dtype::Uint8, true);
    let (mut check, mut seed) = (None, 0u64);
    let mut stats = Vec::new();
    let (mut show_algorithm, mut show_io_size, mut debug, mut threads) =
        (false, false, false, false);
    let mut non_interactive = false;
    let (mut report, mut replica_groups, mut pairs, mut metadata) = (None, None, None, None);
    let (mut nnodes, mut hosts, mut hosts_file, mut mpi_log_dir) =
        (None::<u32>, Vec::new(), None::<PathBuf>, None);
    let mut hosts_flag = None::<String>;
    let mut i = 0;
    while i < args.len() {
        let word = &args[i];
        i += 1;
        let Some(raw) = long_name(word) else {
            match Op::from_nccom_word(word) {
                Some(o) if op.is_none() => op = Some(o),
                Some(_) => return Err(format!("a second operation {word:?}: give one")),
                None => {
                    return Err(format!(
                        "unexpected argument {word:?} (not an operation or a flag)\n{USAGE}"
                    ))
                }
            }
            continue;
        };
        let (name, inline) = match raw.split_once('=') {
            Some((n, v)) => (n.to_string(), Some(v.to_string())),
            None => (raw, None),
        };
        let flag = word.split('=').next().unwrap_or(word).to_string();
        // The value of a flag that takes one.
        let value = |i: &mut usize| -> Result<String, String> {
            if let Some(v) = &inline {
                return Ok(v.clone());
            }
            let v = args
                .get(*i)
                .ok_or_else(|| format!("{flag} needs a value"))?;
            *i += 1;
            Ok(v.clone())
        };
        match name.as_str() {
            "help" => return Ok(Parsed::Help),
            "nworkers" => ranks = Some(number::<u32>(&flag, &value(&mut i)?)?),
            "nnodes" => {
                let n: u32 = number(&flag, &value(&mut i)?)?;
                if n == 0 {
                    return Err(format!("{flag} must be at least 1"));
                }
                nnodes = Some(n);
            }
            "minbytes" => min = parse_bytes(&value(&mut i)?).map_err(|e| format!("{flag}: {e}"))?,
            "maxbytes" => max = parse_bytes(&value(&mut i)?).map_err(|e| format!("{flag}: {e}"))?,
            "stepbytes" => {
                stepbytes = Some(parse_bytes(&value(&mut i)?).map_err(|e| format!("{flag}: {e}"))?)
            }
            "stepfactor" => factor = Some(number::<u64>(&flag, &value(&mut i)?)?),
            "iters" => iters = number(&flag, &value(&mut i)?)?,
            "warmup-iters" => warmup = number(&flag, &value(&mut i)?)?,
            "neff-iters" => neff_iters = Some(number(&flag, &value(&mut i)?)?),
            "neff-warmup-iters" => neff_warmup = Some(number(&flag, &value(&mut i)?)?),
            "datatype" => {
                let v = value(&mut i)?;
                dtype = Dtype::from_nccom_name(&v).ok_or_else(|| {
                    let words = dtypes::words();
                    format!("unknown {flag} {v:?}; use one of {}", words.join(", "))
                })?;
                dtype_default = false;
            }
            "check" => {
                let m = match &inline {
                    Some(v) => Some(v.clone()),
                    None => args
                        .get(i)
                        .filter(|v| Mode::parse(v).is_some())
                        .inspect(|_| i += 1)
                        .cloned(),
                };
                check = Some(match m {
                    None => Mode::Random,
                    Some(v) => Mode::parse(&v).ok_or_else(|| {
                        format!("unknown {flag} mode {v:?}; use random or all_ones")
                    })?,
                });
            }
            "seed" => seed = number(&flag, &value(&mut i)?)?,
            "stats" => {
                let mut got = Vec::new();
                if let Some(v) = &inline {
                    got.push(v.clone());
                }
                while let Some(v) = args.get(i).filter(|v| Stat::parse(v).is_some()) {
                    got.push(v.clone());
                    i += 1;
                }
                if got.is_empty() {
                    return Err(format!("{flag} needs one or more of avg p25 p50 p90 p99"));
                }
                for g in got {
                    let s = Stat::parse(&g).ok_or_else(|| {
                        format!("unknown {flag} {g:?}; use avg, p25, p50, p90 or p99")
                    })?;
                    if !stats.contains(&s) {
                        stats.push(s);
                    }
                }
            }
            "show-algorithm" => show_algorithm = true,
            "show-input-output-size" => show_io_size = true,
            "debug" => debug = true,
            "non-interactive" => non_interactive = true,
            "unique-buff" => {}
            "threads" => threads = true,
            "report-to-json-file" => report = Some(PathBuf::from(value(&mut i)?)),
            "custom-replica-groups" => replica_groups = Some(PathBuf::from(value(&mut i)?)),
            "custom-src-target-pairs" => pairs = Some(PathBuf::from(value(&mut i)?)),
            "hosts" => {
                let mut got = Vec::new();
                if let Some(v) = &inline {
                    got.push(v.clone());
                }
                while let Some(v) = args
                    .get(i)
                    .filter(|v| !v.starts_with('-') && Op::from_nccom_word(v).is_none())
                {
                    got.push(v.clone());
                    i += 1;
                }
                for w in &got {
                    for h in w.split(',').filter(|h| !h.is_empty()) {
                        hosts.push(host_word(h, &flag)?);
                    }
                }
                if hosts.is_empty() {
                    return Err(format!("{flag} needs one or more hosts"));
                }
                hosts_flag = Some(flag.clone());
            }
            "hosts-file" => hosts_file = Some(PathBuf::from(value(&mut i)?)),
            "mpi-log-dir" => mpi_log_dir = Some(PathBuf::from(value(&mut i)?)),
            "slurm-mode" => return Err(format!("{flag} is not supported: {NO_SLURM}")),
            "streams-json" => {
                return Err(format!(
                    "{flag} is not supported: OpenNRT's nccom-test runs one stream (one \
                     operation, one table) per invocation; run it once per stream"
                ))
            }
            "shared-output-buff" | "coalesced-cc-size-ratio" | "data-parallel-dimension" => {
                return Err(format!(
                    "{flag} is not supported by OpenNRT's nccom-test: its NEFFs hold one \
                     collective with its own input and output per size"
                ))
            }
            "variable-size-op-metadata" | "alltoallv-metadata" => {
                metadata = Some(PathBuf::from(value(&mut i)?))
            }
            _ => return Err(format!("unknown option {flag}\n{USAGE}")),
        }
    }
    let op = op.ok_or_else(|| format!("no operation given\n{USAGE}"))?;
    let ranks = ranks.ok_or_else(|| format!("-r/--nworkers is required\n{USAGE}"))?;
    if metadata.is_some() && !matches!(op, Op::AllToAllV | Op::AllGatherV) {
        return Err(format!(
            "--variable-size-op-metadata applies to alltoallv and all_gatherv, not {}",
            op.nccom_name()
        ));
    }
    if ranks == 0 {
        return Err("-r/--nworkers must be at least 1".into());
    }
    if iters == 0 {
        return Err("-n/--iters must be at least 1: every size needs a timed operation".into());
    }
    if neff_iters == Some(0) {
        return Err(
            "-I/--neff_iters must be at least 1: every size needs a timed execution".into(),
        );
    }
    let step = match (factor, stepbytes) {
        (Some(f), _) => Step::Factor(f),
        (None, Some(b)) => Step::Bytes(b),
        (None, None) => sweep::default_step(min, max),
    };
    sweep::sizes(min, max, step)?;
    if stats.is_empty() {
        stats.push(Stat::Avg);
    }
    let mut slots = Vec::new();
    if let Some(f) = &hosts_file {
        if let Some(h) = &hosts_flag {
            return Err(format!(
                "{h} and --hosts-file both name the hosts: give one"
            ));
        }
        let what = format!("--hosts-file {}", f.display());
        let text = std::fs::read_to_string(f).map_err(|e| format!("{what}: {e}"))?;
        for (h, s) in hosts_file_text(&text, &what)? {
            hosts.push(h);
            slots.push(s);
        }
    }
    let nnodes = match (nnodes, hosts.len()) {
        (n, 0) => {
            let n = n.unwrap_or(1);
            if n > 1 {
                return Err(format!(
                    "-N/--nnodes {n} needs the hosts to run on: --hosts h1 h2 ... or \
                     --hosts-file FILE"
                ));
            }
            n
        }
        (None, h) => h as u32,
        (Some(n), h) if n as usize == h => n,
        (Some(n), h) => {
            return Err(format!(
                "-N/--nnodes {n} but {h} host(s) given: give one host per node"
            ))
        }
    };
    if let Some(d) = hosts
        .iter()
        .enumerate()
        .find(|(k, h)| hosts[..*k].contains(h))
    {
        return Err(format!(
            "host {} is given twice: give each host once (each runs -r / -N ranks)",
            d.1
        ));
    }
    if ranks % nnodes != 0 {
        return Err(format!(
            "-r/--nworkers {ranks} does not divide over -N/--nnodes {nnodes} hosts: every host \
             runs -r / -N ranks, which must be a whole number"
        ));
    }
    let per_node = ranks / nnodes;
    for (h, s) in hosts.iter().zip(&slots) {
        if let Some(s) = s.filter(|&s| s < per_node) {
            return Err(format!(
                "--hosts-file: host {h} has slots={s}, but -r {ranks} over -N {nnodes} puts \
                 {per_node} ranks on every host"
            ));
        }
    }
    if !hosts.is_empty() && threads {
        return Err(
            "--threads runs every rank in one process on this host; it does not combine with \
             --hosts or --hosts-file"
                .into(),
        );
    }
    if mpi_log_dir.is_some() && hosts.is_empty() {
        return Err(
            "--mpi-log-dir applies to runs through mpirun: give --hosts or --hosts-file".into(),
        );
    }
    Ok(Parsed::Run(Box::new(Opts {
        op,
        ranks,
        minbytes: min,
        maxbytes: max,
        step,
        iters,
        warmup,
        neff_iters,
        neff_warmup,
        dtype,
        dtype_default,
        check,
        seed,
        stats,
        show_algorithm,
        show_io_size,
        debug,
        non_interactive,
        report,
        replica_groups,
        pairs,
        metadata,
        threads,
        nnodes,
        hosts,
        mpi_log_dir,
    })))
}

#[cfg(test)]
mod tests;

use super::*;

fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

fn opts(s: &str) -> Opts {
    match parse(&words(s)) {
        Ok(Parsed::Run(o)) => *o,
        other => panic!("{s}: {other:?}"),
    }
}

fn refused(s: &str) -> String {
    match parse(&words(s)) {
        Err(e) => e,
        other => panic!("{s}: {other:?}"),
    }
}

/// The vendor's defaults: 32M, 20 timed and 5 warm-up operations, uint8, avg.
#[test]
fn defaults_are_the_vendors() {
    let o = opts("-r 2 allr");
    assert_eq!(o.op, Op::AllReduce);
    assert_eq!(o.ranks, 2);
    assert_eq!((o.minbytes, o.maxbytes), (32 << 20, 32 << 20));
    assert_eq!((o.iters, o.warmup), (20, 5));
    assert_eq!(o.dtype, Dtype::Uint8);
    assert_eq!(o.stats, vec![Stat::Avg]);
    assert_eq!((o.check, o.seed, o.threads), (None, 0, false));
}

/// The operation may stand anywhere; long flags take `=value` and `_` or `-`.
#[test]
fn the_vendors_spellings_parse() {
    let o = opts("allg -r 8 -b 1kb -e 512KB -f 8 -d fp32 -n 1000 --warmup_iters=2");
    assert_eq!(o.op, Op::AllGather);
    assert_eq!((o.minbytes, o.maxbytes), (1024, 512 << 10));
    assert_eq!(o.step, Step::Factor(8));
    assert_eq!((o.iters, o.warmup, o.dtype), (1000, 2, Dtype::Fp32));
    let o = opts("--nworkers 4 --minbytes=4 --maxbytes 64 --stepbytes 20 redsct --datatype bf16");
    assert_eq!(o.step, Step::Bytes(20));
    assert_eq!(
        (o.ranks, o.dtype, o.op),
        (4, Dtype::Bf16, Op::ReduceScatter)
    );
    let o = opts("-r 2 -b 0 -e 100 permute");
    assert_eq!(o.step, Step::Bytes(10));
    let o = opts("-r 2 -b 0 -e 100 -i 5 -f 2 -b 1 sendrecv");
    assert_eq!(o.step, Step::Factor(2));
}

/// `-c` takes an optional mode; `-t` takes several statistics and stops at the next word.
#[test]
fn optional_and_multi_values() {
    assert_eq!(opts("-r 2 allr -c").check, Some(Mode::Random));
    assert_eq!(opts("-r 2 -c allr").check, Some(Mode::Random));
    assert_eq!(opts("-r 2 -c all_ones allr").check, Some(Mode::AllOnes));
    assert_eq!(opts("-r 2 --check=random allr").check, Some(Mode::Random));
    let o = opts("-r 2 -t avg p25 p50 p90 p99 allr --seed 9");
    assert_eq!(o.stats.len(), 5);
    assert_eq!(o.seed, 9);
    assert_eq!(
        opts("--stats p99 avg p99 -r 2 alltoall").stats,
        vec![Stat::P(99), Stat::Avg]
    );
    let o = opts(
        "-r 2 allr --show-algorithm --show-input-output-size --debug --threads \
                  --non-interactive --unique-buff --report-to-json-file /tmp/r.json",
    );
    assert!(o.show_algorithm && o.show_io_size && o.debug && o.threads);
    assert_eq!(o.report, Some(PathBuf::from("/tmp/r.json")));
    let o = opts("-r 2 -I 10 -W 2 allr");
    assert_eq!((o.neff_iters, o.neff_warmup), (Some(10), Some(2)));
    assert_eq!(parse(&words("-h")), Ok(Parsed::Help));
    assert_eq!(parse(&words("-r 2 allr --help")), Ok(Parsed::Help));
}

/// The variable-size ops parse, with their metadata file under both names; the file is for
/// them only.
#[test]
fn variable_size_ops_parse() {
    // Checks the message a user reads, on purpose.
    assert_eq!(opts("-r 2 alltoallv").op, Op::AllToAllV);
    assert_eq!(opts("-r 2 allgv").op, Op::AllGatherV);
    let o = opts("-r 2 alltoallv --variable-size-op-metadata m.json");
    assert_eq!(o.metadata, Some(PathBuf::from("m.json")));
    let o = opts("allgv -r 2 --alltoallv-metadata=n.json");
    assert_eq!(o.metadata, Some(PathBuf::from("n.json")));
    assert!(refused("-r 2 allr --variable-size-op-metadata m.json")
        .contains("applies to alltoallv and all_gatherv, not all_reduce"));
}

#[test]
fn bad_command_lines_say_why() {
    // Checks the message a user reads, on purpose.
    assert!(refused("allr").contains("-r/--nworkers is required"));
    assert!(refused("-r 2").contains("no operation"));
    assert!(refused("-r 2 allr allg").contains("second operation"));
    assert!(refused("-r 2 allr -d float").contains("unknown -d"));
    assert!(refused("-r 2 allr -b 2x").contains("-b"));
    assert!(refused("-r x allr").contains("not a valid number"));
    assert!(refused("-r 2 allr -c zeros").contains("unexpected argument"));
    assert!(refused("-r 2 allr -t").contains("needs one or more"));
    assert!(refused("-r 2 allr --frobnicate").contains("unknown option --frobnicate"));
    assert!(refused("-r 2 allr -b 64 -e 32").contains("larger"));
    assert!(refused("-r 2 allr -I 0").contains("-I/--neff_iters"));
    assert_eq!(opts("-n 15 -w 5 -I 10 -r 2 allr").neff_iters, Some(10));
    assert!(refused("-r 0 allr").contains("at least 1"));
    assert!(refused("-r 2 allr -n 0").contains("timed operation"));
    assert!(refused("-r 2 allr -n").contains("needs a value"));
}

/// Options OpenNRT cannot honour are refused with the reason.
#[test]
fn unsupported_options_are_refused() {
    // Checks the message a user reads, on purpose.
    for (line, why) in [
        ("-r 2 allr -S", "scontrol show hostnames"),
        ("-r 2 allr --slurm-mode", "through Open MPI's mpirun only"),
        ("-r 2 allr --streams-json f", "one stream"),
        ("-r 2 allr --shared-output-buff", "not supported"),
        ("-r 2 allr --coalesced-cc-size-ratio 1,2,1", "not supported"),
    ] {
        assert!(refused(line).contains(why), "{line}: {}", refused(line));
    }
    assert_eq!(opts("-r 2 allr -N 1").ranks, 2);
}

/// `-s/--hosts` takes the words up to the next flag or the operation (commas split a word
/// too); `-N` defaults to the number of hosts and must match it when given.
#[test]
fn hosts_parse_as_a_list() {
    // Checks the message a user reads, on purpose.
    let o = opts("-r 4 -N 2 --hosts 10.0.0.1 10.0.0.2 allr -d fp32");
    assert_eq!(o.hosts, vec!["10.0.0.1", "10.0.0.2"]);
    assert_eq!((o.nnodes, o.ranks, o.dtype), (2, 4, Dtype::Fp32));
    let o = opts("-r 4 -s a,b allg");
    assert_eq!(
        (o.hosts.clone(), o.nnodes, o.op),
        (vec!["a".into(), "b".into()], 2, Op::AllGather)
    );
    let o = opts("allr -r 2 --hosts=a b --mpi-log-dir /tmp/logs");
    assert_eq!(o.hosts, vec!["a", "b"]);
    assert_eq!(o.mpi_log_dir, Some(PathBuf::from("/tmp/logs")));
    let o = opts("-r 2 --hosts n1 allr");
    assert_eq!((o.nnodes, o.hosts.len()), (1, 1));
    let o = opts("-r 2 allr");
    assert_eq!(
        (o.nnodes, o.hosts.is_empty(), o.mpi_log_dir),
        (1, true, None)
    );
    // `_` reads as `-` in a flag's name, never in its inline value.
    let o = opts("-r 2 allr --report_to_json_file=/tmp/a_b.json");
    assert_eq!(o.report, Some(PathBuf::from("/tmp/a_b.json")));
    assert!(refused("-r 2 --hosts allr").contains("needs one or more hosts"));
    assert!(refused("-r 2 -N 3 --hosts a b allr").contains("-N/--nnodes 3 but 2 host(s)"));
    assert!(refused("-r 2 -N 2 allr").contains("needs the hosts to run on"));
    assert!(refused("-r 2 -N 0 allr").contains("at least 1"));
    assert!(refused("-r 2 --hosts a a allr").contains("given twice"));
    assert!(refused("-r 2 --hosts a:2 b allr").contains("without \":slots\""));
    assert!(refused("-r 2 --hosts a b --threads allr").contains("--threads"));
    assert!(refused("-r 2 --mpi-log-dir d allr").contains("give --hosts or --hosts-file"));
}

/// `-r` is the total: it must divide over the hosts.
#[test]
fn ranks_must_divide_over_the_nodes() {
    // Checks the message a user reads, on purpose.
    for line in [
        "-r 3 -N 2 --hosts a b allr",
        "-r 1 --hosts a b allr",
        "-r 5 --hosts a b c allr",
    ] {
        let e = refused(line);
        assert!(
            e.contains("does not divide over -N/--nnodes"),
            "{line}: {e}"
        );
    }
    assert_eq!(opts("-r 6 --hosts a b c allr").ranks / 3, 2);
}

/// A hosts file: one host a line, `#` comments, blank lines, Open MPI's `slots=N`.
#[test]
fn hosts_files_parse() {
    // Checks the message a user reads, on purpose.
    let t = "# the cluster\nnode1 slots=2\n\n  node2   # the second\nnode3 max_slots=4 slots=8\n";
    let h = hosts_file_text(t, "f").unwrap();
    assert_eq!(
        h,
        vec![
            ("node1".into(), Some(2)),
            ("node2".into(), None),
            ("node3".into(), Some(8))
        ]
    );
    assert!(hosts_file_text("# nothing\n\n", "f")
        .unwrap_err()
        .contains("f names no host"));
    let e = hosts_file_text("a\nb cpus=2\n", "f").unwrap_err();
    assert!(e.contains("f line 2") && e.contains("slots=N"), "{e}");
    assert!(hosts_file_text("a slots=x\n", "f")
        .unwrap_err()
        .contains("whole number"));
    assert!(hosts_file_text("a:4\n", "f")
        .unwrap_err()
        .contains("f line 1"));

    let dir = std::env::temp_dir().join(format!("nccom_test_hosts_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("hosts");
    std::fs::write(&f, "h1 slots=2\nh2 slots=2 # two each\n").unwrap();
    let fs = f.display().to_string();
    let o = opts(&format!("-r 4 allr --hosts-file {fs}"));
    assert_eq!(
        (o.hosts.clone(), o.nnodes),
        (vec!["h1".into(), "h2".into()], 2)
    );
    assert_eq!(opts(&format!("-N 2 -r 2 allr --hosts-file={fs}")).nnodes, 2);
    let e = refused(&format!("-r 6 allr --hosts-file {fs}"));
    assert!(
        e.contains("slots=2") && e.contains("3 ranks on every host"),
        "{e}"
    );
    assert!(refused(&format!("-r 4 allr --hosts-file {fs} --hosts a b")).contains("give one"));
    assert!(refused(&format!("-r 4 allr --hosts-file {fs} -N 3")).contains("2 host(s) given"));
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(
        refused("-r 2 allr --hosts-file /nonexistent/h").contains("--hosts-file /nonexistent/h")
    );
}

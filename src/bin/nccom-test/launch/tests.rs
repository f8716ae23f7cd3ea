use super::*;

fn template() -> Job {
    Job {
        neff: "/nonexistent.neff".into(),
        op: "all_reduce".into(),
        dtype: "fp32".into(),
        world: 3,
        count: 4,
        in_bytes: 16,
        out_bytes: 16,
        warmup: 0,
        iters: 1,
        ops_per_exec: 1,
        samples_per_exec: 1,
        check: None,
        seed: 0,
        ranks: vec![],
        threads: false,
        groups: vec![vec![0, 1, 2]],
        pairs: vec![],
        wait_stdin: false,
        dump_dir: None,
        table: None,
    }
}

fn plan(exe: &str, threads: bool) -> Plan {
    Plan {
        exe: exe.into(),
        threads,
        world: 3,
        deadline: Duration::from_secs(30),
        debug: false,
        mpi: None,
    }
}

/// One job per rank (rank 0's waits for stdin), or one job with every rank in threads mode.
#[test]
fn jobs_split_the_world() {
    let j = jobs(&template(), &plan("x", false));
    assert_eq!(j.len(), 3);
    assert_eq!(j[2].ranks, vec![2]);
    assert!(j[0].wait_stdin && !j[1].wait_stdin && !j[0].threads);
    let j = jobs(&template(), &plan("x", true));
    assert_eq!(j.len(), 1);
    assert_eq!(j[0].ranks, vec![0, 1, 2]);
    assert!(j[0].threads && !j[0].wait_stdin);
}

/// The environment is set on the child's command only: cores, root, timeout.
#[test]
fn commands_carry_the_workers_environment() {
    let p = plan("/bin/true", false);
    let j = &jobs(&template(), &p)[1];
    let cmd = command(
        &p,
        j,
        Some("127.0.0.1:5000"),
        Some(Path::new("/x/libncfw.so")),
    );
    let envs: Vec<(String, Option<String>)> = cmd
        .get_envs()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.map(|v| v.to_string_lossy().into_owned()),
            )
        })
        .collect();
    let get = |k: &str| envs.iter().find(|e| e.0 == k).and_then(|e| e.1.clone());
    assert_eq!(get("NEURON_RT_VISIBLE_CORES").as_deref(), Some("1"));
    assert_eq!(
        get("NEURON_RT_ROOT_COMM_ID").as_deref(),
        Some("127.0.0.1:5000")
    );
    assert_eq!(get("OPENNRT_NCFW_PATH").as_deref(), Some("/x/libncfw.so"));
    let args: Vec<_> = cmd.get_args().collect();
    assert_eq!(args[0], "__worker");
    let p = plan("/bin/true", true);
    let cmd = command(&p, &jobs(&template(), &p)[0], None, None);
    let cores = cmd
        .get_envs()
        .find(|(k, _)| *k == "NEURON_RT_VISIBLE_CORES")
        .and_then(|(_, v)| v.map(|v| v.to_string_lossy().into_owned()));
    assert_eq!(cores.as_deref(), Some("0-2"));
    assert!(cmd
        .get_envs()
        .any(|(k, v)| k == "NEURON_RT_ROOT_COMM_ID" && v.is_none()));
}

/// Workers that fail, or cannot start, are reported; the log file is made for their stderr.
#[test]
fn failed_workers_are_reported() {
    let log = std::env::temp_dir().join(format!("nccom_test_launch_{}.log", std::process::id()));
    let o = run(&template(), &plan("/bin/false", false), &log);
    assert_eq!(o.failures.len(), 3, "{:?}", o.failures);
    assert!(o.failures[0].contains("exited with status 1"));
    assert!(o.lines.is_empty());
    assert!(log.is_file());
    let o = run(&template(), &plan("/nonexistent/nccom", true), &log);
    assert!(o.failures[0].contains("cannot start"), "{:?}", o.failures);
    std::fs::remove_file(&log).unwrap();
}

use super::*;

fn job(world: u32) -> Job {
    Job {
        neff: "/shared/nccom_test_1/size_64.neff".into(),
        op: "all_reduce".into(),
        dtype: "fp32".into(),
        world,
        count: 16,
        in_bytes: 64,
        out_bytes: 64,
        warmup: 0,
        iters: 1,
        ops_per_exec: 1,
        samples_per_exec: 1,
        check: Some("random".into()),
        seed: 0,
        ranks: vec![],
        threads: false,
        groups: vec![(0..world).collect()],
        pairs: vec![],
        wait_stdin: false,
        dump_dir: None,
        table: None,
    }
}

fn mpi(hosts: &[&str], per_node: u32) -> Mpi {
    Mpi {
        mpirun: "/usr/bin/mpirun".into(),
        hosts: hosts.iter().map(|h| h.to_string()).collect(),
        per_node,
        log_dir: None,
        extra: vec![],
        root: None,
        as_root: false,
        env: vec![],
    }
}

fn args(c: &Command) -> Vec<String> {
    c.get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

/// mpirun gets every host with its slots, the rank count, slot mapping, no binding, the log
/// directory, the extra words and then the wrapper with the hand-off file.
#[test]
fn the_mpirun_line() {
    let mut m = mpi(&["10.0.0.1", "10.0.0.2"], 2);
    assert_eq!(m.host_list(), "10.0.0.1:2,10.0.0.2:2");
    let c = m.command(
        Path::new("/opt/nccom-test"),
        Path::new("/shared/h.json"),
        4,
        None,
    );
    assert_eq!(
        args(&c).join(" "),
        "-np 4 -H 10.0.0.1:2,10.0.0.2:2 --map-by slot --bind-to none /opt/nccom-test \
         __mpi_worker /shared/h.json"
    );
    m.as_root = true;
    m.extra = vec!["--mca".into(), "btl".into(), "self".into()];
    let a = args(&m.command(
        Path::new("/x"),
        Path::new("/h"),
        4,
        Some(Path::new("/logs/size_64")),
    ));
    assert_eq!(a[0], "--allow-run-as-root");
    let at = a.iter().position(|w| w == "--output-filename").unwrap();
    assert_eq!(a[at + 1], "/logs/size_64");
    assert_eq!(&a[at + 2..at + 5], ["--mca", "btl", "self"]);
    assert_eq!(&a[a.len() - 3..], ["/x", MPI_WORKER_ARG, "/h"]);
}

/// The root is the first host at the size's port unless the environment named one; rank g
/// lives on host g / (ranks per host).
#[test]
fn root_and_hosts_of_ranks() {
    let mut m = mpi(&["a", "b", "c"], 2);
    assert_eq!(m.root_id(4000), "a:4000");
    assert_eq!(
        (0..6).map(|g| m.host_of(g)).collect::<Vec<_>>(),
        ["a", "a", "b", "b", "c", "c"]
    );
    m.root = Some("10.1.1.1:5000".into());
    assert_eq!(m.root_id(4000), "10.1.1.1:5000");
}

/// Rank g owns core g mod (ranks per host) with global id g; rank 0 of a job of several holds
/// the root. A mapping other than by slot, or another world size, is refused.
#[test]
fn each_process_picks_its_job() {
    // Checks the message a user reads, on purpose.
    let h = Handoff {
        job: job(4),
        per_node: 2,
        root: Some("a:1".into()),
        env: vec![],
        answers: "/shared/a".into(),
    };
    let (j, core) = rank_job(&h, 3, Some(1), Some(4)).unwrap();
    assert_eq!(
        (j.ranks.clone(), core, j.wait_stdin, j.threads),
        (vec![3], 1, false, false)
    );
    assert_eq!(j.neff, h.job.neff);
    let (j, core) = rank_job(&h, 0, None, None).unwrap();
    assert_eq!((j.ranks, core, j.wait_stdin), (vec![0], 0, true));
    let (j, core) = rank_job(&h, 2, Some(0), None).unwrap();
    assert_eq!((j.ranks, core), (vec![2], 0));
    assert!(rank_job(&h, 2, Some(2), None)
        .unwrap_err()
        .contains("did not map by slot"));
    assert!(rank_job(&h, 1, None, Some(3))
        .unwrap_err()
        .contains("started 3 processes"));
    assert!(rank_job(&h, 4, None, None)
        .unwrap_err()
        .contains("not in a job"));
    let one = Handoff {
        job: job(1),
        per_node: 1,
        ..h.clone()
    };
    assert!(!rank_job(&one, 0, Some(0), Some(1)).unwrap().0.wait_stdin);
    // The hand-off survives its file.
    let text = serde_json::to_string(&h).unwrap();
    assert_eq!(serde_json::from_str::<Handoff>(&text).unwrap(), h);
}

/// Only the variables OpenNRT and libfabric read travel, never the per-rank ones.
#[test]
fn forwarded_variables() {
    let env = forwarded_env(|k| match k {
        "NEURON_RT_EXEC_TIMEOUT" => Some("30".into()),
        "NEURON_RT_VISIBLE_CORES" | "NEURON_RT_ROOT_COMM_ID" => Some("0".into()),
        "FI_PROVIDER" => Some("tcp".into()),
        "HOME" => Some("/root".into()),
        _ => None,
    });
    assert_eq!(
        env,
        vec![
            ("NEURON_RT_EXEC_TIMEOUT".to_string(), "30".to_string()),
            ("FI_PROVIDER".to_string(), "tcp".to_string())
        ]
    );
}

/// mpirun is looked up on PATH: the first executable file wins.
#[test]
fn mpirun_is_found_on_path() {
    assert_eq!(
        find_program("sh", Some("/nonexistent::/bin")),
        Some("/bin/sh".into())
    );
    assert_eq!(find_program("sh", Some("/nonexistent")), None);
    assert_eq!(find_program("sh", None), None);
}

/// The closed lines release the root once every other rank closed, or at once on a failure;
/// other lines go to the log. Exit words follow the workers' statuses.
#[test]
fn closed_lines_and_statuses() {
    let c: Closed = serde_json::from_str(r#"{"closed":2,"status":3}"#).unwrap();
    assert_eq!(
        c,
        Closed {
            closed: 2,
            status: 3
        }
    );
    assert!(serde_json::from_str::<Closed>(r#"{"rank":0,"wrong":0}"#).is_err());
    assert!(status_words(3).contains("status 3: a runtime error"));
    assert!(status_words(128 + 9).contains("signal"));
    // Through a real pipe: `cat` stands in for mpirun; its stdin closes when ranks 1 and 2
    // have closed, so it ends and the reader returns.
    let mut cat = Command::new("cat")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = cat.stdin.take().unwrap();
    let stdout = cat.stdout.take().unwrap();
    writeln!(
        stdin,
        "{{\"closed\":1,\"status\":0}}\nstray words\n{{\"closed\":2,\"status\":0}}"
    )
    .unwrap();
    let dup = stdin;
    let got = read_mpirun(stdout, Some(dup), 3, None);
    assert_eq!(got.len(), 2);
    assert!(cat.wait().unwrap().success());
}

use super::*;

#[derive(Debug, serde::Deserialize, PartialEq)]
struct Answer {
    rank: u32,
}

fn watch(deadline_ms: u64, grace_ms: u64, hold_root: bool) -> Watch {
    Watch {
        deadline: Duration::from_millis(deadline_ms),
        grace: Duration::from_millis(grace_ms),
        hold_root,
    }
}

fn sh(name: &str, script: &str) -> Worker {
    let mut command = Command::new("/bin/sh");
    command.args(["-c", script]);
    Worker {
        name: name.into(),
        command,
        strays: Strays::Stderr,
    }
}

fn env_of(cmd: &Command, key: &str) -> Option<Option<String>> {
    cmd.get_envs()
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v.map(|v| v.to_string_lossy().into_owned()))
}

#[test]
fn core_ranges_are_spelled_as_the_runtime_reads_them() {
    assert_eq!(core_range(0, 4), "0-3");
    assert_eq!(core_range(4, 4), "4-7");
    assert_eq!(core_range(5, 1), "5");
    assert_eq!(core_range(0, 0), "0");
}

/// The launcher environment is set on the child's command only; a job of one process never
/// inherits a root id.
#[test]
fn rank_env_is_set_on_the_command() {
    let mut cmd = Command::new("/bin/true");
    set_rank_env(
        &mut cmd,
        "1",
        Some("127.0.0.1:5000"),
        Some(Path::new("/x/libncfw.so")),
    );
    assert_eq!(
        env_of(&cmd, "NEURON_RT_VISIBLE_CORES"),
        Some(Some("1".into()))
    );
    assert_eq!(
        env_of(&cmd, "NEURON_RT_ROOT_COMM_ID"),
        Some(Some("127.0.0.1:5000".into()))
    );
    assert_eq!(
        env_of(&cmd, "OPENNRT_NCFW_PATH"),
        Some(Some("/x/libncfw.so".into()))
    );
    if env_lookup("NEURON_RT_EXEC_TIMEOUT").is_none() {
        assert_eq!(
            env_of(&cmd, "NEURON_RT_EXEC_TIMEOUT"),
            Some(Some(EXEC_TIMEOUT_S.into()))
        );
    }
    let mut cmd = Command::new("/bin/true");
    set_rank_env(&mut cmd, "0-2", None, None);
    assert_eq!(env_of(&cmd, "NEURON_RT_ROOT_COMM_ID"), Some(None));
    assert_eq!(env_of(&cmd, "OPENNRT_NCFW_PATH"), None);
    assert!(root_comm_id().unwrap().starts_with("127.0.0.1:"));
}

/// Answer lines are collected in worker order; the other lines go to the log.
#[test]
fn answers_are_collected_and_strays_logged() {
    let log = std::env::temp_dir().join(format!("opennrt_launch_{}.log", std::process::id()));
    let mut w = sh(
        "w1",
        r#"echo '{"rank": 1}'; echo not an answer; echo '{"rank": 2}'"#,
    );
    w.strays = Strays::Log(File::create(&log).unwrap());
    let o: Outcome<Answer> = run(
        vec![sh("w0", r#"echo '{"rank": 0}'"#), w],
        &watch(30_000, 30_000, false),
    );
    assert!(o.failures.is_empty(), "{:?}", o.failures);
    assert_eq!(
        o.lines,
        [Answer { rank: 0 }, Answer { rank: 1 }, Answer { rank: 2 }]
    );
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "not an answer\n");
    std::fs::remove_file(&log).unwrap();
}

/// The root's stdin closes once every other worker has exited, and not before: `cat` ends at
/// end-of-file, after the other worker's file exists.
#[test]
fn the_root_outlives_the_others() {
    let mark = std::env::temp_dir().join(format!("opennrt_launch_{}.mark", std::process::id()));
    let _ = std::fs::remove_file(&mark);
    let root = sh(
        "root",
        &format!("cat; test -f {} && echo '{{\"rank\": 0}}'", mark.display()),
    );
    let other = sh("other", &format!("sleep 0.2; touch {}", mark.display()));
    let o: Outcome<Answer> = run(vec![root, other], &watch(30_000, 30_000, true));
    assert!(o.failures.is_empty(), "{:?}", o.failures);
    assert_eq!(o.lines, [Answer { rank: 0 }]);
    std::fs::remove_file(&mark).unwrap();
}

/// Failed and unstartable workers are reported by name; the rest are killed after the grace
/// or the deadline, and say which.
#[test]
fn failures_are_reported_and_stragglers_killed() {
    let o: Outcome<Answer> = run(
        vec![sh("w0", "exit 1"), sh("w1", "exit 3")],
        &watch(30_000, 30_000, false),
    );
    // Failures are listed in the order the exits are seen, which the two workers race for.
    let mut failures = o.failures.clone();
    failures.sort();
    assert_eq!(failures.len(), 2, "{:?}", o.failures);
    assert_eq!(failures[0], "w0 exited with status 1: wrong elements");
    assert!(failures[1].starts_with("w1 exited with status 3"));

    let mut missing = sh("w1", "");
    missing.command = Command::new("/nonexistent/opennrt-worker");
    let o: Outcome<Answer> = run(
        vec![sh("w0", "exec sleep 30"), missing, sh("w2", "true")],
        &watch(30_000, 100, true),
    );
    assert!(
        o.failures[0].starts_with("cannot start w1: "),
        "{:?}",
        o.failures
    );
    assert!(
        o.failures[1].starts_with("w0 was killed ")
            && o.failures[1].ends_with("after another worker failed"),
        "{:?}",
        o.failures
    );
    assert_eq!(o.failures.len(), 2, "w2 is never started: {:?}", o.failures);

    let o: Outcome<Answer> = run(vec![sh("w0", "exec sleep 30")], &watch(100, 30_000, false));
    assert_eq!(
        o.failures,
        ["w0 was killed after the deadline (0 s)"],
        "{:?}",
        o.failures
    );
}

//! Parsing of every variable: defaults, accepted forms, and the error naming the variable.

#[test]
fn resident_budget_default_suffixes_and_errors() {
    use super::resident_budget;
    let g = 1u64 << 30;
    assert_eq!(resident_budget(None, 24 * g).unwrap(), 6 * g);
    assert_eq!(
        resident_budget(None, 4 * g).unwrap(),
        2 * g,
        "at least 2 GiB"
    );
    assert_eq!(resident_budget(None, 0).unwrap(), 2 * g);
    assert_eq!(resident_budget(Some("0".into()), 24 * g).unwrap(), 0);
    assert_eq!(
        resident_budget(Some(" 512M ".into()), 0).unwrap(),
        512 << 20
    );
    assert_eq!(resident_budget(Some("3g".into()), 0).unwrap(), 3 * g);
    assert_eq!(resident_budget(Some("4096".into()), 0).unwrap(), 4096);
    for bad in ["", "G", "-1", "1.5G", "1T", "99999999999999999999G"] {
        let e = resident_budget(Some(bad.into()), 0).unwrap_err();
        assert_eq!(e.fields().field.as_deref(), Some("OPENNRT_RESIDENT_BUDGET"));
        assert_eq!(e.fields().actual.as_deref(), Some(bad));
    }
}

#[test]
fn exec_timeout_default_zero_and_errors() {
    use std::time::Duration;
    let t = |v: Option<&str>| {
        super::exec_timeout(&|k: &str| {
            (k == "NEURON_RT_EXEC_TIMEOUT")
                .then(|| v.map(String::from))
                .flatten()
        })
    };
    // Default 30 s: docs/contract/abi.md environment table.
    assert_eq!(t(None).unwrap(), Some(Duration::from_secs(30)));
    assert_eq!(t(Some("5")).unwrap(), Some(Duration::from_secs(5)));
    assert_eq!(t(Some("0")).unwrap(), None);
    let e = t(Some("soon")).unwrap_err();
    assert_eq!(e.fields().field.as_deref(), Some("NEURON_RT_EXEC_TIMEOUT"));
    assert_eq!(e.fields().actual.as_deref(), Some("soon"));
}

use super::*;
use std::collections::HashMap;

fn cfg(vars: &[(&str, &str)]) -> Result<Config> {
    let m: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Config::from_lookup(|k| m.get(k).cloned())
}

#[test]
fn defaults_to_trn1_32xlarge() {
    let c = cfg(&[]).unwrap();
    assert_eq!(c.instance.name, "trn1.32xlarge");
    assert_eq!(
        (c.total_cores(), c.visible_cores, c.first_core),
        (32, 32, 0)
    );
}

#[test]
fn trn2_lnc_changes_logical_counts() {
    let c = cfg(&[("OPENNRT_INSTANCE_TYPE", "trn2.48xlarge")]).unwrap();
    assert_eq!((c.lnc, c.total_cores()), (2, 64));
    let c = cfg(&[
        ("OPENNRT_INSTANCE_TYPE", "trn2.48xlarge"),
        ("NEURON_LOGICAL_NC_CONFIG", "1"),
    ])
    .unwrap();
    assert_eq!(c.total_cores(), 128);
    // v2 silicon forces LNC 1.
    let c = cfg(&[("NEURON_LOGICAL_NC_CONFIG", "2")]).unwrap();
    assert_eq!(c.lnc, 1);
}

#[test]
fn visible_cores_rules() {
    let c = cfg(&[("NEURON_RT_VISIBLE_CORES", "4-7")]).unwrap();
    assert_eq!((c.first_core, c.visible_cores), (4, 4));
    let c = cfg(&[("NEURON_RT_VISIBLE_CORES", "3,2,2")]).unwrap();
    assert_eq!((c.first_core, c.visible_cores), (2, 2));
    for bad in ["0,2", "40", "x", "3-1", ""] {
        let e = cfg(&[("NEURON_RT_VISIBLE_CORES", bad)]);
        if bad.is_empty() {
            assert!(e.is_ok(), "empty is unset");
            continue;
        }
        let e = e.unwrap_err();
        assert_eq!(e.fields().field.as_deref(), Some("NEURON_RT_VISIBLE_CORES"));
        assert_eq!(e.fields().actual.as_deref(), Some(bad));
    }
    // VISIBLE_CORES wins over NUM_CORES.
    let c = cfg(&[
        ("NEURON_RT_VISIBLE_CORES", "1"),
        ("NEURON_RT_NUM_CORES", "8"),
    ])
    .unwrap();
    assert_eq!(c.visible_cores, 1);
    let c = cfg(&[("NEURON_RT_NUM_CORES", "0")]).unwrap();
    assert_eq!(c.visible_cores, 32);
    let c = cfg(&[("NEURON_RT_NUM_CORES", "3")]).unwrap();
    assert_eq!(c.visible_cores, 3);
}

#[test]
fn unknown_instance_is_a_clear_error() {
    // Checks the message a user reads, on purpose.
    let e = cfg(&[("OPENNRT_INSTANCE_TYPE", "p5.48xlarge")]).unwrap_err();
    assert_eq!(e.fields().field.as_deref(), Some("OPENNRT_INSTANCE_TYPE"));
    assert_eq!(e.fields().actual.as_deref(), Some("p5.48xlarge"));
    // The message lists what is known, for the person reading the log.
    assert!(e.message().contains("trn1.32xlarge"), "{e}");
}

/// Every variable with a value that does not parse fails, naming the variable.
#[test]
fn every_bad_value_is_an_error_naming_its_variable() {
    // Checks the message a user reads, on purpose.
    for (var, bad) in [
        ("NEURON_RT_LOG_LEVEL", "LOUD"),
        ("NEURON_RT_EXEC_TIMEOUT", "soon"),
        ("NEURON_RT_XU_COMPUTE_MAX_QUEUED_REQUESTS", "0"),
        ("NEURON_RT_NUM_CORES", "lots"),
        ("NEURON_LOGICAL_NC_CONFIG", "4"),
        ("OPENNRT_RESIDENT_BUDGET", "1T"),
        ("OPENNRT_BOOTSTRAP_TIMEOUT", "1.5"),
        ("OPENNRT_NET_PEER_TIMEOUT", "0"),
        ("OPENNRT_NET_PEER_TIMEOUT", "soon"),
        ("OPENNRT_WAIT_SPIN_US", "1.5"),
        ("OPENNRT_WAIT_YIELD_US", "-3"),
        ("CCOM_SOCKET_IFNAME", "^"),
        ("NCCL_SOCKET_IFNAME", ","),
        ("OPENNRT_SHARED_DEVICE", "true"),
        ("OPENNRT_TEST_KILL_IN_RUN", "-1"),
        ("OPENNRT_CC_VERIFY", "yes"),
        ("NEURON_RT_VALIDATE_HASH", "on"),
        ("OPENNRT_FLIGHT_RECORDER_ENTRIES", "many"),
        ("OPENNRT_FLIGHT_RECORDER_ENTRIES", "-1"),
        ("OPENNRT_FLIGHT_RECORDER_ENTRIES", "2000000"),
        ("OPENNRT_CC_ALGO", "bogus"),
        ("OPENNRT_CC_ALGOS", "ring,bogus"),
        ("OPENNRT_CC_RDH", "2"),
        ("OPENNRT_CC_MESH", "on"),
        ("OPENNRT_CC_CHANNELS", "0"),
        ("NEURON_RT_CC_CHUNK_SIZE", "big"),
        ("OPENNRT_TOPOLOGY", "torus"),
        ("OPENNRT_DEVICE_THREADS", "0"),
        ("OPENNRT_DEVICE_THREADS", "many"),
        ("OPENNRT_DEVICE_POOL_MB", "-1"),
        ("NEURON_RT_ASYNC_SENDRECV_EXPERIMENTAL_ENABLED", "yes"),
        ("NEURON_RT_ASYNC_SENDRECV_BOOTSTRAP_PORT", "0"),
        ("NEURON_RT_ASYNC_SENDRECV_BOOTSTRAP_PORT", "70000"),
        ("OPENNRT_SENDRECV_CONNECT_TIMEOUT", "0"),
        ("OPENNRT_SENDRECV_CHUNK", "100"),
        ("OPENNRT_SENDRECV_CHUNK", "2G"),
    ] {
        let e = cfg(&[(var, bad)]).expect_err(var);
        assert_eq!(e.status_name(), "NRT_INVALID", "{var}={bad}: {e}");
        assert_eq!(e.fields().field.as_deref(), Some(var), "{var}={bad}: {e:?}");
        assert_eq!(
            e.fields().actual.as_deref(),
            Some(bad),
            "{var}={bad}: {e:?}"
        );
        assert!(
            e.message().starts_with(&format!("{var}=")),
            "the log line names it: {e}"
        );
    }
}

/// The job secret's bad value (too short) is refused like the others, naming the variable,
/// but neither its message nor its fields carry the value: the log must not leak a secret.
#[test]
fn a_short_job_secret_is_an_error_that_hides_it() {
    let e = cfg(&[("OPENNRT_JOB_SECRET", "hunter2")]).expect_err("short secret");
    assert_eq!(e.status_name(), "NRT_INVALID", "{e}");
    assert_eq!(e.fields().field.as_deref(), Some("OPENNRT_JOB_SECRET"));
    assert!(e.message().starts_with("OPENNRT_JOB_SECRET="), "{e}");
    assert!(
        !format!("{e:?}").contains("hunter2"),
        "the secret leaks: {e:?}"
    );
    let ok = cfg(&[("OPENNRT_JOB_SECRET", "0123456789abcdef")]).unwrap();
    let secret = ok.job_secret.clone().expect("a 16-byte secret is taken");
    assert_eq!(secret.bytes(), b"0123456789abcdef");
    assert!(
        !format!("{ok:?}").contains("0123456789abcdef"),
        "Debug leaks the secret"
    );
    assert_eq!(cfg(&[]).unwrap().job_secret, None);
}

/// Unset and empty are the same, for every variable of the table.
#[test]
fn an_empty_value_is_unset() {
    let empty: Vec<(&str, &str)> = VARIABLES.iter().map(|v| (v.name, "")).collect();
    assert_eq!(cfg(&empty).unwrap(), cfg(&[]).unwrap());
}

#[test]
fn knobs_parse_into_their_fields() {
    let c = cfg(&[
        ("NEURON_RT_LOG_LEVEL", "warn"),
        ("OPENNRT_NCFW_PATH", "/opt/x/libncfw.so"),
        ("OPENNRT_BOOTSTRAP_TIMEOUT", "7"),
        ("OPENNRT_NET_PEER_TIMEOUT", "9"),
        ("OPENNRT_WAIT_SPIN_US", "5"),
        ("OPENNRT_WAIT_YIELD_US", "0"),
        ("CCOM_SOCKET_IFNAME", "=eth0"),
        ("NCCL_SOCKET_IFNAME", "ib"),
        ("OPENNRT_VERSION_OVERRIDE", "0.0.1"),
        ("OPENNRT_CC_VERIFY", "0"),
        ("NEURON_RT_VALIDATE_HASH", "1"),
        ("OPENNRT_DEVICE_THREADS", "3"),
        ("OPENNRT_DEVICE_POOL_MB", "2"),
        ("OPENNRT_HANG_DUMP", "/tmp/d"),
        ("OPENNRT_CC_ALGO", "ring"),
        ("OPENNRT_TEST_KILL_IN_RUN", "5"),
        ("NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS", "4"),
        ("NEURON_RT_ASYNC_SENDRECV_EXPERIMENTAL_ENABLED", "1"),
        ("NEURON_RT_ASYNC_SENDRECV_BOOTSTRAP_PORT", "45678"),
        ("OPENNRT_SENDRECV_CONNECT_TIMEOUT", "4"),
        ("OPENNRT_SENDRECV_CHUNK", "64K"),
    ])
    .unwrap();
    assert_eq!(
        c.sendrecv,
        crate::runtime::config::SendRecvConfig {
            enabled: true,
            port: Some(45678),
            connect_timeout: std::time::Duration::from_secs(4),
            chunk: 64 << 10,
        }
    );
    assert_eq!(c.log_level, crate::runtime::log::Level::Warning);
    assert_eq!(c.ncfw_path, "/opt/x/libncfw.so");
    assert_eq!(c.bootstrap_timeout, std::time::Duration::from_secs(7));
    assert_eq!(c.net_peer_timeout, std::time::Duration::from_secs(9));
    assert_eq!(
        c.waits,
        crate::runtime::multi_process::segment::Waits {
            spin: std::time::Duration::from_micros(5),
            yield_until: std::time::Duration::ZERO,
        }
    );
    let (var, f) = c.socket_ifname.clone().unwrap();
    assert_eq!(var, "CCOM_SOCKET_IFNAME", "the vendor's own name wins");
    assert!(f.allows("eth0") && !f.allows("eth1"));
    assert_eq!(c.version, "0.0.1");
    assert!(!c.verify);
    assert!(c.validate_hash);
    assert_eq!(c.device.threads, Some(3));
    assert_eq!(c.device.pool_cap, Some(2 << 20));
    assert_eq!(
        c.device.hang_dump_dir.as_deref(),
        Some(std::path::Path::new("/tmp/d"))
    );
    assert_eq!(c.lowering.get("OPENNRT_CC_ALGO").as_deref(), Some("ring"));
    assert_eq!(c.kill_in_run, Some(5));
    assert_eq!(c.ignored_async_inflight.as_deref(), Some("4"));
    let d = cfg(&[]).unwrap();
    assert_eq!(
        d.waits,
        crate::runtime::multi_process::segment::Waits::default()
    );
    assert_eq!(d.ncfw_path, DEFAULT_NCFW);
    assert_eq!(d.version, env!("CARGO_PKG_VERSION"));
    assert!(!d.validate_hash);
    assert!(d.verify && d.device == crate::device::settings::DeviceSettings::default());
    assert_eq!(d.compute_queue_limit, 8);
}

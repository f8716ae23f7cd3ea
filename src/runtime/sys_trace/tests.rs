//! The recorder alone: capture settings, pairing, limits, consumption, JSON. Other tests of
//! the crate may run work while a capture here is active, so these tests use cores no test
//! allocates (from 900 up) and fetch those cores only, and hold [`serial`] for the global
//! capture.

use super::*;
use crate::error::Error;

/// The capture is process-wide and `nrt_close` resets it: these tests run serialised with
/// every test that drives the state machine (the ABI's tests hold the same lock).
fn serial() -> parking_lot::MutexGuard<'static, ()> {
    crate::runtime::state::tests::SERIAL.lock()
}

fn ok() -> Result<()> {
    Ok(())
}

#[test]
fn nothing_is_recorded_without_a_capture() {
    let _g = serial();
    reset();
    let mut called = false;
    assert!(begin(NC_EXEC, 900, || {
        called = true;
        "m".into()
    })
    .is_none());
    assert!(!called, "the name is not built when nothing records");
    assert!(take(Some(900), 0).is_empty());
}

#[test]
fn a_run_is_a_start_and_a_stop_with_one_tracking_id_and_increasing_times() {
    let _g = serial();
    start(Capture::default());
    for i in 0..3 {
        record(NC_EXEC, 901, || format!("model{i}"), ok).unwrap();
    }
    let r: Result<()> = record(
        CC_EXEC,
        901,
        || "all_reduce".into(),
        || Err(Error::invalid("bad")),
    );
    assert!(r.is_err());
    stop();
    let ev = take(Some(901), 0);
    assert_eq!(ev.len(), 8);
    for pair in ev.chunks(2) {
        let (s, e) = (&pair[0], &pair[1]);
        assert_eq!((s.phase, e.phase), (Phase::Start, Phase::Stop));
        assert_eq!(s.tracking_id, e.tracking_id);
        assert_eq!(s.event_type, e.event_type);
        assert!(s.timestamp_ns <= e.timestamp_ns);
        assert_eq!(s.data.nc_timestamp_ns, s.timestamp_ns);
        assert_eq!(s.data.status, None);
    }
    assert!(ev
        .windows(2)
        .all(|w| w[0].timestamp_ns <= w[1].timestamp_ns));
    let ids: std::collections::BTreeSet<u64> = ev.iter().map(|e| e.tracking_id).collect();
    assert_eq!(ids.len(), 4);
    assert_eq!(ev[1].data.status, Some("NRT_SUCCESS"));
    assert_eq!(ev[6].event_type, CC_EXEC);
    assert_eq!(ev[7].data.status, Some("NRT_INVALID"));
    assert_eq!(ev[2].data.name, "model1");
    assert!(take(Some(901), 0).is_empty(), "a fetch consumes");
}

#[test]
fn disabled_cores_and_types_are_left_out() {
    let _g = serial();
    let mut c = Capture::default();
    c.cores.insert(903, false);
    c.cores.insert(902, true);
    c.event_types.insert(TENSOR_OP.into(), false);
    c.event_types.insert("no_such_type".into(), true);
    assert_eq!(c.enabled_types(), vec![NC_EXEC, CC_EXEC]);
    start(c);
    assert!(begin(NC_EXEC, 903, String::new).is_none());
    assert!(begin(TENSOR_OP, 902, String::new).is_none());
    record(NC_EXEC, 904, String::new, ok).unwrap(); // not named: captured
    record(CC_EXEC, 902, String::new, ok).unwrap();
    stop();
    assert_eq!(take(Some(903), 0).len(), 0);
    assert_eq!(take(Some(904), 0).len(), 2);
    let e = take(Some(902), 0);
    assert_eq!(e.len(), 2);
    assert!(e.iter().all(|e| e.event_type == CC_EXEC));
}

#[test]
fn each_core_keeps_its_newest_events_up_to_the_limit() {
    let _g = serial();
    start(Capture {
        max_events_per_nc: 4,
        ..Capture::default()
    });
    for i in 0..5 {
        record(NC_EXEC, 905, || i.to_string(), ok).unwrap();
    }
    record(NC_EXEC, 906, String::new, ok).unwrap();
    stop();
    let e = take(Some(905), 0);
    let names: Vec<&str> = e.iter().map(|e| e.data.name.as_str()).collect();
    assert_eq!(names, ["3", "3", "4", "4"], "the oldest dropped");
    assert_eq!(take(Some(906), 0).len(), 2, "the limit is per core");
}

#[test]
fn a_fetch_takes_at_most_its_limit_per_core_oldest_first() {
    let _g = serial();
    start(Capture::default());
    for i in 0..3 {
        record(NC_EXEC, 907, || i.to_string(), ok).unwrap();
    }
    let first = take(Some(907), 3);
    assert_eq!(first.len(), 3);
    assert_eq!(first[0].data.name, "0");
    assert_eq!(first[2].data.name, "1");
    let rest = take(Some(907), 0);
    assert_eq!(rest.len(), 3);
    assert_eq!(rest[2].data.name, "2");
    stop();
}

#[test]
fn a_run_in_flight_at_stop_records_its_stop_but_not_across_a_restart() {
    let _g = serial();
    start(Capture::default());
    let s = begin(NC_EXEC, 908, || "a".into()).unwrap();
    stop();
    assert!(begin(NC_EXEC, 908, String::new).is_none(), "stopped");
    s.end(&ok());
    assert_eq!(take(Some(908), 0).len(), 2);

    start(Capture::default());
    let s = begin(NC_EXEC, 908, || "b".into()).unwrap();
    start(Capture::default()); // a new capture empties the buffers
    drop(s);
    assert!(take(Some(908), 0).is_empty());
    let s = begin(NC_EXEC, 908, || "c".into()).unwrap();
    drop(s); // dropped without end: a stop with NRT_FAILURE
    let e = take(Some(908), 0);
    assert_eq!(e[1].data.status, Some("NRT_FAILURE"));
    reset();
    assert!(!active());
}

#[test]
fn the_json_is_what_spike_reads() {
    let _g = serial();
    start(Capture::default());
    record(NC_EXEC, 909, || "m\"q".into(), ok).unwrap();
    stop();
    let text = to_json(&take(Some(909), 0)).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let ev = v["events"].as_array().unwrap();
    assert_eq!(ev.len(), 2);
    for (e, phase) in ev.iter().zip(["start", "stop"]) {
        assert_eq!(e["event_type"], "nc_exec_running");
        assert_eq!(e["phase"], phase);
        assert_eq!(e["nc_idx"], 909);
        assert!(e["tracking_id"].is_u64());
        assert!(e["data"]["nc_timestamp_ns"].is_u64());
        assert_eq!(e["data"]["name"], "m\"q");
    }
    assert_eq!(ev[0]["tracking_id"], ev[1]["tracking_id"]);
    assert!(ev[0]["data"].get("status").is_none());
    assert_eq!(ev[1]["data"]["status"], "NRT_SUCCESS");
    assert_eq!(to_json(&[]).unwrap(), r#"{"events":[]}"#);
}

#[test]
fn the_clock_is_monotonic_nanoseconds() {
    let a = now_ns();
    std::thread::sleep(std::time::Duration::from_millis(2));
    let b = now_ns();
    assert!(b > a);
}

use super::*;
use crate::stats::Stat;
use crate::table::columns;

fn row() -> Row {
    Row {
        size: 1024,
        count: 256,
        total_in: 1024,
        total_out: 1024,
        dtype: "fp32",
        times: vec![(Stat::Avg, 6.1859), (Stat::P(99), 7.4)],
        algbw: 0.165536,
        busbw: 0.160363,
        algorithm: Some("ring".into()),
    }
}

/// The vendor's example object, key for key and in order.
#[test]
fn the_default_report_has_the_vendors_keys_in_order() {
    let cols = columns(&[Stat::Avg], false, false);
    assert_eq!(
        json(&cols, &[row()]),
        "{\"results\":[{\"size(B)\":1024,\"count(elems)\":256,\"type\":\"fp32\",\
         \"algbw(GB/s)\":0.165536,\"busbw(GB/s)\":0.160363,\"time:avg(us)\":6.19}]}\n"
    );
}

#[test]
fn optional_keys_follow_and_the_report_parses() {
    let cols = columns(&[Stat::Avg, Stat::P(99)], true, true);
    let j = json(&cols, &[row(), row()]);
    let v: serde_json::Value = serde_json::from_str(&j).unwrap();
    let r = &v["results"][1];
    assert_eq!(r["total_input_size(B)"], 1024);
    assert_eq!(r["time:p99(us)"], 7.0);
    assert_eq!(r["algorithm"], "ring");
    let keys: Vec<&str> = j
        .split(['{', ','])
        .filter_map(|f| f.strip_prefix('"'))
        .filter_map(|f| f.split('"').next())
        .take(10)
        .collect();
    assert_eq!(
        keys,
        [
            "results",
            "size(B)",
            "count(elems)",
            "total_input_size(B)",
            "total_output_size(B)",
            "type",
            "algbw(GB/s)",
            "busbw(GB/s)",
            "time:avg(us)",
            "time:p99(us)"
        ]
    );
    assert_eq!(json(&cols, &[]), "{\"results\":[]}\n");
}

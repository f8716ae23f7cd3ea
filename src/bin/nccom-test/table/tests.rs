use super::*;

fn vendor_row() -> Row {
    Row {
        size: 33_554_432,
        count: 33_554_432,
        total_in: 33_554_432,
        total_out: 33_554_432,
        dtype: "uint8",
        times: vec![(Stat::Avg, 768.0)],
        algbw: 40.6901,
        busbw: 40.6901,
        algorithm: None,
    }
}

/// The vendor's 2-rank example, column for column (with the current `time:avg(us)` header).
#[test]
fn the_default_table_lines_up_as_the_vendors() {
    let cols = columns(&[Stat::Avg], false, false);
    assert_eq!(
        header(&cols),
        "     size(B)    count(elems)     type    time:avg(us)    algbw(GB/s)    busbw(GB/s)"
    );
    assert_eq!(
        line(&cols, &vendor_row()),
        "    33554432        33554432    uint8           768.0          40.69          40.69"
    );
    assert_eq!(average(&[40.6901]), "Avg bus bandwidth:\t40.6901GB/s");
}

#[test]
fn optional_columns_go_where_the_vendor_puts_them() {
    let stats = [
        Stat::Avg,
        Stat::P(25),
        Stat::P(50),
        Stat::P(90),
        Stat::P(99),
    ];
    let cols = columns(&stats, true, true);
    let names: Vec<String> = cols.iter().map(|c| c.header()).collect();
    assert_eq!(
        names,
        [
            "size(B)",
            "count(elems)",
            "total_input_size(B)",
            "total_output_size(B)",
            "type",
            "time:avg(us)",
            "time:p25(us)",
            "time:p50(us)",
            "time:p90(us)",
            "time:p99(us)",
            "algbw(GB/s)",
            "busbw(GB/s)",
            "algorithm"
        ]
    );
    let mut r = vendor_row();
    r.times = vec![
        (Stat::Avg, 10.004),
        (Stat::P(50), 10.4),
        (Stat::P(99), 11.6),
    ];
    r.algorithm = Some("mesh".into());
    let l = line(&cols, &r);
    assert!(l.ends_with("        mesh"), "{l}");
    let cells: Vec<&str> = l.split_whitespace().collect();
    assert_eq!(cells[5..10], ["10.0", "0", "10", "0", "12"], "{l}");
    assert!(
        l.contains("            10.0               0              10"),
        "{l}"
    );
    assert_eq!(header(&cols).len(), l.len());
}

#[test]
fn failures_averages_and_errors() {
    assert_eq!(
        failure(
            33_554_432,
            "Failure running neuron-bench - log file /tmp/x.log"
        ),
        "    33554432    Failure running neuron-bench - log file /tmp/x.log"
    );
    assert_eq!(average(&[1.0, 2.0, 4.0]), "Avg bus bandwidth:\t2.3333GB/s");
    assert_eq!(average(&[]), "Avg bus bandwidth:\t0.0000GB/s");
    assert_eq!(errors(1), "1 errors found - test failed");
}

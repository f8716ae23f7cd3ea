use super::*;

/// The spellings of the vendor's docs: `2kb`, `1MB`, `1gb`, `32M`, plain bytes.
#[test]
fn sizes_take_binary_units() {
    assert_eq!(parse_bytes("2kb"), Ok(2048));
    assert_eq!(parse_bytes("1MB"), Ok(1_048_576));
    assert_eq!(parse_bytes("1gb"), Ok(1 << 30));
    assert_eq!(parse_bytes("32M"), Ok(32 << 20));
    assert_eq!(parse_bytes("4"), Ok(4));
    assert_eq!(parse_bytes("4B"), Ok(4));
    assert_eq!(parse_bytes("8KiB"), Ok(8192));
    assert_eq!(parse_bytes("1.5kb"), Ok(1536));
}

#[test]
fn bad_sizes_say_why() {
    // Checks the message a user reads, on purpose.
    for bad in ["", "kb", "12x", "1.2.3", "99999999999gb", "-1"] {
        assert!(parse_bytes(bad).is_err(), "{bad:?}");
    }
    assert!(parse_bytes("12x").unwrap_err().contains("not a size"));
}

/// 1e9 units: the vendor's example 524288 B / 14.83 µs prints 35.35 (35.34 in the docs, whose
/// time was a little over 14.83).
#[test]
fn bandwidth_uses_1e9() {
    let bw = gbps(524_288, 14.83);
    assert!((bw - 35.353).abs() < 1e-3, "{bw}");
    assert_eq!(format!("{:.2}", gbps(1_000_000_000, 1e6)), "1.00");
    assert_eq!(gbps(1024, 0.0), 0.0);
}

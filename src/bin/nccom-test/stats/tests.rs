use super::*;

#[test]
fn words_and_headers() {
    assert_eq!(Stat::parse("avg"), Some(Stat::Avg));
    assert_eq!(Stat::parse("P90"), Some(Stat::P(90)));
    assert_eq!(Stat::parse("p95"), None);
    assert_eq!(Stat::Avg.header(), "time:avg(us)");
    assert_eq!(Stat::P(25).header(), "time:p25(us)");
}

/// Nearest rank: p50 of 1..4 is 2, p25 is 1, p99 of 20 samples is the largest.
#[test]
fn percentiles_are_nearest_rank() {
    let s = [4.0, 1.0, 3.0, 2.0];
    assert_eq!(Stat::Avg.of(&s), 2.5);
    assert_eq!(Stat::P(50).of(&s), 2.0);
    assert_eq!(Stat::P(25).of(&s), 1.0);
    assert_eq!(Stat::P(90).of(&s), 4.0);
    let twenty: Vec<f64> = (1..=20).map(f64::from).collect();
    assert_eq!(Stat::P(99).of(&twenty), 20.0);
    assert_eq!(Stat::P(90).of(&twenty), 18.0);
    assert_eq!(Stat::P(50).of(&[7.0]), 7.0);
    assert_eq!(Stat::Avg.of(&[]), 0.0);
}

/// The mean prints with 2 decimals, percentiles as integers; the report keeps that rounding.
#[test]
fn values_print_as_the_vendor_prints_them() {
    assert_eq!(Stat::Avg.show(6.186), "6.19");
    assert_eq!(Stat::Avg.show(10.0), "10.0");
    assert_eq!(Stat::Avg.show(9689.5), "9689.5");
    assert_eq!(Stat::Avg.show(894.2449), "894.24");
    assert_eq!(Stat::Avg.show(9.999), "10.0");
    assert_eq!(Stat::P(50).show(10.4), "10");
    assert_eq!(Stat::P(99).show(11.6), "12");
    assert_eq!(Stat::Avg.rounded(6.186), 6.19);
    assert_eq!(Stat::P(99).rounded(11.6), 12.0);
}

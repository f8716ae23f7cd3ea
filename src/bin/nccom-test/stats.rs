//! The time statistics of `-t/--stats`: `avg` (the mean of every measured operation, rounded
//! to 2 decimals and printed without trailing zeros: `10.0`, `9689.5`) and the percentiles `p25`, `p50`, `p90`, `p99` (printed as integers).
//!
//! Percentiles use the nearest-rank method (OpenNRT's choice; the vendor's is not documented):
//! `pN` is the smallest sample with at least N % of the samples at or below it, so `p50` of
//! 1, 2, 3, 4 is 2 and `p99` of 20 samples is the largest.

/// One statistic of the time columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stat {
    /// The mean.
    Avg,
    /// A percentile (25, 50, 90 or 99).
    P(u8),
}

/// The statistics `-t` accepts, in the vendor's order.
pub const ALL: [Stat; 5] = [
    Stat::Avg,
    Stat::P(25),
    Stat::P(50),
    Stat::P(90),
    Stat::P(99),
];

impl Stat {
    /// The statistic of a `-t` word, `None` for another word.
    pub fn parse(w: &str) -> Option<Stat> {
        ALL.into_iter().find(|s| s.name().eq_ignore_ascii_case(w))
    }

    /// `avg`, `p25`, …: the word and the column's middle part (`time:p25(us)`).
    pub fn name(self) -> String {
        match self {
            Stat::Avg => "avg".into(),
            Stat::P(p) => format!("p{p}"),
        }
    }

    /// The column header and JSON key: `time:avg(us)`.
    pub fn header(self) -> String {
        format!("time:{}(us)", self.name())
    }

    /// The statistic of `samples` (microseconds, any order); 0 for no samples.
    pub fn of(self, samples: &[f64]) -> f64 {
        if samples.is_empty() {
            return 0.0;
        }
        match self {
            Stat::Avg => samples.iter().sum::<f64>() / samples.len() as f64,
            Stat::P(p) => {
                let mut s = samples.to_vec();
                s.sort_by(f64::total_cmp);
                let rank = (f64::from(p) / 100.0 * s.len() as f64).ceil() as usize;
                s[rank.clamp(1, s.len()) - 1]
            }
        }
    }

    /// The value as the table prints it: the mean with at most 2 decimals (no trailing zeros,
    /// one decimal at least), a percentile as an integer.
    pub fn show(self, v: f64) -> String {
        match self {
            Stat::Avg => {
                // Rounded to 2 decimals, printed without trailing zeros but with one decimal
                // at least: 10.0, 9689.5, 6.19, as the vendor's rows read.
                let t = format!("{v:.2}");
                let t = t.trim_end_matches('0');
                if t.ends_with('.') {
                    format!("{t}0")
                } else {
                    t.to_string()
                }
            }
            Stat::P(_) => format!("{:.0}", v.round()),
        }
    }

    /// The value as the JSON report holds it: the printed rounding, as a number.
    pub fn rounded(self, v: f64) -> f64 {
        match self {
            Stat::Avg => (v * 100.0).round() / 100.0,
            Stat::P(_) => v.round(),
        }
    }
}

#[cfg(test)]
mod tests;

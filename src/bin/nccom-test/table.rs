//! The result table, laid out as the vendor's examples print it.
//!
//! Columns: `size(B) count(elems) [total_input_size(B) total_output_size(B)] type
//! time:<stat>(us)… algbw(GB/s) busbw(GB/s) [algorithm]`. Every column is right-aligned to its
//! header's width plus 4 (so the header reads `    count(elems)`), except size(B) and type,
//! which are 12 and 9 wide, as in the vendor's 2-rank example
//! (`     size(B)    count(elems)     type    time(us)    algbw(GB/s)    busbw(GB/s)` over
//! `    33554432        33554432    uint8         768          40.69          40.69`).
//! Bandwidths print with 2 decimals, the mean time with at most 2 (no trailing zeros) and percentiles as integers
//! ([`crate::stats::Stat::show`]). algbw and busbw come from the mean time whatever `-t`
//! lists. The closing line is `Avg bus bandwidth:<TAB>X.XXXXGB/s`, the plain mean of the
//! busbw column (unrounded values) with 4 decimals; a failed size prints
//! `<size>    <reason>` in its place and the run ends `N errors found - test failed`.

use crate::stats::Stat;

/// One column of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Col {
    /// size(B).
    Size,
    /// count(elems).
    Count,
    /// total_input_size(B): one rank's whole input tensor.
    TotalIn,
    /// total_output_size(B): one rank's whole output tensor.
    TotalOut,
    /// type.
    Type,
    /// `time:<stat>(us)`.
    Time(Stat),
    /// algbw(GB/s).
    AlgBw,
    /// busbw(GB/s).
    BusBw,
    /// algorithm.
    Algorithm,
}

impl Col {
    /// The header (also the JSON report's key).
    pub fn header(self) -> String {
        match self {
            Col::Size => "size(B)".into(),
            Col::Count => "count(elems)".into(),
            Col::TotalIn => "total_input_size(B)".into(),
            Col::TotalOut => "total_output_size(B)".into(),
            Col::Type => "type".into(),
            Col::Time(s) => s.header(),
            Col::AlgBw => "algbw(GB/s)".into(),
            Col::BusBw => "busbw(GB/s)".into(),
            Col::Algorithm => "algorithm".into(),
        }
    }

    /// The printed width.
    pub fn width(self) -> usize {
        match self {
            Col::Size => 12,
            Col::Type => 9,
            c => c.header().len() + 4,
        }
    }
}

/// The columns of a run, in the vendor's order.
pub fn columns(stats: &[Stat], io_sizes: bool, algorithm: bool) -> Vec<Col> {
    let mut c = vec![Col::Size, Col::Count];
    if io_sizes {
        c.extend([Col::TotalIn, Col::TotalOut]);
    }
    c.push(Col::Type);
    c.extend(stats.iter().map(|&s| Col::Time(s)));
    c.extend([Col::AlgBw, Col::BusBw]);
    if algorithm {
        c.push(Col::Algorithm);
    }
    c
}

/// One measured size.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// size(B).
    pub size: u64,
    /// count(elems).
    pub count: u64,
    /// One rank's input bytes.
    pub total_in: u64,
    /// One rank's output bytes.
    pub total_out: u64,
    /// The type's name.
    pub dtype: &'static str,
    /// Each statistic of the time columns, in microseconds.
    pub times: Vec<(Stat, f64)>,
    /// algbw in GB/s (unrounded).
    pub algbw: f64,
    /// busbw in GB/s (unrounded).
    pub busbw: f64,
    /// The algorithm (`--show-algorithm`).
    pub algorithm: Option<String>,
}

impl Row {
    /// A statistic's value (0 when it was not computed).
    pub fn time(&self, s: Stat) -> f64 {
        self.times
            .iter()
            .find(|(t, _)| *t == s)
            .map_or(0.0, |&(_, v)| v)
    }

    /// A cell as printed.
    pub fn cell(&self, c: Col) -> String {
        match c {
            Col::Size => self.size.to_string(),
            Col::Count => self.count.to_string(),
            Col::TotalIn => self.total_in.to_string(),
            Col::TotalOut => self.total_out.to_string(),
            Col::Type => self.dtype.to_string(),
            Col::Time(s) => s.show(self.time(s)),
            Col::AlgBw => format!("{:.2}", self.algbw),
            Col::BusBw => format!("{:.2}", self.busbw),
            Col::Algorithm => self.algorithm.clone().unwrap_or_else(|| "-".into()),
        }
    }
}

/// The header line.
pub fn header(cols: &[Col]) -> String {
    cols.iter()
        .map(|c| format!("{:>w$}", c.header(), w = c.width()))
        .collect()
}

/// A row's line.
pub fn line(cols: &[Col], r: &Row) -> String {
    cols.iter()
        .map(|c| format!("{:>w$}", r.cell(*c), w = c.width()))
        .collect()
}

/// The line of a size that failed: its size, 4 spaces, the reason.
pub fn failure(size: u64, why: &str) -> String {
    format!("{size:>w$}    {why}", w = Col::Size.width())
}

/// The closing line: a TAB after the colon (the vendor's; it shows as 6 spaces on a terminal),
/// the mean of the busbw column, 4 decimals, no space before GB/s.
pub fn average(busbw: &[f64]) -> String {
    let avg = if busbw.is_empty() {
        0.0
    } else {
        busbw.iter().sum::<f64>() / busbw.len() as f64
    };
    format!("Avg bus bandwidth:\t{avg:.4}GB/s")
}

/// The closing line of a run with failures.
pub fn errors(n: usize) -> String {
    format!("{n} errors found - test failed")
}

#[cfg(test)]
mod tests;

//! `--report-to-json-file F`: the results as JSON, in the vendor's shape:
//! `{"results":[{"size(B)":1024,"count(elems)":256,"type":"fp32","algbw(GB/s)":0.165536…,
//! "busbw(GB/s)":0.160363…,"time:avg(us)":6.19}, …]}`.
//!
//! Keys are the table's headers, in the vendor's order: size(B), count(elems), (with
//! `--show-input-output-size`) total_input_size(B) and total_output_size(B), type, algbw(GB/s),
//! busbw(GB/s), then one key per `-t` statistic, then (with `--show-algorithm`) algorithm.
//! Bandwidths are unrounded; times carry the table's rounding (the vendor's example has
//! `"time:avg(us)":6.19` next to unrounded bandwidths). Failed sizes are left out. The object
//! is written by hand so that the keys keep this order.

use crate::table::{Col, Row};

/// A JSON number (non-finite values, which JSON lacks, become 0).
fn num(v: f64) -> String {
    if v.is_finite() {
        serde_json::to_string(&v).unwrap_or_else(|_| "0".into())
    } else {
        "0".into()
    }
}

/// A JSON string.
fn text(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// One row's object.
fn object(cols: &[Col], r: &Row) -> String {
    let mut keys: Vec<Col> = cols
        .iter()
        .copied()
        .filter(|c| !matches!(c, Col::Time(_) | Col::Algorithm))
        .collect();
    keys.extend(cols.iter().copied().filter(|c| matches!(c, Col::Time(_))));
    keys.extend(cols.iter().copied().filter(|c| *c == Col::Algorithm));
    let fields: Vec<String> = keys
        .iter()
        .map(|&c| {
            let v = match c {
                Col::Size => r.size.to_string(),
                Col::Count => r.count.to_string(),
                Col::TotalIn => r.total_in.to_string(),
                Col::TotalOut => r.total_out.to_string(),
                Col::Type => text(r.dtype),
                Col::Time(s) => num(s.rounded(r.time(s))),
                Col::AlgBw => num(r.algbw),
                Col::BusBw => num(r.busbw),
                Col::Algorithm => text(r.algorithm.as_deref().unwrap_or("-")),
            };
            format!("{}:{v}", text(&c.header()))
        })
        .collect();
    format!("{{{}}}", fields.join(","))
}

/// The whole report.
pub fn json(cols: &[Col], rows: &[Row]) -> String {
    let objs: Vec<String> = rows.iter().map(|r| object(cols, r)).collect();
    format!("{{\"results\":[{}]}}\n", objs.join(","))
}

/// Write the report to `path`.
pub fn write(path: &std::path::Path, cols: &[Col], rows: &[Row]) -> std::io::Result<()> {
    std::fs::write(path, json(cols, rows))
}

#[cfg(test)]
mod tests;

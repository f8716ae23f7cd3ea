//! `--plot FILE` (OpenNRT's addition): bus bandwidth against size of the run as an SVG chart
//! ([`opennrt::plot`]), one curve for the sweep. The flag is taken off the command line before
//! [`crate::args`] parses it, so the vendor-compatible parser is unchanged by it.

use std::path::PathBuf;

use crate::bench::Setup;
use crate::table::Row;

/// Split `--plot FILE` (or `--plot=FILE`) off `argv`.
pub fn take(argv: &[String]) -> Result<(Vec<String>, Option<PathBuf>), String> {
    let (mut rest, mut plot) = (Vec::new(), None);
    let mut it = argv.iter();
    while let Some(a) = it.next() {
        if let Some(v) = a.strip_prefix("--plot=") {
            plot = Some(PathBuf::from(v));
        } else if a == "--plot" {
            let v = it.next().ok_or("--plot needs a value FILE")?;
            plot = Some(PathBuf::from(v));
        } else {
            rest.push(a.clone());
        }
    }
    Ok((rest, plot))
}

/// Write the chart of `rows` when `--plot` was given; the error names the file.
pub fn write(s: &Setup, rows: &[Row]) -> Result<(), String> {
    let Some(path) = &s.plot else {
        return Ok(());
    };
    let path = path.to_str().ok_or("the path is not UTF-8")?;
    let o = &s.opts;
    let curve = opennrt::plot::Curve {
        name: format!("{} on {} ranks", o.op.nccom_name(), o.ranks),
        points: rows.iter().map(|r| (r.size, r.busbw)).collect(),
    };
    let title = format!("nccom-test: {} on {} ranks", o.op.nccom_name(), o.ranks);
    opennrt::plot::busbw_svg(path, &title, &[curve])
}

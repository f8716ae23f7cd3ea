//! For the CLIs only (`opennrt perf --plot`, `nccom-test --plot`): bus bandwidth against size
//! as an SVG line chart, one curve per run (out of place and in place, or one per sweep), the
//! size axis in log scale as the sweeps double or quadruple their size.
//!
//! Drawn with `plotters`' SVG backend only: text stays SVG `<text>`, so no font file or font
//! library is needed at run time. PNG is left out on purpose: plotters' bitmap backend needs a
//! real font rasteriser (the `ttf` feature, which loads system fonts through fontconfig), a
//! run-time dependency on the machine's fonts that the SVG path does not have; convert the SVG
//! with any SVG tool (`rsvg-convert`) when a PNG is wanted.

use plotters::prelude::*;

/// One curve: a name for the legend and `(size in bytes, busbw in GB/s)` points.
#[derive(Debug, Clone)]
pub struct Curve {
    /// Legend text.
    pub name: String,
    /// The points, in size order.
    pub points: Vec<(u64, f64)>,
}

/// Stroke colours of the curves, in order (cycled).
pub const COLOURS: [RGBColor; 4] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0x94, 0x67, 0xbd),
];

/// A size as people write it: 8 B, 64 KiB, 1 MiB.
pub fn size_label(b: f64) -> String {
    let b = b.round() as u64;
    match b {
        _ if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{}G", b >> 30),
        _ if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{}M", b >> 20),
        _ if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{}K", b >> 10),
        _ => format!("{b}"),
    }
}

/// Write the chart to `path`. Curves without points are skipped; an error names the file.
pub fn busbw_svg(path: &str, title: &str, curves: &[Curve]) -> Result<(), String> {
    let pts = || curves.iter().flat_map(|c| c.points.iter());
    let xmin = pts().map(|p| p.0).min().unwrap_or(1).max(1) as f64;
    let xmax = (pts().map(|p| p.0).max().unwrap_or(2) as f64).max(xmin * 2.0);
    let ymax = pts().map(|p| p.1).fold(0.0, f64::max).max(1e-6) * 1.1;
    let err = |e: DrawingAreaErrorKind<_>| format!("{path}: {e}");
    let root = SVGBackend::new(path, (800, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 16))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(65)
        .build_cartesian_2d((xmin..xmax).log_scale().base(2.0), 0.0..ymax)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("size (bytes, log scale)")
        .y_desc("busbw (GB/s)")
        .x_label_formatter(&|x| size_label(*x))
        .draw()
        .map_err(err)?;
    for (i, c) in curves.iter().filter(|c| !c.points.is_empty()).enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let style = ShapeStyle::from(&colour).stroke_width(2);
        chart
            .draw_series(LineSeries::new(
                c.points.iter().map(|&(x, y)| (x as f64, y)),
                style,
            ))
            .map_err(err)?
            .label(c.name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests;

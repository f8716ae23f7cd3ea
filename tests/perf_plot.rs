//! `opennrt perf --plot`: the busbw chart (src/plot.rs) parsed as XML: one line per half (out of
//! place, in place), a log-scale size axis whose ticks are the sweep's powers of two, and the
//! legend names.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_opennrt");

#[test]
fn perf_plot_has_one_curve_per_half_and_log_size_ticks() {
    let path = std::env::temp_dir().join(format!("opennrt_perf_{}.svg", std::process::id()));
    let p = path.to_str().expect("utf-8 path");
    let o = Command::new(BIN)
        .args([
            "perf",
            "--op",
            "all_reduce",
            "--ranks",
            "2",
            "-b",
            "8",
            "-e",
            "8K",
            "-f",
            "4",
            "-n",
            "1",
            "--plot",
            p,
        ])
        .output()
        .expect("run opennrt");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let svg = std::fs::read_to_string(&path).expect("the chart was written");
    let _ = std::fs::remove_file(&path);
    let doc = roxmltree::Document::parse(&svg).expect("well-formed SVG");
    // The curves are the only polylines in the curve colours (src/plot.rs COLOURS), and each
    // holds the sweep's 6 sizes (8 B .. 8 KiB by 4); the legend adds a 2-point sample of each.
    let curve_colours = ["#1f77b4", "#d62728"];
    let lines: Vec<usize> = doc
        .descendants()
        .filter(|n| n.has_tag_name("polyline"))
        .filter(|n| {
            let s = n.attribute("stroke").unwrap_or("").to_ascii_lowercase();
            curve_colours.contains(&s.as_str())
        })
        .map(|n| {
            n.attribute("points")
                .unwrap_or("")
                .split_whitespace()
                .count()
        })
        .collect();
    assert_eq!(lines.iter().filter(|&&k| k == 6).count(), 2, "{lines:?}");
    let texts: Vec<String> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|n| n.text().unwrap_or("").trim().to_string())
        .collect();
    for want in [
        "out-of-place",
        "in-place",
        "8",
        "32",
        "128",
        "512",
        "2K",
        "8K",
    ] {
        assert!(texts.iter().any(|t| t == want), "no {want:?} in {texts:?}");
    }
    assert!(texts.iter().any(|t| t.contains("log scale")));
}

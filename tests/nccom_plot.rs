//! `nccom-test --plot`: the busbw chart of a small sweep parsed as XML: one curve with a point
//! per row, log-scale size ticks. `--plot` is also refused without its value.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_nccom-test");

#[test]
fn nccom_test_plot_has_one_curve_with_a_point_per_size() {
    let path = std::env::temp_dir().join(format!("nccom_plot_{}.svg", std::process::id()));
    let p = path.to_str().expect("utf-8 path");
    let o = Command::new(BIN)
        .args([
            "-r",
            "2",
            "allr",
            "-d",
            "fp32",
            "-b",
            "8",
            "-e",
            "512",
            "-f",
            "4",
            "--threads",
            "--plot",
            p,
        ])
        .output()
        .expect("run nccom-test");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let svg = std::fs::read_to_string(&path).expect("the chart was written");
    let _ = std::fs::remove_file(&path);
    let doc = roxmltree::Document::parse(&svg).expect("well-formed SVG");
    let curves: Vec<usize> = doc
        .descendants()
        .filter(|n| {
            n.has_tag_name("polyline")
                && n.attribute("stroke")
                    .unwrap_or("")
                    .eq_ignore_ascii_case("#1f77b4")
        })
        .map(|n| {
            n.attribute("points")
                .unwrap_or("")
                .split_whitespace()
                .count()
        })
        .collect();
    // The curve (8, 32, 128, 512 B) and its 2-point legend sample.
    assert_eq!(curves.iter().filter(|&&k| k == 4).count(), 1, "{curves:?}");
    let texts: Vec<String> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|n| n.text().unwrap_or("").trim().to_string())
        .collect();
    for want in ["8", "32", "128", "512"] {
        assert!(
            texts.iter().any(|t| t == want),
            "no tick {want:?} in {texts:?}"
        );
    }
}

#[test]
fn plot_without_a_file_is_refused() {
    let o = Command::new(BIN)
        .args(["-r", "2", "allr", "--plot"])
        .output()
        .expect("run nccom-test");
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--plot"));
}

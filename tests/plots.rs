//! The busbw charts of `opennrt perf --plot` and `nccom-test --plot` (src/plot.rs), parsed as
//! XML: one polyline per curve with a point per size of the sweep, a log-scale size axis whose
//! ticks are the sweep's powers of two, and the legend names. `--plot` without its file is
//! refused.

use std::process::Command;

const OPENNRT: &str = env!("CARGO_BIN_EXE_opennrt");
const NCCOM_TEST: &str = env!("CARGO_BIN_EXE_nccom-test");

/// The curve colours of src/plot.rs, in curve order.
const CURVE_COLOURS: [&str; 2] = ["#1f77b4", "#d62728"];

/// What a chart holds: the point count of each polyline drawn in a curve colour (the curves,
/// and the 2-point legend samples), and every text.
struct Chart {
    curves: Vec<usize>,
    texts: Vec<String>,
}

/// Run `bin args… --plot FILE` and parse the chart it wrote.
fn chart(bin: &str, args: &[&str], tag: &str) -> Chart {
    let path = std::env::temp_dir().join(format!("opennrt_{tag}_{}.svg", std::process::id()));
    let p = path.to_str().expect("utf-8 path");
    let o = Command::new(bin)
        .args(args)
        .args(["--plot", p])
        .output()
        .expect("run the tool");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let svg = std::fs::read_to_string(&path).expect("the chart was written");
    let _ = std::fs::remove_file(&path);
    let doc = roxmltree::Document::parse(&svg).expect("well-formed SVG");
    let curves = doc
        .descendants()
        .filter(|n| n.has_tag_name("polyline"))
        .filter(|n| {
            let s = n.attribute("stroke").unwrap_or("").to_ascii_lowercase();
            CURVE_COLOURS.contains(&s.as_str())
        })
        .map(|n| {
            n.attribute("points")
                .unwrap_or("")
                .split_whitespace()
                .count()
        })
        .collect();
    let texts = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|n| n.text().unwrap_or("").trim().to_string())
        .collect();
    Chart { curves, texts }
}

impl Chart {
    /// How many curves hold exactly `points` points.
    fn curves_of(&self, points: usize) -> usize {
        self.curves.iter().filter(|&&k| k == points).count()
    }

    fn assert_texts(&self, want: &[&str]) {
        for w in want {
            assert!(
                self.texts.iter().any(|t| t == w),
                "no {w:?} in {:?}",
                self.texts
            );
        }
    }
}

#[test]
fn perf_plot_has_one_curve_per_half_and_log_size_ticks() {
    let c = chart(
        OPENNRT,
        &[
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
        ],
        "perf",
    );
    // Out of place and in place, each with the sweep's 6 sizes (8 B .. 8 KiB by 4).
    assert_eq!(c.curves_of(6), 2, "{:?}", c.curves);
    c.assert_texts(&[
        "out-of-place",
        "in-place",
        "8",
        "32",
        "128",
        "512",
        "2K",
        "8K",
    ]);
    assert!(c.texts.iter().any(|t| t.contains("log scale")));
}

#[test]
fn nccom_test_plot_has_one_curve_with_a_point_per_size() {
    let c = chart(
        NCCOM_TEST,
        &[
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
        ],
        "nccom",
    );
    // One curve: 8, 32, 128, 512 B.
    assert_eq!(c.curves_of(4), 1, "{:?}", c.curves);
    c.assert_texts(&["8", "32", "128", "512"]);
}

#[test]
fn plot_without_a_file_is_refused() {
    let o = Command::new(NCCOM_TEST)
        .args(["-r", "2", "allr", "--plot"])
        .output()
        .expect("run nccom-test");
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--plot"));
}

//! The module layout rule of CONTRIBUTING.md §1, where clippy cannot check it.
//!
//! Clippy's `mod_module_files` (set for every crate in Cargo.toml) rejects a `mod.rs` in a
//! crate's sources, but it skips every file under `tests/` (where `tests/common/mod.rs` is the
//! usual idiom), and it knows nothing of test-file names or `#[path]`. So this test walks the
//! repository's Rust files and holds all of the rule: no `mod.rs` anywhere; no `*_tests.rs`
//! (a module's tests are its child `tests`, extra files children of that); `#[path]` only in
//! the test crates of `tests/`, and only to a helper in `tests/common/`.

use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Every `.rs` file under `dir`, skipping build output and hidden directories.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy();
        if p.is_dir() {
            if name != "target" && !name.starts_with('.') {
                rust_files(&p, out);
            }
        } else if name.ends_with(".rs") {
            out.push(p);
        }
    }
}

/// The `#[path = "…"]` values in `text`.
fn path_attrs(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("#[path"))
        .map(|rest| rest.split('"').nth(1).unwrap_or("").to_string())
        .collect()
}

#[test]
fn every_module_file_follows_the_layout_rule() {
    let root = Path::new(ROOT);
    let mut files = Vec::new();
    rust_files(root, &mut files);
    assert!(files.len() > 100, "found only {} .rs files", files.len());
    let mut bad = Vec::new();
    for p in &files {
        let rel = p.strip_prefix(root).unwrap();
        let name = rel.file_name().unwrap().to_string_lossy();
        if name == "mod.rs" {
            bad.push(format!("{}: a mod.rs (use name.rs + name/)", rel.display()));
        }
        if name.ends_with("_tests.rs") {
            bad.push(format!(
                "{}: a *_tests.rs (use <module>/tests.rs)",
                rel.display()
            ));
        }
        let text = std::fs::read_to_string(p).unwrap();
        let top_level_test = rel.parent() == Some(Path::new("tests"));
        for target in path_attrs(&text) {
            if !top_level_test {
                bad.push(format!("{}: #[path] outside a test crate", rel.display()));
            } else if !target.starts_with("common/") {
                bad.push(format!(
                    "{}: #[path = {target:?}] outside tests/common/",
                    rel.display()
                ));
            } else if !root.join("tests").join(&target).is_file() {
                bad.push(format!(
                    "{}: #[path = {target:?}] names no file",
                    rel.display()
                ));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "layout rule (CONTRIBUTING.md §1):\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_path_scanner_finds_what_it_should() {
    let text = "//! x\n#[path = \"common/a.rs\"]\nmod a;\n    #[path=\"b.rs\"] mod b;\n";
    assert_eq!(path_attrs(text), ["common/a.rs", "b.rs"]);
}

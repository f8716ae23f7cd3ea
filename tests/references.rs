//! Every reference in the repository resolves inside it: a clone with nothing beside it must
//! hold every page, data file and section that its code, tests and docs cite.
//!
//! Checked in every tracked text file (`git ls-files`, or a walk of the tree when there is no
//! git): each path that starts with `docs/`, `testdata/`, `capi-tests/`, `include/` or `bench/`
//! names a file or folder that exists, each relative Markdown link `](path)` of a `.md` file
//! resolves from that file's folder, and each `docs/contract/<page>.md §N` (or `§N.M`) names a
//! numbered heading of that page.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Top-level folders whose paths the text cites.
const CITED_ROOTS: [&str; 5] = ["docs/", "testdata/", "capi-tests/", "include/", "bench/"];

/// The tracked files, relative to the root.
fn tracked_files() -> Vec<PathBuf> {
    let out = Command::new("git")
        .args(["-C", ROOT, "ls-files", "-z"])
        .output();
    if let Ok(o) = out {
        if o.status.success() {
            return o
                .stdout
                .split(|&b| b == 0)
                .filter(|s| !s.is_empty())
                .map(|s| PathBuf::from(String::from_utf8_lossy(s).into_owned()))
                .collect();
        }
    }
    let mut files = Vec::new();
    walk(Path::new(ROOT), Path::new(""), &mut files);
    files
}

fn walk(abs: &Path, rel: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(abs) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || name == "target" || name == "build" {
            continue;
        }
        let (a, r) = (e.path(), rel.join(&*name));
        if a.is_dir() {
            walk(&a, &r, out);
        } else {
            out.push(r);
        }
    }
}

/// The text of a tracked file, or `None` for a binary one.
fn text(rel: &Path) -> Option<String> {
    let bytes = std::fs::read(Path::new(ROOT).join(rel)).ok()?;
    if bytes.contains(&0) {
        return None;
    }
    String::from_utf8(bytes).ok()
}

fn is_path_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '_' | '-')
}

/// Every cited repository path in `s` (starting at a word boundary with one of [`CITED_ROOTS`]),
/// trailing punctuation removed.
fn cited_paths(s: &str) -> Vec<String> {
    let mut found = Vec::new();
    for root in CITED_ROOTS {
        let mut from = 0;
        while let Some(i) = s[from..].find(root) {
            let at = from + i;
            from = at + root.len();
            let before = s[..at].chars().next_back();
            if before.is_some_and(|c| is_path_char(c) || c == '$' || c == '}') {
                continue; // part of a longer path (`../docs/`, `$root/docs/`, `target/...`)
            }
            let end = s[at..]
                .find(|c: char| !is_path_char(c))
                .map_or(s.len(), |e| at + e);
            let p = s[at..end].trim_end_matches(['.', '-', '/']);
            if p.len() > root.len() && !p.contains("..") && !p.contains('*') {
                found.push(p.to_string());
            }
        }
    }
    found
}

/// The section numbers of `docs/contract/<page>.md` headings ("3", "3.7", ...).
fn sections(page: &str) -> BTreeSet<String> {
    let body = std::fs::read_to_string(Path::new(ROOT).join(page)).unwrap_or_default();
    body.lines()
        .filter_map(|l| {
            let h = l.trim_start_matches('#');
            if h.len() == l.len() {
                return None;
            }
            let num: String = h
                .trim_start()
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            let num = num.trim_end_matches('.');
            (!num.is_empty()).then(|| num.to_string())
        })
        .collect()
}

/// `(page, section)` for each `docs/contract/<page>.md §N[.M]` in `s`.
fn contract_citations(s: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = s[from..].find("docs/contract/") {
        let at = from + i;
        from = at + 1;
        let Some(md) = s[at..].find(".md") else { break };
        let page = &s[at..at + md + 3];
        if page.contains(|c: char| !is_path_char(c)) {
            continue;
        }
        let rest = s[at + md + 3..].trim_start_matches(['`', ')']).trim_start();
        if let Some(sec) = rest.strip_prefix('§') {
            let num: String = sec
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            let num = num.trim_end_matches('.');
            if !num.is_empty() {
                out.push((page.to_string(), num.to_string()));
            }
        }
    }
    out
}

/// The relative targets of Markdown links `](target)` in `s`.
fn markdown_links(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = s[from..].find("](") {
        let at = from + i + 2;
        from = at;
        let Some(end) = s[at..].find(')') else { break };
        let target = s[at..at + end].split('#').next().unwrap_or("").trim();
        if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        out.push(target.to_string());
    }
    out
}

#[test]
fn every_reference_resolves_inside_the_repository() {
    let root = Path::new(ROOT);
    let mut broken: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut section_cache: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let files = tracked_files();
    assert!(files.len() > 100, "found only {} files", files.len());
    for rel in &files {
        let Some(body) = text(rel) else { continue };
        let name = rel.display().to_string();
        for (n, line) in body.lines().enumerate() {
            let here = format!("{name}:{}", n + 1);
            for p in cited_paths(line) {
                if !root.join(&p).exists() {
                    broken.entry(here.clone()).or_default().push(p);
                }
            }
            for (page, sec) in contract_citations(line) {
                let secs = section_cache
                    .entry(page.clone())
                    .or_insert_with(|| sections(&page));
                if !secs.is_empty() && !secs.contains(&sec) {
                    broken
                        .entry(here.clone())
                        .or_default()
                        .push(format!("{page} §{sec}"));
                }
            }
            if name.ends_with(".md") {
                let dir = rel.parent().unwrap_or(Path::new(""));
                for t in markdown_links(line) {
                    if !root.join(dir).join(&t).exists() {
                        broken.entry(here.clone()).or_default().push(t);
                    }
                }
            }
        }
    }
    let report: Vec<String> = broken
        .iter()
        .map(|(at, what)| format!("{at}: {}", what.join(", ")))
        .collect();
    assert!(
        report.is_empty(),
        "{} references do not resolve inside the repository:\n{}",
        report.len(),
        report.join("\n")
    );
}

#[test]
fn the_scanners_find_what_they_should() {
    assert_eq!(
        cited_paths("see docs/neff.md, testdata/neff/x.neff. and ../docs/no.md"),
        ["docs/neff.md", "testdata/neff/x.neff"]
    );
    assert_eq!(
        contract_citations("(docs/contract/abi.md §3.7, docs/contract/isa.md` §9 rule 6)"),
        [
            ("docs/contract/abi.md".to_string(), "3.7".to_string()),
            ("docs/contract/isa.md".to_string(), "9".to_string())
        ]
    );
    assert_eq!(
        markdown_links("[a](docs/x.md#s2) [b](https://x.org) [c](../y.md)"),
        ["docs/x.md", "../y.md"]
    );
}

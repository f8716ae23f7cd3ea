//! Every `§` reference in `src/` resolves inside the repository: it names a page under `docs/`
//! (on its line, or earlier in the same comment block) and that page has the section's anchor
//! (`<a id="s3.5"></a>`, or a `## 3.` heading for a whole section). So a clone can follow every
//! citation; nothing points at a file outside the repo.
//!
//! The page a bare `§N` belongs to is the nearest `docs/….md` named before it in the same
//! comment block (consecutive comment lines), so `docs/contract/device.md §2.1, §2.3` and a
//! continuation line `… §5.4` both resolve. Section numbers are checked to their first two
//! levels (`§3.2.4` needs `s3.2`); "item" and "rule" suffixes are not checked.
//!
//! Beyond `§`: every repository path cited in any tracked text file (`docs/…`, `testdata/…`,
//! `capi-tests/…`, `include/…`, `bench/…`) and every relative Markdown link exists.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The sections of a page (`3.5`, `A`): its `<a id="sX">` anchors and `## N.` headings.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut a = BTreeSet::new();
    for line in text.lines() {
        let mut rest = line;
        while let Some(i) = rest.find("<a id=\"s") {
            let tail = &rest[i + 8..];
            if let Some(end) = tail.find('"') {
                a.insert(tail[..end].to_string());
            }
            rest = &tail[1..];
        }
        let t = line.trim_start_matches('#');
        if t.len() < line.len() {
            let num: String = t
                .trim()
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            let num = num.trim_end_matches('.');
            if !num.is_empty() {
                a.insert(num.to_string());
            }
        }
    }
    a
}

/// The section number after a `§` at `s` (digits and dots, at most two levels), or a letter
/// (appendix).
fn section_at(s: &str) -> Option<String> {
    let num: String = s
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let num = num.trim_end_matches('.');
    if num.is_empty() {
        return s
            .chars()
            .next()
            .filter(|c| c.is_ascii_uppercase())
            .map(|c| c.to_string());
    }
    Some(num.split('.').take(2).collect::<Vec<_>>().join("."))
}

/// `docs/….md` names in `line`, with their byte offsets.
fn page_names(line: &str) -> Vec<(usize, String)> {
    let mut v = Vec::new();
    let mut from = 0;
    while let Some(i) = line[from..].find("docs/") {
        let start = from + i;
        let tail = &line[start..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || "/._-".contains(c)))
            .unwrap_or(tail.len());
        let name = tail[..end].trim_end_matches('.');
        if name.ends_with(".md") {
            v.push((start, name.to_string()));
        }
        from = start + 5;
    }
    v
}

#[test]
fn every_section_reference_in_src_resolves_inside_the_repo() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    files.sort();
    let mut pages: BTreeMap<String, Option<BTreeSet<String>>> = BTreeMap::new();
    let mut bad = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let rel = f.strip_prefix(root).unwrap().display().to_string();
        let mut current: Option<String> = None;
        for (n, line) in text.lines().enumerate() {
            let is_comment = line.trim_start().starts_with("//");
            if !is_comment {
                // A comment block ends; a reference in code (a string) needs its page on
                // its own line.
                current = None;
            }
            let names = page_names(line);
            for (i, _) in line.match_indices('§') {
                let page = names
                    .iter()
                    .rev()
                    .find(|(at, _)| *at < i)
                    .map(|(_, p)| p.clone())
                    .or_else(|| current.clone());
                let sec = section_at(&line[i + '§'.len_utf8()..]);
                let why = match (&page, &sec) {
                    (None, _) => Some("names no docs/ page".to_string()),
                    (_, None) => Some("no section number after §".to_string()),
                    (Some(p), Some(s)) => {
                        let a = pages
                            .entry(p.clone())
                            .or_insert_with(|| {
                                std::fs::read_to_string(root.join(p))
                                    .ok()
                                    .map(|t| anchors(&t))
                            })
                            .as_ref();
                        match a {
                            None => Some(format!("{p} does not exist")),
                            Some(a) => {
                                let top = s.split('.').next().unwrap();
                                let ok = a.contains(s.as_str())
                                    // design.md items: §2.9 is item 9 of section 2.
                                    || (p == "docs/design.md" && a.contains(top));
                                (!ok).then(|| format!("{p} has no section {s}"))
                            }
                        }
                    }
                };
                if let Some(why) = why {
                    bad.push(format!("{rel}:{}: {why}: {}", n + 1, line.trim()));
                }
            }
            if let Some((_, p)) = names.last() {
                if is_comment {
                    current = Some(p.clone());
                }
            }
        }
    }
    assert!(
        bad.is_empty(),
        "{} section references do not resolve inside the repo:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

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

/// Every cited repository path (in any tracked text file) and every relative Markdown link
/// (in a `.md` file) names a file or folder of this tree: a clone alone has what its code,
/// tests and docs point at.
#[test]
fn every_cited_path_and_link_resolves_inside_the_repo() {
    let root = Path::new(ROOT);
    let mut broken = Vec::new();
    let files = tracked_files();
    assert!(files.len() > 100, "found only {} files", files.len());
    for rel in &files {
        let name = rel.display().to_string();
        if name == "tests/doc_refs.rs" {
            continue; // its scanner tests cite made-up paths on purpose
        }
        let Some(body) = text(rel) else { continue };
        let dir = rel.parent().unwrap_or(Path::new(""));
        for (n, line) in body.lines().enumerate() {
            let mut missing: Vec<String> = cited_paths(line)
                .into_iter()
                .filter(|p| !root.join(p).exists())
                .collect();
            if name.ends_with(".md") {
                missing.extend(
                    markdown_links(line)
                        .into_iter()
                        .filter(|t| !root.join(dir).join(t).exists()),
                );
            }
            if !missing.is_empty() {
                broken.push(format!("{name}:{}: {}", n + 1, missing.join(", ")));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "{} lines point at paths that are not in the repo:\n{}",
        broken.len(),
        broken.join("\n")
    );
}

#[test]
fn the_path_and_link_scanners_find_what_they_should() {
    assert_eq!(
        cited_paths("see docs/neff.md, testdata/neff/x.neff. and ../docs/no.md"),
        ["docs/neff.md", "testdata/neff/x.neff"]
    );
    assert_eq!(
        markdown_links("[a](docs/x.md#s2) [b](https://x.org) [c](../y.md)"),
        ["docs/x.md", "../y.md"]
    );
}

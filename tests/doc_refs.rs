//! Every `§` reference in `src/` resolves inside the repository: it names a page under `docs/`
//! (on its line, or earlier in the same comment block) and that page has the section's anchor
//! (`<a id="s3.5"></a>`, or a `## 3.` heading for a whole section). So a clone can follow every
//! citation; nothing points at a file outside the repo.
//!
//! The page a bare `§N` belongs to is the nearest `docs/….md` named before it in the same
//! comment block (consecutive comment lines), so `docs/contract/device.md §2.1, §2.3` and a
//! continuation line `… §5.4` both resolve. Section numbers are checked to their first two
//! levels (`§3.2.4` needs `s3.2`); "item" and "rule" suffixes are not checked.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

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

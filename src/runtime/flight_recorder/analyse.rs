//! Lining up the rank files of a job (docs/hangs.md §3): by group (its kind and global ids)
//! and instance, every rank of the group either has the collective's record or not; the first
//! collective that some rank never entered or never finished is the finding.
//!
//! A rank whose ring wrapped has forgotten its oldest collectives: an instance older than the
//! oldest it still holds of that group is unknown for it, never "not entered". A rank with no
//! file at all is named as such (its process died, or wrote nothing).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::{RankFile, Record, State};

/// How one rank of a group stands at one collective.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Standing {
    /// The rank has a file, and no record of it where it should.
    NeverEntered,
    /// No file of the rank.
    NoFile,
    /// Scheduled at this wall-clock time (ns), not entered.
    Scheduled(u64),
    /// Entered at this wall-clock time (ns), no result.
    Running(u64),
    /// Failed with this status at this wall-clock time (ns).
    Failed(String, u64),
    /// Done.
    Done,
}

/// A collective that some rank of its group never entered or never finished.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The kind of exchange (`cc`, `neff`).
    pub kind: String,
    /// The group's global ids.
    pub group: Vec<u32>,
    /// The collective's instance in the group.
    pub instance: u64,
    /// `all_reduce fp32 x1024, ring`, from a rank's record.
    pub what: String,
    /// Every rank of the group (global id) and how it stands.
    pub ranks: Vec<(u32, Standing)>,
    /// The earliest wall-clock time (ns) any rank recorded for it (the order of findings).
    pub first_wall_ns: u64,
    /// For each rank, when its file was written (wall ns), for "running for".
    written: HashMap<u32, u64>,
}

fn list(gids: &[u32]) -> String {
    let s: Vec<String> = gids.iter().map(u32::to_string).collect();
    match gids.len() {
        1 => format!("rank {}", s[0]),
        _ => format!("ranks {}", s.join(",")),
    }
}

impl Finding {
    fn with(&self, f: impl Fn(&Standing) -> bool) -> Vec<u32> {
        self.ranks
            .iter()
            .filter(|(_, s)| f(s))
            .map(|(g, _)| *g)
            .collect()
    }

    /// The ranks to blame: those that never entered it (no record, no file, only scheduled);
    /// failing that, those that entered it and never finished while others did.
    pub fn culprits(&self) -> Vec<u32> {
        let absent = self.with(|s| {
            matches!(
                s,
                Standing::NeverEntered | Standing::NoFile | Standing::Scheduled(_)
            )
        });
        if !absent.is_empty() {
            return absent;
        }
        let running = self.with(|s| matches!(s, Standing::Running(_)));
        if running.len() < self.ranks.len() {
            running
        } else {
            Vec::new()
        }
    }

    /// The finding in one line: the collective, then each standing with its ranks.
    pub fn line(&self) -> String {
        let mut parts = Vec::new();
        let never = self.with(|s| *s == Standing::NeverEntered);
        if !never.is_empty() {
            parts.push(format!("{} never entered it", list(&never)));
        }
        let nofile = self.with(|s| *s == Standing::NoFile);
        if !nofile.is_empty() {
            parts.push(format!(
                "{} wrote no flight record (no file of that global id: its process died or \
                 never wrote one)",
                list(&nofile)
            ));
        }
        for (g, s) in &self.ranks {
            if let Standing::Scheduled(t) = s {
                parts.push(format!(
                    "rank {g} scheduled it at {} but never entered it",
                    wall(*t)
                ));
            }
        }
        let running = self.with(|s| matches!(s, Standing::Running(_)));
        if !running.is_empty() {
            let since = self
                .ranks
                .iter()
                .filter_map(|(g, s)| match s {
                    Standing::Running(t) => Some((*t, self.written.get(g).copied())),
                    _ => None,
                })
                .min()
                .unwrap_or_default();
            let entered = if never.is_empty() && nofile.is_empty() {
                " (entered it, never finished)"
            } else {
                ""
            };
            let mut p = format!(
                "{} running since {}{entered}",
                list(&running),
                wall(since.0)
            );
            if let Some(w) = since.1.filter(|w| *w >= since.0) {
                p.push_str(&format!(
                    ", {:.1} s when the file was written",
                    (w - since.0) as f64 / 1e9
                ));
            }
            parts.push(p);
        }
        let mut failed: BTreeMap<&str, (Vec<u32>, u64)> = BTreeMap::new();
        for (g, s) in &self.ranks {
            if let Standing::Failed(e, t) = s {
                let f = failed.entry(e).or_insert((Vec::new(), *t));
                f.0.push(*g);
                f.1 = f.1.min(*t);
            }
        }
        for (e, (gs, t)) in failed {
            parts.push(format!("{} failed with {e} at {}", list(&gs), wall(t)));
        }
        let done = self.with(|s| *s == Standing::Done);
        if !done.is_empty() {
            parts.push(format!("{} done", list(&done)));
        }
        format!(
            "group {:?} {} collective #{} ({}): {}",
            self.group,
            self.kind,
            self.instance,
            self.what,
            parts.join("; ")
        )
    }

    /// The verdict: who is to blame, in one line.
    pub fn verdict(&self) -> String {
        let c = self.culprits();
        let at = format!(
            "collective #{} of group {:?} ({} {})",
            self.instance, self.group, self.kind, self.what
        );
        if c.is_empty() {
            return format!(
                "no single rank: every rank of the group entered {at} and none finished it \
                 (a hang inside the collective: see the hang report in the log)"
            );
        }
        let entered = c.iter().all(|g| {
            self.ranks
                .iter()
                .any(|(r, s)| r == g && matches!(s, Standing::Running(_)))
        });
        match entered {
            true => format!("culprit: {} entered {at} but never finished it", list(&c)),
            false => format!("culprit: {} never entered {at}", list(&c)),
        }
    }
}

/// What the rank files say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Analysis {
    /// Rank files read.
    pub ranks: usize,
    /// Groups seen.
    pub groups: usize,
    /// Collectives lined up (group, instance).
    pub collectives: usize,
    /// The collectives some rank never entered or never finished, earliest first.
    pub findings: Vec<Finding>,
    /// Remarks about the input (several files of one global id, several jobs).
    pub notes: Vec<String>,
}

impl Analysis {
    /// True when every rank finished every collective of its groups it should have.
    pub fn consistent(&self) -> bool {
        self.findings.is_empty()
    }

    /// The report: the first finding and its verdict (or that all is consistent), then notes.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        match self.findings.first() {
            None => out.push(format!(
                "consistent: {} rank(s), {} group(s), {} collective(s) lined up; every rank \
                 finished every collective of its groups",
                self.ranks, self.groups, self.collectives
            )),
            Some(f) => {
                out.push(f.line());
                out.push(f.verdict());
                if self.findings.len() > 1 {
                    out.push(format!(
                        "{} later collective(s) are not finished on every rank either (--all \
                         lists them)",
                        self.findings.len() - 1
                    ));
                }
            }
        }
        out.extend(self.notes.iter().map(|n| format!("note: {n}")));
        out
    }
}

/// `op dtype xcount, algorithm` of a record.
fn what(r: &Record) -> String {
    format!("{} {} x{}, {}", r.op, r.dtype, r.count, r.algorithm)
}

/// One record in a line of the log: `#seq cc #instance group [..] all_reduce ... state times`.
pub fn describe_record(f: &RankFile, r: &Record) -> String {
    let mut s = format!(
        "seq {} {} #{} group {:?} {}: {}",
        r.seq,
        r.kind,
        r.instance,
        r.group,
        what(r),
        r.state.name()
    );
    if let Some(e) = &r.error {
        s.push_str(&format!(" ({e})"));
    }
    s.push_str(&format!(", scheduled {}", wall(f.wall_ns(r.scheduled_ns))));
    if let Some(t) = r.started_ns.filter(|t| *t != r.scheduled_ns) {
        s.push_str(&format!(
            ", entered +{:.3} ms",
            t.saturating_sub(r.scheduled_ns) as f64 / 1e6
        ));
    }
    if let (Some(t0), Some(t1)) = (r.started_ns, r.ended_ns) {
        let how = match r.state {
            State::Failed => "failed after",
            _ => "ran",
        };
        s.push_str(&format!(
            ", {how} {:.3} ms",
            t1.saturating_sub(t0) as f64 / 1e6
        ));
    }
    s
}

/// Line up `files` (module doc).
pub fn analyse(files: &[RankFile]) -> Analysis {
    analyse_with(files, true)
}

/// [`analyse`] of some of a job's ranks (one process's): a rank without a file is unknown,
/// not missing (its record is in its own process).
pub fn analyse_partial(files: &[RankFile]) -> Analysis {
    analyse_with(files, false)
}

fn analyse_with(files: &[RankFile], complete: bool) -> Analysis {
    let mut notes = Vec::new();
    // The file of each global id: the last written when there are several.
    let mut by_gid: HashMap<u32, &RankFile> = HashMap::new();
    for f in files {
        let w = |f: &RankFile| f.wall_ns(f.header.written_ns);
        match by_gid.get(&f.header.gid) {
            Some(old) => {
                notes.push(format!(
                    "several files of global id {} ({} and {}): the one written last is read",
                    f.header.gid,
                    old.path.display(),
                    f.path.display()
                ));
                if w(f) > w(old) {
                    by_gid.insert(f.header.gid, f);
                }
            }
            None => {
                by_gid.insert(f.header.gid, f);
            }
        }
    }
    let jobs: BTreeSet<&str> = by_gid.values().map(|f| f.header.job.as_str()).collect();
    if jobs.len() > 1 {
        notes.push(format!(
            "the files are of {} jobs ({}): they are lined up as one",
            jobs.len(),
            jobs.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
    // (kind, group) -> instance -> gid -> record.
    type Line<'a> = BTreeMap<u64, HashMap<u32, (&'a RankFile, &'a Record)>>;
    let mut lines: BTreeMap<(String, Vec<u32>), Line> = BTreeMap::new();
    // (gid, kind, group) -> the oldest instance the gid's ring still holds.
    let mut oldest: HashMap<(u32, &str, &[u32]), u64> = HashMap::new();
    for f in by_gid.values() {
        for r in &f.records {
            lines
                .entry((r.kind.clone(), r.group.clone()))
                .or_default()
                .entry(r.instance)
                .or_default()
                .insert(r.gid, (f, r));
            let o = oldest
                .entry((r.gid, r.kind.as_str(), r.group.as_slice()))
                .or_insert(r.instance);
            *o = (*o).min(r.instance);
        }
    }
    let mut findings = Vec::new();
    let mut collectives = 0;
    for ((kind, group), line) in &lines {
        for (&instance, recs) in line {
            collectives += 1;
            let mut ranks = Vec::new();
            let mut problem = false;
            let mut written = HashMap::new();
            for &g in group {
                let standing = match (recs.get(&g), by_gid.get(&g)) {
                    (Some((f, r)), _) => {
                        written.insert(g, f.wall_ns(f.header.written_ns));
                        match r.state {
                            State::Done => Standing::Done,
                            State::Scheduled => Standing::Scheduled(f.wall_ns(r.scheduled_ns)),
                            State::Running => {
                                Standing::Running(f.wall_ns(r.started_ns.unwrap_or(r.scheduled_ns)))
                            }
                            State::Failed => Standing::Failed(
                                r.error.clone().unwrap_or_else(|| "an error".into()),
                                f.wall_ns(r.ended_ns.unwrap_or(r.scheduled_ns)),
                            ),
                        }
                    }
                    (None, None) if !complete => continue,
                    (None, None) => Standing::NoFile,
                    (None, Some(f)) => {
                        let o = oldest.get(&(g, kind.as_str(), group.as_slice()));
                        if f.wrapped() && o.is_none_or(|o| instance < *o) {
                            // Forgotten by its ring: unknown, not absent.
                            continue;
                        }
                        Standing::NeverEntered
                    }
                };
                problem |= standing != Standing::Done;
                ranks.push((g, standing));
            }
            if !problem {
                continue;
            }
            let first_wall_ns = recs
                .values()
                .map(|(f, r)| f.wall_ns(r.scheduled_ns))
                .min()
                .unwrap_or(0);
            let what = recs
                .values()
                .next()
                .map(|(_, r)| what(r))
                .unwrap_or_default();
            findings.push(Finding {
                kind: kind.clone(),
                group: group.clone(),
                instance,
                what,
                ranks,
                first_wall_ns,
                written,
            });
        }
    }
    findings.sort_by_key(|f| (f.first_wall_ns, f.instance));
    Analysis {
        ranks: by_gid.len(),
        groups: lines.len(),
        collectives,
        findings,
        notes,
    }
}

/// A wall-clock time (ns since the Unix epoch) as `2026-12-07 20:43:40.123 UTC`.
pub fn wall(ns: u64) -> String {
    let secs = ns / 1_000_000_000;
    let ms = (ns / 1_000_000) % 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date of a day count (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}.{ms:03} UTC",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

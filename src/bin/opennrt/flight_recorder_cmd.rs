//! `opennrt flight-recorder DIR`: read the rank files a job's flight recorder wrote
//! (`OPENNRT_FLIGHT_RECORDER_DIR`, docs/hangs.md) and name the first collective some rank
//! never entered or never finished.

use crate::args::{self, Opt, Spec};
use opennrt::runtime::flight_recorder::{self as fr, analyse};

/// The options of `opennrt flight-recorder`: the parser and `--help` both read this table.
const SPEC: Spec = Spec {
    cmd: "flight-recorder",
    usage: "usage: opennrt flight-recorder DIR [--all] [--last N]

Line up the flight-recorder files of a job (DIR/flight-<job>-rank<gid>.json, written on a
timeout, a hang and at nrt_close when OPENNRT_FLIGHT_RECORDER_DIR=DIR) by group and
instance, and name the first collective that some rank never entered or never finished.",
    opts: &[
        Opt::switch(
            "--all",
            "list every collective not finished on every rank, not only the first",
        ),
        Opt::val(
            "--last",
            "N",
            "also print the last N records of every rank (default 0)",
        ),
    ],
    notes: "Ranks are named by global id, as the files are. Exit status: 0 when every rank
finished every collective of its groups, 1 when a collective was not (the culprit is
named), 2 on bad arguments or unreadable files.",
};

fn fail(msg: &str) -> ! {
    args::fail(SPEC.cmd, msg)
}

/// `opennrt flight-recorder`: exit 0 if consistent, 1 with a finding, 2 on bad input.
pub(crate) fn flight_recorder_cmd(a: &[String]) -> i32 {
    if Spec::wants_help(a) {
        println!("{}", SPEC.help());
        return 0;
    }
    // The one positional argument is DIR (the first word that is neither an option nor the
    // value of one); everything else is an option of the table.
    let mut dirs = Vec::new();
    let mut opts = Vec::new();
    let mut it = a.iter();
    while let Some(x) = it.next() {
        match SPEC.find(x) {
            Some(o) => {
                opts.push(x.clone());
                if o.value.is_some() {
                    if let Some(v) = it.next() {
                        opts.push(v.clone());
                    }
                }
            }
            None if x.starts_with('-') => opts.push(x.clone()),
            None => dirs.push(x.clone()),
        }
    }
    let (mut all, mut last) = (false, 0usize);
    for (k, v) in SPEC.parse(&opts) {
        match k {
            "--all" => all = true,
            "--last" => last = args::num(SPEC.cmd, "--last", &v),
            other => args::unhandled(SPEC.cmd, other),
        }
    }
    if dirs.len() > 1 {
        fail(&format!("unexpected argument {:?}: one DIR only", dirs[1]));
    }
    let dir = dirs
        .into_iter()
        .next()
        .unwrap_or_else(|| fail(&format!("DIR is required\n{}", SPEC.help())));
    let files = match fr::read_dir(std::path::Path::new(&dir)) {
        Ok(f) => f,
        Err(e) => fail(e.message()),
    };
    let a = analyse(&files);
    println!(
        "{} rank file(s) in {dir}: {}",
        files.len(),
        files
            .iter()
            .map(|f| format!(
                "rank {} ({} of {} recorded, {})",
                f.header.gid,
                f.records.len(),
                f.header.recorded,
                f.header.reason
            ))
            .collect::<Vec<_>>()
            .join("; ")
    );
    for l in a.lines() {
        println!("{l}");
    }
    if all {
        for f in a.findings.iter().skip(1) {
            println!("{}", f.line());
        }
    }
    if last > 0 {
        for f in &files {
            let skip = f.records.len().saturating_sub(last);
            println!(
                "rank {} ({}), last {}:",
                f.header.gid,
                f.path.display(),
                f.records.len() - skip
            );
            for r in &f.records[skip..] {
                println!("  {}", analyse::describe_record(f, r));
            }
        }
    }
    match a.consistent() {
        true => 0,
        false => 1,
    }
}

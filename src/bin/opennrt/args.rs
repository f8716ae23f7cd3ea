//! Shared argument handling for the subcommands (no parser dependency: the grammar is flat
//! `--flag value` pairs, plus the few short aliases users type from other tools, such as
//! nccl-tests' `-b/-e/-f`).
//!
//! Each subcommand describes its options once, in an [`Opt`] table ([`Spec`]): the parser
//! accepts exactly the table's names and aliases, and `--help` prints the same table, so the
//! help cannot promise an option the parser refuses or hide one it takes (tests/cli_help.rs
//! checks every subcommand's `--help` against the binary's parser).

use opennrt::isa::enums::Dtype;
use opennrt::lower::request::{CollectiveOp, ReduceOp, REDUCE_NAMES};

/// The help text of `--op`, shared by the subcommands that lower or run one collective.
pub const OP_HELP: &str =
    "all_reduce | all_gather | reduce_scatter | all_to_all | all_to_all_v | permute |
             permute_implicit | permute_reduce_implicit | send_recv | barrier";

/// One option of a subcommand: its canonical `--name`, the short or alternative spellings that
/// mean the same, the metavariable of its value (`None`: a switch), and its help text (further
/// lines start with `\n` and are indented under the first).
#[derive(Debug, Clone, Copy)]
pub struct Opt {
    /// The canonical spelling (`--minbytes`); [`Spec::parse`] returns this one.
    pub name: &'static str,
    /// Other spellings (`-b`).
    pub aliases: &'static [&'static str],
    /// The value's metavariable (`A`), or `None` for a switch.
    pub value: Option<&'static str>,
    /// What it does.
    pub help: &'static str,
}

impl Opt {
    /// An option taking a value.
    pub const fn val(name: &'static str, value: &'static str, help: &'static str) -> Opt {
        Opt {
            name,
            aliases: &[],
            value: Some(value),
            help,
        }
    }
    /// A switch.
    pub const fn switch(name: &'static str, help: &'static str) -> Opt {
        Opt {
            name,
            aliases: &[],
            value: None,
            help,
        }
    }
    /// The same option with other spellings.
    pub const fn alias(self, aliases: &'static [&'static str]) -> Opt {
        Opt { aliases, ..self }
    }
    fn spells(&self, s: &str) -> bool {
        self.name == s || self.aliases.contains(&s)
    }
}

/// A subcommand's grammar: the usage line, its options and a closing note.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    /// The command as errors name it (`perf`, `neff build`).
    pub cmd: &'static str,
    /// The first line(s) of the help (`usage: opennrt perf --op <op> --ranks N [options]`).
    pub usage: &'static str,
    /// The options.
    pub opts: &'static [Opt],
    /// Text after the option list (may be empty).
    pub notes: &'static str,
}

/// Width of the option column of the help.
const COL: usize = 21;

impl Spec {
    /// The help text, generated from the table.
    pub fn help(&self) -> String {
        let mut s = format!("{}\n\n", self.usage);
        for o in self.opts {
            let mut left = o.name.to_string();
            for a in o.aliases {
                left.push_str(", ");
                left.push_str(a);
            }
            if let Some(v) = o.value {
                left.push(' ');
                left.push_str(v);
            }
            let mut lines = o.help.split('\n');
            let first = lines.next().unwrap_or("");
            if left.len() + 3 > COL {
                s.push_str(&format!("  {left}\n  {:COL$}{first}\n", ""));
            } else {
                s.push_str(&format!("  {left:<COL$}{first}\n"));
            }
            for l in lines {
                s.push_str(&format!("  {:COL$}{}\n", "", l.trim_start()));
            }
        }
        s.push_str(&format!("  {:<COL$}{}\n", "-h, --help", "print this help"));
        if !self.notes.is_empty() {
            s.push('\n');
            s.push_str(self.notes);
            s.push('\n');
        }
        s.trim_end().to_string()
    }

    /// True when the arguments ask for the help (`-h` or `--help` anywhere).
    pub fn wants_help(args: &[String]) -> bool {
        args.iter().any(|x| x == "-h" || x == "--help")
    }

    /// The option `s` spells, if any.
    pub fn find(&self, s: &str) -> Option<&'static Opt> {
        self.opts.iter().find(|o| o.spells(s))
    }

    /// Parse `args` into `(canonical name, value)` pairs (an empty value for a switch). An
    /// argument that is no option of the table, or an option missing its value, exits 2 with a
    /// message naming it. Callers match on [`Opt::name`] only.
    pub fn parse(&self, args: &[String]) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let Some(o) = self.find(a) else {
                if a.starts_with('-') {
                    fail(self.cmd, &format!("unknown option {a}\n{}", self.help()));
                }
                fail(self.cmd, &format!("unexpected argument {a:?}"));
            };
            match o.value {
                None => out.push((o.name, String::new())),
                Some(meta) => {
                    let v = it
                        .next()
                        .unwrap_or_else(|| fail(self.cmd, &format!("{a} needs a value {meta}")));
                    out.push((o.name, v.clone()));
                }
            }
        }
        out
    }
}

/// The arm of an option that is in a table but not handled: a programming error, caught by
/// tests/cli_help.rs running every option.
pub fn unhandled(cmd: &str, name: &str) -> ! {
    panic!("opennrt {cmd}: option {name} is in the table but has no arm")
}

/// Print `msg` for `cmd` and exit 2 (bad usage).
pub fn fail(cmd: &str, msg: &str) -> ! {
    eprintln!("opennrt {cmd}: {msg}");
    std::process::exit(2)
}

/// Parse an operation name ([`CollectiveOp::parse`]).
pub fn op(cmd: &str, s: &str) -> CollectiveOp {
    CollectiveOp::parse(s).unwrap_or_else(|| {
        let names: Vec<_> = CollectiveOp::listed().map(CollectiveOp::name).collect();
        fail(
            cmd,
            &format!("unknown --op {s:?}; use one of {}", names.join(", ")),
        )
    })
}

/// Parse a dtype name ([`Dtype::from_short_name`]: the short names and the short FP8 aliases
/// `fp8_e3`, `fp8_e4`, `fp8_e5`).
pub fn dtype(cmd: &str, s: &str) -> Dtype {
    Dtype::from_short_name(s).unwrap_or_else(|| {
        let names: Vec<_> = Dtype::short_names().collect();
        fail(
            cmd,
            &format!("unknown --dtype {s:?}; use one of {}", names.join(", ")),
        )
    })
}

/// Parse a reduce-op name.
pub fn redop(cmd: &str, s: &str) -> ReduceOp {
    ReduceOp::parse(s).unwrap_or_else(|| {
        let names: Vec<_> = REDUCE_NAMES.iter().map(|r| r.name).collect();
        fail(
            cmd,
            &format!("unknown --redop {s:?}; use one of {}", names.join(", ")),
        )
    })
}

/// Parse a number.
pub fn num<T: std::str::FromStr>(cmd: &str, flag: &str, s: &str) -> T {
    let t = s.trim();
    let parsed = if let Some(sh) = t.strip_prefix("1<<") {
        sh.parse::<u32>()
            .ok()
            .and_then(|k| 1u64.checked_shl(k))
            .and_then(|v| v.to_string().parse().ok())
    } else {
        t.parse().ok()
    };
    parsed.unwrap_or_else(|| fail(cmd, &format!("{flag} {s:?} is not a valid number")))
}

//! The readable text form of the program IR (issue item 6): one line per step, grouped by rank,
//! cc_op entry and channel. `opennrt lower` prints it; the JSON form is `Program::to_json`.

use std::fmt;

use crate::lower::program::{Buf, Loc, Program, RankProgram, Sem, Step, Transfer};

fn buf(b: Buf) -> &'static str {
    match b {
        Buf::Input => "in",
        Buf::Output => "out",
        Buf::Scratch => "scr",
    }
}

struct L(Loc);
impl fmt::Display for L {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "r{}.{}[{}]", self.0.rank, buf(self.0.buf), self.0.offset)
    }
}

struct S(Sem);
impl fmt::Display for S {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "r{}.sp{}.sem{}", self.0.rank, self.0.topsp, self.0.id)
    }
}

impl fmt::Display for Transfer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Transfer::Copy { src, dst, len } => write!(f, "copy {len} {} -> {}", L(*src), L(*dst)),
            Transfer::Reduce {
                op,
                shape,
                srcs,
                dst,
                len,
            } => {
                write!(f, "reduce {op:?}/{shape:?} {len} ")?;
                for (i, s) in srcs.iter().enumerate() {
                    write!(f, "{}{}", if i > 0 { "+" } else { "" }, L(*s))?;
                }
                write!(f, " -> {}", L(*dst))
            }
        }
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} {:?} chunk {}",
            self.primitive, self.half, self.chunk
        )?;
        if let Some(t) = self.event_type {
            write!(f, " event {t}")?;
        }
        if let Some(w) = &self.wait {
            write!(f, " | wait {}>={} -{}", S(w.sem), w.target, w.consume)?;
        }
        for t in &self.transfers {
            write!(f, " | {t}")?;
        }
        for s in &self.signals {
            write!(f, " | {:?} {}+={}", s.kind, S(s.sem), s.amount)?;
        }
        Ok(())
    }
}

impl fmt::Display for RankProgram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "rank {} (scratch {} elements)",
            self.rank, self.scratch_elems
        )?;
        for (i, e) in self.entries.iter().enumerate() {
            writeln!(
                f,
                "  entry {i}: {} [{}{}] ranks {:?}",
                e.leg,
                e.algorithm.name(),
                e.mesh_sub_type
                    .map(|s| format!(", mesh sub-type {s}"))
                    .unwrap_or_default(),
                e.ranks
            )?;
            for t in &e.tapes {
                writeln!(
                    f,
                    "    channel {} (TOP_SP {}): {} steps",
                    t.channel,
                    t.topsp,
                    t.steps.len()
                )?;
                for (k, s) in t.steps.iter().enumerate() {
                    writeln!(f, "      {k:4} {s}")?;
                }
            }
        }
        Ok(())
    }
}

impl fmt::Display for Program {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = &self.request;
        writeln!(
            f,
            "{:?} of {} x {} ({} ranks{}{})",
            r.op,
            r.count,
            r.dtype.name(),
            r.rank_n(),
            r.reduce.map(|o| format!(", {o:?}")).unwrap_or_default(),
            if r.in_place { ", in place" } else { "" }
        )?;
        for line in &self.selection {
            writeln!(f, "  selection: {line}")?;
        }
        for rp in &self.ranks {
            write!(f, "{rp}")?;
        }
        Ok(())
    }
}

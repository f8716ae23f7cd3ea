//! What the verifier reports when a program is wrong: the exact place (rank, entry, channel,
//! step, element range) and what was expected against what was found.

use std::fmt;

use crate::lower::program::{Buf, Loc, Primitive, Sem};
use crate::lower::verify::expect::Expect;
use crate::lower::verify::symbolic::Term;

/// A step of the program, named for people.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct At {
    /// Rank (index in the group).
    pub rank: u32,
    /// cc_op entry index.
    pub entry: usize,
    /// The entry's leg name.
    pub leg: String,
    /// The tape's channel.
    pub channel: u8,
    /// Step index in the tape.
    pub step: usize,
    /// The step's primitive.
    pub primitive: Primitive,
    /// The step's chunk (a rank id).
    pub chunk: u32,
}

impl fmt::Display for At {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "rank {} entry {} ({}) channel {} step {} {} chunk {}",
            self.rank,
            self.entry,
            self.leg,
            self.channel,
            self.step,
            primitive_name(self.primitive),
            self.chunk
        )
    }
}

/// The vocabulary spelling of a primitive (docs/contract/lowering.md §4.0).
pub fn primitive_name(p: Primitive) -> &'static str {
    match p {
        Primitive::Send => "send",
        Primitive::PostRecv => "post_recv",
        Primitive::DirectRecv => "direct_recv",
        Primitive::DirectRecvSend => "direct_recv_send",
        Primitive::DirectCopySend => "direct_copy_send",
        Primitive::DirectCopy => "direct_copy",
        Primitive::DirectPull => "direct_pull",
        Primitive::RecvReduceSend => "recv_reduce_send",
        Primitive::RecvReduceCopy => "recv_reduce_copy",
        Primitive::RecvReduceCopySend => "recv_reduce_copy_send",
        Primitive::RecvReduceWrite => "recv_reduce_write",
        Primitive::DirectReduceSendKangaring => "direct_reduce_send_kangaring",
        Primitive::DirectReduceSendPermute => "direct_reduce_send_permute",
        Primitive::MeshEvent => "mesh_event",
    }
}

/// `(rank r, topsp t, id i)`.
pub(crate) struct SemName(pub Sem);

impl fmt::Display for SemName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "semaphore (rank {}, topsp {}, id {})",
            self.0.rank, self.0.topsp, self.0.id
        )
    }
}

fn buf_name(b: Buf) -> &'static str {
    match b {
        Buf::Input => "input",
        Buf::Output => "output",
        Buf::Scratch => "scratch",
    }
}

/// One tape that cannot make progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    /// The step it is stuck on.
    pub at: At,
    /// The semaphore it waits on.
    pub sem: Sem,
    /// Its value.
    pub value: u64,
    /// The threshold.
    pub target: u32,
    /// Steps (on any rank) that signal this semaphore and have not run yet; empty: no one
    /// will ever signal it.
    pub pending: Vec<At>,
}

impl fmt::Display for Blocked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} waits on {} = {}, target {}; ",
            self.at,
            SemName(self.sem),
            self.value,
            self.target
        )?;
        if self.pending.is_empty() {
            return f.write_str("no one signals it");
        }
        let mut ranks: Vec<u32> = self.pending.iter().map(|a| a.rank).collect();
        ranks.dedup();
        write!(
            f,
            "signals not yet run on rank(s) {ranks:?}, first at {}",
            self.pending[0]
        )
    }
}

/// What is wrong with a run of output elements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutputProblem {
    /// A rank's input appears more than once.
    Duplicate {
        /// The source rank.
        source: u32,
        /// How many times.
        times: u32,
    },
    /// A rank's input is missing.
    Missing {
        /// The source rank.
        source: u32,
    },
    /// A rank's input is there, but from the wrong element (a wrong chunk or offset).
    WrongElement {
        /// The source rank.
        source: u32,
        /// Input element expected at the first element of the range.
        expected: i64,
        /// Input element found there.
        found: i64,
    },
    /// A rank's input that does not belong there.
    Extra {
        /// The source rank.
        source: u32,
    },
    /// Never written.
    NeverWritten,
    /// Written, though the op leaves it untouched.
    ShouldBeUntouched,
}

/// A run of output elements that does not hold what the op requires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// Whose output.
    pub rank: u32,
    /// First element.
    pub start: u64,
    /// End of the run.
    pub end: u64,
    /// What is wrong.
    pub problem: OutputProblem,
    /// What the request requires.
    pub expected: Expect,
    /// What the program left there (`None`: never written).
    pub found: Option<Term>,
    /// The step that last wrote the first element (`None`: never written, or the input).
    pub writer: Option<At>,
}

/// A verification failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VerifyError {
    /// The request itself cannot be checked (e.g. permute pairs naming a rank twice).
    InvalidRequest(String),
    /// The program's shape does not match the request (rank count, rank ids).
    Shape(String),
    /// A location outside its buffer.
    OutOfBounds {
        /// The step.
        at: At,
        /// The location.
        loc: Loc,
        /// Elements accessed.
        len: u64,
        /// Elements in that buffer.
        buffer_elems: u64,
    },
    /// A wait on a semaphore of another rank (waits are always on one's own, program.rs).
    ForeignWait {
        /// The step.
        at: At,
        /// The semaphore.
        sem: Sem,
    },
    /// A semaphore of a rank that does not exist.
    NoSuchRank {
        /// The step.
        at: At,
        /// The semaphore.
        sem: Sem,
    },
    /// A reduce that breaks the rules (source count, op, a reduce in a copy-only op).
    BadReduce {
        /// The step.
        at: At,
        /// What is wrong.
        problem: String,
    },
    /// A transfer whose source and destination partly overlap.
    Overlap {
        /// The step.
        at: At,
        /// Which transfer of the step.
        transfer: usize,
    },
    /// A read of elements never written.
    UninitRead {
        /// The step.
        at: At,
        /// Whose memory.
        rank: u32,
        /// Which buffer.
        buf: Buf,
        /// First element never written.
        start: u64,
        /// End of the run never written.
        end: u64,
    },
    /// A wait consuming more than the semaphore holds.
    Underflow {
        /// The step.
        at: At,
        /// The semaphore.
        sem: Sem,
        /// Its value.
        value: u64,
        /// What the wait subtracts.
        consume: u32,
    },
    /// Every unfinished tape is blocked.
    Deadlock {
        /// Each blocked tape.
        blocked: Vec<Blocked>,
    },
    /// A semaphore that does not end at 0.
    Leftover {
        /// The semaphore.
        sem: Sem,
        /// Its final value.
        value: u64,
        /// Whether any step waits on it.
        waited: bool,
        /// The steps that signal it.
        signallers: Vec<At>,
    },
    /// Output elements that do not hold what the op requires (boxed: it is large).
    WrongOutput(Box<Mismatch>),
    /// A rank completes before some rank has started (barrier causality).
    Barrier {
        /// The rank that completes too early.
        rank: u32,
        /// Ranks whose start it does not depend on.
        missing: Vec<u32>,
    },
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VerifyError::InvalidRequest(m) => write!(f, "cannot check the request: {m}"),
            VerifyError::Shape(m) => write!(f, "program shape: {m}"),
            VerifyError::OutOfBounds {
                at,
                loc,
                len,
                buffer_elems,
            } => write!(
                f,
                "{at}: out of bounds: {} of rank {} elements [{}, {}) but the buffer has {buffer_elems}",
                buf_name(loc.buf),
                loc.rank,
                loc.offset,
                loc.offset.saturating_add(*len)
            ),
            VerifyError::ForeignWait { at, sem } => write!(
                f,
                "{at}: waits on {} which belongs to rank {}, not to the waiting rank",
                SemName(*sem),
                sem.rank
            ),
            VerifyError::NoSuchRank { at, sem } => {
                write!(f, "{at}: {} names a rank outside the group", SemName(*sem))
            }
            VerifyError::BadReduce { at, problem } => write!(f, "{at}: {problem}"),
            VerifyError::Overlap { at, transfer } => write!(
                f,
                "{at}: transfer {transfer} has a source that partly overlaps its destination"
            ),
            VerifyError::UninitRead {
                at,
                rank,
                buf,
                start,
                end,
            } => write!(
                f,
                "{at}: reads uninitialised {} of rank {rank} at elements [{start}, {end})",
                buf_name(*buf)
            ),
            VerifyError::Underflow {
                at,
                sem,
                value,
                consume,
            } => write!(
                f,
                "{at}: {} holds {value} but the wait consumes {consume}",
                SemName(*sem)
            ),
            VerifyError::Deadlock { blocked } => {
                write!(f, "deadlock: {} tape(s) blocked", blocked.len())?;
                const SHOWN: usize = 16;
                for b in blocked.iter().take(SHOWN) {
                    write!(f, "\n  {b}")?;
                }
                if blocked.len() > SHOWN {
                    write!(f, "\n  ... and {} more", blocked.len() - SHOWN)?;
                }
                Ok(())
            }
            VerifyError::Leftover {
                sem,
                value,
                waited,
                signallers,
            } => {
                write!(
                    f,
                    "{} ends at {value}, not 0: {value} leftover increment(s) never consumed",
                    SemName(*sem)
                )?;
                if !waited {
                    f.write_str(" (no step waits on it)")?;
                }
                if let Some(s) = signallers.first() {
                    write!(f, "; signalled by {} step(s), first at {s}", signallers.len())?;
                }
                Ok(())
            }
            VerifyError::WrongOutput(m) => {
                let Mismatch {
                    rank,
                    start,
                    end,
                    problem,
                    expected,
                    found,
                    writer,
                } = &**m;
                let r = *rank;
                match problem {
                    OutputProblem::Duplicate { source, times: 2 } => write!(
                        f,
                        "rank {source} counted twice in output of rank {r} at elements [{start}, {end})"
                    )?,
                    OutputProblem::Duplicate { source, times } => write!(
                        f,
                        "rank {source} counted {times} times in output of rank {r} at elements [{start}, {end})"
                    )?,
                    OutputProblem::Missing { source } => write!(
                        f,
                        "contribution of rank {source} missing in output of rank {r} at elements [{start}, {end})"
                    )?,
                    OutputProblem::WrongElement {
                        source,
                        expected,
                        found,
                    } => write!(
                        f,
                        "output of rank {r} at elements [{start}, {end}) holds in{source}[{found}..] where in{source}[{expected}..] belongs (wrong chunk or offset)"
                    )?,
                    OutputProblem::Extra { source } => write!(
                        f,
                        "output of rank {r} at elements [{start}, {end}) holds input of rank {source}, which does not belong there"
                    )?,
                    OutputProblem::NeverWritten => write!(
                        f,
                        "output of rank {r} at elements [{start}, {end}) was never written"
                    )?,
                    OutputProblem::ShouldBeUntouched => write!(
                        f,
                        "output of rank {r} at elements [{start}, {end}) was written but the op leaves it untouched"
                    )?,
                }
                write!(f, "; expected {expected}, found ")?;
                match found {
                    Some(t) => write!(f, "{t} (at element {start}: {})", t.describe_at(*start))?,
                    None => f.write_str("never written")?,
                }
                if let Some(w) = writer {
                    write!(f, "; last written by {w}")?;
                }
                Ok(())
            }
            VerifyError::Barrier { rank, missing } => write!(
                f,
                "barrier: rank {rank} completes without depending on the start of rank(s) {missing:?}"
            ),
        }
    }
}

impl std::error::Error for VerifyError {}

impl From<VerifyError> for crate::error::Error {
    fn from(e: VerifyError) -> Self {
        crate::error::Error::invalid(format!("verify: {e}"))
    }
}

//! What every output element must hold, derived from the REQUEST alone (op, count, group size,
//! in-place flag, permute pairs), never from the program (docs/design.md §2.2,
//! docs/contract/lowering.md §4).
//!
//! With `c = count`, N ranks and element index `e < c` (deltas in [`Term`] are relative to the
//! output element index):
//! * all-reduce: `out_r[e] = ⊕_q in_q[e]`, each q once;
//! * reduce-scatter: `out_r[e] = ⊕_q in_q[r·c + e]`;
//! * all-gather: `out_r[k·c + e] = in_k[e]`;
//! * all-to-all: `out_r[i·c + e] = in_i[r·c + e]` (§4.12);
//! * permute with pairs `(s → t)` (also send/recv when pairs are given): `out_t = in_s`; a rank
//!   that is no one's target is untouched;
//! * implicit permute: `out_r = in_pred(r)` in group order (§4.9);
//! * implicit permute-reduce: `out_r[e] = in_pred(r)[e] ⊕ in_pred(r)[c + e]`, each once. The
//!   lowering's input buffer is `[src0 | src1]` (2·c elements, see
//!   `CollectiveRequest::input_elems`), so src1 is `in[c + e]`;
//! * all-to-all-v with a resolved table ([`A2avTable`]): for every peer q and `e <
//!   send_counts[q][r]`, `out_r[recv_displs[r][q] + e] = in_q[send_displs[q][r] + e]`; every
//!   other output element is untouched (see below: in place that means it still holds the rank's
//!   own input, which is what the mesh composer leaves there since it stages its sends in
//!   scratch). A table that is not rank_n × rank_n, or whose receive windows leave the output or
//!   overlap, is an invalid request;
//! * all-to-all-v without a table: counts and displacements are not in the request, so its
//!   output is **not checked** (only the structural and scheduling rules apply; the pipeline
//!   refuses to lower such a request anyway);
//! * send/recv without pairs: not checked (the peer is not in the request);
//! * barrier: no data (its causality rule is checked by the scheduler).
//!
//! "Untouched" means: out of place, never written; in place, still the rank's own input (where
//! the input reaches; past it, never written).

use std::fmt;

use crate::lower::program::Buf;
use crate::lower::request::{A2avTable, CollectiveOp, CollectiveRequest};
use crate::lower::verify::error::{At, Mismatch, OutputProblem, VerifyError};
use crate::lower::verify::symbolic::{Contrib, Memory, Piece, Term, Writer};

/// What a run of output elements must hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    /// Exactly this term.
    Exactly(Term),
    /// These contributions, each exactly once; anything else is not checked.
    Contains(Term),
    /// Never written.
    NotWritten,
    /// Not checked.
    Unchecked,
}

impl Expect {
    /// The same expectation for elements addressed `by` further on (terms' deltas move by
    /// `by`, see [`Term::shifted`]).
    pub fn shifted(&self, by: i64) -> Expect {
        match self {
            Expect::Exactly(t) => Expect::Exactly(t.shifted(by)),
            Expect::Contains(t) => Expect::Contains(t.shifted(by)),
            other => other.clone(),
        }
    }

    /// Readable form at output element `elem` (e.g. `in0[5] ⊕ in1[5]`).
    pub fn describe_at(&self, elem: u64) -> String {
        match self {
            Expect::Exactly(t) => t.describe_at(elem),
            Expect::Contains(t) => format!("at least {}", t.describe_at(elem)),
            Expect::NotWritten => "untouched".into(),
            Expect::Unchecked => "anything (not checked)".into(),
        }
    }
}

impl fmt::Display for Expect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expect::Exactly(t) => write!(f, "{t}"),
            Expect::Contains(t) => write!(f, "at least {t}"),
            Expect::NotWritten => f.write_str("untouched"),
            Expect::Unchecked => f.write_str("anything (not checked)"),
        }
    }
}

/// The expectation for output elements `[start, end)` of one rank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpectedSeg {
    /// First element.
    pub start: u64,
    /// End.
    pub end: u64,
    /// What they must hold.
    pub expect: Expect,
}

fn seg(start: u64, end: u64, expect: Expect) -> ExpectedSeg {
    ExpectedSeg { start, end, expect }
}

/// Where rank `rank`'s input and output start inside its buffers (elements): `(0, 0)` except in
/// place, where input and output are one storage and OpenNRT follows NCCL's convention —
/// reduce-scatter leaves rank r's result at `r·count` of the shared storage, all-gather reads
/// rank r's input from `r·count` (the composers place data the same way, see
/// `lower::pipeline::flat_leg`).
pub fn in_place_bases(req: &CollectiveRequest, rank: u32) -> (u64, u64) {
    use crate::lower::request::CollectiveOp;
    if !req.in_place {
        return (0, 0);
    }
    let own = u64::from(rank) * req.count;
    match req.op {
        CollectiveOp::ReduceScatter => (0, own),
        CollectiveOp::AllGather => (own, 0),
        _ => (0, 0),
    }
}

/// Output of `rank` as the op leaves it untouched.
fn untouched(req: &CollectiveRequest, rank: u32) -> Vec<ExpectedSeg> {
    untouched_range(req, rank, 0, req.output_elems())
}

/// Output elements `[start, end)` of `rank` left untouched: never written, or in place still the
/// rank's own input where the input reaches (empty runs are dropped by the caller).
fn untouched_range(req: &CollectiveRequest, rank: u32, start: u64, end: u64) -> Vec<ExpectedSeg> {
    if req.in_place {
        let kept = req.input_elems().clamp(start, end);
        vec![
            seg(start, kept, Expect::Exactly(Term::single(rank, 0))),
            seg(kept, end, Expect::NotWritten),
        ]
    } else {
        vec![seg(start, end, Expect::NotWritten)]
    }
}

/// All-to-all-v output of `rank` from a resolved table (see the module doc): one exact run per
/// peer that sends something, untouched gaps between them.
fn a2av_output(
    req: &CollectiveRequest,
    t: &A2avTable,
    rank: u32,
) -> Result<Vec<ExpectedSeg>, VerifyError> {
    let n = req.rank_n() as usize;
    let square = |m: &[Vec<u64>]| m.len() == n && m.iter().all(|row| row.len() == n);
    if !(square(&t.send_counts) && square(&t.send_displs) && square(&t.recv_displs)) {
        return Err(VerifyError::InvalidRequest(format!(
            "all-to-all-v table is not {n} × {n} (send counts, send and receive displacements)"
        )));
    }
    let out = req.output_elems();
    let r = rank as usize;
    let mut windows: Vec<(u64, u64, u32, i64)> = Vec::with_capacity(n);
    for q in 0..n {
        let (len, from, at) = (
            t.send_counts[q][r],
            t.send_displs[q][r],
            t.recv_displs[r][q],
        );
        if len == 0 {
            continue;
        }
        let end = at.checked_add(len).filter(|&e| e <= out).ok_or_else(|| {
            VerifyError::InvalidRequest(format!(
                "all-to-all-v: rank {rank} receives {len} elements from rank {q} at {at}, past \
                 its output of {out} elements"
            ))
        })?;
        windows.push((at, end, q as u32, from as i64 - at as i64));
    }
    windows.sort_unstable();
    let mut v = Vec::with_capacity(2 * n + 2);
    let mut pos = 0;
    for (at, end, q, delta) in windows {
        if at < pos {
            return Err(VerifyError::InvalidRequest(format!(
                "all-to-all-v: on rank {rank} the receive window of rank {q} (from {at}) \
                 overlaps the one before it (up to {pos})"
            )));
        }
        v.extend(untouched_range(req, rank, pos, at));
        v.push(seg(at, end, Expect::Exactly(Term::single(q, delta))));
        pos = end;
    }
    v.extend(untouched_range(req, rank, pos, out));
    Ok(v)
}

/// The source of `rank` under explicit pairs, after checking that no rank is a target twice.
fn pair_source(req: &CollectiveRequest, rank: u32) -> Result<Option<u32>, VerifyError> {
    let n = req.rank_n();
    let mut src = None;
    for &(s, t) in &req.pairs {
        if s >= n || t >= n {
            return Err(VerifyError::InvalidRequest(format!(
                "permute pair ({s} → {t}) names a rank outside the group of {n}"
            )));
        }
        if t == rank {
            if src.is_some() {
                return Err(VerifyError::InvalidRequest(format!(
                    "rank {t} is the target of more than one permute pair"
                )));
            }
            src = Some(s);
        }
    }
    Ok(src)
}

/// Every output element of `rank`, as `[start, end)` runs with what they must hold (derived
/// from the request only).
pub fn expected_output(
    req: &CollectiveRequest,
    rank: u32,
) -> Result<Vec<ExpectedSeg>, VerifyError> {
    let n = req.rank_n();
    if rank >= n {
        return Err(VerifyError::InvalidRequest(format!(
            "rank {rank} is not in the group of {n}"
        )));
    }
    let c = req.count;
    let out = req.output_elems();
    let pred = (rank + n - 1) % n;
    // ⊕ over every rank q of in_q[x + delta].
    let everyone = |delta: i64| {
        Term::from_contribs(
            (0..n)
                .map(|q| Contrib {
                    rank: q,
                    delta,
                    mult: 1,
                })
                .collect(),
        )
    };
    let mut v = match req.op {
        CollectiveOp::AllReduce => vec![seg(0, out, Expect::Exactly(everyone(0)))],
        CollectiveOp::ReduceScatter => {
            let delta = (u64::from(rank) * c) as i64;
            vec![seg(0, out, Expect::Exactly(everyone(delta)))]
        }
        CollectiveOp::AllGather => (0..n)
            .map(|k| {
                let base = u64::from(k) * c;
                seg(
                    base,
                    base + c,
                    Expect::Exactly(Term::single(k, -(base as i64))),
                )
            })
            .collect(),
        CollectiveOp::AllToAll => (0..n)
            .map(|i| {
                let base = u64::from(i) * c;
                let delta = (i64::from(rank) - i64::from(i)) * c as i64;
                seg(base, base + c, Expect::Exactly(Term::single(i, delta)))
            })
            .collect(),
        CollectiveOp::AllToAllV => match req.a2av.as_ref().and_then(|m| m.table.as_ref()) {
            Some(t) => a2av_output(req, t, rank)?,
            None => vec![seg(0, out, Expect::Unchecked)],
        },
        CollectiveOp::Send | CollectiveOp::Recv if req.pairs.is_empty() => {
            vec![seg(0, out, Expect::Unchecked)]
        }
        CollectiveOp::Permute | CollectiveOp::Send | CollectiveOp::Recv => {
            match pair_source(req, rank)? {
                Some(s) => vec![seg(0, out, Expect::Exactly(Term::single(s, 0)))],
                None => untouched(req, rank),
            }
        }
        CollectiveOp::PermuteImplicit => {
            vec![seg(0, out, Expect::Exactly(Term::single(pred, 0)))]
        }
        CollectiveOp::PermuteReduceImplicit => {
            // src0 ⊕ src1 of the predecessor; src1 is `c` elements after src0.
            let both = Term::from_contribs(
                [0, c as i64]
                    .into_iter()
                    .map(|delta| Contrib {
                        rank: pred,
                        delta,
                        mult: 1,
                    })
                    .collect(),
            );
            vec![seg(0, out, Expect::Exactly(both))]
        }
        CollectiveOp::Barrier => Vec::new(),
    };
    v.retain(|s| s.end > s.start);
    Ok(v)
}

/// What output element `elem` of `rank` must hold (`None`: past the output).
pub fn expected_term(
    req: &CollectiveRequest,
    rank: u32,
    elem: u64,
) -> Result<Option<Expect>, VerifyError> {
    Ok(expected_output(req, rank)?
        .into_iter()
        .find(|s| (s.start..s.end).contains(&elem))
        .map(|s| s.expect))
}

/// Judge what a run holds against what it must hold.
fn judge(expect: &Expect, found: Option<&Term>, start: u64) -> Option<OutputProblem> {
    let (want, exact) = match expect {
        Expect::Unchecked => return None,
        Expect::NotWritten => return found.map(|_| OutputProblem::ShouldBeUntouched),
        Expect::Exactly(t) => (t, true),
        Expect::Contains(t) => (t, false),
    };
    let Some(found) = found else {
        return Some(OutputProblem::NeverWritten);
    };
    // Both lists are sorted by (rank, delta): look pairs up by binary search.
    let f = &found.contribs;
    let has = |v: &[Contrib], rank: u32, delta: i64| {
        v.binary_search_by_key(&(rank, delta), |c| (c.rank, c.delta))
            .ok()
            .map(|i| v[i])
    };
    let find = |rank: u32, delta: i64| has(f, rank, delta);
    for c in f {
        let wanted = has(&want.contribs, c.rank, c.delta).is_some();
        if c.mult > 1 && (exact || wanted) {
            return Some(OutputProblem::Duplicate {
                source: c.rank,
                times: c.mult,
            });
        }
    }
    for w in &want.contribs {
        if find(w.rank, w.delta).is_none() {
            let el = |d: i64| start as i64 + d;
            return Some(match f.iter().find(|c| c.rank == w.rank) {
                Some(c) => OutputProblem::WrongElement {
                    source: w.rank,
                    expected: el(w.delta),
                    found: el(c.delta),
                },
                None => OutputProblem::Missing { source: w.rank },
            });
        }
    }
    if exact {
        if let Some(c) = f
            .iter()
            .find(|c| has(&want.contribs, c.rank, c.delta).is_none())
        {
            return Some(OutputProblem::Extra { source: c.rank });
        }
    }
    None
}

/// Check every output element of `rank` against the request; `at_of` names a writer.
pub(crate) fn check_output(
    mem: &Memory,
    req: &CollectiveRequest,
    rank: u32,
    at_of: &dyn Fn(Writer) -> Option<At>,
) -> Result<(), VerifyError> {
    let st = mem.store(rank, Buf::Output);
    let (_, base) = in_place_bases(req, rank);
    let mut pieces: Vec<Piece> = Vec::new();
    for exp in expected_output(req, rank)? {
        if exp.expect == Expect::Unchecked {
            continue;
        }
        // Expectations are output-relative; the storage holds the output at `base`.
        let exp = ExpectedSeg {
            start: exp.start + base,
            end: exp.end + base,
            expect: exp.expect.shifted(-(base as i64)),
        };
        pieces.clear();
        mem.pieces(st, exp.start, exp.end, &mut pieces);
        for (i, p) in pieces.iter().enumerate() {
            if let (Expect::Exactly(t), Some(s)) = (&exp.expect, &p.seg) {
                // Fast path: the segment holds exactly the expected term.
                let same = s.val.len() == t.contribs.len()
                    && s.val.iter().zip(&t.contribs).all(|(a, b)| {
                        a.rank == b.rank && a.delta + s.shift == b.delta && a.mult == 1
                    });
                if same {
                    continue;
                }
            }
            let found = p.seg.as_ref().map(|s| s.term());
            let Some(problem) = judge(&exp.expect, found.as_ref(), p.start) else {
                continue;
            };
            // Report the longest run with the same content.
            let mut end = p.end;
            for q in &pieces[i + 1..] {
                if q.seg.as_ref().map(|s| s.term()) != found {
                    break;
                }
                end = q.end;
            }
            return Err(VerifyError::WrongOutput(Box::new(Mismatch {
                rank,
                start: p.start,
                end,
                problem,
                expected: exp.expect.clone(),
                found,
                writer: p.seg.as_ref().and_then(|s| at_of(s.writer)),
            })));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;

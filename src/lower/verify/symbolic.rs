//! Symbolic memory: what every element of every rank's buffers holds, as a formula over the
//! ranks' inputs (docs/design.md §2.2).
//!
//! Nothing is tracked per element. Each storage (a rank's input, output or scratch; input and
//! output are one storage when the request is in place) is an interval map whose segments carry
//! a [`Term`] that is affine across the segment: element `x` of a segment holds
//! `⊕ over its contributions (q, δ, m) of m × input_q[x + δ + shift]`. A copy moves segments and
//! only changes `shift` (the term itself is shared through an `Rc`, so copies are O(1) per
//! segment); a reduce builds the multiset union of its sources, split at every source boundary.
//! Elements no segment covers are uninitialised; reading them is an error.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::rc::Rc;

use crate::lower::program::Buf;

/// One contribution to an element: `mult × input_rank[x + delta]` for element `x`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Contrib {
    /// Whose input.
    pub rank: u32,
    /// Offset from the element index to the input element it reads.
    pub delta: i64,
    /// How many times it is counted (1 in every correct result).
    pub mult: u32,
}

/// A multiset of contributions, sorted by `(rank, delta)`, each pair at most once (repeats are
/// folded into `mult`). Element `x` of a segment with this term holds the reduction of
/// `input_rank[x + delta]` over its contributions.
#[derive(Debug, Clone, PartialEq, Eq, Default, Hash)]
pub struct Term {
    /// The contributions, sorted by `(rank, delta)`.
    pub contribs: Vec<Contrib>,
}

impl Term {
    /// `input_rank[x + delta]`, once.
    pub fn single(rank: u32, delta: i64) -> Term {
        Term {
            contribs: vec![Contrib {
                rank,
                delta,
                mult: 1,
            }],
        }
    }

    /// Build from any list of contributions (sorted and folded here).
    pub fn from_contribs(mut v: Vec<Contrib>) -> Term {
        normalize(&mut v);
        Term { contribs: v }
    }

    /// The term with every delta moved by `by`.
    pub fn shifted(&self, by: i64) -> Term {
        Term {
            contribs: self
                .contribs
                .iter()
                .map(|c| Contrib {
                    delta: c.delta + by,
                    ..*c
                })
                .collect(),
        }
    }

    /// What element `elem` holds, concretely: `(rank, input element, multiplicity)`.
    pub fn at(&self, elem: u64) -> Vec<(u32, i64, u32)> {
        self.contribs
            .iter()
            .map(|c| (c.rank, elem as i64 + c.delta, c.mult))
            .collect()
    }

    /// What element `elem` holds, readably: `in0[5] ⊕ in1[5] ⊕ 2×in2[5]`.
    pub fn describe_at(&self, elem: u64) -> String {
        if self.contribs.is_empty() {
            return "nothing".into();
        }
        let parts: Vec<String> = self
            .at(elem)
            .into_iter()
            .map(|(q, i, m)| {
                if m == 1 {
                    format!("in{q}[{i}]")
                } else {
                    format!("{m}×in{q}[{i}]")
                }
            })
            .collect();
        parts.join(" ⊕ ")
    }
}

impl fmt::Display for Term {
    /// Symbolic form over the element index `e`: `in0[e] ⊕ in1[e+4]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.contribs.is_empty() {
            return f.write_str("nothing");
        }
        for (i, c) in self.contribs.iter().enumerate() {
            if i > 0 {
                f.write_str(" ⊕ ")?;
            }
            if c.mult != 1 {
                write!(f, "{}×", c.mult)?;
            }
            match c.delta {
                0 => write!(f, "in{}[e]", c.rank)?,
                d if d > 0 => write!(f, "in{}[e+{d}]", c.rank)?,
                d => write!(f, "in{}[e{d}]", c.rank)?,
            }
        }
        Ok(())
    }
}

/// Sort by `(rank, delta)` and fold repeats into `mult`.
fn normalize(v: &mut Vec<Contrib>) {
    v.sort_unstable_by_key(|c| (c.rank, c.delta));
    let mut out = 0;
    for i in 0..v.len() {
        if out > 0 && v[out - 1].rank == v[i].rank && v[out - 1].delta == v[i].delta {
            v[out - 1].mult += v[i].mult;
        } else {
            v[out] = v[i];
            out += 1;
        }
    }
    v.truncate(out);
}

/// Which step last wrote a segment (indices into the program), or the initial input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Writer {
    pub rank: u32,
    pub entry: u32,
    pub tape: u32,
    pub step: u32,
}

impl Writer {
    /// The caller's input, present before any step runs.
    pub const INITIAL: Writer = Writer {
        rank: u32::MAX,
        entry: 0,
        tape: 0,
        step: 0,
    };
}

/// A segment `[start, end)` of a storage: element `x` holds `val` with every delta + `shift`.
#[derive(Debug, Clone)]
pub(crate) struct Seg {
    pub end: u64,
    pub val: Rc<[Contrib]>,
    pub shift: i64,
    pub writer: Writer,
}

impl Seg {
    /// The term of this segment with the shift applied.
    pub fn term(&self) -> Term {
        Term {
            contribs: self
                .val
                .iter()
                .map(|c| Contrib {
                    delta: c.delta + self.shift,
                    ..*c
                })
                .collect(),
        }
    }
}

/// A piece of a read: `[start, end)` in the storage read, and what it holds (`None`: a gap).
#[derive(Debug, Clone)]
pub(crate) struct Piece {
    pub start: u64,
    pub end: u64,
    pub seg: Option<Seg>,
}

/// A source piece relative to a reduce: `[start, end)` of the transfer, the term, and the
/// shift re-based on the destination.
type Rel = (u64, u64, Rc<[Contrib]>, i64);

/// Elements `[start, end)` of a storage that were never written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Gap {
    pub start: u64,
    pub end: u64,
}

/// Every rank's storages.
#[derive(Debug)]
pub(crate) struct Memory {
    stores: Vec<BTreeMap<u64, Seg>>,
    in_place: bool,
    bufs: ReduceBufs,
    /// Reduce results by their sources' (term address, shift), sorted.
    memo: HashMap<Vec<(usize, i64)>, Rc<[Contrib]>>,
    /// Every term a memo key names, so no address is reused while the memo lives.
    keep: Vec<Rc<[Contrib]>>,
}

impl Memory {
    /// `n` ranks, each input holding `input_q[x]` at `x` for `x < input_elems`.
    #[cfg(test)]
    pub fn new(n: u32, input_elems: u64, in_place: bool) -> Memory {
        Self::with_input_bases(n, input_elems, in_place, |_| 0)
    }

    /// As [`Memory::new`], with rank q's input starting at element `input_base(q)` of its
    /// storage (in-place all-gather keeps rank q's input at `q·count` of the shared storage).
    pub fn with_input_bases(
        n: u32,
        input_elems: u64,
        in_place: bool,
        input_base: impl Fn(u32) -> u64,
    ) -> Memory {
        let mut stores = vec![BTreeMap::new(); n as usize * 3];
        if input_elems > 0 {
            for q in 0..n {
                let base = input_base(q);
                let val: Rc<[Contrib]> = Rc::from(vec![Contrib {
                    rank: q,
                    delta: -(base as i64),
                    mult: 1,
                }]);
                stores[q as usize * 3].insert(
                    base,
                    Seg {
                        end: base + input_elems,
                        val,
                        shift: 0,
                        writer: Writer::INITIAL,
                    },
                );
            }
        }
        Memory {
            stores,
            in_place,
            bufs: ReduceBufs::default(),
            memo: HashMap::new(),
            keep: Vec::new(),
        }
    }

    /// The storage behind `(rank, buf)`: input and output share one when in place.
    pub fn store(&self, rank: u32, buf: Buf) -> usize {
        let k = match buf {
            Buf::Input => 0,
            Buf::Output if self.in_place => 0,
            Buf::Output => 1,
            Buf::Scratch => 2,
        };
        rank as usize * 3 + k
    }

    /// The pieces covering `[start, end)`, gaps included, appended to `out`.
    pub fn pieces(&self, st: usize, start: u64, end: u64, out: &mut Vec<Piece>) {
        let map = &self.stores[st];
        let mut pos = start;
        let first = map
            .range(..=start)
            .next_back()
            .filter(|(_, s)| s.end > start)
            .map_or(start, |(k, _)| *k);
        for (&k, s) in map.range(first..end) {
            if k > pos {
                out.push(Piece {
                    start: pos,
                    end: k,
                    seg: None,
                });
                pos = k;
            }
            let e = s.end.min(end);
            out.push(Piece {
                start: pos,
                end: e,
                seg: Some(s.clone()),
            });
            pos = e;
        }
        if pos < end {
            out.push(Piece {
                start: pos,
                end,
                seg: None,
            });
        }
    }

    /// The segments covering `[start, end)`, which must all be initialised.
    pub fn read(&self, st: usize, start: u64, end: u64, out: &mut Vec<Piece>) -> Result<(), Gap> {
        let from = out.len();
        self.pieces(st, start, end, out);
        if let Some(p) = out[from..].iter().find(|p| p.seg.is_none()) {
            return Err(Gap {
                start: p.start,
                end: p.end,
            });
        }
        Ok(())
    }

    /// Forget whatever `[start, end)` held, splitting the segments that straddle its ends.
    fn clear(&mut self, st: usize, start: u64, end: u64) {
        let map = &mut self.stores[st];
        if let Some((&k, s)) = map.range(..start).next_back() {
            if s.end > start {
                let s = s.clone();
                if s.end > end {
                    map.insert(end, s.clone());
                }
                if let Some(left) = map.get_mut(&k) {
                    left.end = start;
                }
            }
        }
        while let Some((&k, _)) = map.range(start..end).next() {
            if let Some(s) = map.remove(&k) {
                if s.end > end {
                    map.insert(end, s);
                }
            }
        }
    }

    /// Write `seg` over `[start, seg.end)`, merging it with a neighbour that holds the same
    /// term with the same shift (the halves and loops of one chunk then stay one segment).
    /// A merged segment keeps the writer of its first element.
    pub fn write(&mut self, st: usize, start: u64, mut seg: Seg) {
        if seg.end <= start {
            return;
        }
        self.clear(st, start, seg.end);
        let map = &mut self.stores[st];
        let same = |a: &Seg, b: &Seg| Rc::ptr_eq(&a.val, &b.val) && a.shift == b.shift;
        if let Some(right) = map.get(&seg.end) {
            if same(right, &seg) {
                let key = seg.end;
                seg.end = right.end;
                map.remove(&key);
            }
        }
        if let Some((_, left)) = map.range_mut(..start).next_back() {
            if left.end == start && same(left, &seg) {
                left.end = seg.end;
                return;
            }
        }
        map.insert(start, seg);
    }

    /// Copy `len` elements from `(sst, so)` to `(dst, do)` (memmove semantics: read first).
    pub fn copy(
        &mut self,
        (sst, so): (usize, u64),
        (dst, d_o): (usize, u64),
        len: u64,
        writer: Writer,
        scratch: &mut Vec<Piece>,
    ) -> Result<(), Gap> {
        scratch.clear();
        self.read(sst, so, so + len, scratch)?;
        let by = so as i64 - d_o as i64;
        for p in scratch.drain(..) {
            if let Some(s) = p.seg {
                let seg = Seg {
                    end: p.end - so + d_o,
                    val: s.val,
                    shift: s.shift + by,
                    writer,
                };
                self.write(dst, p.start - so + d_o, seg);
            }
        }
        Ok(())
    }

    /// `dst[i] = ⊕_j src_j[i]` for `i < len`: the multiset union of the sources, split at
    /// every boundary of every source. On a gap, returns the index of the source and the gap.
    pub fn reduce(
        &mut self,
        srcs: &[(usize, u64)],
        dst: (usize, u64),
        len: u64,
        writer: Writer,
    ) -> Result<(), (usize, Gap)> {
        if len == 0 {
            return Ok(());
        }
        let mut b = std::mem::take(&mut self.bufs);
        let r = self.reduce_with(&mut b, srcs, dst, len, writer);
        self.bufs = b;
        r
    }

    fn reduce_with(
        &mut self,
        b: &mut ReduceBufs,
        srcs: &[(usize, u64)],
        (dst, d_o): (usize, u64),
        len: u64,
        writer: Writer,
    ) -> Result<(), (usize, Gap)> {
        // Per source, its pieces relative to the transfer, with the shift re-based on dst.
        b.rel.clear();
        b.spans.clear();
        b.bounds.clear();
        b.bounds.extend([0, len]);
        for (j, &(st, so)) in srcs.iter().enumerate() {
            b.pieces.clear();
            self.read(st, so, so + len, &mut b.pieces)
                .map_err(|g| (j, g))?;
            let by = so as i64 - d_o as i64;
            let from = b.rel.len();
            for p in b.pieces.drain(..) {
                if let Some(s) = p.seg {
                    b.bounds.push(p.start - so);
                    b.rel.push((p.start - so, p.end - so, s.val, s.shift + by));
                }
            }
            b.spans.push((from, b.rel.len()));
        }
        b.bounds.sort_unstable();
        b.bounds.dedup();
        b.idx.clear();
        b.idx.extend(b.spans.iter().map(|s| s.0));
        b.out.clear();
        for w in b.bounds.windows(2) {
            let (a, e) = (w[0], w[1]);
            // The covering piece of every source; the union only depends on their terms and
            // shifts, so equal combinations (every loop of a ring) share one result.
            b.key.clear();
            for (j, &(_, to)) in b.spans.iter().enumerate() {
                while b.idx[j] + 1 < to && b.rel[b.idx[j]].1 <= a {
                    b.idx[j] += 1;
                }
                let (_, _, val, shift) = &b.rel[b.idx[j]];
                b.key
                    .push((Rc::as_ptr(val) as *const Contrib as usize, *shift));
            }
            b.key.sort_unstable();
            let val = match self.memo.get(b.key.as_slice()) {
                Some(v) => v.clone(),
                None => {
                    b.acc.clear();
                    for j in 0..b.spans.len() {
                        let (_, _, val, shift) = &b.rel[b.idx[j]];
                        b.acc.extend(val.iter().map(|c| Contrib {
                            delta: c.delta + shift,
                            ..*c
                        }));
                        // The memo key names this term by address: keep it alive.
                        self.keep.push(val.clone());
                    }
                    normalize(&mut b.acc);
                    let v: Rc<[Contrib]> = Rc::from(b.acc.as_slice());
                    self.memo.insert(b.key.clone(), v.clone());
                    v
                }
            };
            b.out.push((
                d_o + a,
                Seg {
                    end: d_o + e,
                    val,
                    shift: 0,
                    writer,
                },
            ));
        }
        for (start, seg) in b.out.drain(..) {
            self.write(dst, start, seg);
        }
        Ok(())
    }
}

/// Reused buffers of [`Memory::reduce`].
#[derive(Debug, Default)]
struct ReduceBufs {
    pieces: Vec<Piece>,
    rel: Vec<Rel>,
    spans: Vec<(usize, usize)>,
    bounds: Vec<u64>,
    idx: Vec<usize>,
    out: Vec<(u64, Seg)>,
    acc: Vec<Contrib>,
    key: Vec<(usize, i64)>,
}

#[cfg(test)]
mod tests;

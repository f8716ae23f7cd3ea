//! `-c/--check`: the input data and the golden result, both computed by nccom-test itself.
//!
//! * **Data.** Every element of every rank's input is a pure function of (seed, rank, index)
//!   (a SplitMix64 hash), so any process can regenerate any rank's input, and the golden result
//!   of element `j` on rank `r` needs no stored inputs: the worker that owns rank `r` computes
//!   it from the hash while it compares. `random`: floats take one of the 17 quarter steps in
//!   [−2, 2] (exact in every float type, FP8 included, so all the error left is the
//!   reduction's own rounding), integers a uniform bit pattern; `all_ones`: every element is 1
//!   (an all-reduce then expects the rank count). Without `--check` the input is zero-filled.
//! * **Golden.** Computed on the CPU from the definitions, independently of the lowering:
//!   all-reduce `out_r = Σ_k in_k`; all-gather `out_r[block k] = in_k`; reduce-scatter
//!   `out_r = Σ_k in_k[block r]`; all-to-all `out_r[block k] = in_k[block r]`; sendrecv
//!   `out_r = in_(r−1 mod g)`; permute `out_t = in_s` for each pair `s → t` (a rank that is no
//!   pair's target is not checked); all-to-all-v and all-gather-v from their table:
//!   `out_r[recv_displs[r][q] + e] = in_q[send_displs[q][r] + e]` for `e < send_counts[q][r]`,
//!   and 0 where no window lands (the output starts zeroed and the op leaves it). Ranks are
//!   positions in the rank's replica subgroup.
//! * **Comparison.** Float reductions are summed in f64 and accepted within `g · eps · Σ|x|`
//!   (the bound for `g` partial sums rounded in any order, see [`crate::dtypes::eps`]);
//!   everything else must match bit for bit: copies, and integer reductions, which run widened
//!   to fp32 ([`crate::widen`]): their random data stays small enough for every partial sum to
//!   be exact in fp32, and the golden sum is the exact integer sum saturated to the type. A
//!   NaN never matches.
//! * The cross-rank identity check of all-reduce and all-gather compares the ranks' output
//!   [`digest`]s in the parent.

use opennrt::isa::enums::Dtype;

use crate::dtypes;
use crate::ops::{Op, Sizes};
use crate::widen;

/// The data of `--check`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Random values (the default).
    Random,
    /// Every element 1.
    AllOnes,
}

impl Mode {
    /// The mode of a `--check` word.
    pub fn parse(w: &str) -> Option<Mode> {
        match w.to_ascii_lowercase().as_str() {
            "random" => Some(Mode::Random),
            "all_ones" | "all-ones" => Some(Mode::AllOnes),
            _ => None,
        }
    }

    /// The word (the worker's job).
    pub fn name(self) -> &'static str {
        match self {
            Mode::Random => "random",
            Mode::AllOnes => "all_ones",
        }
    }
}

/// SplitMix64's finaliser: a well-mixed 64-bit hash of `x`.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The quarter steps −2 … 2 that random float data takes.
const STEPS: usize = 17;

/// Every rank's input: a pure function of the seed, the rank and the element index.
#[derive(Debug, Clone)]
pub struct Data {
    /// Element type.
    pub dtype: Dtype,
    /// `None`: zero-filled (no `--check`).
    pub mode: Option<Mode>,
    /// The seed.
    pub seed: u64,
    /// The bits and value of each quarter step (float types).
    steps: [(u64, f64); STEPS],
    /// A widened integer reduction ([`crate::widen`]): random data within this magnitude,
    /// sums saturated to the type.
    widened: Option<i64>,
}

impl Data {
    /// The data of a run.
    pub fn new(dtype: Dtype, mode: Option<Mode>, seed: u64) -> Data {
        let mut steps = [(0u64, 0f64); STEPS];
        for (k, s) in steps.iter_mut().enumerate() {
            let v = (k as f64 - 8.0) / 4.0;
            *s = (dtypes::encode_float(dtype, v).unwrap_or(0), v);
        }
        Data {
            dtype,
            mode,
            seed,
            steps,
            widened: None,
        }
    }

    /// The data of an integer reduction widened to fp32 on groups of `g`: random values stay
    /// within [`crate::widen::check_limit`] (every partial sum exact in fp32), and a sum is
    /// the exact integer sum saturated to the type ([`crate::widen`]'s rule).
    pub fn widened(mut self, g: u32) -> Data {
        self.widened = Some(widen::check_limit(self.dtype, g));
        self
    }

    /// The hash of element `idx` of rank `rank`.
    fn hash(&self, rank: u32, idx: u64) -> u64 {
        mix(self.seed ^ mix((u64::from(rank).wrapping_add(1) << 40) ^ idx))
    }

    /// Element `idx` of rank `rank`'s input, as bits.
    pub fn bits(&self, rank: u32, idx: u64) -> u64 {
        let float = dtypes::is_float(self.dtype);
        match self.mode {
            None => 0,
            Some(Mode::AllOnes) if float => self.steps[12].0,
            Some(Mode::AllOnes) => 1,
            Some(Mode::Random) if float => {
                self.steps[(self.hash(rank, idx) % STEPS as u64) as usize].0
            }
            Some(Mode::Random) => match self.widened {
                Some(limit) => {
                    let (lo, hi) = widen::range(self.dtype);
                    let (lo, hi) = (lo.max(-limit), hi.min(limit));
                    let span = (hi - lo + 1) as u64;
                    widen::bits_of(self.dtype, lo + (self.hash(rank, idx) % span) as i64)
                }
                None => self.hash(rank, idx) & dtypes::mask(self.dtype),
            },
        }
    }

    /// Element `idx` of rank `rank`'s input, as a value (float types).
    pub fn value(&self, rank: u32, idx: u64) -> f64 {
        match self.mode {
            None => 0.0,
            Some(Mode::AllOnes) => 1.0,
            Some(Mode::Random) => self.steps[(self.hash(rank, idx) % STEPS as u64) as usize].1,
        }
    }

    /// Rank `rank`'s whole input of `elems` elements, little-endian.
    pub fn input(&self, rank: u32, elems: u64) -> Vec<u8> {
        let mut v = vec![0u8; (elems * dtypes::size(self.dtype)) as usize];
        if self.mode.is_some() {
            for i in 0..elems {
                dtypes::write(self.dtype, &mut v, i as usize, self.bits(rank, i));
            }
        }
        v
    }
}

/// Where one rank's result comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// The operation.
    pub op: Op,
    /// Elements per block.
    pub count: u64,
    /// The global ranks of the rank's replica subgroup, in group order.
    pub members: Vec<u32>,
    /// The rank's position in `members`.
    pub pos: usize,
    /// Permute and sendrecv: the global rank whose input this rank receives (`None`: no one's
    /// target, not checked).
    pub src: Option<u32>,
    /// The variable-size ops: the receive windows, sorted by start.
    pub windows: Vec<Window>,
}

/// One receive window of a variable-size op: `len` elements from `from`'s input at
/// `from_start`, landing at output element `start`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// First output element.
    pub start: u64,
    /// Elements.
    pub len: u64,
    /// The sending global rank.
    pub from: u32,
    /// First element of its input.
    pub from_start: u64,
}

/// What one output element must be.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Want {
    /// These bits.
    Exact(u64),
    /// This value, within `tol`.
    Near {
        /// The exact sum.
        value: f64,
        /// The accepted distance.
        tol: f64,
    },
    /// Not checked.
    Skip,
}

impl Layout {
    /// The layout of global rank `rank`: its subgroup in `groups` (every rank is in one), and
    /// for permute the source of the pair in `pairs` (global ranks) whose target it is.
    pub fn of(
        op: Op,
        count: u64,
        groups: &[Vec<u32>],
        pairs: &[(u32, u32)],
        rank: u32,
    ) -> Option<Layout> {
        let members = groups.iter().find(|g| g.contains(&rank))?.clone();
        let pos = members.iter().position(|&m| m == rank)?;
        let g = members.len();
        let src = match op {
            Op::Permute => pairs.iter().find(|p| p.1 == rank).map(|p| p.0),
            Op::SendRecv => Some(members[(pos + g - 1) % g]),
            _ => None,
        };
        Some(Layout {
            op,
            count,
            members,
            pos,
            src,
            windows: Vec::new(),
        })
    }

    /// The layout with a variable-size op's table (`rows[q]`: position q's `metadata0` rows):
    /// what each peer sends this rank lands at its receive displacement.
    pub fn with_table(mut self, rows: &[crate::metadata::Rows]) -> Layout {
        let p = self.pos;
        self.windows = (0..self.members.len().min(rows.len()))
            .map(|q| Window {
                start: rows[p][3].get(q).copied().unwrap_or(0),
                len: rows[q][0].get(p).copied().unwrap_or(0),
                from: self.members[q],
                from_start: rows[q][1].get(p).copied().unwrap_or(0),
            })
            .filter(|w| w.len > 0)
            .collect();
        self.windows.sort_by_key(|w| w.start);
        self
    }

    /// Elements of the rank's output.
    pub fn out_elems(&self) -> u64 {
        self.count * self.op.out_blocks(self.members.len() as u32)
    }

    /// The sum over the group of element `idx` of each member's input.
    fn sum(&self, d: &Data, idx: u64) -> Want {
        if dtypes::is_float(d.dtype) {
            let (mut s, mut a) = (0f64, 0f64);
            for &m in &self.members {
                let v = d.value(m, idx);
                s += v;
                a += v.abs();
            }
            let tol = self.members.len() as f64 * dtypes::eps(d.dtype) * a;
            Want::Near { value: s, tol }
        } else if d.widened.is_some() {
            let s: i64 = self
                .members
                .iter()
                .map(|&m| widen::value_of(d.dtype, d.bits(m, idx)))
                .sum();
            let (lo, hi) = widen::range(d.dtype);
            Want::Exact(widen::bits_of(d.dtype, s.clamp(lo, hi)))
        } else {
            let s = self
                .members
                .iter()
                .fold(0u64, |s, &m| s.wrapping_add(d.bits(m, idx)));
            Want::Exact(s & dtypes::mask(d.dtype))
        }
    }

    /// What output element `j` must be.
    pub fn want(&self, d: &Data, j: u64) -> Want {
        let c = self.count.max(1);
        let (block, e) = (j / c, j % c);
        let mine = self.pos as u64 * self.count;
        match self.op {
            Op::AllReduce => self.sum(d, j),
            Op::ReduceScatter => self.sum(d, mine + j),
            Op::AllGather => Want::Exact(d.bits(self.members[block as usize], e)),
            Op::AllToAll => Want::Exact(d.bits(self.members[block as usize], mine + e)),
            Op::AllToAllV | Op::AllGatherV => {
                let k = self.windows.partition_point(|w| w.start <= j);
                match k.checked_sub(1).map(|k| self.windows[k]) {
                    Some(w) if j < w.start + w.len => {
                        Want::Exact(d.bits(w.from, w.from_start + (j - w.start)))
                    }
                    _ => Want::Exact(0),
                }
            }
            Op::Permute | Op::SendRecv => match self.src {
                Some(s) => Want::Exact(d.bits(s, j)),
                None => Want::Skip,
            },
        }
    }
}

/// The first wrong element, readable.
fn mismatch(d: &Data, j: u64, got: u64, want: Want) -> String {
    let show = |b| dtypes::show(d.dtype, b);
    match want {
        Want::Exact(w) => format!(
            "element {j}: got {} ({got:#x}), expected {} ({w:#x})",
            show(got),
            show(w)
        ),
        Want::Near { value, tol } => format!(
            "element {j}: got {}, expected {value} (tolerance {tol:e})",
            show(got)
        ),
        Want::Skip => String::new(),
    }
}

/// One rank's verdict.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Verdict {
    /// Wrong elements.
    pub wrong: u64,
    /// The first, readable.
    pub first: Option<String>,
}

/// Compare a rank's output with its golden result.
pub fn compare(d: &Data, l: &Layout, out: &[u8]) -> Verdict {
    let mut v = Verdict::default();
    let n = (out.len() as u64 / dtypes::size(d.dtype)).min(l.out_elems());
    if n < l.out_elems() {
        v.wrong += l.out_elems() - n;
        v.first = Some(format!(
            "the output has {n} elements, {} expected",
            l.out_elems()
        ));
    }
    for j in 0..n {
        let got = dtypes::read(d.dtype, out, j as usize);
        let ok = match l.want(d, j) {
            Want::Skip => true,
            Want::Exact(w) => got == w,
            Want::Near { value, tol } => dtypes::decode_float(d.dtype, got)
                .is_some_and(|g| !g.is_nan() && (g - value).abs() <= tol),
        };
        if !ok {
            v.wrong += 1;
            if v.first.is_none() {
                v.first = Some(mismatch(d, j, got, l.want(d, j)));
            }
        }
    }
    v
}

/// The golden result of a rank as bytes (for the dump of a failed check): sums rounded to the
/// type, unchecked elements 0.
pub fn golden(d: &Data, l: &Layout) -> Vec<u8> {
    let n = l.out_elems();
    let mut v = vec![0u8; (n * dtypes::size(d.dtype)) as usize];
    for j in 0..n {
        let bits = match l.want(d, j) {
            Want::Exact(b) => b,
            Want::Near { value, .. } => dtypes::encode_float(d.dtype, value).unwrap_or(0),
            Want::Skip => 0,
        };
        dtypes::write(d.dtype, &mut v, j as usize, bits);
    }
    v
}

/// A digest of a rank's output (FNV-1a 64, hex), for the cross-rank identity check.
pub fn digest(bytes: &[u8]) -> String {
    let h = bytes.iter().fold(0xCBF2_9CE4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01B3)
    });
    format!("{h:016x}")
}

#[cfg(test)]
mod tests;

//! The case matrix shared by `opennrt verify` (the symbolic verifier over every case) and the
//! device correctness matrix (`tests/device_matrix.rs`, every case executed on the software
//! device): which operations exist, which machines every algorithm is tried on, how the
//! all-to-all-v and permute cases are parameterised, and which variants (in place, receive
//! layout) apply to an op. Keeping one enumeration means a new algorithm or topology reaches
//! both checks at once.
//!
//! A [`Case`] names one request on one machine with a forced algorithm; [`Case::lower`] runs the
//! selection and the composer and reports a forced algorithm the selector refuses as
//! [`Lowered::Illegal`] (that refusal must name `OPENNRT_CC_ALGO`; any other error is a real
//! failure). Every case uses the environment-free defaults ([`LowerConfig::for_world`]), so the
//! matrix does not depend on the caller's environment.

use crate::error::{Error, ErrorKind, Result};
use crate::isa::enums::Dtype;
use crate::lower::pipeline::{lower, LowerConfig};
use crate::lower::program::{Algorithm, Program};
use crate::lower::request::{A2avMeta, CollectiveOp, CollectiveRequest, ReduceOp};
use crate::lower::topology::Topology;

/// How the all-to-all-v cases of the matrix place what a rank receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum A2avRecv {
    /// Receive counts and displacements given (src1_bitmap 0x0F): the windows are packed from
    /// element 0 in descending peer order (so they are not in peer order), any tail untouched.
    Packed,
    /// Only send rows given (src1_bitmap 0x03): the block from peer p lands at `(output / N) · p` =
    /// `count · p` (docs/contract/isa.md §9 rule 9), gaps inside every block.
    Derived,
}

impl A2avRecv {
    /// Name in case lines.
    pub fn name(self) -> &'static str {
        match self {
            A2avRecv::Packed => "packed",
            A2avRecv::Derived => "derived",
        }
    }
}

/// The all-to-all-v metadata of an N-rank, `count`-element matrix case, resolved the way
/// `request_a2av` intends (every rank's metadata rows → [`A2avMeta::with_table`]). Input and
/// output hold `count · N` elements. Send counts are non-uniform, deterministic and never above
/// `count` (so every layout fits): `send_counts[r][p]` is 0 for `p = r + 1 (mod N)` when N > 1
/// (every rank has a zero and a gap), else `((r + 2p) · (count / 3 + 1) + count) mod (count + 1)`
/// (spread over 0..=count; e.g. count 7: 7, 2, 5, 0, 3, …). Send displacements are packed in
/// peer order.
pub fn a2av_meta(n: u32, count: u64, recv: A2avRecv) -> Result<A2avMeta> {
    let n64 = u64::from(n);
    let send = |r: u64, p: u64| {
        if n > 1 && p == (r + 1) % n64 {
            0
        } else {
            ((r + 2 * p) * (count / 3 + 1) + count) % (count + 1)
        }
    };
    let packed = |counts: &[u64], order: &mut dyn Iterator<Item = usize>| {
        let mut displs = vec![0; counts.len()];
        let mut at = 0;
        for p in order {
            displs[p] = at;
            at += counts[p];
        }
        displs
    };
    let rows: Vec<Vec<Vec<u64>>> = (0..n64)
        .map(|r| {
            let counts: Vec<u64> = (0..n64).map(|p| send(r, p)).collect();
            let displs = packed(&counts, &mut (0..n as usize));
            let mut rows = vec![counts, displs];
            if recv == A2avRecv::Packed {
                let rc: Vec<u64> = (0..n64).map(|p| send(p, r)).collect();
                let rd = packed(&rc, &mut (0..n as usize).rev());
                rows.extend([rc, rd]);
            }
            rows
        })
        .collect();
    let bitmap = match recv {
        A2avRecv::Packed => 0x0F,
        A2avRecv::Derived => 0x03,
    };
    A2avMeta::from_bitmap(bitmap, count * n64, count * n64, None)?.with_table(n, &rows)
}

/// The explicit permute pairs of the matrix: a rotation by two (`r → r + 2 mod N`), so every
/// rank is a source and a target once and, from 3 ranks on, nobody sends to its ring neighbour
/// (which the implicit permute already covers).
pub fn permute_pairs(n: u32) -> Vec<(u32, u32)> {
    (0..n).map(|r| (r, (r + 2) % n)).collect()
}

/// The machines every case of `n` ranks is tried on, so that every algorithm meets a topology
/// it is legal on (`None` = the default for the world: trn1.32xlarge, one node up to 32 ranks,
/// LNC 1, v2 silicon):
/// * `custom:Nx1x1` — one rank per node (single-cycle ring, inter RDH);
/// * `custom:(N/4)x1x4` for N ≥ 8 divisible by 4 — four ranks per node (hierarchical);
/// * `trn2.48xlarge` for 5 ≤ N ≤ 16 — one node of v3 silicon at LNC 2 (kangaring's LNC-2 gate,
///   `rank_n > 4`; and the v3 address map: 4 TOP_SPs per rank, two dies). Choice: not above
///   16 ranks, to keep `opennrt verify` short; the larger worlds are covered on the default
///   machine.
pub fn topologies(n: u32) -> Vec<Option<String>> {
    let mut t = vec![None, Some(format!("custom:{n}x1x1"))];
    if n >= 8 && n % 4 == 0 {
        t.push(Some(format!("custom:{}x1x4", n / 4)));
    }
    if (5..=16).contains(&n) {
        t.push(Some("trn2.48xlarge".to_string()));
    }
    t
}

/// The in-place variants an op is tried with: out of place and in place, except for the
/// barrier (no data). In place, reduce-scatter and all-gather follow NCCL's convention (rank
/// r's block at `r·count` of the shared storage, `lower::verify::expect::in_place_bases`).
pub fn in_place_variants(op: CollectiveOp) -> &'static [bool] {
    match op {
        CollectiveOp::Barrier => &[false],
        _ => &[false, true],
    }
}

/// The all-to-all-v receive layouts (`[None]` for every other op).
pub fn a2av_variants(op: CollectiveOp) -> &'static [Option<A2avRecv>] {
    if op == CollectiveOp::AllToAllV {
        &[Some(A2avRecv::Packed), Some(A2avRecv::Derived)]
    } else {
        &[None]
    }
}

/// Whether an op runs on `n` ranks with `count` elements: send/recv is a 2-rank collective; a
/// barrier moves no data (count 0 only).
pub fn applies(op: CollectiveOp, n: u32, count: u64) -> bool {
    match op {
        CollectiveOp::Send | CollectiveOp::Recv => n == 2,
        CollectiveOp::Barrier => count == 0,
        _ => true,
    }
}

/// One case: a request on a machine, with an algorithm forced (or automatic selection).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Case {
    /// The operation.
    pub op: CollectiveOp,
    /// The forced algorithm (`None`: the selector chooses).
    pub alg: Option<Algorithm>,
    /// Ranks (global device ids `0..n`).
    pub n: u32,
    /// Elements per rank block.
    pub count: u64,
    /// Input and output are one storage.
    pub in_place: bool,
    /// All-to-all-v receive layout (all-to-all-v only).
    pub a2av: Option<A2avRecv>,
    /// `OPENNRT_TOPOLOGY`-style machine (`None`: the default for the world).
    pub topology: Option<String>,
    /// Element type.
    pub dtype: Dtype,
    /// Reduce op (used by reducing ops only).
    pub reduce: ReduceOp,
}

/// What [`Case::lower`] gives.
#[derive(Debug)]
pub enum Lowered {
    /// The program, with the request and configuration it was lowered from.
    Program(Box<(CollectiveRequest, LowerConfig, Program)>),
    /// The selector refused the forced algorithm as illegal for the request or topology.
    Illegal(String),
}

impl Case {
    /// A case with BF16 data, ADD, out of place, the default topology and (for all-to-all-v)
    /// the packed receive layout.
    pub fn new(op: CollectiveOp, alg: Option<Algorithm>, n: u32, count: u64) -> Case {
        Case {
            op,
            alg,
            n,
            count,
            in_place: false,
            a2av: (op == CollectiveOp::AllToAllV).then_some(A2avRecv::Packed),
            topology: None,
            dtype: Dtype::Bf16,
            reduce: ReduceOp::Add,
        }
    }

    /// The request: group `0..n`, the matrix's permute pairs and all-to-all-v table.
    pub fn request(&self) -> Result<CollectiveRequest> {
        let mut req = CollectiveRequest::new(
            self.op,
            self.dtype,
            self.op.is_reducing().then_some(self.reduce),
            self.count,
            (0..self.n).collect(),
            0,
        );
        req.in_place = self.in_place;
        if self.op == CollectiveOp::Permute {
            req.pairs = permute_pairs(self.n);
        }
        if self.op == CollectiveOp::AllToAllV {
            let recv = self.a2av.unwrap_or(A2avRecv::Packed);
            let m = a2av_meta(self.n, self.count, recv)
                .map_err(|e| e.context("all-to-all-v metadata"))?;
            req.a2av = Some(m);
        }
        Ok(req)
    }

    /// The configuration: environment-free defaults for the world, the case's topology and
    /// forced algorithm.
    pub fn config(&self) -> Result<LowerConfig> {
        let mut cfg = LowerConfig::for_world(self.n)?;
        if let Some(t) = &self.topology {
            cfg.topology = Topology::parse(t, self.n).map_err(|e| e.context("topology"))?;
        }
        cfg.select.forced = self.alg;
        Ok(cfg)
    }

    /// Lower the case. A forced algorithm that the selection refuses
    /// (docs/contract/lowering.md §3.2; the error names `OPENNRT_CC_ALGO`) is [`Lowered::Illegal`];
    /// any other refusal is an error.
    pub fn lower(&self) -> Result<Lowered> {
        let req = self.request()?;
        let cfg = self.config()?;
        match lower(&req, &cfg) {
            Ok(p) => Ok(Lowered::Program(Box::new((req, cfg, p)))),
            Err(e) if is_illegal_force(&e) => Ok(Lowered::Illegal(e.message().to_string())),
            Err(e) => Err(e.context("lowering")),
        }
    }

    /// The case's line name: op, algorithm, ranks, count, variants, topology, and the data
    /// type and reduce op when `with_data` is set.
    pub fn name(&self, with_data: bool) -> String {
        let data = if with_data {
            let red = if self.op.is_reducing() {
                format!(" redop={:?}", self.reduce).to_lowercase()
            } else {
                String::new()
            };
            format!(" dtype={}{red}", self.dtype.short_name())
        } else {
            String::new()
        };
        format!(
            "{} alg={} ranks={} count={}{}{}{data} topology={}",
            self.op.name(),
            self.alg.map_or("auto", Algorithm::name),
            self.n,
            self.count,
            self.a2av
                .map(|l| format!(" recv={}", l.name()))
                .unwrap_or_default(),
            if self.in_place { " in-place" } else { "" },
            self.topology.as_deref().unwrap_or("default")
        )
    }
}

/// A lowering error that is the selector refusing a forced algorithm.
pub fn is_illegal_force(e: &Error) -> bool {
    e.kind() == ErrorKind::Invalid && e.message().contains("OPENNRT_CC_ALGO")
}

/// The structural matrix: every op × algorithm × ranks × count × variant (in place, receive
/// layout) × topology, in that nesting order, with BF16 / ADD data. Forced algorithms are not
/// filtered here ([`Case::lower`] tells the illegal ones).
pub fn matrix(ranks: &[u32], counts: &[u64]) -> Vec<Case> {
    let mut v = Vec::new();
    for op in CollectiveOp::listed() {
        for alg in Algorithm::ALL {
            for &n in ranks {
                for &count in counts {
                    if !applies(op, n, count) {
                        continue;
                    }
                    for &in_place in in_place_variants(op) {
                        for &a2av in a2av_variants(op) {
                            for topology in topologies(n) {
                                v.push(Case {
                                    in_place,
                                    a2av,
                                    topology,
                                    ..Case::new(op, Some(alg), n, count)
                                });
                            }
                        }
                    }
                }
            }
        }
    }
    v
}

#[cfg(test)]
mod tests;

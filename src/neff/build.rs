//! The NEFF writer: [`build`] makes the one-collective NEFF that `opennrt neff build` writes
//! (docs/neff.md §2), and [`container`] is the generic writer underneath it (docs/contract/abi.md
//! §7.2: the 1024-byte header table, then the tar payload, gzip-compressed for package 2).
//!
//! Why a writer at all: the vendor's compiler is not available to make test NEFFs, and a NEFF
//! every rank loads is what nccom-test-style runs need. [`container`] writes whatever it is given
//! (it is also how tests make damaged NEFFs), checking only what the format itself needs (a text
//! field that fits its bytes); [`build`] checks the spec, so what it writes is what the loader
//! reads (docs/neff.md §1).
//!
//! Everything is written in memory, deterministically: tar members have mtime 0, owner 0, mode
//! 0644 in the order given; the gzip header has no name and mtime 0. So the same spec gives the
//! same bytes, and the header's hash and uuid are functions of the content.

use std::io::Write;

use md5::{Digest, Md5};
use serde_json::{json, Map, Value};
use sha2::Sha256;

use crate::error::{Error, Result};
use crate::isa::enums::{
    AluOp, CcDim, CollectiveType, Dtype, Flag, InstrChaining, UpdateMode, WaitMode,
};
use crate::isa::instr::trigger::{
    Collective2, Collective2Ext, DmaConfigs, TriggerCollective, TriggerCollective2,
};
use crate::isa::instr::{Common, Events};
use crate::isa::layout::C8_RESERVED;
use crate::isa::operand::{Addr4, PseudoAddr8, Tensor2d};
use crate::lower::program::Algorithm;
use crate::lower::request::ReduceOp;
use crate::neff::header::layout::{
    Field, BUILD_VERSION, DATA_SIZE, FEATURE_BITS, HASH, HEADER_SIZE_FIELD, LNC_SIZE, NAME,
    NUM_TPB, PKG_VERSION, REQUESTED_TPB_COUNT, TPB_PER_NODE, UUID, VERSION_MAJOR, VERSION_MINOR,
};
use crate::neff::header::HEADER_SIZE;

/// Largest var `size` the loader accepts (docs/neff.md §1.2), the loader's own bound: [`build`]
/// refuses a spec whose buffers would be larger, rather than writing a NEFF nobody can load.
pub use crate::neff::graph::MAX_VAR_BYTES;
/// Most ranks [`build`] accepts: far above any real replica group, small enough that the
/// `replica_groups` list stays a few kilobytes.
pub const MAX_RANKS: u32 = 1024;
/// Most triggers in a row ([`BuildSpec::ops`]): 64 KiB of SP program.
pub const MAX_OPS: u32 = 1024;
/// Most replica groups in a NEFF (the vendor's 2.34 limit, docs/neff.md §1.2): the loader's bound.
pub use crate::neff::graph::MAX_REPLICA_GROUPS;

/// The collective a built NEFF runs: the `--op` of `opennrt neff build` (docs/neff.md §2 table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BuildOp {
    /// 0xC8 ALL_REDUCE: in = out = count.
    AllReduce,
    /// 0xC8 ALL_GATHER: in = count, out = count·R.
    AllGather,
    /// 0xC8 REDUCE_SCATTER: in = count·R, out = count.
    ReduceScatter,
    /// 0xC8 ALL_TO_ALL: in = out = count·R.
    AllToAll,
    /// 0xC8 PERMUTE with `src_target_pairs`: in = out = count.
    Permute,
    /// 0xC8 PERMUTE_IMPLICIT (each rank to its ring successor): in = out = count.
    SendRecv,
    /// 0xD9+0xDA ALL_TO_ALL_V with the `metadata0` table: in = out = count·R; the table (per
    /// peer counts and displacements) is an input, read at execution.
    AllToAllV,
    /// All-gather-v as an 0xD9+0xDA ALL_TO_ALL_V (the ISA has no gather-v word): in = count,
    /// out = count·R; each rank sends the same window of its input to every peer.
    AllGatherV,
}

/// The spellings of one [`BuildOp`]: one row of [`BUILD_OP_NAMES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuildOpNames {
    /// The op.
    pub op: BuildOp,
    /// The canonical name: `opennrt neff build --op`, the header's model name.
    pub name: &'static str,
    /// nccom-test's operation words, the vendor's: the one it prints first, then its short
    /// form, if any. `opennrt neff build --op` takes them too.
    pub nccom: &'static [&'static str],
}

/// Every built op's spellings, in declaration order (so `BUILD_OP_NAMES[op as usize].op == op`),
/// the order of [`BuildOp::ALL`]. The one op vocabulary of `opennrt neff build` and nccom-test.
#[rustfmt::skip]
pub const BUILD_OP_NAMES: [BuildOpNames; 8] = {
    const fn row(op: BuildOp, name: &'static str, nccom: &'static [&'static str]) -> BuildOpNames {
        BuildOpNames { op, name, nccom }
    }
    use BuildOp as B;
    [
        row(B::AllReduce, "all_reduce", &["all_reduce", "allr"]),
        row(B::AllGather, "all_gather", &["all_gather", "allg"]),
        row(B::ReduceScatter, "reduce_scatter", &["reduce_scatter", "redsct"]),
        row(B::AllToAll, "all_to_all", &["alltoall"]),
        row(B::Permute, "permute", &["permute"]),
        row(B::SendRecv, "send_recv", &["sendrecv"]),
        row(B::AllToAllV, "all_to_all_v", &["alltoallv"]),
        row(B::AllGatherV, "all_gather_v", &["all_gatherv", "allgv"]),
    ]
};

impl BuildOp {
    /// Every op, in the order of docs/neff.md §2.
    pub const ALL: [BuildOp; 8] = [
        BuildOp::AllReduce,
        BuildOp::AllGather,
        BuildOp::ReduceScatter,
        BuildOp::AllToAll,
        BuildOp::Permute,
        BuildOp::SendRecv,
        BuildOp::AllToAllV,
        BuildOp::AllGatherV,
    ];

    /// This op's row of [`BUILD_OP_NAMES`].
    pub fn names(self) -> &'static BuildOpNames {
        &BUILD_OP_NAMES[self as usize]
    }

    /// Parse a command-line spelling: the canonical name or an nccom-test word
    /// (`allr`, `allg`, `redsct`, `alltoall`, `sendrecv`, `alltoallv`, `all_gatherv`, `allgv`),
    /// case-insensitive, so the names
    /// users already type for nccom-test work here too.
    pub fn parse(s: &str) -> Option<BuildOp> {
        let s = s.trim();
        BUILD_OP_NAMES
            .iter()
            .find(|r| {
                std::iter::once(r.name)
                    .chain(r.nccom.iter().copied())
                    .any(|w| w.eq_ignore_ascii_case(s))
            })
            .map(|r| r.op)
    }

    /// The canonical name (what [`BuildOp::parse`] takes and the header's `name` carries).
    pub fn name(self) -> &'static str {
        self.names().name
    }

    /// The op of an nccom-test operation word, in any case: only the words nccom-test takes
    /// (`all_to_all`, a canonical name, is not one).
    pub fn from_nccom_word(w: &str) -> Option<BuildOp> {
        BUILD_OP_NAMES
            .iter()
            .find(|r| r.nccom.iter().any(|n| n.eq_ignore_ascii_case(w)))
            .map(|r| r.op)
    }

    /// The name nccom-test prints: its first word for the op (`all_reduce`, `alltoall`).
    pub fn nccom_name(self) -> &'static str {
        self.names().nccom[0]
    }

    /// The `ctype` the trigger carries (docs/neff.md §2 table).
    pub fn ctype(self) -> CollectiveType {
        match self {
            BuildOp::AllReduce => CollectiveType::AllReduce,
            BuildOp::AllGather => CollectiveType::AllGather,
            BuildOp::ReduceScatter => CollectiveType::ReduceScatter,
            BuildOp::AllToAll => CollectiveType::AllToAll,
            BuildOp::Permute => CollectiveType::Permute,
            BuildOp::SendRecv => CollectiveType::PermuteImplicit,
            BuildOp::AllToAllV | BuildOp::AllGatherV => CollectiveType::AllToAllV,
        }
    }

    /// The op is variable-size: an 0xD9+0xDA ALL_TO_ALL_V word with a `metadata0` input.
    pub fn is_variable(self) -> bool {
        matches!(self, BuildOp::AllToAllV | BuildOp::AllGatherV)
    }

    /// One rank's input holds a block per rank (reduce-scatter, the all-to-alls).
    pub fn input_spans_ranks(self) -> bool {
        match self {
            BuildOp::AllToAllV => true,
            BuildOp::AllGatherV => false,
            op => op.ctype().enc_op().input_spans_ranks(),
        }
    }

    /// One rank's output holds a block per rank (the all-gathers, the all-to-alls).
    pub fn output_spans_ranks(self) -> bool {
        match self {
            BuildOp::AllToAllV | BuildOp::AllGatherV => true,
            op => op.ctype().enc_op().output_spans_ranks(),
        }
    }

    /// The op combines the ranks' data with [`BuildSpec::redop`] (and so needs a dtype the CCE
    /// can reduce); the others are copies.
    pub fn is_reducing(self) -> bool {
        self.ctype().is_reducing()
    }
}

/// What one built NEFF holds (docs/neff.md §2). `count` is the per-rank block the trigger's
/// `num_elements` carries; the buffer sizes follow from it ([`BuildSpec::input_bytes`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildSpec {
    /// The collective.
    pub op: BuildOp,
    /// The world the NEFF is compiled for (`#rank_world_size`); with no `replica_groups`, the
    /// one group is `0..ranks`.
    pub ranks: u32,
    /// Elements of one rank's block (docs/neff.md §2 table).
    pub count: u64,
    /// The element type.
    pub dtype: Dtype,
    /// The reduction of a reducing op; copies carry BYPASS and ignore it.
    pub redop: ReduceOp,
    /// `opennrt_algorithm` (an `Algorithm::parse` spelling), if forced.
    pub algorithm: Option<String>,
    /// The logical core size (1 or 2): the header's `lnc_size` and the number of graphs.
    pub lnc: u32,
    /// Triggers in a row, 1..=[`MAX_OPS`].
    pub ops: u32,
    /// group_id → sub-groups → global device ids; `None` = `[[[0, 1, …, ranks−1]]]`.
    pub replica_groups: Option<Vec<Vec<Vec<u32>>>>,
    /// Permute pairs (global ids, group 0); `None` = each sub-group member to the next.
    pub pairs: Option<Vec<(u32, u32)>>,
}

impl BuildSpec {
    /// A spec with the defaults of `opennrt neff build`: ADD, no forced algorithm, LNC 1, one
    /// trigger, the one group of all ranks, ring-successor permute pairs.
    pub fn new(op: BuildOp, ranks: u32, count: u64, dtype: Dtype) -> Self {
        BuildSpec {
            op,
            ranks,
            count,
            dtype,
            redop: ReduceOp::Add,
            algorithm: None,
            lnc: 1,
            ops: 1,
            replica_groups: None,
            pairs: None,
        }
    }

    /// Ranks in the collective's group: the size of group 0's sub-groups (they must all be the
    /// same size, checked by [`build`]: one NEFF's buffers fit every rank), else `ranks`.
    pub fn group_size(&self) -> u32 {
        match &self.replica_groups {
            Some(g) => g
                .first()
                .and_then(|g| g.first())
                .map_or(0, |s| s.len() as u32),
            None => self.ranks,
        }
    }

    /// One rank's input bytes (`input0`): count × element size, × group size when the input
    /// spans ranks (reduce-scatter, all-to-all). Saturates at `u64::MAX`; [`build`] refuses
    /// sizes above [`MAX_VAR_BYTES`].
    pub fn input_bytes(&self) -> u64 {
        self.bytes(self.op.input_spans_ranks()).unwrap_or(u64::MAX)
    }

    /// One rank's output bytes (`output0`): count × element size, × group size when the
    /// output spans ranks (all-gather, all-to-all). Saturates like [`BuildSpec::input_bytes`].
    pub fn output_bytes(&self) -> u64 {
        self.bytes(self.op.output_spans_ranks()).unwrap_or(u64::MAX)
    }

    fn bytes(&self, spans: bool) -> Option<u64> {
        let esize = self.dtype.size_bytes()? as u64;
        let scale = if spans {
            u64::from(self.group_size())
        } else {
            1
        };
        self.count.checked_mul(esize)?.checked_mul(scale)
    }

    /// `metadata0`'s bytes for a variable-size op (4 rows of group-size uint32 entries), else 0.
    pub fn metadata_bytes(&self) -> u64 {
        if self.op.is_variable() {
            crate::lower::request::metadata_bytes(self.group_size())
        } else {
            0
        }
    }

    /// The equal-blocks table of a variable-size op, the same on every rank (what a run
    /// without a metadata file uses, docs/neff.md §2), as `[send counts, send displacements,
    /// receive counts, receive displacements]` in elements: all-to-all-v sends `count` to each
    /// peer from `p·count`; all-gather-v sends its first `count` to every peer; both receive
    /// `count` from peer p at `p·count`. `None` for the fixed-size ops.
    pub fn uniform_metadata(&self) -> Option<[Vec<u64>; 4]> {
        let g = u64::from(self.group_size());
        let blocks: Vec<u64> = (0..g).map(|p| p * self.count).collect();
        let send_displs = match self.op {
            BuildOp::AllToAllV => blocks.clone(),
            BuildOp::AllGatherV => vec![0; g as usize],
            _ => return None,
        };
        let counts = vec![self.count; g as usize];
        Some([counts.clone(), send_displs, counts, blocks])
    }

    /// The header's model name, `opennrt-<op>-r<R>-n<count>-<dtype>` (docs/neff.md §2).
    pub fn model_name(&self) -> String {
        format!(
            "opennrt-{}-r{}-n{}-{}",
            self.op.name(),
            self.ranks,
            self.count,
            self.dtype.short_name()
        )
    }
}

/// Every field of the 1024-byte header table (docs/contract/abi.md §7.2), for [`container`].
/// The defaults are what [`build`] writes (docs/neff.md §2); `None` fields are computed from
/// the payload. Nothing is range-checked, so damaged headers can be made too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderFields {
    /// `pkg_version`, written as is. 1 packs the payload as a raw tar; any other value as a
    /// gzip tar (2 is the production packing).
    pub pkg_version: u64,
    /// `header_size`. The payload starts there when it is at least 1024 (zero-filled up to
    /// it); a smaller value, which no reader accepts, still has the payload right after the
    /// 1024-byte table, since it cannot overlap the table.
    pub header_size: u64,
    /// `data_size`; `None` = the payload's length.
    pub data_size: Option<u64>,
    /// `neff_version_major`.
    pub version_major: u64,
    /// `neff_version_minor`.
    pub version_minor: u64,
    /// `neff_build_version`, at most 128 bytes (NUL-padded).
    pub build_version: String,
    /// `num_tpb`.
    pub num_tpb: u32,
    /// `hash`; `None` = MD5 of the (compressed) payload in the first 16 bytes, or for package
    /// 1 the SHA-256 of the raw tar — what `NEURON_RT_VALIDATE_HASH=1` checks.
    pub hash: Option<[u8; 32]>,
    /// `uuid`; `None` = the first 16 bytes of the MD5 of the uncompressed tar, so two NEFFs
    /// with different content never share a load-cache key.
    pub uuid: Option<[u8; 16]>,
    /// `name`, at most 256 bytes (NUL-padded).
    pub name: String,
    /// `requested_tpb_count`.
    pub requested_tpb_count: u32,
    /// `tpb_per_node`, 16 entries.
    pub tpb_per_node: [u32; 16],
    /// `feature_bits`.
    pub feature_bits: u64,
    /// `lnc_size`.
    pub lnc_size: u32,
}

impl Default for HeaderFields {
    /// The header of docs/neff.md §2 with an empty name: package 2, NEFF 2.0, build string
    /// `opennrt <crate version>`, one TPB, hash and uuid computed, LNC 1.
    fn default() -> Self {
        let mut tpb_per_node = [0u32; 16];
        tpb_per_node[0] = 1;
        HeaderFields {
            pkg_version: 2,
            header_size: HEADER_SIZE as u64,
            data_size: None,
            version_major: 2,
            version_minor: 0,
            build_version: format!("opennrt {}", env!("CARGO_PKG_VERSION")),
            num_tpb: 1,
            hash: None,
            uuid: None,
            name: String::new(),
            requested_tpb_count: 1,
            tpb_per_node,
            feature_bits: 0,
            lnc_size: 1,
        }
    }
}

/// Bytes of a tar block.
const BLOCK: usize = 512;
/// Bytes of a ustar header's `name` field; longer names go in a pax `path` record.
const USTAR_NAME: usize = 100;

/// A ustar header for a member of `size` bytes of type `kind`, whose name field holds the raw
/// bytes of `name` (at most 100; the caller puts a longer name in a pax record first).
fn ustar_header(name: &[u8], size: u64, kind: tar::EntryType) -> tar::Header {
    let mut h = tar::Header::new_ustar();
    h.as_mut_bytes()[..name.len()].copy_from_slice(name);
    h.set_size(size);
    h.set_mode(0o644);
    h.set_uid(0);
    h.set_gid(0);
    h.set_mtime(0);
    h.set_entry_type(kind);
    h.set_cksum();
    h
}

/// One pax record `"<len> <key>=<value>\n"`, whose decimal length counts itself.
fn pax_record(key: &str, value: &[u8]) -> Vec<u8> {
    let body = key.len() + value.len() + 3; // ' ', '=', '\n'
    let mut len = body + 1;
    while len != body + len.to_string().len() {
        len = body + len.to_string().len();
    }
    let mut r = format!("{len} {key}=").into_bytes();
    r.extend_from_slice(value);
    r.push(b'\n');
    r
}

/// Append one member to the tar in `out`: names are written as given (no normalisation, so a
/// hostile name can be written on purpose); one longer than a ustar name field goes in a pax
/// `path` record, which the payload reader honours.
fn append_member(out: &mut Vec<u8>, name: &str, data: &[u8]) {
    let raw = name.as_bytes();
    let mut push = |h: &tar::Header, data: &[u8]| {
        out.extend_from_slice(h.as_bytes());
        out.extend_from_slice(data);
        out.resize(out.len().div_ceil(BLOCK) * BLOCK, 0);
    };
    if raw.len() > USTAR_NAME {
        let rec = pax_record("path", raw);
        let h = ustar_header(b"PaxHeader", rec.len() as u64, tar::EntryType::XHeader);
        push(&h, &rec);
    }
    let short = &raw[..raw.len().min(USTAR_NAME)];
    push(
        &ustar_header(short, data.len() as u64, tar::EntryType::Regular),
        data,
    );
}

/// Text field `f`: the string, NUL-padded; refused if it does not fit.
fn put_text(b: &mut [u8], f: Field, s: &str) -> Result<()> {
    if s.len() > f.len {
        return Err(Error::invalid(format!(
            "NEFF header: {} is {} bytes; the field holds {} (docs/contract/abi.md §7.2)",
            f.name,
            s.len(),
            f.len
        ))
        .with_field(f.name)
        .with_actual(s.len()));
    }
    b[f.off..f.off + s.len()].copy_from_slice(s.as_bytes());
    Ok(())
}

/// Write a NEFF file: the members as a tar (in the order given, names as given), packed per
/// `h.pkg_version`, behind the 1024-byte header table filled from `h`
/// (docs/contract/abi.md §7.2). The generic writer under [`build`], and what tests use to
/// make NEFFs the builder would refuse.
///
/// # Errors
/// `NRT_INVALID` when `h.build_version` or `h.name` is longer than its field; a write error of
/// the in-memory gzip encoder (which does not happen) as `NRT_FAILURE`.
pub fn container(members: &[(String, Vec<u8>)], h: &HeaderFields) -> Result<Vec<u8>> {
    let mut tar = Vec::new();
    for (name, data) in members {
        append_member(&mut tar, name, data);
    }
    // The end-of-archive marker: two zero blocks.
    tar.resize(tar.len() + 2 * BLOCK, 0);
    let uuid = h.uuid.unwrap_or_else(|| Md5::digest(&tar).into());
    let payload = if h.pkg_version == 1 {
        tar
    } else {
        let mut gz = flate2::GzBuilder::new()
            .mtime(0)
            .write(Vec::new(), flate2::Compression::default());
        gz.write_all(&tar)
            .and_then(|_| gz.finish())
            .map_err(|e| Error::failure(format!("NEFF writer: gzip: {e}")))?
    };
    let hash = h.hash.unwrap_or_else(|| {
        let mut out = [0u8; 32];
        if h.pkg_version == 1 {
            out.copy_from_slice(&Sha256::digest(&payload));
        } else {
            out[..16].copy_from_slice(&Md5::digest(&payload));
        }
        out
    });
    let mut b = vec![0u8; HEADER_SIZE];
    let data_size = h.data_size.unwrap_or(payload.len() as u64);
    for (f, v) in [
        (PKG_VERSION, h.pkg_version),
        (HEADER_SIZE_FIELD, h.header_size),
        (DATA_SIZE, data_size),
        (VERSION_MAJOR, h.version_major),
        (VERSION_MINOR, h.version_minor),
        (FEATURE_BITS, h.feature_bits),
    ] {
        b[f.range()].copy_from_slice(&v.to_le_bytes());
    }
    for (f, v) in [
        (NUM_TPB, h.num_tpb),
        (REQUESTED_TPB_COUNT, h.requested_tpb_count),
        (LNC_SIZE, h.lnc_size),
    ] {
        b[f.range()].copy_from_slice(&v.to_le_bytes());
    }
    put_text(&mut b, BUILD_VERSION, &h.build_version)?;
    put_text(&mut b, NAME, &h.name)?;
    b[HASH.range()].copy_from_slice(&hash);
    b[UUID.range()].copy_from_slice(&uuid);
    for (raw, t) in b[TPB_PER_NODE.range()]
        .chunks_exact_mut(4)
        .zip(&h.tpb_per_node)
    {
        raw.copy_from_slice(&t.to_le_bytes());
    }
    let start = usize::try_from(h.header_size)
        .ok()
        .filter(|&s| s >= HEADER_SIZE)
        .unwrap_or(HEADER_SIZE);
    let total = start.checked_add(payload.len()).ok_or_else(|| {
        Error::invalid(format!(
            "NEFF writer: header_size {} leaves no room for the payload",
            h.header_size
        ))
    })?;
    b.try_reserve_exact(total - b.len()).map_err(|_| {
        Error::new(
            crate::error::ErrorKind::HostAlloc,
            format!(
                "NEFF writer: cannot allocate {total} bytes (header_size {})",
                h.header_size
            ),
        )
    })?;
    b.resize(start, 0);
    b.extend_from_slice(&payload);
    Ok(b)
}

fn refuse(why: impl std::fmt::Display) -> Error {
    Error::invalid(format!("NEFF builder: {why} (docs/neff.md §2)"))
}

/// The replica groups of `spec`, checked: 1..=16 groups, none empty, no empty sub-group, ids
/// below `ranks`, no id twice in a group, group 0's sub-groups all one size.
fn checked_groups(spec: &BuildSpec) -> Result<Vec<Vec<Vec<u32>>>> {
    let Some(groups) = &spec.replica_groups else {
        return Ok(vec![vec![(0..spec.ranks).collect()]]);
    };
    if groups.is_empty() || groups.len() > MAX_REPLICA_GROUPS {
        return Err(refuse(format_args!(
            "{} replica groups; a NEFF has 1..={MAX_REPLICA_GROUPS}",
            groups.len()
        )));
    }
    for (k, g) in groups.iter().enumerate() {
        if g.is_empty() {
            return Err(refuse(format_args!("replica group {k} has no sub-group")));
        }
        let mut seen = std::collections::BTreeSet::new();
        for (s, sub) in g.iter().enumerate() {
            if sub.is_empty() {
                return Err(refuse(format_args!(
                    "sub-group {s} of replica group {k} is empty"
                )));
            }
            for &id in sub {
                if id >= spec.ranks {
                    return Err(refuse(format_args!(
                        "device {id} in replica group {k} is outside the world 0..{}",
                        spec.ranks
                    )));
                }
                if !seen.insert(id) {
                    return Err(refuse(format_args!(
                        "device {id} appears twice in replica group {k}"
                    )));
                }
            }
        }
    }
    let n = groups[0][0].len();
    if let Some(s) = groups[0].iter().position(|s| s.len() != n) {
        return Err(refuse(format_args!(
            "sub-group {s} of replica group 0 has {} ranks, sub-group 0 has {n}: every rank \
             loads the same NEFF, so its buffers must fit every sub-group",
            groups[0][s].len()
        )));
    }
    Ok(groups.clone())
}

/// The permute pairs of `spec` against group 0 (`subs`): given ones checked (both ends in one
/// sub-group, each device sends once and receives once, at least one pair); default: each
/// member of each sub-group to the next, wrapping.
fn checked_pairs(spec: &BuildSpec, subs: &[Vec<u32>]) -> Result<Vec<(u32, u32)>> {
    let sub_of = |id: u32| subs.iter().position(|s| s.contains(&id));
    let Some(pairs) = &spec.pairs else {
        return Ok(subs
            .iter()
            .flat_map(|s| (0..s.len()).map(move |i| (s[i], s[(i + 1) % s.len()])))
            .collect());
    };
    if pairs.is_empty() {
        return Err(refuse("a permute needs at least one source -> target pair"));
    }
    let (mut srcs, mut dsts) = (
        std::collections::BTreeSet::new(),
        std::collections::BTreeSet::new(),
    );
    for &(s, t) in pairs {
        match (sub_of(s), sub_of(t)) {
            (Some(a), Some(b)) if a == b => {}
            (None, _) | (_, None) => {
                return Err(refuse(format_args!(
                    "permute pair {s}:{t} names a device that is not in replica group 0"
                )))
            }
            _ => {
                return Err(refuse(format_args!(
                    "permute pair {s}:{t} crosses sub-groups of replica group 0"
                )))
            }
        }
        if !srcs.insert(s) || !dsts.insert(t) {
            return Err(refuse(format_args!(
                "permute pair {s}:{t}: each device may send once and receive once"
            )));
        }
    }
    Ok(pairs.clone())
}

/// A checked buffer size of `spec` (`what` = input/output) or a refusal naming it.
fn checked_bytes(spec: &BuildSpec, spans: bool, what: &str) -> Result<u64> {
    match spec.bytes(spans) {
        Some(b) if b <= MAX_VAR_BYTES => Ok(b),
        b => {
            let ranks = if spans {
                format!(" x {} ranks", spec.group_size())
            } else {
                String::new()
            };
            Err(refuse(format_args!(
                "{what} ({} elements of {}{ranks}) is {} bytes, above the loader's var limit \
                 of 2^48",
                spec.count,
                spec.dtype.name(),
                b.map_or_else(|| "more than 2^64".to_string(), |b| b.to_string())
            )))
        }
    }
}

fn to_json(v: &Value) -> Vec<u8> {
    let mut b = serde_json::to_vec_pretty(v).expect("a JSON value serialises");
    b.push(b'\n');
    b
}

/// The var id of `metadata0`, the all-to-all-v table (docs/neff.md §2).
pub const METADATA_VAR: u16 = 3;

/// The SP program of `spec`: `spec.ops` identical triggers (docs/neff.md §2: wait none,
/// SEM_INC_COMPLETE on semaphore 0, group 0, input var 1, output var 2): a 0xC8 with the
/// per-rank block, or for the variable-size ops an 0xD9+0xDA ALL_TO_ALL_V whose VAR_ID operands
/// span the whole of input0, output0 and metadata0 (src1, bitmap 0x0F: all four rows are
/// inputs). [`build`] refuses variable-size buffers above `u32::MAX` elements, which one
/// contiguous operand cannot count; here such a count saturates.
pub fn trigger_program(spec: &BuildSpec) -> Vec<u8> {
    let events = Events {
        wait_mode: WaitMode::None,
        wait_idx: 0,
        update_mode: UpdateMode::SemIncComplete,
        update_idx: 0,
        semaphore_value: 0,
    };
    if spec.op.is_variable() {
        let esize = spec.dtype.size_bytes().unwrap_or(1) as u64;
        let operand = |var: u16, bytes: u64, esize: u64| {
            let elems = u32::try_from(bytes / esize).unwrap_or(u32::MAX);
            Tensor2d::contiguous(PseudoAddr8::var(var, 0).expect("offset 0 fits"), elems)
        };
        let word = Collective2 {
            trigger: TriggerCollective2 {
                common: Common {
                    events,
                    ..Common::default()
                },
                op: AluOp::Bypass,
                dtype: spec.dtype,
                ctype: CollectiveType::AllToAllV,
                cc_dim: CcDim::Dim0,
                src0: operand(1, spec.input_bytes(), esize),
                src1: operand(METADATA_VAR, spec.metadata_bytes(), 4),
            },
            ext: Collective2Ext {
                instr_chaining: InstrChaining::None,
                group_id: 0,
                channel_id: 0,
                stream_id: 0,
                dst: operand(2, spec.output_bytes(), esize),
                cc_buf_start_addr: Addr4::default(),
                cc_buf_size: 0,
                unique_tensors: Flag::Off,
                dma_configs: DmaConfigs::default(),
                src1_bitmap: 0x0F,
                permute_chain: 0,
                cross_sb_out: Flag::Off,
                tail_reserved: [0; 32],
            },
        }
        .encode();
        return word.repeat(spec.ops as usize);
    }
    let op = if spec.op.is_reducing() {
        match spec.redop {
            ReduceOp::Add => AluOp::Add,
            ReduceOp::Max => AluOp::Max,
            ReduceOp::Min => AluOp::Min,
        }
    } else {
        AluOp::Bypass
    };
    let word = TriggerCollective {
        common: Common {
            events,
            ..Common::default()
        },
        op,
        dtype: spec.dtype,
        group_id: 0,
        input_tensor_id: 1,
        output_tensor_id: 2,
        num_elements: spec.count,
        ctype: spec.op.ctype(),
        reserved: [0; C8_RESERVED.width],
        src_offset_elems: 0,
        dst_offset_elems: 0,
    }
    .encode();
    word.repeat(spec.ops as usize)
}

/// Build the NEFF of `spec` (docs/neff.md §2): the whole file, ready for `nrt_load`.
///
/// # Errors
/// `NRT_INVALID` naming the field for: ranks outside 1..=1024; count 0; a buffer above 2^48
/// bytes; dtype INVALID or FP32R (not I/O types); a reducing op on a dtype the CCE cannot
/// reduce (docs/contract/isa.md §9 rule 10); an unknown algorithm; lnc not 1 or 2; ops
/// outside 1..=1024; malformed replica groups; pairs given for an op other than permute, or
/// pairs outside group 0, crossing sub-groups, or repeating a source or a target.
pub fn build(spec: &BuildSpec) -> Result<Vec<u8>> {
    if !(1..=MAX_RANKS).contains(&spec.ranks) {
        return Err(refuse(format_args!(
            "ranks {} is outside 1..={MAX_RANKS}",
            spec.ranks
        )));
    }
    if spec.count == 0 {
        return Err(refuse("count must be at least 1 element"));
    }
    let Some(np_dtype) = spec.dtype.numpy_name() else {
        return Err(refuse(format_args!(
            "dtype {} is not an I/O type (INVALID is none; FP32R is an accumulation type)",
            spec.dtype.name()
        )));
    };
    if spec.op.is_reducing() && !spec.dtype.is_cce_reducible() {
        return Err(refuse(format_args!(
            "{} reduces, and the CCE cannot reduce {}: use bf16, fp16, fp32 or an fp8 type \
             (docs/contract/isa.md §9 rule 10)",
            spec.op.name(),
            spec.dtype.name()
        )));
    }
    let algorithm = match &spec.algorithm {
        None => None,
        Some(a) => Some(
            Algorithm::parse(a)
                .ok_or_else(|| {
                    let names: Vec<_> = Algorithm::ALL.iter().map(|a| a.name()).collect();
                    refuse(format_args!(
                        "unknown algorithm {a:?}; use one of {}",
                        names.join(", ")
                    ))
                })?
                .name(),
        ),
    };
    if !(1..=2).contains(&spec.lnc) {
        return Err(refuse(format_args!(
            "lnc {} is not a logical core size (1 or 2)",
            spec.lnc
        )));
    }
    if !(1..=MAX_OPS).contains(&spec.ops) {
        return Err(refuse(format_args!(
            "ops {} is outside 1..={MAX_OPS}",
            spec.ops
        )));
    }
    let groups = checked_groups(spec)?;
    let pairs = match (spec.op, &spec.pairs) {
        (BuildOp::Permute, _) => Some(checked_pairs(spec, &groups[0])?),
        (_, None) => None,
        (op, Some(_)) => {
            return Err(refuse(format_args!(
                "pairs are for permute only, not {}",
                op.name()
            )))
        }
    };
    let in_bytes = checked_bytes(spec, spec.op.input_spans_ranks(), "the input")?;
    let out_bytes = checked_bytes(spec, spec.op.output_spans_ranks(), "the output")?;
    let elems = |bytes: u64| bytes / spec.dtype.size_bytes().unwrap_or(1) as u64;
    let (in_elems, out_elems) = (elems(in_bytes), elems(out_bytes));
    if spec.op.is_variable() && in_elems.max(out_elems) > u64::from(u32::MAX) {
        return Err(refuse(format_args!(
            "{}: a buffer of {} elements is more than the 2^32 - 1 one contiguous 0xD9 \
             operand counts",
            spec.op.name(),
            in_elems.max(out_elems)
        )));
    }
    let meta_bytes = spec.metadata_bytes();
    let name = spec.model_name();

    let mut def = Map::new();
    def.insert("#rank_world_size".into(), json!(spec.ranks));
    def.insert("cc_streams".into(), json!({ "num_streams": 1 }));
    def.insert("name".into(), json!("definition"));
    if let Some(a) = algorithm {
        def.insert("opennrt_algorithm".into(), json!(a));
    }
    def.insert("replica_groups".into(), json!(groups));
    if let Some(p) = &pairs {
        let list: Vec<[u32; 2]> = p.iter().map(|&(s, t)| [s, t]).collect();
        def.insert(
            "src_target_pairs".into(),
            json!([{ "group_id": 0, "pairs": list }]),
        );
    }
    def.insert("sp".into(), json!("SP.json"));
    def.insert("sp_instr".into(), json!("SP.bin"));
    let mut vars = json!({
        "SB": { "type": "state-buffer", "var_id": 0 },
        "input0": { "ops": [], "size": in_bytes, "type": "input", "var_id": 1 },
        "output0": { "ops": [], "size": out_bytes, "type": "output", "var_id": 2 },
    });
    if meta_bytes > 0 {
        vars["metadata0"] = json!({
            "ops": [], "size": meta_bytes, "type": "input", "var_id": METADATA_VAR,
        });
    }
    def.insert("var".into(), vars);
    let def = to_json(&Value::Object(def));
    let tensor = |kind: &str, n: &str, dtype: &str, elems: u64| {
        json!({
            "dtype": dtype, "is_const": false, "kind": kind, "layer_name": n,
            "sim_format": "N", "sim_shape": [elems], "tf_file": format!("value_{n}.npy"),
            "tf_format": "N", "tf_shape": [elems],
        })
    };
    // The model's inputs (input0, then metadata0 for the variable-size ops): name, numpy
    // dtype, elements.
    let mut inputs = vec![("input0", np_dtype, in_elems)];
    if meta_bytes > 0 {
        inputs.push(("metadata0", "uint32", meta_bytes / 4));
    }
    let mut tensor_map: Map<String, Value> = inputs
        .iter()
        .map(|&(n, d, e)| (n.to_string(), tensor("input", n, d, e)))
        .collect();
    tensor_map.insert(
        "output0".into(),
        tensor("output", "output0", np_dtype, out_elems),
    );
    let tensor_map = to_json(&Value::Object(tensor_map));
    let sp_json = to_json(&json!({ "dma": [], "instr": "SP.bin", "name": "SP.json" }));
    let sp_bin = trigger_program(spec);

    let graph_names: Vec<String> = (0..spec.lnc).map(|i| format!("sg{i:02}")).collect();
    // One `null` node per input, then the kernel node; storage ids, shapes and dtypes list the
    // inputs and then the output.
    let k = inputs.len();
    let mut nodes: Vec<Value> = inputs
        .iter()
        .map(|(n, _, _)| {
            json!({ "op": "null", "name": n, "inputs": [], "output_names": [n], "is_param": "0" })
        })
        .collect();
    nodes.push(json!({
        "op": "tvm_op", "name": "opennrt_collective",
        "attrs": { "func_name": "__kelf", "flatten_data": "0", "num_inputs": k.to_string(),
                   "kelf": "kelf-0.json", "num_outputs": "1" },
        "inputs": (0..k).map(|i| json!([i, 0, 0])).collect::<Vec<_>>(),
        "output_names": ["output0"],
    }));
    let mut shapes: Vec<Value> = inputs.iter().map(|(_, _, e)| json!([e])).collect();
    shapes.push(json!([out_elems]));
    let mut dltypes: Vec<&str> = inputs.iter().map(|(_, d, _)| *d).collect();
    dltypes.push(np_dtype);
    let signature: Map<String, Value> = inputs
        .iter()
        .enumerate()
        .map(|(i, (n, d, e))| (n.to_string(), json!({ "id": i, "dtype": d, "shape": [e] })))
        .collect();
    let neff_json = json!({
        "nodes": nodes,
        "arg_nodes": (0..k).collect::<Vec<_>>(),
        "heads": [[k, 0, 0]],
        "attrs": {
            "shape": ["list_shape", shapes],
            "storage_id": ["list_int", (0..=k).collect::<Vec<_>>()],
            "dltype": ["list_str", dltypes],
        },
        "node_row_ptr": (0..=k + 1).collect::<Vec<_>>(),
        "metadata": { "signatures": { "default": {
            "inputs": signature,
            "outputs": {},
        } } },
    });
    let kelf = json!({
        "graphs": graph_names.iter().map(|g| json!({
            "definition": format!("{g}/def.json"), "name": g,
        })).collect::<Vec<_>>(),
        "version": "0.5",
        "target": "opennrt",
    });
    let mut per_node = vec![0u32; 64];
    per_node[0] = 1;
    let info = json!({
        "tool_version": format!("opennrt {}", env!("CARGO_PKG_VERSION")),
        "kelp_version": "Dynamic",
        "name": name,
        "num_tpb": 1,
        "num_tpb_requested": 1,
        "num_tpb_per_node": per_node,
    });
    let mut members = vec![
        ("neff.json".to_string(), to_json(&neff_json)),
        ("kelf-0.json".to_string(), to_json(&kelf)),
        ("info.json".to_string(), to_json(&info)),
    ];
    for g in &graph_names {
        members.push((format!("{g}/def.json"), def.clone()));
        members.push((format!("{g}/SP.json"), sp_json.clone()));
        members.push((format!("{g}/SP.bin"), sp_bin.clone()));
        members.push((format!("{g}/tensor_map.json"), tensor_map.clone()));
    }
    let h = HeaderFields {
        name,
        lnc_size: spec.lnc,
        ..HeaderFields::default()
    };
    container(&members, &h)
}

#[cfg(test)]
mod tests;

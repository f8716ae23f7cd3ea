//! Emission (docs/contract/lowering.md §5–§6, docs/contract/device.md §1–§8): a [`Program`] → for
//! every rank and every TOP_SP it uses, the bytes the hardware runs — M2S/S2M descriptor streams,
//! the SLOT SPAD step records, the CTRL SPAD cc_op table, and the essential `neff_configs` values.
//!
//! Per rank, per TOP_SP (one basic block per program, so one M2S + one S2M ring, §4):
//! entries in order, and inside an entry the tapes this TOP_SP drives in channel order, step by
//! step. A step's descriptors are its transfers' ([`emit_desc`](desc)) followed by
//! one increment per signal; it gets one SLOT record (more when its descriptor count exceeds a
//! single tail increment, [`release_cap`]) whose first record carries the step's wait. The
//! tapes of one TOP_SP run one after the other (a TOP_SP drives one queue pair); tapes on
//! different TOP_SPs run concurrently. Entries are chained per TOP_SP (`trigger_next`), and
//! only the reporter waits for the entry's other TOP_SPs: any other order between TOP_SPs
//! across entries is the program's (semaphores, e.g. `compose::leg_join`), as the verifier
//! models it (program.rs, "Order").
//!
//! Rings: length = smallest power of two ≥ descriptors + 16 (guard gap,
//! docs/contract/device.md §3.2), at most [`EmitOptions::max_ring`]; a longer stream wraps, and
//! RING_ID follows the lap (1, 2, 3, 0, …, §1.3). `TopspImage::m2s`/`s2m` hold the stream in issue
//! order: stream index `i` sits in ring slot `i % ring_len`.
//!
//! Reserved semaphores of our own (besides docs/contract/lowering.md §6.4's 0..=7): [`CHAIN_SEM`]
//! (254) collects the other TOP_SPs' completions on the reporter (`complete` / `complete_prev`),
//! [`NEXT_SEM`] (253) is `trigger_next`. Composers allocate upward from 8 and must not reach 253.

pub mod check;
pub mod desc;

use std::ops::Range;

use crate::error::{Error, Result};
use crate::isa::evtsem::SemWindow;
use crate::isa::slot::{SlotRecord, SlotWait, RECORD_BYTES, SLOTS, SLOT_RECORDS};
use crate::isa::udma::Descriptor;
use crate::lower::addrmap::{AddressMap, MAX_RING_DESCS};
use crate::lower::emit::desc::{ring_len, stamp, StepDescs, Tiler, RING_GUARD};
use crate::lower::program::{sem_id, Program, Sem, Step};

pub use crate::lower::emit::check::decode_back;
use crate::lower::spad::{build_ctrl_spad, cc_op_fields, participants, reporter_of, CcOpPlacement};

pub use crate::isa::slot::{CHAIN_SEM, NEXT_SEM};

/// Emission knobs.
#[derive(Debug, Clone, Copy)]
pub struct EmitOptions {
    /// Largest ring, a power of two > 16 (default 65536: a vring page, docs/contract/device.md §4).
    pub max_ring: u64,
}

impl Default for EmitOptions {
    fn default() -> Self {
        EmitOptions { max_ring: 1 << 16 }
    }
}

/// Most descriptors one record may release on one queue: a u16, and never more than the ring
/// minus its guard gap (the doorbell rejects more, docs/contract/device.md §3.2).
pub fn release_cap(max_ring: u64) -> u64 {
    (max_ring - RING_GUARD).min(u64::from(u16::MAX))
}

/// Which descriptors and records one step owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepRange {
    /// Entry index in the rank program.
    pub entry: u32,
    /// Tape channel.
    pub channel: u8,
    /// Step index in the tape.
    pub step: u32,
    /// M2S stream indices.
    pub m2s: Range<u32>,
    /// S2M stream indices.
    pub s2m: Range<u32>,
    /// SLOT record positions (slot · 64 + index; byte offset = 16 · position).
    pub records: Range<u32>,
}

/// The `neff_configs` values the device needs (docs/contract/lowering.md §6.3; full context images
/// are built by `ncfw::ctx_builder`). Semaphore fields use the READ-window form
/// (docs/contract/device.md §9.2); 0 = unused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NeffConfigs {
    /// Own TRIGGER semaphore (id 0).
    pub trigger: u64,
    /// Own `trigger_next` semaphore ([`NEXT_SEM`]).
    pub trigger_next: u64,
    /// Where this TOP_SP signals completion (the reporter's [`CHAIN_SEM`]), non-reporters. The
    /// reporter is taken from the TOP_SP's first entry: with a fixed channel → TOP_SP map it is
    /// the same TOP_SP in every entry.
    pub complete: u64,
    /// What the reporter waits on (own [`CHAIN_SEM`]).
    pub complete_prev: u64,
    /// How many completions `complete_prev` collects (other TOP_SPs of the rank).
    pub complete_prev_target: u32,
    /// Number of cc_op entries (continuations excluded).
    pub op_num: u32,
    /// Reporter of at least one entry.
    pub leader: bool,
    /// CTRL SPAD base.
    pub ctrl_spad_base: u64,
    /// SLOT SPAD base.
    pub slot_spad_base: u64,
    /// M2S pring base.
    pub m2s_ring_base: u64,
    /// S2M pring base.
    pub s2m_ring_base: u64,
}

/// Everything one TOP_SP of one rank runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopspImage {
    /// Rank-local TOP_SP.
    pub topsp: u8,
    /// CTRL SPAD bytes (8 per slot).
    pub ctrl_spad: Vec<u8>,
    /// SLOT SPAD bytes (1 KiB per slot).
    pub slot_spad: Vec<u8>,
    /// M2S stream.
    pub m2s: Vec<[u8; 16]>,
    /// S2M stream.
    pub s2m: Vec<[u8; 16]>,
    /// M2S ring length.
    pub m2s_ring_len: u32,
    /// S2M ring length.
    pub s2m_ring_len: u32,
    /// Per step, what it owns.
    pub steps: Vec<StepRange>,
    /// The neff_configs values.
    pub neff: NeffConfigs,
}

/// One rank's images.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmittedRank {
    /// Rank id.
    pub rank: u32,
    /// Per TOP_SP used, ascending.
    pub topsps: Vec<TopspImage>,
}

/// The emitted program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmittedProgram {
    /// Per rank.
    pub ranks: Vec<EmittedRank>,
}

impl EmittedProgram {
    /// Total (M2S, S2M) descriptors.
    pub fn descriptor_counts(&self) -> (usize, usize) {
        let it = self.ranks.iter().flat_map(|r| &r.topsps);
        it.fold((0, 0), |(a, b), t| (a + t.m2s.len(), b + t.s2m.len()))
    }
    /// Total cc_op entries.
    pub fn cc_op_count(&self) -> usize {
        self.ranks
            .iter()
            .flat_map(|r| &r.topsps)
            .map(|t| t.neff.op_num as usize)
            .sum()
    }
}

/// Emit with the default options.
pub fn emit(p: &Program, map: &AddressMap) -> Result<EmittedProgram> {
    emit_with(p, map, &EmitOptions::default())
}

/// Emit every rank.
pub fn emit_with(p: &Program, map: &AddressMap, opt: &EmitOptions) -> Result<EmittedProgram> {
    let ranks = p
        .ranks
        .iter()
        .map(|rp| emit_rank(p, map, opt, rp.rank))
        .collect::<Result<Vec<_>>>()?;
    Ok(EmittedProgram { ranks })
}

/// Emit one rank only (what a process owning that rank needs; `emit_with` is this for every
/// rank).
pub fn emit_rank(
    p: &Program,
    map: &AddressMap,
    opt: &EmitOptions,
    rank: u32,
) -> Result<EmittedRank> {
    let rp = p
        .ranks
        .iter()
        .find(|r| r.rank == rank)
        .ok_or_else(|| Error::invalid(format!("emit: the program has no rank {rank}")))?;
    if !opt.max_ring.is_power_of_two()
        || opt.max_ring <= RING_GUARD
        || opt.max_ring > MAX_RING_DESCS
    {
        return Err(Error::invalid(format!(
            "emit: max_ring {} must be a power of two in 32..=2^24",
            opt.max_ring
        )));
    }
    let mut topsps: Vec<u8> = rp.entries.iter().flat_map(participants).collect();
    topsps.sort_unstable();
    topsps.dedup();
    let images = topsps
        .iter()
        .map(|&t| emit_topsp(p, map, opt, rank, t))
        .collect::<Result<Vec<_>>>()?;
    Ok(EmittedRank {
        rank,
        topsps: images,
    })
}

fn ctx(rank: u32, topsp: u8) -> impl Fn(Error) -> Error {
    move |e| {
        Error::new(
            e.kind(),
            format!("emit rank {rank} TOP_SP {topsp}: {}", e.message()),
        )
    }
}

/// The slot record(s) of a step: the wait on the first, the counts split at the release cap.
fn step_records(rank: u32, step: &Step, m2s: u64, s2m: u64, cap: u64) -> Result<Vec<SlotRecord>> {
    let wait = match step.wait {
        Some(w) => {
            if w.sem.rank != rank {
                return Err(Error::invalid(format!(
                    "a step of rank {rank} waits on rank {}'s semaphore",
                    w.sem.rank
                )));
            }
            Some(SlotWait {
                topsp: w.sem.topsp,
                sem: w.sem.id,
                target: w.target,
                consume: w.consume,
            })
        }
        None => None,
    };
    let n = m2s.div_ceil(cap).max(s2m.div_ceil(cap)).max(1);
    Ok((0..n)
        .map(|i| SlotRecord {
            m2s: (m2s.saturating_sub(i * cap)).min(cap) as u16,
            s2m: (s2m.saturating_sub(i * cap)).min(cap) as u16,
            repeat: 1,
            wait: if i == 0 { wait } else { None },
            end: false,
        })
        .collect())
}

fn check_sem(s: Sem) -> Result<()> {
    if s.id == CHAIN_SEM || s.id == NEXT_SEM || s.id == sem_id::NULL {
        return Err(Error::invalid(format!(
            "semaphore id {} of {s:?} is reserved by the emitter",
            s.id
        )));
    }
    Ok(())
}

fn emit_topsp(
    p: &Program,
    map: &AddressMap,
    opt: &EmitOptions,
    rank: u32,
    topsp: u8,
) -> Result<TopspImage> {
    let rp = p
        .ranks
        .iter()
        .find(|r| r.rank == rank)
        .expect("caller passes a rank of p");
    let tiler = Tiler {
        map,
        rank,
        dtype: p.dtype(),
        prio: p.request.priority,
    };
    let cap = release_cap(opt.max_ring);
    let (mut m2s, mut s2m): (Vec<Descriptor>, Vec<Descriptor>) = (vec![], vec![]);
    let mut records: Vec<(u32, SlotRecord)> = vec![];
    let mut steps = vec![];
    let mut ops = vec![];
    let mine: Vec<usize> = (0..rp.entries.len())
        .filter(|&i| participants(&rp.entries[i]).contains(&topsp))
        .collect();
    let mut slot = 0usize;
    let mut leader = false;
    let mut others = 0u32;
    for (k, &ei) in mine.iter().enumerate() {
        let e = &rp.entries[ei];
        let (fields, channel_id) =
            cc_op_fields(rank, e, topsp, k + 1 == mine.len()).map_err(ctx(rank, topsp))?;
        if fields.reporter {
            leader = true;
            others = others.max(participants(e).len() as u32 - 1);
        }
        let first_pos = slot * SLOT_RECORDS;
        let mut pos = first_pos;
        let mut tapes: Vec<_> = e.tapes.iter().filter(|t| t.topsp == topsp).collect();
        tapes.sort_by_key(|t| t.channel);
        for tape in tapes {
            for (si, step) in tape.steps.iter().enumerate() {
                let mut d = StepDescs::default();
                for t in &step.transfers {
                    tiler.transfer(t, &mut d).map_err(ctx(rank, topsp))?;
                }
                for s in &step.signals {
                    check_sem(s.sem)?;
                    tiler.signal(s, &mut d).map_err(ctx(rank, topsp))?;
                }
                if let Some(w) = step.wait {
                    check_sem(w.sem)?;
                }
                let recs = step_records(rank, step, d.m2s.len() as u64, d.s2m.len() as u64, cap)
                    .map_err(ctx(rank, topsp))?;
                let (m0, s0, r0) = (m2s.len() as u32, s2m.len() as u32, pos as u32);
                m2s.extend(d.m2s);
                s2m.extend(d.s2m);
                for r in recs {
                    records.push((pos as u32, r));
                    pos += 1;
                }
                steps.push(StepRange {
                    entry: ei as u32,
                    channel: tape.channel,
                    step: si as u32,
                    m2s: m0..m2s.len() as u32,
                    s2m: s0..s2m.len() as u32,
                    records: r0..pos as u32,
                });
            }
        }
        if pos == first_pos {
            records.push((
                pos as u32,
                SlotRecord {
                    repeat: 0,
                    ..Default::default()
                },
            ));
            pos += 1;
        }
        records.last_mut().expect("at least one record").1.end = true;
        let used = (pos - first_pos).div_ceil(SLOT_RECORDS);
        slot += used;
        ops.push(CcOpPlacement {
            fields,
            channel_id,
            slots: used,
        });
    }
    if slot > SLOTS {
        return Err(Error::resource(format!(
            "emit rank {rank} TOP_SP {topsp}: the step records need {slot} SLOT SPAD slots of {SLOT_RECORDS} records, the 32 KiB SLOT SPAD has {SLOTS}"
        )));
    }
    let ctrl_spad = build_ctrl_spad(&ops).map_err(ctx(rank, topsp))?;
    let mut slot_spad = vec![0u8; slot * SLOT_RECORDS * RECORD_BYTES];
    for (pos, r) in &records {
        let o = *pos as usize * RECORD_BYTES;
        slot_spad[o..o + RECORD_BYTES].copy_from_slice(&r.encode());
    }
    let (ml, sl) = (
        ring_len(m2s.len() as u64, opt.max_ring),
        ring_len(s2m.len() as u64, opt.max_ring),
    );
    let own = |id| map.sem_addr(rank, Sem { rank, topsp, id }, SemWindow::Read);
    let reporter = mine.first().and_then(|&ei| reporter_of(&rp.entries[ei]));
    let neff = NeffConfigs {
        trigger: own(sem_id::TRIGGER)?,
        trigger_next: own(NEXT_SEM)?,
        complete: match reporter {
            Some(r) if !leader => map.sem_addr(
                rank,
                Sem {
                    rank,
                    topsp: r,
                    id: CHAIN_SEM,
                },
                SemWindow::Read,
            )?,
            _ => 0,
        },
        complete_prev: if leader && others > 0 {
            own(CHAIN_SEM)?
        } else {
            0
        },
        complete_prev_target: if leader { others } else { 0 },
        op_num: ops.len() as u32,
        leader,
        ctrl_spad_base: map.ctrl_spad_base(rank, topsp)?,
        slot_spad_base: map.slot_spad_base(rank, topsp)?,
        m2s_ring_base: map.m2s_ring_base(rank, topsp)?,
        s2m_ring_base: map.s2m_ring_base(rank, topsp)?,
    };
    Ok(TopspImage {
        topsp,
        ctrl_spad,
        slot_spad,
        m2s: stamp(&m2s, ml),
        s2m: stamp(&s2m, sl),
        m2s_ring_len: ml as u32,
        s2m_ring_len: sl as u32,
        steps,
        neff,
    })
}

#[cfg(test)]
mod tests;

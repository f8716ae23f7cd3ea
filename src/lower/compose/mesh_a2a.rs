//! MESH all-to-all and all-to-all-v (docs/contract/lowering.md §4.6, §4.12): rank r's block i goes
//! to rank i's output slot r, one event for all destinations.
//!
//! **Step count**: 5 events per rank — FN_BARRIER_FIRST (arrive; in place: stage the input in
//! scratch first) → LOCAL_HNDSHK (wait for every peer's arrival, then the own block to the own
//! output) → A2A_SEND (14: every foreign block to its owner's output, RESULT +1 on each) → SYNC
//! (wait for the G−1 blocks sent to this rank) → FN_BARRIER_LAST. Event semantics and the wait
//! convention are those of [`super::mesh`].
//!
//! **Bytes on the wire per rank**: the sum of its send counts to other ranks (fixed block:
//! (G−1)·S); plus, in place, one local copy of the whole input into scratch.
//!
//! Why the staging: in place, rank i's output slot r is rank i's input block r, which rank i
//! still has to send to rank r. So every rank copies its outgoing blocks to scratch before it
//! arrives; peers write into it only after its arrival, and it sends from the staged copy.
//!
//! The §4.6 slot t3 (node_n == 2 all-to-all-v: … → INTER_GRP_BRDCST → COPY_FROM_HOST(22) →
//! SYNC) is not used: a leg has no node structure, and copying the counts from the host is
//! metadata, not data movement. All-to-all-v uses the same tape as all-to-all with its own
//! counts and displacements ([`A2avLayout`]).

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::lower::compose::mesh::{check_leg, event, finish, Ctx, Role};
use crate::lower::compose::{ComposedLeg, Leg};
use crate::lower::program::{Buf, Loc};
use crate::lower::request::A2avTable;

/// All-to-all-v counts and displacements, indexed by rank id (like [`Leg`] blocks), in elements
/// relative to the leg's source / destination windows. Row r describes what rank r sends.
///
/// The pipeline builds it from the request's resolved A2Av table ([`A2avLayout::from_table`];
/// docs/contract/lowering.md §4.6: send counts and displacements from src1; receive displacements
/// from src1 row 3 if present, otherwise `(dst_total / rank_n) · r`; if row 2 is absent the
/// received counts are written back there — that write-back is host metadata and is not part of the
/// tape).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct A2avLayout {
    /// `send_counts[r][i]`: elements rank r sends to rank i (= elements rank i receives from r).
    pub send_counts: Vec<Vec<u64>>,
    /// `send_displs[r][i]`: where that block starts in rank r's source window.
    pub send_displs: Vec<Vec<u64>>,
    /// `recv_displs[i][r]`: where the block from rank r lands in rank i's destination window.
    pub recv_displs: Vec<Vec<u64>>,
}

impl A2avLayout {
    /// The fixed-block all-to-all of a leg: rank r's `src_block[i]` goes to rank i's
    /// `dst_block[r]`.
    pub fn from_leg(leg: &Leg) -> A2avLayout {
        let n = leg.src_block.len().max(leg.dst_block.len());
        let row_s: Vec<u64> = (0..n)
            .map(|i| leg.src_block.get(i).map_or(0, |b| b.1))
            .collect();
        let row_d: Vec<u64> = (0..n)
            .map(|i| leg.src_block.get(i).map_or(0, |b| b.0))
            .collect();
        let row_r: Vec<u64> = (0..n)
            .map(|i| leg.dst_block.get(i).map_or(0, |b| b.0))
            .collect();
        A2avLayout {
            send_counts: vec![row_s; n],
            send_displs: vec![row_d; n],
            recv_displs: vec![row_r; n],
        }
    }

    /// The layout of a resolved all-to-all-v table ([`A2avTable`], every matrix
    /// `[rank][peer]` in group indices, which are the flat leg's rank ids). The table's
    /// `recv_displs[i][r]` is already "where the block from r lands on i", so this is a
    /// field-by-field copy; `recv_counts` is the transpose of `send_counts` and not needed.
    /// Fails unless every matrix is `rank_n × rank_n`.
    pub fn from_table(t: &A2avTable, rank_n: u32) -> Result<A2avLayout> {
        let n = rank_n as usize;
        for (name, m) in [
            ("send_counts", &t.send_counts),
            ("send_displs", &t.send_displs),
            ("recv_displs", &t.recv_displs),
        ] {
            if m.len() != n || m.iter().any(|row| row.len() != n) {
                return Err(Error::invalid(format!(
                    "all-to-all-v table: {name} is not {n} × {n} (the group has rank_n = {n})"
                )));
            }
        }
        Ok(A2avLayout {
            send_counts: t.send_counts.clone(),
            send_displs: t.send_displs.clone(),
            recv_displs: t.recv_displs.clone(),
        })
    }

    /// A layout from send counts and displacements; receive displacements default to
    /// `(dst_total / n) · r` for the block from rank r (docs/contract/lowering.md §4.6).
    pub fn with_default_recv(
        send_counts: Vec<Vec<u64>>,
        send_displs: Vec<Vec<u64>>,
        dst_total: u64,
    ) -> A2avLayout {
        let n = send_counts.len() as u64;
        let stride = dst_total.checked_div(n).unwrap_or(0);
        let recv_displs = (0..n)
            .map(|_| (0..n).map(|r| stride * r).collect())
            .collect();
        A2avLayout {
            send_counts,
            send_displs,
            recv_displs,
        }
    }

    fn get(m: &[Vec<u64>], a: u32, b: u32, what: &str) -> Result<u64> {
        m.get(a as usize)
            .and_then(|row| row.get(b as usize))
            .copied()
            .ok_or_else(|| Error::invalid(format!("all-to-all-v layout has no {what}[{a}][{b}]")))
    }
    /// Elements rank `from` sends to rank `to`.
    pub fn count(&self, from: u32, to: u32) -> Result<u64> {
        Self::get(&self.send_counts, from, to, "send_counts")
    }
    /// Offset of that block in `from`'s source window.
    pub fn send_displ(&self, from: u32, to: u32) -> Result<u64> {
        Self::get(&self.send_displs, from, to, "send_displs")
    }
    /// Offset of that block in `to`'s destination window.
    pub fn recv_displ(&self, to: u32, from: u32) -> Result<u64> {
        Self::get(&self.recv_displs, to, from, "recv_displs")
    }
}

/// Compose an all-to-all(-v) mesh leg with an explicit layout (see the module doc).
pub fn compose_mesh_a2av(leg: &Leg, sub_type: u8, layout: &A2avLayout) -> Result<ComposedLeg> {
    check_leg(leg)?;
    // In place when source and destination share storage: stage the input first.
    let norm = |b: Buf| match b {
        Buf::Input if leg.request.in_place => Buf::Output,
        other => other,
    };
    let staged = norm(leg.src.buf) == norm(leg.dst.buf);
    if staged && leg.src.buf == Buf::Scratch {
        return Err(Error::invalid(
            "all-to-all leg reading and writing scratch in place: no room to stage",
        ));
    }
    let mut scratch = 0u64;
    let mut tapes = BTreeMap::new();
    for &me in &leg.order {
        let cx = Ctx::new(leg, me)?;
        // Where the block for rank i is read from (staged: its copy in scratch).
        let mut from = BTreeMap::new();
        let mut first = cx.event(event::FN_BARRIER_FIRST);
        let mut stage_off = 0u64;
        for &i in &leg.order {
            let len = layout.count(me, i)?;
            let src = cx.at(me, leg.src, layout.send_displ(me, i)?);
            if staged {
                let dst = Loc {
                    rank: me,
                    buf: Buf::Scratch,
                    offset: leg.scratch_base + stage_off,
                };
                first.transfers.extend(cx.copy(src, dst, len));
                from.insert(i, (dst, len));
                stage_off += len;
            } else {
                from.insert(i, (src, len));
            }
        }
        scratch = scratch.max(stage_off);
        first.signals = cx.trigger_peers(Role::Entry);
        let mut hs = cx.event(event::LOCAL_HNDSHK);
        hs.wait = cx.wait(Role::Entry, cx.p());
        let (own, own_len) = from[&me];
        let own_dst = cx.at(me, leg.dst, layout.recv_displ(me, me)?);
        hs.transfers = cx.copy(own, own_dst, own_len).into_iter().collect();
        let mut send = cx.event(event::A2A_SEND);
        for &i in &cx.peers {
            let (src, len) = from[&i];
            let dst = cx.at(i, leg.dst, layout.recv_displ(i, me)?);
            send.transfers.extend(cx.copy(src, dst, len));
        }
        send.signals = cx.trigger_peers(Role::Result);
        let mut sync = cx.event(event::SYNC);
        sync.wait = cx.wait(Role::Result, cx.p());
        let last = cx.event(event::FN_BARRIER_LAST);
        tapes.insert(me, vec![first, hs, send, sync, last]);
    }
    Ok(finish(leg, sub_type, tapes, scratch))
}

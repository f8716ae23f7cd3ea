//! Decode-back check (issue item 7(c)): decode every emitted descriptor, SLOT record and cc_op
//! slot, and prove each matches the step it came from — addresses resolve (through the
//! [`AddressMap`]) to the step's `Loc`s and `Sem`s at the right byte offsets, lengths add up to
//! `elements × dtype size`, CCE op and dtype nibbles match the step's reduction and the request
//! dtype, packets are framed FIRST…LAST with TX and RX lengths agreeing, RING_ID tags follow
//! the lap rule, the SLOT records carry the step's wait and release exactly its descriptors,
//! and the cc_op slots match their entries. Errors name rank, TOP_SP, descriptor index and the
//! mismatch.

use crate::error::{Error, Result};
use crate::isa::ccop::{pack_cc_op, SPAD_SLOT_CONTINUE_MARK};
use crate::isa::evtsem::{SemAddr, SemWindow};
use crate::isa::slot::{SlotRecord, RECORD_BYTES, SLOT_RECORDS};
use crate::isa::udma::{ring_id_at, Descriptor, Direction};
use crate::lower::addrmap::{AddressMap, Region};
use crate::lower::emit::desc::cce_op;
use crate::lower::emit::{EmittedProgram, StepRange, TopspImage};
use crate::lower::program::{Buf, Loc, Program, RankProgram, Signal, Step, Transfer};
use crate::lower::spad::{cc_op_fields, participants};

/// Check `e` against `p`. See the module doc.
pub fn decode_back(e: &EmittedProgram, p: &Program, map: &AddressMap) -> Result<()> {
    if e.ranks.len() != p.ranks.len() {
        return Err(Error::invalid(format!(
            "decode_back: {} emitted ranks for {} programs",
            e.ranks.len(),
            p.ranks.len()
        )));
    }
    for (er, rp) in e.ranks.iter().zip(&p.ranks) {
        if er.rank != rp.rank {
            return Err(Error::invalid(format!(
                "decode_back: emitted rank {} where rank {} was expected",
                er.rank, rp.rank
            )));
        }
        let mut want: Vec<u8> = rp.entries.iter().flat_map(participants).collect();
        want.sort_unstable();
        want.dedup();
        let got: Vec<u8> = er.topsps.iter().map(|t| t.topsp).collect();
        if want != got {
            return Err(Error::invalid(format!(
                "decode_back: rank {} has TOP_SP images {got:?}, its tapes use {want:?}",
                rp.rank
            )));
        }
        for img in &er.topsps {
            Checker { p, map, rp, img }.run()?;
        }
    }
    Ok(())
}

struct Checker<'a> {
    p: &'a Program,
    map: &'a AddressMap,
    rp: &'a RankProgram,
    img: &'a TopspImage,
}

/// A cursor over one direction's decoded stream, bounded by a step's range.
struct Cur<'a> {
    descs: &'a [Descriptor],
    dir: Direction,
    at: usize,
    end: usize,
}

impl Checker<'_> {
    fn fail(&self, what: String) -> Error {
        Error::invalid(format!(
            "decode_back: rank {} TOP_SP {}: {what}",
            self.rp.rank, self.img.topsp
        ))
    }

    fn decode_stream(
        &self,
        raw: &[[u8; 16]],
        dir: Direction,
        ring_len: u32,
    ) -> Result<Vec<Descriptor>> {
        if !ring_len.is_power_of_two() || ring_len <= 16 {
            return Err(self.fail(format!(
                "{dir:?} ring length {ring_len} is not a power of two above the guard gap"
            )));
        }
        raw.iter()
            .enumerate()
            .map(|(i, b)| {
                let d = Descriptor::decode(b, dir)
                    .map_err(|e| self.fail(format!("{dir:?} descriptor #{i}: {}", e.message())))?;
                let want = ring_id_at(i as u64, u64::from(ring_len));
                if d.ctrl().ring_id != want {
                    return Err(self.fail(format!(
                        "{dir:?} descriptor #{i}: RING_ID {} but lap tag {want}",
                        d.ctrl().ring_id
                    )));
                }
                Ok(d)
            })
            .collect()
    }

    fn run(&self) -> Result<()> {
        let m2s = self.decode_stream(&self.img.m2s, Direction::M2S, self.img.m2s_ring_len)?;
        let s2m = self.decode_stream(&self.img.s2m, Direction::S2M, self.img.s2m_ring_len)?;
        let t = self.img.topsp;
        // The expected step order: entries in order, this TOP_SP's tapes by channel, steps.
        let mine: Vec<usize> = (0..self.rp.entries.len())
            .filter(|&i| participants(&self.rp.entries[i]).contains(&t))
            .collect();
        let mut order = vec![];
        for &ei in &mine {
            let mut tapes: Vec<_> = self.rp.entries[ei]
                .tapes
                .iter()
                .filter(|x| x.topsp == t)
                .collect();
            tapes.sort_by_key(|x| x.channel);
            for tape in tapes {
                for (si, step) in tape.steps.iter().enumerate() {
                    order.push((ei as u32, tape.channel, si as u32, step));
                }
            }
        }
        if order.len() != self.img.steps.len() {
            return Err(self.fail(format!(
                "{} step ranges for {} steps",
                self.img.steps.len(),
                order.len()
            )));
        }
        let (mut mnext, mut snext) = (0u32, 0u32);
        for (sr, &(ei, ch, si, step)) in self.img.steps.iter().zip(&order) {
            if (sr.entry, sr.channel, sr.step) != (ei, ch, si) {
                return Err(self.fail(format!(
                    "step range {sr:?} out of order: expected entry {ei} channel {ch} step {si}"
                )));
            }
            if sr.m2s.start != mnext
                || sr.s2m.start != snext
                || sr.m2s.end as usize > m2s.len()
                || sr.s2m.end as usize > s2m.len()
            {
                return Err(self.fail(format!("step range {sr:?} does not continue the streams at M2S #{mnext} / S2M #{snext}")));
            }
            (mnext, snext) = (sr.m2s.end, sr.s2m.end);
            self.check_step(sr, step, &m2s, &s2m)?;
        }
        if mnext as usize != m2s.len() || snext as usize != s2m.len() {
            return Err(self.fail(format!("M2S #{mnext}.. / S2M #{snext}.. belong to no step")));
        }
        self.check_ctrl(&mine)
    }

    fn region(&self, buf: Buf) -> Region {
        match buf {
            Buf::Input => Region::Input,
            Buf::Output if self.map.buffers().in_place => Region::Input,
            Buf::Output => Region::Output,
            Buf::Scratch => Region::Scratch,
        }
    }

    fn expect_at(&self, c: &Cur, i: usize, addr: u64, want: (u32, Region, u64)) -> Result<()> {
        let got = self
            .map
            .resolve(self.rp.rank, addr)
            .map_err(|e| self.fail(format!("{:?} descriptor #{i}: {}", c.dir, e.message())))?;
        if got != want {
            return Err(self.fail(format!("{:?} descriptor #{i}: address {addr:#x} resolves to {got:?}, the step names {want:?}", c.dir)));
        }
        Ok(())
    }

    /// Take one packet (FIRST … LAST) from a cursor.
    fn packet(&self, c: &mut Cur, sr: &StepRange) -> Result<std::ops::Range<usize>> {
        let start = c.at;
        let bad = |i: usize, m: &str| {
            self.fail(format!(
                "{:?} descriptor #{i} (entry {} channel {} step {}): {m}",
                c.dir, sr.entry, sr.channel, sr.step
            ))
        };
        if start >= c.end {
            return Err(bad(start, "missing: the step needs another packet"));
        }
        if !c.descs[start].ctrl().first {
            return Err(bad(start, "packet does not start with FIRST"));
        }
        let mut i = start;
        loop {
            if i >= c.end {
                return Err(bad(i, "packet has no LAST before the step ends"));
            }
            let ctrl = c.descs[i].ctrl();
            if i > start && ctrl.first {
                return Err(bad(i, "FIRST inside a packet"));
            }
            i += 1;
            if ctrl.last {
                break;
            }
        }
        c.at = i;
        Ok(start..i)
    }

    fn check_step(
        &self,
        sr: &StepRange,
        step: &Step,
        m2s: &[Descriptor],
        s2m: &[Descriptor],
    ) -> Result<()> {
        let mut m = Cur {
            descs: m2s,
            dir: Direction::M2S,
            at: sr.m2s.start as usize,
            end: sr.m2s.end as usize,
        };
        let mut s = Cur {
            descs: s2m,
            dir: Direction::S2M,
            at: sr.s2m.start as usize,
            end: sr.s2m.end as usize,
        };
        for t in &step.transfers {
            self.check_transfer(sr, t, &mut m, &mut s)?;
        }
        for sig in &step.signals {
            self.check_signal(sr, sig, &mut m, &mut s)?;
        }
        for c in [&m, &s] {
            if c.at != c.end {
                return Err(self.fail(format!(
                    "{:?} descriptor #{} (entry {} channel {} step {}): extra descriptor",
                    c.dir, c.at, sr.entry, sr.channel, sr.step
                )));
            }
        }
        self.check_records(sr, step, (sr.m2s.len(), sr.s2m.len()))
    }

    /// Data descriptors of a packet range carry `loc + base ..` contiguously; returns bytes.
    fn data_run(
        &self,
        c: &Cur,
        r: std::ops::Range<usize>,
        loc: Loc,
        base: u64,
        cce_source: bool,
    ) -> Result<u64> {
        let esz = self.p.dtype().sdma_size_table() as u64;
        let mut got = 0;
        for i in r {
            let (ctrl, addr) = match (c.descs[i], c.dir) {
                (Descriptor::TxData { ctrl, meta, addr }, Direction::M2S)
                    if meta.is_none() == cce_source =>
                {
                    (ctrl, addr)
                }
                (Descriptor::RxData { ctrl, addr }, Direction::S2M) => (ctrl, addr),
                (d, _) => {
                    return Err(self.fail(format!(
                        "{:?} descriptor #{i}: expected a data descriptor{}, found {d:?}",
                        c.dir,
                        if cce_source { " of a CCE source" } else { "" }
                    )))
                }
            };
            self.expect_at(
                c,
                i,
                addr,
                (
                    loc.rank,
                    self.region(loc.buf),
                    loc.offset * esz + base + got,
                ),
            )?;
            got += u64::from(ctrl.length);
        }
        Ok(got)
    }

    fn check_transfer(&self, sr: &StepRange, t: &Transfer, m: &mut Cur, s: &mut Cur) -> Result<()> {
        let esz = self.p.dtype().sdma_size_table() as u64;
        let total = t.len() * esz;
        let mut done = 0;
        while done < total {
            let (mr, rr) = (self.packet(m, sr)?, self.packet(s, sr)?);
            let (mi, ri) = (mr.start, rr.start);
            let bytes = match t {
                Transfer::Copy { src, .. } => self.data_run(m, mr, *src, done, false)?,
                Transfer::Reduce { op, srcs, .. } => {
                    let mut i = mr.start;
                    let mut len = None;
                    for (k, src) in srcs.iter().enumerate() {
                        let cce = match m.descs.get(i) {
                            Some(Descriptor::Cce(c)) if i < mr.end => *c,
                            d => return Err(self.fail(format!("M2S descriptor #{i}: expected the CCE compute descriptor of source {k}, found {d:?}"))),
                        };
                        let meta = cce.meta;
                        let dt = self.p.dtype().as_u8();
                        if meta.op != cce_op(*op)
                            || meta.out != dt
                            || meta.last != (k + 1 == srcs.len())
                        {
                            return Err(self.fail(format!(
                                "M2S descriptor #{i}: CCE op {:?} out dtype {} last {} but the step reduces {op:?} of dtype {dt} (source {k} of {})",
                                meta.op, meta.out, meta.last, srcs.len()
                            )));
                        }
                        let l = u64::from(cce.length);
                        if len.is_some_and(|x| x != l) {
                            return Err(self.fail(format!("M2S descriptor #{i}: source {k} length {l} differs from source 0's")));
                        }
                        len = Some(l);
                        let mut j = i + 1;
                        while j < mr.end && !matches!(m.descs[j], Descriptor::Cce(_)) {
                            j += 1;
                        }
                        let got = self.data_run(m, i + 1..j, *src, done, true)?;
                        if got != l {
                            return Err(self.fail(format!("M2S descriptor #{i}: source {k} carries {got} bytes, its compute descriptor says {l}")));
                        }
                        i = j;
                    }
                    if i != mr.end {
                        return Err(self.fail(format!(
                            "M2S descriptor #{i}: CCE packet has more than {} sources",
                            srcs.len()
                        )));
                    }
                    len.unwrap_or(0)
                }
            };
            let rx = self.data_run(s, rr, t.dst(), done, false)?;
            if rx != bytes || bytes == 0 {
                return Err(self.fail(format!(
                    "M2S packet at #{mi} carries {bytes} bytes, S2M packet at #{ri} {rx}"
                )));
            }
            done += bytes;
        }
        if done != total {
            return Err(self.fail(format!(
                "entry {} channel {} step {}: {done} bytes moved, the transfer has {total}",
                sr.entry, sr.channel, sr.step
            )));
        }
        Ok(())
    }

    fn check_signal(&self, sr: &StepRange, sig: &Signal, m: &mut Cur, s: &mut Cur) -> Result<()> {
        let mut left = u64::from(sig.amount);
        while left > 0 {
            let (mr, rr) = (self.packet(m, sr)?, self.packet(s, sr)?);
            let (mi, ri) = (mr.start, rr.start);
            let v = match (mr.len(), m.descs[mi]) {
                (1, Descriptor::TxData { ctrl, meta: Some(_), addr }) if ctrl.length == 4 => {
                    match self.map.resolve(self.rp.rank, addr) {
                        Ok((r, Region::Const, off)) if r == self.rp.rank => off / 4,
                        x => return Err(self.fail(format!("M2S descriptor #{mi}: increment source {addr:#x} resolves to {x:?}, not this rank's constant page"))),
                    }
                }
                (_, d) => return Err(self.fail(format!("M2S descriptor #{mi}: expected a 4-byte increment copy, found {d:?}"))),
            };
            let want = (
                sig.sem.rank,
                Region::Sem(SemAddr {
                    topsp: sig.sem.topsp,
                    window: SemWindow::Inc,
                    idx: sig.sem.id,
                }),
                0,
            );
            match (rr.len(), s.descs[ri]) {
                (1, Descriptor::RxData { ctrl, addr }) if ctrl.length == 4 && ctrl.dmb => {
                    self.expect_at(s, ri, addr, want)?
                }
                (_, d) => {
                    return Err(self.fail(format!(
                        "S2M descriptor #{ri}: expected a 4-byte DMB write to {:?}, found {d:?}",
                        sig.sem
                    )))
                }
            }
            if v == 0 || v > left {
                return Err(self.fail(format!(
                    "M2S descriptor #{mi}: increments by {v}, {left} of {:?}'s {} remain",
                    sig.sem, sig.amount
                )));
            }
            left -= v;
        }
        Ok(())
    }

    fn record(&self, pos: u32) -> Result<SlotRecord> {
        let o = pos as usize * RECORD_BYTES;
        let b: &[u8; RECORD_BYTES] = self
            .img
            .slot_spad
            .get(o..o + RECORD_BYTES)
            .and_then(|s| s.try_into().ok())
            .ok_or_else(|| self.fail(format!("SLOT record {pos} lies beyond the SLOT SPAD")))?;
        SlotRecord::decode(b).map_err(|e| self.fail(format!("SLOT record {pos}: {}", e.message())))
    }

    fn check_records(&self, sr: &StepRange, step: &Step, (m, s): (usize, usize)) -> Result<()> {
        let (mut tm, mut ts) = (0usize, 0usize);
        for pos in sr.records.clone() {
            let r = self.record(pos)?;
            let want = if pos == sr.records.start {
                step.wait
                    .map(|w| (w.sem.topsp, w.sem.id, w.target, w.consume))
            } else {
                None
            };
            if r.wait.map(|w| (w.topsp, w.sem, w.target, w.consume)) != want || r.repeat != 1 {
                return Err(self.fail(format!("SLOT record {pos} (entry {} channel {} step {}): {r:?} but the step waits {:?}", sr.entry, sr.channel, sr.step, step.wait)));
            }
            tm += usize::from(r.m2s);
            ts += usize::from(r.s2m);
        }
        if (tm, ts) != (m, s) || sr.records.is_empty() {
            return Err(self.fail(format!(
                "SLOT records {:?} release {tm}/{ts} descriptors, the step owns {m}/{s}",
                sr.records
            )));
        }
        Ok(())
    }

    fn check_ctrl(&self, mine: &[usize]) -> Result<()> {
        let t = self.img.topsp;
        let ctrl = &self.img.ctrl_spad;
        let mut slot = 0usize;
        for (k, &ei) in mine.iter().enumerate() {
            let e = &self.rp.entries[ei];
            let (f, ch) = cc_op_fields(self.rp.rank, e, t, k + 1 == mine.len())?;
            let want = pack_cc_op([0; 8], &f, ch)?;
            let got = ctrl
                .get(slot * 8..slot * 8 + 8)
                .ok_or_else(|| self.fail(format!("CTRL slot {slot} missing for entry {ei}")))?;
            if got != want {
                return Err(self.fail(format!(
                    "CTRL slot {slot} = {got:02x?}, entry {ei} ('{}') packs to {want:02x?}",
                    e.leg
                )));
            }
            // Records of this entry: from its first slot up to the END record.
            let first = (slot * SLOT_RECORDS) as u32;
            let mut pos = first;
            loop {
                let r = self.record(pos)?;
                pos += 1;
                if r.end {
                    break;
                }
            }
            let ranges: Vec<&StepRange> = self
                .img
                .steps
                .iter()
                .filter(|s| s.entry == ei as u32)
                .collect();
            let (lo, hi) = match (ranges.first(), ranges.last()) {
                (Some(a), Some(b)) => (a.records.start, b.records.end),
                _ => (first, first + 1),
            };
            if lo != first || hi != pos {
                return Err(self.fail(format!("entry {ei}: records {lo}..{hi} but its slot starts at {first} and its END record ends at {pos}")));
            }
            let used = (pos - first).div_ceil(SLOT_RECORDS as u32) as usize;
            for c in slot + 1..slot + used {
                let w = ctrl
                    .get(c * 8..c * 8 + 8)
                    .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
                if w != Some(SPAD_SLOT_CONTINUE_MARK) {
                    return Err(self.fail(format!("CTRL slot {c}: entry {ei} continues there but the slot is {w:x?}, not SPAD_SLOT_CONTINUE_MARK")));
                }
            }
            slot += used;
        }
        if ctrl.len() != slot * 8 || self.img.neff.op_num as usize != mine.len() {
            return Err(self.fail(format!(
                "CTRL SPAD has {} bytes / op_num {}, expected {} slots / {} entries",
                ctrl.len(),
                self.img.neff.op_num,
                slot,
                mine.len()
            )));
        }
        Ok(())
    }
}

//! The executor's reports (split from `executor.rs`): the hang diagnosis of the module doc
//! there, and the live CC contexts and their dumps.

use super::*;
use crate::device::dma::Queue;

impl Machine {
    /// One line: where every unfinished sequencer of this machine waits (the first line of
    /// an error that stopped a shared run, with [`Machine::hang_report`] after it).
    pub fn stuck_summary(&self) -> String {
        let mut parts = Vec::new();
        for a in self.agents.iter().filter(|a| !a.seq.is_done()) {
            let p = a.seq.position();
            let at = format!(
                "{} at cc_op entry {} (CTRL slot {})",
                a.name(),
                p.entry,
                p.slot
            );
            parts.push(match p.waiting_on {
                Some(w) => {
                    let dev = a.device(w.topsp);
                    let value = self
                        .mem
                        .sems(a.chip)
                        .and_then(|c| c.block(BlockId::TopSp(dev)))
                        .map_or(0, |b| b.value(w.sem));
                    format!(
                        "{at} waits semaphore {} of TOP_SP {dev} >= {}, value {value}",
                        w.sem, w.target
                    )
                }
                None => at,
            });
        }
        match parts.is_empty() {
            true => "every TOP_SP of this rank is done".into(),
            false => parts.join("; "),
        }
    }

    /// The diagnosis of a round that changed nothing (module doc).
    pub fn hang_report(&self) -> String {
        let mut s = String::from("collective hang: no TOP_SP or DMA queue can progress");
        for a in &self.agents {
            if let Some((m2s, s2m)) = a.doorbell {
                let (m, r) = (&a.pair.m2s, &a.pair.s2m);
                let _ = write!(
                    s,
                    "\n* {}: waits for ring space to release M2S {m2s} / S2M {s2m} descriptors \
                     (outstanding M2S {} of {}, S2M {} of {}, guard {RING_GUARD}); the engine \
                     cannot consume M2S {:?} / S2M {:?}",
                    a.name(),
                    m.tail() - m.head(),
                    m.len(),
                    r.tail() - r.head(),
                    r.len(),
                    m.pending(),
                    r.pending()
                );
                continue;
            }
            if a.seq.is_done() {
                let (m, r) = (a.pair.m2s.pending(), a.pair.s2m.pending());
                if !m.is_empty() || !r.is_empty() {
                    let _ = write!(
                        s,
                        "\n* {}: sequencer done, but M2S {m:?} / S2M {r:?} posted descriptors \
                         cannot pair",
                        a.name()
                    );
                }
                continue;
            }
            let p = a.seq.position();
            let _ = write!(
                s,
                "\n* {}: cc_op entry {} (CTRL slot {}), {}",
                a.name(),
                p.entry,
                p.slot,
                match (p.stage, p.record) {
                    (Stage::Records, Some(r)) => format!("SLOT SPAD record {r}"),
                    (Stage::Start, _) => "entry start (trigger)".into(),
                    (Stage::Completions, _) => "collecting completions".into(),
                    _ => "no record".into(),
                }
            );
            let Some(w) = p.waiting_on else {
                s.push_str(": blocked without a wait (internal)");
                continue;
            };
            let dev = a.device(w.topsp);
            let read = SemAddr {
                topsp: dev,
                window: SemWindow::Read,
                idx: w.sem,
            }
            .encode();
            let value = self
                .mem
                .sems(a.chip)
                .and_then(|c| c.block(BlockId::TopSp(dev)))
                .map_or(0, |b| b.value(w.sem));
            let _ = write!(
                s,
                ": waits semaphore {} of TOP_SP {dev} (READ {read:#x}) >= {}, value {value}",
                w.sem, w.target
            );
            let signals = self.signallers(a.chip, dev, w.sem);
            if signals.is_empty() {
                s.push_str("; no pending descriptor signals it");
            }
            // Per signalling ring, the next descriptor (the one that should have fired) and
            // how many later ones also target it.
            let mut k = 0;
            while k < signals.len() {
                let first = signals[k];
                let same = signals[k..]
                    .iter()
                    .take_while(|x| (x.chip, x.topsp) == (first.chip, first.topsp))
                    .count();
                let _ = write!(
                    s,
                    "; pending signal: chip {} TOP_SP {} S2M index {}{}",
                    first.chip,
                    first.topsp,
                    first.index,
                    if first.posted { "" } else { " (not posted)" }
                );
                if let Some(r) = first.rank {
                    let _ = write!(s, " of rank {r}");
                }
                if first.remote {
                    s.push_str(" (another executor; indices as it last published them)");
                }
                if same > 1 {
                    let _ = write!(s, " (+{} later)", same - 1);
                }
                k += same;
            }
        }
        s.push_str(&self.ctx_dump_offer());
        s
    }

    /// Not-yet-executed S2M descriptors (any ring: this machine's, and with
    /// [`Machine::peers`] the other executors' as they published them) writing semaphore
    /// `idx` of `(chip, topsp)`.
    fn signallers(&self, chip: u8, topsp: u8, idx: u8) -> Vec<Signal> {
        let mut rings: Vec<(u8, u8, Option<u32>, Queue, bool)> = Vec::new();
        for b in &self.agents {
            rings.push((b.chip, b.topsp, b.rank, b.pair.s2m.clone(), false));
        }
        for r in self.peers.iter().flat_map(|p| p.remote_rings()) {
            if let Ok(q) = Queue::new(Direction::S2M, r.base, r.len) {
                rings.push((r.chip, r.topsp, Some(r.rank), q.at(r.head, r.tail), true));
            }
        }
        let mut out = Vec::new();
        for (c0, t0, rank, q, remote) in rings {
            for i in q.head()..q.head() + q.len() {
                let Some(Descriptor::RxData { addr, .. }) = ring_desc(&self.mem, c0, &q, i) else {
                    if i >= q.tail() {
                        break;
                    }
                    continue;
                };
                let Ok((c, on)) = self.mem.route(c0, addr) else {
                    continue;
                };
                let hit = SemAddr::decode(on).is_some_and(|sa| {
                    sa.topsp == topsp
                        && sa.idx == idx
                        && !matches!(sa.window, SemWindow::Read | SemWindow::Event)
                });
                if c == chip && hit {
                    out.push(Signal {
                        chip: c0,
                        topsp: t0,
                        rank,
                        index: i,
                        posted: i < q.tail(),
                        remote,
                    });
                }
            }
        }
        out
    }

    fn live(&self, chip: u8, topsp: u8) -> Option<(LiveTopsp<'_>, Option<u32>)> {
        let a = self
            .agents
            .iter()
            .find(|a| (a.chip, a.topsp) == (chip, topsp))?;
        let live = LiveTopsp {
            arch: self.arch,
            chip,
            topsp,
            seq: &a.seq,
            pair: &a.pair,
        };
        Some((live, a.rank))
    }

    /// The live CC context of device TOP_SP `topsp` on `chip`, in the docs/contract/carrier.md §3 layout of
    /// [`Machine::arch`] (built on demand, [`crate::device::cc_context`]); `None` if no such TOP_SP.
    pub fn cc_context(&self, chip: u8, topsp: u8) -> Option<Vec<u8>> {
        self.live(chip, topsp).map(|(l, _)| cc_context_image(&l))
    }

    /// [`Machine::cc_context`] dumped by the firmware carrier's `libncfw_ctx_log` (the one
    /// `nrt_init` loaded, else OpenNRT's own writer; its `%p` fields print addresses inside the
    /// image buffer, as the vendor's do).
    pub fn ctx_log(&self, chip: u8, topsp: u8) -> Result<String> {
        let (live, rank) = self
            .live(chip, topsp)
            .ok_or_else(|| Error::invalid(format!("no TOP_SP {topsp} on chip {chip}")))?;
        let name = model_name(chip, topsp, rank);
        // The carrier's `libncfw_ctx_log` when one is installed (`device::settings`).
        let (text, st) =
            crate::device::settings::ctx_log(&cc_context_image(&live), self.arch, name.as_bytes())?;
        match st {
            LogStatus::Complete => Ok(text),
            LogStatus::Truncated => Err(Error::resource(format!(
                "ctx_log of chip {chip} TOP_SP {topsp} does not fit 1 MiB"
            ))),
        }
    }

    /// `(chip, device TOP_SP)` of every sequencer that has not finished, in agent order.
    pub fn stuck_topsps(&self) -> Vec<(u8, u8)> {
        let stuck = self.agents.iter().filter(|a| !a.seq.is_done());
        stuck.map(|a| (a.chip, a.topsp)).collect()
    }

    /// Write, for every stuck TOP_SP, `<dir>/chip<C>_topsp<T>.json` (its [`Machine::ctx_log`])
    /// and `.ctx` (the raw image); returns the `.json` paths.
    pub fn write_ctx_dumps(&self, dir: &Path) -> Result<Vec<PathBuf>> {
        let io = |p: &Path, e: std::io::Error| Error::failure(format!("{}: {e}", p.display()));
        std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
        let mut out = Vec::new();
        for (chip, t) in self.stuck_topsps() {
            let stem = dir.join(dump_file_stem(chip, t));
            let (json, ctx) = (stem.with_extension("json"), stem.with_extension("ctx"));
            let image = self.cc_context(chip, t).unwrap_or_default();
            std::fs::write(&ctx, image).map_err(|e| io(&ctx, e))?;
            std::fs::write(&json, self.ctx_log(chip, t)?).map_err(|e| io(&json, e))?;
            out.push(json);
        }
        Ok(out)
    }

    /// The hang report's closing lines: per stuck TOP_SP how to get its CC-context dump, and
    /// with `OPENNRT_HANG_DUMP=<dir>` the files just written there ([`Machine::write_ctx_dumps`]).
    pub fn ctx_dump_offer(&self) -> String {
        let mut s = String::new();
        let arch = self.arch.id();
        match crate::device::settings::hang_dump_dir() {
            Some(dir) => match self.write_ctx_dumps(&dir) {
                Ok(files) => {
                    for f in files {
                        let _ = write!(
                            s,
                            "\n* CC context dump: {} (raw image beside it: opennrt ctx-log \
                             --arch {arch} --ctx <file>.ctx)",
                            f.display()
                        );
                    }
                }
                Err(e) => {
                    let _ = write!(s, "\n* CC context dumps not written: {e}");
                }
            },
            _ => {
                for (chip, t) in self.stuck_topsps() {
                    let _ = write!(
                        s,
                        "\n* CC context of chip {chip} TOP_SP {t} (arch {arch}): \
                         Machine::ctx_log({chip}, {t}), or set {HANG_DUMP_ENV}=<dir> to write \
                         {}.json",
                        dump_file_stem(chip, t)
                    );
                }
            }
        }
        s
    }
}

/// A not-yet-executed S2M descriptor that writes a waited-on semaphore.
#[derive(Debug, Clone, Copy)]
struct Signal {
    chip: u8,
    topsp: u8,
    rank: Option<u32>,
    index: u64,
    posted: bool,
    remote: bool,
}

/// The descriptor at S2M stream index `i` of ring `q` on `chip` if its slot holds that lap's
/// RING_ID.
fn ring_desc(mem: &Memory, chip: u8, q: &Queue, i: u64) -> Option<Descriptor> {
    let mut b = [0u8; DESC_BYTES];
    mem.read(chip, q.slot_addr(i), &mut b).ok()?;
    if b[3] & 3 != q.expected_ring_id(i) {
        return None;
    }
    Descriptor::decode(&b, Direction::S2M).ok()
}

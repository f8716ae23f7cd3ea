//! The address map the emitter writes into descriptors: where every rank's buffers, constants,
//! scratchpads, rings and semaphores live as SoC addresses (docs/contract/device.md §1.4, §5.1),
//! and the inverse [`AddressMap::resolve`] used by the decode-back check and the software device.
//!
//! **Placement.** Each rank is a logical core ([`RankPlace`]: node, device, core). Ranks on
//! another chip are reached by setting the routed chip id (bits 53:48 + id-valid 54) on the
//! address; ranks on the same chip use the plain local address. The routed chip id is
//! `node · devices_per_node + device` (devices_per_node = 1 + the largest device id placed), so
//! it must stay below 64. Our choice: inter-node traffic is modelled as chip routing too (on
//! real hardware it goes through the network proxy); the software device routes both the same.
//!
//! **TOP_SPs.** A rank's TOP_SP `t` is device TOP_SP `core · per_rank + t`, with
//! `per_rank = lnc · TOP_SPs per physical core` (v3/v4: 16 TOP_SPs / 8 physical cores = 2;
//! v2: 6 / 2 = 3). Its semaphores sit in that device TOP_SP's EVT_SEM block.
//!
//! **HBM windows (our choice, spec gives none).** Every (chip, logical core) owns a 1 TiB window
//! holding the constant page, the per-TOP_SP program areas (CTRL/SLOT SPAD, M2S/S2M prings) and
//! the data buffers (input, output, scratch, each 4 KiB aligned). The layout is a fact the device
//! shares, so its constants and arithmetic live in [`crate::isa::memmap`], whose doc has the table.

use crate::error::{Error, Result};
use crate::isa::evtsem::{self, Route, SemAddr, SemWindow, SocAddr};
use crate::lower::program::{Buf, Loc, Sem};

use crate::isa::memmap::{self, ProgramPart};
/// The layout constants live in [`crate::isa::memmap`] (shared with the device); re-exported
/// here so the lowering keeps one import path.
pub use crate::isa::memmap::{
    CONST_WORDS, CORE_WINDOW, CTRL_SPAD_OFF, DATA_OFF, HBM_BASE, M2S_RING_OFF, MAX_CORES,
    MAX_RING_DESCS, PROGRAM_OFF, PROGRAM_STRIDE, S2M_RING_OFF, SLOT_SPAD_OFF,
};

/// The silicon generation (shared with the topology model).
pub use crate::lower::topology::Generation;

/// Where a rank runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RankPlace {
    /// Node (instance).
    pub node: u32,
    /// Device (chip) on the node.
    pub device: u32,
    /// Logical core within the device.
    pub core: u32,
}

/// Per-rank buffer sizes in bytes (the same on every rank).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BufferSizes {
    /// Input bytes.
    pub input: u64,
    /// Output bytes.
    pub output: u64,
    /// Scratch bytes.
    pub scratch: u64,
    /// Input and output are one storage.
    pub in_place: bool,
}

/// What an address names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Region {
    /// The constant page.
    Const,
    /// Input (also the output when in place).
    Input,
    /// Output (not in place).
    Output,
    /// Scratch.
    Scratch,
    /// A TOP_SP's CTRL SPAD.
    CtrlSpad(u8),
    /// A TOP_SP's SLOT SPAD.
    SlotSpad(u8),
    /// A TOP_SP's M2S pring.
    M2sRing(u8),
    /// A TOP_SP's S2M pring.
    S2mRing(u8),
    /// A semaphore window of a rank's TOP_SP (`topsp` is rank-local).
    Sem(SemAddr),
}

/// The address map of one communicator.
#[derive(Debug, Clone)]
pub struct AddressMap {
    places: Vec<RankPlace>,
    gen: Generation,
    per_rank: u32,
    devices_per_node: u32,
    bufs: BufferSizes,
    input_off: u64,
    output_off: u64,
    scratch_off: u64,
    data_end: u64,
}

impl AddressMap {
    /// Build the map. Fails if two ranks share a core, a chip id does not fit 6 bits, a core
    /// index exceeds the windows, or the buffers do not fit a window.
    pub fn new(
        places: Vec<RankPlace>,
        lnc: u32,
        gen: Generation,
        bufs: BufferSizes,
    ) -> Result<AddressMap> {
        let lnc = lnc.max(1);
        let per_rank = gen.topsps_per_device() / gen.physical_cores() * lnc;
        let devices_per_node = places.iter().map(|p| p.device + 1).max().unwrap_or(1);
        let mut seen = std::collections::HashSet::new();
        for (r, p) in places.iter().enumerate() {
            if !seen.insert(*p) {
                return Err(Error::invalid(format!(
                    "address map: rank {r} shares {p:?} with another rank"
                )));
            }
            if p.core >= MAX_CORES || (p.core + 1) * per_rank > gen.topsps_per_device() {
                return Err(Error::invalid(format!(
                    "address map: rank {r} core {} has no TOP_SPs left ({} per rank, {} per device)",
                    p.core,
                    per_rank,
                    gen.topsps_per_device()
                )));
            }
            let chip = u64::from(p.node) * u64::from(devices_per_node) + u64::from(p.device);
            if chip >= 64 {
                return Err(Error::invalid(format!(
                    "address map: rank {r} routed chip id {chip} does not fit bits 53:48"
                )));
            }
        }
        let input_off = DATA_OFF;
        let output_off = if bufs.in_place {
            input_off
        } else {
            input_off + memmap::align_buf(bufs.input)
        };
        let io_end = if bufs.in_place {
            input_off + memmap::align_buf(bufs.input.max(bufs.output))
        } else {
            output_off + memmap::align_buf(bufs.output)
        };
        let scratch_off = io_end;
        let data_end = scratch_off + memmap::align_buf(bufs.scratch);
        if data_end > CORE_WINDOW {
            return Err(Error::resource(format!(
                "address map: buffers of {bufs:?} do not fit a {CORE_WINDOW:#x}-byte core window"
            )));
        }
        Ok(AddressMap {
            places,
            gen,
            per_rank,
            devices_per_node,
            bufs,
            input_off,
            output_off,
            scratch_off,
            data_end,
        })
    }

    /// Number of ranks.
    pub fn ranks(&self) -> u32 {
        self.places.len() as u32
    }
    /// The generation.
    pub fn gen(&self) -> Generation {
        self.gen
    }
    /// The buffer sizes.
    pub fn buffers(&self) -> BufferSizes {
        self.bufs
    }
    /// TOP_SPs each rank may use.
    pub fn topsps_per_rank(&self) -> u8 {
        self.per_rank as u8
    }
    fn place(&self, rank: u32) -> Result<RankPlace> {
        self.places.get(rank as usize).copied().ok_or_else(|| {
            Error::invalid(format!(
                "address map: no rank {rank} ({} ranks)",
                self.places.len()
            ))
        })
    }
    /// The routed chip id of a rank.
    pub fn chip_id(&self, rank: u32) -> Result<u8> {
        let p = self.place(rank)?;
        Ok((p.node * self.devices_per_node + p.device) as u8)
    }
    /// The device TOP_SP index of a rank's TOP_SP `t`.
    pub fn device_topsp(&self, rank: u32, t: u8) -> Result<u8> {
        let p = self.place(rank)?;
        if u32::from(t) >= self.per_rank {
            return Err(Error::invalid(format!(
                "address map: rank {rank} TOP_SP {t} out of range ({} per rank)",
                self.per_rank
            )));
        }
        Ok((p.core * self.per_rank + u32::from(t)) as u8)
    }
    fn window(&self, rank: u32) -> Result<u64> {
        Ok(memmap::core_window(self.place(rank)?.core))
    }
    /// Add the routing bits for an address on `target`'s chip seen from `from`'s.
    pub fn route(&self, from: u32, target: u32, on_chip: u64) -> Result<u64> {
        let (fc, tc) = (self.chip_id(from)?, self.chip_id(target)?);
        let route = if fc == tc {
            Route::Local
        } else {
            Route::Chip(tc)
        };
        Ok(SocAddr {
            local: on_chip & evtsem::LOCAL_MASK,
            die: (on_chip >> evtsem::DIE_BIT) & 1 == 1,
            route,
        }
        .encode())
    }
    /// On-chip address of byte `off` of a rank's buffer.
    pub fn buf_on_chip(&self, rank: u32, buf: Buf, off: u64) -> Result<u64> {
        let (base, size) = match buf {
            Buf::Input => (
                self.input_off,
                if self.bufs.in_place {
                    self.bufs.input.max(self.bufs.output)
                } else {
                    self.bufs.input
                },
            ),
            Buf::Output => (
                self.output_off,
                if self.bufs.in_place {
                    self.bufs.input.max(self.bufs.output)
                } else {
                    self.bufs.output
                },
            ),
            Buf::Scratch => (self.scratch_off, self.bufs.scratch),
        };
        if off > size {
            return Err(Error::invalid(format!(
                "address map: rank {rank} {buf:?} byte {off} beyond its {size} bytes"
            )));
        }
        Ok(self.window(rank)? + base + off)
    }
    /// The SoC address `from` uses for `len_bytes` at a location (elements of `elem` bytes).
    pub fn loc_addr(&self, from: u32, loc: Loc, elem: u64, len_bytes: u64) -> Result<u64> {
        let off = loc.offset * elem;
        self.buf_on_chip(loc.rank, loc.buf, off + len_bytes)?;
        self.route(from, loc.rank, self.buf_on_chip(loc.rank, loc.buf, off)?)
    }
    /// Address of the constant word holding `value` on `rank`'s own chip.
    pub fn const_addr(&self, rank: u32, value: u32) -> Result<u64> {
        if value >= CONST_WORDS {
            return Err(Error::invalid(format!(
                "address map: no constant word for {value}"
            )));
        }
        Ok(self.window(rank)? + 4 * u64::from(value))
    }
    /// Address of the constant word holding 1 (the source of semaphore increments).
    pub fn const_one_addr(&self, rank: u32) -> Result<u64> {
        self.const_addr(rank, 1)
    }
    /// Base of a TOP_SP's program area (on its rank's chip).
    fn program(&self, rank: u32, t: u8) -> Result<u64> {
        self.device_topsp(rank, t)?;
        Ok(memmap::program_area(self.place(rank)?.core, t))
    }
    /// CTRL SPAD base of a rank's TOP_SP.
    pub fn ctrl_spad_base(&self, rank: u32, t: u8) -> Result<u64> {
        Ok(self.program(rank, t)? + CTRL_SPAD_OFF)
    }
    /// SLOT SPAD base of a rank's TOP_SP.
    pub fn slot_spad_base(&self, rank: u32, t: u8) -> Result<u64> {
        Ok(self.program(rank, t)? + SLOT_SPAD_OFF)
    }
    /// M2S pring base of a rank's TOP_SP.
    pub fn m2s_ring_base(&self, rank: u32, t: u8) -> Result<u64> {
        Ok(self.program(rank, t)? + M2S_RING_OFF)
    }
    /// S2M pring base of a rank's TOP_SP.
    pub fn s2m_ring_base(&self, rank: u32, t: u8) -> Result<u64> {
        Ok(self.program(rank, t)? + S2M_RING_OFF)
    }
    /// A semaphore window address as seen from `from` (routed when on another chip).
    pub fn sem_addr(&self, from: u32, sem: Sem, window: SemWindow) -> Result<u64> {
        let topsp = self.device_topsp(sem.rank, sem.topsp)?;
        self.route(
            from,
            sem.rank,
            SemAddr {
                topsp,
                window,
                idx: sem.id,
            }
            .encode(),
        )
    }
    /// The INC window address of `sem` as seen from `from` (docs/contract/device.md §1.2, §5.1).
    pub fn sem_inc_addr(&self, from: u32, sem: Sem) -> Result<u64> {
        self.sem_addr(from, sem, SemWindow::Inc)
    }

    /// Inverse: which rank, region and byte offset an address issued by `from` names.
    pub fn resolve(&self, from: u32, addr: u64) -> Result<(u32, Region, u64)> {
        let soc = SocAddr::decode(addr)?;
        let chip = match soc.route {
            Route::Local => self.chip_id(from)?,
            Route::Chip(c) => c,
            Route::Neighbor { .. } => {
                return Err(Error::invalid(format!(
                    "address {addr:#x}: neighbour routing is not used by this map"
                )))
            }
        };
        let on_chip = soc.on_chip();
        let fail = || {
            Error::invalid(format!(
                "address {addr:#x} (from rank {from}) names nothing in the map"
            ))
        };
        let rank_of = |core: u32| {
            (0..self.ranks())
                .find(|&r| {
                    self.chip_id(r).ok() == Some(chip) && self.places[r as usize].core == core
                })
                .ok_or_else(fail)
        };
        if let Some(s) = SemAddr::decode(on_chip) {
            let core = u32::from(s.topsp) / self.per_rank;
            let t = (u32::from(s.topsp) % self.per_rank) as u8;
            return Ok((rank_of(core)?, Region::Sem(SemAddr { topsp: t, ..s }), 0));
        }
        let (core, off) = memmap::window_of(on_chip).ok_or_else(fail)?;
        let rank = rank_of(core)?;
        if off < memmap::CONST_PAGE_BYTES {
            return Ok((rank, Region::Const, off));
        }
        if off >= PROGRAM_OFF && off < PROGRAM_OFF + u64::from(self.per_rank) * PROGRAM_STRIDE {
            let (t, part, p) = memmap::program_part(off, self.per_rank).ok_or_else(fail)?;
            let region = match part {
                ProgramPart::CtrlSpad => Region::CtrlSpad(t),
                ProgramPart::SlotSpad => Region::SlotSpad(t),
                ProgramPart::M2sRing => Region::M2sRing(t),
                ProgramPart::S2mRing => Region::S2mRing(t),
            };
            return Ok((rank, region, p));
        }
        if off >= self.input_off && off < self.data_end {
            let (region, base) = if off >= self.scratch_off {
                (Region::Scratch, self.scratch_off)
            } else if off >= self.output_off && !self.bufs.in_place {
                (Region::Output, self.output_off)
            } else {
                (Region::Input, self.input_off)
            };
            return Ok((rank, region, off - base));
        }
        Err(fail())
    }
}

#[cfg(test)]
mod tests;

//! OpenNRT's own firmware images for the simulated TOP_SP (never vendor bytes), one IRAM/DRAM
//! pair per arch key, built at compile time into read-only statics so that
//! `libncfw_get_image` can hand out pointers valid for the library's lifetime (docs/contract/carrier.md
//! §2.3). **These images are for OpenNRT's software device only; they must never be uploaded to
//! real silicon.**
//!
//! # Format (version 1), all fields little-endian
//!
//! IRAM image, [`IRAM_SIZE`] bytes:
//!
//! | off | size | field |
//! |---|---|---|
//! | 0x00 | 8 | magic `ONRTIRAM` |
//! | 0x08 | 2 | format version (1) |
//! | 0x0A | 2 | header size (0x40) |
//! | 0x0C | 4 | arch id (5, 12, 20, 28) |
//! | 0x10 | 16 | generation codename, ASCII, NUL-padded (`SUNDA`, `CAYMAN`, `MARIANA`, `MARIANA_PLUS`) |
//! | 0x20 | 4 | image size (== the IRAM length) |
//! | 0x24 | 4 | dispatch table offset (0x40) |
//! | 0x28 | 4 | dispatch entry count |
//! | 0x2C | 4 | dispatch entry size (8) |
//! | 0x30 | 4 | CC-context size the firmware expects (0x32C6 / 0x44E6) |
//! | 0x34 | 2 | mesh events per context (50 / 108) |
//! | 0x36 | 2 | ring channels per context (32) |
//! | 0x38 | 4 | size of the matching DRAM image |
//! | 0x3C | 4 | checksum: FNV-1a 32 of the whole image with this field read as zero |
//! | 0x40 | 8·n | dispatch table |
//! | then | | the notice `OpenNRT software-device firmware; never upload to silicon`, NUL, zero fill |
//!
//! Dispatch entry (8 bytes): `u8 class`, `u8 key`, `u16 handler id`, `u32 reserved (0)`. The
//! simulated TOP_SP looks up `(class, key)` and runs the handler it names:
//!
//! | class | key | handler | meaning |
//! |---|---|---|---|
//! | 1 `AlgoType` | 0 (`algo_type` RING) | 0x0001 `Ring` | cc_op with the `channel_list` view |
//! | 1 `AlgoType` | 1 (`algo_type` MESH) | 0x0002 `Mesh` | cc_op with the `{sema_shift_offset, sema_mask}` view |
//! | 2 `Barrier` | 0 (gate bit clear) | 0x0010 `HostBarrier` | `host_barrier` start/done |
//! | 2 `Barrier` | 1 (gate bit set) | 0x0011 `DeviceBarrier` | the 4-step device barrier |
//! | 3 `Chain` | 0 (`trigger_next`) | 0x0020 `ChainNext` | start the next cc_op slot |
//! | 3 `Chain` | 1 (block switch) | 0x0021 `BlockSwitch` | basic-block switch (`switch_completed`) |
//! | 15 `Default` | 0xFF | 0x00FF `Fault` | any `algo_type` without an entry: diagnosed fault |
//!
//! DRAM template, 0x36C0 bytes for key 5 and 0x4E00 for 12/20/28 (the vendor's sizes; keys 20
//! and 28 share one image): a 0x40-byte header, then zeros (the TOP_SP's working memory):
//!
//! | off | size | field |
//! |---|---|---|
//! | 0x00 | 8 | magic `ONRTDRAM` |
//! | 0x08 | 2 | format version (1) |
//! | 0x0A | 2 | header size (0x40) |
//! | 0x0C | 4 | silicon family (2, 3, 4; v4 and v4+ share family 4) |
//! | 0x10 | 4 | image size (== the DRAM length) |
//! | 0x14 | 4 | offset of the CC-context area ([`DRAM_CTX_OFFSET`]) |
//! | 0x18 | 4 | size of the CC-context area (the arch's minimum context size) |
//! | 0x1C | 4 | mesh events per context |
//! | 0x20 | 28 | reserved (0) |
//! | 0x3C | 4 | checksum, as for IRAM |

use super::ctx_layout::{Arch, RING_CHANNELS};
use crate::error::{Error, Result};

/// Current format version of both images.
pub const FORMAT_VERSION: u16 = 1;
/// Bytes of every IRAM image.
pub const IRAM_SIZE: usize = 0x200;
/// DRAM size for key 5 (the vendor's).
pub const DRAM_SIZE_V2: usize = 0x36C0;
/// DRAM size for keys 12, 20, 28 (the vendor's).
pub const DRAM_SIZE_V3: usize = 0x4E00;
/// Where the CC-context area starts in DRAM.
pub const DRAM_CTX_OFFSET: usize = 0x100;
/// IRAM magic.
pub const IRAM_MAGIC: [u8; 8] = *b"ONRTIRAM";
/// DRAM magic.
pub const DRAM_MAGIC: [u8; 8] = *b"ONRTDRAM";
const HEADER_SIZE: usize = 0x40;
const ENTRY_SIZE: usize = 8;
const CHECKSUM_OFF: usize = 0x3C;
const NOTICE: &[u8] = b"OpenNRT software-device firmware; never upload to silicon";

/// Dispatch classes of the IRAM table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum DispatchClass {
    /// Key = the cc_op `algo_type` nibble.
    AlgoType = 1,
    /// Key = the barrier gate bit.
    Barrier = 2,
    /// Key 0 = `trigger_next` chaining, 1 = basic-block switch.
    Chain = 3,
    /// Key 0xFF: the fallback.
    Default = 15,
}

/// Handler ids the simulated TOP_SP implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum Handler {
    /// Ring cc_op.
    Ring = 0x0001,
    /// Mesh cc_op.
    Mesh = 0x0002,
    /// Host barrier.
    HostBarrier = 0x0010,
    /// Device barrier.
    DeviceBarrier = 0x0011,
    /// `trigger_next` chaining.
    ChainNext = 0x0020,
    /// Basic-block switch.
    BlockSwitch = 0x0021,
    /// Diagnosed fault.
    Fault = 0x00FF,
}

impl Handler {
    fn from_id(id: u16) -> Option<Handler> {
        Some(match id {
            0x0001 => Handler::Ring,
            0x0002 => Handler::Mesh,
            0x0010 => Handler::HostBarrier,
            0x0011 => Handler::DeviceBarrier,
            0x0020 => Handler::ChainNext,
            0x0021 => Handler::BlockSwitch,
            0x00FF => Handler::Fault,
            _ => return None,
        })
    }
}

const DISPATCH: [(DispatchClass, u8, Handler); 7] = [
    (DispatchClass::AlgoType, 0, Handler::Ring),
    (DispatchClass::AlgoType, 1, Handler::Mesh),
    (DispatchClass::Barrier, 0, Handler::HostBarrier),
    (DispatchClass::Barrier, 1, Handler::DeviceBarrier),
    (DispatchClass::Chain, 0, Handler::ChainNext),
    (DispatchClass::Chain, 1, Handler::BlockSwitch),
    (DispatchClass::Default, 0xFF, Handler::Fault),
];

const fn put(b: &mut [u8], off: usize, v: &[u8]) {
    let mut i = 0;
    while i < v.len() {
        b[off + i] = v[i];
        i += 1;
    }
}

const fn fnv1a(b: &[u8]) -> u32 {
    let mut h: u32 = 0x811C_9DC5;
    let mut i = 0;
    while i < b.len() {
        let byte = if i >= CHECKSUM_OFF && i < CHECKSUM_OFF + 4 {
            0
        } else {
            b[i]
        };
        h ^= byte as u32;
        h = h.wrapping_mul(0x0100_0193);
        i += 1;
    }
    h
}

const fn build_iram(arch: Arch) -> [u8; IRAM_SIZE] {
    let mut b = [0u8; IRAM_SIZE];
    let l = arch.layout();
    put(&mut b, 0x00, &IRAM_MAGIC);
    put(&mut b, 0x08, &FORMAT_VERSION.to_le_bytes());
    put(&mut b, 0x0A, &(HEADER_SIZE as u16).to_le_bytes());
    put(&mut b, 0x0C, &arch.id().to_le_bytes());
    put(&mut b, 0x10, arch.codename().as_bytes());
    put(&mut b, 0x20, &(IRAM_SIZE as u32).to_le_bytes());
    put(&mut b, 0x24, &(HEADER_SIZE as u32).to_le_bytes());
    put(&mut b, 0x28, &(DISPATCH.len() as u32).to_le_bytes());
    put(&mut b, 0x2C, &(ENTRY_SIZE as u32).to_le_bytes());
    put(&mut b, 0x30, &(l.min_size as u32).to_le_bytes());
    put(&mut b, 0x34, &(l.mesh_events as u16).to_le_bytes());
    put(&mut b, 0x36, &(RING_CHANNELS as u16).to_le_bytes());
    put(&mut b, 0x38, &(dram_size(arch) as u32).to_le_bytes());
    let mut i = 0;
    while i < DISPATCH.len() {
        let (class, key, handler) = DISPATCH[i];
        let o = HEADER_SIZE + ENTRY_SIZE * i;
        b[o] = class as u8;
        b[o + 1] = key;
        put(&mut b, o + 2, &(handler as u16).to_le_bytes());
        i += 1;
    }
    put(&mut b, HEADER_SIZE + ENTRY_SIZE * DISPATCH.len(), NOTICE);
    let sum = fnv1a(&b);
    put(&mut b, CHECKSUM_OFF, &sum.to_le_bytes());
    b
}

const fn dram_size(arch: Arch) -> usize {
    match arch {
        Arch::V2 => DRAM_SIZE_V2,
        _ => DRAM_SIZE_V3,
    }
}

const fn build_dram<const N: usize>(arch: Arch) -> [u8; N] {
    let mut b = [0u8; N];
    let l = arch.layout();
    assert!(N == dram_size(arch));
    assert!(DRAM_CTX_OFFSET + l.min_size <= N);
    put(&mut b, 0x00, &DRAM_MAGIC);
    put(&mut b, 0x08, &FORMAT_VERSION.to_le_bytes());
    put(&mut b, 0x0A, &(HEADER_SIZE as u16).to_le_bytes());
    put(&mut b, 0x0C, &arch.family().to_le_bytes());
    put(&mut b, 0x10, &(N as u32).to_le_bytes());
    put(&mut b, 0x14, &(DRAM_CTX_OFFSET as u32).to_le_bytes());
    put(&mut b, 0x18, &(l.min_size as u32).to_le_bytes());
    put(&mut b, 0x1C, &(l.mesh_events as u32).to_le_bytes());
    let sum = fnv1a(&b);
    put(&mut b, CHECKSUM_OFF, &sum.to_le_bytes());
    b
}

static IRAM_V2: [u8; IRAM_SIZE] = build_iram(Arch::V2);
static IRAM_V3: [u8; IRAM_SIZE] = build_iram(Arch::V3);
static IRAM_V4: [u8; IRAM_SIZE] = build_iram(Arch::V4);
static IRAM_V4_PLUS: [u8; IRAM_SIZE] = build_iram(Arch::V4Plus);
static DRAM_V2: [u8; DRAM_SIZE_V2] = build_dram(Arch::V2);
static DRAM_V3: [u8; DRAM_SIZE_V3] = build_dram(Arch::V3);
/// Shared by keys 20 and 28 (as the vendor's v4/v4+ DRAM images are).
static DRAM_V4: [u8; DRAM_SIZE_V3] = build_dram(Arch::V4);

/// The shipped `(iram, dram)` images of `arch`: static, read-only, never freed.
pub fn image_for(arch: Arch) -> (&'static [u8], &'static [u8]) {
    match arch {
        Arch::V2 => (&IRAM_V2, &DRAM_V2),
        Arch::V3 => (&IRAM_V3, &DRAM_V3),
        Arch::V4 => (&IRAM_V4, &DRAM_V4),
        Arch::V4Plus => (&IRAM_V4_PLUS, &DRAM_V4),
    }
}

/// One parsed dispatch-table entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DispatchEntry {
    /// What the key means.
    pub class: DispatchClass,
    /// The key.
    pub key: u8,
    /// The handler to run.
    pub handler: Handler,
}

/// The DRAM template's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DramInfo {
    /// Silicon family (2, 3, 4).
    pub family: u32,
    /// Image size.
    pub size: usize,
    /// Offset of the CC-context area.
    pub ctx_offset: usize,
    /// Size of the CC-context area.
    pub ctx_size: usize,
    /// Mesh events per context.
    pub mesh_events: usize,
}

/// A validated IRAM/DRAM pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirmwareImage {
    /// The arch the IRAM is built for.
    pub arch: Arch,
    /// Format version.
    pub format_version: u16,
    /// Generation codename.
    pub generation: String,
    /// The dispatch table, in image order.
    pub dispatch: Vec<DispatchEntry>,
    /// The DRAM template header.
    pub dram: DramInfo,
}

fn rd16(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}
fn rd32(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

fn bad(which: &str, off: usize, what: String) -> Error {
    Error::invalid(format!("firmware {which} image, offset {off:#x}: {what}"))
        .with_field(which)
        .with_step(off as u64)
}

fn check_common(which: &str, b: &[u8], magic: &[u8; 8]) -> Result<()> {
    if b.len() < HEADER_SIZE {
        return Err(bad(
            which,
            0,
            format!("{} bytes is shorter than the 0x40-byte header", b.len()),
        ));
    }
    if &b[..8] != magic {
        return Err(bad(
            which,
            0,
            format!(
                "magic {:02X?} is not {:?}",
                &b[..8],
                std::str::from_utf8(magic).unwrap_or("?")
            ),
        ));
    }
    let v = rd16(b, 0x08);
    if v != FORMAT_VERSION {
        return Err(bad(
            which,
            0x08,
            format!("format version {v} is not supported (expected {FORMAT_VERSION})"),
        ));
    }
    let h = rd16(b, 0x0A);
    if usize::from(h) != HEADER_SIZE {
        return Err(bad(
            which,
            0x0A,
            format!("header size {h:#x}, expected 0x40"),
        ));
    }
    let (want, got) = (fnv1a(b), rd32(b, CHECKSUM_OFF));
    if want != got {
        return Err(bad(
            which,
            CHECKSUM_OFF,
            format!("checksum {got:#010x}, computed {want:#010x}"),
        ));
    }
    Ok(())
}

impl FirmwareImage {
    /// Validate and decode an IRAM/DRAM pair (for the software device).
    ///
    /// # Errors
    /// `Invalid`, naming the image, the byte offset and the rule: bad magic, unsupported format
    /// version, wrong header or image size, checksum mismatch, unknown arch id, codename not
    /// matching the arch, dispatch table out of bounds or with an unknown class/handler or a
    /// duplicate key, a DRAM template of another silicon family, or a context geometry that
    /// disagrees with the arch's layout.
    pub fn parse(iram: &[u8], dram: &[u8]) -> Result<FirmwareImage> {
        check_common("IRAM", iram, &IRAM_MAGIC)?;
        check_common("DRAM", dram, &DRAM_MAGIC)?;
        let id = rd32(iram, 0x0C);
        let arch =
            Arch::from_id(id).ok_or_else(|| bad("IRAM", 0x0C, format!("unknown arch id {id}")))?;
        let name_raw = &iram[0x10..0x20];
        let end = name_raw
            .iter()
            .position(|&c| c == 0)
            .unwrap_or(name_raw.len());
        let generation = String::from_utf8_lossy(&name_raw[..end]).into_owned();
        if generation != arch.codename() {
            return Err(bad(
                "IRAM",
                0x10,
                format!(
                    "generation {generation:?} does not match arch {id} ({})",
                    arch.codename()
                ),
            ));
        }
        let size = rd32(iram, 0x20) as usize;
        if size != iram.len() {
            return Err(bad(
                "IRAM",
                0x20,
                format!("header says {size:#x} bytes, image has {:#x}", iram.len()),
            ));
        }
        let l = arch.layout();
        let expect = [
            (0x30, rd32(iram, 0x30) as usize, l.min_size, "context size"),
            (
                0x34,
                usize::from(rd16(iram, 0x34)),
                l.mesh_events,
                "mesh events",
            ),
            (
                0x36,
                usize::from(rd16(iram, 0x36)),
                RING_CHANNELS,
                "ring channels",
            ),
            (0x38, rd32(iram, 0x38) as usize, dram.len(), "DRAM size"),
        ];
        for (off, got, want, what) in expect {
            if got != want {
                return Err(bad(
                    "IRAM",
                    off,
                    format!("{what} {got:#x}, expected {want:#x}"),
                ));
            }
        }
        let (t_off, n, esz) = (
            rd32(iram, 0x24) as usize,
            rd32(iram, 0x28) as usize,
            rd32(iram, 0x2C) as usize,
        );
        if esz != ENTRY_SIZE
            || t_off < HEADER_SIZE
            || n.checked_mul(esz)
                .and_then(|x| x.checked_add(t_off))
                .is_none_or(|e| e > iram.len())
        {
            return Err(bad(
                "IRAM",
                0x24,
                format!("dispatch table at {t_off:#x}, {n} entries of {esz} bytes does not fit"),
            ));
        }
        let mut dispatch = Vec::with_capacity(n);
        for i in 0..n {
            let o = t_off + ENTRY_SIZE * i;
            let class = match iram[o] {
                1 => DispatchClass::AlgoType,
                2 => DispatchClass::Barrier,
                3 => DispatchClass::Chain,
                15 => DispatchClass::Default,
                c => {
                    return Err(bad(
                        "IRAM",
                        o,
                        format!("dispatch entry {i}: unknown class {c}"),
                    ))
                }
            };
            let hid = rd16(iram, o + 2);
            let handler = Handler::from_id(hid).ok_or_else(|| {
                bad(
                    "IRAM",
                    o + 2,
                    format!("dispatch entry {i}: unknown handler {hid:#06x}"),
                )
            })?;
            let e = DispatchEntry {
                class,
                key: iram[o + 1],
                handler,
            };
            if dispatch
                .iter()
                .any(|d: &DispatchEntry| d.class == e.class && d.key == e.key)
            {
                return Err(bad(
                    "IRAM",
                    o,
                    format!("dispatch entry {i}: duplicate key {:?}/{}", class, e.key),
                ));
            }
            dispatch.push(e);
        }
        let dram_info = DramInfo {
            family: rd32(dram, 0x0C),
            size: rd32(dram, 0x10) as usize,
            ctx_offset: rd32(dram, 0x14) as usize,
            ctx_size: rd32(dram, 0x18) as usize,
            mesh_events: rd32(dram, 0x1C) as usize,
        };
        if dram_info.family != arch.family() {
            return Err(bad(
                "DRAM",
                0x0C,
                format!(
                    "family {} does not serve arch {id} (family {})",
                    dram_info.family,
                    arch.family()
                ),
            ));
        }
        if dram_info.size != dram.len() {
            return Err(bad(
                "DRAM",
                0x10,
                format!(
                    "header says {:#x} bytes, image has {:#x}",
                    dram_info.size,
                    dram.len()
                ),
            ));
        }
        if dram_info.ctx_size != l.min_size || dram_info.mesh_events != l.mesh_events {
            return Err(bad(
                "DRAM",
                0x18,
                format!(
                    "context area {:#x} B / {} mesh events, arch wants {:#x} / {}",
                    dram_info.ctx_size, dram_info.mesh_events, l.min_size, l.mesh_events
                ),
            ));
        }
        if dram_info.ctx_offset < HEADER_SIZE
            || dram_info.ctx_offset + dram_info.ctx_size > dram.len()
        {
            return Err(bad(
                "DRAM",
                0x14,
                format!("context area at {:#x} does not fit", dram_info.ctx_offset),
            ));
        }
        Ok(FirmwareImage {
            arch,
            format_version: FORMAT_VERSION,
            generation,
            dispatch,
            dram: dram_info,
        })
    }

    /// The handler for `(class, key)`, if the table has one.
    pub fn lookup(&self, class: DispatchClass, key: u8) -> Option<Handler> {
        self.dispatch
            .iter()
            .find(|e| e.class == class && e.key == key)
            .map(|e| e.handler)
    }

    /// The handler for a cc_op `algo_type`; the `Default` entry (a fault) if none matches.
    pub fn handler_for_algo_type(&self, algo_type: u8) -> Handler {
        self.lookup(DispatchClass::AlgoType, algo_type)
            .or_else(|| self.lookup(DispatchClass::Default, 0xFF))
            .unwrap_or(Handler::Fault)
    }
}

#[cfg(test)]
mod tests;

//! Tests of the simulated device memory.

use super::*;
use crate::isa::evtsem::{topsp_base, SemAddr};

const MIB: u64 = 1 << 20;
const VALID: u64 = 1 << 54;

fn chip_bits(c: u8) -> u64 {
    VALID | (u64::from(c) << 48)
}

fn sem_addr(topsp: u8, window: SemWindow, idx: u8) -> u64 {
    SemAddr { topsp, window, idx }.encode()
}

/// docs/contract/device.md §5.1: every window reached through the router, on a routed chip too.
#[test]
fn sem_windows_through_the_router() {
    let mut m = Memory::new(2);
    let inc = sem_addr(1, SemWindow::Inc, 9);
    assert_eq!(inc, 0x82_C000_1824);
    let t = m.write(0, inc | chip_bits(1), &3u32.to_le_bytes()).unwrap();
    let want = SemTouch {
        chip: 1,
        block: BlockId::TopSp(1),
        window: SemWindow::Inc,
        first: 9,
        count: 1,
    };
    assert_eq!(t, Touched::Sem(want));
    assert!(want.changed());
    // Issued by chip 1 without routing bits: the same semaphore.
    m.write(1, inc, &2u32.to_le_bytes()).unwrap();
    m.write(1, sem_addr(1, SemWindow::Dec, 9), &1u32.to_le_bytes())
        .unwrap();
    let blk = |m: &Memory, c: u8| {
        m.sems(c)
            .unwrap()
            .block(BlockId::TopSp(1))
            .unwrap()
            .value(9)
    };
    assert_eq!((blk(&m, 0), blk(&m, 1)), (0, 4));
    let mut w = [0u8; 4];
    m.read(0, sem_addr(1, SemWindow::Read, 9) | chip_bits(1), &mut w)
        .unwrap();
    assert_eq!(u32::from_le_bytes(w), 4);
    // READ ignores writes and says so.
    let t = m
        .write(1, sem_addr(1, SemWindow::Read, 9), &7u32.to_le_bytes())
        .unwrap();
    assert!(matches!(t, Touched::Sem(s) if !s.changed()));
    assert_eq!(blk(&m, 1), 4);
    // SET, then a wrapping DEC.
    m.write(1, sem_addr(1, SemWindow::Set, 9), &0u32.to_le_bytes())
        .unwrap();
    m.write(1, sem_addr(1, SemWindow::Dec, 9), &1u32.to_le_bytes())
        .unwrap();
    assert_eq!(blk(&m, 1), -1);
    // EVENT: set, read, clear.
    let ev = sem_addr(1, SemWindow::Event, 200);
    m.write(1, ev, &1u32.to_le_bytes()).unwrap();
    m.read(1, ev, &mut w).unwrap();
    assert_eq!(u32::from_le_bytes(w), 1);
    m.write(1, ev, &0u32.to_le_bytes()).unwrap();
    m.read(1, ev, &mut w).unwrap();
    assert_eq!(u32::from_le_bytes(w), 0);
    // A 16-byte SET run sets four consecutive semaphores.
    let run: Vec<u8> = [5u32, 6, 7, 8]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let t = m.write(0, sem_addr(2, SemWindow::Set, 252), &run).unwrap();
    assert!(matches!(t, Touched::Sem(s) if s.first == 252 && s.count == 4));
    let b = m.sems(0).unwrap().block(BlockId::TopSp(2)).unwrap();
    assert_eq!((b.value(252), b.value(255)), (5, 8));
}

/// docs/contract/device.md §5.1: TOP_SP i at 0x8280000000 + ((i&7)<<30) + ((i>7)<<47), 0..15, die 1 for 8..15.
#[test]
fn topsp_decode_all_sixteen() {
    let mut m = Memory::new(1);
    assert_eq!(topsp_base(8), 0x8082_8000_0000);
    for t in 0..16u8 {
        let a = topsp_base(t) + 0x1800 + 4 * u64::from(t);
        let touched = m.write(0, a, &1u32.to_le_bytes()).unwrap();
        assert_eq!(
            touched,
            Touched::Sem(SemTouch {
                chip: 0,
                block: BlockId::TopSp(t),
                window: SemWindow::Inc,
                first: t,
                count: 1
            })
        );
    }
    for t in 0..16u8 {
        let b = m.sems(0).unwrap().block(BlockId::TopSp(t)).unwrap();
        assert_eq!(b.nonzero().collect::<Vec<_>>(), vec![(t, 1)]);
    }
}

#[test]
fn tpb_block_is_routed() {
    let mut m = Memory::new(1);
    let a = memmap::tpb_evt_sem_base(3) + 0x1800 + 4 * 17;
    let t = m.write(0, a, &2u32.to_le_bytes()).unwrap();
    assert!(matches!(t, Touched::Sem(s) if s.block == BlockId::Tpb(3) && s.first == 17));
    assert_eq!(
        m.sems(0).unwrap().block(BlockId::Tpb(3)).unwrap().value(17),
        2
    );
    assert_eq!(memmap::tpb_evt_sem_base(0), 0x28_0270_0000);
}

/// Misaligned, odd-sized, gap and window-crossing EVT_SEM accesses are errors, not memory.
#[test]
fn bad_sem_accesses() {
    let mut m = Memory::new(1);
    let base = topsp_base(0);
    for (a, len) in [
        (base + 0x1802, 4), // misaligned
        (base + 0x1800, 2), // not a word
        (base + 0x0800, 4), // gap between EVENT and READ
        (base + 0x17FC, 8), // SET 255 then INC 0: two windows
        (base + 0x1FFC, 8), // runs off the block into plain (unmapped) space
    ] {
        let e = m.write(0, a, &vec![0; len]).unwrap_err();
        assert!(
            matches!(e, MemError::SemAccess { addr, .. } if addr == a),
            "{a:#x}+{len}: {e}"
        );
    }
    assert_eq!(
        m.slice(0, base + 0x1800, 4),
        Err(MemError::NotMemory {
            addr: base + 0x1800
        })
    );
    // Just past the block is plain memory: unmapped.
    assert!(matches!(
        m.write(0, base + 0x2000, &[0; 4]),
        Err(MemError::Unmapped { .. })
    ));
}

#[test]
fn routing_errors() {
    let mut m = Memory::new(2);
    m.map(0, 0x1000, 0x1000).unwrap();
    let e = |r: Result<Touched, MemError>| r.unwrap_err();
    assert!(matches!(
        e(m.write(0, 1 << 60, &[1])),
        MemError::BadAddress { .. }
    ));
    assert!(matches!(
        e(m.write(0, 1 << 48, &[1])),
        MemError::BadAddress { .. }
    )); // no id-valid
    assert!(matches!(
        e(m.write(0, 1 << 52, &[1])),
        MemError::BadAddress { .. }
    )); // neighbour
    assert_eq!(
        e(m.write(0, 0x1000 | chip_bits(2), &[1])),
        MemError::NoChip {
            addr: 0x1000 | chip_bits(2),
            chip: 2
        }
    );
    assert!(matches!(
        e(m.write(5, 0x1000, &[1])),
        MemError::NoChip { chip: 5, .. }
    ));
    // Mapped on chip 0 only: chip 1 does not see it.
    assert_eq!(
        e(m.write(1, 0x1000, &[1])),
        MemError::Unmapped {
            addr: 0x1000,
            chip: 1
        }
    );
    assert_eq!(
        e(m.write(0, 0x1000 | chip_bits(1), &[1])),
        MemError::Unmapped {
            addr: 0x1000 | chip_bits(1),
            chip: 1
        }
    );
    m.write(1, 0x1000 | chip_bits(0), &[1]).unwrap();
}

#[test]
fn unmapped_out_of_range_and_crossing() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    let mut m = Memory::new(1);
    m.map(0, 0x10_000, 0x100).unwrap();
    m.map(0, 0x10_100, 0x100).unwrap(); // adjacent, separate region
    let mut b = [0u8; 8];
    assert_eq!(
        m.read(0, 0xFFFF, &mut b),
        Err(MemError::Unmapped {
            addr: 0xFFFF,
            chip: 0
        })
    );
    assert_eq!(
        m.read(0, 0x10_200, &mut b),
        Err(MemError::Unmapped {
            addr: 0x10_200,
            chip: 0
        })
    );
    // Crossing into the adjacent region is still an error: a transfer stays in one region.
    assert_eq!(
        m.read(0, 0x10_0FC, &mut b),
        Err(MemError::CrossesEnd {
            addr: 0x10_0FC,
            len: 8,
            chip: 0,
            base: 0x10_000,
            region_len: 0x100
        })
    );
    m.read(0, 0x10_0F8, &mut b).unwrap();
    let top = (1u64 << 47) | ((1 << 47) - 4);
    assert_eq!(
        m.read(0, top, &mut b),
        Err(MemError::OutOfRange { addr: top, len: 8 })
    );
    assert!(matches!(
        m.slice_mut(0, 0x10_1F0, 32),
        Err(MemError::CrossesEnd { .. })
    ));
    // Zero-length accesses only route.
    m.read(0, 0x5, &mut []).unwrap();
    assert_eq!(m.slice(0, 0x5, 0).unwrap(), &[] as &[u8]);
    // Errors become a core error naming the DMA abort.
    let err: crate::error::Error = MemError::Unmapped {
        addr: 0xFFFF,
        chip: 0,
    }
    .into();
    assert_eq!(err.kind(), crate::ErrorKind::DmaAbort);
    assert!(err.message().contains("DMA abort") && err.message().contains("0xffff"));
}

#[test]
fn mapping_rules() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    let mut m = Memory::new(2);
    m.map(1, 0x4000, 0x1000).unwrap();
    let reason = |r: Result<(), MemError>| match r {
        Err(MemError::BadMapping { reason, .. }) => reason,
        other => panic!("{other:?}"),
    };
    assert_eq!(reason(m.map(1, 0x3800, 0x1000)), "overlaps a mapped region");
    assert_eq!(reason(m.map(1, 0x4FFF, 1)), "overlaps a mapped region");
    m.map(0, 0x4000, 0x1000).unwrap(); // other chip: fine
    m.map(1, 0x5000, 0x10).unwrap(); // adjacent: fine
    assert!(reason(m.map(1, 0x9000, 0)).starts_with("empty"));
    assert!(reason(m.map(1, (1 << 48) - 8, 16)).starts_with("empty"));
    assert_eq!(reason(m.map(2, 0, 1)), "no such chip");
    assert_eq!(
        reason(m.map(1, 1 << 40, MAX_REGION_BYTES + 1)),
        "larger than MAX_REGION_BYTES"
    );
    assert_eq!(
        reason(m.map(0, topsp_base(9) - 8, 16)),
        "overlaps an EVT_SEM block"
    );
    assert_eq!(
        reason(m.map(0, memmap::TPB_EVT_SEM_BASE, 4)),
        "overlaps an EVT_SEM block"
    );
    // The rest of a TOP_SP's 1 GiB stride is ordinary space.
    m.map(0, topsp_base(9) + 0x2000, 16).unwrap();
    assert_eq!(m.regions().count(), 4);
    m.unmap(1, 0x4000).unwrap();
    assert!(m.unmap(1, 0x4000).is_err());
    assert_eq!(m.mapped_bytes(), 0x1000 + 0x10 + 16);
}

/// Large sparse mappings: 3 × 64 MiB on each of 2 chips at HBM window addresses, touched only at
/// their ends; then a zero-copy cross-chip copy and split.
#[test]
fn large_sparse_and_cross_chip() {
    let mut m = Memory::new(2);
    let bases = [
        memmap::core_window(0),
        memmap::core_window(1) + memmap::DATA_OFF,
        memmap::core_window(15),
    ];
    for c in 0..2 {
        for b in bases {
            m.map(c, b, 64 * MIB).unwrap();
        }
    }
    assert_eq!(m.mapped_bytes(), 6 * 64 * MIB);
    let last = bases[1] + 64 * MIB - 8;
    m.write(0, last, &0x1122_3344_5566_7788u64.to_le_bytes())
        .unwrap();
    // Chip 0 copies its bytes into chip 1 (routed), zero-copy.
    let dst = bases[2] + 1000;
    m.copy(0, dst | chip_bits(1), last, 8).unwrap();
    let mut b = [0u8; 8];
    m.read(1, dst, &mut b).unwrap();
    assert_eq!(u64::from_le_bytes(b), 0x1122_3344_5566_7788);
    m.read(0, dst, &mut b).unwrap();
    // Chip 0's copy of that window is untouched.
    assert_eq!(b, [0; 8]);
    // A bulk 16 MiB cross-chip copy, checked through slices.
    m.slice_mut(1, bases[0], 16 << 20)
        .unwrap()
        .iter_mut()
        .enumerate()
        .for_each(|(i, x)| *x = i as u8);
    m.copy(
        1,
        (bases[0] + (32 << 20)) | chip_bits(0),
        bases[0],
        16 << 20,
    )
    .unwrap();
    let s = m.slice(0, bases[0] + (32 << 20), 16 << 20).unwrap();
    assert!(s.iter().enumerate().all(|(i, &x)| x == i as u8));
}

#[test]
fn copy_within_one_region_is_memmove() {
    let mut m = Memory::new(1);
    m.map(0, 0x1000, 64).unwrap();
    m.write(0, 0x1000, &(0u8..16).collect::<Vec<_>>()).unwrap();
    m.copy(0, 0x1004, 0x1000, 16).unwrap();
    assert_eq!(
        m.slice(0, 0x1004, 16).unwrap(),
        &(0u8..16).collect::<Vec<_>>()[..]
    );
}

/// The DMA semaphore increment (docs/contract/device.md §1.2): a 4-byte copy from the constant page into INC.
#[test]
fn copy_into_inc_window() {
    let mut m = Memory::new(2);
    let page = memmap::core_window(0);
    m.map(0, page, memmap::CONST_PAGE_BYTES).unwrap();
    m.write(0, memmap::const_word(0, 1), &1u32.to_le_bytes())
        .unwrap();
    let inc = sem_addr(3, SemWindow::Inc, 8) | chip_bits(1);
    for _ in 0..3 {
        let t = m.copy(0, inc, memmap::const_word(0, 1), 4).unwrap();
        assert!(matches!(t, Touched::Sem(s) if s.chip == 1 && s.first == 8));
    }
    assert_eq!(
        m.sems(1)
            .unwrap()
            .block(BlockId::TopSp(3))
            .unwrap()
            .value(8),
        3
    );
    // Reading a semaphore into memory works too.
    m.copy(
        0,
        page + 16,
        sem_addr(3, SemWindow::Read, 8) | chip_bits(1),
        4,
    )
    .unwrap();
    assert_eq!(m.slice(0, page + 16, 4).unwrap(), &3u32.to_le_bytes());
}

/// The CCE view: one destination, several sources, one of them in place.
#[test]
fn split_sources_and_in_place() {
    let mut m = Memory::new(2);
    m.map(0, 0x1_0000, 0x100).unwrap();
    m.map(1, 0x1_0000, 0x100).unwrap();
    m.map(0, 0x2_0000, 0x100).unwrap();
    m.write(0, 0x1_0000, &[1; 0x100]).unwrap();
    m.write(1, 0x1_0000, &[2; 0x100]).unwrap();
    m.write(0, 0x2_0000, &[3; 0x100]).unwrap();
    let srcs = [
        (0x1_0040, 16),                // == dst: in place
        (0x1_0000 | chip_bits(1), 16), // other chip
        (0x2_0000, 16),                // other region
        (0x1_0000, 16),                // same region, below dst
        (0x1_0080, 16),                // same region, above dst
    ];
    let sp = m.split(0, (0x1_0040, 16), &srcs).unwrap();
    assert_eq!(sp.srcs[0], Src::Dst);
    let sum: Vec<u8> = (0..16)
        .map(|e| {
            sp.srcs[1..]
                .iter()
                .map(|s| match s {
                    Src::Bytes(b) => b[e],
                    Src::Dst => unreachable!(),
                })
                .sum::<u8>()
        })
        .collect();
    for (d, s) in sp.dst.iter_mut().zip(sum) {
        *d += s;
    }
    assert_eq!(m.slice(0, 0x1_0040, 16).unwrap(), &[1 + 2 + 3 + 1 + 1; 16]);
    assert_eq!(m.slice(0, 0x1_0050, 1).unwrap(), &[1]);
    // Partial overlap with the destination is an error; sources may overlap each other.
    assert_eq!(
        m.split(0, (0x1_0040, 16), &[(0x1_0048, 16)]).unwrap_err(),
        MemError::Overlap { addr: 0x1_0048 }
    );
    assert!(m
        .split(0, (0x1_0040, 16), &[(0x1_0000, 32), (0x1_0010, 32)])
        .is_ok());
    assert_eq!(
        m.split(0, (topsp_base(0) + 0x1800, 4), &[]).unwrap_err(),
        MemError::NotMemory {
            addr: topsp_base(0) + 0x1800
        }
    );
}

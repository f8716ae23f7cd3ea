//! End to end: the real lowering (`lower` + `address_map` + `emit`, test-only imports) of a
//! 2-rank ring all-reduce, loaded into [`Memory`] and driven by a tiny test sequencer that walks
//! the SLOT SPAD records (wait `sem >= target`, `sem -= consume`, then `repeat` × {S2M tail +=
//! s2m; M2S tail += m2s}) and runs the queue pairs until nothing moves. The outputs must be the
//! exact sums: the device accepts exactly what the emitter produces.

use crate::device::dma::*;
use crate::device::sema::BlockId;
use crate::isa::memmap::align_buf;
use crate::isa::slot::{record_offset, SlotRecord, RECORD_BYTES, SLOT_RECORDS};
use crate::lower::emit::emit;
use crate::lower::pipeline::{address_map, lower, LowerConfig};
use crate::lower::program::Buf;
use crate::lower::request::{CollectiveOp, CollectiveRequest, ReduceOp};

/// One TOP_SP of one rank: its queue pair and its walk of the SLOT SPAD.
struct Agent {
    chip: u8,
    rank: u32,
    slot_spad: Vec<u8>,
    pos: u32,
    ends_left: u32,
    pair: QueuePair,
}

fn run_all_reduce(
    dtype: Dtype,
    count: u64,
    to_bytes: fn(f32) -> Vec<u8>,
) -> (Vec<Vec<u8>>, Vec<u8>) {
    let world = 2u32;
    let req = CollectiveRequest::new(
        CollectiveOp::AllReduce,
        dtype,
        Some(ReduceOp::Add),
        count,
        (0..world).collect(),
        0,
    );
    let cfg = LowerConfig::for_world(world).unwrap();
    let prog = lower(&req, &cfg).unwrap();
    let map = address_map(&prog, &cfg.topology).unwrap();
    let em = emit(&prog, &map).unwrap();
    let chips = (0..world).map(|r| map.chip_id(r).unwrap()).max().unwrap() + 1;
    let mut mem = Memory::new(chips);
    let bufs = map.buffers();
    let esz = dtype.size_bytes().unwrap() as u64;
    // Inputs: small integers, so every summation order is exact.
    let inputs: Vec<Vec<u8>> = (0..world)
        .map(|r| {
            (0..count)
                .flat_map(|e| to_bytes(((e * 7 + u64::from(r) * 13) % 97) as f32 - 40.0))
                .collect()
        })
        .collect();
    let mut agents = Vec::new();
    for r in 0..world {
        let chip = map.chip_id(r).unwrap();
        let page = map.const_addr(r, 0).unwrap();
        mem.map(chip, page, 4096).unwrap();
        for v in 0..1024u32 {
            mem.write(chip, page + 4 * u64::from(v), &v.to_le_bytes())
                .unwrap();
        }
        for (b, n) in crate::runtime::machine::buffer_regions(&bufs) {
            let base = map.buf_on_chip(r, b, 0).unwrap();
            mem.map(chip, base, align_buf(n)).unwrap();
        }
        let input = map.buf_on_chip(r, Buf::Input, 0).unwrap();
        mem.write(chip, input, &inputs[r as usize]).unwrap();
        let rank = &em.ranks[r as usize];
        for img in &rank.topsps {
            let (ml, sl) = (u64::from(img.m2s_ring_len), u64::from(img.s2m_ring_len));
            assert!(
                img.m2s.len() as u64 <= ml && img.s2m.len() as u64 <= sl,
                "no wrap here"
            );
            let n = &img.neff;
            for (base, len, stream) in [
                (n.m2s_ring_base, ml, &img.m2s),
                (n.s2m_ring_base, sl, &img.s2m),
            ] {
                mem.map(chip, base, len * 16).unwrap();
                for (i, d) in stream.iter().enumerate() {
                    mem.write(chip, base + 16 * i as u64, d).unwrap();
                }
            }
            let m2s = Queue::new(Direction::M2S, n.m2s_ring_base, ml).unwrap();
            let s2m = Queue::new(Direction::S2M, n.s2m_ring_base, sl).unwrap();
            // The host trigger (TRIGGER, semaphore 0, docs/contract/device.md §8.2).
            let dev_t = map.device_topsp(r, img.topsp).unwrap();
            mem.sem_block_mut(chip, BlockId::TopSp(dev_t))
                .unwrap()
                .add(0, 1);
            agents.push(Agent {
                chip,
                rank: r,
                slot_spad: img.slot_spad.clone(),
                pos: 0,
                ends_left: n.op_num.max(1),
                pair: QueuePair::new(img.topsp, m2s, s2m),
            });
        }
    }
    let numerics = Numerics::default();
    let mut rounds = 0;
    loop {
        rounds += 1;
        assert!(rounds < 100_000, "no end");
        let mut moved = false;
        for a in &mut agents {
            // The sequencer: records until one blocks or the program ends.
            while a.ends_left > 0 {
                let off = record_offset(a.pos);
                let b: [u8; RECORD_BYTES] =
                    a.slot_spad[off..off + RECORD_BYTES].try_into().unwrap();
                let rec = SlotRecord::decode(&b).unwrap();
                if let Some(w) = rec.wait {
                    let t = map.device_topsp(a.rank, w.topsp).unwrap();
                    let blk = mem.sem_block_mut(a.chip, BlockId::TopSp(t)).unwrap();
                    if blk.value(w.sem) < w.target as i32 {
                        break;
                    }
                    blk.sub(w.sem, w.consume as i32);
                }
                for _ in 0..rec.repeat {
                    a.pair
                        .tail_inc(a.chip, Direction::S2M, u64::from(rec.s2m))
                        .unwrap();
                    a.pair
                        .tail_inc(a.chip, Direction::M2S, u64::from(rec.m2s))
                        .unwrap();
                }
                moved = true;
                a.pos += 1;
                if rec.end {
                    a.ends_left -= 1;
                    a.pos = a.pos.div_ceil(SLOT_RECORDS as u32) * SLOT_RECORDS as u32;
                }
            }
        }
        for a in &mut agents {
            let p = a.pair.run(&mut mem, a.chip, &numerics).unwrap();
            moved |= p.packets_done > 0;
        }
        if !moved {
            break;
        }
    }
    for a in &agents {
        assert_eq!(
            a.ends_left, 0,
            "rank {} TOP_SP {} stuck at record {}",
            a.rank, a.pair.topsp, a.pos
        );
        assert!(a.pair.m2s.pending().is_empty() && a.pair.s2m.pending().is_empty());
        assert_eq!(
            a.pair.m2s.head() as usize,
            em.ranks[a.rank as usize]
                .topsps
                .iter()
                .find(|t| t.topsp == a.pair.topsp)
                .unwrap()
                .m2s
                .len()
        );
    }
    let outs = (0..world)
        .map(|r| {
            let chip = map.chip_id(r).unwrap();
            let out = map.buf_on_chip(r, Buf::Output, 0).unwrap();
            mem.slice(chip, out, (count * esz) as usize)
                .unwrap()
                .to_vec()
        })
        .collect();
    let want: Vec<u8> = (0..count)
        .flat_map(|e| {
            let s: f32 = (0..world)
                .map(|r| ((e * 7 + u64::from(r) * 13) % 97) as f32 - 40.0)
                .sum();
            to_bytes(s)
        })
        .collect();
    (outs, want)
}

#[test]
fn two_rank_ring_all_reduce_fp32() {
    let (outs, want) = run_all_reduce(Dtype::Fp32, 5000, |v| v.to_le_bytes().to_vec());
    for o in outs {
        assert_eq!(o, want);
    }
}

#[test]
fn two_rank_ring_all_reduce_bf16() {
    let (outs, want) = run_all_reduce(Dtype::Bf16, 3001, |v| {
        crate::dtype::f32_to_bf16(v).to_le_bytes().to_vec()
    });
    for o in outs {
        assert_eq!(o, want);
    }
}

//! Executor tests with a hand-built single-chip program (rings at the memmap bases, one TOP_SP):
//! record 0 releases a 64-byte copy and a 4-byte semaphore signal (constant word 1 into the INC
//! window of semaphore 5), record 1 waits `sem 5 ≥ 1`. Variants break the signal to exercise
//! the hang report, and an unmapped source to exercise the abort.

use super::*;
use crate::device::dma::Queue;
use crate::device::topsp::SeqConfig;
use crate::isa::ccop::{pack_cc_op, CcOpFields, CcOpOperands};
use crate::isa::memmap::{
    core_window, program_area, DATA_OFF, HBM_BASE, M2S_RING_OFF, S2M_RING_OFF,
};
use crate::isa::slot::{SlotRecord, SlotWait, NEXT_SEM, RECORD_BYTES, SLOT_RECORDS};
use crate::isa::udma::{CopyMeta, LenCtrl};

const VALID: u64 = 1 << 54;
const DATA: u64 = HBM_BASE + DATA_OFF;
const RING: u64 = 64;

fn sem(window: SemWindow, idx: u8) -> u64 {
    SemAddr {
        topsp: 0,
        window,
        idx,
    }
    .encode()
}

fn ctrl(len: u32, first: bool, last: bool, tag: u8) -> LenCtrl {
    LenCtrl {
        length: len,
        first,
        last,
        ring_id: tag,
        ..Default::default()
    }
}

fn tx(addr: u64, len: u32) -> [u8; 16] {
    Descriptor::TxData {
        ctrl: ctrl(len, true, true, 1),
        meta: Some(CopyMeta::default()),
        addr: addr | VALID,
    }
    .encode()
}

fn rx(addr: u64, len: u32) -> [u8; 16] {
    Descriptor::RxData {
        ctrl: ctrl(len, true, true, 1),
        addr: addr | VALID,
    }
    .encode()
}

struct Spec {
    /// Semaphore the signal packet increments.
    signal: u8,
    /// Records release both packets (else only the copy).
    release_signal: bool,
    /// Source of the copy.
    src: u64,
    /// Raise TRIGGER.
    trigger: bool,
}

impl Default for Spec {
    fn default() -> Self {
        Spec {
            signal: 5,
            release_signal: true,
            src: DATA,
            trigger: true,
        }
    }
}

fn machine(s: &Spec) -> Machine {
    let mut m = Machine::new(1);
    let area = program_area(0, 0);
    m.mem.map(0, area + M2S_RING_OFF, RING * 16).unwrap();
    m.mem.map(0, area + S2M_RING_OFF, RING * 16).unwrap();
    m.mem.map(0, DATA, 4096).unwrap();
    m.mem.map(0, core_window(0), 4096).unwrap();
    m.mem
        .write(0, core_window(0) + 4, &1u32.to_le_bytes())
        .unwrap();
    let data: Vec<u8> = (0..64u8).collect();
    m.mem.write(0, DATA, &data).unwrap();
    let m2s = [tx(s.src, 64), tx(core_window(0) + 4, 4)];
    let s2m = [rx(DATA + 1024, 64), rx(sem(SemWindow::Inc, s.signal), 4)];
    for (base, ds) in [(M2S_RING_OFF, m2s), (S2M_RING_OFF, s2m)] {
        for (i, d) in ds.iter().enumerate() {
            m.mem.write(0, area + base + 16 * i as u64, d).unwrap();
        }
    }
    let n = if s.release_signal { 2 } else { 1 };
    let recs = [
        SlotRecord {
            m2s: n,
            s2m: n,
            repeat: 1,
            wait: None,
            end: false,
        },
        SlotRecord {
            m2s: 0,
            s2m: 0,
            repeat: 1,
            wait: Some(SlotWait {
                topsp: 0,
                sem: 5,
                target: 1,
                consume: 1,
            }),
            end: true,
        },
    ];
    let mut spad = vec![0u8; SLOT_RECORDS * RECORD_BYTES];
    for (i, r) in recs.iter().enumerate() {
        spad[i * RECORD_BYTES..(i + 1) * RECORD_BYTES].copy_from_slice(&r.encode());
    }
    let f = CcOpFields {
        algo_type: 0,
        algo_sub_type: 0,
        trigger_next: false,
        reporter: true,
        ring_wait_complete: false,
        ring_send_complete: false,
        safe_mode: false,
        unique_tensors: false,
        operands: CcOpOperands::Ring { channel_list: 1 },
    };
    let cc = pack_cc_op([0; 8], &f, 0).unwrap();
    let cfg = SeqConfig {
        topsp: 0,
        trigger: sem(SemWindow::Read, 0),
        trigger_next: sem(SemWindow::Read, NEXT_SEM),
        op_num: 1,
        leader: true,
        ..Default::default()
    };
    let seq = Sequencer::load(&cc, &spad, cfg).unwrap();
    let pair = QueuePair::new(
        0,
        Queue::new(Direction::M2S, area + M2S_RING_OFF, RING).unwrap(),
        Queue::new(Direction::S2M, area + S2M_RING_OFF, RING).unwrap(),
    );
    if s.trigger {
        m.mem.sem_block_mut(0, BlockId::TopSp(0)).unwrap().add(0, 1);
    }
    m.add_rank_topsp(7, 0, 0, pair, seq);
    m
}

fn value(m: &Machine, idx: u8) -> i32 {
    m.mem
        .sems(0)
        .unwrap()
        .block(BlockId::TopSp(0))
        .unwrap()
        .value(idx)
}

#[test]
fn runs_copy_and_signal_to_completion() {
    let mut m = machine(&Spec::default());
    let rep = m.run().unwrap();
    assert_eq!((rep.packets, rep.bytes), (2, 68));
    assert!(rep.rounds >= 2);
    let want: Vec<u8> = (0..64u8).collect();
    assert_eq!(m.mem.slice(0, DATA + 1024, 64).unwrap(), &want[..]);
    assert_eq!(value(&m, 5), 0, "signal consumed");
    assert_eq!(value(&m, 0), 0, "TRIGGER consumed");
    assert_eq!(value(&m, 1), 1, "COMPLETION posted");
    // Deterministic: the same program gives the same report.
    assert_eq!(machine(&Spec::default()).run().unwrap(), rep);
    assert_eq!(m.topsps(), 1);
    assert!(m.pair(0, 0).unwrap().s2m.pending().is_empty());
}

#[test]
fn hang_without_signaller() {
    // Checks the report text a user reads, on purpose.
    let mut m = machine(&Spec {
        signal: 6,
        ..Default::default()
    });
    let e = m.run().unwrap_err();
    assert_eq!(e.status_name(), "NRT_EXEC_HW_ERR_COLLECTIVES");
    let f = e.fields();
    assert_eq!((f.rank, f.step), (Some(7), Some(0)), "{e:?}");
    assert_eq!(f.field.as_deref(), Some("TOP_SP 0 semaphore 5"));
    assert_eq!(f.expected.as_deref(), Some(">= 1"));
    // The report, for the person reading it:
    let msg = e.to_string();
    for want in [
        "rank 7 (chip 0 TOP_SP 0)",
        "cc_op entry 0 (CTRL slot 0)",
        "SLOT SPAD record 1",
        &format!(
            "semaphore 5 of TOP_SP 0 (READ {:#x}) >= 1, value 0",
            sem(SemWindow::Read, 5)
        ),
        "no pending descriptor signals it",
    ] {
        assert!(msg.contains(want), "{want:?} missing in: {msg}");
    }
    assert_eq!(value(&m, 6), 1, "the misdirected signal landed");
}

#[test]
fn hang_names_unposted_signaller() {
    // Checks the report text a user reads, on purpose.
    let mut m = machine(&Spec {
        release_signal: false,
        ..Default::default()
    });
    let msg = m.run().unwrap_err().to_string();
    assert!(
        msg.contains("pending signal: chip 0 TOP_SP 0 S2M index 1 (not posted) of rank 7"),
        "{msg}"
    );
}

#[test]
fn hang_before_trigger() {
    // Checks the report text a user reads, on purpose.
    let mut m = machine(&Spec {
        trigger: false,
        ..Default::default()
    });
    let e = m.run().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::CollectivesHang);
    let msg = e.to_string();
    assert!(
        msg.contains("entry start (trigger)") && msg.contains("semaphore 0"),
        "{msg}"
    );
}

#[test]
fn dma_abort_stops_the_run() {
    let mut m = machine(&Spec {
        src: DATA + (1 << 30),
        ..Default::default()
    });
    let e = m.run().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::DmaAbort, "{e}");
    assert!(m.pair(0, 0).unwrap().aborted().is_some());
}

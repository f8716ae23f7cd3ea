//! The NEFF parser against the real NEFF in testdata (its README lists what it holds) and
//! against NEFFs damaged in each way docs/neff.md §1 refuses.

use super::*;
use crate::error::ErrorKind;

fn real() -> Option<Vec<u8>> {
    crate::testdata::read(
        crate::testdata::REAL_NEFF,
        "a graph test of the vendor NEFF",
    )
}

#[test]
fn the_real_neff_parses_with_its_io_and_programs() {
    let Some(file) = real() else { return };
    let n = Neff::parse(&file, &ParseOptions::default()).unwrap();
    assert_eq!(n.kelf, "kelf-0.json");
    assert_eq!(n.target, "cayman");
    let names: Vec<_> = n.graphs.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(names, ["sg00", "sg01"]);
    let io: Vec<_> = n
        .inputs()
        .chain(n.outputs())
        .map(|v| (v.name.as_str(), v.kind, v.size))
        .collect();
    assert_eq!(
        io,
        [
            ("x", VarKind::Input, 65536),
            ("y", VarKind::Input, 65536),
            ("output0", VarKind::Output, 32768)
        ]
    );
    let out = n.outputs().next().unwrap();
    assert_eq!(out.dtype.as_deref(), Some("float16"));
    assert_eq!(out.shape.as_deref(), Some(&[128u64, 128][..]));
    let g = &n.graphs[0];
    assert_eq!(g.num_streams, 0, "cc_streams.num_streams");
    assert_eq!(g.rank_world_size, 0);
    assert_eq!(g.vars.len(), 6);
    // README: SP 0xb1 0xcc 0xd4; PE 0xb1 0xcc then compute; Pool 0xb1 0xcc 0xd4 x4 0xa4.
    let sp = g.programs.iter().find(|p| p.engine == Engine::Sp).unwrap();
    let ops: Vec<u8> = sp.stream.words.iter().map(|w| w.instr.opcode()).collect();
    assert_eq!(ops, [0xb1, 0xcc, 0xd4]);
    let pool = g
        .programs
        .iter()
        .find(|p| p.engine == Engine::Pool)
        .unwrap();
    assert_eq!(pool.census().get(&0xd4), Some(&4));
    assert_eq!(g.programs.len(), 5);
    assert!(g.programs.iter().all(|p| p.stream.triggers().count() == 0));
}

#[test]
fn the_real_neff_hash_is_not_its_payload_md5() {
    let Some(file) = real() else { return };
    let on = ParseOptions {
        validate_hash: true,
    };
    let e = Neff::parse(&file, &on).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid);
    assert_eq!(e.fields().field.as_deref(), Some("hash"));
    // README: the payload's MD5.
    assert_eq!(
        e.fields().expected.as_deref(),
        Some("efe9b3bc98163077b94c8bcdacf51f47")
    );
}

//! A graph's `def.json`: the input is the member `sg00/def.json` of a NEFF whose other members
//! are fixed (a KELF naming that graph, the vendor NEFF's `sg00/tensor_map.json`, and engine
//! programs `SP.bin` (a collective trigger of `opennrt neff build`) and `PE.bin`, `Pool.bin`,
//! `Activation.bin`, `DVE.bin` (the vendor NEFF's), which a `def.json` may name). Packed as a
//! raw tar (package 1) with `opennrt::neff::build::container`, so nothing but the JSON varies.
#![no_main]

use libfuzzer_sys::fuzz_target;
use opennrt::neff::build::{container, HeaderFields};
use opennrt::neff::{Neff, ParseOptions};

const KELF: &[u8] = br#"{"graphs":[{"name":"sg00","definition":"sg00/def.json"}],"target":"trn1"}"#;

fuzz_target!(|def: &[u8]| {
    let mut members: Vec<(String, Vec<u8>)> = vec![
        ("kelf-0.json".into(), KELF.to_vec()),
        ("sg00/def.json".into(), def.to_vec()),
    ];
    for (name, bytes) in [
        (
            "sg00/tensor_map.json",
            &include_bytes!("../members/tensor_map.json")[..],
        ),
        ("sg00/SP.bin", &include_bytes!("../members/SP.bin")[..]),
        ("sg00/PE.bin", &include_bytes!("../members/PE.bin")[..]),
        ("sg00/Pool.bin", &include_bytes!("../members/Pool.bin")[..]),
        (
            "sg00/Activation.bin",
            &include_bytes!("../members/Activation.bin")[..],
        ),
        ("sg00/DVE.bin", &include_bytes!("../members/DVE.bin")[..]),
    ] {
        members.push((name.into(), bytes.to_vec()));
    }
    let h = HeaderFields {
        pkg_version: 1,
        ..HeaderFields::default()
    };
    let file = container(&members, &h).expect("the fixed header fits");
    if let Ok(n) = Neff::parse(&file, &ParseOptions::default()) {
        opennrt_fuzz::walk(&n);
    }
});

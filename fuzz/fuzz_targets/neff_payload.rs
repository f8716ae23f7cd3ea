//! The NEFF payload under its checksums: the input is a mode byte and a tar. The target fixes
//! every tar header's checksum, packs the tar as package 2 (gzip, a correct CRC-32) when the
//! mode byte is odd, else as package 1 (raw tar), puts a header with fitting sizes in front,
//! and parses the NEFF. So the fuzzer mutates tar headers, pax records, member names and the
//! members themselves (`neff.json`, the KELF, `def.json`, programs) instead of checksums.
#![no_main]

use libfuzzer_sys::fuzz_target;
use opennrt::neff::{Neff, ParseOptions};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, tar)) = data.split_first() else {
        return;
    };
    let mut tar = tar.to_vec();
    opennrt_fuzz::fix_tar_checksums(&mut tar);
    let file = opennrt_fuzz::neff_around(&tar, mode & 1 == 1);
    if let Ok(n) = Neff::parse(&file, &ParseOptions::default()) {
        opennrt_fuzz::walk(&n);
    }
});

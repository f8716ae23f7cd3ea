//! A whole NEFF file as a user hands it to `nrt_load`: header, payload (gzip or raw tar),
//! manifests, `def.json`, engine programs. The payload hash is checked separately (as
//! `NEURON_RT_VALIDATE_HASH` does) and the parse runs without it, so a mutated payload is not
//! stopped by its hash; the gzip CRC-32 and tar checksums still stop most payload mutations
//! here, which is what `neff_payload` is for.
#![no_main]

use libfuzzer_sys::fuzz_target;
use opennrt::neff::{Neff, NeffHeader, ParseOptions};

fuzz_target!(|file: &[u8]| {
    if let Ok(h) = NeffHeader::parse(file) {
        let _ = h.check_hash(file);
    }
    if let Ok(n) = Neff::parse(file, &ParseOptions::default()) {
        opennrt_fuzz::walk(&n);
    }
});

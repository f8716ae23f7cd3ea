//! The JSON files of `nccom-test` (`opennrt::nccom_files`): the first byte picks the file and
//! the group size, the rest is its text. Metadata (`--variable-size-op-metadata`, alltoallv or
//! allgv), replica groups (`--custom-replica-groups`), pairs (`--custom-src-target-pairs`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use opennrt::nccom_files::{check_fits, parse_groups, parse_metadata, parse_pairs, ring_pairs};

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    // Group sizes 1..=32 (nccom-test's -r is a rank count; the files name ranks below it).
    let g = u32::from(sel >> 3) + 1;
    match sel & 7 {
        0 | 1 => {
            let allgv = sel & 1 == 1;
            let name = if allgv { "allgv" } else { "alltoallv" };
            if let Ok(rows) = parse_metadata(text, allgv, name, g) {
                // What `metadata::load` checks, then a size's buffers.
                let _ = check_fits(&rows, u64::MAX, u64::MAX);
                let _ = check_fits(&rows, 1 << 20, 1 << 20);
            }
        }
        2 | 3 => {
            if let Ok(groups) = parse_groups(text, g, "fuzz.json") {
                let _ = ring_pairs(&groups);
            }
        }
        _ => {
            let _ = parse_pairs(text, g, "fuzz.json");
        }
    }
});

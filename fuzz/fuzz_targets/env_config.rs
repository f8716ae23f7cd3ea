//! The environment as `nrt_init` reads it, through `Config::from_lookup` (never the process
//! environment): the input is lines `NAME=VALUE`; unknown names are looked up and ignored,
//! as in a real environment. A config that parses is then asked for the lowering
//! configuration of a few world sizes, as the first collective does.
#![no_main]

use std::collections::HashMap;

use libfuzzer_sys::fuzz_target;
use opennrt::runtime::config::{parse_core_list, resident_budget, Config};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let vars: HashMap<&str, &str> = text.lines().filter_map(|l| l.split_once('=')).collect();
    for v in vars.values() {
        let _ = parse_core_list(v);
        let _ = resident_budget(Some((*v).to_string()), 24 << 30);
    }
    if let Ok(c) = Config::from_lookup(|k| vars.get(k).map(|v| (*v).to_string())) {
        let _ = c.total_cores();
        for world in [1, 2, 3, 8, 16, 64] {
            let _ = c.lower_config(world);
        }
    }
});

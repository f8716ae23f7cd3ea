//! The bootstrap wire protocol as the job's root reads it from any process that connects to
//! its port: a byte stream of length-prefixed JSON messages (`wire::recv` until the stream
//! ends or fails), then what the root and the members make of a message's contents (the
//! request of a meeting, a carried error, inline hex data). A decoded message must survive
//! `send` and `recv` unchanged.
#![no_main]

use libfuzzer_sys::fuzz_target;
use opennrt::runtime::multi_process::wire::{self, Msg};

fn contents(m: &Msg) {
    match m {
        Msg::Meet { req: Some(r), .. } => {
            if let Ok(req) = r.request() {
                let _ = wire::WireRequest::of(&req);
            }
        }
        Msg::Joined { error: Some(e), .. }
        | Msg::Segments { error: Some(e), .. }
        | Msg::HostsOf { error: Some(e), .. }
        | Msg::WorldFailed { error: e, .. } => {
            let _ = e.error();
        }
        Msg::Done { error, output, .. } => {
            if let Some(e) = error {
                let _ = e.error();
            }
            if let Some(o) = output {
                let _ = wire::unhex(o);
            }
        }
        Msg::Arrive {
            inline: Some(i), ..
        } => {
            let _ = wire::unhex(i);
        }
        _ => {}
    }
}

fuzz_target!(|bytes: &[u8]| {
    let _ = wire::decode(bytes).map(|m| contents(&m));
    let mut r = bytes;
    while let Ok(Some(m)) = wire::recv(&mut r) {
        contents(&m);
        let mut out = Vec::new();
        wire::send(&mut out, &m).expect("a decoded message encodes");
        let back = wire::recv(&mut out.as_slice()).expect("an encoded message decodes");
        assert_eq!(back.as_ref(), Some(&m), "send/recv changed the message");
    }
});

//! `libnrt.so.1`: nothing but the binding of the public, versioned symbol names to the
//! `extern "C"` functions of [`opennrt::abi`]. See `build.rs` for why it is done this way and
//! `shim/libnrt.exports` for the list of names and their version nodes.

include!(concat!(env!("OUT_DIR"), "/exports.rs"));

//! The NEFF container: what the vendor's compiler writes and `nrt_load` reads
//! (docs/contract/abi.md §7). A NEFF is a 1024-byte header ([`header`]) and a tar payload
//! (gzip-compressed for package version 2) holding the manifests, each subgraph's `def.json`
//! and every engine's program of 64-byte instruction slots.
//!
//! Everything here treats the file as hostile: every field is range-checked before it is
//! used, nothing is allocated from an unchecked size, and a refusal names the member, the
//! offset and the rule (`Error` fields: `field`, `actual`).

// Pure computation on bytes and numbers: no unsafe code, and none may creep in.
#![forbid(unsafe_code)]

pub mod build;
pub mod graph;
pub mod header;
pub mod payload;

pub use graph::{
    DmaQueue, Engine, EngineProgram, Graph, Neff, PairSet, ParseOptions, Var, VarKind,
};
pub use header::{NeffHeader, PkgVersion, HEADER_SIZE};
pub use payload::Payload;

//! The network between hosts (docs/design.md §2 item 12): libfabric, loaded at run time, and
//! nothing hand-made. `runtime::multi_process::proxy` carries collectives over it.

pub mod fabric;
pub mod iface;

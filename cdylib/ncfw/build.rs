//! Link flags of libncfw.so: its DT_SONAME is the vendor's (docs/contract/abi.md §1.3), so a
//! tool that records or checks the carrier's identity sees the same name. The runtime opens the
//! carrier as "libncfw.so" (the name `shim/links.sh` installs), never by SONAME.
//!
//! The dependency set cannot match the vendor's `libc.so.6` only: Rust's standard library
//! brings `libgcc_s.so.1` (the unwinder behind panics, which the boundary catches) and
//! `ld-linux-x86-64.so.2` (`__tls_get_addr` for thread-locals). `-static-libgcc` does not help,
//! because rustc names `-lgcc_s` itself; `panic = "abort"` would lose the boundary's catch.
//! `ci/abi-check.sh` checks that nothing beyond these three is needed.

/// The vendor carrier's SONAME (runtime package 2.31.24): change it here to pair with another
/// runtime generation.
const SONAME: &str = "libncfw.so.2.31.1.0.cf13a49f";

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,{SONAME}");
    println!("cargo:rerun-if-changed=build.rs");
}

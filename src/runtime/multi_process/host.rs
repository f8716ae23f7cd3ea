//! Which processes of a job share a host, in the one sense that matters here: they can map
//! each other's device segments, because they see the same `/dev/shm` (docs/design.md §2.7).
//!
//! A process's **host key** is `<boot id>:<device>:<inode>` of its `/dev/shm`: the kernel's
//! boot id (`/proc/sys/kernel/random/boot_id`, a random UUID per boot, so two machines never
//! share it) and the identity of the directory it mounts there. Two processes on one machine
//! in different mount namespaces, each with its own tmpfs on `/dev/shm` (a container, or the
//! test hosts of `capi-tests/hosts/`), differ in the device; processes that share the tmpfs
//! agree. Choice: never infer it from a host name or an address — two containers on one
//! machine share an address space for names but not a `/dev/shm`, and one machine has many
//! addresses.

use std::os::unix::fs::MetadataExt;

use once_cell::sync::Lazy;

static KEY: Lazy<String> = Lazy::new(|| {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| format!("no-boot-id-{}", std::process::id()));
    match std::fs::metadata("/dev/shm") {
        Ok(m) => format!("{boot}:{:x}:{:x}", m.dev(), m.ino()),
        // Without /dev/shm no segment can be shared: a key of this process alone.
        Err(_) => format!("{boot}:pid{}", std::process::id()),
    }
});

/// This process's host key (module doc).
pub fn key() -> &'static str {
    &KEY
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_names_the_boot_and_the_shm_directory() {
        let k = key();
        let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
        assert!(k.starts_with(boot.trim()), "{k}");
        let m = std::fs::metadata("/dev/shm").unwrap();
        assert!(k.ends_with(&format!(":{:x}:{:x}", m.dev(), m.ino())), "{k}");
        assert_eq!(k, key(), "stable within the process");
    }
}

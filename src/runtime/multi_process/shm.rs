//! Named POSIX shared memory (`shm_open` + `mmap`) for data that crosses processes of one job
//! (docs/design.md §2.7).
//!
//! Every name is `/opennrt-<job>-<pid>-<what>`. The job tag ([`job_tag`]) is the root's port and
//! a hash of the root's whole bound address, so two jobs on one host never share a prefix — not
//! even two roots on one port of two addresses (`127.0.0.1:p`, `127.0.0.2:p`, `[::1]:p`); every
//! process of a job uses the root's tag (the root sends it in its welcome). The creating
//! process's pid lets the job's root remove what a dead process left ([`unlink_pid`]). A name lives only until the peer that needs it has mapped it: the
//! mapping survives `shm_unlink`, so the object disappears from `/dev/shm` as soon as both
//! sides hold it, and the kernel frees the memory when the last mapping goes — a job that dies
//! leaves nothing behind except names nobody opened yet, which the root (or, if the root died,
//! the creator) unlinks. [`unlink_job`] clears a whole job's prefix (a root starting on an
//! address removes the leftovers of a killed earlier job on that address).

use std::ffi::CString;

use crate::error::{Error, Result};

/// A mapped shared-memory object.
#[derive(Debug)]
pub struct Segment {
    name: String,
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain shared bytes; concurrent access follows the protocol of its
// users (one writer at a time, handed over by messages), like device memory.
unsafe impl Send for Segment {}
// SAFETY: `&Segment` only copies bytes in and out through `read`/`write` (no references into
// the mapping escape), and its users' protocol keeps one writer per range at a time.
unsafe impl Sync for Segment {}

fn cname(name: &str) -> Result<CString> {
    CString::new(name).map_err(|_| Error::invalid(format!("shm name {name:?} contains NUL")))
}

fn os_err(what: &str, name: &str) -> Error {
    Error::resource(format!(
        "{what} {name:?}: {}",
        std::io::Error::last_os_error()
    ))
}

/// The tag of the job whose root listens on `addr`: `<port>-<8 hex digits of FNV-1a of the
/// address>` (module doc).
pub fn job_tag(addr: &std::net::SocketAddr) -> String {
    let h = addr.to_string().bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    format!("{}-{h:08x}", addr.port())
}

/// The tag of names made outside any job (a process alone, `OPENNRT_SHARED_DEVICE=1`).
pub const NO_JOB: &str = "0";

/// The name prefix of a job and process.
pub fn prefix(job: &str, pid: u32) -> String {
    format!("/opennrt-{job}-{pid}-")
}

impl Segment {
    /// Create `name` (exclusive) with `len` bytes and map it.
    pub fn create(name: &str, len: usize) -> Result<Segment> {
        let c = cname(name)?;
        // SAFETY: valid C string; flags and mode are plain integers.
        let fd = unsafe {
            libc::shm_open(
                c.as_ptr(),
                libc::O_CREAT | libc::O_EXCL | libc::O_RDWR,
                0o600,
            )
        };
        if fd < 0 {
            return Err(os_err("shm_open(create)", name));
        }
        // SAFETY: `fd` is ours.
        if unsafe { libc::ftruncate(fd, len.max(1) as libc::off_t) } != 0 {
            let e = os_err("ftruncate", name);
            // SAFETY: closing and unlinking what we created.
            unsafe {
                libc::close(fd);
                libc::shm_unlink(c.as_ptr());
            }
            return Err(e);
        }
        // Reserve the pages now: tmpfs allocates lazily, and a full /dev/shm would otherwise
        // surface as SIGBUS on the first write into the mapping — a crash, not an error.
        // SAFETY: `fd` is ours; plain integers.
        let rc = unsafe { libc::posix_fallocate(fd, 0, len.max(1) as libc::off_t) };
        if rc != 0 {
            let e = Error::resource(format!(
                "shared memory {name:?}: cannot reserve {len} bytes in /dev/shm ({}): /dev/shm \
                 is too small for this collective (see `df -h /dev/shm`; containers: \
                 --shm-size)",
                std::io::Error::from_raw_os_error(rc)
            ));
            // SAFETY: closing and unlinking what we created.
            unsafe {
                libc::close(fd);
                libc::shm_unlink(c.as_ptr());
            }
            return Err(e);
        }
        // SAFETY: maps `fd` (closed right after; the mapping keeps the object).
        let r = unsafe { Self::map(fd, name, len) };
        if r.is_err() {
            // SAFETY: unlinking what we created.
            unsafe { libc::shm_unlink(c.as_ptr()) };
        }
        r
    }

    /// Open and map an existing `name` of `len` bytes.
    pub fn open(name: &str, len: usize) -> Result<Segment> {
        let c = cname(name)?;
        // SAFETY: valid C string.
        let fd = unsafe { libc::shm_open(c.as_ptr(), libc::O_RDWR, 0) };
        if fd < 0 {
            return Err(os_err("shm_open", name));
        }
        // SAFETY: maps `fd`, which we own.
        unsafe { Self::map(fd, name, len) }
    }

    /// # Safety
    /// `fd` must be an open shared-memory descriptor of at least `len` bytes; it is closed.
    unsafe fn map(fd: libc::c_int, name: &str, len: usize) -> Result<Segment> {
        // SAFETY: the caller's contract; a fresh shared read/write mapping.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len.max(1),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        // SAFETY: the mapping (if any) holds its own reference.
        unsafe { libc::close(fd) };
        if p == libc::MAP_FAILED {
            return Err(os_err("mmap", name));
        }
        Ok(Segment {
            name: name.to_string(),
            ptr: p.cast(),
            len,
        })
    }

    /// The first mapped byte (page aligned).
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// The object's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Bytes mapped.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the segment has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Remove the name (the mapping stays valid).
    pub fn unlink(&self) {
        unlink(&self.name);
    }

    /// Copy `data` to byte `at`.
    pub fn write(&self, at: usize, data: &[u8]) -> Result<()> {
        self.check(at, data.len())?;
        // SAFETY: in bounds (checked); raw copy into shared memory.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.add(at), data.len()) };
        Ok(())
    }

    /// Copy `out.len()` bytes from byte `at`.
    pub fn read(&self, at: usize, out: &mut [u8]) -> Result<()> {
        self.check(at, out.len())?;
        // SAFETY: in bounds (checked); raw copy out of shared memory.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(at), out.as_mut_ptr(), out.len()) };
        Ok(())
    }

    /// Run `f` over bytes `[at, at + n)` as a mutable slice (no copy).
    ///
    /// The staging protocol hands a segment to one side at a time (the member fills it before
    /// it arrives and reads it after the root's answer; the root uses it in between), so no other
    /// access overlaps the call.
    pub fn with_mut<R>(&self, at: usize, n: usize, f: impl FnOnce(&mut [u8]) -> R) -> Result<R> {
        self.check(at, n)?;
        // SAFETY: in bounds (checked); exclusive by the staging protocol (above).
        let s = unsafe { std::slice::from_raw_parts_mut(self.ptr.add(at), n) };
        Ok(f(s))
    }

    fn check(&self, at: usize, n: usize) -> Result<()> {
        match at.checked_add(n) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(Error::invalid(format!(
                "shared segment {}: {n} bytes at {at} exceed its {} bytes",
                self.name, self.len
            ))),
        }
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping once.
        unsafe { libc::munmap(self.ptr.cast(), self.len.max(1)) };
    }
}

/// Remove `name` if it exists.
pub fn unlink(name: &str) {
    if let Ok(c) = cname(name) {
        // SAFETY: valid C string.
        unsafe { libc::shm_unlink(c.as_ptr()) };
    }
}

/// Names in `/dev/shm` starting with `prefix` (given with its leading `/`).
pub fn list(prefix: &str) -> Vec<String> {
    let want = prefix.trim_start_matches('/');
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| n.starts_with(want))
                .map(|n| format!("/{n}"))
                .collect()
        })
        .unwrap_or_default()
}

/// Unlink everything a process `pid` of job `job` left.
pub fn unlink_pid(job: &str, pid: u32) -> usize {
    let names = list(&prefix(job, pid));
    names.iter().for_each(|n| unlink(n));
    names.len()
}

/// Unlink everything of job `job`.
pub fn unlink_job(job: &str) -> usize {
    let names = list(&format!("/opennrt-{job}-"));
    names.iter().for_each(|n| unlink(n));
    names.len()
}

#[cfg(test)]
mod tests;

//! `libopennrt_preload.so`: the `dlopen` interposer behind `shim/opennrt-run --preload`.
//!
//! A program that opens the vendor runtime by absolute path
//! (`dlopen("/opt/aws/neuron/lib/libnrt.so.1", …)`) is not redirected by `LD_LIBRARY_PATH`,
//! nor by an `LD_PRELOAD`ed `libnrt.so.1`: glibc matches an already-loaded object by SONAME only
//! for names without a slash, and opens a path as a file. Preloaded, this library defines
//! `dlopen` ahead of libc's: a path whose last component is `libnrt.so.1` or `libnrt.so` is
//! replaced by the `libnrt.so.1` next to this library (OpenNRT's, found with `dladdr`); every
//! other call goes to the next `dlopen` (libc's) unchanged. Set `OPENNRT_PRELOAD_VERBOSE=1` to
//! have each redirect reported on stderr.
//!
//! It is C-ABI glue only: the path is computed once, and nothing on the call path panics (the
//! path lookup runs under `catch_unwind`; the report ignores a failed write).

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::OnceLock;

type DlopenFn = unsafe extern "C" fn(*const c_char, c_int) -> *mut c_void;

/// libc's `dlopen` (the next definition after this library).
fn next_dlopen() -> Option<DlopenFn> {
    static NEXT: OnceLock<usize> = OnceLock::new();
    let p = *NEXT.get_or_init(|| {
        // SAFETY: dlsym with RTLD_NEXT and a NUL-terminated name has no other precondition.
        unsafe { libc::dlsym(libc::RTLD_NEXT, c"dlopen".as_ptr()) as usize }
    });
    // SAFETY: a non-null `dlopen` symbol has dlopen's signature.
    (p != 0).then(|| unsafe { std::mem::transmute::<usize, DlopenFn>(p) })
}

/// `<dir of this library>/libnrt.so.1`, if it exists.
fn opennrt_libnrt() -> Option<&'static CStr> {
    static PATH: OnceLock<Option<CString>> = OnceLock::new();
    PATH.get_or_init(|| {
        std::panic::catch_unwind(|| {
            // SAFETY: `Dl_info` is a plain C struct of pointers and integers, for which all
            // zeroes (null pointers) is a valid value.
            let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
            // SAFETY: `dladdr` reads the address of a function of this library and writes
            // `info`, which is a valid out-parameter.
            let ok = unsafe { libc::dladdr(opennrt_libnrt as *const c_void, &mut info) };
            if ok == 0 || info.dli_fname.is_null() {
                return None;
            }
            // SAFETY: dladdr's `dli_fname` is a NUL-terminated path owned by the loader.
            let me = unsafe { CStr::from_ptr(info.dli_fname) }.to_str().ok()?;
            let dir = std::path::Path::new(me).parent()?;
            let lib = dir.join("libnrt.so.1");
            lib.exists()
                .then(|| CString::new(lib.into_os_string().into_encoded_bytes()).ok())
                .flatten()
        })
        .ok()
        .flatten()
    })
    .as_deref()
}

/// `OPENNRT_PRELOAD_VERBOSE=1`. This library is not the runtime (whose variables
/// `runtime::config` reads): it reads its one switch itself.
#[allow(clippy::disallowed_methods)]
fn verbose() -> bool {
    static V: OnceLock<bool> = OnceLock::new();
    *V.get_or_init(|| std::env::var_os("OPENNRT_PRELOAD_VERBOSE").is_some_and(|v| v == "1"))
}

/// Whether `file` names the vendor runtime by path: it has a slash and its last component is
/// `libnrt.so.1` or `libnrt.so`.
fn is_libnrt_path(file: &[u8]) -> bool {
    match file.iter().rposition(|&b| b == b'/') {
        Some(i) => matches!(&file[i + 1..], b"libnrt.so.1" | b"libnrt.so"),
        None => false,
    }
}

/// `dlopen(3)`, interposed (module doc).
///
/// # Safety
/// As for `dlopen(3)`: `file` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn dlopen(file: *const c_char, mode: c_int) -> *mut c_void {
    let Some(next) = next_dlopen() else {
        return std::ptr::null_mut();
    };
    if !file.is_null() {
        // SAFETY: the caller passes a NUL-terminated string (dlopen's contract).
        let name = unsafe { CStr::from_ptr(file) };
        if is_libnrt_path(name.to_bytes()) {
            if let Some(ours) = opennrt_libnrt() {
                if verbose() {
                    use std::io::Write as _;
                    let _ = writeln!(
                        std::io::stderr(),
                        "opennrt-preload: dlopen({}) -> {}",
                        name.to_string_lossy(),
                        ours.to_string_lossy()
                    );
                }
                // SAFETY: `ours` is NUL-terminated; `mode` is the caller's.
                return unsafe { next(ours.as_ptr(), mode) };
            }
        }
    }
    // SAFETY: the caller's arguments, unchanged.
    unsafe { next(file, mode) }
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_paths_ending_in_libnrt_are_redirected() {
        use super::is_libnrt_path;
        assert!(is_libnrt_path(b"/opt/aws/neuron/lib/libnrt.so.1"));
        assert!(is_libnrt_path(b"./libnrt.so"));
        assert!(
            !is_libnrt_path(b"libnrt.so.1"),
            "a bare name goes by SONAME already"
        );
        assert!(!is_libnrt_path(b"/opt/aws/neuron/lib/libnrt.so.1.2"));
        assert!(!is_libnrt_path(b"/usr/lib/libncfw.so"));
    }
}

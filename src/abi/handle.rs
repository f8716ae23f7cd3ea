//! Opaque objects and C-owned buffers handed out by the ABI (docs/design.md §4: "handles are typed
//! and converted only through helpers").
//!
//! **Objects.** An object C receives as an opaque handle (e.g. `nrt_inspect_config_t *`) is a
//! `Box` of a Rust type implementing [`Opaque`]. Its address is recorded with its kind in one
//! process-wide table when it is handed out, and every handle C passes back is looked up there
//! before it is used: NULL is `NRT_INVALID`; an address this library did not hand out, one that
//! was already freed, or one of another kind is `NRT_INVALID_HANDLE` and is never dereferenced.
//! A double free is therefore detected instead of corrupting the heap. Objects keep their
//! mutable state behind a lock, so C only ever gets shared access.
//!
//! **String lists** (`const char **` plus a count, e.g. `nrt_sys_trace_get_event_types`) are
//! `malloc`ed, NULL-terminated arrays of `malloc`ed strings. An empty list is a real one-slot
//! allocation holding only the terminator (never NULL), so clients that test the pointer for
//! NULL see success. Only the matching free function releases them (it checks the table), but
//! because the memory comes from `malloc`, a client that calls `free()` on it directly does not
//! corrupt the heap either.
//!
//! **Byte buffers** (`char *`, e.g. `nrt_sys_trace_fetch_events`) are `malloc`ed and
//! NUL-terminated, tracked the same way.

use std::collections::BTreeMap;
use std::ffi::{c_char, CString};

use parking_lot::Mutex;

use crate::error::{Error, ErrorKind, Result};

/// Address → what is handed out there, for everything currently handed out to C.
static LIVE: Mutex<BTreeMap<usize, Entry>> = Mutex::new(BTreeMap::new());

/// One handed-out address: its kind, and for objects that belong to one `nrt_init`
/// ([`Opaque::PER_INIT`]) how `nrt_close` frees them.
#[derive(Debug, Clone, Copy)]
struct Entry {
    kind: &'static str,
    free_at_close: Option<unsafe fn(usize)>,
}

impl Entry {
    const fn plain(kind: &'static str) -> Entry {
        Entry {
            kind,
            free_at_close: None,
        }
    }
}

const LIST_KIND: &str = "string list";
const BUFFER_KIND: &str = "byte buffer";

/// A Rust type handed to C as an opaque handle.
pub trait Opaque: Send + Sync + Sized + 'static {
    /// The handle type C sees (an opaque twin from `types.rs`).
    type Handle;
    /// What the object is, for messages and the live table.
    const KIND: &'static str;
    /// The object belongs to the `nrt_init` it was made under: `nrt_close` frees it, and its
    /// handle is `NRT_INVALID_HANDLE` from then on, also after the next `nrt_init` (tensors,
    /// tensor sets, prepared collectives). Objects legal outside `nrt_init` keep `false`.
    const PER_INIT: bool = false;
}

/// Drop the `T` exported at `addr` (the `free_at_close` of a [`Opaque::PER_INIT`] object).
///
/// # Safety
/// `addr` came from `export::<T>` and was removed from the live table by the caller.
unsafe fn drop_exported<T: Opaque>(addr: usize) {
    // SAFETY: per the contract, `addr` is a `Box<T>` this module leaked and nobody else owns.
    drop(unsafe { Box::from_raw(addr as *mut T) });
}

/// `nrt_close`: free every object that belongs to this `nrt_init` ([`Opaque::PER_INIT`]). Their
/// handles leave the live table, so a later use of one is `NRT_INVALID_HANDLE`, and nothing
/// they hold (tensor storage, prepared programs) outlives the runtime. Runs in the teardown
/// window, where no other entry point holds a reference from [`get`].
pub fn free_per_init_objects() -> usize {
    let doomed: Vec<(usize, unsafe fn(usize))> = {
        let mut live = LIVE.lock();
        let v: Vec<_> = live
            .iter()
            .filter_map(|(&a, e)| e.free_at_close.map(|f| (a, f)))
            .collect();
        for (a, _) in &v {
            live.remove(a);
        }
        v
    };
    let n = doomed.len();
    for (a, f) in doomed {
        // SAFETY: `a` was exported by `export::<T>` with `f = drop_exported::<T>` and has just
        // left the live table, so this is its only owner.
        unsafe { f(a) };
    }
    n
}

fn not_live(what: &str, kind: &str) -> Error {
    Error::invalid_handle(format!(
        "{what} is not a live {kind} handed out by this library (never allocated, already freed, or another kind of object)"
    ))
}

/// Take a slot out of the live table if it holds `kind`.
fn take(addr: usize, kind: &'static str, what: &str) -> Result<()> {
    let mut live = LIVE.lock();
    match live.get(&addr) {
        Some(e) if e.kind == kind => {
            live.remove(&addr);
            Ok(())
        }
        _ => Err(not_live(what, kind)),
    }
}

/// Move `obj` to the heap and hand it to C as a registered handle.
pub fn export<T: Opaque>(obj: T) -> *mut T::Handle {
    const {
        assert!(
            std::mem::size_of::<T>() > 0,
            "handles need distinct addresses"
        )
    };
    let p = Box::into_raw(Box::new(obj));
    let free_at_close = T::PER_INIT.then_some(drop_exported::<T> as unsafe fn(usize));
    LIVE.lock().insert(
        p.addr(),
        Entry {
            kind: T::KIND,
            free_at_close,
        },
    );
    p.cast()
}

/// Borrow the object behind a handle C passed in.
///
/// # Safety
/// If `h` is a live handle of kind `T`, no other thread may free it while the reference lives
/// (the caller's contract in C as well).
pub unsafe fn get<'a, T: Opaque>(h: *const T::Handle, what: &str) -> Result<&'a T> {
    if h.is_null() {
        return Err(Error::invalid(format!("{what} is NULL")));
    }
    if LIVE.lock().get(&h.addr()).map(|e| e.kind) != Some(T::KIND) {
        return Err(not_live(what, T::KIND));
    }
    // SAFETY: the address was produced by `export::<T>` (Box::into_raw) and is still in the
    // live table, so it points to a valid `T`; only shared access is handed out.
    Ok(unsafe { &*h.cast::<T>() })
}

/// Free the object behind a handle. NULL is a no-op (`Ok(false)`).
///
/// # Safety
/// No reference obtained through [`get`] for this handle may be used afterwards.
pub unsafe fn release<T: Opaque>(h: *mut T::Handle, what: &str) -> Result<bool> {
    if h.is_null() {
        return Ok(false);
    }
    take(h.addr(), T::KIND, what)?;
    // SAFETY: produced by Box::into_raw in `export::<T>` and removed from the live table exactly
    // once just above, so this is the only owner.
    drop(unsafe { Box::from_raw(h.cast::<T>()) });
    Ok(true)
}

fn alloc_failed(what: &str) -> Error {
    Error::new(
        ErrorKind::HostAlloc,
        format!("host allocation failed for {what}"),
    )
}

/// Hand a list of strings to C: a `malloc`ed array of `items.len() + 1` pointers (the last one
/// NULL) to `malloc`ed NUL-terminated copies. Returns the array and the count.
pub fn export_list(items: &[&str], what: &str) -> Result<(*mut *const c_char, usize)> {
    let n = items.len();
    let slots = n
        .checked_add(1)
        .and_then(|s| s.checked_mul(std::mem::size_of::<*const c_char>()))
        .ok_or_else(|| alloc_failed(what))?;
    // SAFETY: malloc has no preconditions; `slots` is non-zero.
    let arr = unsafe { libc::malloc(slots) }.cast::<*const c_char>();
    if arr.is_null() {
        return Err(alloc_failed(what));
    }
    for (i, item) in items.iter().enumerate() {
        let c = CString::new(item.replace('\0', "")).unwrap_or_default();
        // SAFETY: `c` is a valid NUL-terminated string.
        let s = unsafe { libc::strdup(c.as_ptr()) };
        if s.is_null() {
            for j in 0..i {
                // SAFETY: slots 0..i were written above with strdup results.
                unsafe { libc::free(arr.add(j).read().cast_mut().cast()) };
            }
            // SAFETY: `arr` came from malloc above.
            unsafe { libc::free(arr.cast()) };
            return Err(alloc_failed(what));
        }
        // SAFETY: i < n < number of slots allocated.
        unsafe { arr.add(i).write(s) };
    }
    // SAFETY: slot n is the last of the n + 1 allocated.
    unsafe { arr.add(n).write(std::ptr::null()) };
    LIVE.lock().insert(arr.addr(), Entry::plain(LIST_KIND));
    Ok((arr, n))
}

/// Free a list made by [`export_list`]. NULL is a no-op. The list is walked to its NULL
/// terminator; a `count` that disagrees is reported after freeing (nothing leaks).
///
/// # Safety
/// `list` must not be used afterwards.
pub unsafe fn free_list(list: *const *const c_char, count: usize, what: &str) -> Result<()> {
    if list.is_null() {
        return Ok(());
    }
    take(list.addr(), LIST_KIND, what)?;
    let mut n = 0;
    loop {
        // SAFETY: the array was built by `export_list` and is NULL-terminated.
        let s = unsafe { list.add(n).read() };
        if s.is_null() {
            break;
        }
        // SAFETY: each entry came from strdup.
        unsafe { libc::free(s.cast_mut().cast()) };
        n += 1;
    }
    // SAFETY: the array came from malloc in `export_list`.
    unsafe { libc::free(list.cast_mut().cast()) };
    if n != count {
        return Err(Error::invalid(format!(
            "{what}: count {count} does not match the {n} entries of the list (freed anyway)"
        )));
    }
    Ok(())
}

/// Hand a NUL-terminated copy of `s` to C in `malloc`ed memory.
pub fn export_buffer(s: &str, what: &str) -> Result<*mut c_char> {
    let len = s.len();
    // SAFETY: malloc has no preconditions; len + 1 is non-zero.
    let p = unsafe { libc::malloc(len + 1) }.cast::<c_char>();
    if p.is_null() {
        return Err(alloc_failed(what));
    }
    // SAFETY: `p` has len + 1 bytes; the source has len bytes; they do not overlap.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr().cast::<c_char>(), p, len);
        p.add(len).write(0);
    }
    LIVE.lock().insert(p.addr(), Entry::plain(BUFFER_KIND));
    Ok(p)
}

/// Free a buffer made by [`export_buffer`]. NULL is a no-op.
///
/// # Safety
/// `p` must not be used afterwards.
pub unsafe fn free_buffer(p: *mut c_char, what: &str) -> Result<()> {
    if p.is_null() {
        return Ok(());
    }
    take(p.addr(), BUFFER_KIND, what)?;
    // SAFETY: the buffer came from malloc in `export_buffer` and left the live table once.
    unsafe { libc::free(p.cast()) };
    Ok(())
}

/// Copy `s` plus a NUL into the caller's buffer of `cap` bytes.
///
/// # Safety
/// `buf` must be NULL or point to `cap` writable bytes.
pub unsafe fn write_c_string(buf: *mut c_char, cap: usize, s: &str, what: &str) -> Result<()> {
    if buf.is_null() {
        return Err(Error::invalid(format!("{what} is NULL")));
    }
    if cap < s.len() + 1 {
        return Err(Error::resource(format!(
            "{what} holds {cap} bytes but {} are needed ({} characters and the NUL)",
            s.len() + 1,
            s.len()
        )));
    }
    // SAFETY: `buf` has at least s.len() + 1 writable bytes (checked above).
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr().cast::<c_char>(), buf, s.len());
        buf.add(s.len()).write(0);
    }
    Ok(())
}

/// Test support: run `f` with the lifecycle state machine held in a given state.
#[cfg(test)]
pub(crate) mod testing {
    use crate::runtime::state;

    /// Run `f` while the process is in START (uninitialised), serialised with every other test
    /// that drives the state machine.
    pub fn uninit<R>(f: impl FnOnce() -> R) -> R {
        let _s = state::tests::SERIAL.lock();
        assert_eq!(state::current(), state::State::Start);
        f()
    }

    struct CloseOnDrop;
    impl Drop for CloseOnDrop {
        fn drop(&mut self) {
            state::close(|| {});
        }
    }

    /// Run `f` in INIT (the state machine only; no carrier is loaded and the configuration
    /// comes from the environment, as before `nrt_init`).
    pub fn init<R>(f: impl FnOnce() -> R) -> R {
        let _s = state::tests::SERIAL.lock();
        assert!(state::init(|| Ok(())).expect("enter INIT"));
        let _c = CloseOnDrop;
        f()
    }

    /// Closes the whole runtime, as `nrt_close` does, also when the test panics.
    struct NrtCloseOnDrop;
    impl Drop for NrtCloseOnDrop {
        fn drop(&mut self) {
            crate::abi::nrt::nrt_close();
        }
    }

    /// Run `f` under a real `nrt_init` whose environment is exactly `vars` (and nothing from
    /// the process's own), then `nrt_close`: how a unit test checks behaviour that a variable
    /// drives (CONTRIBUTING.md, "Testing what a variable changes"). Serialised with every other
    /// test that drives the state machine.
    ///
    /// `nrt_init` loads a firmware carrier: unless `vars` names `OPENNRT_NCFW_PATH`, the
    /// workspace's own `libncfw.so` of this profile (`target/<profile>/libncfw.so`, next to the
    /// `deps/` folder holding this test binary), which `cargo build --workspace` of the same
    /// profile makes; a stale one is fine, a missing one fails the test saying so.
    pub fn with_runtime<R>(vars: &[(&str, &str)], f: impl FnOnce() -> R) -> R {
        let _s = state::tests::SERIAL.lock();
        assert_eq!(state::current(), state::State::Start);
        let exe = std::env::current_exe().expect("the test binary's path");
        let carrier = exe
            .parent()
            .and_then(|deps| deps.parent())
            .map(|profile| profile.join("libncfw.so"))
            .expect("target/<profile>/");
        let named = vars.iter().any(|(k, _)| *k == "OPENNRT_NCFW_PATH");
        assert!(
            named || carrier.is_file(),
            "{} is missing: build the carrier once with `cargo build --workspace` in this profile \
             (e.g. `cargo build --profile quick --workspace`)",
            carrier.display()
        );
        let carrier = carrier.to_string_lossy().into_owned();
        let lookup = |k: &str| match vars.iter().find(|(name, _)| *name == k) {
            Some((_, v)) => Some(v.to_string()),
            None if k == "OPENNRT_NCFW_PATH" => Some(carrier.clone()),
            None => None,
        };
        crate::runtime::process::init_with(0, "", "", lookup)
            .expect("nrt_init with the test's variables");
        let _c = NrtCloseOnDrop;
        f()
    }
}

#[cfg(test)]
mod tests;

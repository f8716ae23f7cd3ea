//! The C boundary (docs/design.md §4): one entry wrapper for every exported function.
//!
//! [`enter`] (through its forms [`enter_status`], [`enter_code`], [`enter_value`] and
//! [`enter_void`], which take the body as a closure that rustfmt formats) wraps a function body
//! so that:
//!
//! * a panic never crosses into C: it is caught, logged at ERROR and becomes `NRT_FAILURE`
//!   (or the function's failure value);
//! * the lifecycle guard of docs/contract/abi.md §5.1 runs first where the entry point has one
//!   (13 before `nrt_init` and after `nrt_close` returned, 14 during teardown, 1 in a forked
//!   child);
//! * entry and exit are logged at TRACE;
//! * the core's [`Error`] becomes an `NRT_STATUS` in exactly one place, [`status_of`], and a log
//!   line that says what was wrong (an unimplemented entry point logs its name once at WARNING).
//!
//! Pointers are checked and converted once, with the helpers below; out-parameters are written
//! only on success, by the body, after everything that can fail has run.

use std::ffi::{c_char, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::abi::types::nrt_status;
use crate::error::{Error, ErrorKind, Result};
use crate::runtime::{log, state};

/// Whether an entry point runs the lifecycle guard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Guard {
    /// The docs/contract/abi.md §5.1 guard: only proceed in INIT.
    Lifecycle,
    /// No guard (nrt_init itself, version and count getters, status strings, libncfw).
    None,
}

/// The status an error returns to C: the kind's own ([`ErrorKind::status`], the one mapping,
/// in the core). Every entry point returns errors through here.
pub fn status_of(e: &Error) -> nrt_status {
    e.status()
}

fn report(name: &str, e: &Error) {
    match e.kind() {
        ErrorKind::NotImplemented => log::write_once(
            log::Level::Warning,
            name,
            name,
            format_args!("{name} is not implemented yet in OpenNRT; returning NRT_FAILURE"),
        ),
        _ => log::write(
            log::Level::Error,
            name,
            format_args!("{} ({:?}): {}", name, status_of(e), e.message()),
        ),
    }
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic payload".to_string()
    }
}

/// Run `body` as the entry point `name`; on error return `on_error(&err)`. Entry points use
/// one of its four forms — [`enter_status`], [`enter_code`], [`enter_value`], [`enter_void`] —
/// with the body as a closure, so rustfmt formats every body.
pub fn enter<T>(
    name: &'static str,
    guard: Guard,
    on_error: impl FnOnce(&Error) -> T,
    body: impl FnOnce() -> Result<T>,
) -> T {
    crate::log_trace!(name, "API:IN");
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        if guard == Guard::Lifecycle {
            state::guard()?;
        }
        body()
    }));
    let result = match outcome {
        Ok(r) => r,
        Err(p) => Err(Error::failure(format!(
            "internal error (panic caught at the C boundary): {}",
            panic_message(p.as_ref())
        ))),
    };
    match result {
        Ok(v) => {
            crate::log_trace!(name, "API:OUT ok");
            v
        }
        Err(e) => {
            report(name, &e);
            crate::log_trace!(name, "API:OUT {:?}", status_of(&e));
            on_error(&e)
        }
    }
}

/// [`enter`] for a function that returns `NRT_STATUS`: `Ok(())` is `NRT_SUCCESS`.
pub fn enter_status(
    name: &'static str,
    guard: Guard,
    body: impl FnOnce() -> Result<()>,
) -> nrt_status {
    enter(name, guard, status_of, || {
        body().map(|()| nrt_status::NRT_SUCCESS)
    })
}

/// [`enter`] for a function that returns nothing (`void`).
pub fn enter_void(name: &'static str, guard: Guard, body: impl FnOnce() -> Result<()>) {
    enter(name, guard, |_| (), body)
}

/// [`enter`] for a function whose non-zero status can be an expected answer rather than an
/// error (e.g. "no event yet"): `Ok(status)` is returned as is and not logged as a failure;
/// `Err` still maps and logs.
pub fn enter_code(
    name: &'static str,
    guard: Guard,
    body: impl FnOnce() -> Result<nrt_status>,
) -> nrt_status {
    enter(name, guard, status_of, body)
}

/// [`enter`] for a function that returns a value: `fallback` on error.
pub fn enter_value<T>(
    name: &'static str,
    guard: Guard,
    fallback: T,
    body: impl FnOnce() -> Result<T>,
) -> T {
    enter(name, guard, |_| fallback, body)
}

/// The standard body of an entry point that a later issue implements.
pub fn not_implemented(name: &'static str) -> Result<()> {
    Err(Error::not_implemented(name))
}

/// A required pointer argument: `Err(NRT_INVALID)` naming `what` if NULL.
pub fn non_null<T>(p: *const T, what: &str) -> Result<*const T> {
    if p.is_null() {
        Err(Error::invalid(format!("{what} is NULL")))
    } else {
        Ok(p)
    }
}

/// A required out-parameter: checked for NULL and alignment, written only by the caller of this
/// helper once everything else has succeeded.
///
/// # Safety
/// `p` must be NULL or valid for writing one `T` for `'a`, and nothing else may access `*p`
/// while the returned reference lives. Alignment is not required of the caller: a misaligned
/// `p` is refused (`NRT_INVALID`), like NULL, before any reference is made.
pub unsafe fn out_param<'a, T>(p: *mut T, what: &str) -> Result<&'a mut std::mem::MaybeUninit<T>> {
    if p.is_null() {
        return Err(Error::invalid(format!("{what} is NULL")));
    }
    if !p.is_aligned() {
        return Err(Error::invalid(format!(
            "{what} is not aligned for its type"
        )));
    }
    // SAFETY: `p` is non-NULL and aligned (both checked above) and valid for writing one `T`
    // with no other access for `'a` (this function's contract); `MaybeUninit<T>` has `T`'s
    // layout and makes no claim about the current contents.
    Ok(unsafe { &mut *p.cast::<std::mem::MaybeUninit<T>>() })
}

/// A required input reference.
///
/// # Safety
/// `p` must be NULL or point to an initialised `T` that stays valid and is not written for
/// `'a`. Alignment is not required of the caller: a misaligned `p` is refused (`NRT_INVALID`),
/// like NULL, before any reference is made.
pub unsafe fn in_ref<'a, T>(p: *const T, what: &str) -> Result<&'a T> {
    if p.is_null() {
        return Err(Error::invalid(format!("{what} is NULL")));
    }
    if !p.is_aligned() {
        return Err(Error::invalid(format!(
            "{what} is not aligned for its type"
        )));
    }
    // SAFETY: `p` is non-NULL and aligned (both checked above) and points to an initialised `T`
    // that is not written for `'a` (this function's contract).
    Ok(unsafe { &*p })
}

/// An optional C string: NULL → `None`; invalid UTF-8 is replaced, never rejected (names and
/// version strings are only logged).
///
/// # Safety
/// `p` must be NULL or point to a NUL-terminated string, readable up to and including its NUL
/// and not written during this call.
pub unsafe fn opt_cstr(p: *const c_char) -> Option<String> {
    if p.is_null() {
        None
    } else {
        // SAFETY: `p` is non-NULL (checked) and a readable NUL-terminated string that nothing
        // writes during this call (this function's contract); the bytes are copied out at once.
        Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    }
}

/// A required C string.
///
/// # Safety
/// `p` must be NULL or point to a NUL-terminated string, readable up to and including its NUL
/// and not written during this call (NULL is refused with `NRT_INVALID`).
pub unsafe fn req_cstr(p: *const c_char, what: &str) -> Result<String> {
    // SAFETY: `p` is NULL or a readable NUL-terminated string not written during this call
    // (this function's contract), which is exactly what `opt_cstr` requires.
    unsafe { opt_cstr(p) }.ok_or_else(|| Error::invalid(format!("{what} is NULL")))
}

/// A byte slice from a pointer and length; NULL is allowed only when `len == 0`.
///
/// # Safety
/// If `len > 0`, `p` must be NULL or point to `len` readable bytes that stay valid and are not
/// written for `'a`. With `len == 0`, `p` is not read and may be anything.
pub unsafe fn bytes<'a>(p: *const u8, len: usize, what: &str) -> Result<&'a [u8]> {
    if len == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(Error::invalid(format!(
            "{what} is NULL but its length is {len}"
        )));
    }
    // SAFETY: `len > 0` and `p` is non-NULL (both checked above), so by this function's contract
    // `p` points to `len` readable bytes not written for `'a`; `u8` needs no alignment.
    Ok(unsafe { std::slice::from_raw_parts(p, len) })
}

/// Copy `s` into a fixed C char array, truncating and always NUL-terminating.
pub fn fill_c_chars(dst: &mut [c_char], s: &str) {
    dst.fill(0);
    let n = s.len().min(dst.len().saturating_sub(1));
    for (d, b) in dst.iter_mut().zip(s.as_bytes()[..n].iter()) {
        *d = *b as c_char;
    }
}

/// The `exec_ret` of an async request (`nrta_*` schedule calls): the headers say it must be
/// writable until completion, so NULL is refused (`NRT_INVALID`) before anything is queued
/// rather than silently dropping the request's status.
pub fn exec_ret_arg(exec_ret: *mut crate::abi::status::NRT_STATUS) -> Result<()> {
    if exec_ret.is_null() {
        return Err(Error::invalid(
            "exec_ret is NULL: it receives the request's status at completion and must stay \
             writable until then",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;

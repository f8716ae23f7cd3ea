//! Loading the firmware carrier `libncfw.so` exactly as the vendor runtime does
//! (docs/contract/carrier.md §1.2, docs/design.md §2.3): `dlopen("libncfw.so", RTLD_NOW)`, resolve
//! `libncfw_get_version` and require it to return 2, then resolve `libncfw_get_image` and
//! `libncfw_ctx_log`. Any failure fails `nrt_init`. The handle is never closed, so image
//! pointers stay valid for the life of the process. Either OpenNRT's or the vendor's carrier
//! can be paired with OpenNRT's libnrt this way.
//!
//! The name can be overridden with `OPENNRT_NCFW_PATH` (a path or a file name) for tests and
//! unusual layouts. libnrt.so.1 carries `RUNPATH=$ORIGIN`, so a `libncfw.so` installed next to it
//! is found without `LD_LIBRARY_PATH`.

use std::ffi::{c_char, c_int, c_void};

use crate::error::{Error, Result};
use crate::ncfw::{Arch, FirmwareImage, LogStatus, LOG_BUF_SIZE};

/// The version the carrier must report (docs/contract/carrier.md §1.4).
pub const REQUIRED_NCFW_VERSION: c_int = 2;

/// `libncfw_get_image(arch_id, out)`.
pub type GetImageFn = unsafe extern "C" fn(u32, *mut c_void) -> c_int;
/// `libncfw_ctx_log(ctx, out_buf, model_name, arch_id)`.
pub type CtxLogFn = unsafe extern "C" fn(*const c_void, *mut c_char, *const c_char, u32) -> c_int;

/// A loaded, version-checked carrier. `nrt_init` installs it as the device's
/// (`device::settings::set_carrier`): machines take their firmware images from its
/// `libncfw_get_image` and hang dumps come from its `libncfw_ctx_log`.
#[derive(Debug)]
pub struct Carrier {
    /// Where it was loaded from (the name given to dlopen).
    pub name: String,
    /// Cached `libncfw_get_image`.
    pub get_image: GetImageFn,
    /// Cached `libncfw_ctx_log`.
    pub ctx_log: CtxLogFn,
    /// Images already fetched and parsed, by arch id (the carrier's images never change).
    images: parking_lot::Mutex<Vec<(u32, FirmwareImage)>>,
    _lib: &'static libloading::Library,
}

/// `ncfw_image_t` as the carrier fills it (docs/contract/carrier.md §1.5): two
/// `{const void *ram_image; uint64_t ram_image_size;}` records, IRAM then DRAM.
#[repr(C)]
struct RamImages {
    iram: (*const u8, u64),
    dram: (*const u8, u64),
}

/// Largest image a carrier may hand out (OpenNRT's are 64 KiB and 20 KiB; the vendor's below
/// 1 MiB): a larger size is refused rather than read.
const MAX_IMAGE_BYTES: u64 = 16 << 20;

impl crate::device::settings::FirmwareCarrier for Carrier {
    fn name(&self) -> &str {
        &self.name
    }

    fn image(&self, arch: Arch) -> Result<FirmwareImage> {
        let id = arch.id();
        if let Some((_, fw)) = self.images.lock().iter().find(|(a, _)| *a == id) {
            return Ok(fw.clone());
        }
        let bad = |why: String| {
            Error::failure(format!(
                "the firmware carrier {:?}: libncfw_get_image({id}) {why}",
                self.name
            ))
        };
        let mut out = RamImages {
            iram: (std::ptr::null(), 0),
            dram: (std::ptr::null(), 0),
        };
        // SAFETY: `out` is a writable `ncfw_image_t` (layout above); the carrier passed the gate,
        // so this is its `libncfw_get_image` with the prototype of docs/contract/carrier.md §1.3.
        let rc = unsafe { (self.get_image)(id, (&mut out as *mut RamImages).cast()) };
        if rc != 0 {
            return Err(bad(format!("returned {rc}")));
        }
        let part = |(p, n): (*const u8, u64), which: &str| -> Result<&'static [u8]> {
            if p.is_null() || n == 0 || n > MAX_IMAGE_BYTES {
                return Err(bad(format!("gave a {which} image at {p:?} of {n} bytes")));
            }
            // SAFETY: the carrier contract (docs/contract/carrier.md §1.5) makes the image
            // readable for `n` bytes for the life of the library, which is never unloaded
            // (`KEPT`); `n` is bounded above.
            Ok(unsafe { std::slice::from_raw_parts(p, n as usize) })
        };
        let (iram, dram) = (part(out.iram, "IRAM")?, part(out.dram, "DRAM")?);
        let fw = FirmwareImage::parse(iram, dram).map_err(|e| bad(e.message().to_string()))?;
        self.images.lock().push((id, fw.clone()));
        Ok(fw)
    }

    fn ctx_log(&self, ctx: &[u8], arch: Arch, model_name: &[u8]) -> Result<(String, LogStatus)> {
        let name = std::ffi::CString::new(model_name.to_vec())
            .map_err(|_| Error::invalid("a model name with a NUL byte"))?;
        let mut buf = vec![0u8; LOG_BUF_SIZE];
        // SAFETY: `ctx` and the NUL-terminated `name` are readable, `buf` is LOG_BUF_SIZE
        // writable bytes as the prototype requires (docs/contract/carrier.md §1.6).
        let rc = unsafe {
            (self.ctx_log)(
                ctx.as_ptr().cast(),
                buf.as_mut_ptr().cast(),
                name.as_ptr(),
                arch.id(),
            )
        };
        let st = match rc {
            0 => LogStatus::Complete,
            28 => LogStatus::Truncated,
            rc => {
                return Err(Error::failure(format!(
                    "the firmware carrier {:?}: libncfw_ctx_log(arch {}) returned {rc}",
                    self.name,
                    arch.id()
                )))
            }
        };
        let n = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        Ok((String::from_utf8_lossy(&buf[..n]).into_owned(), st))
    }
}

/// Carriers that passed the gate, by the name they were opened with: never closed, for the
/// life of the process (docs/contract/carrier.md §1.2 "lifetime": image pointers stay valid), and reused by
/// a later `nrt_init` instead of being opened again.
static KEPT: parking_lot::Mutex<Vec<(String, &'static libloading::Library)>> =
    parking_lot::Mutex::new(Vec::new());

impl Carrier {
    /// Load and gate the carrier (module doc). A carrier that passed the gate once is kept
    /// and gated again by a later `nrt_init`, never opened twice.
    pub fn load(name: &str) -> Result<Carrier> {
        let fail = |why: String| {
            Error::failure(format!(
                "cannot use the firmware carrier {name:?}: {why} (install OpenNRT's libncfw.so next to libnrt.so.1, or set OPENNRT_NCFW_PATH)"
            ))
        };
        let kept = KEPT
            .lock()
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, l)| *l);
        let (lib, (get_image, ctx_log)) = match kept {
            Some(lib) => (lib, gate(lib).map_err(fail)?),
            None => {
                // SAFETY: loading a shared object runs its initialisers; libncfw has none that
                // matter (it is inert by contract, docs/contract/carrier.md §1.1).
                let lib = unsafe {
                    libloading::os::unix::Library::open(
                        Some(&name),
                        libc::RTLD_NOW | libc::RTLD_LOCAL,
                    )
                }
                .map_err(|e| fail(e.to_string()))?;
                let lib: libloading::Library = lib.into();
                // A carrier that fails the gate is closed again (dropped here).
                let entry = gate(&lib).map_err(fail)?;
                let lib: &'static libloading::Library = Box::leak(Box::new(lib));
                KEPT.lock().push((name.to_string(), lib));
                (lib, entry)
            }
        };
        Ok(Carrier {
            name: name.to_string(),
            get_image,
            ctx_log,
            images: Default::default(),
            _lib: lib,
        })
    }
}

/// The gate of docs/contract/carrier.md §1.2: `libncfw_get_version() == 2`, then the two entry points.
fn gate(lib: &libloading::Library) -> std::result::Result<(GetImageFn, CtxLogFn), String> {
    // SAFETY: the symbol types are the ones of docs/contract/carrier.md §1.3.
    let version = unsafe { lib.get::<unsafe extern "C" fn() -> c_int>(b"libncfw_get_version\0") }
        .map_err(|e| e.to_string())?;
    // SAFETY: libncfw_get_version takes no arguments and has no preconditions.
    let found = unsafe { version() };
    if found != REQUIRED_NCFW_VERSION {
        return Err(format!(
            "incompatible libncfw version. Expected: {REQUIRED_NCFW_VERSION}, Found: {found}"
        ));
    }
    // SAFETY: `GetImageFn` is the type docs/contract/carrier.md §1.3 gives `libncfw_get_image`;
    // the pointer is kept only while `lib` stays loaded (carriers are never unloaded).
    let get_image =
        *unsafe { lib.get::<GetImageFn>(b"libncfw_get_image\0") }.map_err(|e| e.to_string())?;
    // SAFETY: `CtxLogFn` is the type docs/contract/carrier.md §1.3 gives `libncfw_ctx_log`;
    // the pointer is kept only while `lib` stays loaded (carriers are never unloaded).
    let ctx_log =
        *unsafe { lib.get::<CtxLogFn>(b"libncfw_ctx_log\0") }.map_err(|e| e.to_string())?;
    Ok((get_image, ctx_log))
}

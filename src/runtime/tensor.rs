//! Tensors: byte views of simulated memory (docs/design.md §2.7 "simulated memory is real memory";
//! docs/contract/abi.md §3.3).
//!
//! A [`Tensor`] is a view `(offset, size)` of a shared storage. The storage is either one
//! allocation of this library or caller memory attached with `nrt_tensor_attach_buffer`. Device
//! memory is ordinary host memory, so the VA of a device tensor is directly usable by clients
//! such as libfabric and nixl (§3.3), and [`memcpy_to_device`] accepts any address inside a live
//! device storage.
//!
//! **Lifetime.** The storage sits behind an `Arc`. Cloning a tensor is cheap and keeps the
//! storage alive, so a queued operation holding a clone never touches freed memory even when C
//! frees the handle early; a slice keeps its parent's storage alive too (the vendor leaves
//! "parent freed while a slice lives" undefined, §3.3; here it is simply safe). Memory is
//! released when the last view goes away.
//!
//! **Access.** Every access goes through raw pointers (`ptr::copy`, `ptr::write_bytes`); no
//! `&mut [u8]` is ever formed over storage another thread may touch. Copies use `ptr::copy`
//! (memmove), not `copy_nonoverlapping`: a C caller may legally pass a tensor's own VA (from
//! `nrt_tensor_get_va`) as the host buffer of a read or write of the same tensor, and a copy
//! between two slices of one storage may overlap.
//!
//! **Shared device memory in a job.** In a process that belongs to a multi-process job
//! (`NEURON_RT_ROOT_COMM_ID`, or `OPENNRT_SHARED_DEVICE=1`), a device tensor's storage is a named
//! shared-memory object of its own (`/opennrt-<job>-<pid>-t<n>`, [`SharedObject`]) instead of
//! heap memory, so the other ranks' processes can map it and their DMA engines write a
//! collective's result straight into it (`runtime::multi_process::run`, "Outputs in place").
//! The name lives exactly as long as the storage: the last view to go unlinks it, so a freed
//! tensor leaves nothing in `/dev/shm` (a peer's mapping, if any, keeps the pages until that peer
//! drops it). A process that dies leaves its names to the job's root, which removes every name
//! of a dead process (`shm::unlink_pid`).
//!
//! **Implicit-async completion.** Each tensor object carries an output-completion counter for
//! `nrt_tensor_check_output_completion`. Implicit async was removed in runtime 2.34 (§5.3), so
//! every execution is synchronous. Choice: the counter counts finished executions that wrote
//! the tensor as an output since the last reset ([`Tensor::complete_output`], for the model
//! executor to call), and a check waits for it honestly: `expected == 0` succeeds at once, a
//! count that is never reached times out.
//!
//! The async API's transfers (`nrta_tensor_*`) are queued on the execution units by [`ops`].

use std::alloc::Layout;
use std::collections::BTreeMap;
use std::fmt;
use std::ptr::NonNull;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::error::{Error, ErrorKind, Result};
use crate::runtime::multi_process::shm::{self, Segment};

/// Alignment of every storage this library allocates. Choice: 64 bytes (one cache line; at
/// least the alignment of every dtype and DMA element). Attached caller memory keeps whatever
/// alignment the caller gave it.
pub const STORAGE_ALIGN: usize = 64;

/// How often an unbounded completion wait logs that it is still waiting.
const STILL_WAITING_EVERY: Duration = Duration::from_secs(10);

/// Where a tensor lives (`nrt_tensor_placement_t` DEVICE / HOST, docs/contract/abi.md §2.2; VIRTUAL
/// was removed in 2.32 and has no value here).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Simulated device memory of one logical core.
    Device,
    /// Host memory.
    Host,
}

/// Where the bytes of a storage come from.
#[derive(Debug, Clone)]
enum Backing {
    /// Allocated here with this layout; freed on drop.
    Owned(Layout),
    /// A named shared-memory object (module doc, "Shared device memory in a job"); its name is
    /// unlinked on drop, the mapping goes with the last `Arc`.
    Shared(Arc<Segment>),
    /// Caller memory (`nrt_tensor_attach_buffer`); never freed here.
    Attached,
}

/// A device tensor's storage as a named shared-memory object, for the peers of a job to map
/// ([`Tensor::shared_object`]).
#[derive(Debug, Clone)]
pub struct SharedObject {
    /// The mapped object (its name is [`Segment::name`]).
    pub object: Arc<Segment>,
    /// The view's first byte in the object.
    pub offset: u64,
}

/// One block of memory shared by every view of it.
struct Storage {
    base: NonNull<u8>,
    /// Usable bytes (an owned zero-byte storage still allocates one byte so its address is
    /// unique and non-NULL).
    len: u64,
    backing: Backing,
    /// The logical core of an owned device storage: registered in [`DEVICE_RANGES`] and
    /// counted in [`DEVICE_BYTES`].
    device: Option<u32>,
}

// SAFETY: a storage is a plain block of bytes that is only ever accessed through raw pointers
// by `ptr::copy` / `ptr::write_bytes`, never through references, and is freed exactly once by
// `Drop` after the last `Arc` is gone. Sharing it between threads follows the hardware-like
// contract of device memory: concurrent accesses to disjoint bytes are fine, and concurrent
// writers (or a writer and a reader) of the same bytes are the caller's race, exactly as two
// DMA engines writing one HBM range on the device. No Rust invariant depends on the bytes.
unsafe impl Send for Storage {}
// SAFETY: see `Send` above; `&Storage` only exposes the base address and length.
unsafe impl Sync for Storage {}

/// Start address → live device storage, for [`memcpy_to_device`]. Entries are weak so the
/// registry never keeps memory alive; a storage removes its entry in `Drop` before freeing.
static DEVICE_RANGES: Mutex<BTreeMap<usize, Weak<Storage>>> = Mutex::new(BTreeMap::new());

/// Logical core → bytes of device storage allocated on it and still alive
/// (`nrt_get_vnc_memory_stats`).
static DEVICE_BYTES: Mutex<BTreeMap<u32, u64>> = Mutex::new(BTreeMap::new());

/// Bytes of device memory in use on logical core `vnc` (tensors, model scratch).
pub fn device_bytes_in_use(vnc: u32) -> u64 {
    DEVICE_BYTES.lock().get(&vnc).copied().unwrap_or(0)
}

/// Whether device tensors go into named shared memory (module doc, "Shared device memory in a
/// job"): this process is in a job, or is configured to join one or to run collectives on the
/// shared device.
fn shared_device_memory() -> bool {
    crate::runtime::multi_process::bootstrap::job_tag().is_some()
        || crate::runtime::process::config()
            .is_ok_and(|c| c.root_comm_id.is_some() || c.shared_device)
}

/// A fresh name for a tensor's shared-memory object: `/opennrt-<job>-<pid>-t<n>`, with the job's
/// tag once the process has joined it (before, the tag of names made outside a job).
fn next_object_name() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let job = crate::runtime::multi_process::bootstrap::job_tag();
    let job = job.as_deref().unwrap_or(shm::NO_JOB);
    format!("{}t{n}", shm::prefix(job, std::process::id()))
}

/// Make the process's exit unlink the names of the shared tensors still alive then (a program
/// that exits without freeing its tensors, or without `nrt_close`, leaves nothing in
/// `/dev/shm`). Registered once, at the first shared allocation.
fn unlink_at_exit() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    extern "C" fn unlink_live_objects() {
        // Never unwind out of an exit handler; skip rather than wait for a lock held by a
        // thread that exit interrupted.
        let _ = std::panic::catch_unwind(|| {
            let live: Vec<Arc<Storage>> = match DEVICE_RANGES.try_lock() {
                Some(ranges) => ranges.values().filter_map(Weak::upgrade).collect(),
                None => return,
            };
            for st in &live {
                if let Backing::Shared(object) = &st.backing {
                    object.unlink();
                }
            }
        });
    }
    ONCE.call_once(|| {
        // SAFETY: registers a plain `extern "C"` function that takes no arguments and never
        // unwinds; glibc's `atexit` in a shared object runs it at exit or at `dlclose`.
        if unsafe { libc::atexit(unlink_live_objects) } != 0 {
            crate::log_warn!(
                "tensor",
                "cannot register the exit handler that unlinks shared tensors: a program that \
                 exits with live device tensors may leave names in /dev/shm"
            );
        }
    });
}

/// A new shared-memory object of `bytes` for `what`, or `None` when the system refuses one
/// (`/dev/shm` full, the process's map count at its limit): the tensor then lives on the heap
/// and a collective copies its result out, as outside a job. Logged once per process.
fn shared_object(bytes: usize, what: &str) -> Option<Arc<Segment>> {
    static TOLD: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    match Segment::create(&next_object_name(), bytes) {
        Ok(object) => Some(Arc::new(object)),
        Err(e) => {
            if !TOLD.swap(true, std::sync::atomic::Ordering::Relaxed) {
                crate::log_warn!(
                    "tensor",
                    "{what} goes on the heap, not in shared memory ({}): collectives copy its \
                     results instead of writing them in place (logged once)",
                    e.message()
                );
            }
            None
        }
    }
}

impl Storage {
    /// Allocate `len` zeroed bytes, 64-byte aligned (page aligned in shared memory). Device
    /// memory reads as 0 after allocate (Choice: the vendor does not promise it; zero is the
    /// deterministic answer). Failure is an error, never an abort: `NRT_RESOURCE` for device
    /// memory (a full `/dev/shm` too), `NRT_FAIL_HOST_MEM_ALLOC` for host.
    fn allocate(
        len: u64,
        placement: Placement,
        vnc: Option<u32>,
        what: &str,
        shared: bool,
    ) -> Result<Arc<Storage>> {
        let (kind, mem) = match placement {
            Placement::Device => (ErrorKind::Resource, "device"),
            Placement::Host => (ErrorKind::HostAlloc, "host"),
        };
        let fail = |why: &str| {
            Error::new(
                kind,
                format!("cannot allocate {len} bytes of {mem} memory for {what}: {why}"),
            )
        };
        let bytes =
            usize::try_from(len.max(1)).map_err(|_| fail("larger than the address space"))?;
        let device = vnc.filter(|_| placement == Placement::Device);
        let shared = shared && device.is_some() && len > 0;
        let object = match shared {
            true => shared_object(bytes, what),
            false => None,
        };
        let (base, backing) = match object {
            Some(object) => {
                // mmap hands out page-aligned, non-null addresses.
                let base = NonNull::new(object.as_ptr()).ok_or_else(|| fail("mmap gave NULL"))?;
                unlink_at_exit();
                (base, Backing::Shared(object))
            }
            None => {
                let layout = Layout::from_size_align(bytes, STORAGE_ALIGN)
                    .map_err(|_| fail("larger than isize::MAX"))?;
                // SAFETY: `layout` has a non-zero size.
                let p = unsafe { std::alloc::alloc_zeroed(layout) };
                let base = NonNull::new(p).ok_or_else(|| fail("out of memory"))?;
                (base, Backing::Owned(layout))
            }
        };
        let storage = Arc::new(Storage {
            base,
            len,
            backing,
            device,
        });
        if let Some(v) = device {
            DEVICE_RANGES
                .lock()
                .insert(base.as_ptr().addr(), Arc::downgrade(&storage));
            *DEVICE_BYTES.lock().entry(v).or_insert(0) += len;
        }
        Ok(storage)
    }

    /// Caller memory as a storage (`nrt_tensor_attach_buffer`).
    fn attached(buffer: *mut u8, len: u64) -> Result<Arc<Storage>> {
        let base =
            NonNull::new(buffer).ok_or_else(|| Error::invalid("the attached buffer is NULL"))?;
        let fits = usize::try_from(len)
            .ok()
            .filter(|&n| n <= isize::MAX as usize)
            .and_then(|n| buffer.addr().checked_add(n))
            .is_some();
        if !fits {
            return Err(Error::invalid(format!(
                "an attached buffer of {len} bytes at {buffer:p} does not fit in the address space"
            )));
        }
        Ok(Arc::new(Storage {
            base,
            len,
            backing: Backing::Attached,
            device: None,
        }))
    }
}

impl Drop for Storage {
    fn drop(&mut self) {
        if let Some(v) = self.device {
            // Deregister before freeing, so the address cannot be reused while still listed.
            DEVICE_RANGES.lock().remove(&self.base.as_ptr().addr());
            if let Some(n) = DEVICE_BYTES.lock().get_mut(&v) {
                *n = n.saturating_sub(self.len);
            }
        }
        match &self.backing {
            Backing::Owned(layout) => {
                // SAFETY: allocated in `Storage::allocate` with exactly this layout; `Drop`
                // runs once.
                unsafe { std::alloc::dealloc(self.base.as_ptr(), *layout) };
            }
            // The name goes with the storage; a peer's mapping keeps the pages until it drops it.
            Backing::Shared(object) => object.unlink(),
            Backing::Attached => {}
        }
    }
}

impl fmt::Debug for Storage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Storage")
            .field("base", &self.base)
            .field("len", &self.len)
            .field("backing", &self.backing)
            .field("device", &self.device)
            .finish()
    }
}

/// The implicit-async output-completion counter of one tensor object.
#[derive(Debug, Default)]
struct OutputCompletion {
    count: Mutex<u64>,
    changed: Condvar,
}

/// A tensor: a view (offset, size) of a shared storage. Clone is cheap (clones an Arc) and keeps
/// the storage alive, so a queued operation holding a clone never touches freed memory even if C
/// frees the handle early.
#[derive(Debug, Clone)]
pub struct Tensor {
    name: Arc<str>,
    placement: Placement,
    vnc: Option<u32>,
    /// `None` only for a tensor from [`Tensor::empty`] (then `size == 0`).
    storage: Option<Arc<Storage>>,
    /// First byte of the view inside the storage.
    offset: u64,
    size: u64,
    completion: Arc<OutputCompletion>,
}

impl Tensor {
    /// Allocate `size` zeroed bytes. `vnc` is the process-relative logical core: `Some` for
    /// device tensors, `None` for host tensors (anything else is `NRT_INVALID`). The caller
    /// checks the core against the visible cores (the C ABI does, against `visible_cores`).
    pub fn allocate(
        placement: Placement,
        vnc: Option<u32>,
        size: u64,
        name: &str,
    ) -> Result<Tensor> {
        Self::allocate_in(placement, vnc, size, name, shared_device_memory())
    }

    /// [`Tensor::allocate`] with the choice of shared memory for a device tensor made by the
    /// caller (`shared`; module doc, "Shared device memory in a job").
    pub fn allocate_in(
        placement: Placement,
        vnc: Option<u32>,
        size: u64,
        name: &str,
        shared: bool,
    ) -> Result<Tensor> {
        match (placement, vnc) {
            (Placement::Device, None) => {
                return Err(Error::invalid(format!(
                    "device tensor {name:?} needs a logical core"
                )))
            }
            (Placement::Host, Some(c)) => {
                return Err(Error::invalid(format!(
                    "host tensor {name:?} cannot be placed on logical core {c}"
                )))
            }
            _ => {}
        }
        let what = format!("tensor {name:?}");
        let storage = Storage::allocate(size, placement, vnc, &what, shared)?;
        Ok(Tensor {
            name: name.into(),
            placement,
            vnc,
            storage: Some(storage),
            offset: 0,
            size,
            completion: Arc::default(),
        })
    }

    /// A tensor without storage (`nrt_tensor_allocate_empty`): size 0, NULL VA. Choice: it is a
    /// host tensor (no core), since the only way to give it bytes is to attach caller memory.
    pub fn empty(name: &str) -> Tensor {
        Tensor {
            name: name.into(),
            placement: Placement::Host,
            vnc: None,
            storage: None,
            offset: 0,
            size: 0,
            completion: Arc::default(),
        }
    }

    /// Make `size` bytes of caller memory at `buffer` this tensor's storage (zero-copy,
    /// `nrt_tensor_attach_buffer`). The previous storage is released by this view (other views keep
    /// it). Choice: the tensor becomes a host tensor, whatever it was (the caller's memory is host
    /// memory, docs/contract/abi.md §3.3 "zero-copy host"); it is never registered as device
    /// memory.
    ///
    /// # Safety
    /// `buffer` must stay valid for reads and writes of `size` bytes for as long as any view of
    /// this tensor (clones included) may access it.
    pub unsafe fn attach(&mut self, buffer: *mut u8, size: u64) -> Result<()> {
        self.storage = Some(Storage::attached(buffer, size)?);
        self.placement = Placement::Host;
        self.vnc = None;
        self.offset = 0;
        self.size = size;
        Ok(())
    }

    /// A view of `[offset, offset + size)` of this tensor sharing its storage
    /// (`nrt_tensor_allocate_slice`). It has the same placement and core and its own
    /// completion counter.
    pub fn slice(&self, offset: u64, size: u64, name: &str) -> Result<Tensor> {
        self.check_range(offset, size, "slice")?;
        Ok(Tensor {
            name: name.into(),
            placement: self.placement,
            vnc: self.vnc,
            storage: self.storage.clone(),
            offset: self.offset + offset,
            size,
            completion: Arc::default(),
        })
    }

    /// The debug label given at allocation ("" when none was given).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Device or host.
    pub fn placement(&self) -> Placement {
        self.placement
    }

    /// `Some(core)` for device tensors (process-relative), `None` for host tensors.
    pub fn vnc(&self) -> Option<u32> {
        self.vnc
    }

    /// Bytes in this view.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Does this tensor have storage (everything except an empty tensor before an attach)?
    pub fn has_storage(&self) -> bool {
        self.storage.is_some()
    }

    /// `Ok` if `[offset, offset + len)` lies inside the view (overflow-safe); otherwise
    /// `NRT_INVALID` naming the operation, the range and the tensor (docs/contract/abi.md §3.3).
    pub fn check_range(&self, offset: u64, len: u64, op: &str) -> Result<()> {
        match offset.checked_add(len) {
            Some(end) if end <= self.size => Ok(()),
            _ => Err(Error::invalid(format!(
                "{op} of {len} bytes at offset {offset} exceeds tensor {:?} of {} bytes",
                &*self.name, self.size
            ))
            .with_op(op)),
        }
    }

    /// Pointer to byte `offset` of the view after checking `[offset, offset + len)`; `None` when
    /// `len == 0` (nothing to touch).
    fn span(&self, offset: u64, len: u64, op: &str) -> Result<Option<*mut u8>> {
        self.check_range(offset, len, op)?;
        if len == 0 {
            return Ok(None);
        }
        // A non-empty range implies size > 0, which implies storage (invariant of `empty`).
        let st = self.storage.as_ref().ok_or_else(|| {
            Error::failure(format!("tensor {:?} has bytes but no storage", &*self.name))
        })?;
        // The view lies inside the storage and the storage inside the address space, so the
        // sum is below `st.len` ≤ isize::MAX.
        let at = (self.offset + offset) as usize;
        // SAFETY: `at + len <= st.len`, inside the allocation or attached buffer.
        Ok(Some(unsafe { st.base.as_ptr().add(at) }))
    }

    /// Copy `out.len()` bytes at `offset` of the view into `out` (bounds-checked).
    pub fn read(&self, offset: u64, out: &mut [u8]) -> Result<()> {
        // SAFETY: `out` is valid for `out.len()` writes.
        unsafe { self.read_raw(offset, out.as_mut_ptr(), out.len() as u64) }
    }

    /// Copy `data` into the view at `offset` (bounds-checked).
    pub fn write(&self, offset: u64, data: &[u8]) -> Result<()> {
        // SAFETY: `data` is valid for `data.len()` reads.
        unsafe { self.write_raw(offset, data.as_ptr(), data.len() as u64) }
    }

    /// [`read`](Self::read) into raw memory (the C ABI). `dst` may overlap the tensor.
    ///
    /// # Safety
    /// `dst` must be valid for `len` byte writes (it may be NULL when `len == 0`).
    pub unsafe fn read_raw(&self, offset: u64, dst: *mut u8, len: u64) -> Result<()> {
        if let Some(p) = self.span(offset, len, "read")? {
            // SAFETY: `p` has `len` bytes (checked); `dst` by contract; memmove allows overlap.
            unsafe { std::ptr::copy(p, dst, len as usize) };
        }
        Ok(())
    }

    /// [`write`](Self::write) from raw memory (the C ABI). `src` may overlap the tensor.
    ///
    /// # Safety
    /// `src` must be valid for `len` byte reads (it may be NULL when `len == 0`).
    pub unsafe fn write_raw(&self, offset: u64, src: *const u8, len: u64) -> Result<()> {
        if let Some(p) = self.span(offset, len, "write")? {
            // SAFETY: `p` has `len` bytes (checked); `src` by contract; memmove allows overlap.
            unsafe { std::ptr::copy(src, p, len as usize) };
        }
        Ok(())
    }

    /// Set `len` bytes at `offset` to `value` (`nrt_tensor_memset`).
    pub fn fill(&self, offset: u64, value: u8, len: u64) -> Result<()> {
        if let Some(p) = self.span(offset, len, "memset")? {
            // SAFETY: `p` has `len` bytes (checked).
            unsafe { std::ptr::write_bytes(p, value, len as usize) };
        }
        Ok(())
    }

    /// Copy `len` bytes from `src` at `src_offset` into this view at `dst_offset`. Both ranges
    /// are checked before anything is copied; they may overlap (two views of one storage).
    /// Placement rules (such as "same core" for `nrt_tensor_copy`) are the caller's.
    pub fn copy_from(
        &self,
        dst_offset: u64,
        src: &Tensor,
        src_offset: u64,
        len: u64,
    ) -> Result<()> {
        let from = src.span(src_offset, len, "copy source")?;
        let to = self.span(dst_offset, len, "copy destination")?;
        if let (Some(from), Some(to)) = (from, to) {
            // SAFETY: both ranges have `len` bytes (checked); memmove allows overlap.
            unsafe { std::ptr::copy(from, to, len as usize) };
        }
        Ok(())
    }

    /// The first byte of this view; null only without storage. Valid while any view of the
    /// storage lives (or, for attached memory, while the caller keeps it).
    pub fn va(&self) -> *mut u8 {
        match &self.storage {
            // SAFETY: `offset <= st.len` (a view never leaves its storage), so the result is in
            // the allocation or one past its end.
            Some(st) => unsafe { st.base.as_ptr().add(self.offset as usize) },
            None => std::ptr::null_mut(),
        }
    }

    /// (storage identity, byte offset in it): two tensors alias the same first byte iff equal.
    /// The identity is the storage's base address, unique while the storage lives (a clone held
    /// for the comparison keeps it alive). Tensors without storage give `(0, 0)`. Choice: two
    /// attachments of the same caller memory at different start addresses are different
    /// storages (caller-side aliasing is not tracked).
    pub fn storage_key(&self) -> (usize, u64) {
        match &self.storage {
            Some(st) => (st.base.as_ptr().addr(), self.offset),
            None => (0, 0),
        }
    }

    /// The named shared-memory object holding this view, when it is a device tensor of a job
    /// (module doc, "Shared device memory in a job").
    pub fn shared_object(&self) -> Option<SharedObject> {
        let st = self.storage.as_ref()?;
        match &st.backing {
            Backing::Shared(object) => Some(SharedObject {
                object: object.clone(),
                offset: self.offset,
            }),
            _ => None,
        }
    }

    /// Record that an execution which wrote this tensor as an output has finished. The model
    /// executor calls this for every output tensor (synchronous execution, 2.34 behaviour).
    pub fn complete_output(&self) {
        *self.completion.count.lock() += 1;
        self.completion.changed.notify_all();
    }

    /// Finished executions recorded since the last reset.
    pub fn output_completions(&self) -> u64 {
        *self.completion.count.lock()
    }

    /// Set the output-completion counter back to 0 (`nrt_tensor_reset_output_completion`).
    pub fn reset_output_completions(&self) {
        *self.completion.count.lock() = 0;
        self.completion.changed.notify_all();
    }

    /// Wait until at least `expected` completions are recorded (`None` = no time limit).
    /// `NRT_TIMEOUT` when the time runs out; an unbounded wait logs a WARNING every 10 s
    /// naming the tensor and the counts, so it is never a silent hang.
    pub fn wait_output_completions(&self, expected: u64, timeout: Option<Duration>) -> Result<()> {
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        let mut count = self.completion.count.lock();
        while *count < expected {
            match deadline {
                Some(d) => {
                    if self
                        .completion
                        .changed
                        .wait_until(&mut count, d)
                        .timed_out()
                        && *count < expected
                    {
                        return Err(Error::new(
                            ErrorKind::Timeout,
                            format!(
                                "tensor {:?}: {} of {expected} output completions after {timeout:?} (implicit async was removed in 2.34: only a finished nrt_execute writing this tensor advances the count)",
                                &*self.name, *count
                            ),
                        ));
                    }
                }
                None => {
                    if self
                        .completion
                        .changed
                        .wait_for(&mut count, STILL_WAITING_EVERY)
                        .timed_out()
                        && *count < expected
                    {
                        crate::log_warn!(
                            "tensor",
                            "still waiting without a time limit for tensor {:?}: {} of {expected} output completions",
                            &*self.name,
                            *count
                        );
                    }
                }
            }
        }
        Ok(())
    }
}

/// Copy `size` host bytes from `src` to `dest`, which must lie, with all `size` bytes, inside a
/// live device storage (`nrt_memcpy_to_device`, docs/contract/abi.md §3.3: "must accept any address
/// inside a live device tensor"). Otherwise `NRT_INVALID`, naming the nearest storage. A zero-byte
/// copy is accepted anywhere from a storage's first byte to one past its last.
///
/// # Safety
/// `src` must be valid for `size` byte reads (it may be NULL when `size == 0`).
pub unsafe fn memcpy_to_device(dest: *mut u8, src: *const u8, size: u64) -> Result<()> {
    let addr = dest.addr();
    let found = DEVICE_RANGES
        .lock()
        .range(..=addr)
        .next_back()
        .and_then(|(_, w)| w.upgrade());
    let storage = match found {
        Some(st) => st,
        _ => {
            return Err(Error::invalid(format!(
                "nrt_memcpy_to_device: {dest:p} is not inside a live device tensor"
            )))
        }
    };
    let off = (addr - storage.base.as_ptr().addr()) as u64;
    if off > storage.len || (off == storage.len && size > 0) {
        return Err(Error::invalid(format!(
            "nrt_memcpy_to_device: {dest:p} is not inside a live device tensor (the nearest one below ends at {:p})",
            storage.base.as_ptr().wrapping_add(storage.len as usize)
        )));
    }
    // `off <= storage.len` here, so the subtraction cannot wrap.
    if size > storage.len - off {
        return Err(Error::invalid(format!(
            "nrt_memcpy_to_device: {size} bytes at {dest:p} run past the end of the live device tensor storage of {} bytes at {:p} (offset {off})",
            storage.len, storage.base
        )));
    }
    if size > 0 {
        // SAFETY: `off + size <= storage.len` (checked) and the `Arc` keeps the storage alive
        // during the copy; `src` by contract; memmove allows overlap.
        unsafe { std::ptr::copy(src, storage.base.as_ptr().add(off as usize), size as usize) };
    }
    Ok(())
}

pub mod ops;

#[cfg(test)]
mod tests;

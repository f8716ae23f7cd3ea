//! The go meeting in shared memory: after a group's first shared-device collective, its ranks
//! meet on a *board* instead of at the job's root (`runtime::multi_process::run`, step 2).
//!
//! The TCP meeting at the root costs a round trip, a thread per message there, and the root's
//! process getting the CPU: 0.2–2 ms per collective, most of a 4 KiB one across processes. The
//! board is one small shared-memory object per group with a slot per rank; a rank publishes in
//! its slot the name and size of its filled device segment and a signature of what it prepared
//! (the fields [`crate::runtime::collective::agreed_fields`] compares, and the program digest), then
//! raises its arrival word to `instance + 1` and wakes the board's futex. When every slot holds
//! this instance, every rank reads the same slots: equal signatures are the go; any difference
//! sends every rank to the root's meeting, whose field-by-field check names the ranks and the
//! field (so the error is the same on either path).
//!
//! **Who uses it, all or none.** Rank 0 creates the board before its first go meeting and
//! names it in its segment header; every other rank opens it after that meeting (it maps rank
//! 0's segment anyway) and marks its slot *attached* before its run starts. A rank meets on the
//! board only when every slot is attached. Attaching happens before the rank's run state can
//! become done or failed, and a rank starts its next collective only after every peer's has
//! (the end-of-run wait), so every rank sees the same set of attached slots — a rank that could
//! not attach keeps the whole group at the root, consistently. Rank 0 unlinks the board's name
//! at the end of that first collective (everyone has opened it or never will).
//!
//! **Faults.** The wait gives up on a dead process ([`crate::runtime::multi_process::bootstrap::job_error`]),
//! on `nrt_close` ([`abort`]), after `NEURON_RT_EXEC_TIMEOUT` naming the ranks that never
//! arrived, and when a slot is already past this instance (a rank that gave up and moved on).
//! A rank that moved on gave up because the collective cannot complete (most often a dead
//! process it heard of first), so this rank fails it the same way: with the job's error if it
//! has one by now, else as a hung collective (`NRT_EXEC_HW_ERR_COLLECTIVES`). The contract
//! allows a missing participant only that or `NRT_TIMEOUT` (docs/contract/abi.md §5.8), never
//! a plain `NRT_FAILURE` (the chaos test, capi-tests/mp/mp_chaos.c, caught it).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use once_cell::sync::Lazy;
use parking_lot::Mutex;

use super::segment::header;
use super::segment::{futex_wait, futex_wake_all};
use super::wire::{SegmentAt, TensorAt};
use crate::error::{Error, ErrorKind, Result};
use crate::runtime::multi_process::shm;
use crate::runtime::multi_process::shm::Segment;
use crate::runtime::rendezvous::GroupKey;

const MAGIC: u32 = 0x4f4e_474f; // "ONGO"
const WAKE_AT: usize = 64;
const SLOTS_AT: usize = 128;
/// A slot: attached (u32 at 0), name length (u32 at 4), arrival (u64 at 8), signature (u64
/// at 16), segment bytes (u64 at 24), output tensor name length + 1 (u32 at 32, 0: none), its
/// object's bytes (u64 at 40) and the tensor's offset in it (u64 at 48); the segment name at
/// [`NAME_AT`], the output tensor's object name at [`OUTPUT_NAME_AT`].
const SLOT_BYTES: usize = 512;
const NAME_AT: usize = 64;
const OUTPUT_NAME_AT: usize = NAME_AT + NAME_BYTES;
/// Longest segment (or tensor object) name a slot holds (ours are ~45 bytes).
pub const NAME_BYTES: usize = 192;

/// One group's board (module doc).
#[derive(Debug)]
pub struct Board {
    seg: Arc<Segment>,
    n: usize,
}

/// What the ranks published for one instance.
#[derive(Debug)]
pub enum Met {
    /// Everyone prepared the same: every rank's segment (name, bytes), in rank order.
    Go(Vec<SegmentAt>),
    /// Signatures differ: meet at the root for the detailed verdict.
    Differ,
}

static ABORTS: AtomicU64 = AtomicU64::new(0);

/// Make every wait on a board give up (`nrt_close`).
pub fn abort() {
    ABORTS.fetch_add(1, SeqCst);
}

fn bytes(n: usize) -> usize {
    (SLOTS_AT + n * SLOT_BYTES).next_multiple_of(4096)
}

impl Board {
    /// Create the board of an `n`-rank group under `name`.
    pub fn create(name: &str, n: usize) -> Result<Board> {
        let seg = Arc::new(Segment::create(name, bytes(n))?);
        let b = Board { seg, n };
        b.u32_at(4).store(n as u32, SeqCst);
        b.u32_at(0).store(MAGIC, SeqCst);
        Ok(b)
    }

    /// Open the board `name` of an `n`-rank group (created by its rank 0).
    pub fn open(name: &str, n: usize) -> Result<Board> {
        let seg = Arc::new(Segment::open(name, bytes(n))?);
        let b = Board { seg, n };
        if b.u32_at(0).load(SeqCst) != MAGIC || b.u32_at(4).load(SeqCst) as usize != n {
            return Err(Error::failure(format!(
                "{name:?} is not the go board of a {n}-rank group"
            )));
        }
        Ok(b)
    }

    /// Its name.
    pub fn name(&self) -> &str {
        self.seg.name()
    }

    /// Remove its name (the mappings stay).
    pub fn unlink(&self) {
        self.seg.unlink();
    }

    fn u32_at(&self, off: usize) -> &AtomicU32 {
        assert!(
            off % 4 == 0 && off + 4 <= self.seg.len(),
            "inside the board"
        );
        // SAFETY: in bounds and aligned (checked; the mapping is page aligned); an atomic
        // accepts any bytes.
        unsafe { &*(self.seg.as_ptr().add(off) as *const AtomicU32) }
    }

    fn u64_at(&self, off: usize) -> &AtomicU64 {
        assert!(
            off % 8 == 0 && off + 8 <= self.seg.len(),
            "inside the board"
        );
        // SAFETY: as `u32_at`.
        unsafe { &*(self.seg.as_ptr().add(off) as *const AtomicU64) }
    }

    fn slot(&self, q: usize) -> usize {
        assert!(q < self.n, "a rank of the group");
        SLOTS_AT + q * SLOT_BYTES
    }

    /// Rank `q` can meet here from now on.
    pub fn attach(&self, q: usize) {
        self.u32_at(self.slot(q)).store(1, SeqCst);
    }

    /// Whether every rank can meet here.
    pub fn all_attached(&self) -> bool {
        (0..self.n).all(|q| self.u32_at(self.slot(q)).load(SeqCst) == 1)
    }

    /// Rank `q`'s arrival word: `instance + 1` of the last instance it arrived at, 0 before.
    pub fn arrived(&self, q: usize) -> u64 {
        self.u64_at(self.slot(q) + 8).load(SeqCst)
    }

    /// Whether every rank but `r` has arrived at `instance` (or beyond).
    pub fn others_arrived(&self, instance: u64, r: usize) -> bool {
        (0..self.n).all(|q| q == r || self.arrived(q) > instance)
    }

    fn wake(&self) {
        self.u32_at(WAKE_AT).fetch_add(1, SeqCst);
        if self.u32_at(WAKE_AT + 4).load(SeqCst) > 0 {
            futex_wake_all(self.u32_at(WAKE_AT));
        }
    }

    /// Publish rank `q`'s arrival at `instance` with signature `sig` and segment `seg`.
    pub fn arrive(&self, q: usize, instance: u64, sig: u64, seg: &SegmentAt) -> Result<()> {
        let s = self.slot(q);
        let name = seg.name.as_bytes();
        if name.len() > NAME_BYTES {
            return Err(Error::failure(format!(
                "segment name {:?} is longer than a go-board slot ({NAME_BYTES} bytes)",
                seg.name
            )));
        }
        self.seg.write(s + NAME_AT, name)?;
        self.u32_at(s + 4).store(name.len() as u32, SeqCst);
        self.u64_at(s + 16).store(sig, SeqCst);
        self.u64_at(s + 24).store(seg.len, SeqCst);
        match &seg.output {
            Some(t) if t.name.len() <= NAME_BYTES => {
                self.seg.write(s + OUTPUT_NAME_AT, t.name.as_bytes())?;
                self.u32_at(s + 32).store(t.name.len() as u32 + 1, SeqCst);
                self.u64_at(s + 40).store(t.len, SeqCst);
                self.u64_at(s + 48).store(t.offset, SeqCst);
            }
            Some(t) => {
                return Err(Error::failure(format!(
                    "tensor object name {:?} is longer than a go-board slot ({NAME_BYTES} bytes)",
                    t.name
                )))
            }
            None => self.u32_at(s + 32).store(0, SeqCst),
        }
        // Last: the arrival publishes everything above (and the filled segment).
        self.u64_at(s + 8).store(instance + 1, SeqCst);
        self.wake();
        Ok(())
    }

    /// Wait until every rank arrived at `instance` (module doc, faults), then read the slots.
    pub fn wait(
        &self,
        key: &GroupKey,
        instance: u64,
        deadline: Option<Duration>,
        job_error: fn() -> Option<Error>,
    ) -> Result<Met> {
        let start = Instant::now();
        let aborts = ABORTS.load(SeqCst);
        let want = instance + 1;
        let (wake, waiters) = (self.u32_at(WAKE_AT), self.u32_at(WAKE_AT + 4));
        let arrivals = || -> Vec<u64> {
            (0..self.n)
                .map(|q| self.u64_at(self.slot(q) + 8).load(SeqCst))
                .collect()
        };
        // Spin, then yield, before the futex (`segment::spin_then_yield`): the others
        // usually arrive within microseconds of each other.
        crate::runtime::multi_process::segment::spin_then_yield(
            crate::runtime::multi_process::segment::oversubscribed(self.n),
            || (0..self.n).all(|q| self.u64_at(self.slot(q) + 8).load(SeqCst) >= want),
        );
        loop {
            waiters.fetch_add(1, SeqCst);
            let seen = wake.load(SeqCst);
            let mut at = arrivals();
            let missing: Vec<usize> = (0..self.n).filter(|&q| at[q] < want).collect();
            let mut met = None;
            if missing.is_empty() {
                // Read the slots, then check that nobody rewrote theirs meanwhile (a rank that
                // gave up on this instance and arrived at its next).
                met = Some(self.read());
                at = arrivals();
            }
            let gone = (0..self.n).find(|&q| at[q] > want);
            let verdict = if let Some(q) = gone {
                Some(Err(job_error().unwrap_or_else(|| {
                    Error::new(
                        ErrorKind::CollectivesHang,
                        format!(
                            "collective #{instance} of {key}: rank {q} (global id {}) has moved \
                             on to collective #{} (it gave up on this one)",
                            key.group[q],
                            at[q] - 1
                        ),
                    )
                })))
            } else if let Some(m) = met {
                Some(Ok(m))
            } else if let Some(e) = job_error().or_else(super::bootstrap::root_left) {
                Some(Err(e))
            } else if ABORTS.load(SeqCst) != aborts {
                Some(Err(Error::new(
                    ErrorKind::Closed,
                    format!(
                        "collective #{instance} of {key}: nrt_close while waiting for its ranks"
                    ),
                )))
            } else if deadline.is_some_and(|d| start.elapsed() >= d) {
                let who: Vec<String> = missing
                    .iter()
                    .map(|&q| format!("rank {q} (global id {})", key.group[q]))
                    .collect();
                Some(Err(Error::new(
                    ErrorKind::Timeout,
                    format!(
                        "collective #{instance} of {key}: {} never arrived within \
                         NEURON_RT_EXEC_TIMEOUT = {}s",
                        who.join(", "),
                        deadline.map_or(0, |d| d.as_secs())
                    ),
                )))
            } else {
                None
            };
            if let Some(v) = verdict {
                waiters.fetch_sub(1, SeqCst);
                return v;
            }
            futex_wait(wake, seen, crate::device::peers::POLL);
            waiters.fetch_sub(1, SeqCst);
        }
    }

    fn read(&self) -> Met {
        let sig = |q: usize| self.u64_at(self.slot(q) + 16).load(SeqCst);
        if (1..self.n).any(|q| sig(q) != sig(0)) {
            return Met::Differ;
        }
        Met::Go(
            (0..self.n)
                .map(|q| {
                    let s = self.slot(q);
                    let len = (self.u32_at(s + 4).load(SeqCst) as usize).min(NAME_BYTES);
                    let mut name = vec![0u8; len];
                    // In bounds: the slot is inside the board.
                    let _ = self.seg.read(s + NAME_AT, &mut name);
                    let out_len = (self.u32_at(s + 32).load(SeqCst) as usize).min(NAME_BYTES + 1);
                    let output = out_len.checked_sub(1).map(|len| {
                        let mut name = vec![0u8; len];
                        // In bounds: the slot is inside the board.
                        let _ = self.seg.read(s + OUTPUT_NAME_AT, &mut name);
                        TensorAt {
                            name: String::from_utf8_lossy(&name).into_owned(),
                            len: self.u64_at(s + 40).load(SeqCst),
                            offset: self.u64_at(s + 48).load(SeqCst),
                        }
                    });
                    // Every rank on the board shares this host (the board is shared memory).
                    SegmentAt {
                        name: String::from_utf8_lossy(&name).into_owned(),
                        len: self.u64_at(s + 24).load(SeqCst),
                        host: super::host::key().to_string(),
                        net: Vec::new(),
                        output,
                    }
                })
                .collect(),
        )
    }
}

/// A group's go board as this process holds it.
#[derive(Debug)]
struct BoardEntry {
    board: Arc<Board>,
    /// This process created it and has not unlinked its name yet.
    linked: bool,
}

/// This process's go boards and the counter of the names it creates.
#[derive(Debug, Default)]
struct Boards {
    boards: HashMap<GroupKey, BoardEntry>,
    next: u64,
}

static BOARDS: Lazy<Mutex<Boards>> = Lazy::new(|| Mutex::new(Boards::default()));

/// The board this process holds for `key`, if any.
pub fn held(key: &GroupKey) -> Option<Arc<Board>> {
    BOARDS.lock().boards.get(key).map(|e| e.board.clone())
}

/// Whether this process still holds `key`'s board under its name (tests).
#[cfg(test)]
pub fn still_linked(key: &GroupKey) -> bool {
    BOARDS.lock().boards.get(key).is_some_and(|e| e.linked)
}

/// Forget every board, unlinking the names this process still holds (`nrt_close`).
pub fn reset() {
    let mut c = BOARDS.lock();
    for e in c.boards.values().filter(|e| e.linked) {
        e.board.unlink();
    }
    c.boards.clear();
}

/// Rank 0's board for `key` to name before its go meeting: its own while still linked, a
/// new one if the group has none yet (none if creating fails: the group meets at the root).
pub fn board_to_name(key: &GroupKey) -> Option<String> {
    let mut c = BOARDS.lock();
    if let Some(e) = c.boards.get(key) {
        return e.linked.then(|| e.board.name().to_string());
    }
    c.next += 1;
    let job = crate::runtime::multi_process::bootstrap::job_tag();
    let job = job.as_deref().unwrap_or(shm::NO_JOB);
    let name = format!("{}go-{}", shm::prefix(job, std::process::id()), c.next);
    match Board::create(&name, key.group.len()) {
        Ok(b) => {
            let board = Arc::new(b);
            c.boards.insert(
                key.clone(),
                BoardEntry {
                    board,
                    linked: true,
                },
            );
            Some(name)
        }
        Err(e) => {
            crate::log_debug!(
                "cc",
                "{key}: no go board ({e}): the group meets at the root"
            );
            None
        }
    }
}

/// After a go meeting at the root: open the board rank 0 names in its header (unless this
/// process holds it) and mark rank `r` attached (module doc).
pub fn attach_board(key: &GroupKey, r: u32, seg0: &Segment) {
    let board = match held(key) {
        Some(b) => Some(b),
        None => header(seg0)
            .board()
            .and_then(|name| match Board::open(&name, key.group.len()) {
                Ok(b) => {
                    let board = Arc::new(b);
                    let mut c = BOARDS.lock();
                    let e = c.boards.entry(key.clone()).or_insert(BoardEntry {
                        board,
                        linked: false,
                    });
                    Some(e.board.clone())
                }
                Err(e) => {
                    crate::log_debug!("cc", "{key}: rank {r} cannot open go board {name:?}: {e}");
                    None
                }
            }),
    };
    if let Some(b) = board {
        b.attach(r as usize);
    }
}

/// Rank 0, at the end of a collective: unlink the board's name (every rank has opened it by
/// now, or never will).
pub fn unlink_board(key: &GroupKey) {
    if let Some(e) = BOARDS.lock().boards.get_mut(key) {
        if e.linked {
            e.board.unlink();
            e.linked = false;
        }
    }
}

/// Rank 0, after a go meeting failed: a board nobody could attach to yet is dropped, name and
/// all (the group's next collective starts a new one); one in use stays.
pub fn drop_unattached_board(key: &GroupKey) {
    let mut c = BOARDS.lock();
    if c.boards.get(key).is_some_and(|e| !e.board.all_attached()) {
        let e = c.boards.remove(key).expect("just seen");
        if e.linked {
            e.board.unlink();
        }
    }
}

/// The go meeting on the board; a signature mismatch goes to the root for its verdict.
pub fn meet_on_board(
    b: &Board,
    key: &GroupKey,
    instance: u64,
    r: u32,
    sig: u64,
    go: super::run::GoArrival,
) -> Result<super::run::Segments> {
    b.arrive(r as usize, instance, sig, &go.seg)?;
    wait_on_board(b, key, instance, r, go)
}

/// The second half of [`meet_on_board`], for a rank that has arrived already.
pub fn wait_on_board(
    b: &Board,
    key: &GroupKey,
    instance: u64,
    r: u32,
    go: super::run::GoArrival,
) -> Result<super::run::Segments> {
    let deadline = crate::runtime::multi_process::bootstrap::meet_deadline(false)?;
    match b.wait(
        key,
        instance,
        deadline,
        crate::runtime::multi_process::bootstrap::job_error,
    )? {
        Met::Go(names) => Ok(Arc::new(names)),
        Met::Differ => crate::runtime::multi_process::bootstrap::meet_go(key, instance, r, go),
    }
}

/// The signature a rank publishes: what it prepared and the digest of its program. It covers
/// the fields [`crate::runtime::collective::agreed_fields`] names, hashed as values rather than
/// formatted (formatting them was about a microsecond of every small collective's time).
pub fn signature(req: &crate::lower::request::CollectiveRequest, digest: u64) -> u64 {
    use std::hash::{Hash, Hasher};
    // Fixed keys: every process computes the same value.
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let r = req;
    (
        r.op, r.dtype, r.count, r.reduce, &r.group, r.in_place, r.io_form,
    )
        .hash(&mut h);
    digest.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests;

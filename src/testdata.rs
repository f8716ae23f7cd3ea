//! The test suite's data files and the one rule for a file that is missing.
//!
//! The files live in `testdata/` at the repository root (its README names each one's origin and
//! licence), so a bare clone has everything its tests read. A test asks for a file with
//! [`file()`] or [`read`]; when the file is not there (a trimmed source package, a moved tree) the
//! test says which file and what it skips, and returns. Under `OPENNRT_TEST_STRICT=1`, which
//! `ci/test.sh` sets, a missing file fails the test instead, so the suite can never pass by
//! skipping. `capi-tests/testdata.sh` and the Python suite's `testdata.py` apply the same rule.
//!
//! For tests and tools only: nothing in the libraries calls it.

use std::path::{Path, PathBuf};

use crate::runtime::config;

/// The variable that turns a skip into a failure.
pub const STRICT_VAR: &str = "OPENNRT_TEST_STRICT";

/// The vendor NEFF of `testdata/neff/` (a compute matmul; testdata/neff/README.md).
pub const REAL_NEFF: &str = "neff/matmul_small.neff";

/// The FP8 reference tables of `testdata/fp8/`.
pub const FP8_TABLES: &str = "fp8";

/// The `testdata/` folder of this source tree.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testdata")
}

/// Whether `OPENNRT_TEST_STRICT` asks for missing data to fail.
pub fn strict() -> bool {
    matches!(
        config::env_lookup(STRICT_VAR).as_deref(),
        Some("1" | "true" | "yes")
    )
}

/// The path of `rel` under `testdata/` when it exists. Otherwise `None` after printing
/// `skipped: <what>: <path> is missing`, or, when [`strict`], a panic that says the same.
pub fn file(rel: &str, what: &str) -> Option<PathBuf> {
    let path = root().join(rel);
    if path.exists() {
        return Some(path);
    }
    missing(&path, what);
    None
}

/// The bytes of `rel` under `testdata/`, under the rule of [`file()`]. A file that exists but
/// cannot be read is a failure, never a skip.
pub fn read(rel: &str, what: &str) -> Option<Vec<u8>> {
    let path = file(rel, what)?;
    Some(std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

/// Say that `path` is missing and `what` is skipped, or fail when [`strict`].
fn missing(path: &Path, what: &str) {
    let msg = format!("{what}: {} is missing", path.display());
    if strict() {
        panic!("{msg} ({STRICT_VAR}=1 makes missing test data an error)");
    }
    eprintln!("skipped: {msg}");
}

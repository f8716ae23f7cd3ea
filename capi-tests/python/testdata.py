"""The suite's data files (``testdata/`` at the repository root) and the one rule for a missing
one, the same as ``opennrt::testdata`` in Rust: say which file and skip, or, under
``OPENNRT_TEST_STRICT=1`` (set by ``ci/test.sh``), fail."""

import os
from pathlib import Path

import pytest

#: The ``testdata/`` folder of this source tree.
ROOT = Path(__file__).resolve().parents[2] / "testdata"
#: The variable that turns a skip into a failure.
STRICT_VAR = "OPENNRT_TEST_STRICT"
#: The vendor NEFF (testdata/neff/README.md).
REAL_NEFF = "neff/matmul_small.neff"


def strict() -> bool:
    return os.environ.get(STRICT_VAR, "") in ("1", "true", "yes")


def path(rel: str, what: str) -> Path:
    """The path of ``rel`` under ``testdata/``; a skip (or a failure when strict) naming it."""
    p = ROOT / rel
    if p.exists():
        return p
    msg = f"{what}: {p} is missing"
    if strict():
        pytest.fail(f"{msg} ({STRICT_VAR}=1 makes missing test data an error)")
    pytest.skip(msg)

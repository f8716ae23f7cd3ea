"""The README's Python example (example.py, at most 15 lines) runs and prints the sum."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import HERE


def test_example_is_short():
    assert len((HERE / "example.py").read_text().splitlines()) <= 15


def test_example_runs():
    # The example sets NEURON_RT_VISIBLE_CORES itself; OPENNRT_LIB_DIR passes through.
    res = subprocess.run([sys.executable, str(HERE / "example.py")], capture_output=True,
                         text=True, timeout=120, env=dict(os.environ))
    assert res.returncode == 0, res.stdout + res.stderr
    want = "all-reduce result per rank: [(3.0, 3.0, 3.0, 3.0), (3.0, 3.0, 3.0, 3.0)]"
    assert want in res.stdout, res.stdout

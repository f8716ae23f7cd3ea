"""pytest fixtures: one ``nrt_init`` per test process (the runtime reads its environment there,
docs/contract/abi.md §5.10), shared by every test through session-scoped fixtures.

``nrt``   — the library, initialised with WORLD visible logical cores
            (``NEURON_RT_VISIBLE_CORES``).
``world`` — additionally ``nrt_cc_global_comm_init(i, i, WORLD)`` on every core (spec §5.7).

Scenarios that need another environment (before ``nrt_init``, another core count, the example)
run in a subprocess through :func:`run_python`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from opennrt_ctypes import Nrt  # noqa: E402
from ranks import global_comm_init  # noqa: E402

#: Ranks of the in-process tests: one per visible logical core.
WORLD = 8

#: A collective whose peers are lost surfaces as a status after this many seconds
#: (NEURON_RT_EXEC_TIMEOUT, spec §5.10) instead of hanging the test run.
EXEC_TIMEOUT_S = "20"


@pytest.fixture(scope="session")
def nrt():
    os.environ["NEURON_RT_VISIBLE_CORES"] = f"0-{WORLD - 1}"
    os.environ.setdefault("NEURON_RT_EXEC_TIMEOUT", EXEC_TIMEOUT_S)
    lib = Nrt()
    lib.init()
    yield lib
    lib.close()


@pytest.fixture(scope="session")
def world(nrt):
    global_comm_init(nrt, WORLD)
    return nrt


def run_python(code: str, env_extra: dict | None = None, timeout: float = 120.0):
    """Run ``python3 -c code`` with this directory importable; returns the CompletedProcess."""
    env = dict(os.environ)
    for k in ("NEURON_RT_VISIBLE_CORES", "NEURON_RT_NUM_CORES"):
        env.pop(k, None)
    env["PYTHONPATH"] = str(HERE) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=timeout)

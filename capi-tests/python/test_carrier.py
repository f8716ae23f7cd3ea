"""The firmware carrier the runtime loads is the one the device runs (docs/contract/carrier.md
§1.2): a stand-in carrier (capi-tests/standin/standin_ncfw.c) that forwards to OpenNRT's own
libncfw.so but removes the RING handler from the dispatch table of the image it hands out makes
every ring collective fail at load, naming the dispatch table, while the same program runs
with OpenNRT's carrier. (The stand-in's ctx_log marker is checked by tests/carrier_standin.rs.)
"""

from __future__ import annotations

import shutil
import subprocess
import textwrap

import pytest

import opennrt_ctypes as m
from conftest import run_python

BARRIERS = textwrap.dedent(
    """
    import threading, opennrt_ctypes as m
    nrt = m.Nrt()
    nrt.init()
    out = {}
    def one(vnc):
        out[vnc] = nrt.raw.nrt_barrier(vnc, vnc, 2)
    th = [threading.Thread(target=one, args=(v,)) for v in (0, 1)]
    for t in th: t.start()
    for t in th: t.join()
    print(out[0], out[1])
    nrt.close()
    """
)


@pytest.fixture(scope="module")
def standin(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.fail("a C compiler is needed to build the stand-in carrier")
    out = tmp_path_factory.mktemp("standin") / "libncfw_standin.so"
    src = m.REPO / "capi-tests" / "standin" / "standin_ncfw.c"
    subprocess.run([cc, "-O2", "-std=c11", "-Wall", "-Werror", "-shared", "-fPIC",
                    f"-I{m.REPO / 'include'}", "-o", str(out), str(src), "-ldl"], check=True)
    return out


def run_barriers(carrier, no_ring):
    env = {"NEURON_RT_VISIBLE_CORES": "0-1", "NEURON_RT_EXEC_TIMEOUT": "10",
           "OPENNRT_CC_ALGO": "ring", "OPENNRT_NCFW_PATH": str(carrier),
           "STANDIN_NCFW_REAL": str(m.library_path().parent / "libncfw.so"),
           "STANDIN_NCFW_NO_RING": "1" if no_ring else "0"}
    res = run_python(BARRIERS, env)
    assert res.returncode == 0, res.stderr[-3000:]
    return [int(x) for x in res.stdout.split()], res.stderr


def test_the_device_runs_the_image_of_the_loaded_carrier(standin):
    ok = int(m.NrtStatus.NRT_SUCCESS)
    # The stand-in forwarding everything unchanged: the ring barrier runs.
    got, err = run_barriers(standin, no_ring=False)
    assert got == [ok, ok], err[-2000:]
    # Its image without the RING handler: the device refuses the ring cc_ops at load.
    got, err = run_barriers(standin, no_ring=True)
    assert all(s != ok for s in got), err[-2000:]
    assert "no handler in the" in err and "dispatch table" in err, err[-2000:]

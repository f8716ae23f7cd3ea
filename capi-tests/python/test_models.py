"""NEFF models through ctypes (docs/contract/abi.md §3.4; docs/neff.md), the way the public Python
``ctypes`` wrapper of docs/contract/abi.md §8 drives ``libnrt.so``: ``nrt_tensor_info_t``
mirrored field for field, ``nrt_load``, ``nrt_get_model_tensor_info``, ``nrt_execute``.

* The mirrors: ``nrt_tensor_info_t`` / ``nrt_tensor_info_array_t`` against spec §2.4 and
  ``nrt_tensor_usage_t`` against the headers.
* The real NEFF of testdata (``matmul_small.neff``, its README): under
  ``OPENNRT_INSTANCE_TYPE=trn2.48xlarge NEURON_LOGICAL_NC_CONFIG=2`` it loads and describes its
  I/O exactly (x, y: 65536 B float16 [128, 256] / [256, 128]; output0: 32768 B float16
  [128, 128]); ``nrt_execute`` is ``NRT_FAILURE`` (compute the software device does not run), a
  set without ``y`` ``NRT_INVALID``; a second ``nrt_unload`` ``NRT_INVALID_HANDLE``. Under
  ``NEURON_LOGICAL_NC_CONFIG=1`` ``nrt_load`` is ``NRT_INVALID`` and writes no model. Each in a
  fresh interpreter: the runtime reads its environment at ``nrt_init`` (§5.10).
* A generated all-reduce NEFF (``opennrt neff build --op all_reduce --ranks 2 --dtype fp32``)
  on 2 ranks: one process per rank as test_multiprocess.py runs them (spawned interpreters,
  ``NEURON_RT_VISIBLE_CORES=<rank>``, ``NEURON_RT_ROOT_COMM_ID=127.0.0.1:<port>``,
  ``nrt_load_collectives(neff, 0, 1, rank, 2)``), and as two threads of one process (vnc =
  rank). Rank r writes element i = (r+1)*(i%7) + k in run k; every run's output must be the
  exact sum, every byte.
* A generated all-to-all-v NEFF (``--op all_to_all_v --ranks 3 --count 4``) on 3 threads: the
  model's second input ``metadata0`` is the table Python packs (4 rows of 3 ``uint32``; rank r
  sends (r + 2p + 1) mod 5 elements of its block p to peer p, who puts them at the start of
  its block r, docs/neff.md §2); received windows exact, every other output byte keeps its fill.
"""

from __future__ import annotations

import ctypes
import json
import math
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import opennrt_ctypes as m
from opennrt_ctypes import Dtype, NrtStatus, TensorUsage
from test_abi_layout import header_enum
from test_multiprocess import free_port, run_clean_job
import testdata

#: What nrt_get_model_tensor_info must say about it: (name, usage, size, dtype, shape).
REAL_IO = [
    ("x", TensorUsage.NRT_TENSOR_USAGE_INPUT, 65536, Dtype.NRT_DTYPE_FLOAT16, [128, 256]),
    ("y", TensorUsage.NRT_TENSOR_USAGE_INPUT, 65536, Dtype.NRT_DTYPE_FLOAT16, [256, 128]),
    ("output0", TensorUsage.NRT_TENSOR_USAGE_OUTPUT, 32768, Dtype.NRT_DTYPE_FLOAT16, [128, 128]),
]

#: NEURON_RT_EXEC_TIMEOUT of the ranks: a lost peer is a status within this, not a hang.
EXEC_TIMEOUT_S = 10
#: The whole multi-process job's deadline; ranks still running then are killed.
JOB_TIMEOUT_S = 45.0
COUNT = 1000
RUNS = 3


# ---------------------------------------------------------------------------------------------
# Mirrors


def test_tensor_info_layout_matches_spec_2_4():
    t = m.NrtTensorInfo
    assert ctypes.sizeof(t) == 296 and ctypes.alignment(t) == 8
    assert {name: getattr(t, name).offset for name, _ in t._fields_} == {
        "name": 0, "usage": 256, "size": 264, "dtype": 272, "shape": 280, "ndim": 288}
    a = m.NrtTensorInfoArray
    assert ctypes.sizeof(a) == 8 and a.tensor_count.offset == 0 and a.tensor_array.offset == 8
    assert ctypes.sizeof(m.NrtModelInfo) == 4
    assert {e.name: int(e) for e in TensorUsage} == header_enum("nrt_tensor_usage_t")


# ---------------------------------------------------------------------------------------------
# The real NEFF


def _real_neff() -> Path:
    return testdata.path(testdata.REAL_NEFF, "the real-NEFF tests")


REAL_LNC2 = """
import json, sys, opennrt_ctypes as m
nrt = m.Nrt(); nrt.init()
neff = open(sys.argv[1], "rb").read()
model = nrt.load(neff, -1, 1)
info = [[e.name, e.usage, e.size, e.dtype, list(e.shape)] for e in model.tensor_info()]
x, y = nrt.tensor_allocate(0, 65536, "x"), nrt.tensor_allocate(0, 65536, "y")
o = nrt.tensor_allocate(0, 32768, "o")
ins, only_x = nrt.tensor_set({"x": x, "y": y}), nrt.tensor_set({"x": x})
outs = nrt.tensor_set({"output0": o})
res = {"info": info, "vnc_count": model.vnc_count(),
       "execute": model.execute_status(ins, outs),
       "execute_without_y": model.execute_status(only_x, outs)}
h = model.handle.value
res["unload"] = nrt.raw.nrt_unload(h)
res["unload_again"] = nrt.raw.nrt_unload(h)
for s in (ins, only_x, outs):
    s.destroy()
for t in (x, y, o):
    t.free()
nrt.close()
print(json.dumps(res))
"""

REAL_LNC1 = """
import ctypes, json, sys, opennrt_ctypes as m
nrt = m.Nrt(); nrt.init()
neff = open(sys.argv[1], "rb").read()
h = ctypes.c_void_p()
buf = ctypes.create_string_buffer(neff, len(neff))
status = nrt.raw.nrt_load(buf, len(neff), 0, 1, ctypes.byref(h))
nrt.close()
print(json.dumps({"load": status, "model": h.value}))
"""


def _run_script(code: str, env: dict, *args: str, timeout: float = 60.0):
    """``python3 -c code args`` with this directory importable (as conftest.run_python, plus
    argv, and without the parent's core or root settings)."""
    full = dict(os.environ)
    for k in ("NEURON_RT_VISIBLE_CORES", "NEURON_RT_NUM_CORES", "NEURON_RT_ROOT_COMM_ID"):
        full.pop(k, None)
    full["PYTHONPATH"] = str(Path(__file__).resolve().parent) + os.pathsep + full.get("PYTHONPATH", "")
    full.update(env)
    return subprocess.run([sys.executable, "-c", code, *args], env=full, capture_output=True,
                          text=True, timeout=timeout)


def _last_json(res) -> dict:
    assert res.returncode == 0, f"exit {res.returncode}\n{res.stdout}\n{res.stderr}"
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_real_neff_tensor_info_and_statuses_lnc2():
    path = _real_neff()
    res = _last_json(_run_script(REAL_LNC2, {"OPENNRT_INSTANCE_TYPE": "trn2.48xlarge",
                                             "NEURON_LOGICAL_NC_CONFIG": "2"}, str(path)))
    assert res["info"] == [[n, int(u), s, int(d), sh] for n, u, s, d, sh in REAL_IO]
    assert res["vnc_count"] == 1
    assert res["execute"] == NrtStatus.NRT_FAILURE, "compute the software device cannot run"
    assert res["execute_without_y"] == NrtStatus.NRT_INVALID
    assert res["unload"] == NrtStatus.NRT_SUCCESS
    assert res["unload_again"] == NrtStatus.NRT_INVALID_HANDLE


def test_real_neff_refused_under_lnc1():
    path = _real_neff()
    res = _last_json(_run_script(REAL_LNC1, {"OPENNRT_INSTANCE_TYPE": "trn2.48xlarge",
                                             "NEURON_LOGICAL_NC_CONFIG": "1"}, str(path)))
    assert res == {"load": NrtStatus.NRT_INVALID, "model": None}, "an lnc_size 2 NEFF under LNC 1"


# ---------------------------------------------------------------------------------------------
# A generated all-reduce NEFF on 2 ranks


def opennrt_cli() -> Path:
    """``$OPENNRT_LIB_DIR/opennrt`` (built with the libraries, target/release)."""
    return m.library_path().parent / "opennrt"


@pytest.fixture(scope="module")
def all_reduce_neff(tmp_path_factory) -> Path:
    cli = opennrt_cli()
    assert cli.is_file(), f"{cli} not found: run `cargo build --release --workspace` first"
    out = tmp_path_factory.mktemp("neff") / "all_reduce_r2.neff"
    res = subprocess.run([str(cli), "neff", "build", "--op", "all_reduce", "--ranks", "2",
                          "--count", str(COUNT), "--dtype", "fp32", "-o", str(out)],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and out.is_file(), res.stdout + res.stderr
    return out


def rank_input(rank: int, run: int) -> list:
    return [float((rank + 1) * (i % 7) + run) for i in range(COUNT)]


def expected_sum(world: int, run: int) -> list:
    return [float(sum((r + 1) * (i % 7) + run for r in range(world))) for i in range(COUNT)]


def rank_runs(nrt: m.Nrt, neff: bytes, vnc: int, rank: int, world: int) -> dict:
    """One rank: load, describe, and RUNS executions with fresh input and a NaN-filled output;
    returns what it saw (the parent checks)."""
    model = nrt.load_collectives(neff, vnc, rank, world)
    got = {"info": [[e.name, e.usage, e.size, e.dtype, list(e.shape)] for e in model.tensor_info()],
           "vnc": model.info().vnc, "runs": []}
    t_in = nrt.tensor_allocate(vnc, COUNT * 4, f"input{rank}")
    t_out = nrt.tensor_allocate(vnc, COUNT * 4, f"output{rank}")
    ins, outs = nrt.tensor_set({"input0": t_in}), nrt.tensor_set({"output0": t_out})
    try:
        for k in range(RUNS):
            t_in.write(struct.pack(f"<{COUNT}f", *rank_input(rank, k)))
            t_out.write(b"\xff" * (COUNT * 4))  # NaN: an output never written cannot pass
            model.execute(ins, outs)
            got["runs"].append(list(struct.unpack(f"<{COUNT}f", t_out.read())))
    finally:
        ins.destroy()
        outs.destroy()
        t_in.free()
        t_out.free()
        model.unload()
    return got


def check_rank(rank: int, got: dict, world: int) -> None:
    want_info = [["input0", int(TensorUsage.NRT_TENSOR_USAGE_INPUT), COUNT * 4,
                  int(Dtype.NRT_DTYPE_FLOAT32), [COUNT]],
                 ["output0", int(TensorUsage.NRT_TENSOR_USAGE_OUTPUT), COUNT * 4,
                  int(Dtype.NRT_DTYPE_FLOAT32), [COUNT]]]
    assert got["info"] == want_info, f"rank {rank}: tensor info"
    assert len(got["runs"]) == RUNS
    for k, out in enumerate(got["runs"]):
        want = expected_sum(world, k)
        if out != want:
            bad = [i for i, (g, e) in enumerate(zip(out, want)) if g != e or math.isnan(g)]
            i = bad[0] if bad else 0
            pytest.fail(f"rank {rank} run {k}: {len(bad)} of {COUNT} elements wrong; first at {i}: "
                        f"got {out[i]}, expected {want[i]}")


def neff_rank_main(rank: int, world: int, root: str, neff_path: str, results) -> None:
    """One rank in its own spawned interpreter: environment first, then nrt_init."""
    os.environ.pop("NEURON_RT_NUM_CORES", None)
    os.environ["NEURON_RT_VISIBLE_CORES"] = str(rank)
    os.environ["NEURON_RT_ROOT_COMM_ID"] = root
    os.environ["NEURON_RT_EXEC_TIMEOUT"] = str(EXEC_TIMEOUT_S)
    step = "nrt_init"
    try:
        nrt = m.Nrt()
        nrt.init()
        step = "load and execute"
        got = rank_runs(nrt, Path(neff_path).read_bytes(), 0, rank, world)
        step = "nrt_close"
        nrt.close()
        results.put((rank, "ok", got))
    except BaseException as e:  # report, then fail the process
        results.put((rank, "error", f"{step}: {e!r}"))
        raise SystemExit(1)


def test_all_reduce_neff_one_rank_per_process(all_reduce_neff, tmp_path, monkeypatch):
    world, port = 2, free_port()
    root = f"127.0.0.1:{port}"
    # The flight recorder's NEFF path too (docs/hangs.md): every nrt_close writes its rank file.
    fr_dir = tmp_path / "flight"
    monkeypatch.setenv("OPENNRT_FLIGHT_RECORDER_DIR", str(fr_dir))
    reports = run_clean_job(world, root, port, neff_rank_main, (str(all_reduce_neff),), JOB_TIMEOUT_S)
    for r in range(world):
        got = reports[r]
        assert got["vnc"] == 0, f"rank {r}: nrt_get_model_info vnc {got['vnc']} (its one core)"
        check_rank(r, got, world)
    files = sorted(fr_dir.iterdir())
    assert [f.name.rsplit("-", 1)[1] for f in files] == [f"rank{r}.json" for r in range(world)], files
    for r, f in enumerate(files):
        header, *records = [json.loads(line) for line in f.read_text().splitlines()]
        assert (header["gid"], header["recorded"], header["reason"]) == (r, RUNS, "nrt_close"), header
        assert [(x["kind"], x["op"], x["dtype"], x["count"], x["group"], x["rank"], x["state"])
                for x in records] == [("neff", "all_reduce", "fp32", COUNT, [0, 1], r, "done")] * RUNS
        assert [x["instance"] for x in records] == list(range(RUNS)), records
    out = subprocess.run([str(opennrt_cli()), "flight-recorder", str(fr_dir)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, f"exit {out.returncode}\n{out.stdout}\n{out.stderr}"


THREADS = """
import json, sys, opennrt_ctypes as m, ranks, test_models as t
nrt = m.Nrt(); nrt.init()
neff = open(sys.argv[1], "rb").read()
got = ranks.on_ranks(2, lambda r: t.rank_runs(nrt, neff, r, r, 2), timeout=60)
nrt.close()
print(json.dumps(got))
"""


def test_all_reduce_neff_ranks_as_threads(all_reduce_neff):
    # One process owning cores 0-1, a thread per rank (vnc = rank = global id).
    res = _run_script(THREADS, {"NEURON_RT_VISIBLE_CORES": "0-1",
                                "NEURON_RT_EXEC_TIMEOUT": str(EXEC_TIMEOUT_S)}, str(all_reduce_neff))
    got = _last_json(res)
    for r in range(2):
        assert got[r]["vnc"] == r
        check_rank(r, got[r], 2)


A2AV = """
import json, struct, sys, opennrt_ctypes as m, ranks
N, C = 3, 4
send = lambda r, p: (r + 2 * p + 1) % (C + 1)
nrt = m.Nrt(); nrt.init()
neff = open(sys.argv[1], "rb").read()
def rank(r):
    model = nrt.load_collectives(neff, r, r, N)
    info = [[e.name, e.usage, e.size, e.dtype, list(e.shape)] for e in model.tensor_info()]
    t_in = nrt.tensor_allocate(r, N * C * 4, f"in{r}")
    t_meta = nrt.tensor_allocate(r, 16 * N, f"meta{r}")
    t_out = nrt.tensor_allocate(r, N * C * 4, f"out{r}")
    t_in.write(struct.pack(f"<{N * C}f", *[float(100 * r + i) for i in range(N * C)]))
    rows = ([send(r, p) for p in range(N)] + [p * C for p in range(N)]
            + [send(p, r) for p in range(N)] + [p * C for p in range(N)])
    t_meta.write(struct.pack(f"<{4 * N}I", *rows))
    t_out.write(b"\\xee" * (N * C * 4))
    ins = nrt.tensor_set({"input0": t_in, "metadata0": t_meta})
    outs = nrt.tensor_set({"output0": t_out})
    model.execute(ins, outs)
    out = t_out.read()
    ins.destroy(); outs.destroy(); t_in.free(); t_meta.free(); t_out.free(); model.unload()
    return {"info": info, "out": out.hex()}
got = ranks.on_ranks(N, rank, timeout=60)
nrt.close()
print(json.dumps(got))
"""


@pytest.fixture(scope="module")
def all_to_all_v_neff(tmp_path_factory) -> Path:
    cli = opennrt_cli()
    out = tmp_path_factory.mktemp("neff") / "all_to_all_v_r3.neff"
    res = subprocess.run([str(cli), "neff", "build", "--op", "all_to_all_v", "--ranks", "3",
                          "--count", "4", "--dtype", "fp32", "-o", str(out)],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and out.is_file(), res.stdout + res.stderr
    return out


def test_all_to_all_v_neff_with_a_table_from_python(all_to_all_v_neff):
    n, c = 3, 4
    res = _run_script(A2AV, {"NEURON_RT_VISIBLE_CORES": "0-2",
                             "NEURON_RT_EXEC_TIMEOUT": str(EXEC_TIMEOUT_S)}, str(all_to_all_v_neff))
    got = _last_json(res)
    f32 = int(Dtype.NRT_DTYPE_FLOAT32)
    want_info = [["input0", int(TensorUsage.NRT_TENSOR_USAGE_INPUT), n * c * 4, f32, [n * c]],
                 ["metadata0", int(TensorUsage.NRT_TENSOR_USAGE_INPUT), 16 * n,
                  int(Dtype.NRT_DTYPE_UINT32), [4 * n]],
                 ["output0", int(TensorUsage.NRT_TENSOR_USAGE_OUTPUT), n * c * 4, f32, [n * c]]]
    for r in range(n):
        assert got[r]["info"] == want_info, f"rank {r}: tensor info"
        want = bytearray(b"\xee" * (n * c * 4))
        for q in range(n):
            k = (q + 2 * r + 1) % (c + 1)  # what q sends r
            vals = [float(100 * q + r * c + e) for e in range(k)]
            want[4 * q * c:4 * (q * c + k)] = struct.pack(f"<{k}f", *vals)
        assert bytes.fromhex(got[r]["out"]) == bytes(want), f"rank {r}"

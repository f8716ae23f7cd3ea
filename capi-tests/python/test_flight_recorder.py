"""The flight recorder across processes (docs/hangs.md): one rank skips a collective.

Three ranks, one per spawned process on loopback (the launcher of test_multiprocess.py), each
with ``OPENNRT_FLIGHT_RECORDER_DIR`` set to the same temporary directory and a short
``NEURON_RT_EXEC_TIMEOUT``. Every rank runs three fp32 all-reduces through ``nrta_cc_prepare`` /
``nrta_cc_schedule``; then ranks 0 and 1 schedule a fourth, which rank 2 never does: it waits
until the parent saw the other two fail, and only then closes. The waiting ranks' timeout
writes their files, and every ``nrt_close`` writes its rank's file again. Then
``opennrt flight-recorder DIR`` must exit 1 and name rank 2 and collective #3 of the group.
Nothing here asserts a duration: the bounds only keep a broken run from hanging the suite.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import subprocess
import time
from pathlib import Path

import pytest

from opennrt_ctypes import CcOpType, Comm, Nrt, OpType
from test_multiprocess import free_port, shm_objects

WORLD = 3
SKIPPER = 2
#: NEURON_RT_EXEC_TIMEOUT of every rank (seconds): how long ranks 0 and 1 wait for rank 2.
EXEC_TIMEOUT_S = 3
#: Bound of the whole job (seconds).
JOB_TIMEOUT_S = 120.0
COUNT = 256
NRT_FLOAT32 = 10  # nrt_dtype_t NRT_DTYPE_FLOAT32


def rank_main(rank: int, world: int, root: str, fr_dir: str, go_on, results) -> None:
    os.environ.pop("NEURON_RT_NUM_CORES", None)
    os.environ["NEURON_RT_VISIBLE_CORES"] = str(rank)
    os.environ["NEURON_RT_ROOT_COMM_ID"] = root
    os.environ["NEURON_RT_EXEC_TIMEOUT"] = str(EXEC_TIMEOUT_S)
    os.environ["OPENNRT_FLIGHT_RECORDER_DIR"] = fr_dir
    step = "nrt_init"
    try:
        nrt = Nrt()
        nrt.init()
        step = "nrt_cc_global_comm_init"
        nrt.cc_global_comm_init(0, rank, world)
        comm = Comm(range(world), rank, ctx_device_id=rank, ctx_device_count=world, vnc=0)
        statuses = []
        for i in range(4):
            if i == 3 and rank == SKIPPER:
                break
            step = f"all-reduce {i}"
            t_in = nrt.tensor_allocate(0, COUNT * 4, f"in{rank}")
            t_out = nrt.tensor_allocate(0, COUNT * 4, f"out{rank}")
            t_in.write(bytes(COUNT * 4))
            ctx = nrt.cc_prepare(comm, [t_in], [t_out], NRT_FLOAT32, OpType.NRT_OP_ADD,
                                 CcOpType.NRT_CC_ALLREDUCE)
            pending = nrt.cc_schedule(ctx, queue=0)
            statuses.append(pending.wait_poll(timeout=EXEC_TIMEOUT_S + 60, raise_on_error=False))
        results.put((rank, "ran", statuses))
        if rank == SKIPPER:
            # Busy elsewhere: the peers time out without this rank.
            go_on.wait(JOB_TIMEOUT_S)
        step = "nrt_close"
        nrt.close()
        results.put((rank, "closed", None))
    except BaseException as e:  # report, then fail the process
        results.put((rank, "error", f"{step}: {e!r}"))
        raise SystemExit(1)


def opennrt_bin() -> Path:
    lib = Path(os.environ.get("OPENNRT_LIB_DIR", Path(__file__).resolve().parents[2] / "target" / "release"))
    return lib / "opennrt"


def test_the_flight_recorder_names_the_rank_that_skipped_a_collective(tmp_path):
    tool = opennrt_bin()
    if not tool.exists():
        pytest.fail(f"{tool} is missing: run `cargo build --release --workspace` first")
    port = free_port()
    root = f"127.0.0.1:{port}"
    fr_dir = tmp_path / "flight"
    ctx = multiprocessing.get_context("spawn")
    results, go_on = ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=rank_main, args=(r, WORLD, root, str(fr_dir), go_on, results),
                         name=f"rank{r}") for r in range(WORLD)]
    for p in procs:
        p.start()
    ran, closed, errors = {}, set(), {}
    deadline = time.monotonic() + JOB_TIMEOUT_S
    try:
        while len(closed) + len(errors) < WORLD and time.monotonic() < deadline:
            try:
                rank, what, payload = results.get(timeout=0.5)
            except queue.Empty:
                if all(not p.is_alive() for p in procs) and results.empty():
                    break
                continue
            if what == "ran":
                ran[rank] = payload
            elif what == "closed":
                closed.add(rank)
            else:
                errors[rank] = payload
            if all(r in ran for r in range(WORLD) if r != SKIPPER):
                go_on.set()
        for p in procs:
            p.join(timeout=max(0.1, deadline - time.monotonic()))
    finally:
        hung = [p.name for p in procs if p.is_alive()]
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join(5)
        for name in shm_objects(port):
            (Path("/dev/shm") / name).unlink(missing_ok=True)
    assert not hung, f"ranks {hung} still running after {JOB_TIMEOUT_S} s (killed)"
    assert not errors, f"ranks failed: {errors}"
    for r in range(WORLD):
        if r != SKIPPER:
            assert ran[r][:3] == [0, 0, 0], f"rank {r}: {ran[r]}"
            assert ran[r][3] != 0, f"rank {r}: the skipped collective returned success"
    assert ran[SKIPPER] == [0, 0, 0]

    files = sorted(p.name for p in fr_dir.iterdir())
    assert len(files) == WORLD, files
    assert all(f.startswith("flight-") and f.endswith(f"-rank{files.index(f)}.json") for f in files), files

    out = subprocess.run([str(tool), "flight-recorder", str(fr_dir)], capture_output=True,
                         text=True, timeout=60)
    print(out.stdout)
    assert out.returncode == 1, f"exit {out.returncode}\n{out.stdout}\n{out.stderr}"
    assert f"rank {SKIPPER} never entered it" in out.stdout, out.stdout
    assert f"culprit: rank {SKIPPER} never entered collective #3 of group [0, 1, 2]" in out.stdout, out.stdout

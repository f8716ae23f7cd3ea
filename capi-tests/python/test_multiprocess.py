"""Multi-process collectives through ctypes: one process per rank.

The launcher follows docs/contract/abi.md §5.11 (one process per logical core, global id = rank,
every rank sharing ``NEURON_RT_ROOT_COMM_ID=<host>:<port>``; the process holding global id 0
binds the port): each rank is a ``multiprocessing`` process of the *spawn* context, i.e. a
fresh interpreter that imports this module and the ctypes bindings, sets its environment
(``NEURON_RT_VISIBLE_CORES=<rank>``, the root id, ``NEURON_RT_EXEC_TIMEOUT``; read once by
``nrt_init``, spec §5.10) and only then initialises the library. vnc 0 is the process's one
core (vncs are relative to the visible cores).

Every rank runs: ``nrt_barrier`` → ``nrt_all_gather`` → ``nrt_cc_global_comm_init`` → all-reduce,
all-gather and reduce-scatter in bf16 and fp32 through ``nrta_cc_prepare`` /
``nrta_cc_schedule`` (waiting by polling and by eventfd, alternately) → ``nrt_barrier`` →
``nrt_close``, and sends what it read back to the parent. The parent checks every result
against the pure-Python oracle of numerics.py (computed from every rank's input, never from
the library), that every rank exited with status 0 within the deadline, and that /dev/shm holds
nothing named ``opennrt-<port>-*`` afterwards.

``nrt_cc_op_type_t`` has exactly these three collectives (spec §2.2); there is no all-to-all in
it, so none is requested here.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import socket
import time
from pathlib import Path

import pytest

from numerics import CODECS, io_counts, oracle, rank_values
from opennrt_ctypes import CcOpType, Comm, Nrt, OpType

#: NEURON_RT_EXEC_TIMEOUT of every rank: a lost peer becomes a status, not a hang.
EXEC_TIMEOUT_S = 20
#: The whole job's deadline (seconds); ranks still running then are killed and the test fails.
JOB_TIMEOUT_S = 120.0
COUNT = 67
AG_BYTES = 37

#: (name, collective, dtype); all-gather has no reduction and is passed NRT_OP_ADD (0).
CASES = [
    (f"{cc.name[7:].lower()}-{dt}", cc, dt)
    for dt in ("bf16", "fp32")
    for cc in (CcOpType.NRT_CC_ALLREDUCE, CcOpType.NRT_CC_ALLGATHER, CcOpType.NRT_CC_REDUCESCATTER)
]


def ag_input(rank: int) -> bytes:
    """Rank ``rank``'s bytes for nrt_all_gather (distinct per rank and position)."""
    return bytes((rank * 131 + i * 7 + 3) % 256 for i in range(AG_BYTES))


def salt_of(i: int) -> int:
    return 100 + i


def rank_main(rank: int, world: int, root: str, results) -> None:
    """One rank, in its own spawned interpreter: environment first, then nrt_init."""
    os.environ.pop("NEURON_RT_NUM_CORES", None)
    os.environ["NEURON_RT_VISIBLE_CORES"] = str(rank)
    os.environ["NEURON_RT_ROOT_COMM_ID"] = root
    os.environ["NEURON_RT_EXEC_TIMEOUT"] = str(EXEC_TIMEOUT_S)
    step = "nrt_init"
    try:
        nrt = Nrt()
        nrt.init()
        got = {"visible": nrt.visible_vnc_count()}
        step = "nrt_barrier #1"
        nrt.barrier(0, rank, world)
        step = "nrt_all_gather"
        got["all_gather"] = nrt.all_gather(0, rank, world, ag_input(rank))
        step = "nrt_cc_global_comm_init"
        nrt.cc_global_comm_init(0, rank, world)
        for i, (name, cc, dt) in enumerate(CASES):
            step = name
            codec = CODECS[dt]
            in_n, out_n = io_counts(cc, COUNT, world)
            t_in = nrt.tensor_allocate(0, in_n * codec.size, f"in{rank}")
            t_out = nrt.tensor_allocate(0, out_n * codec.size, f"out{rank}")
            t_in.write(codec.pack(rank_values(rank, in_n, codec.amplitude, salt_of(i))))
            comm = Comm(range(world), rank, ctx_device_id=rank, ctx_device_count=world, vnc=0)
            ctx = nrt.cc_prepare(comm, [t_in], [t_out], codec.dtype, OpType.NRT_OP_ADD, cc)
            pending = nrt.cc_schedule(ctx, queue=0)
            wait = pending.wait_eventfd if i % 2 else pending.wait_poll
            wait(timeout=EXEC_TIMEOUT_S + 10)
            got[name] = codec.unpack(t_out.read())
            t_in.free()
            t_out.free()
        step = "nrt_barrier #2"
        nrt.barrier(0, rank, world)
        step = "nrt_close"
        nrt.close()
        results.put((rank, "ok", got))
    except BaseException as e:  # report, then fail the process
        results.put((rank, "error", f"{step}: {e!r}"))
        raise SystemExit(1)


def free_port() -> int:
    """A port nothing is bound to on 127.0.0.1 (no SO_REUSEADDR, so TIME_WAIT counts as
    taken) and with no /dev/shm object named after it; from [10000, 20000), below the
    ephemeral range and apart from the C tests' ports."""
    start = 10000 + (os.getpid() * 7) % 10000
    for k in range(10000):
        port = 10000 + (start - 10000 + k) % 10000
        if shm_objects(port):
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise RuntimeError("no free port in [10000, 20000)")


def shm_objects(port: int):
    shm = Path("/dev/shm")
    return sorted(p.name for p in shm.glob(f"opennrt-{port}-*")) if shm.is_dir() else []


def run_job(world: int, root: str, target=None, extra: tuple = (), timeout: float = JOB_TIMEOUT_S):
    """Start ``world`` spawned ranks, each ``target(rank, world, root, *extra, results)``
    (``rank_main`` by default); collect their reports and exit codes within ``timeout`` seconds,
    killing the ranks still running then (named in the third value returned)."""
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    target = target or rank_main
    procs = [ctx.Process(target=target, args=(r, world, root, *extra, results), name=f"rank{r}")
             for r in range(world)]
    for p in procs:
        p.start()
    reports, deadline = {}, time.monotonic() + timeout
    try:
        while len(reports) < world and time.monotonic() < deadline:
            try:
                rank, status, payload = results.get(timeout=0.5)
                reports[rank] = (status, payload)
            except queue.Empty:
                if all(not p.is_alive() for p in procs) and results.empty():
                    break
        for p in procs:
            p.join(timeout=max(0.1, deadline - time.monotonic()))
    finally:
        hung = [p.name for p in procs if p.is_alive()]
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join(5)
    return reports, [p.exitcode for p in procs], hung


def run_clean_job(world: int, root: str, port: int, target=None, extra: tuple = (),
                  timeout: float = JOB_TIMEOUT_S) -> dict:
    """``run_job``, then the checks every job must pass: nothing hung, every rank reported
    success and exited 0, and ``/dev/shm`` holds nothing named after the job's port (anything
    left is removed first, whatever else failed, so it cannot leak into later runs). Returns
    each rank's payload."""
    reports, exitcodes, hung = run_job(world, root, target, extra, timeout)
    left = shm_objects(port)
    for name in left:
        (Path("/dev/shm") / name).unlink(missing_ok=True)
    assert not hung, f"ranks {hung} still running after {timeout} s (killed)"
    errors = {r: p for r, (s, p) in reports.items() if s != "ok"}
    assert not errors, f"ranks failed: {errors}"
    assert sorted(reports) == list(range(world)), f"reports from ranks {sorted(reports)} only"
    assert exitcodes == [0] * world, f"exit codes {exitcodes}"
    assert not left, f"/dev/shm still held {left} after the job"
    return {r: payload for r, (_, payload) in reports.items()}


@pytest.mark.parametrize("world,host", [(2, "127.0.0.1"), (4, "localhost")])
def test_one_rank_per_process(world, host):
    port = free_port()
    root = f"{host}:{port}"
    reports = run_clean_job(world, root, port)

    gathered = b"".join(ag_input(r) for r in range(world))
    for r in range(world):
        got = reports[r]
        assert got["visible"] == 1, f"rank {r}: {got['visible']} visible cores, expected 1"
        assert got["all_gather"] == gathered, f"rank {r}: nrt_all_gather bytes differ"
    for i, (name, cc, dt) in enumerate(CASES):
        codec = CODECS[dt]
        in_n, _ = io_counts(cc, COUNT, world)
        inputs = [rank_values(r, in_n, codec.amplitude, salt_of(i)) for r in range(world)]
        expected = oracle(cc, OpType.NRT_OP_ADD, inputs)
        for r in range(world):
            got = reports[r][name]
            if got != expected[r]:
                bad = [j for j, (g, e) in enumerate(zip(got, expected[r])) if g != e]
                j = bad[0] if bad else min(len(got), len(expected[r]))
                pytest.fail(f"{name} world={world}: rank {r} has {len(bad)} wrong of {len(expected[r])}; "
                            f"first at {j}: got {got[j] if j < len(got) else None}, "
                            f"expected {expected[r][j] if j < len(expected[r]) else None}")

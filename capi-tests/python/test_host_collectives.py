"""nrt_barrier and nrt_all_gather across rank threads (docs/contract/abi.md §3.5, §5.8).

Both are blocking calls that every one of the ``g_device_count`` workers makes; here worker i is
the thread of logical core i (g_device_id = vnc = i).
"""

from __future__ import annotations

import textwrap
import threading

import pytest

import opennrt_ctypes as m
from conftest import WORLD, run_python
from opennrt_ctypes import NrtStatus
from ranks import on_ranks


def test_barrier_orders_every_rank(nrt):
    # Nobody leaves round k before everybody arrived at round k: each rank records its arrival,
    # and after the barrier every arrival of the round must be recorded. No timing involved.
    rounds = 4
    arrived = [[False] * WORLD for _ in range(rounds)]
    lock = threading.Lock()

    def rank_fn(i):
        seen = []
        for k in range(rounds):
            with lock:
                arrived[k][i] = True
            nrt.barrier(i, i, WORLD)
            with lock:
                seen.append(all(arrived[k]))
        return seen

    for i, seen in enumerate(on_ranks(WORLD, rank_fn)):
        assert seen == [True] * rounds, f"rank {i} left a barrier early: {seen}"


@pytest.mark.parametrize("size", [1, 13, 4096])
def test_all_gather_host_memory(nrt, size):
    # Rank i contributes `size` bytes derived from i; everyone gets all of them in rank order.
    def data(i):
        return bytes((i * 37 + j * 11 + size) % 256 for j in range(size))

    expected = b"".join(data(i) for i in range(WORLD))
    got = on_ranks(WORLD, lambda i: nrt.all_gather(i, i, WORLD, data(i)))
    for i, out in enumerate(got):
        assert out == expected, f"rank {i}: first difference at byte " + str(
            next(k for k, (a, b) in enumerate(zip(out, expected)) if a != b))


def test_host_collective_argument_errors(nrt):
    # Checked before any rendezvous, so a single caller gets the status back.
    import ctypes

    buf = ctypes.create_string_buffer(WORLD * 4)
    raw = nrt.raw
    assert raw.nrt_all_gather(0, WORLD, WORLD, 4, buf, buf) == NrtStatus.NRT_INVALID  # id >= count
    assert raw.nrt_all_gather(0, 0, WORLD, 4, None, buf) == NrtStatus.NRT_INVALID
    assert raw.nrt_all_gather(0, 0, WORLD, 4, buf, None) == NrtStatus.NRT_INVALID
    assert raw.nrt_barrier(WORLD, 0, WORLD) == NrtStatus.NRT_INVALID  # vnc not visible
    assert raw.nrt_barrier(0, WORLD, WORLD) == NrtStatus.NRT_INVALID  # id >= count


def test_a_barrier_that_failed_to_build_stays_failed_for_the_process():
    # docs/contract/abi.md §3.5 [H]: a failure while building a core's barrier is sticky for the
    # process lifetime. The build is made to fail by forcing an algorithm the 2-rank barrier
    # cannot use (kangaring needs more ranks; nrt_init reads the force); then the force is
    # lifted by a new nrt_init without it, and the barrier still fails on those cores.
    code = textwrap.dedent(
        """
        import os, threading, opennrt_ctypes as m
        nrt = m.Nrt()
        def both(cores):
            out = {}
            def one(vnc, gid):
                out[vnc] = nrt.raw.nrt_barrier(vnc, gid, 2)
            th = [threading.Thread(target=one, args=(v, g)) for g, v in enumerate(cores)]
            for t in th: t.start()
            for t in th: t.join()
            return [out[v] for v in cores]
        os.environ["OPENNRT_CC_ALGO"] = "kangaring"
        nrt.init()
        print("forced", both([0, 1]))
        print("again", both([0, 1]))
        nrt.close()
        del os.environ["OPENNRT_CC_ALGO"]
        nrt.init()
        print("lifted", both([0, 1]))
        nrt.close()
        """
    )
    res = run_python(code, {"NEURON_RT_VISIBLE_CORES": "0-1", "NEURON_RT_EXEC_TIMEOUT": "10"})
    assert res.returncode == 0, res.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in res.stdout.splitlines())
    ok = int(m.NrtStatus.NRT_SUCCESS)
    for k in ("forced", "again", "lifted"):
        got = eval(lines[k])
        assert all(s != ok for s in got), f"{k}: {got} ({res.stderr[-1500:]})"
    assert "sticky" in res.stderr
    # Without the forced failure the same program's barriers succeed (the failure is the
    # build's, not the world's).
    res = run_python(code.replace('os.environ["OPENNRT_CC_ALGO"] = "kangaring"', "pass")
                     .replace('del os.environ["OPENNRT_CC_ALGO"]', "pass"),
                     {"NEURON_RT_VISIBLE_CORES": "0-1", "NEURON_RT_EXEC_TIMEOUT": "10"})
    assert res.returncode == 0, res.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in res.stdout.splitlines())
    assert all(eval(lines[k]) == [ok, ok] for k in ("forced", "again", "lifted")), res.stdout

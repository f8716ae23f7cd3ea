"""nrt_barrier and nrt_all_gather across rank threads (spec/nrt-abi.md §3.5, §5.8).

Both are blocking calls that every one of the ``g_device_count`` workers makes; here worker i is
the thread of logical core i (g_device_id = vnc = i).
"""

from __future__ import annotations

import threading

import pytest

from conftest import WORLD
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

"""A KV-cache hand-off between two processes through ``nrt_async_sendrecv.h``: the Python twin
of capi-tests/sendrecv/kv_handoff.c (same command line, byte pattern and exit statuses), so
either side may be the C program and the other this script.

    python3 kv_handoff.py send PEER_IP PEER_LNC LNC N BYTES [device|host]
    python3 kv_handoff.py recv PEER_IP PEER_LNC LNC N BYTES [device|host]

A prefill worker (``send``) streams N tensors of BYTES bytes each to a decode worker
(``recv``), which checks every byte. Both need NEURON_RT_ASYNC_SENDRECV_EXPERIMENTAL_ENABLED=1
and the same NEURON_RT_ASYNC_SENDRECV_BOOTSTRAP_PORT; the library is
``$OPENNRT_LIB_DIR/libnrt.so`` (opennrt_ctypes.py). LNC is this side's host logical core,
PEER_LNC the other side's, PEER_IP the other side's host. Either side may start first.

KV_EXPECT_FAILURE=1 (for fault tests): the transfer must fail with a status, not hang; the
program then closes its service and starts it again, which must work.

Exit status: 0 every byte arrived; 1 a byte differs; 2 an API call failed; 3 with
KV_EXPECT_FAILURE, the transfer did not fail.
"""

from __future__ import annotations

import os
import sys
import time
from typing import List

from opennrt_ctypes import Nrt, NrtError, Placement

#: The pattern is periodic over blocks of 4096 bytes up to a per-block shift (``offset >> 12``).
BLOCK = 4096
#: One block of ``(offset * 131) & 0xff`` (``4096 * 131`` is a multiple of 256, so every block
#: starts the same), shifted by each of the 256 byte values: a layer's bytes are a join of these.
_SHIFTED_BLOCKS = [bytes((k * 131 + shift) & 0xFF for k in range(BLOCK)) for shift in range(256)]

USAGE = "usage: {} send|recv PEER_IP PEER_LNC LNC N BYTES [device|host]"


def kv_byte(layer: int, offset: int) -> int:
    """The byte at ``offset`` of layer ``layer`` (kv_handoff.c's ``kv_byte``): every layer and
    every position differ."""
    return (offset * 131 + layer * 7919 + (offset >> 12)) & 0xFF


def kv_layer(layer: int, size: int) -> bytes:
    """The ``size`` bytes ``kv_byte(layer, 0 .. size - 1)``, built from :data:`_SHIFTED_BLOCKS`
    (block ``j`` is shifted by ``j + layer * 7919``), not byte by byte."""
    blocks = -(-size // BLOCK)
    base = layer * 7919
    return b"".join(_SHIFTED_BLOCKS[(j + base) & 0xFF] for j in range(blocks))[:size]


class Mismatch(Exception):
    """What arrived is not what was sent (exit status 1)."""


def first_difference(got: bytes, want: bytes) -> int:
    """Index of the first byte where ``got`` and ``want`` (of equal length) differ."""
    return next(i for i, (a, b) in enumerate(zip(got, want)) if a != b)


def transfer(post, layers: list, size: int, max_pending: int, must_fail: bool) -> List[int]:
    """Post ``post(tensor, 0, size)`` for every layer, at most ``max_pending`` requests not yet
    reported done (the per-communicator limit), and poll them until each is done or failed.
    Returns the statuses of the failed transfers; without ``must_fail`` the first failure
    raises :class:`NrtError` instead."""
    failures: List[int] = []
    inflight = {}  # layer index -> SendRecvRequest not yet done
    posted = 0
    while posted < len(layers) or inflight:
        while posted < len(layers) and len(inflight) < max_pending:
            try:
                inflight[posted] = post(layers[posted], 0, size)
            except NrtError as e:
                if not must_fail:
                    raise
                failures.append(e.status)
            posted += 1
        for i, req in list(inflight.items()):
            try:
                moved = req.test()
            except NrtError as e:
                if not must_fail:
                    raise
                failures.append(e.status)
                del inflight[i]  # a failed request keeps failing: stop testing it
                continue
            if moved is None:
                continue
            del inflight[i]
            if moved != size:
                raise Mismatch(f"layer {i} moved {moved} bytes, not {size}")
    return failures


def main(argv: List[str]) -> int:
    if len(argv) < 7 or argv[1] not in ("send", "recv"):
        print(USAGE.format(argv[0]), file=sys.stderr)
        return 2
    try:
        peer_lnc, lnc, n = int(argv[3]), int(argv[4]), int(argv[5])
        size = int(argv[6], 0)
    except ValueError:
        print(USAGE.format(argv[0]), file=sys.stderr)
        return 2
    mode, peer_ip = argv[1], argv[2]
    sender = mode == "send"
    device = len(argv) < 8 or argv[7] != "host"
    must_fail = os.environ.get("KV_EXPECT_FAILURE") == "1"

    try:
        nrt = Nrt()
    except OSError as e:
        print(f"kv_handoff: {e}", file=sys.stderr)
        return 2
    nrt.init()
    max_pending = nrt.sendrecv_max_pending()
    nrt.sendrecv_init(lnc)

    # Connect (sender) or accept (receiver); neither blocks, test_comm says when it is done.
    open_comm = nrt.sendrecv_connect if sender else nrt.sendrecv_accept
    comm = open_comm(peer_ip, peer_lnc, lnc)
    comm.wait_connected(timeout=float("inf"))  # the runtime's connect timeout bounds it

    # The KV cache: one tensor per layer.
    placement = (Placement.NRT_TENSOR_PLACEMENT_DEVICE if device
                 else Placement.NRT_TENSOR_PLACEMENT_HOST)
    layers = []
    for i in range(n):
        layers.append(nrt.tensor_allocate(0, size, "kv", placement))
        if sender:
            layers[i].write(kv_layer(i, size))

    # Stream every layer, at most max_pending requests in flight (the per-comm limit).
    t0 = time.monotonic()
    failures = transfer(comm.send if sender else comm.recv, layers, size, max_pending, must_fail)
    secs = time.monotonic() - t0

    if must_fail:
        if not failures:
            print("kv_handoff: the transfer was expected to fail, and it did not", file=sys.stderr)
            return 3
        print(f"kv_handoff {mode}: {len(failures)} of {n} transfers failed as expected "
              f"(first status {failures[0]})")
        # The survivor closes its service and starts it again.
        nrt.sendrecv_close(lnc)
        nrt.sendrecv_init(lnc)
        nrt.sendrecv_close(lnc)
        print(f"kv_handoff {mode}: closed and started lnc {lnc} again")
        nrt.close()
        return 0

    if not sender:
        nrt.sendrecv_flush(lnc)
        for i, tensor in enumerate(layers):
            got, want = tensor.read(0, size), kv_layer(i, size)
            if got != want:
                b = first_difference(got, want)
                raise Mismatch(f"layer {i} byte {b} is {got[b]}, not {kv_byte(i, b)}")
    rate = n * size / secs / 1e6 if secs > 0 else 0.0
    print(f"kv_handoff {mode}: {n} x {size} bytes ({'device' if device else 'host'} tensors) in "
          f"{secs:.3f} s, {rate:.1f} MB/s{'' if sender else ', every byte checked'}")
    for tensor in layers:
        tensor.free()
    nrt.sendrecv_close(lnc)
    nrt.close()
    return 0


def run(argv: List[str]) -> int:
    """:func:`main` with kv_handoff.c's exit statuses for its two ways out: wrong data (1) and a
    failed API call (2), each reported on stderr."""
    try:
        return main(argv)
    except Mismatch as e:
        print(f"kv_handoff: {e}", file=sys.stderr)
        return 1
    except NrtError as e:
        print(f"kv_handoff: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(run(sys.argv))

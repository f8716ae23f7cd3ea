"""One thread per rank in one process: the single-process multi-rank mode (design.md §2.6,
"Ranks are VNCs": every visible logical core is a rank).

ctypes releases the GIL around foreign calls, so rank threads really block inside the library
at the same time (a collective waits for its peers there). A rank thread that raises makes the
whole call raise; a thread that never returns is reported after ``timeout`` seconds instead of
hanging the test run.
"""

from __future__ import annotations

import concurrent.futures as cf
from typing import Callable, List, Sequence, TypeVar

from numerics import CODECS, io_counts, oracle, rank_values
from opennrt_ctypes import CcOpType, Comm, Nrt, OpType, Tensor

T = TypeVar("T")

#: Seconds a rank may take; the library's own NEURON_RT_EXEC_TIMEOUT (set lower by the tests)
#: turns a lost peer into a status before this fires.
RANK_TIMEOUT = 120.0


def on_ranks(n: int, fn: Callable[[int], T], timeout: float = RANK_TIMEOUT) -> List[T]:
    """Run ``fn(rank)`` for rank 0..n-1, each in its own thread; results in rank order."""
    pool = cf.ThreadPoolExecutor(max_workers=n, thread_name_prefix="rank")
    try:
        futures = [pool.submit(fn, r) for r in range(n)]
        done, not_done = cf.wait(futures, timeout=timeout, return_when=cf.FIRST_EXCEPTION)
        for f in done:
            if f.exception() is not None:
                raise f.exception()
        if not_done:
            cf.wait(not_done, timeout=timeout)
        stuck = [r for r, f in enumerate(futures) if not f.done()]
        if stuck:
            raise TimeoutError(f"ranks {stuck} did not return within {timeout} s")
        return [f.result() for f in futures]
    finally:
        pool.shutdown(wait=False)


def global_comm_init(nrt: Nrt, world: int) -> None:
    """``nrt_cc_global_comm_init(i, i, world)`` on every core i, concurrently (spec §5.7)."""
    on_ranks(world, lambda i: nrt.cc_global_comm_init(i, i, world))


def _buffers(nrt: Nrt, owned: list, cc_op: CcOpType, esize: int, in_n: int, out_n: int,
             rank: int, vnc: int, layout: str):
    """One rank's tensor lists, and the byte offsets of its input in ``ins[0]`` and of its
    result in ``outs[0]``.

    ``layout``:
    * ``"separate"``: two fresh device tensors on the rank's core (out of place);
    * ``"in-place"``: the same tensor in both lists (docs/contract/abi.md §5.7: "same tensor in and
      out"), laid out by NCCL's convention, which OpenNRT follows (abi/cc_async.rs,
      runtime/cc_tensor.rs): all-reduce reads and writes the whole tensor; an all-gather's
      tensor is the whole N × count output with the rank's input at block r; a
      reduce-scatter's tensor is the whole N × count input with the rank's result at block r;
    * ``"nccl"``: two different tensors over one storage, overlapping as NCCL's in-place
      buffers do: the all-gather input is a slice at block r of the output, the reduce-scatter
      output a slice at block r of the input (``nrt_tensor_allocate_slice`` aliases storage,
      §3.3). Not "the same tensor", so the library must get it right as out of place.
    """
    if layout == "separate":
        src = nrt.tensor_allocate(vnc, in_n * esize, f"in{rank}")
        owned.append(src)
        dst = nrt.tensor_allocate(vnc, out_n * esize, f"out{rank}")
        owned.append(dst)
        return [src], [dst], 0, 0
    if layout not in ("in-place", "nccl"):
        raise ValueError(f"layout={layout!r}: separate, in-place or nccl")
    whole = nrt.tensor_allocate(vnc, max(in_n, out_n) * esize, f"whole{rank}")
    owned.append(whole)
    block = rank * min(in_n, out_n) * esize
    if cc_op == CcOpType.NRT_CC_ALLREDUCE:
        return [whole], [whole], 0, 0
    if layout == "in-place":
        if cc_op == CcOpType.NRT_CC_ALLGATHER:
            return [whole], [whole], block, 0
        return [whole], [whole], 0, block
    part = whole.slice(block, min(in_n, out_n) * esize, f"block{rank}")
    owned.insert(0, part)  # slices are freed before their parent
    if cc_op == CcOpType.NRT_CC_ALLGATHER:
        return [part], [whole], 0, 0
    return [whole], [part], 0, 0


def run_collective(
    nrt: Nrt,
    cc_op: CcOpType,
    op: OpType,
    dtype_name: str,
    count: int,
    group: Sequence[int],
    world: int,
    layout: str = "separate",
    wait: str = "poll",
    queue: int = 0,
    salt: int = 0,
) -> None:
    """Run one collective over ``group`` (global ids = vncs) through nrta_cc_prepare/schedule,
    waiting by ``wait`` (``poll``: nrta_is_completed; ``eventfd``/``eventfd-libc``: §5.6),
    check every rank's output against :func:`numerics.oracle`, raise AssertionError on a
    mismatch (naming rank, element, got and expected)."""
    codec = CODECS[dtype_name]
    n = len(group)
    in_n, out_n = io_counts(cc_op, count, n)
    inputs = [rank_values(r, in_n, codec.amplitude, salt) for r in range(n)]
    expected = oracle(cc_op, op, inputs)

    def rank_fn(rank: int) -> List[float]:
        vnc = group[rank]
        comm = Comm(group, rank, ctx_device_id=vnc, ctx_device_count=world, vnc=vnc)
        owned: List[Tensor] = []  # freed at the end, slices first
        try:
            ins, outs, in_at, out_at = _buffers(nrt, owned, cc_op, codec.size, in_n, out_n,
                                                rank, vnc, layout)
            ins[0].write(codec.pack(inputs[rank]), in_at)
            ctx = nrt.cc_prepare(comm, ins, outs, codec.dtype, op, cc_op)
            pending = nrt.cc_schedule(ctx, queue)
            if ctx.handle.value:
                raise AssertionError("nrta_cc_schedule succeeded but left *cc_ctx non-NULL")
            if wait == "poll":
                pending.wait_poll()
            elif wait in ("eventfd", "eventfd-libc"):
                pending.wait_eventfd(use_libc=wait == "eventfd-libc")
            else:
                raise ValueError(f"wait={wait!r}: poll, eventfd or eventfd-libc")
            return codec.unpack(outs[0].read(out_at, out_n * codec.size))
        finally:
            for t in owned:
                t.free()

    got = on_ranks(n, rank_fn)
    for rank in range(n):
        if got[rank] != expected[rank]:
            bad = [i for i, (g, e) in enumerate(zip(got[rank], expected[rank])) if g != e]
            i = bad[0] if bad else min(len(got[rank]), len(expected[rank]))
            raise AssertionError(
                f"{cc_op.name} {op.name} {dtype_name} count={count} ranks={n} {layout}: "
                f"rank {rank} has {len(bad)} wrong of {len(expected[rank])}; first at element {i}: "
                f"got {got[rank][i] if i < len(got[rank]) else None}, "
                f"expected {expected[rank][i] if i < len(expected[rank]) else None}"
            )

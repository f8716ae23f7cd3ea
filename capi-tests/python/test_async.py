"""Sequence ids, completion and the error statuses of the async collective API
(docs/contract/abi.md §3.6, §5.5, §5.6, §5.7).

Error cases call the library unchecked (``nrt.raw``) and compare the returned status; the
argument checks of ``nrta_cc_prepare`` come before any rendezvous, so one rank suffices for
them. Checks on ``nrta_cc_schedule`` need a real prepared context and so run inside a full
collective in which every rank also completes the operation.
"""

from __future__ import annotations

import ctypes
import os
import select
import textwrap

import pytest

import opennrt_ctypes as m
from conftest import WORLD, run_python
from numerics import CODECS, oracle, rank_values
from opennrt_ctypes import CcOpType, Comm, Dtype, NrtStatus, OpType, XuType
from ranks import on_ranks, run_collective

S = NrtStatus
COLL = XuType.NRTA_XU_COLLECTIVES
FULL = list(range(WORLD))


def xu_fields(seq: int):
    """(core, queue, xu type, counter) of an encoded sequence id (§5.5, "Our implementation")."""
    return seq >> 56, (seq >> 52) & 0xF, (seq >> 48) & 0xF, seq & m.NRTA_SEQ_NUM_MASK


def prepare_status(nrt, comm, ins, outs, dtype, op, cc):
    """Status of an unchecked nrta_cc_prepare; the context must stay NULL when it fails."""
    in_list, in_keep = m.tensor_list(ins)
    out_list, out_keep = m.tensor_list(outs)
    ctx = ctypes.c_void_p()
    status = nrt.raw.nrta_cc_prepare(ctypes.byref(comm.c), ctypes.byref(in_list),
                                     ctypes.byref(out_list), dtype, op, cc, ctypes.byref(ctx))
    if status != S.NRT_SUCCESS:
        assert not ctx.value, "out-parameter written on failure (§3 preamble)"
    return status


@pytest.fixture
def rank0_tensors(world):
    """Three device tensors on core 0: 64 bytes, 32 bytes, 6 bytes."""
    ts = [world.tensor_allocate(0, size, f"t{size}") for size in (64, 32, 6)]
    yield ts
    for t in ts:
        t.free()


def test_prepare_argument_errors(world, rank0_tensors):
    t64, t32, t6 = rank0_tensors
    comm = Comm(FULL, 0, 0, WORLD, 0)
    f32, add = Dtype.NRT_DTYPE_FLOAT32, OpType.NRT_OP_ADD
    ar, ag = CcOpType.NRT_CC_ALLREDUCE, CcOpType.NRT_CC_ALLGATHER
    cases = {
        "dtype 99 (no such nrt_dtype_t)": (comm, [t64], [t64], 99, add, ar),
        "dtype UNKNOWN": (comm, [t64], [t64], Dtype.NRT_DTYPE_UNKNOWN, add, ar),
        # design.md §2.9: integer reductions are rejected (the compiler converts them to FP32).
        "integer all-reduce": (comm, [t64], [t64], Dtype.NRT_DTYPE_INT32, add, ar),
        "op NRT_OP_INVALID": (comm, [t64], [t64], f32, OpType.NRT_OP_INVALID, ar),
        "cc_op 7": (comm, [t64], [t64], f32, add, 7),
        "all-reduce in 64 B, out 32 B": (comm, [t64], [t32], f32, add, ar),
        "all-gather out != 8 x in": (comm, [t32], [t64], f32, add, ag),
        "6 bytes of fp32": (comm, [t6], [t6], f32, add, ar),
        "no input tensor": (comm, [], [t64], f32, add, ar),
        "rank >= rank_n": (Comm(FULL, WORLD, 0, WORLD, 0), [t64], [t64], f32, add, ar),
        "vnc not visible": (Comm(FULL, 0, 0, WORLD, WORLD), [t64], [t64], f32, add, ar),
    }
    got = {name: prepare_status(world, *args) for name, args in cases.items()}
    assert got == {name: S.NRT_INVALID for name in cases}


def test_sequence_queries_errors(world):
    seq, done = ctypes.c_uint64(), ctypes.c_bool()
    raw = world.raw
    assert raw.nrta_get_sequence(0, COLL, 3, ctypes.byref(seq)) == S.NRT_INVALID  # queues 0-2
    assert raw.nrta_get_sequence(0, XuType.NRTA_XU_COMPUTE, 1, ctypes.byref(seq)) == S.NRT_INVALID
    assert raw.nrta_get_sequence(0, XuType.NRTA_XU_TYPE_NUM, 0, ctypes.byref(seq)) == S.NRT_INVALID
    assert raw.nrta_get_sequence(WORLD, COLL, 0, ctypes.byref(seq)) == S.NRT_INVALID
    assert raw.nrta_get_sequence(0, COLL, 0, None) == S.NRT_INVALID
    # A sequence id whose XU type nibble is 0xF names no execution unit (§3.6).
    assert raw.nrta_is_completed((0xF << 48) | 1, ctypes.byref(done)) == S.NRT_INVALID
    assert raw.nrta_is_completed(0, None) == S.NRT_INVALID


def test_untouched_xu_reports_counter_zero(world):
    # §5.5: before any completion nrta_get_sequence returns the XU id bits with counter 0.
    # No test submits tensor-op requests on core 5 queue 1.
    seq = world.get_sequence(5, XuType.NRTA_XU_TENSOR_OP, 1)
    assert xu_fields(seq) == (5, 1, XuType.NRTA_XU_TENSOR_OP, 0)


def test_schedule_errors_and_sequence_ids(world):
    """Each rank: schedule on queue 3 fails and leaves the context usable; schedule on queue 0
    succeeds and NULLs it; scheduling the NULL again, or a stale copy of the consumed handle,
    fails; the sequence ids are encoded as §5.5 and contiguous on the XU; completion is seen
    by nrta_is_completed, nrta_get_sequence and an eventfd registered after the fact."""
    codec = CODECS["fp32"]
    count, queue = 24, 0
    inputs = [rank_values(r, count, codec.amplitude) for r in FULL]
    expected = oracle(CcOpType.NRT_CC_ALLREDUCE, OpType.NRT_OP_ADD, inputs)

    def rank_fn(r):
        t = world.tensor_allocate(r, count * codec.size, f"sched{r}")
        try:
            t.write(codec.pack(inputs[r]))
            before = world.get_sequence(r, COLL, queue)
            ctx = world.cc_prepare(Comm(FULL, r, r, WORLD, r), [t], [t], codec.dtype,
                                   OpType.NRT_OP_ADD, CcOpType.NRT_CC_ALLREDUCE)
            stale = ctypes.c_void_p(ctx.handle.value)
            ret, seq = ctypes.c_int(-1), ctypes.c_uint64(0)
            bad_q = world.raw.nrta_cc_schedule(ctypes.byref(ctx.handle), 3, ctypes.byref(ret),
                                               ctypes.byref(seq))
            assert bad_q == S.NRT_INVALID, "collectives queue 3 (§3.6: 0-2)"
            assert ctx.handle.value == stale.value, "context kept after a failed schedule"
            pending = world.cc_schedule(ctx, queue)
            assert ctx.handle.value is None, "§3.6: *cc_ctx = NULL on successful enqueue"
            again = world.raw.nrta_cc_schedule(ctypes.byref(ctx.handle), queue,
                                               ctypes.byref(ret), ctypes.byref(seq))
            consumed = world.raw.nrta_cc_schedule(ctypes.byref(stale), queue,
                                                  ctypes.byref(ret), ctypes.byref(seq))
            pending.wait_poll()
            after = world.get_sequence(r, COLL, queue)
            fd = m.eventfd_nonblocking()
            try:  # §5.6: registering a completed sequence signals at once
                world.register_seq_fd(pending.seq, fd)
                fired = select.select([fd], [], [], 30)[0] == [fd]
                value = int.from_bytes(os.read(fd, 8), "little") if fired else 0
                world.register_seq_fd(pending.seq, -1)
            finally:
                os.close(fd)
            out = codec.unpack(t.read())
            return (again, consumed, before, pending.seq, after, world.is_completed(pending.seq),
                    value, pending.exec_ret.value, out)
        finally:
            t.free()

    for r, res in enumerate(on_ranks(WORLD, rank_fn)):
        again, consumed, before, seq, after, done, fd_value, exec_ret, out = res
        assert again == S.NRT_INVALID, f"rank {r}: schedule of *cc_ctx == NULL gave {again}"
        assert consumed == S.NRT_INVALID_HANDLE, f"rank {r}: stale context gave {consumed}"
        assert xu_fields(seq)[:3] == (r, queue, COLL), f"rank {r}: seq {seq:#x} (§5.5)"
        assert xu_fields(before)[:3] == (r, queue, COLL)
        assert xu_fields(seq)[3] == xu_fields(before)[3] + 1, "counters are contiguous per XU"
        assert after == seq, "nrta_get_sequence = last completed, full encoded value"
        assert done and fd_value >= 1 and exec_ret == S.NRT_SUCCESS
        assert out == expected[r], f"rank {r} result"


def test_exec_ret_and_completion_of_back_to_back_requests(world):
    # Two collectives queued before waiting: completion is monotone per XU (§5.4), so once the
    # second is complete, the first is too, and both results are right.
    run_collective(world, CcOpType.NRT_CC_ALLGATHER, OpType.NRT_OP_ADD, "bf16", 5, FULL, WORLD)
    codec = CODECS["fp32"]
    a = [rank_values(r, 16, 100, salt=1) for r in FULL]
    b = [rank_values(r, 16, 100, salt=2) for r in FULL]

    def rank_fn(r):
        ta, tb = (world.tensor_allocate(r, 64, f"bb{r}{x}") for x in "ab")
        try:
            ta.write(codec.pack(a[r]))
            tb.write(codec.pack(b[r]))
            pend = []
            for t in (ta, tb):
                ctx = world.cc_prepare(Comm(FULL, r, r, WORLD, r), [t], [t], codec.dtype,
                                       OpType.NRT_OP_MAX, CcOpType.NRT_CC_ALLREDUCE)
                pend.append(world.cc_schedule(ctx, 0))
            pend[1].wait_poll()
            first_done = world.is_completed(pend[0].seq)
            pend[0].wait_poll()
            return first_done, codec.unpack(ta.read()), codec.unpack(tb.read())
        finally:
            ta.free()
            tb.free()

    ea = oracle(CcOpType.NRT_CC_ALLREDUCE, OpType.NRT_OP_MAX, a)
    eb = oracle(CcOpType.NRT_CC_ALLREDUCE, OpType.NRT_OP_MAX, b)
    for r, (first_done, ra, rb) in enumerate(on_ranks(WORLD, rank_fn)):
        assert first_done, f"rank {r}: second request complete before the first"
        assert (ra, rb) == (ea[r], eb[r])


def test_a_context_reused_after_a_timeout_fails_cleanly_then_recovers():
    # A context reused after a failed run fails cleanly or recovers, and
    # never silently reuses stale state. 2 ranks as threads, the same tensors throughout
    # (the machine stays resident): 3 exact runs; then rank 0 schedules alone and, after
    # NEURON_RT_EXEC_TIMEOUT (1 s), gets NRT_TIMEOUT (spec §5.8); rank 1 arrives at that
    # collective late and must be refused too (its instance failed), not run it alone; then
    # both run 3 more times with new inputs, every element exact (a fresh machine, since a
    # failed meeting never gives its machine back). Sums of small integers: exact in fp32.
    code = textwrap.dedent(
        """
        import threading, opennrt_ctypes as m
        from opennrt_ctypes import CcOpType, Comm, OpType, Dtype
        from numerics import CODECS
        nrt = m.Nrt(); nrt.init()
        codec = CODECS["fp32"]
        N = 1000
        for r in range(2):
            nrt.cc_global_comm_init(r, r, 2)
        ts = [(nrt.tensor_allocate(r, 4 * N, f"in{r}"), nrt.tensor_allocate(r, 4 * N, f"out{r}"))
              for r in range(2)]
        def vals(r, salt):
            return [float((r + j + salt) % 7 + 1) for j in range(N)]
        def run(r, salt, out):
            tin, tout = ts[r]
            tin.write(codec.pack(vals(r, salt)))
            tout.write(b"\\xff" * (4 * N))
            ctx = nrt.cc_prepare(Comm([0, 1], r, r, 2, r), [tin], [tout], Dtype.NRT_DTYPE_FLOAT32,
                                 OpType.NRT_OP_ADD, CcOpType.NRT_CC_ALLREDUCE)
            st = nrt.cc_schedule(ctx, 0).wait_poll(timeout=30, raise_on_error=False)
            out[r] = (st, codec.unpack(tout.read()))
        def both(salt):
            out = [None, None]
            th = [threading.Thread(target=run, args=(r, salt, out)) for r in range(2)]
            for t in th: t.start()
            for t in th: t.join()
            want = [a + b for a, b in zip(vals(0, salt), vals(1, salt))]
            return [(st, got == want) for st, got in out]
        for salt in range(3):
            print("before", salt, both(salt))
        out = [None, None]
        run(0, 9, out)
        print("alone", out[0][0])
        run(1, 9, out)
        print("late", out[1][0])
        for salt in range(3, 6):
            print("after", salt, both(salt))
        for a, b in ts:
            a.free(); b.free()
        nrt.close()
        """
    )
    res = run_python(code, {"NEURON_RT_VISIBLE_CORES": "0-1", "NEURON_RT_EXEC_TIMEOUT": "1"})
    assert res.returncode == 0, res.stderr[-3000:]
    lines = res.stdout.splitlines()
    ok = str([(int(S.NRT_SUCCESS), True)] * 2)
    assert [ln for ln in lines if ln.startswith("before")] == [f"before {s} {ok}" for s in range(3)]
    assert f"alone {int(S.NRT_TIMEOUT)}" in lines, res.stdout
    late = [ln for ln in lines if ln.startswith("late")]
    assert late and late[0] != f"late {int(S.NRT_SUCCESS)}", f"the late rank ran alone: {res.stdout}"
    assert [ln for ln in lines if ln.startswith("after")] == [f"after {s} {ok}" for s in range(3, 6)]


def test_nrt_cc_prepare_and_schedule_are_the_nrta_functions_under_second_names():
    # shim/libnrt.exports binds nrt_cc_prepare / nrt_cc_schedule (NRT_2.0.0) to the functions of
    # nrta_cc_prepare / nrta_cc_schedule: a collective prepared and scheduled through the
    # second names runs, and the two names fail the same way on the same bad input.
    code = textwrap.dedent(
        """
        import ctypes, struct, opennrt_ctypes as m
        from opennrt_ctypes import CcOpType, Comm, Dtype, OpType, tensor_list
        nrt = m.Nrt()
        nrt.init()
        nrt.cc_global_comm_init(0, 0, 1)
        t = nrt.tensor_allocate(0, 16, "x")
        t.write(struct.pack("4f", 1, 2, 3, 4))
        li, keep_i = tensor_list([t]); lo, keep_o = tensor_list([t])
        ctx = ctypes.c_void_p()
        comm = Comm([0], 0, 0, 1, 0)
        st = nrt.raw.nrt_cc_prepare(ctypes.byref(comm.c), ctypes.byref(li), ctypes.byref(lo),
                                    Dtype.NRT_DTYPE_FLOAT32, OpType.NRT_OP_ADD,
                                    CcOpType.NRT_CC_ALLREDUCE, ctypes.byref(ctx))
        ret = ctypes.c_int(-1); seq = ctypes.c_uint64(0)
        st2 = nrt.raw.nrt_cc_schedule(ctypes.byref(ctx), 0, ctypes.byref(ret), ctypes.byref(seq))
        done = ctypes.c_bool(False)
        while not done.value:
            nrt.raw.nrta_is_completed(seq.value, ctypes.byref(done))
        print(st, st2, ret.value, struct.unpack("4f", t.read()))
        bad = [nrt.raw.nrt_cc_prepare(None, None, None, 0, 0, 0, None),
               nrt.raw.nrta_cc_prepare(None, None, None, 0, 0, 0, None)]
        print(bad[0], bad[1])
        nrt.close()
        """
    )
    res = run_python(code, {"NEURON_RT_VISIBLE_CORES": "0"})
    assert res.returncode == 0, res.stderr[-3000:]
    first, second = res.stdout.strip().splitlines()
    assert first == "0 0 0 (1.0, 2.0, 3.0, 4.0)", (first, res.stderr[-2000:])
    a, b = second.split()
    assert a == b == str(int(m.NrtStatus.NRT_INVALID)), second

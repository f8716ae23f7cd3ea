"""Host-driven collectives through ctypes, one thread per rank (docs/contract/abi.md §3.6, §5.7).

Every rank allocates device tensors on its own core, writes integer-valued data, prepares and
schedules on collectives queue 0 (others where named), waits, reads back; the result of every
rank must equal the pure-Python oracle bit for bit (numerics.py explains why exactness holds).
"""

from __future__ import annotations

import textwrap

import pytest

from conftest import WORLD, run_python
from opennrt_ctypes import CcOpType, OpType
from ranks import run_collective

AR, AG, RS = CcOpType.NRT_CC_ALLREDUCE, CcOpType.NRT_CC_ALLGATHER, CcOpType.NRT_CC_REDUCESCATTER
ADD, MAX, MIN = OpType.NRT_OP_ADD, OpType.NRT_OP_MAX, OpType.NRT_OP_MIN

#: (collective, reduction). All-gather has no reduction; Choice: it is passed NRT_OP_ADD (0),
#: the value a zero-initialised argument would have.
OPS = [(AR, ADD), (AR, MAX), (AR, MIN), (AG, ADD), (RS, ADD), (RS, MAX), (RS, MIN)]
DTYPES = ["fp32", "bf16", "fp8_e4m3"]
FULL = list(range(WORLD))


def op_id(p):
    return f"{p[0].name[7:].lower()}-{p[1].name[7:].lower()}"


@pytest.mark.parametrize("count", [1, 257])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cc", OPS, ids=op_id)
def test_collective_all_ranks(world, cc, dtype, count):
    run_collective(world, cc[0], cc[1], dtype, count, FULL, WORLD)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cc", [(AR, ADD), (AG, ADD), (RS, MAX)], ids=op_id)
def test_collective_in_place(world, cc, dtype):
    # The same tensor in both lists (ranks._buffers explains the layouts).
    run_collective(world, cc[0], cc[1], dtype, 67, FULL, WORLD, layout="in-place")


@pytest.mark.parametrize("cc", [(AG, ADD), (RS, ADD)], ids=op_id)
def test_collective_nccl_in_place_layout(world, cc):
    # NCCL's in-place layout: the smaller buffer is rank r's chunk of the larger one.
    run_collective(world, cc[0], cc[1], "bf16", 45, FULL, WORLD, layout="nccl")


def test_all_reduce_large_count(world):
    # 4099 elements per rank: several chunks per ring step, not a multiple of anything.
    run_collective(world, AR, ADD, "fp32", 4099, FULL, WORLD)


@pytest.mark.parametrize("cc", [(AR, ADD), (AG, ADD), (RS, MIN)], ids=op_id)
def test_collective_odd_subgroup(world, cc):
    # A replica group of 3 of the 8 cores, not in core order: rank i runs on core group[i]
    # (spec §5.7: replica_group lists the participants' global ids in rank order).
    run_collective(world, cc[0], cc[1], "bf16", 33, [6, 1, 4], WORLD)


@pytest.mark.parametrize("queue", [1, 2])
def test_collectives_queues(world, queue):
    # §3.6: the collectives XU has 3 queues (0-2).
    run_collective(world, AR, MAX, "fp32", 40, FULL, WORLD, queue=queue)


@pytest.mark.parametrize("wait", ["eventfd", "eventfd-libc"])
def test_wait_by_eventfd(world, wait):
    # §5.6: nrta_event_register_seq_id_completion signals the caller's eventfd.
    run_collective(world, RS, ADD, "bf16", 50, FULL, WORLD, wait=wait)


def test_repeated_collectives_reuse_nothing_stale(world):
    # The same shape again with other data: a cached prepared context must not replay old data.
    for salt in range(3):
        run_collective(world, AR, ADD, "fp8_e4m3", 96, FULL, WORLD, salt=salt)


def test_world_of_three_in_its_own_process():
    # An odd world: a fresh process with NEURON_RT_VISIBLE_CORES=0-2 (read at nrt_init, §5.10),
    # nrt_cc_global_comm_init(i, i, 3) on each core, then every collective once.
    code = textwrap.dedent(
        """
        import opennrt_ctypes as m, ranks
        from opennrt_ctypes import CcOpType as C, OpType as O
        nrt = m.Nrt(); nrt.init()
        assert nrt.visible_vnc_count() == 3
        ranks.global_comm_init(nrt, 3)
        for cc, op in [(C.NRT_CC_ALLREDUCE, O.NRT_OP_ADD), (C.NRT_CC_ALLGATHER, O.NRT_OP_ADD),
                       (C.NRT_CC_REDUCESCATTER, O.NRT_OP_MAX)]:
            for dt in ("fp32", "bf16", "fp8_e4m3"):
                ranks.run_collective(nrt, cc, op, dt, 29, [0, 1, 2], 3)
        nrt.close(); print("ok")
        """
    )
    res = run_python(code, {"NEURON_RT_VISIBLE_CORES": "0-2", "NEURON_RT_EXEC_TIMEOUT": "20"})
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stdout + res.stderr

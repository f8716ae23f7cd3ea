"""Lifecycle, version and status names through ctypes (docs/contract/abi.md §3.1, §5.1, §2.1).

The before-init and close/re-init checks each run in a fresh interpreter: the session's own
runtime is initialised once by the ``nrt`` fixture.
"""

from __future__ import annotations

import ctypes
import re
import textwrap

import pytest

import opennrt_ctypes as m
from conftest import run_python


def header_rt_version():
    """``RT_VERSION`` from include/nrt/nrt.h: the runtime level OpenNRT reports."""
    text = (m.REPO / "include" / "nrt" / "nrt.h").read_text()
    nums = re.search(r"#define RT_VERSION \{([^}]*)\}", text).group(1)
    return tuple(int(x) for x in nums.split(",") if x.strip())


def test_get_version(nrt):
    ver = nrt.version()
    numbers = (ver.rt_major, ver.rt_minor, ver.rt_patch, ver.rt_maintenance)
    assert numbers == header_rt_version()
    detail = ver.rt_detail.decode()
    # §3.1: rt_detail is "libnrt version <ver>"; OpenNRT names itself after it.
    assert detail.startswith("libnrt version {}.{}.{}.{}".format(*numbers)), detail
    assert "OpenNRT" in detail
    # §3.1: git_hash (40 characters) is written when size > 200.
    assert re.fullmatch(r"[0-9a-f]{40}", ver.git_hash.decode()), ver.git_hash


def test_get_version_is_a_version_tolerant_copy(nrt):
    # §3.1 / §2.4: size < 160 → NRT_FAILURE; 160..200 → numbers and rt_detail, no git_hash.
    ver = m.NrtVersion()
    ctypes.memset(ctypes.byref(ver), 0xAB, ctypes.sizeof(ver))
    assert nrt.raw.nrt_get_version(ctypes.byref(ver), 159) == m.NrtStatus.NRT_FAILURE
    assert ver.rt_major == 0xABABABABABABABAB, "nothing written on failure"
    assert nrt.raw.nrt_get_version(ctypes.byref(ver), 160) == m.NrtStatus.NRT_SUCCESS
    assert ver.rt_major == header_rt_version()[0]
    assert bytes(ver)[160:] == b"\xab" * 64, "git_hash untouched when size <= 200"


def test_status_names_and_error():
    # Checks a number's name and the error's message on purpose: the raw 1002 is the point.
    with pytest.raises(m.NrtError) as err:
        m.check("nrta_cc_prepare", 1002)
    assert (err.value.status, err.value.name) == (1002, "NRT_EXEC_BAD_INPUT")
    assert "1002 (NRT_EXEC_BAD_INPUT)" in str(err.value)
    assert m.status_name(8) == "<unknown NRT_STATUS 8>"


def test_library_status_strings_agree(nrt):
    # OpenNRT also exports nrt_get_status_as_str (spec §1.1 recommends it); same names.
    fn = nrt.raw.nrt_get_status_as_str
    fn.restype, fn.argtypes = ctypes.c_char_p, [ctypes.c_int]
    for status in m.NrtStatus:
        assert fn(status).decode() == status.name


def test_calls_before_init_and_after_close_are_uninitialized():
    # §5.1: START → NRT_UNINITIALIZED (13); nrt_close ends in START, so 13 again after it;
    # a later nrt_init is allowed. Version is legal before init (§5.1 exceptions).
    code = textwrap.dedent(
        """
        import ctypes, opennrt_ctypes as m
        nrt = m.Nrt()
        def statuses():
            done = ctypes.c_bool()
            h = ctypes.c_void_p()
            seq = ctypes.c_uint64()
            return [nrt.raw.nrt_cc_global_comm_init(0, 0, 1),
                    nrt.raw.nrta_is_completed(1, ctypes.byref(done)),
                    nrt.raw.nrta_get_sequence(0, 2, 0, ctypes.byref(seq)),
                    nrt.raw.nrt_tensor_allocate(0, 0, 64, b"t", ctypes.byref(h)),
                    nrt.raw.nrt_barrier(0, 0, 1)]
        print("before", statuses())
        print("version", nrt.version().rt_major)
        nrt.init(); print("count", nrt.visible_vnc_count()); nrt.close()
        print("after", statuses())
        nrt.init(); print("again", nrt.visible_vnc_count()); nrt.close()
        """
    )
    res = run_python(code, {"NEURON_RT_VISIBLE_CORES": "0-2"})
    assert res.returncode == 0, res.stderr
    lines = dict(line.split(" ", 1) for line in res.stdout.splitlines())
    assert lines["before"] == str([13] * 5)
    assert lines["after"] == str([13] * 5)
    assert lines["version"] == str(header_rt_version()[0])
    assert lines["count"] == "3" and lines["again"] == "3"


def test_libc_eventfd_fallback_is_an_eventfd():
    # The Python < 3.10 path: libc's eventfd via ctypes, counter semantics of eventfd(2).
    import os

    fd = m.libc_eventfd(0, os.O_NONBLOCK)
    try:
        with pytest.raises(BlockingIOError):
            os.read(fd, 8)
        os.write(fd, (3).to_bytes(8, "little"))
        os.write(fd, (4).to_bytes(8, "little"))
        assert int.from_bytes(os.read(fd, 8), "little") == 7
    finally:
        os.close(fd)


def test_handles_from_before_nrt_close_are_invalid_after_the_next_init():
    # Tensors and prepared collectives belong to the nrt_init they were made under: nrt_close
    # frees them, and their handles are NRT_INVALID_HANDLE after the next nrt_init (never a
    # working stale object, never a crash); freeing one again is harmless.
    code = textwrap.dedent(
        """
        import ctypes, opennrt_ctypes as m
        from opennrt_ctypes import CcOpType, Comm, Dtype, OpType
        nrt = m.Nrt()
        nrt.init()
        t = nrt.tensor_allocate(0, 64, "old")
        t.write(b"x" * 64)
        nrt.cc_global_comm_init(0, 0, 1)
        ctx = nrt.cc_prepare(Comm([0], 0, 0, 1, 0), [t], [t], Dtype.NRT_DTYPE_FLOAT32,
                             OpType.NRT_OP_ADD, CcOpType.NRT_CC_ALLREDUCE)
        print("live", nrt.raw.nrt_tensor_read(t.handle, ctypes.create_string_buffer(64), 0, 64))
        nrt.close()
        print("closed", nrt.raw.nrt_tensor_read(t.handle, ctypes.create_string_buffer(64), 0, 64))
        nrt.init()
        print("stale", nrt.raw.nrt_tensor_read(t.handle, ctypes.create_string_buffer(64), 0, 64))
        ret = ctypes.c_int(-1); seq = ctypes.c_uint64(0)
        print("ctx", nrt.raw.nrta_cc_schedule(ctypes.byref(ctx.handle), 0, ctypes.byref(ret),
                                              ctypes.byref(seq)))
        h = ctypes.c_void_p(t.handle.value)
        nrt.raw.nrt_tensor_free(ctypes.byref(h))
        fresh = nrt.tensor_allocate(0, 64, "new")
        fresh.write(b"y" * 64)
        print("fresh", fresh.read() == b"y" * 64)
        fresh.free()
        nrt.close()
        """
    )
    res = run_python(code, {"NEURON_RT_VISIBLE_CORES": "0"})
    assert res.returncode == 0, res.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in res.stdout.splitlines())
    assert lines["live"] == str(int(m.NrtStatus.NRT_SUCCESS))
    assert lines["closed"] == str(int(m.NrtStatus.NRT_UNINITIALIZED))
    assert lines["stale"] == str(int(m.NrtStatus.NRT_INVALID_HANDLE)), res.stderr[-2000:]
    assert lines["ctx"] == str(int(m.NrtStatus.NRT_INVALID_HANDLE)), res.stderr[-2000:]
    assert lines["fresh"] == "True"


@pytest.mark.parametrize(
    "var, value",
    [
        ("NEURON_RT_LOG_LEVEL", "LOUD"),
        ("NEURON_RT_EXEC_TIMEOUT", "soon"),
        ("NEURON_RT_XU_COMPUTE_MAX_QUEUED_REQUESTS", "0"),
        ("OPENNRT_CC_ALGO", "bogus"),
        ("OPENNRT_CC_CHANNELS", "99"),
        ("OPENNRT_CC_VERIFY", "yes"),
        ("OPENNRT_DEVICE_THREADS", "many"),
        ("OPENNRT_DEVICE_POOL_MB", "-1"),
        ("OPENNRT_BOOTSTRAP_TIMEOUT", "1.5"),
        ("OPENNRT_SHARED_DEVICE", "true"),
        ("OPENNRT_TOPOLOGY", "torus"),
    ],
)
def test_a_bad_variable_fails_nrt_init_naming_it(var, value):
    # README "Environment": every variable is parsed once, by nrt_init; a value that does not
    # parse is NRT_INVALID with a log line naming the variable, and nothing is initialised.
    code = textwrap.dedent(
        """
        import opennrt_ctypes as m
        nrt = m.Nrt()
        print(int(nrt.raw.nrt_init(0, b"", b"")))
        print(int(nrt.raw.nrt_tensor_allocate(0, 0, 8, b"x", None)))
        """
    )
    res = run_python(code, {var: value})
    assert res.returncode == 0, res.stderr[-3000:]
    init, after = (int(x) for x in res.stdout.split())
    assert m.NrtStatus(init) == m.NrtStatus.NRT_INVALID, res.stderr
    assert m.NrtStatus(after) == m.NrtStatus.NRT_UNINITIALIZED
    assert f"{var}=" in res.stderr, res.stderr

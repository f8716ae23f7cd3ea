"""Point-to-point send/recv (``nrt_async_sendrecv.h``, docs/contract/abi.md §3.7) through ctypes.

The KV-cache hand-off runs as two processes, in every pairing that matters for the bindings:
kv_handoff.py to kv_handoff.py (device tensors), capi-tests/sendrecv/kv_handoff.c to
kv_handoff.py and back (host tensors), so the Python side must match both the C side's byte
pattern and the library's behaviour toward a C peer. The receiver checks every byte against the
pattern's formula, never against what the library produced.

The API's rules (the feature gate, a peer address that is not an IP, ranges past a tensor's end,
a request tested again after it was reported done, the limits) are checked through ctypes in
one process of their own per environment: the gate and the port are read by ``nrt_init``, and
this process's runtime (the session fixture's) is started without them.

Every case gets its own bootstrap port (the kernel's pick for a bind to port 0), peer address
127.0.0.1, the sender on host core 0 and the receiver on host core 1.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import opennrt_ctypes as m
from conftest import HERE
from kv_handoff import kv_byte, kv_layer

PEER_IP = "127.0.0.1"
SENDER_LNC, RECEIVER_LNC = 0, 1
#: Deadline of every process (seconds); a side still running then is killed and the case fails.
TIMEOUT_S = 120.0
KV_HANDOFF_C = m.REPO / "capi-tests" / "sendrecv" / "kv_handoff.c"
KV_HANDOFF_PY = HERE / "kv_handoff.py"
PYTHON = [sys.executable, str(KV_HANDOFF_PY)]
GATE = "NEURON_RT_ASYNC_SENDRECV_EXPERIMENTAL_ENABLED"
PORT = "NEURON_RT_ASYNC_SENDRECV_BOOTSTRAP_PORT"
#: A parent's settings a child must not inherit: core selection (the session fixture sets
#: NEURON_RT_VISIBLE_CORES in this process), the collectives' root, send/recv's own variables.
SCRUBBED = ("NEURON_RT_VISIBLE_CORES", "NEURON_RT_NUM_CORES", "NEURON_RT_ROOT_COMM_ID", GATE, PORT,
            "KV_EXPECT_FAILURE")


def lib_dir() -> Path:
    return m.library_path().parent


def free_port() -> int:
    """A TCP port free at this moment (the kernel's pick for a bind to port 0). The
    rendezvous store binds it on every address, so the probe does too."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def child_env(extra: dict) -> dict:
    """This environment without :data:`SCRUBBED`, with the library under test on both the
    ctypes path (OPENNRT_LIB_DIR) and the loader's (LD_LIBRARY_PATH), this directory importable,
    and ``extra`` on top."""
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
    lib = str(lib_dir())
    env["OPENNRT_LIB_DIR"] = lib
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (lib, env.get("LD_LIBRARY_PATH")) if p)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE), env.get("PYTHONPATH")) if p)
    env.update(extra)
    return env


def gate_on(port: int) -> dict:
    return {GATE: "1", PORT: str(port)}


@pytest.fixture(scope="module")
def c_kv_handoff(tmp_path_factory) -> Path:
    """capi-tests/sendrecv/kv_handoff.c built against include/ and linked with the library
    under test."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.fail("gcc is needed to build capi-tests/sendrecv/kv_handoff.c")
    out = tmp_path_factory.mktemp("kv_handoff") / "kv_handoff"
    res = subprocess.run(
        [gcc, "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", f"-I{m.REPO / 'include'}",
         "-o", str(out), str(KV_HANDOFF_C), f"-L{lib_dir()}", "-lnrt"],
        capture_output=True, text=True, timeout=TIMEOUT_S,
    )
    assert res.returncode == 0, f"building {KV_HANDOFF_C} failed:\n{res.stdout}{res.stderr}"
    return out


def handoff_args(mode: str, n: int, size: int, kind: str) -> list:
    """The shared command line ``send|recv PEER_IP PEER_LNC LNC N BYTES device|host``."""
    lnc, peer_lnc = (SENDER_LNC, RECEIVER_LNC) if mode == "send" else (RECEIVER_LNC, SENDER_LNC)
    return [mode, PEER_IP, str(peer_lnc), str(lnc), str(n), str(size), kind]


def run_handoff(tmp_path: Path, sender: list, receiver: list, n: int, size: int, kind: str,
                sender_first: bool = False) -> None:
    """Run ``sender`` and ``receiver`` (program prefixes of the hand-off's command line) at once
    on a fresh port; both must exit 0 within :data:`TIMEOUT_S`, and the receiver must report
    the transfer it was asked for. Output goes to files, not pipes, so a chatty side can never
    block on a full pipe while the other is being waited for; both are shown on failure."""
    env = child_env(gate_on(free_port()))
    sides = {"sender": sender + handoff_args("send", n, size, kind),
             "receiver": receiver + handoff_args("recv", n, size, kind)}
    order = ["sender", "receiver"] if sender_first else ["receiver", "sender"]
    procs, logs = {}, {}
    try:
        for name in order:
            out, err = tmp_path / f"{name}.out", tmp_path / f"{name}.err"
            logs[name] = (out, err)
            with open(out, "w") as o, open(err, "w") as e:
                procs[name] = subprocess.Popen(sides[name], env=env, stdout=o, stderr=e)
        deadline = time.monotonic() + TIMEOUT_S
        for p in procs.values():
            try:
                p.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
    finally:
        killed = [name for name, p in procs.items() if p.poll() is None]
        for name in killed:
            procs[name].kill()
            procs[name].wait()

    def report() -> str:
        parts = [f"killed after {TIMEOUT_S:.0f} s: {killed}"] if killed else []
        for name, p in procs.items():
            out, err = (f.read_text() for f in logs[name])
            parts.append(f"{name}: {' '.join(sides[name])} -> exit {p.returncode}\n"
                         f"--- stdout\n{out}--- stderr\n{err}")
        return "\n".join(parts)

    assert not killed and all(p.returncode == 0 for p in procs.values()), report()
    want = f"kv_handoff recv: {n} x {size} bytes ({kind} tensors)"
    got = logs["receiver"][0].read_text()
    assert want in got and "every byte checked" in got, report()


def test_python_sender_to_python_receiver_device_tensors(tmp_path):
    # The sender starts first here and the receiver first in the other cases: either may.
    run_handoff(tmp_path, PYTHON, PYTHON, n=8, size=1 << 20, kind="device", sender_first=True)


def test_c_sender_to_python_receiver_host_tensors(tmp_path, c_kv_handoff):
    run_handoff(tmp_path, [str(c_kv_handoff)], PYTHON, n=4, size=3 << 20, kind="host")


def test_python_sender_to_c_receiver_host_tensors(tmp_path, c_kv_handoff):
    run_handoff(tmp_path, PYTHON, [str(c_kv_handoff)], n=4, size=3 << 20, kind="host")


def test_kv_layer_is_the_byte_formula():
    # kv_handoff.py builds a layer from shifted 4 KiB blocks; it must equal kv_byte (the C
    # sample's formula) byte for byte, across block edges and a partial last block.
    size = 3 * 4096 + 17
    for layer in (0, 1, 7, 255, 256):
        assert kv_layer(layer, size) == bytes(kv_byte(layer, o) for o in range(size)), layer


def run_script(code: str, env_extra: dict) -> dict:
    """Run ``code`` (which prints one JSON object last) in a fresh interpreter with the
    send/recv variables exactly as ``env_extra`` sets them; its JSON."""
    res = subprocess.run([sys.executable, "-c", code], env=child_env(env_extra),
                         capture_output=True, text=True, timeout=TIMEOUT_S)
    assert res.returncode == 0, f"exit {res.returncode}\n{res.stdout}\n{res.stderr}"
    return json.loads(res.stdout.strip().splitlines()[-1])


INIT_ONLY = textwrap.dedent(
    """
    import json, opennrt_ctypes as m
    nrt = m.Nrt()
    nrt.init()
    status = nrt.raw.nrt_async_sendrecv_init(0)
    nrt.close()
    print(json.dumps({"init": m.status_name(status)}))
    """
)


@pytest.mark.parametrize(
    "gate, with_port",
    [(None, False), ("0", True), ("1", False)],
    ids=["no-variables", "gate-0", "gate-without-port"],
)
def test_init_needs_the_gate_and_a_port(gate, with_port):
    # §3.7: without NEURON_RT_ASYNC_SENDRECV_EXPERIMENTAL_ENABLED=1 and a bootstrap port at
    # nrt_init, nrt_async_sendrecv_init fails with NRT_FAILURE.
    env_extra = {GATE: gate} if gate is not None else {}
    if with_port:
        env_extra[PORT] = str(free_port())
    assert run_script(INIT_ONLY, env_extra) == {"init": "NRT_FAILURE"}


RULES = textwrap.dedent(
    """
    import ctypes, json, opennrt_ctypes as m
    SIZE = 4096
    nrt = m.Nrt()
    nrt.init()
    raw, out = nrt.raw, {}
    name = m.status_name
    out["limits"] = [nrt.sendrecv_max_communicators(), nrt.sendrecv_max_pending()]
    nrt.sendrecv_init(0)
    nrt.sendrecv_init(1)
    for call in ("connect", "accept"):
        for ip in (None, b"not-an-ip"):
            h = ctypes.c_void_p()
            fn = getattr(raw, "nrt_async_sendrecv_" + call)
            out[f"{call} {ip}"] = name(fn(ip, 1, 0, ctypes.byref(h)))

    send = nrt.sendrecv_connect("127.0.0.1", 1, 0)
    recv = nrt.sendrecv_accept("127.0.0.1", 0, 1)
    send.wait_connected()
    recv.wait_connected()
    src = nrt.tensor_allocate(0, SIZE, "src")
    dst = nrt.tensor_allocate(0, SIZE, "dst")
    data = bytes(range(256)) * (SIZE // 256)
    src.write(data)
    for call, tensor, comm, offset, length in [
        ("recv", dst, recv, 1, SIZE),           # one byte past the end
        ("recv", dst, recv, SIZE + 1, 0),       # starts past the end
        ("recv", dst, recv, 2**64 - 1, 2),      # offset + length wraps around
        ("send", src, send, 0, SIZE + 1),
    ]:
        h = ctypes.c_void_p()
        fn = getattr(raw, f"nrt_async_sendrecv_{call}_tensor")
        out[f"{call} {offset}+{length}"] = name(fn(tensor.handle, offset, length, comm.handle,
                                                   ctypes.byref(h)))

    r, s = recv.recv(dst), send.send(src)
    out["moved"] = [s.wait(), r.wait()]
    nrt.sendrecv_flush(1)
    out["arrived"] = dst.read() == data
    done, size = ctypes.c_bool(), ctypes.c_size_t()
    for label, req in (("send", s), ("recv", r)):
        out["retest " + label] = name(raw.nrt_async_sendrecv_test_request(
            req.handle, ctypes.byref(done), ctypes.byref(size)))
    src.free()
    dst.free()
    nrt.sendrecv_close(0)
    nrt.sendrecv_close(1)
    nrt.close()
    print(json.dumps(out))
    """
)


@pytest.fixture(scope="module")
def rules() -> dict:
    """What :data:`RULES` observed: one process serving both ends (core 0 sends to core 1)."""
    return run_script(RULES, gate_on(free_port()))


def test_limits_are_128(rules):
    # The header: 128 communicators per logical core, 128 pending requests per communicator.
    assert rules["limits"] == [128, 128]


def test_a_peer_address_that_is_not_an_ip_is_invalid(rules):
    for call in ("connect", "accept"):
        for ip in (None, b"not-an-ip"):
            assert rules[f"{call} {ip}"] == "NRT_INVALID", (call, ip)


def test_ranges_past_the_tensor_end_are_invalid(rules):
    for key in ("recv 1+4096", "recv 4097+0", f"recv {2**64 - 1}+2", "send 0+4097"):
        assert rules[key] == "NRT_INVALID", key


def test_a_request_reported_done_is_recycled(rules):
    # The transfer itself worked, then each request tested again is no longer a handle.
    assert rules["moved"] == [4096, 4096] and rules["arrived"]
    assert rules["retest send"] == "NRT_INVALID_HANDLE"
    assert rules["retest recv"] == "NRT_INVALID_HANDLE"

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
import hashlib
import hmac
import json
import queue
import re
import socket
import struct
import threading
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


def rank_main(rank: int, world: int, root: str, results, before_close=None) -> None:
    """One rank, in its own spawned interpreter: environment first, then nrt_init
    (``before_close``, if given, is called before ``nrt_close``)."""
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
        if before_close is not None:
            step = "before nrt_close"
            before_close()
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

    check_exact(reports, world)


def check_exact(reports: dict, world: int) -> None:
    """Every rank's results against the oracle (computed from the inputs, never the library)."""
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


# ---------------------------------------------------------------- strangers at the root port
#
# The root port may listen on a routable interface: connections that are not the job's
# processes must neither wedge the root nor join (src/runtime/multi_process/wire.rs,
# "Strangers"). The wire format is OpenNRT's private one: a 4-byte little-endian length and a
# JSON body tagged by "t"; the root greets with {"t": "Challenge", "nonce": <hex>} and a hello's
# proof is HMAC-SHA256(secret, label || len-prefixed nonce, version, host || magic || pid).

SECRET = "strangers-test-secret-0123456789"
MAGIC = 0x61796C69
#: How long a stranger waits for the root to drop it (the root's hello deadline is 5 s).
DROP_WAIT_S = 30.0


def opennrt_version() -> str:
    text = (Path(__file__).resolve().parents[2] / "Cargo.toml").read_text()
    return re.search(r'^version = "([^"]+)"', text, re.M).group(1)


def wait_for_file(path: Path, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} never appeared")
        time.sleep(0.05)


def rank_env(rank: int, secret, logdir: str) -> None:
    """A rank's environment for these tests; its stderr (the library's log) goes to a file."""
    os.environ["NEURON_RT_LOG_LEVEL"] = "WARNING"
    if secret:
        os.environ["OPENNRT_JOB_SECRET"] = secret
    else:
        os.environ.pop("OPENNRT_JOB_SECRET", None)
    fd = os.open(os.path.join(logdir, f"rank{rank}.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 2)
    os.close(fd)


def stranger_rank(rank: int, world: int, root: str, secret: str, logdir: str, results) -> None:
    """rank_main with a secret and a logged stderr; rank 1 starts when the parent creates
    ``go``, rank 0 closes when it creates ``close`` (so the root outlives every stranger)."""
    rank_env(rank, secret, logdir)
    if rank != 0:
        wait_for_file(Path(logdir) / "go")
    rank_main(rank, world, root, results,
              before_close=(lambda: wait_for_file(Path(logdir) / "close")) if rank == 0 else None)


def frame(msg: dict) -> bytes:
    body = json.dumps(msg).encode()
    return struct.pack("<I", len(body)) + body


def read_frame(s: socket.socket):
    """One message, or None when the root closed the connection first."""
    def exactly(n):
        b = b""
        while len(b) < n:
            chunk = s.recv(n - len(b))
            if not chunk:
                return None
            b += chunk
        return b
    head = exactly(4)
    body = head and exactly(struct.unpack("<I", head)[0])
    return None if body is None else json.loads(body)


def hello_proof(secret: str, nonce: bytes, version: str, pid: int, host: str) -> str:
    m = b"opennrt-bootstrap-hello-v1\0"
    for part in (nonce, version.encode(), host.encode()):
        m += struct.pack("<I", len(part)) + part
    m += struct.pack("<II", MAGIC, pid)
    return hmac.new(secret.encode(), m, hashlib.sha256).hexdigest()


def until_dropped(s: socket.socket) -> list:
    """Read until the root closes (DROP_WAIT_S at most): the messages it sent, then
    "<reset>" if it reset the connection, or "<still open>" if it never closed it."""
    s.settimeout(DROP_WAIT_S)
    got = []
    while True:
        try:
            m = read_frame(s)
        except ConnectionResetError:
            return got + ["<reset>"]
        except socket.timeout:
            return got + ["<still open>"]
        if m is None:
            return got
        got.append(m)


def stranger(port: int, kind: str):
    """Connect and misbehave as ``kind``; returns (its address as the root sees it, socket)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    addr = "%s:%d" % s.getsockname()[:2]
    if kind == "silent":
        return addr, s
    if kind == "random":
        s.sendall(os.urandom(4096))
        return addr, s
    if kind == "huge":  # the issue's: the hello magic, then a 2^60 length
        s.sendall(struct.pack("<IQ", MAGIC, 1 << 60))
        return addr, s
    challenge = read_frame(s)
    assert challenge and challenge.get("t") == "Challenge", f"{kind}: the root greeted with {challenge}"
    nonce = bytes.fromhex(challenge["nonce"])
    version = "0.0.0-stranger" if kind == "version" else opennrt_version()
    hello = {"t": "Hello", "magic": MAGIC, "version": version, "pid": 4242, "host": "stranger"}
    if kind == "wrong-secret":
        hello["proof"] = hello_proof("not-the-job-secret-0123", nonce, version, 4242, "stranger")
    s.sendall(frame(hello))
    return addr, s


@pytest.mark.parametrize("secret", [SECRET, None], ids=["secret", "no-secret"])
def test_strangers_cannot_wedge_or_join_the_job(tmp_path, secret):
    """While a 2-process job with a secret forms: a client that says nothing (held open while
    rank 1 joins), 4 KiB of random bytes, the hello magic and a 2^60 length, a hello of another
    version, a hello without the secret's proof and one with a wrong proof. The job must give
    exact results, every stranger must be dropped, and the root must log each one once at
    WARNING, naming its address. Without a secret, the same but for the hellos that would be
    a real member (another version fails such a job, by design; no proof joins it): the
    silent, random and huge ones, and a proof the root has no secret for."""
    strangers = (("random", "huge", "version", "no-secret", "wrong-secret") if secret
                 else ("random", "huge", "wrong-secret"))
    port = free_port()
    root = f"127.0.0.1:{port}"
    out = {}

    def job():
        try:
            out["reports"] = run_clean_job(2, root, port, stranger_rank, (secret, str(tmp_path)))
        except BaseException as e:  # re-raised below
            out["error"] = e

    th = threading.Thread(target=job)
    th.start()
    try:
        deadline = time.monotonic() + 60
        while True:  # the first connection that the root accepts is the silent stranger
            try:
                silent_addr, silent = stranger(port, "silent")
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        others = [(kind, *stranger(port, kind)) for kind in strangers]
        answers = {kind: until_dropped(s) for kind, _, s in others}
        # A real process joins while the silent stranger is still connected.
        (tmp_path / "go").touch()
        silent_answer = until_dropped(silent)
    finally:
        (tmp_path / "go").touch()
        (tmp_path / "close").touch()
        th.join(JOB_TIMEOUT_S + 30)
    assert not th.is_alive(), "the job did not end"
    if "error" in out:
        raise out["error"]
    check_exact(out["reports"], 2)

    assert [m.get("t") for m in silent_answer if isinstance(m, dict)] == ["Challenge"], \
        f"silent stranger got {silent_answer}"
    for kind, got in answers.items():
        assert "<still open>" not in got, f"{kind}: the root never dropped it: {got}"
    assert "<still open>" not in silent_answer, "the root never dropped the silent stranger"
    for kind in set(strangers) & {"version", "no-secret", "wrong-secret"}:
        rejects = [m for m in answers[kind] if isinstance(m, dict) and m.get("t") == "Reject"]
        assert rejects, f"{kind}: the root did not refuse it ({answers[kind]})"
    for kind in set(strangers) & {"no-secret", "wrong-secret"}:
        assert any("OPENNRT_JOB_SECRET" in m.get("reason", "") for m in answers[kind] if isinstance(m, dict)), \
            f"{kind}: the refusal does not name the variable: {answers[kind]}"

    log = (tmp_path / "rank0.log").read_text()
    print(log)  # shown with pytest -s or on failure
    for kind, addr in [("silent", silent_addr)] + [(k, a) for k, a, _ in others]:
        lines = [ln for ln in log.splitlines() if f"from {addr} " in ln]
        assert len(lines) == 1, f"{kind} stranger {addr}: {len(lines)} root log lines, expected 1:\n{log}"
        assert "WARNING" in lines[0], f"{kind}: not a warning: {lines[0]}"
    assert "silent past the hello deadline" in log
    assert "over the bound" in log
    assert ("0.0.0-stranger" in log) == bool(secret)


@pytest.mark.parametrize("root_secret,member_secret", [
    (SECRET, None), (None, SECRET), (SECRET, SECRET[::-1]),
], ids=["member-without", "root-without", "different"])
def test_a_job_secret_must_match_on_every_process(tmp_path, root_secret, member_secret):
    """Rank 1's join fails with an error naming OPENNRT_JOB_SECRET; the root logs the refusal
    once (its own first collective then times out: the world never formed)."""
    port = free_port()
    root = f"127.0.0.1:{port}"
    reports, _, hung = run_job(2, root, secret_rank, ((root_secret, member_secret), str(tmp_path)),
                               timeout=60)
    for name in shm_objects(port):
        (Path("/dev/shm") / name).unlink(missing_ok=True)
    assert not hung, f"{hung} hung"
    assert reports.get(1, ("?",))[0] == "error", f"rank 1 joined: {reports}"
    member_log = (tmp_path / "rank1.log").read_text()
    root_log = (tmp_path / "rank0.log").read_text()
    print(member_log, root_log)
    assert "OPENNRT_JOB_SECRET" in member_log, member_log
    refused = [ln for ln in root_log.splitlines() if "refused a connection from 127.0.0.1:" in ln]
    assert len(refused) == 1 and "WARNING" in refused[0], root_log


def secret_rank(rank: int, world: int, root: str, secrets, logdir: str, results) -> None:
    rank_env(rank, secrets[rank], logdir)
    os.environ.pop("NEURON_RT_NUM_CORES", None)
    os.environ["NEURON_RT_VISIBLE_CORES"] = str(rank)
    os.environ["NEURON_RT_ROOT_COMM_ID"] = root
    os.environ["NEURON_RT_EXEC_TIMEOUT"] = "3"
    try:
        nrt = Nrt()
        nrt.init()
        nrt.barrier(0, rank, world)
        nrt.close()
        results.put((rank, "ok", None))
    except BaseException as e:
        results.put((rank, "error", repr(e)))

"""The system trace through ctypes, driven the way nkipy's Spike drives it (docs/contract/abi.md
§3.9): a capture config with ``set_capture_enabled_for_nc(core, true)``, ``nrt_sys_trace_start``,
the config freed at once, a draining fetch, executions, a fetch with ``set_nc_idx(core)``,
``nrt_sys_trace_stop``; the text parsed as JSON ``{"events": [...]}``, ``nc_exec_running``
start/stop pairs matched by ``tracking_id``, their ``data.nc_timestamp_ns`` durations taken as
Spike's benchmark takes them. Then the trace after stop: a barrier and more executions on two
ranks, every core fetched, ``cc_exec_running`` pairs nested in their ``nc_exec_running``.

Also ``nrt_tensor_get_lnc_index`` (a device tensor on each core, a host tensor → -1, NULL and a
freed tensor refused, the out-parameter untouched on failure), the call Spike's async layer
makes when it wraps a tensor.

Each case runs in a fresh interpreter owning cores 0-1 (the runtime reads its environment at
``nrt_init``). No timing is asserted, only the order of the timestamps.
"""

from __future__ import annotations

import json

from opennrt_ctypes import NrtStatus
from test_models import EXEC_TIMEOUT_S, _last_json, _run_script, all_reduce_neff  # noqa: F401

#: Executions Spike's benchmark would time, after WARMUP drained ones.
RUNS, WARMUP = 5, 2

TRACE = r"""
import ctypes, json, struct, sys
import opennrt_ctypes as m, ranks, test_models as t
from ctypes import POINTER, byref, c_bool, c_char_p, c_size_t, c_uint32, c_uint64, c_void_p

nrt = m.Nrt(); nrt.init()
raw = nrt.raw
for name, res, args in [
    ("nrt_sys_trace_config_allocate", ctypes.c_int, [POINTER(c_void_p)]),
    ("nrt_sys_trace_config_set_capture_enabled_for_nc", None, [c_void_p, c_uint32, c_bool]),
    ("nrt_sys_trace_config_free", None, [c_void_p]),
    ("nrt_sys_trace_start", ctypes.c_int, [c_void_p]),
    ("nrt_sys_trace_stop", ctypes.c_int, []),
    ("nrt_sys_trace_fetch_options_allocate", ctypes.c_int, [POINTER(c_void_p)]),
    ("nrt_sys_trace_fetch_options_set_nc_idx", None, [c_void_p, c_uint64]),
    ("nrt_sys_trace_fetch_options_free", None, [c_void_p]),
    ("nrt_sys_trace_fetch_events", ctypes.c_int, [POINTER(c_void_p), POINTER(c_size_t), c_void_p]),
    ("nrt_sys_trace_buffer_free", None, [c_void_p]),
]:
    f = getattr(raw, name); f.restype = res; f.argtypes = args

def start(core):
    cfg = c_void_p()
    m.check("config_allocate", raw.nrt_sys_trace_config_allocate(byref(cfg)))
    if core is not None:
        raw.nrt_sys_trace_config_set_capture_enabled_for_nc(cfg, core, True)
    st = raw.nrt_sys_trace_start(cfg)
    raw.nrt_sys_trace_config_free(cfg)
    m.check("nrt_sys_trace_start", st)

def fetch(core):
    opts = c_void_p()
    m.check("fetch_options_allocate", raw.nrt_sys_trace_fetch_options_allocate(byref(opts)))
    if core is not None:
        raw.nrt_sys_trace_fetch_options_set_nc_idx(opts, core)
    buf, n = c_void_p(), c_size_t(0)
    st = raw.nrt_sys_trace_fetch_events(byref(buf), byref(n), opts)
    raw.nrt_sys_trace_fetch_options_free(opts)
    m.check("nrt_sys_trace_fetch_events", st)
    text = ctypes.string_at(buf.value, n.value).decode() if buf.value and n.value else ""
    nul = ctypes.string_at(buf.value + n.value, 1) if buf.value else b"?"
    raw.nrt_sys_trace_buffer_free(buf)
    assert nul == b"\0", "the buffer is NUL-terminated after written_size bytes"
    return text

neff = open(sys.argv[1], "rb").read()
runs, warmup = int(sys.argv[2]), int(sys.argv[3])
models = [nrt.load_collectives(neff, r, r, 2) for r in range(2)]
io = []
for r in range(2):
    a = nrt.tensor_allocate(r, t.COUNT * 4, f"in{r}")
    b = nrt.tensor_allocate(r, t.COUNT * 4, f"out{r}")
    io.append((a, b, nrt.tensor_set({"input0": a}), nrt.tensor_set({"output0": b})))
def execute_all(k):
    def rank(r):
        for _ in range(k):
            models[r].execute(io[r][2], io[r][3])
    ranks.on_ranks(2, rank, timeout=60)

out = {}
# 1. Spike's benchmark on core 0 (the all-reduce needs rank 1 too).
start(0)
execute_all(warmup)
fetch(0)  # drain the warm-up
execute_all(runs)
out["bench"] = fetch(0)
out["drained"] = fetch(0)
m.check("nrt_sys_trace_stop", raw.nrt_sys_trace_stop())

# 2. A default capture on every core: a barrier, one execution each, then stop and fetch.
start(None)
ranks.global_comm_init(nrt, 2)
ranks.on_ranks(2, lambda r: nrt.barrier(r, r, 2), timeout=60)
execute_all(1)
m.check("nrt_sys_trace_stop", raw.nrt_sys_trace_stop())
execute_all(1)  # after stop: not recorded
out["all"] = fetch(None)

# 3. nrt_tensor_get_lnc_index as Spike's async layer calls it.
raw.nrt_tensor_get_lnc_index.restype = ctypes.c_int
raw.nrt_tensor_get_lnc_index.argtypes = [c_void_p, POINTER(ctypes.c_int)]
idx = ctypes.c_int(77)
lnc = {}
for r in range(2):
    lnc[f"dev{r}"] = (raw.nrt_tensor_get_lnc_index(io[r][0].handle, byref(idx)), idx.value)
h = nrt.tensor_allocate(-1, 64, "host", placement=m.Placement.NRT_TENSOR_PLACEMENT_HOST)
lnc["host"] = (raw.nrt_tensor_get_lnc_index(h.handle, byref(idx)), idx.value)
idx.value = 77
lnc["null_tensor"] = (raw.nrt_tensor_get_lnc_index(None, byref(idx)), idx.value)
lnc["null_out"] = (raw.nrt_tensor_get_lnc_index(io[0][0].handle, None), None)
stale = ctypes.c_void_p(h.handle.value)
h.free()
lnc["freed"] = (raw.nrt_tensor_get_lnc_index(stale, byref(idx)), idx.value)
out["lnc"] = lnc

for a, b, si, so in io:
    si.destroy(); so.destroy(); a.free(); b.free()
for mo in models:
    mo.unload()
nrt.close()
print(json.dumps(out))
"""


def _spike_durations(events: list) -> list:
    """Spike's reading: nc_exec_running starts by tracking_id, each stop closes one (ns)."""
    starts, out = {}, []
    for e in events:
        if e.get("event_type") != "nc_exec_running":
            continue
        ts, tid = e.get("data", {}).get("nc_timestamp_ns"), e.get("tracking_id")
        if ts is None or tid is None:
            continue
        if e.get("phase") == "start":
            starts[tid] = ts
        elif e.get("phase") == "stop" and tid in starts:
            out.append(ts - starts.pop(tid))
    return out


def _pairs(events: list, kind: str) -> dict:
    """tracking_id → (start event, stop event) of one event type, checking each pair."""
    got: dict = {}
    for e in events:
        if e["event_type"] == kind:
            got.setdefault(e["tracking_id"], {})[e["phase"]] = e
    for tid, p in got.items():
        assert set(p) == {"start", "stop"}, f"{kind} {tid}: {p}"
        s, e = p["start"], p["stop"]
        assert s["nc_idx"] == e["nc_idx"]
        assert s["data"]["nc_timestamp_ns"] <= e["data"]["nc_timestamp_ns"]
        assert e["data"]["status"] == "NRT_SUCCESS"
    return {tid: (p["start"], p["stop"]) for tid, p in got.items()}


def test_spike_benchmark_reads_nc_exec_running_and_lnc_index(all_reduce_neff):  # noqa: F811
    res = _run_script(TRACE, {"NEURON_RT_VISIBLE_CORES": "0-1",
                              "NEURON_RT_EXEC_TIMEOUT": str(EXEC_TIMEOUT_S)},
                      str(all_reduce_neff), str(RUNS), str(WARMUP), timeout=120)
    got = _last_json(res)

    # 1. What Spike's benchmark sees: RUNS executions of core 0, nothing of the warm-up.
    bench = json.loads(got["bench"])["events"]
    assert all(e["nc_idx"] == 0 for e in bench), "fetched with nc_idx 0"
    execs = [e for e in bench if e["event_type"] == "nc_exec_running"]
    assert len(execs) == 2 * RUNS, f"a start and a stop per execution: {len(execs)}"
    assert len(_spike_durations(bench)) == RUNS
    assert all(d >= 0 for d in _spike_durations(bench))
    pairs = _pairs(bench, "nc_exec_running")
    assert len(pairs) == RUNS
    ordered = sorted(pairs.values(), key=lambda p: p[0]["timestamp_ns"])
    for (_, stop), (start, _) in zip(ordered, ordered[1:]):
        assert stop["timestamp_ns"] <= start["timestamp_ns"], "executions of one core do not overlap"
    ts = [e["timestamp_ns"] for e in bench]
    assert ts == sorted(ts), "oldest first"
    assert json.loads(got["drained"]) == {"events": []}, "a fetch consumes"

    # 2. Every core, a barrier and an execution each, nothing after stop.
    every = json.loads(got["all"])["events"]
    nc = _pairs(every, "nc_exec_running")
    cc = _pairs(every, "cc_exec_running")
    assert sorted(s["nc_idx"] for s, _ in nc.values()) == [0, 1], "one execution per core"
    names = sorted((s["nc_idx"], s["data"]["name"]) for s, _ in cc.values())
    assert names == [(0, "all_reduce"), (0, "barrier"), (1, "all_reduce"), (1, "barrier")], names
    for s, e in (p for p in cc.values() if p[0]["data"]["name"] == "all_reduce"):
        outer = [p for p in nc.values() if p[0]["nc_idx"] == s["nc_idx"]][0]
        assert outer[0]["timestamp_ns"] <= s["timestamp_ns"] <= e["timestamp_ns"] \
            <= outer[1]["timestamp_ns"], "a NEFF's collective runs inside its execution"
    barrier_end = max(e["timestamp_ns"] for s, e in cc.values() if s["data"]["name"] == "barrier")
    assert all(s["timestamp_ns"] >= barrier_end for s, _ in nc.values()), "the barrier came first"

    # 3. nrt_tensor_get_lnc_index.
    lnc = got["lnc"]
    ok, invalid = NrtStatus.NRT_SUCCESS, NrtStatus.NRT_INVALID
    bad_handle = NrtStatus.NRT_INVALID_HANDLE
    assert lnc["dev0"] == [ok, 0] and lnc["dev1"] == [ok, 1]
    assert lnc["host"] == [ok, -1], "a host tensor has no core"
    assert lnc["null_tensor"] == [invalid, 77], "NRT_INVALID, out-parameter untouched"
    assert lnc["null_out"][0] == invalid
    assert lnc["freed"] == [bad_handle, 77], "NRT_INVALID_HANDLE, out-parameter untouched"

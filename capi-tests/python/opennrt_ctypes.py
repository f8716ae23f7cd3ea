"""ctypes bindings for OpenNRT's ``libnrt.so`` (the collectives, models and send/recv subset of the
NRT C ABI).

Why ctypes: it is how Python clients (and the vendor's own tooling) reach ``libnrt.so``; it binds
the default ``@@`` definition of each symbol, so symbol versions do not matter here
(docs/contract/abi.md §1.1). Everything below mirrors the generated headers in ``include/nrt/``:
struct layouts (§2.4), enum values (§2.1, §2.2) and prototypes (§3.1, §3.3–§3.7).

Models (§3.4) follow the public ctypes wrapper of docs/contract/abi.md §8: ``nrt_tensor_info_t``
mirrored field for field, ``nrt_load`` / ``nrt_load_collectives``, ``nrt_get_model_tensor_info``
and ``nrt_execute`` over named tensor sets (:class:`Model`, :class:`TensorSet`).

Point-to-point send/recv (§3.7, ``nrt_async_sendrecv.h``): the ``Nrt.sendrecv_*`` methods start
and stop a core's service and open communicators (:class:`SendRecvComm`), whose sends and
receives are :class:`SendRecvRequest` objects. The runtime recycles a request once it has reported
it done, so the wrapper keeps the outcome and never tests that handle again.

The library is ``$OPENNRT_LIB_DIR/libnrt.so`` (default ``<repo>/target/release``), loaded with
``RTLD_GLOBAL`` so that the ``libncfw.so`` it ``dlopen``s later resolves against the same process
image. Every ``NRT_STATUS``-returning call is checked: a non-zero status raises :class:`NrtError`
carrying the number and its name.

Async requests (``nrta_cc_schedule``) write their own status into an ``NRT_STATUS`` the caller
owns until completion (§3.6). :class:`Pending` owns that integer and keeps it referenced from a
module-level registry until completion has been observed, so it can never be freed while the
runtime may still write it.
"""

from __future__ import annotations

import ctypes
import enum
import os
import select
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional, Sequence

REPO = Path(__file__).resolve().parents[2]

# ---------------------------------------------------------------------------------------------
# Enums (numeric values are ABI).


class NrtStatus(enum.IntEnum):
    """``NRT_STATUS`` (docs/contract/abi.md §2.1): 28 enumerators, 8 and 12 unused."""

    NRT_SUCCESS = 0
    NRT_FAILURE = 1
    NRT_INVALID = 2
    NRT_INVALID_HANDLE = 3
    NRT_RESOURCE = 4
    NRT_TIMEOUT = 5
    NRT_HW_ERROR = 6
    NRT_QUEUE_FULL = 7
    NRT_LOAD_NOT_ENOUGH_NC = 9
    NRT_UNSUPPORTED_NEFF_VERSION = 10
    NRT_FAIL_HOST_MEM_ALLOC = 11
    NRT_UNINITIALIZED = 13
    NRT_CLOSED = 14
    NRT_QUEUE_EMPTY = 15
    NRT_EXEC_UNIT_UNRECOVERABLE = 101
    NRT_EXEC_BAD_INPUT = 1002
    NRT_EXEC_COMPLETED_WITH_NUM_ERR = 1003
    NRT_EXEC_COMPLETED_WITH_ERR = 1004
    NRT_EXEC_NC_BUSY = 1005
    NRT_EXEC_OOB = 1006
    NRT_COLL_PENDING = 1100
    NRT_EXEC_HW_ERR_COLLECTIVES = 1200
    NRT_EXEC_HW_ERR_HBM_UE = 1201
    NRT_EXEC_HW_ERR_NC_UE = 1202
    NRT_EXEC_HW_ERR_DMA_ABORT = 1203
    NRT_EXEC_SW_NQ_OVERFLOW = 1204
    NRT_EXEC_HW_ERR_REPAIRABLE_HBM_UE = 1205
    NRT_NETWORK_PROXY_FAILURE = 1206


class Dtype(enum.IntEnum):
    """``nrt_dtype_t`` (docs/contract/abi.md §2.2; sparse, note the ordering)."""

    NRT_DTYPE_UNKNOWN = 0
    NRT_DTYPE_UINT64 = 1
    NRT_DTYPE_INT8 = 2
    NRT_DTYPE_UINT8 = 3
    NRT_DTYPE_INT16 = 4
    NRT_DTYPE_UINT16 = 5
    NRT_DTYPE_BFLOAT16 = 6
    NRT_DTYPE_FLOAT16 = 7
    NRT_DTYPE_INT32 = 8
    NRT_DTYPE_UINT32 = 9
    NRT_DTYPE_FLOAT32 = 10
    NRT_DTYPE_FP32R = 11
    NRT_DTYPE_INT64 = 12
    NRT_DTYPE_FP8_E3 = 13
    NRT_DTYPE_FP8_E4 = 14
    NRT_DTYPE_FP8_E5 = 15


class OpType(enum.IntEnum):
    """``nrt_op_type_t``, the reduction (docs/contract/abi.md §2.2)."""

    NRT_OP_ADD = 0
    NRT_OP_FMA = 1
    NRT_OP_MAX = 2
    NRT_OP_MIN = 3
    NRT_OP_INVALID = 15


class CcOpType(enum.IntEnum):
    """``nrt_cc_op_type_t`` (docs/contract/abi.md §2.2)."""

    NRT_CC_ALLGATHER = 0
    NRT_CC_ALLREDUCE = 1
    NRT_CC_REDUCESCATTER = 2


class XuType(enum.IntEnum):
    """``nrta_xu_t``, GEN-B numbering of runtime 2.31+ (docs/contract/abi.md §2.2, design.md §2.4)."""

    NRTA_XU_TENSOR_OP = 0
    NRTA_XU_COMPUTE = 1
    NRTA_XU_COLLECTIVES = 2
    NRTA_XU_TYPE_NUM = 3


class Placement(enum.IntEnum):
    """``nrt_tensor_placement_t`` (docs/contract/abi.md §2.2)."""

    NRT_TENSOR_PLACEMENT_DEVICE = 0
    NRT_TENSOR_PLACEMENT_HOST = 1
    NRT_TENSOR_PLACEMENT_VIRTUAL = 2


class TensorUsage(enum.IntEnum):
    """``nrt_tensor_usage_t``: ``usage`` of ``nrt_tensor_info_t`` (docs/contract/abi.md §2.2)."""

    NRT_TENSOR_USAGE_INPUT = 0
    NRT_TENSOR_USAGE_OUTPUT = 1


class Framework(enum.IntEnum):
    """``nrt_framework_type_t`` (docs/contract/abi.md §2.2)."""

    NRT_FRAMEWORK_TYPE_INVALID = 0
    NRT_FRAMEWORK_TYPE_NO_FW = 1
    NRT_FRAMEWORK_TYPE_TENSORFLOW = 2
    NRT_FRAMEWORK_TYPE_PYTORCH = 3
    NRT_FRAMEWORK_TYPE_MXNET = 4
    NRT_FRAMEWORK_TYPE_PRECHECK = 5


#: ``NRTA_SEQ_NUM_MASK``: the low 48 bits of an ``nrta_seq_t`` are the per-XU counter
#: (§2.3, §5.5).
NRTA_SEQ_NUM_MASK = (1 << 48) - 1
RT_VERSION_DETAIL_LEN = 128
GIT_HASH_LEN = 64
#: ``NRT_TENSOR_NAME_MAX``: bytes of ``nrt_tensor_info_t.name`` (NUL included).
NRT_TENSOR_NAME_MAX = 256

# ---------------------------------------------------------------------------------------------
# Structs (docs/contract/abi.md §2.4; LP64).


class NrtVersion(ctypes.Structure):
    """``nrt_version_t``, 224 bytes (§2.4)."""

    _fields_ = [
        ("rt_major", ctypes.c_uint64),
        ("rt_minor", ctypes.c_uint64),
        ("rt_patch", ctypes.c_uint64),
        ("rt_maintenance", ctypes.c_uint64),
        ("rt_detail", ctypes.c_char * RT_VERSION_DETAIL_LEN),
        ("git_hash", ctypes.c_char * GIT_HASH_LEN),
    ]


class NrtCcComm(ctypes.Structure):
    """``nrt_cc_comm_t``, 32 bytes with 4 bytes of tail padding (§2.4; meaning in §5.7)."""

    _fields_ = [
        ("replica_group", ctypes.POINTER(ctypes.c_uint32)),
        ("rank", ctypes.c_uint32),
        ("rank_n", ctypes.c_uint32),
        ("ctx_device_id", ctypes.c_uint32),
        ("ctx_device_count", ctypes.c_uint32),
        ("vnc", ctypes.c_uint32),
    ]


class NrtTensorList(ctypes.Structure):
    """``nrt_tensor_list_t``, 16 bytes (§2.4): ``nrt_tensor_t **tensors; size_t num_tensors``."""

    _fields_ = [
        ("tensors", ctypes.POINTER(ctypes.c_void_p)),
        ("num_tensors", ctypes.c_size_t),
    ]


class NrtTensorInfo(ctypes.Structure):
    """``nrt_tensor_info_t``, 296 bytes (§2.4): one model input or output."""

    _fields_ = [
        ("name", ctypes.c_char * NRT_TENSOR_NAME_MAX),
        ("usage", ctypes.c_int),  # nrt_tensor_usage_t (enums are 4 bytes)
        ("size", ctypes.c_size_t),
        ("dtype", ctypes.c_int),  # nrt_dtype_t
        ("shape", ctypes.POINTER(ctypes.c_uint32)),
        ("ndim", ctypes.c_uint32),
    ]


class NrtTensorInfoArray(ctypes.Structure):
    """``nrt_tensor_info_array_t``, 8 bytes + n x 296 (§2.4): ``uint64_t tensor_count`` then the
    flexible ``nrt_tensor_info_t tensor_array[]`` (a zero-length array here; read the entries
    with :func:`tensor_info_entries`)."""

    _fields_ = [
        ("tensor_count", ctypes.c_uint64),
        ("tensor_array", NrtTensorInfo * 0),
    ]


class NrtModelInfo(ctypes.Structure):
    """``nrt_model_info_t``, 4 bytes, append-only (§2.4)."""

    _fields_ = [("vnc", ctypes.c_uint32)]


# Opaque handles (nrt_tensor_t *, nrt_cc_context_t *, nrt_model_t *, nrt_tensor_set_t *) travel
# as void pointers.
_handle = ctypes.c_void_p
_handle_p = ctypes.POINTER(ctypes.c_void_p)
_status = ctypes.c_int  # all enums are 4 bytes (§2.4)
_u32, _i32, _u64, _size = ctypes.c_uint32, ctypes.c_int32, ctypes.c_uint64, ctypes.c_size_t

#: Every function this module calls: name → (restype, argtypes), copied from include/nrt/*.h.
PROTOTYPES = {
    "nrt_init": (_status, [_status, ctypes.c_char_p, ctypes.c_char_p]),
    "nrt_close": (None, []),
    "nrt_get_version": (_status, [ctypes.POINTER(NrtVersion), _size]),
    "nrt_get_visible_vnc_count": (_status, [ctypes.POINTER(_u32)]),
    "nrt_tensor_allocate": (_status, [_status, ctypes.c_int, _size, ctypes.c_char_p, _handle_p]),
    "nrt_tensor_free": (None, [_handle_p]),
    "nrt_tensor_read": (_status, [_handle, ctypes.c_void_p, _size, _size]),
    "nrt_tensor_write": (_status, [_handle, ctypes.c_void_p, _size, _size]),
    "nrt_tensor_get_size": (_size, [_handle]),
    "nrt_tensor_allocate_slice": (_status, [_handle, _size, _size, ctypes.c_char_p, _handle_p]),
    "nrt_cc_global_comm_init": (_status, [_u32, _u32, _u32]),
    "nrt_barrier": (_status, [_i32, _u32, _u32]),
    "nrt_all_gather": (_status, [_i32, _u32, _u32, _u32, ctypes.c_void_p, ctypes.c_void_p]),
    "nrta_cc_prepare": (
        _status,
        [
            ctypes.POINTER(NrtCcComm),
            ctypes.POINTER(NrtTensorList),
            ctypes.POINTER(NrtTensorList),
            _status,
            _status,
            _status,
            _handle_p,
        ],
    ),
    "nrta_cc_schedule": (
        _status,
        [_handle_p, ctypes.c_int, ctypes.POINTER(_status), ctypes.POINTER(_u64)],
    ),
    "nrta_is_completed": (_status, [_u64, ctypes.POINTER(ctypes.c_bool)]),
    "nrta_get_sequence": (_status, [_u32, _status, ctypes.c_int, ctypes.POINTER(_u64)]),
    "nrta_event_register_seq_id_completion": (_status, [_u64, ctypes.c_int]),
    # models (§3.4) and tensor sets (§3.3)
    "nrt_load": (_status, [ctypes.c_void_p, _size, _i32, _i32, _handle_p]),
    "nrt_load_collectives": (_status, [ctypes.c_void_p, _size, _i32, _i32, _u32, _u32, _handle_p]),
    "nrt_unload": (_status, [_handle]),
    "nrt_execute": (_status, [_handle, _handle, _handle]),
    "nrt_execute_repeat": (_status, [_handle, _handle, _handle, _i32]),
    "nrt_get_model_tensor_info": (
        _status,
        [_handle, ctypes.POINTER(ctypes.POINTER(NrtTensorInfoArray))],
    ),
    "nrt_free_model_tensor_info": (_status, [ctypes.POINTER(NrtTensorInfoArray)]),
    "nrt_get_model_vnc_count": (_status, [_handle, ctypes.POINTER(_u32)]),
    "nrt_get_model_info": (
        _status,
        [_handle, ctypes.POINTER(NrtModelInfo), _size, ctypes.POINTER(_size)],
    ),
    "nrt_allocate_tensor_set": (_status, [_handle_p]),
    "nrt_destroy_tensor_set": (None, [_handle_p]),
    "nrt_add_tensor_to_tensor_set": (_status, [_handle, ctypes.c_char_p, _handle]),
    # point-to-point send/recv (§3.7); communicators and requests are opaque handles too
    "nrt_async_sendrecv_get_max_num_communicators_per_lnc": (
        _status,
        [ctypes.POINTER(ctypes.c_int)],
    ),
    "nrt_async_sendrecv_get_max_num_pending_request": (_status, [ctypes.POINTER(ctypes.c_int)]),
    "nrt_async_sendrecv_init": (_status, [ctypes.c_int]),
    "nrt_async_sendrecv_close": (_status, [ctypes.c_int]),
    "nrt_async_sendrecv_connect": (
        _status,
        [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, _handle_p],
    ),
    "nrt_async_sendrecv_accept": (
        _status,
        [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, _handle_p],
    ),
    "nrt_async_sendrecv_test_comm": (_status, [_handle, ctypes.POINTER(ctypes.c_bool)]),
    "nrt_async_sendrecv_send_tensor": (_status, [_handle, _size, _size, _handle, _handle_p]),
    "nrt_async_sendrecv_recv_tensor": (_status, [_handle, _size, _size, _handle, _handle_p]),
    "nrt_async_sendrecv_test_request": (
        _status,
        [_handle, ctypes.POINTER(ctypes.c_bool), ctypes.POINTER(_size)],
    ),
    "nrt_async_sendrecv_flush": (_status, [ctypes.c_int]),
}
# The vendor-internal names OpenNRT exports as second names of the nrta_cc_* functions.
PROTOTYPES["nrt_cc_prepare"] = PROTOTYPES["nrta_cc_prepare"]
PROTOTYPES["nrt_cc_schedule"] = PROTOTYPES["nrta_cc_schedule"]


class NrtError(Exception):
    """A call returned a status other than ``NRT_SUCCESS``."""

    def __init__(self, call: str, status: int):
        self.call = call
        self.status = int(status)
        self.name = status_name(status)
        super().__init__(f"{call} returned {self.status} ({self.name})")


def status_name(status: int) -> str:
    """The enumerator name of a status number (the vendor does not export
    ``nrt_get_status_as_str``, §1.1, so the table lives here)."""
    try:
        return NrtStatus(status).name
    except ValueError:
        return f"<unknown NRT_STATUS {status}>"


def library_path() -> Path:
    """``$OPENNRT_LIB_DIR/libnrt.so``, default ``<repo>/target/release/libnrt.so``."""
    return Path(os.environ.get("OPENNRT_LIB_DIR", REPO / "target" / "release")) / "libnrt.so"


def check(call: str, status: int) -> None:
    """Raise :class:`NrtError` unless ``status`` is ``NRT_SUCCESS``."""
    if status != NrtStatus.NRT_SUCCESS:
        raise NrtError(call, status)


class Nrt:
    """The loaded library with every prototype of :data:`PROTOTYPES` declared.

    ``raw`` is the ``ctypes.CDLL`` for calls whose status a test wants to see unchecked.
    """

    def __init__(self, path: Optional[os.PathLike] = None):
        self.path = Path(path) if path else library_path()
        if not self.path.exists():
            raise FileNotFoundError(f"{self.path} not found: run `cargo build --release` first")
        self.raw = ctypes.CDLL(str(self.path), mode=ctypes.RTLD_GLOBAL)
        for name, (restype, argtypes) in PROTOTYPES.items():
            fn = getattr(self.raw, name)
            fn.restype = restype
            fn.argtypes = argtypes

    # -- lifecycle and version (§3.1) ----------------------------------------------------------
    def init(self, framework: int = Framework.NRT_FRAMEWORK_TYPE_NO_FW, fw: str = "",
             fal: str = "") -> None:
        check("nrt_init", self.raw.nrt_init(framework, fw.encode(), fal.encode()))

    def close(self) -> None:
        self.raw.nrt_close()

    def version(self) -> NrtVersion:
        ver = NrtVersion()
        check("nrt_get_version", self.raw.nrt_get_version(ctypes.byref(ver), ctypes.sizeof(ver)))
        return ver

    def visible_vnc_count(self) -> int:
        n = _u32()
        check("nrt_get_visible_vnc_count", self.raw.nrt_get_visible_vnc_count(ctypes.byref(n)))
        return n.value

    # -- tensors (§3.3) ------------------------------------------------------------------------
    def tensor_allocate(self, vnc: int, size: int, name: str = "", placement=None) -> "Tensor":
        placement = Placement.NRT_TENSOR_PLACEMENT_DEVICE if placement is None else placement
        h = _handle()
        check(
            "nrt_tensor_allocate",
            self.raw.nrt_tensor_allocate(placement, vnc, size, name.encode(), ctypes.byref(h)),
        )
        if not h.value:
            raise AssertionError("nrt_tensor_allocate returned NRT_SUCCESS with a NULL tensor")
        return Tensor(self, h, size)

    # -- host-driven collectives (§3.5) --------------------------------------------------------
    def cc_global_comm_init(self, vnc: int, g_device_id: int, g_device_count: int) -> None:
        check(
            "nrt_cc_global_comm_init",
            self.raw.nrt_cc_global_comm_init(vnc, g_device_id, g_device_count),
        )

    def barrier(self, vnc: int, g_device_id: int, g_device_count: int) -> None:
        check("nrt_barrier", self.raw.nrt_barrier(vnc, g_device_id, g_device_count))

    def all_gather(self, vnc: int, g_device_id: int, g_device_count: int, data: bytes) -> bytes:
        """Host-memory all-gather: returns the ``g_device_count * len(data)`` gathered bytes."""
        inp = ctypes.create_string_buffer(bytes(data), len(data))
        out = ctypes.create_string_buffer(g_device_count * len(data))
        check(
            "nrt_all_gather",
            self.raw.nrt_all_gather(vnc, g_device_id, g_device_count, len(data), inp, out),
        )
        return out.raw

    # -- explicit async (§3.6) -----------------------------------------------------------------
    def cc_prepare(
        self,
        comm: "Comm",
        inputs: Sequence["Tensor"],
        outputs: Sequence["Tensor"],
        dtype: int,
        op: int,
        cc_op: int,
    ) -> "CcContext":
        """``nrta_cc_prepare``; the tensors are kept referenced by the returned context."""
        in_list, in_keep = tensor_list(inputs)
        out_list, out_keep = tensor_list(outputs)
        ctx = _handle()
        check(
            "nrta_cc_prepare",
            self.raw.nrta_cc_prepare(
                ctypes.byref(comm.c), ctypes.byref(in_list), ctypes.byref(out_list),
                dtype, op, cc_op, ctypes.byref(ctx),
            ),
        )
        if not ctx.value:
            raise AssertionError("nrta_cc_prepare returned NRT_SUCCESS with a NULL context")
        return CcContext(ctx, (in_keep, out_keep, list(inputs), list(outputs)))

    def cc_schedule(self, ctx: "CcContext", queue: int = 0) -> "Pending":
        """``nrta_cc_schedule``: on success the runtime owns the context and sets it to NULL."""
        pending = Pending(self, keep=ctx.keep)
        status = self.raw.nrta_cc_schedule(
            ctypes.byref(ctx.handle), queue, ctypes.byref(pending.exec_ret),
            ctypes.byref(pending.seq_c),
        )
        check("nrta_cc_schedule", status)
        pending.seq = pending.seq_c.value
        _register_inflight(pending)
        return pending

    def is_completed(self, seq: int) -> bool:
        done = ctypes.c_bool(False)
        check("nrta_is_completed", self.raw.nrta_is_completed(seq, ctypes.byref(done)))
        return bool(done.value)

    def get_sequence(self, lnc: int, xu: int, queue: int) -> int:
        seq = _u64()
        check("nrta_get_sequence", self.raw.nrta_get_sequence(lnc, xu, queue, ctypes.byref(seq)))
        return seq.value

    def register_seq_fd(self, seq: int, fd: int) -> None:
        check(
            "nrta_event_register_seq_id_completion",
            self.raw.nrta_event_register_seq_id_completion(seq, fd),
        )

    # -- models (§3.4) -------------------------------------------------------------------------
    def load(self, neff: bytes, vnc: int = -1, vnc_count: int = 1) -> "Model":
        """``nrt_load(neff, len, vnc, vnc_count, &model)`` (-1: the first free core)."""
        buf = _bytes_arg(neff)
        h = _handle()
        check("nrt_load", self.raw.nrt_load(buf, len(neff), vnc, vnc_count, ctypes.byref(h)))
        if not h.value:
            raise AssertionError("nrt_load returned NRT_SUCCESS with a NULL model")
        return Model(self, h)

    def load_collectives(self, neff: bytes, vnc: int, rank: int, world: int,
                         vnc_count: int = 1) -> "Model":
        """``nrt_load_collectives(neff, len, vnc, vnc_count, rank, world, &model)``."""
        buf = _bytes_arg(neff)
        h = _handle()
        check(
            "nrt_load_collectives",
            self.raw.nrt_load_collectives(buf, len(neff), vnc, vnc_count, rank, world,
                                          ctypes.byref(h)),
        )
        if not h.value:
            raise AssertionError("nrt_load_collectives returned NRT_SUCCESS with a NULL model")
        return Model(self, h)

    def tensor_set(self, tensors: "dict[str, Tensor]") -> "TensorSet":
        """A tensor set holding ``tensors`` by name (``nrt_allocate_tensor_set`` +
        ``nrt_add_tensor_to_tensor_set``)."""
        h = _handle()
        check("nrt_allocate_tensor_set", self.raw.nrt_allocate_tensor_set(ctypes.byref(h)))
        s = TensorSet(self, h, dict(tensors))
        try:
            for name, t in tensors.items():
                check(
                    "nrt_add_tensor_to_tensor_set",
                    self.raw.nrt_add_tensor_to_tensor_set(h, name.encode(), t.handle),
                )
        except BaseException:
            s.destroy()
            raise
        return s

    # -- point-to-point send/recv (§3.7) -------------------------------------------------------
    def sendrecv_max_communicators(self) -> int:
        """``nrt_async_sendrecv_get_max_num_communicators_per_lnc`` (legal in any state)."""
        n = ctypes.c_int()
        check(
            "nrt_async_sendrecv_get_max_num_communicators_per_lnc",
            self.raw.nrt_async_sendrecv_get_max_num_communicators_per_lnc(ctypes.byref(n)),
        )
        return n.value

    def sendrecv_max_pending(self) -> int:
        """``nrt_async_sendrecv_get_max_num_pending_request``: how many requests of one
        communicator may be posted and not yet reported done (legal in any state)."""
        n = ctypes.c_int()
        check(
            "nrt_async_sendrecv_get_max_num_pending_request",
            self.raw.nrt_async_sendrecv_get_max_num_pending_request(ctypes.byref(n)),
        )
        return n.value

    def sendrecv_init(self, lnc: int) -> None:
        """Start the service of absolute host core ``lnc``. Its gate
        (``NEURON_RT_ASYNC_SENDRECV_EXPERIMENTAL_ENABLED=1``) and
        ``NEURON_RT_ASYNC_SENDRECV_BOOTSTRAP_PORT`` are read by ``nrt_init``, so they must be in
        the environment before :meth:`init`."""
        check("nrt_async_sendrecv_init", self.raw.nrt_async_sendrecv_init(lnc))

    def sendrecv_close(self, lnc: int) -> None:
        """Stop the service of ``lnc`` (due before :meth:`close`); its communicators and
        requests are gone afterwards. Fails while a request is in flight."""
        check("nrt_async_sendrecv_close", self.raw.nrt_async_sendrecv_close(lnc))

    def sendrecv_connect(self, peer_ip: str, peer_lnc: int, lnc: int) -> "SendRecvComm":
        """Start connecting (sender side) core ``lnc`` to ``peer_lnc`` at ``peer_ip``. Returns at
        once; :meth:`SendRecvComm.wait_connected` waits for the connection."""
        return self._sendrecv_open("nrt_async_sendrecv_connect", peer_ip, peer_lnc, lnc)

    def sendrecv_accept(self, peer_ip: str, peer_lnc: int, lnc: int) -> "SendRecvComm":
        """Start accepting (receiver side) on core ``lnc`` the connection of ``peer_lnc`` at
        ``peer_ip``; as :meth:`sendrecv_connect`."""
        return self._sendrecv_open("nrt_async_sendrecv_accept", peer_ip, peer_lnc, lnc)

    def _sendrecv_open(self, call: str, peer_ip: str, peer_lnc: int,
                       lnc: int) -> "SendRecvComm":
        h = _handle()
        check(call, getattr(self.raw, call)(peer_ip.encode(), peer_lnc, lnc, ctypes.byref(h)))
        if not h.value:
            raise AssertionError(f"{call} returned NRT_SUCCESS with a NULL communicator")
        return SendRecvComm(self, h)

    def sendrecv_flush(self, lnc: int) -> None:
        """Make the completed receives of ``lnc`` visible in memory: the receiver's step between
        the last completion and reading the tensors."""
        check("nrt_async_sendrecv_flush", self.raw.nrt_async_sendrecv_flush(lnc))


class Tensor:
    """An ``nrt_tensor_t *`` with its size; ``free`` is idempotent (the C side NULLs the handle)."""

    def __init__(self, nrt: Nrt, handle: ctypes.c_void_p, size: int):
        self.nrt, self.handle, self.size = nrt, handle, size

    def write(self, data: bytes, offset: int = 0) -> None:
        buf = ctypes.create_string_buffer(bytes(data), len(data))
        status = self.nrt.raw.nrt_tensor_write(self.handle, buf, offset, len(data))
        check("nrt_tensor_write", status)

    def read(self, offset: int = 0, size: Optional[int] = None) -> bytes:
        size = self.size - offset if size is None else size
        buf = ctypes.create_string_buffer(size)
        check("nrt_tensor_read", self.nrt.raw.nrt_tensor_read(self.handle, buf, offset, size))
        return buf.raw

    def slice(self, offset: int, size: int, name: str = "") -> "Tensor":
        """``nrt_tensor_allocate_slice``: a tensor aliasing ``size`` bytes at ``offset`` (§3.3)."""
        h = _handle()
        check(
            "nrt_tensor_allocate_slice",
            self.nrt.raw.nrt_tensor_allocate_slice(
                self.handle, offset, size, name.encode(), ctypes.byref(h)
            ),
        )
        return Tensor(self.nrt, h, size)

    def free(self) -> None:
        if self.handle.value:
            self.nrt.raw.nrt_tensor_free(ctypes.byref(self.handle))
            if self.handle.value:
                raise AssertionError("nrt_tensor_free did not set *tensor to NULL (§3.3)")


def _bytes_arg(data: bytes):
    """A C copy of ``data`` to pass as ``const void *`` (kept alive by the caller's frame)."""
    return (ctypes.c_char * max(1, len(data))).from_buffer_copy(bytes(data) or b"\0")


@dataclass(frozen=True)
class TensorInfo:
    """One entry of ``nrt_get_model_tensor_info``, copied out of the C array."""

    name: str
    usage: int
    size: int
    dtype: int
    shape: tuple


def tensor_info_entries(arr: "ctypes._Pointer") -> list:
    """The ``tensor_count`` entries of an ``nrt_tensor_info_array_t *`` as :class:`TensorInfo`
    (the flexible array is read past the zero-length ctypes field)."""
    n = arr.contents.tensor_count
    base = ctypes.addressof(arr.contents) + NrtTensorInfoArray.tensor_array.offset
    entries = ctypes.cast(base, ctypes.POINTER(NrtTensorInfo * n)).contents if n else []
    out = []
    for e in entries:
        shape = tuple(e.shape[i] for i in range(e.ndim)) if e.shape else ()
        out.append(TensorInfo(e.name.decode(), e.usage, e.size, e.dtype, shape))
    return out


class Model:
    """An ``nrt_model_t *``; ``unload`` is idempotent on this side (the handle is forgotten)."""

    def __init__(self, nrt: Nrt, handle: ctypes.c_void_p):
        self.nrt, self.handle = nrt, handle

    def tensor_info(self) -> list:
        """``nrt_get_model_tensor_info``, copied out, then ``nrt_free_model_tensor_info``."""
        arr = ctypes.POINTER(NrtTensorInfoArray)()
        check(
            "nrt_get_model_tensor_info",
            self.nrt.raw.nrt_get_model_tensor_info(self.handle, ctypes.byref(arr)),
        )
        try:
            return tensor_info_entries(arr)
        finally:
            check("nrt_free_model_tensor_info", self.nrt.raw.nrt_free_model_tensor_info(arr))

    def vnc_count(self) -> int:
        n = _u32()
        check("nrt_get_model_vnc_count",
              self.nrt.raw.nrt_get_model_vnc_count(self.handle, ctypes.byref(n)))
        return n.value

    def info(self) -> NrtModelInfo:
        info, size = NrtModelInfo(), _size()
        check(
            "nrt_get_model_info",
            self.nrt.raw.nrt_get_model_info(self.handle, ctypes.byref(info),
                                             ctypes.sizeof(info), ctypes.byref(size)),
        )
        return info

    def execute(self, inputs: "TensorSet", outputs: "TensorSet") -> None:
        check("nrt_execute", self.nrt.raw.nrt_execute(self.handle, inputs.handle, outputs.handle))

    def execute_status(self, inputs: "TensorSet", outputs: "TensorSet") -> int:
        """``nrt_execute`` with its status returned unchecked."""
        return self.nrt.raw.nrt_execute(self.handle, inputs.handle, outputs.handle)

    def unload(self) -> None:
        if self.handle.value:
            status = self.nrt.raw.nrt_unload(self.handle)
            self.handle = _handle()
            check("nrt_unload", status)


class TensorSet:
    """An ``nrt_tensor_set_t *`` and the tensors it names (kept referenced here; the set does
    not own them, §3.3). ``destroy`` is idempotent (the C side NULLs the handle)."""

    def __init__(self, nrt: Nrt, handle: ctypes.c_void_p, tensors: dict):
        self.nrt, self.handle, self.tensors = nrt, handle, tensors

    def destroy(self) -> None:
        if self.handle.value:
            self.nrt.raw.nrt_destroy_tensor_set(ctypes.byref(self.handle))
            if self.handle.value:
                raise AssertionError("nrt_destroy_tensor_set did not set *tensor_set to NULL")


def tensor_list(tensors: Sequence[Tensor]):
    """An ``nrt_tensor_list_t`` over ``tensors`` and the array it points into (keep both alive)."""
    arr = (ctypes.c_void_p * max(1, len(tensors)))(*[t.handle.value for t in tensors])
    lst = NrtTensorList(ctypes.cast(arr, ctypes.POINTER(ctypes.c_void_p)), len(tensors))
    return lst, arr


class Comm:
    """An ``nrt_cc_comm_t`` and the ``uint32_t`` replica-group array it points to (§5.7)."""

    def __init__(self, replica_group: Iterable[int], rank: int, ctx_device_id: int,
                 ctx_device_count: int, vnc: int):
        group = list(replica_group)
        self.group = (ctypes.c_uint32 * max(1, len(group)))(*group)
        self.c = NrtCcComm(
            ctypes.cast(self.group, ctypes.POINTER(ctypes.c_uint32)),
            rank, len(group), ctx_device_id, ctx_device_count, vnc,
        )


@dataclass
class CcContext:
    """A prepared collective. ``handle`` is the ``nrt_cc_context_t *`` that ``nrta_cc_schedule``
    reads through ``&handle`` and sets to NULL once it owns the context."""

    handle: ctypes.c_void_p
    keep: tuple


# Pending requests whose exec_ret the runtime may still write: referenced here until completion
# has been observed (docs/contract/abi.md §3.6: "exec_ret must stay valid until then").
_INFLIGHT: set = set()
_INFLIGHT_LOCK = threading.Lock()


def _register_inflight(p: "Pending") -> None:
    with _INFLIGHT_LOCK:
        _INFLIGHT.add(p)


def _release_inflight(p: "Pending") -> None:
    with _INFLIGHT_LOCK:
        _INFLIGHT.discard(p)


class Pending:
    """A scheduled request: its sequence id and the ``NRT_STATUS`` the runtime writes at
    completion. Wait by polling ``nrta_is_completed`` or by an eventfd."""

    def __init__(self, nrt: Nrt, keep=None):
        self.nrt = nrt
        self.exec_ret = _status(-1)  # -1 is no NRT_STATUS: proves the runtime wrote it
        self.seq_c = _u64(0)
        self.seq = 0
        self.keep = keep

    def completed(self) -> bool:
        return self.nrt.is_completed(self.seq)

    def _finish(self, raise_on_error: bool) -> int:
        _release_inflight(self)
        status = self.exec_ret.value
        if raise_on_error:
            check(f"collective (exec_ret of seq {self.seq:#x})", status)
        return status

    def wait_poll(self, timeout: float = 60.0, raise_on_error: bool = True) -> int:
        """Poll ``nrta_is_completed`` (with a short sleep) until done; return ``exec_ret``."""
        deadline = time.monotonic() + timeout
        while not self.completed():
            if time.monotonic() > deadline:
                raise TimeoutError(f"seq {self.seq:#x} not completed after {timeout} s")
            time.sleep(0.0005)
        return self._finish(raise_on_error)

    def wait_eventfd(self, timeout: float = 60.0, raise_on_error: bool = True,
                     use_libc: bool = False) -> int:
        """Register an eventfd for the sequence (§5.6), ``poll`` it, deregister, close it.
        ``use_libc`` forces the libc ``eventfd`` path that Python < 3.10 takes."""
        fd = libc_eventfd(0, _EFD_NONBLOCK | _EFD_CLOEXEC) if use_libc else eventfd_nonblocking()
        try:
            self.nrt.register_seq_fd(self.seq, fd)
            try:
                p = select.poll()
                p.register(fd, select.POLLIN)
                if not p.poll(int(timeout * 1000)):
                    raise TimeoutError(f"eventfd of seq {self.seq:#x} silent after {timeout} s")
                count = int.from_bytes(os.read(fd, 8), sys.byteorder)
                if count < 1:
                    raise AssertionError(f"eventfd read {count}, expected >= 1")
            finally:
                self.nrt.register_seq_fd(self.seq, -1)  # deregister before close (§5.6)
        finally:
            os.close(fd)
        if not self.completed():
            raise AssertionError(f"eventfd fired but nrta_is_completed({self.seq:#x}) is false")
        return self._finish(raise_on_error)


_EFD_NONBLOCK = os.O_NONBLOCK  # Linux: EFD_NONBLOCK == O_NONBLOCK, EFD_CLOEXEC == O_CLOEXEC
_EFD_CLOEXEC = getattr(os, "O_CLOEXEC", 0o2000000)


def eventfd_nonblocking() -> int:
    """A non-blocking eventfd: ``os.eventfd`` on Python >= 3.10, else libc's ``eventfd``."""
    if hasattr(os, "eventfd"):
        return os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
    return libc_eventfd(0, _EFD_NONBLOCK | _EFD_CLOEXEC)


def libc_eventfd(initval: int, flags: int) -> int:
    """``eventfd(2)`` through libc (the path for Python < 3.10)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.eventfd.argtypes = [ctypes.c_uint, ctypes.c_int]
    libc.eventfd.restype = ctypes.c_int
    fd = libc.eventfd(initval, flags)
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"eventfd: {os.strerror(err)}")
    return fd


def seq_counter(seq: int) -> int:
    """``NRTA_SEQ_GET_SEQ_NUM``: the per-XU counter (§2.3)."""
    return seq & NRTA_SEQ_NUM_MASK


def seq_xu_id(seq: int) -> int:
    """``NRTA_SEQ_GET_XU_ID``: the 16-bit XU id (§2.3)."""
    return seq >> 48


# ---------------------------------------------------------------------------------------------
# Point-to-point send/recv objects (docs/contract/abi.md §3.7).


class SendRecvComm:
    """An ``nrt_async_sendrecv_comm_t *`` from :meth:`Nrt.sendrecv_connect` (it sends) or
    :meth:`Nrt.sendrecv_accept` (it receives). There is no call that ends one: it lives until
    ``nrt_async_sendrecv_close`` of its core."""

    def __init__(self, nrt: Nrt, handle: ctypes.c_void_p):
        self.nrt, self.handle = nrt, handle

    def connected(self) -> bool:
        """``nrt_async_sendrecv_test_comm``: a connection that failed or timed out raises."""
        done = ctypes.c_bool(False)
        check(
            "nrt_async_sendrecv_test_comm",
            self.nrt.raw.nrt_async_sendrecv_test_comm(self.handle, ctypes.byref(done)),
        )
        return bool(done.value)

    def wait_connected(self, timeout: float = 60.0) -> None:
        """Poll :meth:`connected` (with a short sleep) until true. The runtime itself reports
        ``NRT_TIMEOUT`` after ``OPENNRT_SENDRECV_CONNECT_TIMEOUT`` (30 s); ``timeout`` only
        bounds a runtime that never answers."""
        deadline = time.monotonic() + timeout
        while not self.connected():
            if time.monotonic() > deadline:
                raise TimeoutError(f"communicator not connected after {timeout} s")
            time.sleep(0.0005)

    def send(self, tensor: Tensor, offset: int = 0,
             length: Optional[int] = None) -> "SendRecvRequest":
        """Post a send of ``length`` bytes (default: to the end) of ``tensor`` at ``offset``."""
        return self._post("nrt_async_sendrecv_send_tensor", tensor, offset, length)

    def recv(self, tensor: Tensor, offset: int = 0,
             length: Optional[int] = None) -> "SendRecvRequest":
        """Post a receive of up to ``length`` bytes (default: to the end) into ``tensor`` at
        ``offset``."""
        return self._post("nrt_async_sendrecv_recv_tensor", tensor, offset, length)

    def _post(self, call: str, tensor: Tensor, offset: int,
              length: Optional[int]) -> "SendRecvRequest":
        length = tensor.size - offset if length is None else length
        h = _handle()
        check(
            call,
            getattr(self.nrt.raw, call)(tensor.handle, offset, length, self.handle,
                                        ctypes.byref(h)),
        )
        if not h.value:
            raise AssertionError(f"{call} returned NRT_SUCCESS with a NULL request")
        return SendRecvRequest(self.nrt, h)


class SendRecvRequest:
    """A posted send or receive (``nrt_async_sendrecv_request_t *``).

    The runtime recycles a request as soon as ``test_request`` has reported it done (testing it
    again is ``NRT_INVALID_HANDLE``), so the byte count is kept here and later :meth:`test`
    calls return it without calling the library. ``handle`` keeps the old pointer, so a test
    can check that rule through ``raw``.
    """

    def __init__(self, nrt: Nrt, handle: ctypes.c_void_p):
        self.nrt, self.handle = nrt, handle
        self.size: Optional[int] = None

    def test(self) -> Optional[int]:
        """``nrt_async_sendrecv_test_request``: ``None`` while the request runs, then the bytes
        it moved. A failed request raises :class:`NrtError` (with the same status on every
        later test)."""
        if self.size is None:
            done, size = ctypes.c_bool(False), _size(0)
            check(
                "nrt_async_sendrecv_test_request",
                self.nrt.raw.nrt_async_sendrecv_test_request(self.handle, ctypes.byref(done),
                                                             ctypes.byref(size)),
            )
            if done.value:
                self.size = size.value
        return self.size

    def wait(self, timeout: float = 60.0) -> int:
        """Poll :meth:`test` (with a short sleep) until done; the bytes moved."""
        deadline = time.monotonic() + timeout
        while self.test() is None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"send/recv request not done after {timeout} s")
            time.sleep(0.0005)
        return self.size

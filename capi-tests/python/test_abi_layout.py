"""The ctypes mirrors against the spec and the generated headers (no library calls).

Sizes and offsets are the spec's numbers (docs/contract/abi.md §2.4); enum values are compared with
the headers in include/nrt/ (which the Rust tests generate from the same ABI twins), both ways,
so an enumerator missing here or there fails; prototypes are compared by name and arity.
"""

from __future__ import annotations

import ctypes
import re

import pytest

import opennrt_ctypes as m

INCLUDE = m.REPO / "include" / "nrt"


def header_text() -> str:
    return "\n".join(p.read_text() for p in sorted(INCLUDE.glob("*.h")))


def header_enum(c_name: str) -> dict:
    """Enumerators of ``typedef enum <c_name> {...}`` in the headers."""
    match = re.search(r"typedef enum " + re.escape(c_name) + r" \{(.*?)\}", header_text(), re.S)
    assert match, f"enum {c_name} not found in include/nrt/*.h"
    body = re.sub(r"/\*.*?\*/", "", match.group(1), flags=re.S)
    return {name: int(value, 0) for name, value in re.findall(r"(\w+) = (-?\w+),", body)}


@pytest.mark.parametrize(
    "struct, size, offsets",
    [
        # §2.4: nrt_version_t 224 = four uint64, rt_detail[128] at 32, git_hash[64] at 160.
        (m.NrtVersion, 224, {"rt_major": 0, "rt_minor": 8, "rt_patch": 16,
                             "rt_maintenance": 24, "rt_detail": 32, "git_hash": 160}),
        # §2.4: nrt_cc_comm_t 32 (the last 4 bytes are tail padding).
        (m.NrtCcComm, 32, {"replica_group": 0, "rank": 8, "rank_n": 12, "ctx_device_id": 16,
                           "ctx_device_count": 20, "vnc": 24}),
        # §2.4: nrt_tensor_list_t 16.
        (m.NrtTensorList, 16, {"tensors": 0, "num_tensors": 8}),
    ],
)
def test_struct_layout_matches_spec_2_4(struct, size, offsets):
    assert ctypes.sizeof(struct) == size, f"{struct.__name__}: docs/contract/abi.md §2.4 says {size}"
    assert ctypes.alignment(struct) == 8, "§2.4: alignment 8 for these structs"
    got = {name: getattr(struct, name).offset for name, _ in struct._fields_}
    assert got == offsets


@pytest.mark.parametrize(
    "enum_cls, c_name",
    [
        (m.NrtStatus, "nrt_status"),
        (m.Dtype, "nrt_dtype_t"),
        (m.OpType, "nrt_op_type_t"),
        (m.CcOpType, "nrt_cc_op_type_t"),
        (m.XuType, "nrta_xu_t"),
        (m.Placement, "nrt_tensor_placement_t"),
        (m.Framework, "nrt_framework_type_t"),
    ],
)
def test_enum_values_match_headers(enum_cls, c_name):
    ours = {e.name: int(e) for e in enum_cls}
    assert ours == header_enum(c_name)


def test_spec_anchor_values():
    # Values the spec states outright (§2.1, §2.2), independent of the headers.
    assert len(m.NrtStatus) == 28 and 8 not in set(m.NrtStatus) and 12 not in set(m.NrtStatus)
    d = m.Dtype
    assert (d.NRT_DTYPE_BFLOAT16, d.NRT_DTYPE_FLOAT32, d.NRT_DTYPE_FP8_E4) == (6, 10, 14)
    assert (m.XuType.NRTA_XU_TENSOR_OP, m.XuType.NRTA_XU_COLLECTIVES) == (0, 2)  # GEN-B
    assert m.NRTA_SEQ_NUM_MASK == (1 << 48) - 1


def test_prototypes_match_headers():
    text = re.sub(r"/\*.*?\*/", "", header_text(), flags=re.S)
    for name, (restype, argtypes) in m.PROTOTYPES.items():
        # A second name (`#define nrt_cc_prepare nrta_cc_prepare`) has its function's prototype.
        alias = re.search(r"#define\s+" + name + r"\s+(\w+)", text)
        declared = alias.group(1) if alias else name
        decl = re.search(r"(\w[\w\s\*]*?)\b" + declared + r"\s*\(([^;]*?)\);", text)
        assert decl, f"{name} is not declared in include/nrt/*.h"
        params = [p for p in decl.group(2).split(",") if p.strip() and p.strip() != "void"]
        assert len(params) == len(argtypes), f"{name}: header has {len(params)} parameters"
        returns_void = decl.group(1).split()[-1] == "void"
        assert returns_void == (restype is None), f"{name}: return type"


def test_library_binds_every_prototype():
    lib = ctypes.CDLL(str(m.library_path()), mode=ctypes.RTLD_GLOBAL)
    for name in m.PROTOTYPES:
        assert hasattr(lib, name), f"{m.library_path()} does not export {name}"

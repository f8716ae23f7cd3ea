"""The test-side encoders and oracle (numerics.py) against known answers.

The FP8 E4M3 codes below were copied once from the ml_dtypes reference table the project keeps
(testdata/fp8/decode_e4m3.tsv, IEEE-like E4M3 with Inf: design.md §2.9); the tests never read
that file at run time.
"""

from __future__ import annotations

import math

import pytest

from numerics import (CODECS, bf16_decode, bf16_encode, fp8_e4m3_decode, fp8_e4m3_encode,
                      io_counts, oracle)
from opennrt_ctypes import CcOpType, OpType

#: Integer → E4M3 code, every integer in [-16, 16] (from decode_e4m3.tsv).
FP8_E4M3_INTS = {
    -16: 0xD8, -15: 0xD7, -14: 0xD6, -13: 0xD5, -12: 0xD4, -11: 0xD3, -10: 0xD2, -9: 0xD1,
    -8: 0xD0, -7: 0xCE, -6: 0xCC, -5: 0xCA, -4: 0xC8, -3: 0xC4, -2: 0xC0, -1: 0xB8, 0: 0x00,
    1: 0x38, 2: 0x40, 3: 0x44, 4: 0x48, 5: 0x4A, 6: 0x4C, 7: 0x4E, 8: 0x50, 9: 0x51, 10: 0x52,
    11: 0x53, 12: 0x54, 13: 0x55, 14: 0x56, 15: 0x57, 16: 0x58,
}
#: Other rows of the same table: smallest subnormal, smallest normal, 0.5, largest finite,
#: -0, +Inf, a NaN.
FP8_E4M3_SPECIAL = {0x01: 2.0**-9, 0x08: 2.0**-6, 0x30: 0.5, 0x77: 240.0, 0x80: -0.0,
                    0x78: math.inf}


def test_fp8_e4m3_integers():
    for value, code in FP8_E4M3_INTS.items():
        assert fp8_e4m3_encode(float(value)) == code, value
        assert fp8_e4m3_decode(code) == value, hex(code)


def test_fp8_e4m3_special_rows():
    for code, value in FP8_E4M3_SPECIAL.items():
        got = fp8_e4m3_decode(code)
        assert got == value and math.copysign(1, got) == math.copysign(1, value), hex(code)
    assert math.isnan(fp8_e4m3_decode(0x79)) and math.isnan(fp8_e4m3_decode(0xFF))


def test_fp8_e4m3_round_trip_every_finite_code():
    for code in range(256):
        v = fp8_e4m3_decode(code)
        if math.isfinite(v):
            assert fp8_e4m3_encode(v) == code, hex(code)


@pytest.mark.parametrize("bad", [17.0, 0.3, 256.0, 2.0**-10])
def test_fp8_e4m3_rejects_inexact(bad):
    with pytest.raises(ValueError):
        fp8_e4m3_encode(bad)


def test_bf16_known_answers():
    for value, code in {1.0: 0x3F80, -2.0: 0xC000, 3.0: 0x4040, 0.5: 0x3F00, 240.0: 0x4370,
                        -0.0: 0x8000}.items():
        assert bf16_encode(value) == code and bf16_decode(code) == value
    with pytest.raises(ValueError):
        bf16_encode(257.0)  # needs 9 significant bits


def test_amplitudes_keep_eight_rank_sums_exact():
    for codec in CODECS.values():
        top = 8 * codec.amplitude
        for v in range(-top, top + 1):
            assert codec.unpack(codec.pack([float(v)])) == [float(v)]


def test_oracle_small_cases():
    ins = [[1.0, -2.0, 3.0, 0.0], [4.0, 5.0, -6.0, 1.0]]
    ar = oracle(CcOpType.NRT_CC_ALLREDUCE, OpType.NRT_OP_ADD, ins)
    assert ar == [[5.0, 3.0, -3.0, 1.0]] * 2
    assert oracle(CcOpType.NRT_CC_ALLREDUCE, OpType.NRT_OP_MAX, ins)[1] == [4.0, 5.0, 3.0, 1.0]
    assert oracle(CcOpType.NRT_CC_REDUCESCATTER, OpType.NRT_OP_MIN, ins) == [[1.0, -2.0],
                                                                            [-6.0, 0.0]]
    assert oracle(CcOpType.NRT_CC_ALLGATHER, OpType.NRT_OP_ADD, ins)[0] == ins[0] + ins[1]
    assert io_counts(CcOpType.NRT_CC_ALLGATHER, 5, 3) == (5, 15)
    assert io_counts(CcOpType.NRT_CC_REDUCESCATTER, 5, 3) == (15, 5)

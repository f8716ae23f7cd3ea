"""Element encodings and the pure-Python oracle of the collective tests.

The inputs are integer-valued and small enough that every partial sum is exactly representable
in the I/O type, so the result does not depend on the reduction order or on the per-hop rounding
of the CCE (design.md §2.9: accumulate in FP32, round once per hop to the I/O type): every dtype
must match the oracle bit for bit (design.md §4, "verifiable data").

Encoders are written by hand from the formats' definitions (no numpy in the test environment):
* FP32: ``struct`` ``<f``.
* BF16: the top 16 bits of the FP32 pattern; only exactly representable values are accepted,
  so truncation and round-to-nearest-even agree.
* FP8 E4M3 (``NRT_DTYPE_FP8_E4``): the IEEE-like variant with Inf (design.md §2.9): sign,
  4 exponent bits with bias 7, 3 mantissa bits; exponent 15 is Inf/NaN, so the largest finite
  value is 240 (code 0x77). Again only exactly representable values are accepted.
"""

from __future__ import annotations

import math
import struct
from fractions import Fraction
from typing import Callable, Dict, List, Sequence

from opennrt_ctypes import CcOpType, Dtype, OpType


def f32_bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def bf16_encode(x: float) -> int:
    bits = f32_bits(x)
    if bits & 0xFFFF:
        raise ValueError(f"{x} is not exactly representable in bf16")
    return bits >> 16


def bf16_decode(h: int) -> float:
    return struct.unpack("<f", struct.pack("<I", (h & 0xFFFF) << 16))[0]


def fp8_e4m3_decode(code: int) -> float:
    sign = -1.0 if code & 0x80 else 1.0
    exp, man = (code >> 3) & 0xF, code & 0x7
    if exp == 0xF:
        return sign * math.inf if man == 0 else math.nan
    if exp == 0:
        return sign * man * 2.0**-9  # subnormal: man × 2^(1-7-3)
    return sign * (1 + man / 8) * 2.0 ** (exp - 7)


def fp8_e4m3_encode(x: float) -> int:
    """Exact encoding of a representable finite value (raises otherwise)."""
    sign = 0x80 if math.copysign(1.0, x) < 0 else 0
    a = Fraction(abs(x))
    if a == 0:
        return sign
    if a < Fraction(1, 64):  # below the smallest normal 2^-6: subnormal, step 2^-9
        man = a * 512
        if man.denominator != 1:
            raise ValueError(f"{x} is not exactly representable in fp8 e4m3")
        return sign | int(man)
    exp = math.floor(math.log2(a))
    while Fraction(2) ** exp > a:  # guard log2 rounding
        exp -= 1
    while Fraction(2) ** (exp + 1) <= a:
        exp += 1
    man = (a / Fraction(2) ** exp - 1) * 8
    biased = exp + 7
    if man.denominator != 1 or biased > 14:
        raise ValueError(f"{x} is not exactly representable in fp8 e4m3")
    return sign | (biased << 3) | int(man)


class Codec:
    """How a dtype's elements become bytes, and back."""

    def __init__(self, dtype: Dtype, size: int, enc: Callable[[float], bytes],
                 dec: Callable[[bytes], float], amplitude: int):
        self.dtype, self.size, self.enc, self.dec = dtype, size, enc, dec
        #: largest |input| such that 8 ranks' sums stay exact (fp32 2^24, bf16 2^8, fp8 16)
        self.amplitude = amplitude

    def pack(self, values: Sequence[float]) -> bytes:
        return b"".join(self.enc(v) for v in values)

    def unpack(self, data: bytes) -> List[float]:
        n = self.size
        return [self.dec(data[i : i + n]) for i in range(0, len(data), n)]


CODECS: Dict[str, Codec] = {
    "fp32": Codec(Dtype.NRT_DTYPE_FLOAT32, 4, lambda v: struct.pack("<f", v),
                  lambda b: struct.unpack("<f", b)[0], 1000),
    "bf16": Codec(Dtype.NRT_DTYPE_BFLOAT16, 2, lambda v: struct.pack("<H", bf16_encode(v)),
                  lambda b: bf16_decode(struct.unpack("<H", b)[0]), 30),
    "fp8_e4m3": Codec(Dtype.NRT_DTYPE_FP8_E4, 1, lambda v: bytes([fp8_e4m3_encode(v)]),
                      lambda b: fp8_e4m3_decode(b[0]), 2),
}


def _mix32(x: int) -> int:
    """A 32-bit integer hash (two multiply-xorshift rounds)."""
    x &= 0xFFFF_FFFF
    x = ((x ^ (x >> 16)) * 0x45D9F3B) & 0xFFFF_FFFF
    x = ((x ^ (x >> 16)) * 0x45D9F3B) & 0xFFFF_FFFF
    return x ^ (x >> 16)


def rank_values(rank: int, count: int, amplitude: int, salt: int = 0) -> List[float]:
    """Deterministic integer-valued inputs in [-amplitude, amplitude], hashed from (salt, rank,
    index): no rank's inputs are a shift of another's, so a misplaced chunk shows up as wrong
    elements."""
    span = 2 * amplitude + 1
    base = _mix32(salt * 0x9E37 + rank * 0x10001 + 1) << 20
    return [float(_mix32(base + j) % span - amplitude) for j in range(count)]


REDUCE = {
    OpType.NRT_OP_ADD: sum,
    OpType.NRT_OP_MAX: max,
    OpType.NRT_OP_MIN: min,
}


def oracle(cc_op: CcOpType, op: OpType, inputs: Sequence[Sequence[float]]) -> List[List[float]]:
    """Each rank's expected output from every rank's input (rank order = list order)."""
    n = len(inputs)
    if cc_op == CcOpType.NRT_CC_ALLGATHER:
        gathered = [v for rank_in in inputs for v in rank_in]
        return [gathered for _ in range(n)]
    red = REDUCE[op]
    reduced = [red(col) for col in zip(*inputs)]
    if cc_op == CcOpType.NRT_CC_ALLREDUCE:
        return [reduced for _ in range(n)]
    if cc_op == CcOpType.NRT_CC_REDUCESCATTER:
        chunk = len(reduced) // n
        return [reduced[r * chunk : (r + 1) * chunk] for r in range(n)]
    raise ValueError(f"no oracle for {cc_op!r}")


def io_counts(cc_op: CcOpType, count: int, n: int):
    """(input elements, output elements) per rank for ``count`` elements per rank's chunk
    (docs/contract/abi.md §5.7: AllGather out = N × in, ReduceScatter in = N × out)."""
    if cc_op == CcOpType.NRT_CC_ALLGATHER:
        return count, n * count
    if cc_op == CcOpType.NRT_CC_REDUCESCATTER:
        return n * count, count
    return count, count

"""The dot-product oracle of ggml's quantized formats: :func:`dot` gives, for a weight row and an
activation row decoded exactly (:mod:`oracles.quants`), the exact result rounded once to float64,
the magnitude ``sum |x_i y_i|`` (per part) that error bounds scale with, and whether the inputs are
*exact by construction* (every partial sum any kernel can form is a float32 number, so the result must
be bit-exact): :class:`DotExpected`.  Nothing here imports the harness."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .quants import decode, fmt


@dataclass(frozen=True)
class DotExpected:
    """What a dot product of a weight row and an activation row should return.

    ``value``: the exact result rounded once to float64.  ``magnitude``: the sum over every
    elementwise product of each part (main and offset) of ``|x_i y_i|``; any grouping of the
    products into partial sums (a kernel's integer sums, vector lanes, sub-blocks) has partial
    sums bounded by it, which is why error bounds may scale with it.  ``exact``: every float
    factor is a power of two (or the q8_1 product m * s, exact in fp32), and every partial sum
    is a multiple of ``unit`` no larger than ``2^24 * unit`` -- so every kernel, in any order,
    computes the result without rounding (``unit``: the finest bit any product carries).
    ``int_magnitude``: the same sum over the integer parts alone; a scale product that
    underflows into fp32's subnormals errs by up to 2^-150 absolutely, and the integers it then
    multiplies carry that error into the result at most ``int_magnitude`` times.
    """

    value: float
    magnitude: float
    exact: bool
    unit: float
    int_magnitude: float  # sum over every elementwise product of |integer part|, both parts


def _significant_bits(v: np.ndarray) -> int:
    """The most significant bits any element of the float64 array ``v`` needs."""
    v = np.abs(v[v != 0])
    if v.size == 0:
        return 0
    m, _ = np.frexp(v)
    mant = (m * 2.0 ** 53).astype(np.int64)
    low = mant & -mant
    return int(np.max(53 - np.log2(low.astype(np.float64)).astype(np.int64)))


def _lsb(v: np.ndarray) -> np.ndarray:
    """The weight of the lowest set bit of each non-zero float64 in ``v``."""
    m, e = np.frexp(np.abs(v))
    mant = (m * 2.0 ** 53).astype(np.int64)
    return np.ldexp((mant & -mant).astype(np.float64), e - 53)


def _exact_products(p: np.ndarray, j: np.ndarray) -> list[float]:
    """Each ``p_i * j_i`` as float64 numbers whose sum is exact: j is split into 11-bit chunks."""
    if _significant_bits(p) > 42:
        raise ValueError("scale products wider than 42 bits: the exact split does not hold")
    if np.any(np.abs(j) >= 2 ** 33):
        raise ValueError("integer parts beyond 2^33: the exact split does not hold")
    parts = []
    rest = j.copy()
    for k in range(3):
        chunk = rest & 2047  # arithmetic on two's complement: rest = high * 2048 + chunk
        parts.append(p * np.ldexp(chunk.astype(np.float64), 11 * k))
        rest = rest >> 11
    parts.append(p * np.ldexp(rest.astype(np.float64), 33))
    return np.concatenate(parts).tolist()


def _is_pow2(v: np.ndarray) -> np.ndarray:
    m, _ = np.frexp(np.abs(v))
    return (m == 0.5) | (v == 0)


def dot(x_name: str, x_raw: np.ndarray | bytes, y_name: str, y_raw: np.ndarray | bytes) -> DotExpected:
    """The dot product of a weight row (``x_name``) and an activation row (``y_name``).

    q8_1 carries ``s``, the block's sum ``d * sum(qs)`` rounded to fp16, and the kernels of
    q4_1 / q5_1 use it for the offset part (``m * s``): so does the oracle (it is part of the
    format).  q8_K carries ``bsums``; the oracle requires them to match ``qs`` (as every
    quantizer makes them) and then computes the offset part from ``qs`` directly.
    """
    x, y = decode(x_name, x_raw), decode(y_name, y_raw)
    if x.n != y.n:
        raise ValueError(f"dot: {x_name} row has {x.n} elements, {y_name} row {y.n}")
    if y.bsums is not None:
        sums = y.q.reshape(-1, 16).sum(axis=1).reshape(y.bsums.shape)
        if not np.array_equal(sums, y.bsums):
            raise ValueError(f"dot: the {y_name} row's bsums do not match its qs")
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (scale product, integer, exact-safe)
    p = x.scale * y.scale
    parts.append((p, x.q * y.q, _is_pow2(x.scale) & _is_pow2(y.scale)))
    if x.offset_scale is not None:
        if y.block_sums is not None:
            g = x.offset_group
            if g != fmt(y_name).block:
                raise ValueError(f"dot: {x_name}'s offsets cover {g} elements, {y_name}'s sums {fmt(y_name).block}")
            po = x.offset_scale[::g] * y.block_sums
            parts.append((po, x.offset_q[::g], np.ones(po.shape, bool)))  # m * s: exact in fp32
        else:
            parts.append((x.offset_scale * y.scale, x.offset_q * y.q,
                          _is_pow2(x.offset_scale) & _is_pow2(y.scale)))
    terms: list[float] = []
    magnitude = int_magnitude = 0.0
    exact = True
    unit = math.inf
    for p, j, safe in parts:
        terms += _exact_products(p, j)
        v = p * j.astype(np.float64)
        magnitude += math.fsum(np.abs(v).tolist())
        int_magnitude += float(np.sum(np.abs(j)))
        nz = v != 0
        if np.any(nz):
            exact &= bool(np.all(safe[nz]))
            unit = min(unit, float(np.min(_lsb(v[nz]))))
    value = math.fsum(terms)
    if unit == math.inf:  # every product is zero
        return DotExpected(value, magnitude, True, 0.0, int_magnitude)
    exact = exact and magnitude <= 2.0 ** 24 * unit and unit >= 2.0 ** -149 and magnitude < 2.0 ** 127
    return DotExpected(value, magnitude, exact, unit, int_magnitude)

"""The float oracles, checked against independent formulations (not against themselves)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cases import strategies as S
from oracles import floats as F
from oracles.bounds import gamma

ALL16 = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)


def fp16_value(bits: int) -> float:
    """binary16 decoded from its fields (IEEE 754-2008, 3.4)."""
    s, e, m = bits >> 15, (bits >> 10) & 0x1F, bits & 0x3FF
    sign = -1.0 if s else 1.0
    if e == 0x1F:
        return sign * math.inf if m == 0 else math.nan
    if e == 0:
        return sign * m * 2.0 ** -24
    return sign * (1 + m / 1024) * 2.0 ** (e - 15)


def test_fp16_to_f32_every_pattern() -> None:
    got = F.fp16_bits_to_f32(ALL16)
    want = np.array([fp16_value(int(b)) for b in ALL16], np.float32)
    same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
    assert same.all()


def test_bf16_to_f32_every_pattern_is_a_shift() -> None:
    got = F.bf16_bits_to_f32(ALL16).view(np.uint32)
    assert (got == ALL16.astype(np.uint32) << 16).all()


def round_to_fp16_reference(x: float) -> int:
    """Round-to-nearest-even to binary16 by integer arithmetic on the exact value."""
    if math.isnan(x):
        return 0x7E00
    sign = 0x8000 if math.copysign(1.0, x) < 0 else 0
    a = abs(Fraction(x))
    if a == 0:
        return sign
    e = max(math.floor(math.log2(a)) if a >= Fraction(1, 2**14) else -14, -14)
    while a >= Fraction(2) ** (e + 1):  # guard against log2 rounding
        e += 1
    ulp = Fraction(2) ** (e - 10)
    q = a / ulp
    r = math.floor(q)
    if q - r > Fraction(1, 2) or (q - r == Fraction(1, 2) and r % 2 == 1):
        r += 1
    value = r * ulp
    if value > 65504:
        return sign | 0x7C00
    return sign | int(np.float16(float(value)).view(np.uint16))


def test_f32_to_fp16_matches_exact_rounding_on_every_edge() -> None:
    x = S.all_edges_fp32("f16")
    finite = x[np.isfinite(x)]
    got = F.f32_to_fp16_bits(finite)
    want = np.array([round_to_fp16_reference(float(v)) for v in finite], np.uint16)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, [(float(finite[i]), hex(got[i]), hex(want[i])) for i in bad[:5]]


@given(st.integers(0, 2**32 - 1))
def test_f32_to_bf16_is_ggml_rounding_rule(bits: int) -> None:
    """ggml_compute_fp32_to_bf16: NaN -> (u >> 16) | 0x40, else (u + 0x7fff + ((u >> 16) & 1)) >> 16."""
    u = np.uint32(bits)
    got = int(F.f32_to_bf16_bits(np.array([u]).view(np.float32))[0])
    if (bits & 0x7FFFFFFF) > 0x7F800000:
        want = (bits >> 16) | 0x40
    else:
        want = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF
    assert got == want


def test_f32_to_bf16_on_every_edge() -> None:
    x = S.all_edges_fp32("bf16").view(np.uint32)
    got = F.f32_to_bf16_bits(x.view(np.float32)).astype(np.uint32)
    nan = (x & 0x7FFFFFFF) > 0x7F800000
    want = np.where(nan, (x >> 16) | 0x40, ((x.astype(np.uint64) + 0x7FFF + ((x >> 16) & 1)) >> 16) & 0xFFFF)
    assert (got == want).all()


@given(st.lists(st.floats(-1e6, 1e6, width=32), min_size=1, max_size=50),
       st.lists(st.floats(-1e6, 1e6, width=32), min_size=1, max_size=50))
def test_dot_exact_is_exact(xs: list[float], ys: list[float]) -> None:
    n = min(len(xs), len(ys))
    x, y = np.array(xs[:n], np.float32), np.array(ys[:n], np.float32)
    value, abs_sum = F.dot_exact(x, y)
    exact = sum(Fraction(float(a)) * Fraction(float(b)) for a, b in zip(x, y))
    assert value == float(exact)  # fsum rounds the exact sum once
    assert abs_sum == float(sum(abs(Fraction(float(a)) * Fraction(float(b))) for a, b in zip(x, y)))


def test_gamma() -> None:
    assert gamma(1) == pytest.approx(2.0**-24, rel=1e-6)
    assert gamma(2**24) == math.inf
    assert gamma(1000) > 1000 * 2.0**-24


def test_edge_pool_contains_ties_and_neighbours() -> None:
    x = S.all_edges_fp32("f16")
    for v in (65520.0, 2.0**-25, 1 + 2.0**-11):  # overflow tie, underflow tie, tie above 1
        assert v in x
        assert np.nextafter(np.float32(v), np.float32(np.inf)) in x
        assert np.nextafter(np.float32(v), np.float32(-np.inf)) in x


def test_lengths_cover_every_vlmax_boundary() -> None:
    shape = S.VectorShape(16, (2,), 2)
    b = shape.boundaries()
    for vlen in (128, 256, 512, 1024):
        vlmax = vlen * 2 // 16
        assert vlmax in b and vlmax * 2 in b

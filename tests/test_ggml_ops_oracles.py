"""The oracles of ggml's ops (oracles/ggml_ops.py): their layout rules, and their bounds held against float32
implementations of the algorithms they describe -- a bound a correct kernel can exceed, or one a wrong kernel
meets, would make the SpacemiT ops family (cases/spacemit_ops.py) judge wrongly."""

from __future__ import annotations

import numpy as np
import pytest

from oracles import ggml_ops as GO

F32 = np.float32


def _two_pass(x: np.ndarray, eps: float) -> np.ndarray:
    """ggml's generic norm in float32, row by row, left to right."""
    n = x.shape[-1]
    mean = np.zeros(x.shape[:-1], F32)
    for v in np.moveaxis(x, -1, 0):
        mean = (mean + v).astype(F32)
    mean = (mean / F32(n)).astype(F32)
    d = (x - mean[..., None]).astype(F32)
    s = np.zeros(x.shape[:-1], F32)
    for v in np.moveaxis(d, -1, 0):
        s = (s + v * v).astype(F32)
    r = (F32(1) / np.sqrt((s / F32(n) + F32(eps)).astype(F32))).astype(F32)
    return (d * r[..., None]).astype(F32)


def _one_pass(x: np.ndarray, eps: float) -> np.ndarray:
    """The variance as E[x^2] - mean^2 in float32 (what a cancelling kernel computes)."""
    n = x.shape[-1]
    sq, sm = np.zeros(x.shape[:-1], F32), np.zeros(x.shape[:-1], F32)
    for v in np.moveaxis(x, -1, 0):
        sq, sm = (sq + v * v).astype(F32), (sm + v).astype(F32)
    mean, ms = (sm / F32(n)).astype(F32), (sq / F32(n)).astype(F32)
    with np.errstate(invalid="ignore"):
        r = (F32(1) / np.sqrt((ms - mean * mean + F32(eps)).astype(F32))).astype(F32)
    return ((x - mean[..., None]) * r[..., None]).astype(F32)


def _rows(seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(400):
        n = int(rng.integers(1, 200))
        scale, offset = float(rng.choice([1, 1e-3, 256])), float(rng.choice([0, 0, 64, 1000]))
        out.append((rng.standard_normal((3, n)) * scale + offset).astype(F32))
    return out


def test_norm_bound_holds_for_the_two_pass_algorithm_and_not_for_one_pass() -> None:
    worst_two, beyond_one = 0.0, 0
    for x in _rows(1):
        y, bound = GO.norm(x, 1e-5)
        worst_two = max(worst_two, float(np.max(np.abs(_two_pass(x, 1e-5) - y) / bound)))
        with np.errstate(invalid="ignore"):
            ratio = np.abs(_one_pass(x, 1e-5) - y) / bound
        beyond_one += int(np.any(~(ratio <= 1)))
    assert worst_two <= 1, f"a float32 two-pass norm exceeds the oracle's bound: {worst_two:.3g} x"
    assert beyond_one > 50, f"only {beyond_one} of 400 rows of a one-pass norm exceed the bound"


def test_rms_norm_bound_holds_for_a_float32_kernel() -> None:
    for x in _rows(2):
        y, bound = GO.rms_norm(x, 1e-6)
        s = np.zeros(x.shape[:-1], F32)
        for v in np.moveaxis(x, -1, 0):
            s = (s + v * v).astype(F32)
        r = (F32(1) / np.sqrt((s / F32(x.shape[-1]) + F32(1e-6)).astype(F32))).astype(F32)
        got = (x * r[..., None]).astype(F32)
        assert np.all(np.abs(got - y) <= bound)


@pytest.mark.parametrize("op", sorted(GO.BINARY))
def test_binary_of_one_format_is_the_correctly_rounded_result(op: str) -> None:
    """In float16 the reference's f32 op then f16 rounding equals one rounding of the exact value: the oracle's
    double rounding is innocuous (checked on every pair of a spread of f16 values)."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal(4000).astype(np.float16)
    b = (rng.standard_normal(4000) + (3.0 if op == "div" else 0.0)).astype(np.float16)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        exact_once = GO.BINARY[op](a.astype(np.float64), b.astype(np.float64)).astype(np.float16)
    np.testing.assert_array_equal(GO.binary(op, a, b, np.float16), exact_once)


def test_permute_follows_ggml_axis_numbering() -> None:
    a = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5)  # ggml ne [5, 4, 3, 2]
    t = GO.permute(a, (1, 0, 2, 3))  # ggml_transpose: ne [4, 5, 3, 2]
    assert t.shape == (2, 3, 5, 4)
    assert t[1, 2, 3, 1] == a[1, 2, 1, 3]
    h = GO.permute(a, (0, 2, 1, 3))  # heads and rows swapped: ne [5, 3, 4, 2]
    assert h.shape == (2, 4, 3, 5) and h[1, 3, 2, 4] == a[1, 2, 3, 4]
    with pytest.raises(ValueError, match="not a permutation"):
        GO.permute(a, (0, 0, 1, 2))


def test_broadcast_tiles_and_refuses_what_ggml_cannot_repeat() -> None:
    b = np.array([[1.0, 2.0]])
    np.testing.assert_array_equal(GO.broadcast(b, (2, 4)), [[1, 2, 1, 2], [1, 2, 1, 2]])
    with pytest.raises(ValueError, match="does not tile"):
        GO.broadcast(b, (2, 3))


def test_get_rows_takes_each_slice_s_rows() -> None:
    a = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5)
    ids = np.array([[[3, 0], [1, 1], [2, 0]], [[0, 0], [3, 2], [1, 3]]])  # ne [2, 3, 2]
    got = GO.get_rows(a, ids)
    assert got.shape == (2, 3, 2, 5)
    np.testing.assert_array_equal(got[1, 2, 1], a[1, 2, 3])
    np.testing.assert_array_equal(got[0, 1, 0], a[0, 1, 1])

"""Oracles of ggml's element-wise, normalisation and data-movement ops, as ggml's public API defines them
(``ggml.h``; the generic CPU implementation in ops.cpp / binary-ops.cpp is the reference of the arithmetic).

Arrays use ggml's axis order reversed, as NumPy's C order needs: a tensor of ``ne = [ne0, ne1, ne2, ne3]`` is
an array of shape ``(ne3, ne2, ne1, ne0)``.  Values are computed in float64 from the stored values; each
function says how its result relates to a correct kernel's (exact, one rounding, or a bound derived below).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from oracles.bounds import U_F32, gamma

#: Binary ops by ggml's name.
BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}


def permuted_ne(ne: Sequence[int], perm: Sequence[int]) -> tuple[int, ...]:
    """The shape (ggml order) of ``ggml_permute`` of a tensor of shape ``ne``: storage axis i becomes axis ``perm[i]``."""
    out = [0] * len(ne)
    for i, p in enumerate(perm):
        out[p] = ne[i]
    return tuple(out)


def permute(a: np.ndarray, perm: Sequence[int]) -> np.ndarray:
    """``ggml_permute(a, p0, p1, p2, p3)``: axis i of ``a`` becomes axis ``perm[i]`` of the result (ggml's axis
    numbering; ``a`` in NumPy order, as everywhere here)."""
    if sorted(perm) != [0, 1, 2, 3]:
        raise ValueError(f"permute: {tuple(perm)} is not a permutation of 0..3")
    src_of = [list(perm).index(j) for j in range(4)]  # result's ggml axis j comes from source axis src_of[j]
    return np.transpose(a, [3 - src_of[3 - k] for k in range(4)])


def broadcast(b: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``b`` repeated over ``shape`` as ggml repeats a source (``ggml_repeat``, the binary ops' broadcast):
    every axis of ``b`` divides the target's, and element ``i`` takes ``b[i % ne]``."""
    if any(t % s for s, t in zip(b.shape, shape, strict=True)):
        raise ValueError(f"broadcast: {b.shape} does not tile {shape}")
    return np.tile(b, [t // s for s, t in zip(b.shape, shape, strict=True)])


def binary(op: str, a: np.ndarray, b: np.ndarray, dst: np.dtype) -> np.ndarray:
    """``ggml_<op>(a, b)`` with ``b`` broadcast, as the generic kernel computes it: both operands widened to
    float32 (exact), the op rounded to float32, the result rounded to ``dst``.

    With ``a`` and ``b`` of one format, one rounding of the exact value: binary32 carries 2p + 2 bits of a
    binary16 operand pair and float64 those of a binary32 pair, so the double rounding is innocuous (Figueroa,
    "When is double rounding innocuous?", 1995) and the result is the correctly rounded one, bit for bit.  With
    mixed formats it is the reference's two roundings (a kernel may round once and differ by 1 ulp of ``dst``)."""
    x = np.asarray(a, np.float64)
    y = broadcast(np.asarray(b, np.float64), a.shape)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        r32 = BINARY[op](x, y).astype(np.float32)
        return r32.astype(dst)


def rms_norm(x: np.ndarray, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """``ggml_rms_norm``: each row divided by sqrt(mean(x^2) + eps); returns (value, bound).

    Bound for a kernel in float32 (any summation order): the sum of squares is within gamma(n) of the exact
    one; the division by n, the addition of eps, the square root, the reciprocal and the final product add
    five roundings; a square root halves a relative error, which is not used here.  So
    |y' - y| <= gamma(n + 6) |y| for a row of n (Higham, Lemma 3.1 and 3.3)."""
    x64 = np.asarray(x, np.float64)
    n = x64.shape[-1]
    ms = np.sum(x64 * x64, axis=-1, keepdims=True) / n
    y = x64 / np.sqrt(ms + eps)
    return y, gamma(n + 6) * np.abs(y)


def norm(x: np.ndarray, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """``ggml_norm``: each row centred and divided by sqrt(variance + eps); returns (value, bound).

    Bound: that of the reference's two-pass algorithm in float32 (mean first, then the squares of the centred
    values), which a replacement kernel must meet.  With d_i = x_i - mean, S = sum d_i^2, A = sum |x_i| / n and
    r = 1 / sqrt(S / n + eps):

    * the computed mean is within gamma(n) A of the exact one, so each computed d_i is within
      gamma(n) A + u |d_i| of its exact value;
    * S computed from those is within gamma(n + 1) S + 2 (gamma(n) A)^2 n of the exact S: the centred values'
      error enters squared (sum d_i = 0 cancels its linear term), hence relative error of
      q = S / n + eps of at most gamma(n + 2) + 2 n (gamma(n) A)^2 / (S + n eps);
    * r then carries that plus three roundings (sqrt, reciprocal, product): at most
      e_r = gamma(n + 5) + 2 n (gamma(n) A)^2 / (S + n eps);

    so |y_i' - y_i| <= r (gamma(n) A + u |d_i|) (1 + e_r) + e_r |y_i|.  A one-pass variance
    (E[x^2] - mean^2 in float32) exceeds it by far when |mean| >> the spread: its error is gamma(n) E[x^2]."""
    x64 = np.asarray(x, np.float64)
    n = x64.shape[-1]
    mean = np.mean(x64, axis=-1, keepdims=True)
    d = x64 - mean
    s = np.sum(d * d, axis=-1, keepdims=True)
    q = s / n + eps
    r = 1.0 / np.sqrt(q)
    y = d * r
    a = np.mean(np.abs(x64), axis=-1, keepdims=True)
    g = gamma(n)
    with np.errstate(divide="ignore", invalid="ignore"):
        e_r = gamma(n + 5) + 2 * n * (g * a) ** 2 / (s + n * eps)
    bound = r * (g * a + U_F32 * np.abs(d)) * (1 + e_r) + e_r * np.abs(y)
    return y, bound


def sum_rows(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``ggml_sum_rows``: each row's sum, and the bound of a float32 sum in any order: gamma(n - 1) sum |x_i|."""
    x64 = np.asarray(x, np.float64)
    n = x64.shape[-1]
    return np.sum(x64, axis=-1, keepdims=True), gamma(max(n - 1, 0)) * np.sum(np.abs(x64), axis=-1, keepdims=True)


def get_rows(a: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """``ggml_get_rows(a, ids)``: ``a`` of ne [n, rows, ne2, ne3], ``ids`` i32 of ne [k, ne2, ne3]; the result's
    row (i10, i11, i12) is a's row ids[i12, i11, i10] of slice (i11, i12).  Exact: a copy."""
    idx = np.asarray(ids, np.int64)[..., None]  # (ne3, ne2, k, 1)
    return np.take_along_axis(a, np.broadcast_to(idx, (*idx.shape[:-1], a.shape[-1])), axis=-2)


def concat(a: np.ndarray, b: np.ndarray, dim: int) -> np.ndarray:
    """``ggml_concat(a, b, dim)``: exact."""
    return np.concatenate([a, b], axis=3 - dim)


__all__ = ["BINARY", "binary", "broadcast", "concat", "get_rows", "norm", "permute", "rms_norm", "sum_rows"]

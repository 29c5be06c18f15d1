"""The activation quantizers of ggml (reference semantics, NumPy): q8_0, q8_1 and q8_K blocks from
floats, with the rounding rule and the sign choice as parameters, and the reference quantizer of every
activation type by name (:data:`REFERENCE_QUANTIZERS`).  Nothing here imports the harness."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .quants import QK_K

ROUNDINGS = ("half_away", "half_even")


def _round(v: np.ndarray, rounding: str) -> np.ndarray:
    """float32 values to integers: C's roundf (ties away from zero) or rint (ties to even)."""
    v = np.asarray(v, np.float64)  # exact
    if rounding == "half_away":
        return (np.sign(v) * np.floor(np.abs(v) + 0.5)).astype(np.int64)
    if rounding == "half_even":
        return np.rint(v).astype(np.int64)
    raise ValueError(f"rounding must be one of {ROUNDINGS}, got {rounding!r}")


def _fp16_bits(v: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return np.asarray(v, np.float32).astype(np.float16).view(np.uint16)


def q8_scaled(x: np.ndarray, block: int = 32) -> tuple[np.ndarray, np.ndarray]:
    """quantize_row_q8_0 / _q8_1 up to the rounding: per block ``d = amax / 127`` (fp32), and
    per element ``x * (1 / d)`` in fp32 (0 for an all-zero block)."""
    xb = np.asarray(x, np.float32).reshape(-1, block)
    amax = np.max(np.abs(xb), axis=1)
    d = amax / np.float32(127)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    return d.astype(np.float32), (xb * inv[:, None]).astype(np.float32)


def quantize_q8_0(x: np.ndarray, rounding: str = "half_away") -> np.ndarray:
    """q8_0 blocks of ``x`` (k floats, k % 32 == 0) as ``(nb, 34)`` uint8.

    ``half_away`` is quantize_row_q8_0_ref (roundf); ``half_even`` is what a vector
    float-to-integer conversion in the default rounding mode gives.
    """
    d, v = q8_scaled(x)
    out = np.zeros((d.size, 34), np.uint8)
    out[:, 0:2] = _fp16_bits(d).reshape(-1, 1).view(np.uint8)
    out[:, 2:] = _round(v, rounding).astype(np.int8).view(np.uint8)
    return out


def quantize_q8_1(x: np.ndarray, rounding: str = "half_away") -> np.ndarray:
    """q8_1 blocks of ``x``: q8_0's ``d`` and ``qs`` and ``s = fp16(sum(qs) * d)`` (product in fp32)."""
    d, v = q8_scaled(x)
    q = _round(v, rounding)
    s = (q.sum(axis=1).astype(np.float32) * d).astype(np.float32)
    out = np.zeros((d.size, 36), np.uint8)
    out[:, 0:2] = _fp16_bits(d).reshape(-1, 1).view(np.uint8)
    out[:, 2:4] = _fp16_bits(s).reshape(-1, 1).view(np.uint8)
    out[:, 4:] = q.astype(np.int8).view(np.uint8)
    return out


PICKS = ("first", "negative_on_tie")

#: The reference quantizer (``quantize_row_<name>_ref``'s semantics) of every activation type,
#: floats -> ``(nb, nbytes)`` blocks; filled below :func:`quantize_q8_K`.
REFERENCE_QUANTIZERS: dict[str, Callable[[np.ndarray], np.ndarray]] = {}


def quantize_q8_K(x: np.ndarray, pick: str = "first") -> tuple[np.ndarray, np.ndarray]:
    """q8_K blocks of ``x`` (k % 256 == 0) as ``(nb, 292)`` uint8, and a per-block mask of the
    all-zero blocks (whose ``bsums`` quantize_row_q8_K_ref leaves unwritten).

    Per block: ``max`` is the element of largest magnitude, ``iscale = -127 / max`` (fp32),
    ``qs = min(127, round_half_even(iscale * x))``, ``d = 1 / iscale``, ``bsums`` the sums of
    16 consecutive ``qs``.  ``pick`` says which element is ``max`` when several share the
    largest magnitude: ``first`` (the reference: the first one met) or ``negative_on_tie``
    (the negative one if both signs occur).
    """
    xb = np.asarray(x, np.float32).reshape(-1, QK_K)
    out = np.zeros((xb.shape[0], 292), np.uint8)
    ax = np.abs(xb)
    amax = ax.max(axis=1)
    first = xb[np.arange(xb.shape[0]), np.argmax(ax, axis=1)]
    if pick == "first":
        mx = first
    elif pick == "negative_on_tie":
        mx = np.where(np.any(xb == -amax[:, None], axis=1), -amax, first).astype(np.float32)
    else:
        raise ValueError(f"pick must be one of {PICKS}, got {pick!r}")
    zero = amax == 0
    with np.errstate(divide="ignore", invalid="ignore"):
        iscale = np.where(zero, np.float32(0), np.float32(-127) / np.where(zero, np.float32(1), mx)).astype(np.float32)
        d = np.where(zero, np.float32(0), np.float32(1) / np.where(zero, np.float32(1), iscale)).astype(np.float32)
    q = np.minimum(127, _round((xb * iscale[:, None]).astype(np.float32), "half_even"))
    q[zero] = 0
    out[:, 0:4] = d.reshape(-1, 1).view(np.uint8)
    out[:, 4:260] = q.astype(np.int8).view(np.uint8)
    out[:, 260:292] = q.reshape(-1, 16, 16).sum(axis=2).astype("<i2").view(np.uint8)
    return out, zero


REFERENCE_QUANTIZERS.update({"q8_0": quantize_q8_0, "q8_1": quantize_q8_1, "q8_K": lambda x: quantize_q8_K(x)[0]})

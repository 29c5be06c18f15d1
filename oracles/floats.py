"""Oracles for ggml's floating-point conversions and dot products (NumPy / ml_dtypes, float64).

Arrays of 16-bit formats travel as their raw bits (``uint16``), as they do in
ggml (``ggml_fp16_t``, ``ggml_bf16_t``).  Nothing here imports the harness.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

BF16 = np.dtype(ml_dtypes.bfloat16)

# ------------------------------------------------------------------ formats


def fp16_bits_to_f32(bits: np.ndarray) -> np.ndarray:
    """IEEE binary16 -> binary32: exact for every value (NumPy's conversion)."""
    return np.asarray(bits, np.uint16).view(np.float16).astype(np.float32)


def f32_to_fp16_bits(x: np.ndarray) -> np.ndarray:
    """binary32 -> binary16, round to nearest even, overflow to infinity, subnormals kept."""
    with np.errstate(over="ignore"):
        return np.asarray(x, np.float32).astype(np.float16).view(np.uint16)


def bf16_bits_to_f32(bits: np.ndarray) -> np.ndarray:
    """bfloat16 -> binary32: the bits move to the upper half, exact for every value."""
    return np.asarray(bits, np.uint16).view(BF16).astype(np.float32)


def f32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """binary32 -> bfloat16 as ggml defines it.

    Non-NaN values round to nearest even (ml_dtypes' conversion), keeping
    subnormals and rounding past the largest finite value to infinity.  ggml's
    reference turns a NaN into ``(bits >> 16) | 0x0040``: the payload's upper
    bits with the quiet bit forced; that rule is reproduced here for NaNs.
    """
    x = np.asarray(x, np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        out = x.astype(BF16).view(np.uint16).copy()
    nan = np.isnan(x)
    out[nan] = (x.view(np.uint32)[nan] >> 16).astype(np.uint16) | np.uint16(0x0040)
    return out


# ------------------------------------------------------------- dot product


def dot_exact(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """The dot product of two float vectors, and the sum of |x_i y_i|.

    Inputs of at most 24 significant bits (fp32, fp16, bf16) have products
    exact in float64, and ``math.fsum`` adds them with a single rounding, so
    the first value is the exact dot product rounded once to float64.  The
    second value is what accumulation error bounds are proportional to.
    """
    p = np.asarray(x, np.float64) * np.asarray(y, np.float64)
    if not np.all(np.isfinite(p)):
        with np.errstate(invalid="ignore"):
            return float(np.sum(p)), float("inf")
    return math.fsum(p.tolist()), math.fsum(np.abs(p).tolist())

"""The inputs of the IME1 GEMM family's cases (cases/spacemit_gemm.py): activations of four kinds and weight rows as
ggml's quantizers make them from real weights, both from a seed."""

from __future__ import annotations

import numpy as np

from oracles import quants as Q
from oracles import spacemit_ime1 as IME
from oracles.repack import k4_encode


def block_of(name: str) -> int:
    return Q.block_size(name)


ACTS = ("gaussian", "positive", "spiky", "zero_blocks")


def activations(kind: str, m: int, k: int, seed: int) -> np.ndarray:
    """``m x k`` float32 activations: Gaussian at a drawn binade, all positive, one large value per block of 32
    (the others near zero after quantization), or Gaussian with some blocks all zero (scale 0: the quantizer's NaN)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((m, k)) * 2.0 ** float(rng.integers(-6, 6))
    if kind == "positive":
        x = np.abs(x)
    elif kind == "spiky":
        x = x * 1e-3
        idx = rng.integers(0, IME.BLOCK, (m, k // IME.BLOCK))
        x.reshape(m, -1, IME.BLOCK)[np.arange(m)[:, None], np.arange(k // IME.BLOCK)[None, :], idx] *= 1e4
    elif kind == "zero_blocks":
        x.reshape(m, -1, IME.BLOCK)[rng.random((m, k // IME.BLOCK)) < 0.3] = 0
    elif kind != "gaussian":
        raise ValueError(f"unknown activation kind {kind!r}; expected one of {ACTS}")
    return x.astype(np.float32)


def _f16(v: np.ndarray) -> np.ndarray:
    return np.asarray(v, np.float32).astype(np.float16).reshape(-1, 1).view(np.uint8)


def model_weights(name: str, n: int, k: int, seed: int) -> np.ndarray:
    """``n`` rows of ``name`` as ggml's quantizers make them from Gaussian weights: q4_0's ``d`` of either sign,
    q4_1's ``m`` between ``-15 d`` and 0 (a block whose values straddle zero), q4_K's 6-bit scales and mins with
    ``dmin mn`` between 0 and ``15 d sc`` (the same, per sub-block); random nibbles."""
    rng = np.random.default_rng(seed)
    nb = n * k // block_of(name)
    out = np.zeros((nb, Q.fmt(name).nbytes), np.uint8)
    d = np.exp2(rng.uniform(-9, -4, nb)).astype(np.float32)
    if name == "q4_0":
        out[:, 0:2] = _f16(d * np.where(rng.random(nb) < 0.5, -1, 1))
        out[:, 2:] = rng.integers(0, 256, (nb, 16))
    elif name == "q4_1":
        out[:, 0:2] = _f16(d)
        out[:, 2:4] = _f16(-d * rng.uniform(0, 15, nb))
        out[:, 4:] = rng.integers(0, 256, (nb, 16))
    elif name == "q4_K":
        dmin = np.exp2(rng.uniform(-9, -4, nb)).astype(np.float32)
        sc = rng.integers(1, 64, (nb, 8))
        mf = d[:, None] * sc * rng.uniform(0, 15, (nb, 8)) / dmin[:, None]
        mn = np.clip(np.rint(mf), 0, 63)
        out[:, 0:2] = _f16(d)
        out[:, 2:4] = _f16(dmin)
        out[:, 4:16] = k4_encode(sc, mn)
        out[:, 16:] = rng.integers(0, 256, (nb, 128))
    else:
        raise ValueError(f"IME1 takes {', '.join(IME.TYPES)}, not {name!r}")
    return out.reshape(n, -1)

"""SpacemiT's flash-attention arithmetic (ggml-cpu/spacemit/rvv_kernels.cpp, VLEN 1024) in NumPy, and the
measured error of its polynomial exp and tanh.

The tiled kernel (``forward_flash_attn_ext_f16_tiled_vlen1024_vf16``) computes its weights with
``rvv_expf_approx_f32m2`` (a copy of ggml's ``ggml_v_expf_m2``: Cody-Waite reduction by ln 2, a degree-5
polynomial, the exponent put in by integer addition, a scale-splitting path for |n| > 126 and a flush for
|n| > 192) and its logit softcap with ``rvv_tanh_approx_f32m2`` (tanh |x| = (1 - e) / (1 + e) with
e = that exp of -2 |x|, the sign put back by a merge).  :func:`expf_poly` and :func:`tanh_poly` re-express
both instruction by instruction: every ``vfmacc`` / ``vfnmsac`` is one fused multiply-add rounded once
(:func:`fma32`), every other arithmetic instruction one float32 rounding, the bit manipulations as unsigned
32-bit integer arithmetic.  The kernel's inputs are x = s - M <= 0 for the exp (a score minus the row's
running maximum; -inf for padding and masked positions) and -2 |x| <= 0 inside the tanh, so the
measurements below cover every float32 of those ranges (``RVVDIFF_EXPF_EXHAUSTIVE=1`` in
tests/test_spacemit_fa_oracle.py; the default run checks every 4093rd and the regime edges).

Measured over all 2^31 non-positive float32 x (and -inf), against float64 exp (:func:`exp_error`):
:data:`EXP_POLY_ULPS`.  Measured over all 2^31 non-negative float32 x (and +inf), against float64 tanh
(:func:`tanh_error`, absolute, in units of 2^-24): :data:`TANH_POLY_ABS`.  Derivation of the tanh figure
(why it is small): e = exp(-2|x|) has a relative error of at most 1.954 ulp; d/de (1 - e)/(1 + e) =
-2/(1 + e)^2 turns that into at most 2 e / (1 + e)^2 * 1.954 * 2^-23 <= 0.98 * 2^-23 absolute (e <= 1); the
subtraction 1 - e is exact for e >= 1/2 (Sterbenz) and the add and divide round once each (2^-24 |t|): a
bound of about 3 * 2^-24 + 0.98 * 2^-23, which the measurement must not exceed.

:func:`tiled_view` is the problem the tiled kernel actually solves: Q packed as fp16 of
float32(q * scale') (``rvv_pack_f32_as_scaled_f16``, scale' = scale / softcap in float32 with a softcap), the
scale thereby folded into Q.  Nothing here imports the harness.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import numpy as np

from oracles import attention as A
from oracles.ulp import fma, ulp

#: The float constants of ``rvv_expf_approx_f32m2``, in the kernel's order (C hex-float spellings): the
#: rounding shifter, 1/ln 2, ln 2 split in two, then the polynomial's coefficients of b, b^2 (c2 + c3 b),
#: b^4 (c4 + c5 b).  cases/spacemit_fa.py checks that the tree's function still has exactly these.
EXP_CONSTANTS = ("0x1.8p23", "0x1.715476p+0", "0x1.62e4p-1", "0x1.7f7d1cp-20", "0x1.ffffecp-1", "0x1.fffdb6p-2",
                 "0x1.555e66p-3", "0x1.573e2ep-5", "0x1.0e4020p-7")
_R, _INV_LN2, _LN2_HI, _LN2_LO, _C1, _C2, _C3, _C4, _C5 = (float(np.float32(float.fromhex(c))) for c in EXP_CONSTANTS)

#: Worst error of :func:`expf_poly` over its input range, in ULPs of the result (normal results; subnormal
#: results are within 1.3 ULP of the subnormal spacing, 2^-149 absolute -- below any bound's flush floor).
#: Measured over every float32 x <= 0 (2^31 + 1 inputs, 13 minutes on this machine): 1.9535802 ULP at
#: x = -5.1986871 (0xc0a65ba5), the same point and figure as ggml's ggml_v_expf_m2 over all 2^32 inputs through
#: the kernel (docs/vec_ops.md), which this function copies token for token; 1.288 ULP of 2^-149 where the
#: result is subnormal.
EXP_POLY_ULPS = 1.9536
#: Worst absolute error of :func:`tanh_poly`, in units of 2^-24, over every float32 x >= 0 (the function is
#: odd by construction): measured 2.0426875 at x = 0.62380826 (0x3f1fb1e6, tanh x = 0.554), below the
#: derivation's 3 + 2 * 0.98 (module docstring); rounded up.  The oracle's allowance for tanh, TANH_ULPS * 2^-23
#: = 4 * 2^-24 absolute (oracles/attention.py), covers it.
TANH_POLY_ABS = 2.0427


def _f32(x: np.ndarray) -> np.ndarray:
    """One rounding to float32 (float64 in and out)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(x, np.float64).astype(np.float32).astype(np.float64)


def fma32(a: np.ndarray | float, b: np.ndarray | float, c: np.ndarray | float) -> np.ndarray:
    """a*b + c rounded once to float32 (float32 operands given as float64), as float64.

    The product of two float32 numbers is exact in float64, the sum is rounded once there; rounding that
    sum to float32 can differ from one rounding of the exact value only where the float64 sum lands on a
    float32 tie (its 29 low bits 1000...0) or in float32's subnormal range.  Those elements are redone by
    :func:`oracles.ulp.fma` (round-to-odd, exact); the rest stays (the bulk of an exhaustive sweep)."""
    a, b, c = np.broadcast_arrays(*(np.asarray(v, np.float64) for v in (a, b, c)))
    with np.errstate(over="ignore", invalid="ignore"):
        s = a * b + c
    out = _f32(s)
    bits = s.view(np.uint64)
    suspect = ((bits & np.uint64(0x1FFFFFFF)) == np.uint64(0x10000000)) | (np.abs(s) <= 2.0 ** -126)
    if suspect.any():
        out[suspect] = fma(a[suspect], b[suspect], c[suspect], "f32")
    return out


def _bits(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, np.float64).astype(np.float32).view(np.uint32)


def _float(u: np.ndarray) -> np.ndarray:
    return np.asarray(u, np.uint32).view(np.float32).astype(np.float64)


def expf_poly(x: np.ndarray) -> np.ndarray:
    """``rvv_expf_approx_f32m2(x)`` for float32 ``x``, as float32."""
    x = np.asarray(x, np.float32).astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        z = fma32(_INV_LN2, x, _R)  # vfmacc_vf(r, 1/ln2, x)
        n = _f32(z - _R)
        b = fma32(-n, _LN2_LO, fma32(-n, _LN2_HI, x))  # two vfnmsac_vf
        e = _bits(z) << np.uint32(23)
        k = _float(e + np.uint32(0x3F800000))
        u = _f32(b * b)
        j = fma32(fma32(fma32(_C5, b, _C4), u, fma32(_C3, b, _C2)), u, _f32(b * _C1))
        plain = fma32(k, j, k)
        d = np.where(n <= 0.0, np.uint32(0x82000000), np.uint32(0))
        s1 = _float(d + np.uint32(0x7F000000))
        s2 = _float(e - d)
        out = np.where(np.abs(n) > 126.0, _f32(fma32(s2, j, s2) * s1), plain)
        out = np.where(np.abs(n) > 192.0, _f32(s1 * s1), out)
    return out.astype(np.float32)


def tanh_poly(x: np.ndarray) -> np.ndarray:
    """``rvv_tanh_approx_f32m2(x)`` for float32 ``x``, as float32."""
    x = np.asarray(x, np.float32).astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        e = expf_poly(_f32(np.abs(x) * -2.0)).astype(np.float64)
        t = -_f32(_f32(e - 1.0) / _f32(e + 1.0))
    return np.where(x < 0, -t, t).astype(np.float32)


# ------------------------------------------------------------------ measurement


def exp_error(x: np.ndarray) -> tuple[float, float, float]:
    """(worst ULP error where exp(x) is a normal float32, the x where it is, worst error in units of
    2^-149 where it is subnormal or zero) of :func:`expf_poly` over float32 ``x`` <= 0."""
    got = expf_poly(x).astype(np.float64)
    exact = np.exp(np.asarray(x, np.float64))
    err = np.abs(got - exact)
    normal = exact >= 2.0 ** -126
    with np.errstate(invalid="ignore"):
        ulps = np.where(normal, err / ulp(exact, "f32"), 0.0)
    i = int(np.argmax(ulps)) if ulps.size else 0
    tiny = float(np.max(np.where(normal, 0.0, err), initial=0.0)) / 2.0 ** -149
    return (float(ulps[i]) if ulps.size else 0.0), (float(np.asarray(x)[i]) if ulps.size else 0.0), tiny


def tanh_error(x: np.ndarray) -> tuple[float, float]:
    """(worst |tanh_poly(x) - tanh(x)| in units of 2^-24, the x where it is) over float32 ``x``."""
    err = np.abs(tanh_poly(x).astype(np.float64) - np.tanh(np.asarray(x, np.float64))) / 2.0 ** -24
    i = int(np.argmax(err)) if err.size else 0
    return (float(err[i]) if err.size else 0.0), (float(np.asarray(x)[i]) if err.size else 0.0)


def float32_range(first: int, last: int, stride: int = 1, chunk: int = 1 << 22) -> Iterator[np.ndarray]:
    """Every ``stride``-th float32 whose bit pattern is in [first, last] (and ``last`` itself), in chunks."""
    for lo in range(first, last + 1, chunk * stride):
        hi = min(lo + chunk * stride, last + 1)
        bits = np.arange(lo, hi, stride, dtype=np.uint64).astype(np.uint32)
        if hi == last + 1 and (last - lo) % stride:
            bits = np.append(bits, np.uint32(last))
        yield bits.view(np.float32)


#: The inputs each polynomial takes in the kernels, as float32 bit ranges: exp of -0 .. -inf, tanh of
#: +0 .. +inf.
EXP_INPUTS = (0x80000000, 0xFF800000)
TANH_INPUTS = (0x00000000, 0x7F800000)


# ------------------------------------------------------------------ the tiled kernel's problem


def tiled_q(q: np.ndarray, scale: float, softcap: float) -> np.ndarray:
    """Q as the tiled kernel packs it: fp16(float32(q * scale')), scale' = float32(scale / softcap) with a
    softcap, else scale (``rvv_pack_f32_as_scaled_f16``: vfmul, then vfncvt to fp16, round to nearest even)."""
    s = np.float32(scale) / np.float32(softcap) if softcap else np.float32(scale)
    with np.errstate(over="ignore"):
        return (np.asarray(q, np.float32) * s).astype(np.float32).astype(np.float16).astype(np.float64)


def tiled_view(a: A.Attention) -> A.Attention:
    """The problem the tiled kernel solves exactly but for its rounding: Q replaced by :func:`tiled_q`
    (the scale folded in), scale 1 -- or, with a softcap c, scale c, so that c tanh(c q'.k / c) is the
    kernel's c tanh(q'.k) (the float64 division by c is within the oracle's own rounding allowance)."""
    return replace(a, q=tiled_q(a.q, a.scale, a.softcap), scale=a.softcap if a.softcap else 1.0)

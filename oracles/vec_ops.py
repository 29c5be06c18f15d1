"""Oracles for ggml's vector kernels beyond the dot products (vec.h / vec.cpp): scale and
multiply-add in fp32 and fp16, the unrolled forms, SiLU / SwiGLU, softmax and centred variance.

Every oracle returns what an output must satisfy, in one of two shapes:

* :class:`Elementwise` -- per element, a float64 reference value ``exact``
  (the real number the kernel's arithmetic approximates), the ULP error
  ``allowed`` at that element (derived from the arithmetic: see each
  function) and, where the arithmetic is fully determined, the bit-exact
  results it may produce (``models``; several when the C source leaves a
  choice to the compiler, e.g. contracting ``a + b*c`` into an fma).
* :class:`Accumulated` -- one scalar, its reference and an absolute bound
  (sums whose order of accumulation is unspecified).

Values travel as float64 arrays; fp16 inputs are their exact float64 values.
The scalar-reference semantics of ggml (the C loops the vector paths
replace) decide every special case: NaN propagates, 0 * inf is NaN, an
overflow of fp32 ``expf`` saturates to infinity (and so SiLU of a large
negative input to -0).  Nothing here imports the harness.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .bounds import U_F32, gamma
from .ulp import F32, allowed_ulps, fma, round_to, ulp

#: Unit roundoff of binary64 (the double accumulators of softmax and cvar).
U_F64 = 2.0 ** -53
#: Absolute error of one rounding to fp32 in its subnormal range (half the spacing 2^-149).
_TINY_F32 = 2.0 ** -150


@dataclass(frozen=True)
class Elementwise:
    """An output array's reference: values, allowed ULP error per element, bit-exact models."""

    exact: np.ndarray
    allowed: np.ndarray
    fmt: str
    models: tuple[tuple[str, np.ndarray], ...] = field(default=())
    #: Where ``exact`` is exactly zero, the sign of zero is part of the answer.
    signed_zeros: bool = True


@dataclass(frozen=True)
class Accumulated:
    """A scalar result: ``|got - exact| <= bound`` (NaN and infinities must match)."""

    exact: float
    bound: float


def _f64(*arrays: np.ndarray) -> list[np.ndarray]:
    """float64 values (widening a signalling NaN raises IEEE invalid: it stays a NaN, silently)."""
    with np.errstate(invalid="ignore"):
        return [np.asarray(a, np.float64) for a in arrays]


def _rounded_once(exact: np.ndarray, fmt: str, model: np.ndarray) -> Elementwise:
    """A result rounded once from ``exact``: 0.5 ULP, and bit-exact ``model``."""
    return Elementwise(exact, np.full(exact.shape, 0.5), fmt, (("correctly rounded", model),))


# ------------------------------------------------------------ scale / multiply-add


def mad_f32(x: np.ndarray, y: np.ndarray, v: float) -> Elementwise:
    """ggml_vec_mad_f32, y + x*v: one fused multiply-add per element (vfmadd.vf), correctly
    rounded -- 0.5 ULP, bit-exact."""
    x, y = _f64(x, y)
    with np.errstate(invalid="ignore", over="ignore"):
        return _rounded_once(x * v + y, "f32", fma(x, v, y, F32))


def mad1_f32(x: np.ndarray, s: float, b: float) -> Elementwise:
    """ggml_vec_mad1_f32, x*s + b: one fused multiply-add (vfmadd.vf onto a splat of b)."""
    (x,) = _f64(x)
    with np.errstate(invalid="ignore", over="ignore"):
        return _rounded_once(x * s + b, "f32", fma(x, s, b, F32))


def scale_f32(y: np.ndarray, v: float) -> Elementwise:
    """ggml_vec_scale_f32, y*v: one multiply (vfmul.vf); the float64 product is exact."""
    (y,) = _f64(y)
    with np.errstate(invalid="ignore", over="ignore"):
        p = y * v
    return _rounded_once(p, "f32", round_to(p, "f32"))


def mad_f16(x: np.ndarray, y: np.ndarray, v: float, *, fp16_arith: bool) -> Elementwise:
    """ggml_vec_mad_f16, y + x*v on fp16 arrays.

    RVV path (zvfh): the fp32 scale is rounded to fp16 first (``s16``), then
    one fp16 fused multiply-add (vfmacc.vf at e16) per element: the result is
    the correctly rounded ``y + x*s16`` -- 0.5 ULP of that value, bit-exact.
    Rounding the scale is the kernel's stated design; it is why this
    reference uses ``s16`` (|v| >= 65520 becomes infinity, tiny scales 0).

    Scalar path (no zvfh): ``fp16(fp32(y) + fp32(x)*v)``, the scale kept in
    fp32.  The fp32 intermediate carries at most ``u32 (|x v| + |y + x v|)``
    (one or two fp32 roundings, plus their subnormal floor), then one fp16
    rounding; whether the compiler fuses the multiply-add is its choice
    (``-ffp-contract``), so both results are accepted bit for bit.
    """
    x, y = _f64(x, y)
    with np.errstate(invalid="ignore", over="ignore"):
        if fp16_arith:
            s16 = float(round_to(np.float64(v), "f16"))
            return _rounded_once(x * s16 + y, "f16", fma(x, s16, y, "f16"))
        p = x * v  # exact: 11 + 24 significant bits
        exact = p + y
        delta = U_F32 * (np.abs(p) + np.abs(exact)) * (1 + U_F32) + 2 * _TINY_F32
        unfused = round_to(fma(round_to(p, "f32"), 1.0, y, F32), "f16")
        fused = round_to(fma(x, v, y, "f32"), "f16")
    return Elementwise(exact, allowed_ulps(exact, delta, "f16"), "f16", (("unfused", unfused), ("fused", fused)))


def scale_f16(y: np.ndarray, v: float, *, fp16_arith: bool) -> Elementwise:
    """ggml_vec_scale_f16, y*v on an fp16 array.

    RVV path (zvfh): ``y * s16`` with the scale rounded to fp16, one fp16
    multiply (vfmul.vf at e16): correctly rounded, bit-exact.  Scalar path:
    ``fp16(fp32(y) * v)``, two roundings (fp32 then fp16): the intermediate is
    within ``u32 |y v|`` (plus the fp32 subnormal floor); bit-exact too, as
    there is no choice of contraction.
    """
    (y,) = _f64(y)
    with np.errstate(invalid="ignore", over="ignore"):
        if fp16_arith:
            s16 = float(round_to(np.float64(v), "f16"))
            p = y * s16
            return _rounded_once(p, "f16", round_to(p, "f16"))
        p = y * v
        delta = U_F32 * np.abs(p) + _TINY_F32
    return Elementwise(p, allowed_ulps(p, delta, "f16"), "f16", (("fp32 then fp16", round_to(round_to(p, "f32"), "f16")),))


def mad_f32_unroll(x: np.ndarray, v: np.ndarray, y: np.ndarray) -> Elementwise:
    """ggml_vec_mad_f32_unroll, y + sum_k x[k]*v[k] for k = 0..K-1 (rows ``x[k]``).

    The RVV path keeps y in a register and applies K fused multiply-adds in
    order k = 0, 1, ...: the bit-exact model is that chain of correctly
    rounded fmas.  As a bound: a recursive sum of K + 1 terms with exact
    products commits K roundings; the first K - 1 stay within
    gamma(K - 1) * (|y| + sum|x_k v_k|) and the last is the final rounding.
    The float64 reference sum carries error ~2^-48 of that, negligible.
    """
    x, v, y = _f64(x, v, y)
    with np.errstate(invalid="ignore", over="ignore"):
        terms = x * v[:, None]
        model = y
        for k in range(x.shape[0]):
            model = fma(x[k], v[k], model, F32)
        exact = y + terms.sum(axis=0)
        delta = gamma(x.shape[0] - 1) * (np.abs(y) + np.abs(terms).sum(axis=0))
    return Elementwise(exact, allowed_ulps(exact, delta, "f32"), "f32", (("fma chain", model),))


# ------------------------------------------------------------ exp-based kernels


def expf_reference(d: np.ndarray) -> np.ndarray:
    """exp(d) as ggml's scalar reference means it: the exact value (float64), except that where
    fp32 ``expf`` overflows (the exact value rounds past FLT_MAX) it is +inf."""
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(np.asarray(d, np.float64))
    return np.where(e >= F32.overflow, np.inf, e)


def _silu_parts(x: np.ndarray, exp_ulps: float) -> tuple[np.ndarray, np.ndarray]:
    """SiLU's reference value and its relative error before the final rounding (see :func:`silu`)."""
    e = expf_reference(-x)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        s = x / (1.0 + e)
        eps1 = np.where(np.isfinite(e), exp_ulps * ulp(e, F32) / (1.0 + e), 0.0)
        eta = (eps1 + U_F32) / (1.0 - eps1 - U_F32)
    return s, eta


def silu(x: np.ndarray, exp_ulps: float) -> Elementwise:
    """ggml_vec_silu_f32, x / (1 + exp(-x)) with the polynomial exp ``ggml_v_expf_m2``.

    Bound, per element, from the arithmetic: the exp is within ``exp_ulps``
    ULP of e = exp(-x), a relative error eps1 = exp_ulps * ulp(e) / (1 + e)
    once divided by 1 + e (so it fades where e is small or subnormal); the
    addition 1 + E rounds once (u = 2^-24); the quotient relative to
    x / (1 + e) is then off by at most eta = (eps1 + u) / (1 - eps1 - u);
    the division rounds last (0.5 ULP).  So the allowed error is
    ``(0.5 ulp + eta |s|) / ulp(s)``: ~2.5 ULP near 0, up to
    ``exp_ulps * 2 + 1.5`` ULP where e dominates.

    Reference semantics at the edges (scalar ``x/(1.0f + expf(-x))``): NaN
    stays NaN; +inf gives +inf; -inf gives inf/inf = NaN; where fp32
    ``expf(-x)`` overflows (x < -88.72...) the result is x/inf = -0, not the
    tiny value SiLU has in the reals.
    """
    (x,) = _f64(x)
    s, eta = _silu_parts(x, exp_ulps)
    with np.errstate(invalid="ignore", over="ignore"):
        return Elementwise(s, allowed_ulps(s, eta * np.abs(s), "f32"), "f32")


def swiglu(x: np.ndarray, g: np.ndarray, exp_ulps: float) -> Elementwise:
    """ggml_vec_swiglu_f32, silu(x) * g: SiLU as in :func:`silu`, rounded to fp32 (within
    ``eta |s| + 0.5 ulp`` of the reference s), then one more multiply (0.5 ULP).  The
    intermediate error scales with |g|: ``delta = |g| (eta |s| + 0.5 ulp(s))``.

    Special cases follow the scalar reference ``silu(x) * g``, in which SiLU is an fp32 value:
    NaN anywhere is NaN; an infinite g gives +-inf, or NaN where that fp32 SiLU is zero -- x = 0,
    saturated x < -88.72, and x = +-2^-149, whose SiLU 2^-150 rounds to 0.  For infinite g the
    reference therefore takes SiLU as fp32 evaluates it (``fp32(x / fp32(1 + fp32(exp(-x))))``).
    """
    x, g = _f64(x, g)
    s, eta = _silu_parts(x, exp_ulps)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        s32 = round_to(x / round_to(1.0 + round_to(expf_reference(-x), F32), F32), F32)
        exact = np.where(np.isinf(g), s32 * g, s * g)
        delta = np.abs(g) * (eta * np.abs(s) + 0.5 * ulp(np.abs(s) * (1 + eta), F32))
        return Elementwise(exact, allowed_ulps(exact, delta, "f32"), "f32")


def soft_max(x: np.ndarray, mx: float, exp_ulps: float) -> Elementwise:
    """ggml_vec_soft_max_f32's output row, exp(x - max) with the polynomial exp.

    The subtraction rounds to fp32 in the scalar reference and in the RVV
    path alike (vfsub.vf), so the reference is exp(fp32(x - max)), exact,
    with fp32 ``expf``'s overflow to +inf; the allowed error is the exp's own
    bound ``exp_ulps`` (ULPs of its result).  Edges: -inf entries give 0,
    (-inf) - (-inf) and NaN give NaN, an entry above max by more than
    88.72... gives +inf.
    """
    (x,) = _f64(x)
    with np.errstate(invalid="ignore", over="ignore"):
        d = (x.astype(np.float32) - np.float32(mx)).astype(np.float64)
    e = expf_reference(d)
    return Elementwise(e, np.full(e.shape, float(exp_ulps)), "f32")


def double_sum(terms: np.ndarray) -> Accumulated:
    """A sum of float32 values accumulated in double in any order (vfwredusum.vs into f64):
    within gamma(n - 1) * sum|t| with u = 2^-53 of the exact sum (``math.fsum``) -- and exact
    when every term is an integer and sum|t| < 2^53 (each partial sum is then an integer that
    double represents, in any order: e.g. softmax of a row of equal entries, n ones).  NaN or
    infinite terms make the sum NaN or infinite, as IEEE addition does."""
    t = np.asarray(terms, np.float64)
    if not np.all(np.isfinite(t)):
        with np.errstate(invalid="ignore"):
            return Accumulated(float(np.sum(t)), 0.0)
    abs_sum = float(np.abs(t).sum())
    exact_sums = bool(np.all(t == np.round(t))) and abs_sum < 2.0 ** 53
    return Accumulated(math.fsum(t.tolist()), 0.0 if exact_sums else gamma(max(t.size - 1, 0), U_F64) * abs_sum)


def cvar(x: np.ndarray, mean: float) -> tuple[Elementwise, Accumulated]:
    """ggml_vec_cvar_f32: the centred row y = x - mean (one fp32 subtraction, correctly
    rounded, bit-exact) and its variance sum(fp32(y^2)) / n.

    The squares are rounded to fp32 in the scalar reference and the RVV path
    alike (vfmul.vv), then accumulated in double in any order (vfwredusum.vs)
    and divided by n in double.  With S = sum of those fp32 squares (all
    >= 0): |got - S/n| <= gamma(n - 1) S/n + u |S/n| <= gamma(n) S/n, u = 2^-53.
    When the squares are integers summing below 2^53 the sum is exact and the
    result is S/n rounded once: bit-exact (small-integer rows).
    """
    (x,) = _f64(x)
    with np.errstate(invalid="ignore", over="ignore"):
        yc = fma(x, 1.0, -np.float64(mean), F32)
        centred = _rounded_once(x - mean, "f32", yc)
        sq = round_to(yc * yc, "f32")
    n = x.size
    acc = double_sum(sq)
    return centred, Accumulated(acc.exact / n, 0.0 if acc.bound == 0 else gamma(n, U_F64) * acc.exact / n)

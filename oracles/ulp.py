"""Units in the last place, and exactly rounded reference operations, for binary32 and binary16.

What the elementwise kernels are measured in.  ``ulp(x, fmt)`` is the
spacing of ``fmt`` at the magnitude of the real number ``x`` (the quantum of
its binade; the subnormal spacing below the normal range), so
``|got - exact| / ulp(exact)`` is the error in ULPs in the usual sense of
libm accuracy tables: a correctly rounded result is within 0.5 ULP.

The references are computed in float64 and rounded once to the target
format.  Where a float64 intermediate could itself round (the sum in a
fused multiply-add), it is rounded *to odd* first: with 53 >= p + 2 bits, a
round-to-odd intermediate followed by a round-to-nearest-even conversion
gives the correctly rounded result (Boldo & Melquiond, "Emulation of FMA
and correctly rounded sums: proved algorithms using rounding to odd", IEEE
TC 2008), so there is no double rounding.  Nothing here imports the harness.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Format:
    """An IEEE binary format: precision ``p`` (significant bits) and exponent range."""

    name: str
    p: int
    emin: int
    emax: int
    dtype: type

    @property
    def max(self) -> float:
        """The largest finite value."""
        return (2.0 - 2.0 ** (1 - self.p)) * 2.0 ** self.emax

    @property
    def overflow(self) -> float:
        """Round-to-nearest turns every value of at least this magnitude into infinity."""
        return 2.0 ** (self.emax + 1) - 2.0 ** (self.emax - self.p)

    @property
    def min_subnormal(self) -> float:
        return 2.0 ** (self.emin - self.p + 1)


F32 = Format("f32", 24, -126, 127, np.float32)
F16 = Format("f16", 11, -14, 15, np.float16)
FORMATS = {f.name: f for f in (F32, F16)}


def fmt_of(name: str | Format) -> Format:
    if isinstance(name, Format):
        return name
    if name not in FORMATS:
        raise ValueError(f"unknown format {name!r}; expected one of {sorted(FORMATS)}")
    return FORMATS[name]


def ulp(x: np.ndarray | float, fmt: str | Format) -> np.ndarray:
    """Spacing of ``fmt`` at ``|x|`` (float64 in, float64 out): 2^(max(e, emin) - p + 1) where
    2^e <= |x| < 2^(e+1); the subnormal spacing for |x| below the normal range, including 0.
    Infinite or NaN ``x`` gives NaN."""
    f = fmt_of(fmt)
    a = np.abs(np.asarray(x, np.float64))
    with np.errstate(divide="ignore", invalid="ignore"):
        _, e = np.frexp(a)  # a = m * 2^e with 0.5 <= m < 1, so the binade is 2^(e-1)
    e = np.where(a == 0, f.emin, np.maximum(e - 1, f.emin))
    out = np.ldexp(1.0, e - f.p + 1)
    return np.where(np.isfinite(a), out, np.nan)


def round_to(x: np.ndarray, fmt: str | Format) -> np.ndarray:
    """float64 -> ``fmt`` with one round-to-nearest-even (NumPy's conversions; the float64 ->
    float16 one rounds from the full double, not through float32), returned as float64."""
    f = fmt_of(fmt)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(x, np.float64).astype(f.dtype).astype(np.float64)


def _round_to_odd_sum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a + b in float64 rounded to odd: the nearest-even sum, moved one step towards the exact
    sum when it is inexact and its last bit is even (TwoSum gives the exact rounding error)."""
    with np.errstate(invalid="ignore", over="ignore"):
        s = a + b
        bv = s - a
        err = (a - (s - bv)) + (b - bv)  # TwoSum (Knuth): a + b = s + err exactly, if s is finite
    fix = np.isfinite(s) & (err != 0) & ((s.view(np.uint64) & np.uint64(1)) == 0)
    if np.any(fix):
        s = s.copy()
        s[fix] = np.nextafter(s[fix], np.where(err[fix] > 0, np.inf, -np.inf))
    return s


def fma(a: np.ndarray, b: np.ndarray, c: np.ndarray, fmt: str | Format) -> np.ndarray:
    """a*b + c with a single rounding to ``fmt`` (IEEE fusedMultiplyAdd), as float64.

    Requires a*b to be exact in float64, which holds for operands of at most
    26 significant bits each (fp32 x fp32, fp16 x fp16, fp16 x fp32).  IEEE
    special cases follow from float64 arithmetic: NaN propagates, inf * 0 and
    inf - inf are NaN, overflow gives infinity.
    """
    a, b, c = (np.asarray(v, np.float64) for v in (a, b, c))
    with np.errstate(invalid="ignore", over="ignore"):
        p = a * b
    return round_to(_round_to_odd_sum(p, np.broadcast_to(c, p.shape)), fmt)


def ulp_error(got: np.ndarray, exact: np.ndarray, fmt: str | Format, *, signed_zeros: bool = True) -> np.ndarray:
    """|got - exact| in ULPs of ``fmt`` at ``exact`` (a float64 reference value, not rounded).

    Special values: NaN vs NaN and equal infinities are 0; a NaN on one side
    only is inf.  An infinite ``got`` against a finite ``exact`` is measured
    from the overflow threshold (0 when ``exact`` itself rounds to that
    infinity), so a correctly rounded overflow costs nothing and an overflow
    that comes too early costs its distance.  Infinities of opposite sign,
    or an infinity against a finite result of the other sign, are inf.  With
    ``signed_zeros``, a zero of the wrong sign where ``exact`` is exactly
    zero is inf too (the sign of a zero result is part of IEEE semantics).
    """
    f = fmt_of(fmt)
    g = np.asarray(got, np.float64)
    e = np.asarray(exact, np.float64)
    out = np.full(np.broadcast(g, e).shape, np.inf)
    g, e = np.broadcast_to(g, out.shape), np.broadcast_to(e, out.shape)
    fin = np.isfinite(g) & np.isfinite(e)
    with np.errstate(invalid="ignore"):
        out[fin] = np.abs(g[fin] - e[fin]) / ulp(e[fin], f)
        out[np.isnan(g) & np.isnan(e)] = 0.0
        both_inf = np.isinf(g) & np.isinf(e)
        out[both_inf & (g == e)] = 0.0
        early = np.isinf(g) & np.isfinite(e) & (np.sign(g) == np.sign(e))
        out[early] = np.maximum(f.overflow - np.abs(e[early]), 0.0) / ulp(e[early], f)
    if signed_zeros:
        out[(e == 0) & (g == 0) & (np.signbit(e) != np.signbit(g))] = np.inf
    return out


def allowed_ulps(exact: np.ndarray, delta: np.ndarray | float, fmt: str | Format) -> np.ndarray:
    """The ULP error a result may have when it is the round-to-nearest of an intermediate within
    ``delta`` (absolute) of ``exact``: (0.5 ulp(|exact| + delta) + delta) / ulp(exact).

    With ``delta = 0`` this is 0.5 (correct rounding).  The ulp of the
    final rounding is taken at |exact| + delta because the intermediate may
    sit in the next binade up.  Non-finite ``exact`` gives 0 (those must
    match exactly, see :func:`ulp_error`).
    """
    f = fmt_of(fmt)
    e = np.abs(np.asarray(exact, np.float64))
    d = np.broadcast_to(np.asarray(delta, np.float64), e.shape)
    with np.errstate(invalid="ignore", over="ignore"):
        out = (0.5 * ulp(e + d, f) + d) / ulp(e, f)
    return np.where(np.isfinite(e), out, 0.0)

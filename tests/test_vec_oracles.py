"""The vec-ops oracles checked against exact rational arithmetic, and the RVV inventory parser.

The differential tests are only as good as their references: here the ULP
function, the exactly rounded fma (round-to-odd), NumPy's float64 -> float16
conversion, the ULP error of special values and the scalar-reference edge
semantics of the SiLU / softmax / cvar oracles are pinned down without QEMU.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from harness.ggml import csource
from oracles import vec_ops as VO
from oracles.ulp import F16, F32, Format, allowed_ulps, fma, round_to, ulp, ulp_error


def round_exact(q: Fraction, f: Format) -> float:
    """A rational rounded to nearest-even in format ``f`` (with subnormals and overflow to inf)."""
    if q == 0:
        return 0.0
    e = math.floor(math.log2(abs(q)))
    # log2 of a Fraction can be off by one near powers of two: fix the binade exactly.
    while Fraction(2) ** e > abs(q):
        e -= 1
    while Fraction(2) ** (e + 1) <= abs(q):
        e += 1
    quantum = Fraction(2) ** (max(e, f.emin) - f.p + 1)
    m = q / quantum
    r = round(m)  # Python rounds Fractions half to even
    out = r * quantum
    if abs(out) >= Fraction(2) ** (f.emax + 1):
        return math.copysign(math.inf, q)
    return float(out)


def random_f32(rng: np.random.Generator, n: int, lo: int, hi: int) -> np.ndarray:
    """Random float32 values with random signs, full mantissas and exponents in [lo, hi]."""
    m = 1 + rng.integers(0, 1 << 23, n) / 2.0 ** 23
    return (rng.choice([-1.0, 1.0], n) * m * np.exp2(rng.integers(lo, hi + 1, n))).astype(np.float32)


# ------------------------------------------------------------------ ulp


@pytest.mark.parametrize("fmt", [F32, F16], ids=["f32", "f16"])
def test_ulp_is_the_spacing_of_the_format(fmt: Format) -> None:
    """ulp(x) is the distance from |x| to the next representable value, for every finite x of
    the format (all 65536 fp16 patterns, a million random fp32 patterns)."""
    if fmt is F16:
        x = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    else:
        x = np.random.default_rng(1).integers(0, 1 << 32, 1 << 20, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x = np.abs(x[np.isfinite(x)])
    x = x[x < np.finfo(fmt.dtype).max]
    assert np.array_equal(ulp(x.astype(np.float64), fmt), np.spacing(x).astype(np.float64))


def test_ulp_values() -> None:
    assert ulp(0.0, F32) == 2.0 ** -149 and ulp(1.0, F32) == 2.0 ** -23 and ulp(-3.0, F32) == 2.0 ** -22
    assert ulp(65504.0, F16) == 32.0 and ulp(2.0 ** -20, F16) == 2.0 ** -24
    assert np.isnan(ulp(np.inf, F32)) and np.isnan(ulp(np.nan, F16))


# ------------------------------------------------------------------ rounding


@pytest.mark.parametrize("fmt", [F32, F16], ids=["f32", "f16"])
def test_fma_is_correctly_rounded(fmt: Format) -> None:
    """fma against exact rational arithmetic over operands of wide and of close exponents (so
    cancellations, ties and float64 double-rounding traps all occur), subnormal results included."""
    rng = np.random.default_rng(2)
    n = 4000
    lo, hi = (-30, 30) if fmt is F32 else (-12, 6)  # fp16: products and sums stay finite
    a, b = random_f32(rng, n, lo, hi), random_f32(rng, n, lo, hi)
    if fmt is F16:
        a, b = (v.astype(np.float16).astype(np.float32) for v in (a, b))
    c = (-(a.astype(np.float64) * b)).astype(fmt.dtype).astype(np.float32)  # cancellations
    c[::3] = random_f32(rng, c[::3].size, 2 * lo, 2 * hi).astype(fmt.dtype)
    c[1::3] *= np.float32(1 + 2.0 ** -10)
    c = c.astype(fmt.dtype).astype(np.float32)
    got = fma(a, b, c, fmt)
    want = [round_exact(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z)), fmt) for x, y, z in zip(a, b, c)]
    assert np.array_equal(got, np.array(want))


def test_fma_avoids_double_rounding() -> None:
    """2^24 + 2 + (1 + 2^-20)(1 - 2^-20) = 2^24 + 3 - 2^-40 lies just below a tie of fp32:
    rounding to float64 first makes it the tie, which then rounds to even, up: wrong."""
    a, b, c = 1 + 2.0 ** -20, 1 - 2.0 ** -20, 2.0 ** 24 + 2
    assert float(np.float32(a)) == a and float(np.float32(b)) == b and float(np.float32(c)) == c
    assert float(np.float32(a * b + c)) == 2.0 ** 24 + 4  # the naive answer
    assert fma(np.array([a]), np.array([b]), np.array([c]), F32)[0] == 2.0 ** 24 + 2


def test_fma_special_values() -> None:
    inf, nan = np.inf, np.nan
    got = fma(np.array([inf, 0.0, inf, 1.0, -0.0, 2.0 ** 100]), np.array([0.0, 5.0, 1.0, nan, 1.0, 2.0 ** 100]),
              np.array([1.0, -0.0, -inf, 1.0, -0.0, 0.0]), F32)
    assert np.isnan(got[0]) and np.isnan(got[2]) and np.isnan(got[3])
    assert got[1] == 0 and not np.signbit(got[1])  # +0 + -0 = +0
    assert got[4] == 0 and np.signbit(got[4])      # -0 + -0 = -0
    assert got[5] == inf                           # overflow


def test_round_to_f16_rounds_once_from_float64() -> None:
    """NumPy's float64 -> float16 rounds from the full double (no detour through float32, which
    would turn 1 + 2^-11 + 2^-40 into the tie 1 + 2^-11 and then round it down to 1)."""
    x = np.array([1 + 2.0 ** -11 + 2.0 ** -40, 1 + 2.0 ** -11, 65519.99, 65520.0, 2.0 ** -25, 2.0 ** -25 + 2.0 ** -60])
    assert round_to(x, F16).tolist() == [1 + 2.0 ** -10, 1.0, 65504.0, np.inf, 0.0, 2.0 ** -24]
    rng = np.random.default_rng(3)
    y = rng.uniform(-70000, 70000, 3000) * np.exp2(rng.integers(-30, 1, 3000))
    assert np.array_equal(round_to(y, F16), [round_exact(Fraction(float(v)), F16) for v in y])


# ------------------------------------------------------------------ ulp_error / allowed_ulps


def test_ulp_error_of_special_values() -> None:
    g = np.array([np.nan, np.nan, 1.0, np.inf, np.inf, -np.inf, np.inf, 0.0, -0.0, 1.0 + 2.0 ** -23])
    e = np.array([np.nan, 1.0, np.nan, np.inf, F32.overflow * 2, np.inf, F32.max, -0.0, -0.0, 1.0])
    err = ulp_error(g, e, F32)
    assert err[0] == 0 and err[1] == np.inf and err[2] == np.inf and err[3] == 0
    assert err[4] == 0                      # exact beyond the overflow threshold: inf is right
    assert err[5] == np.inf                 # opposite infinities
    assert err[6] == 0.5 * 2.0 ** 104 / ulp(F32.max, F32)  # inf from FLT_MAX: half an ulp early
    assert err[7] == np.inf and err[8] == 0  # signed zeros
    assert ulp_error(g[7:8], e[7:8], F32, signed_zeros=False)[0] == 0
    assert err[9] == 1.0


def test_allowed_ulps() -> None:
    e = np.array([1.0, 3.0, np.inf, np.nan])
    assert allowed_ulps(e, 0.0, F32).tolist() == [0.5, 0.5, 0.0, 0.0]
    # An intermediate just below 2 may round up into the next binade: its half ulp is the larger one.
    assert allowed_ulps(np.array([2 - 2.0 ** -24]), 2.0 ** -23, F32)[0] == pytest.approx((2.0 ** -23 + 2.0 ** -23) / 2.0 ** -23)


# ------------------------------------------------------------------ kernel oracles: reference semantics


def test_mad_f16_rounds_the_scale_on_the_fp16_path() -> None:
    x = np.array([0.0, 1.0, 2.0 ** -10])
    y = np.array([1.0, 1.0, 1.0])
    assert VO.mad_f16(x, y, 1e5, fp16_arith=True).models[0][1][:2].tolist()[1] == np.inf
    assert np.isnan(VO.mad_f16(x, y, 1e5, fp16_arith=True).models[0][1][0])  # 0 * inf
    assert VO.mad_f16(x, y, 1e5, fp16_arith=False).models[0][1][0] == 1.0     # scale kept in fp32
    assert VO.mad_f16(x, y, 2.0 ** -25, fp16_arith=True).models[0][1].tolist() == [1.0, 1.0, 1.0]  # scale -> 0


def test_silu_reference_saturates_like_fp32_expf() -> None:
    x = np.array([-89.0, -88.0, -0.0, np.inf, -np.inf, np.nan, 20.0])
    r = VO.silu(x, 1.95)
    assert r.exact[0] == 0 and np.signbit(r.exact[0])              # expf(89) overflows: -0
    assert 0 > r.exact[1] > -1e-35                                 # expf(88) does not
    assert r.exact[2] == 0 and np.signbit(r.exact[2])
    assert r.exact[3] == np.inf and np.isnan(r.exact[4]) and np.isnan(r.exact[5])
    assert np.all(r.allowed[[1, 6]] > 0.5) and np.all(r.allowed[[1, 6]] < 2 * 1.95 + 1.5)


def test_swiglu_takes_silu_as_fp32_for_infinite_gates() -> None:
    """silu(2^-149) = 2^-150 rounds to 0 in fp32, and 0 * inf is NaN in the scalar reference."""
    r = VO.swiglu(np.array([2.0 ** -149, 1.0, -100.0]), np.array([np.inf, -np.inf, np.inf]), 1.95)
    assert np.isnan(r.exact[0]) and r.exact[1] == -np.inf and np.isnan(r.exact[2])


def test_soft_max_and_sums() -> None:
    r = VO.soft_max(np.array([-np.inf, 0.0, 100.0, np.nan]), 0.0, 1.95)
    assert r.exact[0] == 0 and r.exact[1] == 1 and r.exact[2] == np.inf and np.isnan(r.exact[3])
    assert VO.double_sum(np.ones(1000)) == VO.Accumulated(1000.0, 0.0)   # integers: exact
    assert VO.double_sum(np.array([0.5, 0.25])).bound > 0
    assert np.isnan(VO.double_sum(np.array([np.inf, -np.inf])).exact)


def test_cvar_reference() -> None:
    centred, var = VO.cvar(np.full(7, -2.75), -2.75)
    assert centred.models[0][1].tolist() == [0.0] * 7 and var == VO.Accumulated(0.0, 0.0)
    centred, var = VO.cvar(np.array([1.0, 2.0, 4.0]), 1.0)
    assert var == VO.Accumulated(10 / 3, 0.0)                         # exact sum, one division
    assert VO.cvar(np.array([3e19, 0.0]), 0.0)[1].exact == np.inf     # the fp32 square overflows


def test_mad_f32_unroll_chain_order() -> None:
    """The chain adds row 0 first: (1 + 2^-24) + 2^-24 differs from 1 + (2^-24 + 2^-24)."""
    x = np.array([[1.0], [1.0], [1.0]])
    v = np.array([2.0 ** -24, 2.0 ** -24, 0.0])
    r = VO.mad_f32_unroll(x, v, np.array([1.0]))
    assert r.models[0][1][0] == 1.0   # each step is a tie, rounded to even
    assert r.exact[0] == 1 + 2.0 ** -23


# ------------------------------------------------------------------ inventory parser


def test_rvv_functions_parser(tmp_path) -> None:
    src = tmp_path / "vec.h"
    src.write_text("\n".join([
        "void proto(int n);",
        "inline static void plain(int n) {",
        "#if defined(__riscv_v_intrinsic)",
        "    rvv();",
        "#else",
        "    scalar();",
        "#endif",
        "}",
        "inline static void other(int n) {",
        "#if defined(__AVX2__)",
        "#elif !defined(__riscv_v_intrinsic)",
        "    x();",
        "#else",
        "    y();",  # the else of a negated condition: only an RVV build compiles it
        "#endif",
        "}",
        "inline static void simd(int n) {",
        "#if defined(GGML_SIMD)",  # defined by the header in an RVV build only
        "    GGML_F32_VEC_FMA(n);",
        "#else",
        "    scalar();",
        "#endif",
        "}",
        "inline static void vlen(int n) {",
        "    size_t vl = __riscv_vlenb();",  # an intrinsic, whatever the preprocessor says
        "}",
        "#if defined(__ARM_NEON)",
        "inline static int neon_helper(int x) {",
        "    return x;",
        "}",
        "#elif defined(__riscv_v_intrinsic) && defined(__riscv_zvfh)",
        "// helper",
        "inline static int rvv_helper(int x) {",
        "    return x;",
        "}",
        "#endif",
        "ggml_float after(int n) {",
        "    return 0;",
        "}",
    ]))
    header = tmp_path / "simd-mappings.h"
    header.write_text("#if defined(__riscv_v_intrinsic)\n#define GGML_SIMD\n#endif\n")
    cfile, headers = csource.CFile.read(src), [csource.CFile.read(header)]
    found = csource.rvv_functions(cfile, ["zvfh"], headers)
    assert set(found) == {"plain", "other", "simd", "vlen", "rvv_helper"}
    assert {n for n, r in found.items() if r.intrinsics} == {"vlen"}
    assert {n for n, r in found.items() if r.only_rvv} == {"rvv_helper"}
    assert found["rvv_helper"].function.line == 33 and found["rvv_helper"].function.end == 35
    # without zvfh the helper is not compiled at all; without the header GGML_SIMD is never defined
    assert set(csource.rvv_functions(cfile, [], headers)) == {"plain", "other", "simd", "vlen"}
    assert set(csource.rvv_functions(cfile, ["zvfh"])) == {"plain", "other", "vlen", "rvv_helper"}
    assert not cfile.notes

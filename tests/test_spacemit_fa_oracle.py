"""oracles/spacemit_fa.py: the re-expressed exp and tanh within their measured errors over their input ranges, its
fused multiply-add exact, and the tiled kernel's bound (oracles/attention.py's f32 bound of ``tiled_view``) held
by a step-by-step NumPy simulation of the kernel's arithmetic (SpacemiT's rvv_kernels.cpp, VLEN 1024)."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from harness.core import settings
from oracles import attention as A
from oracles import spacemit_fa as SF
from oracles.ulp import fma

F32 = np.float32
#: Every STRIDE-th input of each range by default (RVVDIFF_EXPF_EXHAUSTIVE=1: all of them, 13 + 14 minutes).
STRIDE = 4093


def _stride() -> int:
    return 1 if settings.get("EXPF_EXHAUSTIVE") == "1" else STRIDE


def test_exp_within_its_measured_error_over_its_inputs() -> None:
    worst = tiny = 0.0
    for x in SF.float32_range(*SF.EXP_INPUTS, stride=_stride()):
        ulps, _, sub = SF.exp_error(x)
        worst, tiny = max(worst, ulps), max(tiny, sub)
    assert worst <= SF.EXP_POLY_ULPS, f"expf_poly: {worst} ULP, but should be <= EXP_POLY_ULPS={SF.EXP_POLY_ULPS}"
    assert tiny <= 1.3, f"expf_poly: {tiny} x 2^-149 where the result is subnormal, but should be <= 1.3"
    assert SF.EXP_POLY_ULPS <= A.EXP_ULPS  # the attention oracle's allowance


def test_exp_at_its_worst_input_and_edges() -> None:
    """The measured worst point; exp(-0) = 1; -inf (padding, masked positions) gives 0."""
    x = np.array([0xC0A65BA5], np.uint32).view(F32)
    assert abs(SF.exp_error(x)[0] - 1.9535802) < 1e-6
    assert SF.expf_poly(np.array([-0.0, 0.0, -np.inf], F32)).tolist() == [1.0, 1.0, 0.0]


def test_tanh_within_its_measured_error_over_its_inputs() -> None:
    worst = 0.0
    for x in SF.float32_range(*SF.TANH_INPUTS, stride=_stride()):
        worst = max(worst, SF.tanh_error(x)[0])
    assert worst <= SF.TANH_POLY_ABS, f"tanh_poly: {worst} x 2^-24, but should be <= TANH_POLY_ABS={SF.TANH_POLY_ABS}"
    assert SF.TANH_POLY_ABS * 2.0 ** -24 <= A.TANH_ULPS * 2.0 ** -23  # the attention oracle's allowance
    assert SF.tanh_error(np.array([0x3F1FB1E6], np.uint32).view(F32))[0] > 2.04


def test_tanh_is_odd_and_saturates() -> None:
    x = np.array([0.5, 3.0, 20.0, np.inf], F32)
    assert np.array_equal(SF.tanh_poly(-x), -SF.tanh_poly(x))
    assert SF.tanh_poly(np.array([np.inf, -np.inf], F32)).tolist() == [1.0, -1.0]


@given(seed=st.integers(0, 2**32 - 1), ties=st.booleans())
def test_fma32_is_one_rounding(seed: int, ties: bool) -> None:
    """Against oracles.ulp.fma (round to odd, exact), on random float32 operands and on sums made to land on
    float32 ties (a * b exact in float32 plus half an ulp) and in the subnormal range."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(4096).astype(F32).astype(np.float64)
    b = (rng.standard_normal(4096) * np.exp2(rng.integers(-140, 20, 4096))).astype(F32).astype(np.float64)
    c = rng.standard_normal(4096).astype(F32).astype(np.float64)
    if ties:
        a = np.round(a * 64) / 64
        b = np.round(b * 64) / 64
        c = (a * b).astype(F32).astype(np.float64) * (1 + 2.0 ** -24)
    assert np.array_equal(SF.fma32(a, b, c), fma(a, b, c, "f32"), equal_nan=True)


def test_tiled_q_folds_the_scale_before_fp16() -> None:
    """fp16(f32(q * f32(scale / softcap))): 1/3 times 3 is not 1 in fp16 after the scale, 0.5 is exact."""
    q = np.array([[[1.0, 3.0, 2049.0]]])
    assert SF.tiled_q(q, 0.5, 0.0).tolist() == [[[0.5, 1.5, 1024.0]]]
    got = SF.tiled_q(q, 1.0, 3.0)
    want = (q.astype(F32) * (F32(1.0) / F32(3.0))).astype(F32).astype(np.float16).astype(np.float64)
    assert np.array_equal(got, want)


# ------------------------------------------------------------ the tiled kernel, simulated

def simulate_tiled(a: A.Attention) -> np.ndarray:
    """forward_flash_attn_ext_f16_tiled_vlen1024_vf16's arithmetic, row by row (the rows of a tile do not mix):
    Q packed as fp16 of the scaled q; per 64-wide KV tile the scores summed over DK in f32 by fused multiply-adds
    (vfwmacc), the softcap (tanh_poly, times c), the padding set to -inf (after the softcap: the corrected order,
    docs/spacemit.md), + f32(mask * slope); the running maximum; the weights by expf_poly(f32(s - M)), summed in
    order; V accumulated in f32 by fused multiply-adds; rescales by f32 expf; the sink; 1/S times the sum."""
    h, n_q, dk = a.q.shape
    q = SF.tiled_q(a.q, a.scale, a.softcap)
    k, v = a.kv_per_head(a.k), a.kv_per_head(a.v)
    n_kv, dv = k.shape[1], v.shape[2]
    slopes = A.alibi_slopes(h, a.max_bias)
    out = np.zeros((n_q, h, dv))
    f32 = lambda x: np.float64(F32(x))  # noqa: E731
    for hh in range(h):
        for i in range(n_q):
            m, s, acc = -math.inf, 0.0, np.zeros(dv)
            for ic in range(0, n_kv, 64):
                kv = np.arange(ic, min(ic + 64, n_kv))
                kq = np.zeros(kv.size)
                for d in range(dk):
                    kq = SF.fma32(q[hh, i, d], k[hh, kv, d], kq)
                if a.softcap:
                    kq = (SF.tanh_poly(kq).astype(np.float64) * F32(a.softcap)).astype(F32).astype(np.float64)
                if a.mask is not None:
                    mask = a.mask[hh % a.mask.shape[0], i, kv].astype(F32) * F32(slopes[hh])
                    kq = (kq.astype(F32) + mask.astype(F32)).astype(np.float64)
                top = kq.max()
                if top == -math.inf:
                    continue
                new = max(m, top)
                if new > m:
                    ms = f32(np.exp(F32(m - new)))
                    acc, s = (acc * ms).astype(F32).astype(np.float64), f32(s * ms)
                m = new
                p = SF.expf_poly((kq - m).astype(F32)).astype(np.float64)
                row = 0.0
                for x in p:
                    row = f32(row + x)
                s = f32(s + row)
                for t in range(kv.size):
                    acc = SF.fma32(p[t], v[hh, kv[t]], acc)
            if a.sinks is not None:
                sink = a.sinks[hh]
                ms = vs = 1.0
                if sink > m:
                    ms = f32(np.exp(F32(m - sink)))
                    acc = (acc * ms).astype(F32).astype(np.float64)
                else:
                    vs = f32(np.exp(F32(sink - m)))
                s = f32(f32(s * ms) + vs)
            inv = 0.0 if s == 0 else f32(1.0 / s)
            out[i, hh] = (acc * inv).astype(F32)
    return out


@st.composite
def tiled_problems(draw: st.DrawFn) -> A.Attention:
    """Small problems of the tiled kernel's kinds: one to three KV tiles and a padded last one, sharp and flat
    softmaxes, rising scores (a new maximum every tile), softcap, masks with ALiBi, sinks, GQA."""
    kv_heads = draw(st.integers(1, 2))
    heads = kv_heads * draw(st.sampled_from([1, 2]))
    n_q, n_kv, dk, dv = draw(st.integers(1, 3)), draw(st.integers(1, 150)), draw(st.sampled_from([4, 16])), 4
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    q = rng.standard_normal((heads, n_q, dk)) * draw(st.sampled_from([0.25, 1.0, 3.0, 30.0]))
    k = rng.standard_normal((kv_heads, n_kv, dk))
    if draw(st.booleans()):  # scores rising along the KV positions
        k = k * 0.01 + np.linspace(0, 4, n_kv)[None, :, None] * np.sign(q.sum(axis=(0, 1)))
    k = k.astype(np.float16).astype(np.float64)
    v = (rng.standard_normal((kv_heads, n_kv, dv)) + draw(st.sampled_from([0.0, 2.0]))).astype(np.float16)
    mask, max_bias = None, 0.0
    if draw(st.booleans()):
        mask = A.round_f16(rng.standard_normal((draw(st.sampled_from(sorted({1, heads}))), n_q, n_kv)))
        mask[rng.random(mask.shape) < draw(st.sampled_from([0.0, 0.5, 0.97]))] = -np.inf
        max_bias = draw(st.sampled_from([0.0, 8.0]))
    sinks = rng.standard_normal(heads).astype(F32).astype(np.float64) * 2 if draw(st.booleans()) else None
    scale = float(draw(st.sampled_from([F32(1 / math.sqrt(dk)), F32(1.0), F32(0.125)])))
    return A.Attention(q.astype(F32).astype(np.float64), k, v.astype(np.float64), mask, sinks, scale, max_bias,
                       draw(st.sampled_from([0.0, 20.0, 50.0])))


@given(a=tiled_problems())
def test_tiled_bound_holds_for_the_simulated_kernel(a: A.Attention) -> None:
    view = SF.tiled_view(a)
    ref = A.reference(view, "f32")
    bound = A.error_bound(view, ref, A.Arithmetic("f32"))
    err = np.abs(simulate_tiled(a) - ref.out)
    assert np.all(err <= bound), f"simulated tiled kernel: error / bound = {np.max(err / np.maximum(bound, 1e-300))}"

"""The matmul and attention oracles, checked against independent formulations, and their bounds
checked against step-by-step simulations of ggml's arithmetic (rounded in NumPy as the kernels round).

A bound that a faithful simulation of the kernel's own roundings can exceed would be
wrong; these tests search for such inputs (sharp softmaxes, rising maxima that force
rescales, jumps beyond fp16's normal range, fully masked rows, sinks, softcap, ALiBi).
"""

from __future__ import annotations

import math

import gguf
import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from oracles import attention as A
from oracles.matmul import matmul

F16, F32 = np.float16, np.float32

# ------------------------------------------------------------ blocks and Q rounding


@given(seed=st.integers(0, 2**32 - 1), nb=st.integers(1, 4), fmt=st.sampled_from(["q8_0", "q4_0"]))
def test_dequantize_matches_gguf(seed: int, nb: int, fmt: str) -> None:
    qtype = {"q8_0": gguf.GGMLQuantizationType.Q8_0, "q4_0": gguf.GGMLQuantizationType.Q4_0}[fmt]
    size = {"q8_0": 34, "q4_0": 18}[fmt]
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, (3, nb * size), dtype=np.uint16).astype(np.uint8)
    raw.reshape(3, nb, size)[:, :, :2] = rng.uniform(-1, 1, (3, nb, 1)).astype(np.float16).view(np.uint8)
    want = gguf.quants.dequantize(raw, qtype)
    assert np.array_equal(A.dequantize(fmt, raw, nb * 32), want.astype(np.float64))


@given(seed=st.integers(0, 2**32 - 1), integers=st.booleans())
def test_quantize_q8_0_matches_gguf_up_to_ties(seed: int, integers: bool) -> None:
    """gguf rounds halves away from zero (ggml's reference); the oracle rounds them to even (the RVV
    path) and reports exactly those elements as ties, by fp16(d)."""
    rng = np.random.default_rng(seed)
    x = (rng.integers(-8, 9, (4, 64)) if integers else rng.standard_normal((4, 64)) * 3).astype(np.float32)
    got, tie = A.quantize_q8_0(x)
    ref = gguf.quants.dequantize(gguf.quants.quantize(x, gguf.GGMLQuantizationType.Q8_0),
                                 gguf.GGMLQuantizationType.Q8_0).astype(np.float64)
    diff = np.abs(got - ref)
    assert np.all(diff <= tie)
    assert np.all(diff[tie == 0] == 0)


def test_matmul_small_integers_by_hand() -> None:
    a = np.array([[[1, 2], [3, 4], [5, 6]]], np.float32)  # m = 3, k = 2
    b = np.array([[[1, 0], [0, 1]], [[1, 1], [2, -1]]], np.float32)  # 2 batches of n = 2 sharing A
    c, s = matmul(a, b, bcast=2)
    assert c.tolist() == [[[1, 3, 5], [2, 4, 6]], [[3, 7, 11], [0, 2, 4]]]
    assert s[1, 1].tolist() == [4, 10, 16]


# ------------------------------------------------------------ attention problems

@st.composite
def problems(draw: st.DrawFn, *, v_scale: float = 1.0) -> A.Attention:
    """Small attention problems of every kind the tests draw, plus adversarial score orders."""
    kv_heads = draw(st.integers(1, 2))
    heads = kv_heads * draw(st.sampled_from([1, 2, 4]))
    n_q, n_kv = draw(st.integers(1, 5)), draw(st.integers(1, 90))
    dk, dv = draw(st.sampled_from([32, 64])), draw(st.sampled_from([4, 8]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    order = draw(st.sampled_from(["random", "rising", "jumps"]))
    q = (rng.standard_normal((heads, n_q, dk)) * draw(st.sampled_from([0.25, 1.0, 3.0]))).astype(F32)
    k = rng.standard_normal((kv_heads, n_kv, dk)).astype(F16).astype(np.float64)
    if order != "random":  # K along Q's mean direction, growing: every position a new maximum
        step = 0.5 if order == "rising" else 12.0
        direction = np.sign(q.astype(np.float64).sum(axis=(0, 1)))
        k = k * 0.01 + (np.arange(n_kv) * step / (np.abs(q).sum(axis=(0, 1)) + 1).max())[None, :, None] * direction
        k = k.astype(F16).astype(np.float64)
    v = ((rng.standard_normal((kv_heads, n_kv, dv)) + draw(st.sampled_from([0.0, 2.0]))) * v_scale)
    v = v.astype(F16).astype(np.float64)
    mask = None
    max_bias = 0.0
    if draw(st.booleans()):
        mh = draw(st.sampled_from(sorted({1, heads})))
        mask = A.round_f16(rng.standard_normal((mh, n_q, n_kv)))
        mask[rng.random(mask.shape) < draw(st.sampled_from([0.0, 0.3, 0.97]))] = -np.inf
        max_bias = draw(st.sampled_from([0.0, 8.0]))
    sinks = (rng.standard_normal(heads) * 2).astype(F32).astype(np.float64) if draw(st.booleans()) else None
    scale = float(draw(st.sampled_from([F32(1 / math.sqrt(dk)), F32(1.0)])))
    softcap = draw(st.sampled_from([0.0, 20.0]))
    return A.Attention(q.astype(np.float64), k, v, mask, sinks, scale, max_bias, softcap)


def test_reference_matches_the_definition_row_by_row() -> None:
    """ref.out against a loop over rows in plain Python floats (math.exp, ggml's formulas)."""
    rng = np.random.default_rng(3)
    h, h_kv, n_q, n_kv, d = 4, 2, 3, 7, 5
    mask = A.round_f16(rng.standard_normal((2, n_q, n_kv)))
    mask[0, 1, :] = -np.inf  # a fully masked row for heads 0 and 2
    mask[1, 0, 3] = -np.inf
    att = A.Attention(rng.standard_normal((h, n_q, d)), rng.standard_normal((h_kv, n_kv, d)),
                      rng.standard_normal((h_kv, n_kv, d)), mask, np.array([0.5, -1.0, 3.0, 0.0]),
                      0.75, max_bias=8.0, softcap=4.0)
    ref = A.reference(att, "f32")
    n_log2 = 4  # 2^floor(log2(4))
    for hh in range(h):
        slope = (2 ** (-8 / n_log2)) ** (hh + 1)
        for i in range(n_q):
            terms = []
            for j in range(n_kv):
                m = mask[hh % 2, i, j]
                if m == -np.inf:
                    continue
                x = 0.75 * float(att.q[hh, i] @ att.k[hh // 2, j])
                terms.append((4.0 * math.tanh(x / 4.0) + slope * m, att.v[hh // 2, j]))
            if not terms:
                assert np.all(ref.out[i, hh] == 0)
                continue
            mx = max([s for s, _ in terms] + [att.sinks[hh]])
            num = sum(math.exp(s - mx) * vj for s, vj in terms)
            den = sum(math.exp(s - mx) for s, _ in terms) + math.exp(att.sinks[hh] - mx)
            assert np.allclose(ref.out[i, hh], num / den, rtol=1e-6, atol=1e-6)


def test_alibi_slopes_follow_ggml() -> None:
    """n_head = 6: n_head_log2 = 4; heads below it use m0^(h+1), the others m1^(2(h-4)+1)."""
    s = A.alibi_slopes(6, 8.0)
    m0, m1 = 2 ** (-8 / 4), 2 ** (-4 / 4)
    want = [m0 ** 1, m0 ** 2, m0 ** 3, m0 ** 4, m1 ** 1, m1 ** 3]
    assert np.allclose(s, want, rtol=1e-6)


# ------------------------------------------------------------ simulations of ggml's arithmetic

def _scores_f32(att: A.Attention, q_fmt: str) -> np.ndarray:
    """Scores as a kernel computes them: rounded dot (f32), scale, softcap, + slope * mask, in f32."""
    q, _ = A.round_q(q_fmt, att.q)
    dot = np.einsum("hid,hjd->hij", q, att.kv_per_head(att.k)).astype(F32)
    if att.softcap:
        s = (F32(att.softcap) * np.tanh(dot * F32(att.scale / att.softcap))).astype(F32)
    else:
        s = (dot * F32(att.scale)).astype(F32)
    bias = att.bias().astype(F32)
    with np.errstate(invalid="ignore"):
        return np.where(np.isneginf(bias), -np.inf, s + np.where(np.isneginf(bias), 0, bias)).astype(F32)


def simulate_one_chunk(att: A.Attention, q_fmt: str, f16_acc: bool) -> np.ndarray:
    """ops.cpp's one-chunk loop with its roundings (fp16 accumulator when ``f16_acc``), [n_q, H, DV]."""
    s_all = _scores_f32(att, q_fmt)
    v = att.kv_per_head(att.v)
    h, n_q, n_kv = s_all.shape
    dv = v.shape[2]
    acc = np.zeros((h, n_q, dv), F16 if f16_acc else F32)
    S = np.zeros((h, n_q), F32)
    M = np.full((h, n_q), -np.inf, F32)
    with np.errstate(invalid="ignore", over="ignore"):
        for j in range(n_kv):
            s = s_all[:, :, j]
            act = ~np.isneginf(s)
            new = act & (s > M)
            ms = np.where(new, np.exp(M - s).astype(F32), F32(1))
            vs = np.where(new, F32(1), np.exp(s - np.where(new, s, M)).astype(F32))
            M = np.where(new, s, M)
            if f16_acc:
                scaled = (acc.astype(np.float64) * ms.astype(F16).astype(np.float64)[:, :, None]).astype(F16)
                acc_new = np.where(new[:, :, None], scaled, acc)
                fma = acc_new.astype(np.float64) + v[:, j][:, None, :] * vs.astype(F16).astype(np.float64)[:, :, None]
                acc = np.where(act[:, :, None], fma.astype(F16), acc)
            else:
                acc_new = np.where(new[:, :, None], (acc * ms[:, :, None]).astype(F32), acc)
                fma = acc_new.astype(np.float64) + v[:, j][:, None, :] * vs.astype(np.float64)[:, :, None]
                acc = np.where(act[:, :, None], fma.astype(F32), acc)
            S = np.where(act, ((S * ms).astype(F32) + vs).astype(F32), S)
        out = acc.astype(F32)
        if att.sinks is not None:
            sk = att.sinks.astype(F32)[:, None]
            bigger = sk > M
            ms = np.where(bigger, np.exp(M - sk).astype(F32), F32(1))
            vs = np.where(bigger, F32(1), np.exp(sk - M).astype(F32))
            out = (out * ms[:, :, None]).astype(F32)
            S = ((S * ms).astype(F32) + vs).astype(F32)
        inv = np.where(S == 0, F32(0), (F32(1) / np.where(S == 0, F32(1), S)).astype(F32))
        out = (out * inv[:, :, None]).astype(F32)
    return out.transpose(1, 0, 2)


def simulate_materialised(att: A.Attention, q_fmt: str, p_round: str | None) -> np.ndarray:
    """soft_max_ext in f32 (sum in double), P rounded to V's dot type, then f32 dot products."""
    s = _scores_f32(att, q_fmt)
    h = s.shape[0]
    sinks = att.sinks.astype(F32) if att.sinks is not None else np.full(h, -np.inf, F32)
    mx = np.maximum(s.max(axis=2), sinks[:, None])
    with np.errstate(invalid="ignore"):
        e = np.exp(s - mx[:, :, None]).astype(F32)
        total = e.astype(np.float64).sum(axis=2) + np.exp(sinks[:, None] - mx).astype(np.float64)
        p = (e * (1.0 / total).astype(F32)[:, :, None]).astype(F32)
    if p_round == "f16":
        p = p.astype(F16).astype(F32)
    out = np.einsum("hij,hjd->ihd", p.astype(np.float64), att.kv_per_head(att.v))
    return out.astype(F32)


def _assert_within(got: np.ndarray, ref: A.Reference, bound: np.ndarray, what: str) -> None:
    defined = ~np.isnan(got)
    err = np.abs(got.astype(np.float64) - ref.out)
    bad = defined & (err > bound)
    assert not bad.any(), (f"{what}: |error| {err[bad].max():.3g} > bound {bound[bad][np.argmax(err[bad])]:.3g} "
                           f"(ratio {np.max(err[bad] / np.maximum(bound[bad], 1e-300)):.3g})")


@given(att=problems(), f16_acc=st.booleans())
def test_one_chunk_simulation_within_bound(att: A.Attention, f16_acc: bool) -> None:
    ref = A.reference(att, "f16")
    bound = A.error_bound(att, ref, A.Arithmetic("f16" if f16_acc else "f32"))
    _assert_within(simulate_one_chunk(att, "f16", f16_acc), ref, bound, f"one-chunk f16_acc={f16_acc}")


@given(att=problems(), p_round=st.sampled_from([None, "f16"]))
def test_materialised_simulation_within_bound(att: A.Attention, p_round: str | None) -> None:
    ref = A.reference(att, "f32")
    bound = A.error_bound(att, ref, A.Arithmetic("dot", p_round=p_round))
    _assert_within(simulate_materialised(att, "f32", p_round), ref, bound, f"materialised p_round={p_round}")


@given(att=problems(v_scale=64.0))
def test_fp16_bound_refuses_partial_sums_out_of_range(att: A.Attention) -> None:
    """Values that could overflow the fp16 accumulator either stay in range or are refused."""
    ref = A.reference(att, "f16")
    try:
        A.error_bound(att, ref, A.Arithmetic("f16"))
    except ValueError as e:
        assert "fp16" in str(e)


def f16_running_error_stepwise(att: A.Attention, ref: A.Reference, chunks: int) -> np.ndarray:
    """The fp16 accumulator's error bound as the recurrence of A.f16_running_error's docstring,
    one KV position at a time: E_k = E_{k-1} (1 + c) + c (|Y_k| + slack_k) + a_k (+ jump term)."""
    v = att.kv_per_head(att.v)  # [H, n_kv, DV]
    heads, n_q, n_kv = ref.w.shape
    c = 3 * A.U_F16 + 3 * A.U_F32
    out = np.zeros((n_q, heads, v.shape[2]))
    size = -(-n_kv // chunks)
    for h in range(heads):
        for i in range(n_q):
            delta = ref.delta[h, i]
            for start in range(0, n_kv, size):
                e = y = y_abs = v_seen = 0.0
                m = -np.inf
                for j in range(start, min(start + size, n_kv)):
                    if not ref.active[h, i, j]:
                        continue
                    w, s = ref.w[h, i, j], ref.scores[h, i, j]
                    y = y + w * v[h, j]
                    y_abs = y_abs + w * np.abs(v[h, j])
                    step = (c * (np.abs(y) + (math.exp(delta) - 1) * y_abs)
                            + (A.U_F16 * w * math.exp(delta) + A.F16_TINY) * np.abs(v[h, j]) + 2 * A.F16_TINY)
                    if np.isfinite(m) and s - m >= 14 * math.log(2) - 2 * delta:
                        step = step + A.F16_TINY * v_seen
                    e = e * (1 + c) + step
                    v_seen = v_seen + np.abs(v[h, j])
                    m = max(m, s)
                out[i, h] += e
    return out


@given(att=problems(), chunks=st.integers(1, 3))
def test_fp16_running_error_equals_its_recurrence(att: A.Attention, chunks: int) -> None:
    """The contracted evaluation in the oracle is the recurrence it documents, not a looser one."""
    ref = A.reference(att, "f16")
    fast = A.f16_running_error(att, ref, chunks)
    slow = f16_running_error_stepwise(att, ref, chunks)
    np.testing.assert_allclose(fast, slow, rtol=1e-9, atol=1e-300)


def test_fully_masked_rows_have_zero_output_and_bound() -> None:
    att = A.Attention(np.ones((1, 2, 4)), np.ones((1, 3, 4)), np.ones((1, 3, 4)),
                      np.array([[[0.0, 0.0, 0.0], [-np.inf] * 3]]), None, 0.5)
    ref = A.reference(att, "f32")
    for arith in (A.Arithmetic("f32"), A.Arithmetic("f16"), A.Arithmetic("dot", p_round="f16")):
        bound = A.error_bound(att, ref, arith)
        assert np.all(ref.out[1] == 0) and np.all(bound[1] == 0) and np.all(bound[0] > 0)

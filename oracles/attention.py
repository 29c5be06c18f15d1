"""Scaled-dot-product attention in float64, and error bounds for ggml's ways of computing it.

The semantics are ``ggml_flash_attn_ext``'s (ggml.h, ops.cpp): for query row i of head h,

    s_j = scale * (q_i . k_j)                      (or c * tanh(scale * q_i . k_j / c), softcap c)
          + slope_h * mask[h % mask_heads][i][j]   (ALiBi slope; 1 without max_bias)
    o_i = sum_j exp(s_j - M) v_j / (sum_j exp(s_j - M) + exp(sink_h - M))

over the KV positions whose mask is not -inf, with M the largest score (or sink).  K/V
head of query head h: ``h // (H / H_kv)`` (GQA).  A row whose every position is masked
has no terms: ggml defines its output as 0 (S = 0 gives 1/S := 0).

Bounds (derived in :func:`error_bound`; the kernel-side facts -- which rounding each
path applies -- are stated with the test table in cases/flash_attn.py):

* every score may be off by at most Delta (dot-product rounding, the rounding of Q to
  the K type's dot-product format where the oracle cannot reproduce it exactly, the
  scale / softcap / mask arithmetic, exp and tanh evaluation);
* the weighted sums may commit rounding errors: f32 sequences (gamma bound), an fp16
  accumulator (running error bound over the exact partial sums), or a dot product of
  rounded probabilities (the materialised path).

Nothing here imports the harness.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import ml_dtypes
import numpy as np

U_F32 = 2.0 ** -24
U_F16 = 2.0 ** -11
U_BF16 = 2.0 ** -8
U_F64 = 2.0 ** -53
#: Half the spacing of fp16 subnormals: the absolute error of rounding a tiny value to fp16.
F16_TINY = 2.0 ** -25
#: Smallest normal fp16: below it fp16 rounding is absolute (F16_TINY), not relative.
F16_MIN_NORMAL = 2.0 ** -14
#: ulp error allowed for expf / ggml_v_expf_m2 (<= 1.95 ulp by its comment) and tanhf.
EXP_ULPS = 2
TANH_ULPS = 2
QK = 32  # elements per q8_0 / q4_0 block

_BF16 = np.dtype(ml_dtypes.bfloat16)


def gamma(n: int, u: float = U_F32) -> float:
    """n u / (1 - n u) (Higham): the relative effect of n successive roundings."""
    nu = n * u
    return math.inf if nu >= 1 else nu / (1 - nu)


def _mm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` (stacked over the leading axes), summed by np.einsum instead of BLAS.

    NumPy's OpenBLAS splits larger products over one thread per core.  Beside a kernel server
    under QEMU on a few shared cores that costs more than it saves: on two cores, the float64
    reference of one 64 x 192 x (64 + 112) problem took ~75 ms that way and 1.5 ms on one thread,
    and the kernel calls between the products ran slower too (flash attention at VLEN 128, zvfh:
    25 s inside kernels with BLAS threads, 20 s without).  einsum runs on the calling thread only,
    about 4x slower than single-threaded BLAS: a few ms for the largest products the tests make.
    Any summation order is within the bounds' allowance for this oracle's own float64 sums."""
    return np.einsum("...ij,...jk->...ik", a, b)


# ----------------------------------------------------------------- formats


def round_f16(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to fp16 (nearest even), returned as float64."""
    with np.errstate(over="ignore"):
        return np.asarray(x, np.float32).astype(np.float16).astype(np.float64)


def round_bf16(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to bf16 (nearest even), returned as float64."""
    return np.asarray(x, np.float32).astype(_BF16).astype(np.float64)


def dequantize(fmt: str, raw: np.ndarray, n: int) -> np.ndarray:
    """Rows of q8_0 / q4_0 blocks (uint8, ``[..., n // 32 * block_bytes]``) as float64 ``[..., n]``.

    q8_0 block: fp16 d, 32 int8 q; value q * d.  q4_0 block: fp16 d, 16 bytes whose low
    nibbles are elements 0..15 and high nibbles 16..31; value (nibble - 8) * d.  Both
    products are exact in float32 (at most 8 + 11 significant bits).
    """
    raw = np.asarray(raw, np.uint8)
    lead = raw.shape[:-1]
    nb = n // QK
    if fmt == "q8_0":
        blocks = raw.reshape(*lead, nb, 34)
        q = blocks[..., 2:].view(np.int8).astype(np.float64)
    elif fmt == "q4_0":
        blocks = raw.reshape(*lead, nb, 18)
        qs = blocks[..., 2:]
        q = np.concatenate([qs & 0x0F, qs >> 4], axis=-1).astype(np.float64) - 8.0
    else:
        raise ValueError(f"dequantize: unknown block format {fmt!r}")
    d = blocks[..., :2].copy().view(np.float16).astype(np.float64)
    return (q * d).reshape(*lead, n)


def quantize_q8_0(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ggml's ``quantize_row_q8_0`` of float32 rows (length a multiple of 32), dequantized.

    Per block: amax = max |x|, d = amax / 127 and id = 1 / d in float32, q =
    round(x * id) (float32 product), stored d = fp16(d); the value is q * fp16(d).
    Ties (x * id exactly halfway) are rounded to even, as the RVV path does; the
    reference rounds them away from zero.  Returns the values and, per element, how far
    the other tie rule would move it (fp16(d) at a tie, else 0) -- what a bound allows.
    """
    x = np.asarray(x, np.float32)
    shape = x.shape
    xb = x.reshape(*shape[:-1], shape[-1] // QK, QK)
    amax = np.max(np.abs(xb), axis=-1, keepdims=True)
    d = (amax / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore"):
        id_ = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    x0 = (xb * id_).astype(np.float32)
    q = np.rint(x0)  # round half to even
    tie = np.abs(x0 - np.trunc(x0)) == 0.5
    d16 = d.astype(np.float16).astype(np.float64)
    values = (q * d16).reshape(shape)
    tie_err = np.where(tie, d16, 0.0).reshape(shape)
    return values, tie_err


def round_q(fmt: str, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Q as a kernel turns it into the K type's dot-product format ("f32": unchanged), and the
    per-element allowance for what the oracle cannot pin down (q8_0 ties)."""
    q = np.asarray(q, np.float32)
    if fmt == "f32":
        return q.astype(np.float64), np.zeros(q.shape)
    if fmt == "f16":
        return round_f16(q), np.zeros(q.shape)
    if fmt == "bf16":
        return round_bf16(q), np.zeros(q.shape)
    if fmt == "q8_0":
        return quantize_q8_0(q)
    raise ValueError(f"round_q: unknown format {fmt!r}")


# ----------------------------------------------------------------- problem


def alibi_slopes(n_head: int, max_bias: float) -> np.ndarray:
    """ggml's ALiBi slope per head, computed in float32 as ops.cpp does (1 without max_bias)."""
    if max_bias <= 0:
        return np.ones(n_head)
    n_log2 = 1 << int(math.floor(math.log2(n_head)))
    f = np.float32
    m0 = f(2.0) ** (f(-max_bias) / f(n_log2))
    m1 = f(2.0) ** (f(-max_bias / 2.0) / f(n_log2))
    out = [m0 ** f(h + 1) if h < n_log2 else m1 ** f(2 * (h - n_log2) + 1) for h in range(n_head)]
    return np.array(out, np.float32).astype(np.float64)


@dataclass(frozen=True)
class Attention:
    """One attention problem in float64 (values exactly as the kernel reads them)."""

    q: np.ndarray  # [H, n_q, DK]
    k: np.ndarray  # [H_kv, n_kv, DK], dequantized
    v: np.ndarray  # [H_kv, n_kv, DV], dequantized
    mask: np.ndarray | None  # [mask_heads, n_q, n_kv]; -inf masks a position
    sinks: np.ndarray | None  # [H]
    scale: float
    max_bias: float = 0.0
    softcap: float = 0.0

    @property
    def heads(self) -> tuple[int, int]:
        return self.q.shape[0], self.k.shape[0]

    def kv_per_head(self, a: np.ndarray) -> np.ndarray:
        """K or V repeated so that index h is query head h's K/V head (GQA broadcast)."""
        h, h_kv = self.heads
        return np.repeat(a, h // h_kv, axis=0)

    def bias(self) -> np.ndarray:
        """slope_h * mask per [H, n_q, n_kv] (zeros without a mask)."""
        h = self.heads[0]
        n_q, n_kv = self.q.shape[1], self.k.shape[1]
        if self.mask is None:
            return np.zeros((h, n_q, n_kv))
        m = self.mask[np.arange(h) % self.mask.shape[0]]
        with np.errstate(invalid="ignore"):
            return alibi_slopes(h, self.max_bias)[:, None, None] * m


@dataclass(frozen=True)
class Reference:
    """The exact answer for one way of rounding Q, and what the bounds are made of."""

    out: np.ndarray  # [n_q, H, DV]
    w: np.ndarray  # [H, n_q, n_kv] exp(s_j - M), 0 where masked
    total: np.ndarray  # [H, n_q] S = sum_j w_j + exp(sink - M) (0: no terms at all)
    p_abs_v: np.ndarray  # [n_q, H, DV] sum_j p_j |v_j|
    delta: np.ndarray  # [H, n_q] bound on any score's error (Delta)
    active: np.ndarray  # [H, n_q, n_kv] bool: position not masked
    scores: np.ndarray  # [H, n_q, n_kv] exact scores, -inf where masked


def reference(a: Attention, q_fmt: str) -> Reference:
    """Attention with Q rounded to ``q_fmt`` first (see :func:`round_q`), in float64.

    Delta, the per-row bound on the error of the scores a kernel computes (before its
    exp), is the sum of:
      gamma(DK + 2) |scale| sum_i |q_i k_i|  -- a dot product in any order, one rounding
                                               per term, block scales (q8_0), the store;
                                               softcap's tanh has slope <= 1
      |scale| sum_i tie_i |k_i|              -- q8_0 ties the oracle cannot pin down
      8u (|scale q.k| + |s| + |slope m|)     -- scale, 1/softcap, softcap, mask product
                                               and sum: a few roundings of those values
      (h + 5) 2^-23 |slope m|                -- powf's slope (<= 1 ulp, raised to h+1)
      |c| TANH_ULPS 2^-23                    -- tanhf
      EXP_ULPS 2^-23 (1.01) + 4u max(M - s)  -- exp's own error and the rounding of s - M
                                               (as a relative error of the weight)
      DK 2^-52 sum|q k|                      -- this oracle's own float64 sums
    """
    q, tie = round_q(q_fmt, a.q)
    k = a.kv_per_head(a.k)
    dk = a.q.shape[2]
    kt = k.transpose(0, 2, 1)
    dot = _mm(q, kt)
    absdot = _mm(np.abs(q), np.abs(kt))
    tie_dot = _mm(tie, np.abs(kt)) if tie.any() else np.zeros(dot.shape)  # ties: q8_0 only
    scale = abs(a.scale)
    x = a.scale * dot
    s = a.softcap * np.tanh(x / a.softcap) if a.softcap else x
    bias = a.bias()
    active = ~np.isneginf(bias)
    with np.errstate(invalid="ignore"):
        scores = np.where(active, s + np.where(active, bias, 0.0), -np.inf)
    h = a.heads[0]
    sinks = a.sinks if a.sinks is not None else np.full(h, -np.inf)
    m = np.maximum(np.max(scores, axis=2), sinks[:, None])  # [H, n_q]; -inf: no terms
    finite = np.isfinite(m)
    m_safe = np.where(finite, m, 0.0)
    w = np.where(active, np.exp(np.where(active, scores, 0.0) - m_safe[:, :, None]), 0.0)
    w_sink = np.where(finite, np.exp(sinks[:, None] - m_safe), 0.0) if a.sinks is not None else 0.0
    total = w.sum(axis=2) + w_sink
    inv = np.where(total > 0, 1.0 / np.where(total > 0, total, 1.0), 0.0)
    p = w * inv[:, :, None]
    v = a.kv_per_head(a.v)
    out = _mm(p, v).transpose(1, 0, 2)
    p_abs_v = _mm(p, np.abs(v)).transpose(1, 0, 2)

    sb = np.where(active, np.abs(np.where(active, bias, 0.0)), 0.0)
    slope_rel = (np.arange(h) + 5)[:, None, None] * 2.0 ** -23
    spread = np.where(active, m_safe[:, :, None] - np.where(active, scores, 0.0), 0.0)
    per_j = (gamma(dk + 2) * scale * absdot + scale * tie_dot
             + 8 * U_F32 * (scale * np.abs(dot) + np.abs(s) + sb) + slope_rel * sb
             + 4 * U_F32 * spread + dk * 2.0 ** -52 * scale * absdot)
    per_j = np.where(active, per_j, 0.0)
    const = EXP_ULPS * 2.0 ** -23 * 1.01 + abs(a.softcap) * TANH_ULPS * 2.0 ** -23
    delta = per_j.max(axis=2, initial=0.0) + const
    return Reference(out, w, total, p_abs_v, delta, active, scores)


# ------------------------------------------------------------------ bounds


@dataclass(frozen=True)
class Arithmetic:
    """How one implementation forms the weighted sum, as far as its error bound needs.

    accumulate:
      "f32"     -- fused: numerator and S accumulated in f32 in KV order, rescaled by a
                   common factor when the running maximum grows (tiled, split-KV,
                   one-chunk with a V that is not f16)
      "f16"     -- fused: the numerator accumulated in an fp16 vector (ggml_vec_mad_f16,
                   ggml_vec_scale_f16; one-chunk and split-KV with f16 V), S in f32
      "dot"     -- materialised: probabilities normalised in f32, optionally rounded to
                   ``p_round`` (V's dot-product format), then a dot product with V
    chunks: KV chunks combined at the end (split-KV: one per thread), else 1.
    """

    accumulate: str
    chunks: int = 1
    p_round: str | None = None

    def __post_init__(self) -> None:
        if self.accumulate not in ("f32", "f16", "dot"):
            raise ValueError(f"Arithmetic: unknown accumulate {self.accumulate!r}")
        if self.p_round not in (None, "f16", "bf16"):
            raise ValueError(f"Arithmetic: unknown p_round {self.p_round!r}")


def error_bound(a: Attention, ref: Reference, arith: Arithmetic) -> np.ndarray:
    """Per-element bound ``[n_q, H, DV]`` on |computed - ref.out|.

    With every score off by at most Delta, the weights of a row move by a factor in
    [e^-Delta, e^Delta] and the normalised ones by [e^-2Delta, e^2Delta], so the exact
    output of the perturbed scores is within (e^2Delta - 1) P of ref.out, where
    P = sum_j p_j |v_j|.  Then, per accumulation:

    fused (o = N / S, N and S in f32 or N in fp16):
      S: positive terms, at most 2 n + 3 chunks + 4 roundings each (add, rescale,
         chunk combination): relative gamma_S = gamma(2 n + 3 chunks + 4);
      N (f32): gamma_S as well, relative to sum_j w_j |v_j|, i.e. to P;
      N (fp16): the running error bound E (below), divided by S;
      finally 1/S and the product: 4u.
      bound = (e^2D - 1) P + e^2D P (4u + gamma_S) / (1 - gamma_S) + N_err e^D (1 + 4u) / (S (1 - gamma_S))
    materialised (p_j normalised in f32, rounded to p_round, dotted with V):
      each p_j within e^2D (1 + 4u) (1 + r) - 1 relatively (r: 2^-11 fp16, 2^-8 bf16),
      plus 2^-25 absolute below fp16's normal range; the dot product of n_kv terms
      in any order: gamma(n_kv + 1).
    A row without terms has bound 0: its value is exact (0).  A tiny floor covers
    exp's flush of weights below e^-87 (2^-126 per weight).
    """
    n_kv = a.k.shape[1]
    d2 = np.exp(2 * ref.delta).T[:, :, None]  # [n_q, H, 1]
    P = ref.p_abs_v
    v = a.kv_per_head(a.v)  # [H, n_kv, DV]
    floor = flush_floor(a)
    if arith.accumulate == "dot":
        r = {None: 0.0, "f16": U_F16, "bf16": U_BF16}[arith.p_round]
        g = gamma(n_kv + 1)
        rel = d2 * (1 + 4 * U_F32) * (1 + r) - 1
        bound = rel * P + (1 + rel) * g * P
        if arith.p_round == "f16":
            tiny = _mm(ref.active.astype(np.float64), np.abs(v)).transpose(1, 0, 2) * F16_TINY
            bound = bound + tiny * (1 + g)
    else:
        g_s = gamma(2 * n_kv + 3 * arith.chunks + 4)
        bound = (d2 - 1) * P + d2 * P * (4 * U_F32 + g_s) / (1 - g_s)
        if arith.accumulate == "f32":
            bound = bound + g_s * d2 * P * (1 + 4 * U_F32) / (1 - g_s)
        else:
            e = f16_running_error(a, ref, arith.chunks)
            s = ref.total.T[:, :, None]
            with np.errstate(invalid="ignore", divide="ignore"):
                rel_e = np.where(s > 0, e / np.where(s > 0, s, 1.0), 0.0)
            bound = bound + rel_e * np.sqrt(d2) * (1 + 4 * U_F32) / (1 - g_s)
            bound = bound + (3 * arith.chunks + 4) * U_F32 * d2 * P
    has_terms = ref.active.any(axis=2).T[:, :, None]
    return np.where(has_terms, bound + floor, 0.0)


def flush_floor(a: Attention) -> float:
    """Absolute slack for weights exp flushes below f32's normal range: n_kv 2^-126 max|v|.

    An output row of that order is made of flushed or subnormal weights: the element-wise
    bound covers it, but its direction (a cosine) carries no information."""
    return a.k.shape[1] * 2.0 ** -126 * float(np.abs(a.v).max(initial=0.0))


def f16_running_error(a: Attention, ref: Reference, chunks: int) -> np.ndarray:
    """Bound on the fp16 accumulator's error, ``[n_q, H, DV]``, in the units of ref.w.

    ggml's one-chunk loop, per KV position j in order (masked ones skipped), with an fp16
    vector VKQ: on a new running maximum, VKQ *= fp16(ms) (ms = exp(M_old - M_new));
    then VKQ += v_j * fp16(vs) with one fp16 rounding (vfmacc in fp16, or f32 arithmetic
    rounded to fp16 without zvfh).  S uses the unrounded ms and vs in f32.

    Errors, in the final units (a later rescale multiplies value and error alike by
    ms <= 1, so an error committed at step k counts at most once):
      step k, any position may raise the maximum: the update rounds (u16 + 2u relative),
        the rescale rounds and its fp16(ms) differs from ms (2 u16 + u relative), each
        relative to the accumulator, which is within E_{k-1} of the exact partial sum
        Y_k = sum_{l<=k} w_l v_l (taken with the slack (e^D - 1) sum_{l<=k} w_l |v_l|
        for the perturbed weights): E_k = E_{k-1} (1 + c) + c (|Y_k| + slack) + a_k,
        c = 3 u16 + 3u, so E_n = sum_k (1 + c)^(active steps after k) (c (|Y_k| + slack_k) + a_k);
      a_k = (u16 w_k e^D + 2^-25) |v_k| (fp16(vs)) + 2 * 2^-25 (subnormal fp16 results);
      where the maximum may jump by more than 14 ln 2 (ms below fp16's normal range),
        fp16(ms) is off by up to 2^-25 absolutely: + 2^-25 sum_{l<k} |v_l|.
    Split-KV: each of ``chunks`` KV ranges (ceil(n_kv / chunks) positions) has its own
    accumulator; their errors add.  The fp16 range must hold the partial sums: checked.
    """
    n_kv = ref.w.shape[2]
    # Evaluated per chunk as sum_k weight_k steps_k, weight_k = (1 + c)^(active steps after k)
    # on active k.  Only the |Y_k| term needs the partial sums themselves; every other term is
    # separable, sum_k weight_k sum_{l<=k} t_l = sum_l t_l R_l with R_l = sum_{k>=l} weight_k,
    # and is contracted over the KV axis without materialising [n_kv, H, n_q, DV] arrays.
    # tests/test_attention_oracles.py checks this against the step-by-step form.
    v_heads = a.kv_per_head(a.v)  # [H, n_kv, DV]
    v_abs_all = np.abs(v_heads)
    v_all = v_heads.transpose(1, 0, 2)[:, :, None, :]  # [n_kv, H, 1, DV]
    c = 3 * U_F16 + 3 * U_F32
    slack = (np.exp(ref.delta) - 1)[..., None]  # [H, n_q, 1]
    ed = np.exp(ref.delta)[..., None]
    jump = 14 * math.log(2) - 2 * ref.delta  # [H, n_q]
    size = -(-n_kv // chunks)
    total = np.zeros(ref.p_abs_v.shape).transpose(1, 0, 2)  # [H, n_q, DV]
    for start in range(0, n_kv, size):
        sl = slice(start, min(start + size, n_kv))
        act = ref.active[:, :, sl]  # [H, n_q, L]
        w = ref.w[:, :, sl]
        scores = ref.scores[:, :, sl]
        va = v_abs_all[:, sl, :]  # [H, L, DV]
        after = act.sum(axis=2, keepdims=True) - np.cumsum(act, axis=2)
        weight = np.where(act, (1 + c) ** after, 0.0)  # [H, n_q, L]
        reach = np.cumsum(weight[:, :, ::-1], axis=2)[:, :, ::-1]  # R_l = sum_{k>=l} weight_k
        run_max = np.maximum.accumulate(np.where(act, scores, -np.inf), axis=2)
        prev_max = np.concatenate([np.full(run_max.shape[:2] + (1,), -np.inf), run_max[:, :, :-1]], axis=2)
        with np.errstate(invalid="ignore"):  # -inf - -inf where nothing ran yet: not a jump
            big = act & np.isfinite(prev_max) & (scores - prev_max >= jump[..., None])
        # sum_{k>l} weight_k big_k: the later jumps that see position l in v_before
        jumps_after = np.cumsum((weight * big)[:, :, ::-1], axis=2)[:, :, ::-1] - weight * big
        weighted_abs_y, max_abs_y = _partial_sums(w, v_all[sl], weight)
        e = (c * weighted_abs_y
             + _mm(c * slack * (w * reach), va)  # y_abs term
             + _mm(U_F16 * ed * (weight * w) + F16_TINY * weight, va)  # fp16(vs) and subnormal results
             + 2 * F16_TINY * weight.sum(axis=2, keepdims=True)
             + _mm(F16_TINY * (act * jumps_after), va))  # fp16(ms) below the normal range
        # max_k (|Y_k| + slack y_abs_k) <= max_k |Y_k| + slack y_abs_L (y_abs only grows)
        y_abs_end = _mm(w, va)
        if max_abs_y + np.max(slack * y_abs_end, initial=0.0) + np.max(e, initial=0.0) > 6e4:
            raise ValueError("f16_running_error: partial sums leave fp16's range; the bound does not apply")
        total = total + e
    return total.transpose(1, 0, 2)


def _partial_sums(w: np.ndarray, v: np.ndarray, weight: np.ndarray) -> tuple[np.ndarray, float]:
    """sum_k weight_k |Y_k| and max_k |Y_k| for the partial sums Y_k = sum_{l<=k} w_l v_l.

    w, weight: [H, n_q, L]; v: [L, H, 1, DV].  One KV position at a time on [H, n_q, DV]
    arrays: the [L, H, n_q, DV] array of all partial sums would cost more in memory
    traffic than the arithmetic."""
    y = np.zeros(w.shape[:2] + v.shape[3:])
    acc = np.zeros_like(y)
    peak = np.zeros_like(y)
    a = np.empty_like(y)
    for k in range(w.shape[2]):
        y += w[:, :, k, None] * v[k]
        np.abs(y, out=a)
        np.maximum(peak, a, out=peak)
        acc += weight[:, :, k, None] * a
    return acc, float(peak.max(initial=0.0))


def row_cosine(got: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Cosine similarity of each output row (last axis); NaN where the expected row is zero."""
    g = np.asarray(got, np.float64)
    e = np.asarray(expected, np.float64)
    num = np.sum(g * e, axis=-1)
    den = np.linalg.norm(g, axis=-1) * np.linalg.norm(e, axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(np.linalg.norm(e, axis=-1) > 0, num / den, np.nan)

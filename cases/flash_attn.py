"""Flash attention (``ggml_flash_attn_ext``, ops.cpp) on 1-4 threads: each of its three CPU paths
against the materialised path (mul_mat -> soft_max_ext -> mul_mat) in the same build and
against a float64 oracle (oracles/attention.py).

Paths (``ggml_compute_forward_flash_attn_ext_f16``), Q always f32:

* **split-KV** -- one query (``n_q == 1``, one sequence), K and V both f32 or both f16,
  ``n_kv >= 512``: the KV range is cut into one chunk per thread, each chunk runs the
  one-chunk loop into partials (M, S, VKQ), and ``ggml_flash_attn_ext_reduce_partials``
  combines them.
* **tiled** -- K and V both f32 or both f16, ``n_q >= 64`` (Q_TILE = 64 queries per
  tile, KV_TILE = 64), ``DV % GGML_F32_EPR == 0`` (4 on RVV): K is converted to f32,
  Q.K^T and P.V run ``simd_gemm`` (simd-gemm.h: ``rvv_simd_gemm_ukernel`` on 7-row
  micro-tiles of e32m4 vectors, the remaining rows one micro-kernel of 1..6 rows),
  the softmax per tile row with an online rescale (ggml_vec_soft_max_f32).
* **one-chunk** -- everything else (bf16, q8_0, q4_0, mixed K/V types, fewer queries):
  per query row, KV positions in order, the K type's ``vec_dot`` on Q converted to the
  K type's dot format (f16, bf16, or q8_0 for q8_0 / q4_0 K), an online softmax, and V
  accumulated in an fp16 vector (``ggml_vec_mad_f16``) when V is f16, else in f32.

``test_flash_attn_path`` checks these conditions against QEMU's trace (``simd_gemm``
for tiled; the one-chunk function with the chunk scheduler ``ggml_threadpool_chunk_add``
for one-chunk, without it for split-KV).

Bounds (derivations in oracles/attention.py, facts per path here):

* the oracle rounds Q exactly as the path does: not at all (tiled), to f16 / bf16
  (nearest even) or q8_0 (``quantize_row_q8_0``; ties allowed either way) for the
  one-chunk and split paths and for the materialised path's ``mul_mat(K, Q)``;
* every score is off by at most Delta (dot-product rounding gamma(DK + 2) sum|q k|,
  scale / softcap / mask / ALiBi arithmetic, exp and tanh within 2 ulp);
* fused f32 accumulation (tiled, split or one-chunk with non-f16 V): gamma(2 n_kv +
  3 chunks + 4) on the numerator and S; fp16 accumulation (one-chunk / split with f16
  V): a running error bound over the exact partial sums (u16 per step); materialised:
  probabilities normalised in f32, rounded to V's dot type (f16 / bf16; a quantized V
  is cast to f32 first), then a dot product: gamma(n_kv + 1).
* fused vs materialised: the sum of both bounds plus the distance of their oracles
  (which differ where the paths round Q differently).

A row whose every position is masked must come out as 0 from the fused paths (ggml
defines 1/S := 0); the materialised path has no defined value there without sinks
(``soft_max`` asserts sum > 0 in debug builds; release builds give NaN), so those rows
are left out of its comparisons.  Per row, the cosine similarity of fused and
materialised results is recorded (``1-cos``); with f32 K and V it must be >= 0.99999,
the seeds' f32 parity gate.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np
from hypothesis import strategies as st

from cases import coverage
from cases import loops as L
from cases import strategies as S
from cases.vec_ops import file_notes, rvv_paths, where
from harness.check import compare, observe
from harness.emulators.protocol import In, Out
from harness.ggml import csource, tree
from harness.ggml.source import GgmlSource
from harness.ggml.tree import Tree
from harness.plugin.targets import session
from oracles import attention as A

#: Block bytes per 32 elements of the quantized formats.
BLOCK_BYTES = {"q8_0": 34, "q4_0": 18}
#: The format Q is converted to for the K type's vec_dot (type_traits_cpu[k].vec_dot_type).
DOT_FORMAT = {"f32": "f32", "f16": "f16", "bf16": "bf16", "q8_0": "q8_0", "q4_0": "q8_0"}

#: What the kernel server's attention adapter calls (harness/server/k_graph.cpp), both sides.
ADAPTER_CALLS = ("ggml_flash_attn_ext", "ggml_flash_attn_ext_add_sinks", "ggml_mul_mat", "ggml_soft_max_ext",
                 "ggml_soft_max_add_sinks", "ggml_scale", "ggml_tanh", "ggml_is_quantized", "ggml_cast",
                 "ggml_transpose", "ggml_cont", "ggml_permute")
#: The function of ops.cpp each fused path runs (the tiled path also runs simd-gemm.h's simd_gemm).
PATH_FUNCTIONS = {"tiled": ("ggml_compute_forward_flash_attn_ext_tiled", "simd_gemm"),
                  "split": ("ggml_flash_attn_ext_reduce_partials", "ggml_compute_forward_flash_attn_ext_f16_one_chunk"),
                  "one_chunk": ("ggml_compute_forward_flash_attn_ext_f16_one_chunk",)}


def vec_dot(k: str) -> str:
    """The vec_dot the one-chunk path calls for K of type ``k`` (type_traits_cpu[k].vec_dot)."""
    return f"ggml_vec_dot_{k}" + (f"_{DOT_FORMAT[k]}" if k in BLOCK_BYTES else "")


Q_TILE = 64  # GGML_FA_TILE_Q
KV_TILE = 64  # GGML_FA_TILE_KV
SPLIT_MIN_KV = 512
F32_EPR = 4  # GGML_F32_EPR on RVV: DV must be a multiple for the tiled path
COS_GATE = 0.99999

#: Head sizes (DK, DV) of real models and small ones; failures shrink towards the first.
HEAD_SIZES = (4, 8, 32, 40, 64, 80, 96, 112, 128, 192, 256)


@dataclass(frozen=True)
class TiledRule:
    """When ggml_compute_forward_flash_attn_ext_f16 takes the tiled path (f32 / f16 K = V aside):
    ``n_q >= q``, and in the tree's era ``n_kv % kv == 0`` (the first tiled path, 2026-02, tiles
    of 32 x 16) or ``DV % GGML_F32_EPR == 0`` (the simd_gemm era, tiles of 64 x 64)."""

    q: int = Q_TILE
    kv: int = KV_TILE
    kv_multiple: bool = False
    dv_epr: bool = True
    present: bool = True  # the tree has a tiled path at all (before 2026-02 it does not)

    def takes(self, n_q: int, n_kv: int, dv: int) -> bool:
        return self.present and n_q >= self.q and (not self.kv_multiple or n_kv % self.kv == 0) and \
            (not self.dv_epr or dv % F32_EPR == 0)


@lru_cache(maxsize=8)
def _tiled_rule(src: GgmlSource) -> TiledRule:
    defs = {}
    common = src.cpu_dir / "common.h"
    if common.is_file():
        defs = csource.preprocess(common.read_text(errors="replace"), None, common).definitions
    ops = (src.cpu_dir / "ops.cpp").read_text(errors="replace")
    cond = " ".join(re.findall(r"\buse_tiled\s*&?=\s*([^;]*);", ops))
    num = lambda name, default: int(defs[name][1]) if name in defs and defs[name][1].isdigit() else default  # noqa: E731
    return TiledRule(num("GGML_FA_TILE_Q", Q_TILE), num("GGML_FA_TILE_KV", KV_TILE),
                     kv_multiple=bool(re.search(r"%\s*KV_TILE", cond)), dv_epr=bool(re.search(r"\bDV\s*%", cond)),
                     present=bool(cond))


def tiled_rule() -> TiledRule:
    """The tiled-path rule of the tree under test (read from its common.h and ops.cpp); outside a
    test session (the size tables), the pinned tree's."""
    try:
        return _tiled_rule(session().source)
    except RuntimeError:
        return TiledRule()


def fused_path(k: str, v: str, n_q: int, n_kv: int, dv: int) -> str:
    """The path ggml_compute_forward_flash_attn_ext_f16 takes (the module docstring's rules, with
    the tree's own tiled-path rule)."""
    f = k == v and k in ("f32", "f16")
    if f and n_q == 1 and n_kv >= SPLIT_MIN_KV:
        return "split"
    if f and tiled_rule().takes(n_q, n_kv, dv):
        return "tiled"
    return "one_chunk"


@dataclass(frozen=True)
class Shape:
    n_q: int
    n_kv: int
    dk: int
    dv: int
    heads: int  # query heads
    kv_heads: int  # K/V heads (GQA ratio heads / kv_heads)
    threads: int


@dataclass(frozen=True, repr=False)
class AttnCase(S.KernelSpec):
    """K/V types and the fused path its shapes drive into, with the arithmetic of each side."""

    name: str  # test id
    path: str  # tiled / split / one_chunk
    k: str
    v: str

    @property
    def requires(self) -> tuple[str, ...]:
        """What the kernel server's adapter calls (both sides), the function of the fused path
        and the K type's vec_dot (harness/plugin/ skips the case as "not in this tree" when the
        tree lacks one: the tiled and split paths are younger than the one-chunk path)."""
        types = dict.fromkeys(f"GGML_TYPE_{t.upper()}" for t in ("f32", "f16", self.k, self.v))
        return (*ADAPTER_CALLS, *types, *PATH_FUNCTIONS[self.path], vec_dot(self.k))

    @property
    def entry_points(self) -> tuple[str, ...]:
        """The code these tests exist to check (the PR gate runs them at the thorough budget when
        it changes; harness/ggml/changes.py): the op and its fused path, not the materialised side's
        mul_mat / soft_max nor the K type's vec_dot, which their own families own."""
        return ("ggml_flash_attn_ext", *PATH_FUNCTIONS[self.path])

    def fused_arithmetic(self, threads: int) -> tuple[str, A.Arithmetic]:
        """How Q is rounded and how the weighted sum is formed on the fused path."""
        if self.path == "tiled":  # K, V converted to f32; simd_gemm in f32
            return "f32", A.Arithmetic("f32")
        acc = "f16" if self.v == "f16" else "f32"
        return DOT_FORMAT[self.k], A.Arithmetic(acc, chunks=threads if self.path == "split" else 1)

    def materialised_arithmetic(self) -> tuple[str, A.Arithmetic]:
        """mul_mat(K, Q) rounds Q to K's dot type; mul_mat(V^T, P) rounds P to V's (f16 / bf16)."""
        return DOT_FORMAT[self.k], A.Arithmetic("dot", p_round=self.v if self.v in ("f16", "bf16") else None)

    @property
    def gated(self) -> bool:
        """f32 K and V: neither side rounds Q or P, both accumulate in f32 -- the seeds' f32
        parity gate (cos >= 0.99999) applies.  (With f16 K the materialised path rounds Q to
        f16 and the tiled path does not: sharp logits legitimately move the weights more.)"""
        return self.k == self.v == "f32"


CASES = [
    AttnCase("tiled-f32", "tiled", "f32", "f32"),
    AttnCase("tiled-f16", "tiled", "f16", "f16"),
    AttnCase("split-f32", "split", "f32", "f32"),
    AttnCase("split-f16", "split", "f16", "f16"),
    AttnCase("chunk-f32", "one_chunk", "f32", "f32"),
    AttnCase("chunk-f16", "one_chunk", "f16", "f16"),
    AttnCase("chunk-bf16", "one_chunk", "bf16", "bf16"),
    AttnCase("chunk-q8_0", "one_chunk", "q8_0", "q8_0"),
    AttnCase("chunk-q4_0", "one_chunk", "q4_0", "q4_0"),
    AttnCase("chunk-q8_0-f16", "one_chunk", "q8_0", "f16"),
]
IDS = [c.name for c in CASES]

# ------------------------------------------------------------------ shapes

#: Cost cap per example: query rows x KV positions x (DK + DV) multiply-adds (a full 64 x 64
#: tile counts whole on the tiled path; the loop-crossing shapes of every run stay within ~2x of it).
MAX_WORK = 1_000_000

#: Random ranges of the sizes (shared with the size table, ``drawn``).
TILED_NQ = (Q_TILE, 140)  # tiled: queries (one to two tiles and a remainder)
TILED_KV = (1, 200)  # tiled: KV positions (up to three tiles and a remainder)
SPLIT_KV = (SPLIT_MIN_KV, 1100)  # split: KV positions around the threshold
CHUNK_NQ = (1, 63)  # one-chunk: queries
CHUNK_KV = (1, 300)  # one-chunk: KV positions
#: KV lengths of real models' decode (a KV cache of several thousand positions): drawn for one or
#: two queries only (split, one-chunk), cut down to MAX_WORK for large heads.
REAL_KV = (2048, 4096, 8192)
#: KV positions per fp16 accumulator (f16 V on the one-chunk and split paths) that the random draws
#: go up to: oracles.attention.f16_running_error's bound grows as (1 + 3 u16)^n and leaves fp16's
#: range past ~1500 positions with flat weights and V offset from zero (it says so and refuses).
F16_ACC_KV = SPLIT_KV[1]
THREADS = (1, 4)


def _head_size(case: AttnCase, which: str) -> st.SearchStrategy[int]:
    fmt = case.k if which == "k" else case.v
    sizes = [d for d in HEAD_SIZES if fmt not in BLOCK_BYTES or d % 32 == 0]
    return st.sampled_from(sizes)


def _real_kv(n_q: int, dk: int, dv: int, n_kv: int) -> int:
    """A real model's KV length, cut to the cost cap (never below the split threshold)."""
    return max(SPLIT_MIN_KV, min(n_kv, MAX_WORK // (n_q * (dk + dv))))


@st.composite
def shapes(draw: st.DrawFn, case: AttnCase) -> Shape:
    """Shapes that take ``case.path``, at its thresholds and tile edges: queries around 64
    and its multiples, KV lengths around 64-wide tiles and around 512, and now and then a
    real decode's KV cache (2048-8192 positions, one or two queries); head sizes of real
    models, GQA ratios 1, 2, 4, 8, 1-4 threads.  Shrinks towards the smallest such shape.
    (Every loop level crossed twice plus a remainder on every run: ``loop_shapes``.)"""
    edges_kv = [1, 2, 63, 64, 65, 127, 128, 129, 191, 192, 193]
    dk = draw(_head_size(case, "k"), label="dk")
    odd = [] if case.path == "tiled" else [st.sampled_from([6, 18, 50])]  # DV % 4 != 0 leaves the tiled path
    dv = draw(st.one_of(st.just(dk), _head_size(case, "v"), *odd), label="dv")
    if case.v in BLOCK_BYTES and dv % 32:
        dv = dk
    if case.path == "tiled":
        n_q = draw(st.one_of(st.sampled_from([64, 65, 127, 128, 129]), st.integers(*TILED_NQ)), label="n_q")
        n_kv = draw(st.one_of(st.sampled_from(edges_kv), st.integers(*TILED_KV)), label="n_kv")
    elif case.path == "split":
        n_q = 1
        n_kv = draw(st.one_of(st.sampled_from([512, 513, 575, 576, 640, 1023, 1024, 1025]),
                              st.integers(*SPLIT_KV), st.sampled_from(REAL_KV)), label="n_kv")
    else:
        n_q = draw(st.one_of(st.integers(*CHUNK_NQ), st.sampled_from([1, 2, 63, 64, 65, 100])), label="n_q")
        long_kv = [st.sampled_from(REAL_KV)] if n_q <= 2 else []
        n_kv = draw(st.one_of(st.sampled_from(edges_kv + [511, 512, 513, 600]), st.integers(*CHUNK_KV), *long_kv),
                    label="n_kv")
    real = n_kv in REAL_KV
    if real:  # (one query of f32 / f16 that long becomes two on the one-chunk path)
        n_kv = _real_kv(max(n_q, 2) if case.path == "one_chunk" else n_q, dk, dv, n_kv)
    kv_heads = draw(st.integers(1, 2), label="kv_heads")
    ratio = draw(st.sampled_from([1, 2, 4, 8]), label="gqa")
    threads = draw(st.one_of(st.just(THREADS[0]), st.integers(THREADS[0] + 1, THREADS[1])), label="threads")
    if real and case.v == "f16":  # an fp16 accumulator per chunk (split: one per thread)
        n_kv = min(n_kv, F16_ACC_KV * (threads if case.path == "split" else 1))
    # Keep QEMU's work per example bounded: fewer heads for large shapes.
    while kv_heads * ratio > 1 and kv_heads * ratio * n_q * n_kv * (dk + dv) > MAX_WORK:
        if ratio > 1:
            ratio //= 2
        else:
            kv_heads = 1
    shape = Shape(n_q, n_kv, dk, dv, kv_heads * ratio, kv_heads, threads)
    if case.path == "one_chunk":  # the shapes of one-chunk's own types never leave it; f32/f16 ones:
        shape = _keep_one_chunk(case, shape)
    return shape


def _keep_one_chunk(case: AttnCase, sh: Shape) -> Shape:
    """Moves an f32 / f16 shape off the tiled and split conditions, onto their near misses."""
    if fused_path(case.k, case.v, sh.n_q, sh.n_kv, sh.dv) == "one_chunk":
        return sh
    if sh.n_q == 1:  # split needs n_kv >= 512: one less, or two queries
        return Shape(2, sh.n_kv, sh.dk, sh.dv, sh.heads, sh.kv_heads, sh.threads) if sh.n_kv > 512 else \
            Shape(1, 511, sh.dk, sh.dv, sh.heads, sh.kv_heads, sh.threads)
    rule = tiled_rule()
    if rule.kv_multiple:  # the first tiled path also needs n_kv % KV tile == 0: one position more
        return Shape(sh.n_q, sh.n_kv + 1, sh.dk, sh.dv, sh.heads, sh.kv_heads, sh.threads)
    # tiled needs n_q >= 64 and DV % 4 == 0: one query less, or a DV that is not a multiple of 4
    return Shape(rule.q - 1, sh.n_kv, sh.dk, sh.dv, sh.heads, sh.kv_heads, sh.threads) if sh.n_q == rule.q else \
        Shape(sh.n_q, sh.n_kv, sh.dk, sh.dv + 2, sh.heads, sh.kv_heads, sh.threads)


# ------------------------------------------------------------------ data

MASKS = ("none", "causal", "random", "rows", "tiles")


@dataclass(frozen=True)
class Options:
    mask: str  # one of MASKS
    mask_heads: int  # 0 without a mask
    max_bias: float
    softcap: float
    sinks: bool
    scale: float
    q_sigma: float  # spread of Q: how sharp the softmax is
    v_mean: float


@dataclass(frozen=True)
class Problem:
    """One attention problem: the shape, the options, the buffers in ggml's formats, and the
    same values in float64 for the oracle."""

    shape: Shape
    opts: Options
    q: np.ndarray  # f32 [H, n_q, DK]
    k: np.ndarray  # storage of K [H_kv, n_kv, ...]
    v: np.ndarray
    mask: np.ndarray  # uint16 fp16 bits [mask_heads, n_q, n_kv] (empty: none)
    sinks: np.ndarray  # f32 [H] (empty: none)
    att: A.Attention

    def __repr__(self) -> str:
        return f"Problem({self.shape}, {self.opts})"

    def _repr_pretty_(self, p, cycle) -> None:  # Hypothesis's printer of failing examples
        p.text(repr(self))


def _kv(fmt: str, shape: tuple[int, ...], rng: np.random.Generator, mean: float) -> tuple[np.ndarray, np.ndarray]:
    """Values of ``fmt`` (storage, float64): Gaussian rounded to the format, or random q8_0 /
    q4_0 blocks (scales around 1/127 and 1/8, every code equally likely)."""
    if fmt in BLOCK_BYTES:
        n = shape[-1]
        nb = n // A.QK
        blocks = rng.integers(0, 256, (*shape[:-1], nb, BLOCK_BYTES[fmt]), dtype=np.uint16).astype(np.uint8)
        if fmt == "q8_0":
            blocks[..., 2:][blocks[..., 2:] == 0x80] = 0x81  # -128: quantize never makes it
        d = (rng.uniform(0.5, 1.5, (*shape[:-1], nb, 1)) / (127 if fmt == "q8_0" else 8)).astype(np.float16)
        blocks[..., :2] = d.view(np.uint8)
        raw = blocks.reshape(*shape[:-1], nb * BLOCK_BYTES[fmt])
        return raw, A.dequantize(fmt, raw, n)
    x = S.round_to(fmt, rng.standard_normal(shape) + mean)
    return S.to_storage(fmt, x), x.astype(np.float64)


def _mask(kind: str, heads: int, n_q: int, n_kv: int, alibi: bool, rng: np.random.Generator) -> np.ndarray:
    """A mask [heads, n_q, n_kv] as float64 values exact in fp16 (-inf masks).

    causal: query i sees KV j <= i + n_kv - n_q (rows fully masked when n_kv < n_q);
    random: each position masked with one drawn probability; rows: random plus whole
    rows masked; tiles: whole 64-wide KV tiles masked for some rows (the tiled path skips
    a tile when every row of its query tile is masked there).  Finite entries: 0 or
    -|distance| (rounded to fp16) with ALiBi, else Gaussian values rounded to fp16.
    """
    i = np.arange(n_q)[:, None]
    j = np.arange(n_kv)[None, :]
    if alibi:
        # distances past 2048 are not all fp16 numbers (a real KV cache's mask is fp16 too): rounded
        finite = np.broadcast_to(A.round_f16(-np.abs(i + (n_kv - n_q) - j)), (heads, n_q, n_kv))
    else:
        finite = A.round_f16(rng.standard_normal((heads, n_q, n_kv)) * 0.5)
    masked = np.zeros((heads, n_q, n_kv), bool)
    if kind == "causal":
        masked |= (j > i + (n_kv - n_q))[None]
    elif kind in ("random", "rows"):
        masked |= rng.random((heads, n_q, n_kv)) < rng.choice([0.1, 0.5, 0.95])
        if kind == "rows":
            masked |= (rng.random((heads, n_q, 1)) < 0.3)
    elif kind == "tiles":
        tiles = -(-n_kv // KV_TILE)
        gone = rng.random((heads, -(-n_q // Q_TILE), tiles)) < 0.5
        masked |= np.repeat(np.repeat(gone, Q_TILE, axis=1), KV_TILE, axis=2)[:, :n_q, :n_kv]
    return np.where(masked, -np.inf, finite)


def make_problem(case: AttnCase, sh: Shape, opts: Options, seed: int) -> Problem:
    """The buffers and the float64 problem for a shape and options, from one seed."""
    rng = np.random.default_rng(seed)
    q = (rng.standard_normal((sh.heads, sh.n_q, sh.dk)) * opts.q_sigma).astype(np.float32)
    k_raw, k = _kv(case.k, (sh.kv_heads, sh.n_kv, sh.dk), rng, 0.0)
    v_raw, v = _kv(case.v, (sh.kv_heads, sh.n_kv, sh.dv), rng, opts.v_mean)
    m = _mask(opts.mask, opts.mask_heads, sh.n_q, sh.n_kv, opts.max_bias > 0, rng) if opts.mask_heads else None
    sinks = (rng.standard_normal(sh.heads) * 2).astype(np.float32) if opts.sinks else np.empty(0, np.float32)
    att = A.Attention(q.astype(np.float64), k, v, m, sinks.astype(np.float64) if opts.sinks else None,
                      opts.scale, opts.max_bias, opts.softcap)
    mask_bits = np.empty(0, np.uint16) if m is None else m.astype(np.float16).view(np.uint16)
    return Problem(sh, opts, q, k_raw, v_raw, mask_bits, sinks, att)


@st.composite
def problems(draw: st.DrawFn, case: AttnCase) -> Problem:
    """A shape of the case's path, a mask kind (with ALiBi or not), softcap, sinks, scale,
    sharpness of the softmax and an offset of V; the data from a seed."""
    sh = draw(shapes(case), label="shape")
    mask = draw(st.sampled_from(MASKS), label="mask")
    alibi = mask != "none" and draw(st.booleans(), label="alibi")
    opts = Options(
        mask=mask,
        mask_heads=0 if mask == "none" else draw(st.sampled_from(sorted({1, sh.heads})), label="mask_heads"),
        max_bias=draw(st.sampled_from([8.0, 2.0]), label="max_bias") if alibi else 0.0,
        softcap=draw(st.sampled_from([0.0, 0.0, 20.0, 50.0]), label="softcap"),
        sinks=draw(st.booleans(), label="sinks"),
        scale=float(draw(st.sampled_from([np.float32(1 / math.sqrt(sh.dk)), np.float32(1.0),
                                          np.float32(0.125)]), label="scale")),
        q_sigma=draw(st.sampled_from([1.0, 0.25, 3.0]), label="q_sigma"),
        v_mean=draw(st.sampled_from([0.0, 2.0]), label="v_mean"),
    )
    return make_problem(case, sh, opts, draw(st.integers(0, 2**32 - 1), label="seed"))


# ------------------------------------------------------------------ loop levels and the sizes every run checks

def gemm_n_step(vlen: int) -> int:
    """Columns per rvv_simd_gemm_ukernel call (simd-gemm.h: KN = vlenb, e32m4 vectors)."""
    return vlen // 8


#: Elements per full iteration of the K type's vec_dot over DK (vec.cpp): ggml_vec_dot_f32 strip-mines
#: e32m8; ggml_vec_dot_f16 (zvfh) e16m1; ggml_vec_dot_bf16 (zvfbfwma) two e16m2 vectors a step.
DOT_STEP = {"f32": lambda vlen: vlen // 4, "f16": lambda vlen: vlen // 16, "bf16": lambda vlen: vlen // 4}


def acc_step(v: str, vlen: int) -> int:
    """Elements per full iteration of V's accumulation over DV: ggml_vec_mad_f16 / _scale_f16 (zvfh:
    two e16m4 vectors a step) for f16 V, else ggml_vec_mad_f32 / _scale_f32 (e32m8)."""
    return vlen // 2 if v == "f16" else vlen // 4


def crossing(step: int, quantum: int = 1) -> int:
    """A size that makes two full steps and then a remainder: 2 steps and half a step, rounded
    down to ``quantum`` (at least one quantum; a multiple of the step when the quantum is a whole
    step -- such a loop has no remainder by construction)."""
    return 2 * step + max(quantum, step // 2 // quantum * quantum)


def _dims(case: AttnCase, vlen: int) -> tuple[int, int]:
    """DK and DV that cross the K type's vec_dot and V's accumulation twice plus a remainder at
    ``vlen`` (quantized K / V: whole blocks; their block loops are the quant_dot family's)."""
    dk = crossing(DOT_STEP[case.k](vlen)) if case.k in DOT_STEP else 128
    dv = crossing(acc_step(case.v, vlen), A.QK if case.v in BLOCK_BYTES else 1)
    return dk, dv


def loop_shapes(case: AttnCase, vlen: int) -> list[Shape]:
    """The shapes every run checks (after ``test_flash_attn``'s drawn problems), so that each
    loop level of the case's path runs two full iterations and a remainder at ``vlen``:

    * tiled: 133 queries on one thread (two full 64-row Q tiles and 5 rows) x 135 KV positions
      (two full KV tiles and 7); then one tile with DV = 2.5 x KN (simd_gemm's column loop of
      the P.V product twice and a remainder: DV 40 / 80 / 160 / 320 at VLEN 128 ... 1024);
    * split: a decode of 4099 positions on 4 threads (three full chunks of 1025 and one of
      1024, ~1M multiply-adds), then 515 positions on 3 threads with the crossing head sizes;
    * one-chunk: two queries, 67 positions, with DK / DV crossing the K type's vec_dot and
      V's accumulation (``_dims``).
    """
    dk, dv = _dims(case, vlen)
    if case.path == "tiled":
        n = crossing(gemm_n_step(vlen), F32_EPR)
        return [Shape(2 * Q_TILE + 5, 2 * KV_TILE + 7, 64, 64, 1, 1, 1), Shape(Q_TILE, KV_TILE, 64, n, 1, 1, 1)]
    if case.path == "split":
        return [Shape(1, 4099, 128, 128, 1, 1, 4), Shape(1, 515, dk, dv, 1, 1, 3)]
    return [Shape(2, 67, dk, dv, 2, 1, 2)]


#: Options of the loop-crossing shapes: no mask (no KV tile is skipped), a sink, V offset from zero
#: (a dropped or doubled term moves every output).
LOOP_OPTIONS = Options("none", 0, 0.0, 0.0, True, 0.0, 1.0, 2.0)


def finding_problems(case: AttnCase) -> list[Problem]:
    """Fixed problems that reproduce real bugs of older trees (docs/findings.md, "Findings in older
    trees"), run first on every run so that a tree with the bug fails every time, not when a draw
    happens to reach it.  Tiled path: a logit softcap with one KV position, so the KV tile is
    mostly padding, and a wide Q (q_sigma 30) so that many rows have logits near -softcap, where a
    padding column given the finite logit -softcap (softcap applied after the padding's -inf, ggml
    2026-08) weighs as much as the real one."""
    if case.path != "tiled":
        return []
    sh = Shape(n_q=64, n_kv=1, dk=64, dv=64, heads=1, kv_heads=1, threads=1)
    opts = Options("none", 0, 0.0, 20.0, False, float(np.float32(1 / 8)), 30.0, 0.0)
    return [make_problem(case, sh, opts, seed=0)]


def loop_problems(case: AttnCase, vlen: int) -> list[Problem]:
    """``loop_shapes`` as problems (scale 1/sqrt(DK), one seed per shape)."""
    return [make_problem(case, sh, replace(LOOP_OPTIONS, scale=float(np.float32(1 / math.sqrt(sh.dk)))), seed=i)
            for i, sh in enumerate(loop_shapes(case, vlen))]


def tiled_q_runs(sh: Shape) -> list[int]:
    """Lengths of the runs of consecutive query rows that one call of the tiled function walks
    in 64-row tiles: the rows [n_q x heads] are cut into the threads' chunks (4 per thread,
    ``ggml_compute_forward_flash_attn_ext_f16``), and a tile never crosses a head."""
    nr, nth = sh.n_q * sh.heads, sh.threads
    size = -(-nr // (4 * nth))
    nchunk = -(-nr // size)
    if nth == 1 or nchunk < nth:
        nchunk = nth
    dr = -(-nr // nchunk)
    runs = []
    for ir0 in range(0, nr, dr):
        ir = ir0
        while ir < min(ir0 + dr, nr):
            end = min(ir0 + dr, nr, (ir // sh.n_q + 1) * sh.n_q)
            runs.append(end - ir)
            ir = end
    return runs


def _every_run(vlen: int, paths: tuple[str, ...], size, *, k: tuple[str, ...] = (), v: tuple[str, ...] = ()
               ) -> list[int]:
    """A size (``size(shape)``: one int or a list) of every loop shape at ``vlen`` of the cases on
    ``paths`` (optionally only those with K type in ``k`` / V type in ``v``)."""
    out: set[int] = set()
    for c in CASES:
        if c.path in paths and (not k or c.k in k) and (not v or c.v in v):
            for sh in loop_shapes(c, vlen):
                x = size(sh)
                out.update(x if isinstance(x, list) else [x])
    return sorted(out)


def drawn(vlen: int) -> dict[str, L.Drawn]:
    """What the tests draw of each size the loops iterate over (cases.loops): the loop shapes of
    every run and the random ranges of ``shapes``."""
    heads = (min(HEAD_SIZES), max(HEAD_SIZES))
    fused = ("split", "one_chunk")
    return {
        "q_rows": L.Drawn(_every_run(vlen, ("tiled",), tiled_q_runs), 1, TILED_NQ[1]),
        "n_kv (tiled)": L.Drawn(_every_run(vlen, ("tiled",), lambda sh: sh.n_kv), *TILED_KV),
        "dk (tiled)": L.Drawn(_every_run(vlen, ("tiled",), lambda sh: sh.dk), *heads),
        "dv (tiled)": L.Drawn(_every_run(vlen, ("tiled",), lambda sh: sh.dv), *heads),
        "M (= Q_TILE)": L.Drawn([Q_TILE], Q_TILE, Q_TILE),
        "chunks (split)": L.Drawn(_every_run(vlen, ("split",), lambda sh: sh.threads), *THREADS),
        "n_kv (split)": L.Drawn(_every_run(vlen, ("split",), lambda sh: sh.n_kv), SPLIT_KV[0], max(REAL_KV)),
        "n_kv (one-chunk)": L.Drawn(_every_run(vlen, ("one_chunk",), lambda sh: sh.n_kv), CHUNK_KV[0], max(REAL_KV)),
        **{f"dk ({t} K)": L.Drawn(_every_run(vlen, fused, lambda sh: sh.dk, k=(t,)), *heads) for t in DOT_STEP},
        "dv (f16 V)": L.Drawn(_every_run(vlen, fused, lambda sh: sh.dv, v=("f16",)), *heads),
        "dv (f32 accumulator)": L.Drawn(_every_run(vlen, fused, lambda sh: sh.dv, v=("f32", "bf16")), *heads),
    }


_REAL_HEADS = (64, 128, 256)
L.register(L.Family(
    name="flash_attn", doc="docs/attention.md",
    loops=[
        L.Loop("ggml_compute_forward_flash_attn_ext_tiled", "Q tiles (64 rows; a chunk's rows of one head)",
               "q_rows", lambda vlen: Q_TILE, source="ops.cpp:ggml_compute_forward_flash_attn_ext_tiled"),
        L.Loop("ggml_compute_forward_flash_attn_ext_tiled", "KV tiles (64 positions, last one padded)",
               "n_kv (tiled)", lambda vlen: KV_TILE, source="ops.cpp:ggml_compute_forward_flash_attn_ext_tiled"),
        L.Loop("simd_gemm (Q.K^T: M=64, K=DK, N=64)", "k-steps of rvv_simd_gemm_ukernel (one column of A a step)",
               "dk (tiled)", lambda vlen: 1, remainder=False, real=_REAL_HEADS, source="simd-gemm.h:rvv_simd_gemm_ukernel"),
        L.Loop("simd_gemm (P.V: M=64, K=64, N=DV)", "columns: KN = VLEN/8 per micro-kernel call, then N - jj",
               "dv (tiled)", gemm_n_step, real=_REAL_HEADS, source="simd-gemm.h:simd_gemm"),
        L.Loop("simd_gemm (both products)", "rows: 7-row micro-tiles, then rvv_simd_gemm_dispatch_tail",
               "M (= Q_TILE)", lambda vlen: 7, source="simd-gemm.h:simd_gemm"),
        L.Loop("ggml_flash_attn_ext_reduce_partials", "KV chunks: one per thread, ceil(n_kv / threads) each",
               "chunks (split)", lambda vlen: 1, remainder=False,
               source="ops.cpp:ggml_compute_forward_flash_attn_ext_f16 / _reduce_partials"),
        L.Loop("ggml_compute_forward_flash_attn_ext_f16_one_chunk (split)", "KV positions of a chunk (scalar)",
               "n_kv (split)", lambda vlen: 1, remainder=False, real=REAL_KV,
               source="ops.cpp:ggml_compute_forward_flash_attn_ext_f16_one_chunk"),
        L.Loop("ggml_compute_forward_flash_attn_ext_f16_one_chunk", "KV positions per query (scalar)",
               "n_kv (one-chunk)", lambda vlen: 1, remainder=False, real=REAL_KV,
               source="ops.cpp:ggml_compute_forward_flash_attn_ext_f16_one_chunk"),
        L.Loop("ggml_vec_dot_f32 (f32 K; split, one-chunk)", "strip-mining over DK, e32m8", "dk (f32 K)",
               DOT_STEP["f32"], real=_REAL_HEADS, source="vec.cpp:ggml_vec_dot_f32"),
        L.Loop("ggml_vec_dot_f16 (f16 K, zvfh; split, one-chunk)", "strip-mining over DK, e16m1", "dk (f16 K)",
               DOT_STEP["f16"], real=_REAL_HEADS, source="vec.cpp:ggml_vec_dot_f16"),
        L.Loop("ggml_vec_dot_bf16 (bf16 K, zvfbfwma; one-chunk)", "main loop over DK, 2 x e16m2, then leftover",
               "dk (bf16 K)", DOT_STEP["bf16"], real=_REAL_HEADS, source="vec.cpp:ggml_vec_dot_bf16"),
        L.Loop("ggml_vec_mad_f16, _scale_f16 (f16 V, zvfh; split, one-chunk)",
               "main loop over DV, 2 x e16m4, then leftover", "dv (f16 V)", lambda vlen: acc_step("f16", vlen),
               real=_REAL_HEADS, source="vec.h:ggml_vec_mad_f16"),
        L.Loop("ggml_vec_mad_f32, _scale_f32 (f32 accumulator; split, one-chunk)", "strip-mining over DV, e32m8",
               "dv (f32 accumulator)", lambda vlen: acc_step("f32", vlen), real=_REAL_HEADS,
               source="vec.h:ggml_vec_mad_f32"),
    ],
    drawn=drawn,
    notes=(
        "Sizes of every run: `loop_shapes` in cases/flash_attn.py (checked by "
        "`test_flash_attn` on every run, after its drawn problems), at each VLEN.  "
        "`q_rows` is the run of query rows one call of the tiled "
        "function walks (the threads' chunks of n_q x heads rows, 4 per thread, cut at head boundaries): "
        "only one thread (or many rows) gives it two full tiles.",
        "Fixed by construction, not by a drawn size: Q.K^T's columns N = KV_TILE = 64 (4 / 2 / 1 micro-kernel "
        "calls at VLEN 128 / 256 / 512, one 64-wide tail call at 1024), P.V's k-steps K = 64, the softmax and "
        "scaling of a tile (ggml_vec_soft_max_f32, _max_f32, _scale_f32 over 64 or 64 x 64 elements).",
        "Block loops of quantized K (q8_0 / q4_0 K: ggml_vec_dot_q8_0_q8_0, _q4_0_q8_0 over DK / 32 blocks) "
        "and V (dequantized row by row) are the quant_dot family's; here DK / DV are whole blocks (32-256).",
        "Real KV lengths (2048 / 4096 / 8192, split and one-chunk, one or two queries) are cut to "
        "MAX_WORK / (n_q (DK + DV)) positions: 8192 only with DK + DV <= 122, 3906 with DK = DV = 128.  "
        "With f16 V (an fp16 accumulator) drawn ones stop at 1100 positions per accumulator (F16_ACC_KV: "
        "the fp16 running error bound does not hold much further); the every-run decode of 4099 positions "
        "on 4 threads has 1025 per accumulator.",
        "Split chunks: the every-run decode (4099 positions, 4 threads) has three full chunks of 1025 and a "
        "shorter last one of 1024; 515 positions on 3 threads give 172, 172, 171.",
    )))


# ------------------------------------------------------------------ running

def attention_call(case: AttnCase, p: Problem, fused: bool) -> tuple[list[int], list[float], list]:
    """The kernel server request (see harness/server/k_graph.cpp) for one side."""
    sh, o = p.shape, p.opts
    types = tree.of(session().source)
    ip = [int(fused), types.type_id(case.k), types.type_id(case.v), sh.dk, sh.dv, sh.n_q, sh.n_kv, sh.heads,
          sh.kv_heads, o.mask_heads, sh.threads]
    fp = [o.scale, o.max_bias, o.softcap]
    bufs = [In(p.q), In(p.k), In(p.v), In(p.mask), In(p.sinks), Out(4 * sh.n_q * sh.heads * sh.dv)]
    return ip, fp, bufs


def run_attention(case: AttnCase, target, p: Problem, fused: bool) -> np.ndarray:
    sh = p.shape
    r = target.call("attention", *attention_call(case, p, fused))
    return r.output(0, np.float32).reshape(sh.n_q, sh.heads, sh.dv)


def assert_output_within(got: np.ndarray, expected: np.ndarray, bound: np.ndarray, *, name: str, context: str,
                         derivation: str) -> None:
    """Every element of ``got`` [n_q, H, DV] within its bound; the worst one is reported (and recorded)."""
    compare.assert_all_within(got, expected, bound, name=name, context=context, derivation=derivation,
                              index=lambda at: f"query {at[0]}, head {at[1]}, {at[2]}")


def _context(case: AttnCase, target, p: Problem, side: str) -> str:
    return f"{side}, K {case.k} / V {case.v}, {p!r}, {target.id}"


def check_attention(case: AttnCase, target, p: Problem) -> None:
    """One problem on both sides, judged as ``test_flash_attn`` says."""
    sh = p.shape
    path = fused_path(case.k, case.v, sh.n_q, sh.n_kv, sh.dv)
    assert path == case.path, f"table error: {p!r} takes {path}, not {case.path}"
    observe.note("path", path)
    q_f, arith_f = case.fused_arithmetic(sh.threads)
    q_m, arith_m = case.materialised_arithmetic()
    ref_f = A.reference(p.att, q_f)
    ref_m = ref_f if q_m == q_f else A.reference(p.att, q_m)
    bound_f = A.error_bound(p.att, ref_f, arith_f)
    bound_m = A.error_bound(p.att, ref_m, arith_m)

    # Each side is judged right after its call: a failure report replays the last call made.
    fused = run_attention(case, target, p, fused=True)
    assert_output_within(fused, ref_f.out, bound_f, name="fused", context=_context(case, target, p, f"fused {path}"),
                         derivation=f"oracles.attention.error_bound({arith_f}) with Q as {q_f}")
    mat = run_attention(case, target, p, fused=False)
    # Rows the materialised path defines: some position unmasked, or a sink.
    defined = (ref_m.active.any(axis=2).T | (p.opts.sinks))[:, :, None]
    if not defined.all():
        undefined = mat[~defined[:, :, 0]]
        observe.note("materialised", "rows without terms or sinks left out (they came out "
                     + ("NaN)" if np.isnan(undefined).all() else "partly finite)"))
    mat_d = np.where(defined, mat, 0.0)
    assert_output_within(mat_d, np.where(defined, ref_m.out, 0.0), np.where(defined, bound_m, 0.0),
                         name="materialised", context=_context(case, target, p, "materialised"),
                         derivation=f"oracles.attention.error_bound({arith_m}) with Q as {q_m}")
    parity = bound_f + bound_m + np.abs(ref_f.out - ref_m.out)
    assert_output_within(np.where(defined, fused, 0.0), mat_d, np.where(defined, parity, 0.0),
                         name="fused - materialised", context=_context(case, target, p, f"parity, fused {path}"),
                         derivation="bound(fused) + bound(materialised) + |oracle(fused) - oracle(materialised)|")
    # The cosine says something only for rows well above the flush floor: a row within 2^10 sqrt(DV)
    # floors of zero may be made of flushed or subnormal weights (1 - cos up to ~1), which the element-wise
    # bound covers; above it the floors of both sides turn it by at most 2^-9 rad together (1 - cos <= 2^-19).
    norm = np.linalg.norm(ref_f.out, axis=-1)
    directional = defined[:, :, 0] & (norm >= 2.0 ** 10 * math.sqrt(sh.dv) * A.flush_floor(p.att))
    if (defined[:, :, 0] & ~directional).any():
        observe.note("cos", "rows at the flush floor left out of the cosine (element-wise bound only)")
    cos = A.row_cosine(fused, mat_d)[directional]
    cos = cos[~np.isnan(cos)]
    if cos.size:
        worst = float(np.min(cos))
        observe.record("1-cos", 1.0 - worst)
        if case.gated:
            assert worst >= COS_GATE, (f"cos(fused, materialised)={worst!r}, but should be >= {COS_GATE} "
                                       f"[{_context(case, target, p, f'fused {path}')}]")


# ------------------------------------------------------------------ paths

#: Probe shapes per case: at and just past the thresholds (all must take the case's path).
PROBES: dict[str, list[Shape]] = {
    "tiled": [Shape(64, 65, 64, 64, 2, 1, 2), Shape(129, 64, 80, 80, 1, 1, 1)],
    "split": [Shape(1, 512, 64, 64, 4, 2, 2), Shape(1, 1025, 128, 128, 2, 1, 3)],
    "one_chunk": [Shape(63, 64, 64, 64, 2, 1, 2), Shape(1, 511, 64, 64, 2, 2, 1), Shape(2, 600, 64, 64, 1, 1, 2),
                  Shape(64, 64, 64, 6, 1, 1, 1), Shape(1, 600, 64, 64, 2, 1, 2), Shape(64, 70, 64, 64, 1, 1, 2)],
}


def executed_path(calls: frozenset[str], has_tiled: bool = True) -> str:
    """The fused path a trace shows (symbol names: see the module docstring).  Tiled: simd_gemm
    (or the tiled function) ran; where both are inlined (a tree whose simd_gemm is a scalar loop,
    ggml 2026-02 to 2026-04), the tiled path's ggml_vec_soft_max_f32 without the one-chunk function
    (the one-chunk and split paths do their softmax inline).  In a tree without a tiled path
    (``has_tiled`` False, 2025), the one-chunk function is the only fused path and its single
    caller may inline it: then the fused path ran is the one-chunk path."""
    chunk = any("flash_attn_ext_f16_one_chunk" in c for c in calls)
    tiled = has_tiled and (any("simd_gemm" in c or "flash_attn_ext_tiled" in c for c in calls) or
                           (not chunk and "ggml_vec_soft_max_f32" in calls))
    chunk = chunk or (not has_tiled and any("flash_attn_ext" in c for c in calls))
    scheduler = "ggml_threadpool_chunk_add" in calls
    if tiled and not chunk:
        return "tiled"
    if chunk and not tiled:
        return "one_chunk" if scheduler else "split"
    return f"unclear (simd_gemm: {tiled}, one_chunk: {chunk}, chunk scheduler: {scheduler})"


# ------------------------------------------------------------------ what the tree has (cases/coverage.py)

#: The RVV GEMM of the tiled path, and its functions the tiled cases run in the pinned tree.
SIMD_GEMM = "src/ggml-cpu/simd-gemm.h"
SIMD_GEMM_TESTED = ("simd_gemm", "rvv_simd_gemm_ukernel", "rvv_simd_gemm_dispatch_tail")


@coverage.register("flash_attn")
def scan(inv: Tree) -> coverage.FamilyScan:
    """simd-gemm.h (the tiled path's GEMM): a function with an RVV path is uncovered when the
    tiled cases do not run it (a new one, or no tiled case runs in this tree); a case of CASES
    the tree lacks a function or type for is not in this tree; a note when the tiled path's
    simd_gemm has no RVV path in this tree (the tiled cases run its scalar loop)."""
    src = inv.source
    out = coverage.FamilyScan("flash_attn")
    tiled = [c.name for c in CASES if c.path == "tiled" and not inv.missing(c.requires)]
    found = rvv_paths(src, (SIMD_GEMM,))
    for name, r in sorted(found.items()):
        if name not in SIMD_GEMM_TESTED or not tiled:
            why = ("no tiled case of CASES runs in this tree" if name in SIMD_GEMM_TESTED
                   else "the tiled cases of cases/flash_attn.py do not know it (SIMD_GEMM_TESTED)")
            out.uncovered.append(coverage.Uncovered(name, where(src, r.function), f"{r.describe()}; {why}"))
    if tiled and "simd_gemm" not in found and inv.has("simd_gemm"):
        out.notes.append(f"simd_gemm ({SIMD_GEMM}) has no RVV path in this tree: {', '.join(tiled)} run its "
                         "scalar loop")
    for c in CASES:
        out.lacks(inv, c)
    out.notes += file_notes(src, (SIMD_GEMM,))
    return out

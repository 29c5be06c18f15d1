"""The flash attention family's kernel table and problems (cases/flash_attn.py is the family's
definition: bounds, loop levels, checks, paths, coverage): the cases (K / V types, paths), the
rules that pick a path, the shapes and the data the strategies draw.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from hypothesis import strategies as st

from cases import strategies as S
from harness.ggml import csource
from harness.ggml.source import GgmlSource
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
    of 32 x 16) or ``DV % GGML_F32_EPR == 0`` (the simd_gemm era, tiles of 64 x 64).  The DV rule sits
    under ``#if defined(GGML_SIMD)``: a build without V (rv64gc) has no GGML_SIMD, and no DV rule."""

    q: int = Q_TILE
    kv: int = KV_TILE
    kv_multiple: bool = False
    dv_epr: bool = True
    present: bool = True  # the tree has a tiled path at all (before 2026-02 it does not)

    def takes(self, n_q: int, n_kv: int, dv: int, *, vector: bool = True) -> bool:
        return self.present and n_q >= self.q and (not self.kv_multiple or n_kv % self.kv == 0) and \
            (not self.dv_epr or not vector or dv % F32_EPR == 0)


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


def fused_path(k: str, v: str, n_q: int, n_kv: int, dv: int, *, vector: bool = True) -> str:
    """The path ggml_compute_forward_flash_attn_ext_f16 takes (the module docstring's rules, with
    the tree's own tiled-path rule) in a build with V, or without it (``vector`` False: rv64gc)."""
    f = k == v and k in ("f32", "f16")
    if f and n_q == 1 and n_kv >= SPLIT_MIN_KV:
        return "split"
    if f and tiled_rule().takes(n_q, n_kv, dv, vector=vector):
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
        and the K type's vec_dot (harness/plugin/marks.py skips the case as "not in this tree" when the
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
def shapes(draw: st.DrawFn, case: AttnCase, vector: bool = True) -> Shape:
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
        shape = _keep_one_chunk(case, shape, vector)
    return shape


def _keep_one_chunk(case: AttnCase, sh: Shape, vector: bool = True) -> Shape:
    """Moves an f32 / f16 shape off the tiled and split conditions, onto their near misses (in a build
    without V, where the tiled path has no DV rule, the one query short of a Q tile)."""
    if fused_path(case.k, case.v, sh.n_q, sh.n_kv, sh.dv, vector=vector) == "one_chunk":
        return sh
    if sh.n_q == 1:  # split needs n_kv >= 512: one less, or two queries
        return Shape(2, sh.n_kv, sh.dk, sh.dv, sh.heads, sh.kv_heads, sh.threads) if sh.n_kv > 512 else \
            Shape(1, 511, sh.dk, sh.dv, sh.heads, sh.kv_heads, sh.threads)
    rule = tiled_rule()
    if rule.kv_multiple:  # the first tiled path also needs n_kv % KV tile == 0: one position more
        return Shape(sh.n_q, sh.n_kv + 1, sh.dk, sh.dv, sh.heads, sh.kv_heads, sh.threads)
    if not vector:  # tiled needs n_q >= 64 only: a query short of a tile
        return Shape(rule.q - 1, sh.n_kv, sh.dk, sh.dv, sh.heads, sh.kv_heads, sh.threads)
    # tiled needs n_q >= 64 and DV % 4 == 0: one query less, or a DV that is not a multiple of 4
    return Shape(rule.q - 1, sh.n_kv, sh.dk, sh.dv, sh.heads, sh.kv_heads, sh.threads) if sh.n_q == rule.q else \
        Shape(sh.n_q, sh.n_kv, sh.dk, sh.dv + 2, sh.heads, sh.kv_heads, sh.threads)


# ------------------------------------------------------------------ data

MASKS = ("none", "causal", "random", "rows", "tiles")
#: Mask kinds ``_mask`` also makes (families that draw them name them): "padding" is a KV cache padded past
#: the cells in use, as llama.cpp pads the cells it attends over (cases/spacemit_fa_problems.py).
MASK_KINDS = (*MASKS, "padding")


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
    -|distance| (rounded to fp16) with ALiBi, else Gaussian values rounded to fp16.  padding: the last
    1-63 positions masked for every query (cells of the cache not in use), causal over the others.
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
    elif kind == "padding":
        used = n_kv - int(rng.integers(1, min(63, n_kv - 1) + 1)) if n_kv > 1 else n_kv
        masked |= ((j >= used) | (j > i + (used - n_q)))[None]
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


def problems(case: AttnCase, vector: bool = True, *, shape: st.SearchStrategy[Shape] | None = None,
             masks: tuple[str, ...] = MASKS) -> st.SearchStrategy[Problem]:
    """A shape of the case's path (or of ``shape``), a mask kind of ``masks`` (with ALiBi or not), softcap,
    sinks, scale, sharpness of the softmax and an offset of V; the data from a seed."""
    if not masks or any(m not in MASK_KINDS for m in masks):
        raise ValueError(f"problems: masks must be some of {MASK_KINDS}, not {masks!r}")
    return _problems(case, shapes(case, vector) if shape is None else shape, masks)


@st.composite
def _problems(draw: st.DrawFn, case: AttnCase, shape: st.SearchStrategy[Shape], masks: tuple[str, ...]) -> Problem:
    sh = draw(shape, label="shape")
    mask = draw(st.sampled_from(masks), label="mask")
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



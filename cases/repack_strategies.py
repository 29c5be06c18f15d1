"""The repack family's strategies: weights and activations drawn for each kernel of the table
(cases/repack_kernels.py), the shapes every run checks, and the mul_mat cases (random and exact by
construction)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np
from hypothesis import strategies as st

from cases import quant_blocks as QB
from cases.repack_kernels import RepackKernel
from oracles import quants as Q

# ------------------------------------------------------------------ strategies


#: Small block counts along K the strategies draw (shrinking goes to the first).
SMALL_BLOCKS = (1, 7)
#: k of real models' weight matrices (hidden 4096, FFN 5632 and 14336): 128 / 176 / 448 blocks of
#: 32, 16 / 22 / 56 super-blocks of 256 per row.  Long k is cheap with few columns and rows.
REAL_K = (4096, 5632, 14336)
#: Column tiles (interleaves) and GEMM row groups the direct-call strategy draws at small k.
GEMX_TILES = (1, 3)
GEMM_GROUPS = (1, 3)
#: Weight-row interleaves, activation rows, threads and planes of the mul_mat strategy.
MUL_MAT_TILES = (1, 4)
MUL_MAT_ROWS = (*range(1, 10), 12, 13)
MUL_MAT_THREADS = (1, 4)
MUL_MAT_PLANES = (1, 2)


def real_blocks(block: int) -> tuple[int, ...]:
    """Blocks of ``block`` elements per row of the real-model k (``REAL_K``)."""
    return tuple(k // block for k in REAL_K)


@cache
def block_counts(block: int | None = None) -> st.SearchStrategy[int]:
    """Blocks along K: 1 (shrinking goes there), 2, 3, odd / even counts up to 7, and (given the
    block size) now and then the block count of a real model's row (``REAL_K``).  One strategy per block size
    (``QB.scale_class_lists`` says why)."""
    small = st.one_of(st.integers(1, 3), st.sampled_from([4, 5, 7]))
    return small if block is None else st.one_of(small, st.sampled_from(real_blocks(block)))


@dataclass(frozen=True)
class GemxCase:
    """Weights ``(nc, n_blocks, block)`` and activation rows ``(nr, n_blocks, block)``, raw."""

    kernel: RepackKernel
    kind: str
    weights: np.ndarray
    acts: np.ndarray

    @property
    def nc(self) -> int:
        return self.weights.shape[0]

    @property
    def n_blocks(self) -> int:
        return self.weights.shape[1]

    @property
    def nr(self) -> int:
        return self.acts.shape[0]

    @property
    def k(self) -> int:
        return self.n_blocks * Q.block_size(self.kernel.layout.weight)

    def __repr__(self) -> str:
        return f"GemxCase({self.kernel.name} {self.kind}: nr={self.nr}, nc={self.nc}, n_blocks={self.n_blocks})"

    def _repr_pretty_(self, p, cycle) -> None:  # Hypothesis's printer of failing examples
        p.text(repr(self))


def weight_matrix(name: str, rows: int, n_blocks: int, recipe: QB.RowRecipe) -> np.ndarray:
    """``rows`` weight rows of ``name`` from one recipe, as ``(rows, n_blocks, block_bytes)``."""
    return QB.weight_row(name, rows * n_blocks, recipe).reshape(rows, n_blocks, -1)


@st.composite
def activation_rows(draw: st.DrawFn, name: str, rows: int, n_blocks: int) -> np.ndarray:
    """``rows`` raw activation rows of ``name`` (consistent q8_K bsums): drawn scale classes and quant mode."""
    classes = draw(QB.scale_class_lists(QB.SCALE_CLASSES), label="a_scales")
    qs_mode = draw(st.sampled_from(QB.QS_MODES), label="a_qs")
    seed = draw(st.integers(0, 2**32 - 1), label="a_seed")
    return np.stack([QB.activation_row(name, n_blocks, seed + r, classes, qs_mode) for r in range(rows)])


@st.composite
def gemx_cases(draw: st.DrawFn, kernel: RepackKernel, kind: str) -> GemxCase:
    """Column counts 1-3 interleaves (16 / 32 / 48 or 8 / 16 / 24), 1-7 blocks or a real model's
    count (then one interleave and one row group: long k is what is tested, and it stays cheap),
    GEMV 1-5 rows or GEMM 4 / 8 / 12 rows; weights from raw blocks with edge encodings,
    activations raw."""
    lay = kernel.layout
    nb = draw(block_counts(Q.block_size(lay.weight)), label="n_blocks")
    small = nb <= SMALL_BLOCKS[1]
    nc = lay.ncols * draw(st.integers(GEMX_TILES[0], GEMX_TILES[1] if small else 1), label="interleaves")
    nr = (draw(st.integers(1, 5 if small else 1), label="rows") if kind == "gemv"
          else 4 * draw(st.integers(GEMM_GROUPS[0], GEMM_GROUPS[1] if small else 1), label="row_groups"))
    w = weight_matrix(lay.weight, nc, nb, draw(QB.recipes(), label="w_recipe"))
    a = draw(activation_rows(lay.activation, nr, nb), label="acts")
    return GemxCase(kernel, kind, w, a)


@dataclass(frozen=True)
class GemxShape:
    """The shape of one fixed direct call: activation rows, column interleaves, blocks."""

    nr: int
    interleaves: int
    n_blocks: int


#: Columns one kernel call gets in mul_mat of a 4096-row matrix on 4 threads (chunks of 256 rows).
REAL_COLUMNS = 256


def gemx_shapes(kernel: RepackKernel, kind: str) -> list[GemxShape]:
    """The shapes every run checks for one kernel, smallest first: every loop level crossed
    three times (3 column tiles, 3 GEMM row groups, 3 blocks); the longest real k (448 blocks
    of 32 or 56 super-blocks) on one tile and one row group; as many columns as one call gets
    in a real model's mul_mat (``REAL_COLUMNS``: 16 or 32 tiles), on 2 blocks.  The size table reads these."""
    gemm = kind == "gemm"
    one = 4 if gemm else 1
    return [GemxShape(4 * GEMM_GROUPS[1] if gemm else 2, GEMX_TILES[1], 3),
            GemxShape(one, 1, real_blocks(Q.block_size(kernel.layout.weight))[-1]),
            GemxShape(one, REAL_COLUMNS // kernel.layout.ncols, 2)]


def gemx_examples(kernel: RepackKernel, kind: str) -> list[GemxCase]:
    """:func:`gemx_shapes` with seeded data: ordinary weights (normal scales, random payload and
    sub-scales) and activations (normal scales, random quants)."""
    lay = kernel.layout
    out = []
    for i, s in enumerate(gemx_shapes(kernel, kind)):
        recipe = QB.RowRecipe(i, ("normal",), "random", "random")
        w = weight_matrix(lay.weight, s.interleaves * lay.ncols, s.n_blocks, recipe)
        a = np.stack([QB.activation_row(lay.activation, s.n_blocks, 1000 * i + r, ("normal",), "random")
                      for r in range(s.nr)])
        out.append(GemxCase(kernel, kind, w, a))
    return out


@dataclass(frozen=True)
class MulMatCase:
    """mul_mat(W, X): weights ``(m, n_blocks, block)`` raw, X ``(batch, n, k)`` float32 whose every
    block quantizes without rounding (``acts``: the quantized rows, ``(batch * n, n_blocks, block)``)."""

    kernel: RepackKernel
    weights: np.ndarray
    x: np.ndarray
    acts: np.ndarray
    threads: int
    units: np.ndarray | None  # exact cases: per activation row the finest bit of any product; None: random

    @property
    def exact(self) -> bool:
        return self.units is not None

    @property
    def m(self) -> int:
        return self.weights.shape[0]

    @property
    def n_blocks(self) -> int:
        return self.weights.shape[1]

    @property
    def batch(self) -> int:
        return self.x.shape[0]

    @property
    def n(self) -> int:
        return self.x.shape[1]

    @property
    def k(self) -> int:
        return self.x.shape[2]

    def __repr__(self) -> str:
        return (f"MulMatCase({self.kernel.name}: m={self.m}, n={self.n}, batch={self.batch}, n_blocks={self.n_blocks}, "
                f"threads={self.threads}{', exact' if self.exact else ''})")

    def _repr_pretty_(self, p, cycle) -> None:  # Hypothesis's printer of failing examples
        p.text(repr(self))


def quantizable_rows(act: str, rows: int, n_blocks: int, seed: int, max_q: int, exps: np.ndarray) -> np.ndarray:
    """Float rows ``(rows, n_blocks * block)`` that ggml's q8 quantizers store without rounding:
    per block integers in [-max_q, max_q] with one +-127 (the block maximum, so the scale is
    exactly 2^e), times ``2^exps[row, block]``."""
    blk = Q.block_size(act)
    rng = np.random.default_rng(seed)
    q = rng.integers(-max_q, max_q + 1, (rows, n_blocks, blk))
    pos = rng.integers(0, blk, (rows, n_blocks))
    r, b = np.meshgrid(np.arange(rows), np.arange(n_blocks), indexing="ij")
    q[r, b, pos] = np.where(rng.random((rows, n_blocks)) < 0.5, -127, 127)
    return (q * np.exp2(exps)[:, :, None]).reshape(rows, -1).astype(np.float32)


def quantize_rows(act: str, x: np.ndarray) -> np.ndarray:
    """Rows of floats -> their q8 rows (the reference quantizer), ``(rows, n_blocks, block_bytes)``;
    asserts the premise that they quantize without rounding."""
    rows = np.stack([QB.quantized_activation_row(act, r) for r in x])
    back = np.stack([Q.dequantize(act, r) for r in rows])
    if not np.array_equal(back, x.astype(np.float64)):
        raise AssertionError(f"quantizable_rows premise broken: {act} rows do not quantize exactly")
    return rows


def _pow2_scales(name: str, w: np.ndarray, e: int, rng: np.random.Generator) -> np.ndarray:
    """``w`` with every fp16 scale set to +-2^e (random signs)."""
    flat = w.reshape(-1, w.shape[-1]).copy()
    mag = np.float16(2.0 ** e).view(np.uint16)
    for off in QB.LAYOUTS[name].fp16:
        signs = np.where(rng.random(len(flat)) < 0.5, 0, 0x8000).astype(np.uint16)
        flat[:, off:off + 2] = (mag | signs).reshape(-1, 1).view(np.uint8)
    return flat.reshape(w.shape)


def exact_mul_mat_case(kernel: RepackKernel, m: int, n: int, batch: int, threads: int, n_blocks: int, seed: int,
                       payload: str = "random", subscales: str = "random") -> MulMatCase:
    """Scales +-2^e (weights, one e) and +-2^e' (one per activation row), quants bounded so that
    every result is exact in fp32 (module doc)."""
    lay = kernel.layout
    rng = np.random.default_rng(seed)
    rows, k = batch * n, n_blocks * Q.block_size(lay.weight)
    e = int(rng.integers(-4, 5))
    w = weight_matrix(lay.weight, m, n_blocks, QB.RowRecipe(seed, ("pow2",), payload, subscales))
    w = _pow2_scales(lay.weight, w, e, rng)
    n_act = k // Q.block_size(lay.activation)
    max_q = int(np.clip((2 ** 24 // kernel.max_int - 127 * n_act) // max(1, k - n_act), 0, 127))
    e_row = rng.integers(-6, 3, rows)
    x = quantizable_rows(lay.activation, rows, n_act, seed + 1, max_q, np.repeat(e_row[:, None], n_act, axis=1))
    return MulMatCase(kernel, w, x.reshape(batch, n, k), quantize_rows(lay.activation, x), threads,
                      np.exp2(e + e_row.astype(np.float64)))


def random_mul_mat_case(kernel: RepackKernel, m: int, n: int, batch: int, threads: int, n_blocks: int, seed: int,
                        recipe: QB.RowRecipe) -> MulMatCase:
    """Weights with edge encodings; activations with one exponent per block in [-8, 4]."""
    lay = kernel.layout
    rows, k = batch * n, n_blocks * Q.block_size(lay.weight)
    n_act = k // Q.block_size(lay.activation)
    exps = np.random.default_rng(seed).integers(-8, 5, (rows, n_act))
    x = quantizable_rows(lay.activation, rows, n_act, seed, 127, exps)
    return MulMatCase(kernel, weight_matrix(lay.weight, m, n_blocks, recipe), x.reshape(batch, n, k),
                      quantize_rows(lay.activation, x), threads, None)


@st.composite
def mul_mat_cases(draw: st.DrawFn, kernel: RepackKernel, *, exact: bool) -> MulMatCase:
    """Weight rows 16-64 (one to four interleaves), activation rows 1-9 and 12, 13 (not multiples
    of 4: the leftover rows go through GEMV), 1-7 blocks or a real model's count (then 16 weight
    rows), 1-2 planes, 1-4 threads; :func:`exact_mul_mat_case` or :func:`random_mul_mat_case`."""
    nb = draw(block_counts(Q.block_size(kernel.layout.weight)), label="n_blocks")
    m = 16 * draw(st.integers(MUL_MAT_TILES[0], MUL_MAT_TILES[1] if nb <= SMALL_BLOCKS[1] else 1), label="interleaves")
    n = draw(st.one_of(st.integers(1, 9), st.sampled_from(MUL_MAT_ROWS[9:])), label="n")
    batch = draw(st.integers(*MUL_MAT_PLANES), label="batch")
    threads = draw(st.one_of(st.just(1), st.integers(2, MUL_MAT_THREADS[1])), label="threads")
    seed = draw(st.integers(0, 2**32 - 1), label="seed")
    if exact:
        return exact_mul_mat_case(kernel, m, n, batch, threads, nb, seed, draw(st.sampled_from(QB.PAYLOAD_MODES),
                                  label="payload"), draw(st.sampled_from(QB.SUBSCALE_MODES), label="subscales"))
    return random_mul_mat_case(kernel, m, n, batch, threads, nb, seed, draw(QB.recipes(), label="w_recipe"))


@dataclass(frozen=True)
class MulMatShape:
    """The shape of one fixed mul_mat: weight rows, activation rows, planes, threads, blocks."""

    m: int
    n: int
    batch: int
    threads: int
    n_blocks: int


def mul_mat_shapes(kernel: RepackKernel) -> list[MulMatShape]:
    """The mul_mat shapes every run checks, smallest first:

    * 48 weight rows (3 column tiles in one chunk), 11 activation rows (2 GEMM row groups and 3
      leftover rows through GEMV and quantize_row), 3 blocks;
    * 272 weight rows on 2 threads and 2 planes: 8 chunks of 34 rows per plane (two tiles and a
      remainder), each boundary rounded up to the next tile (chunks of 48 and 32 rows,
      :func:`mul_mat_chunks`), which no 16-64-row matrix makes (their chunks are one tile or
      the whole matrix);
    * one tile, 5 activation rows, the longest real k (448 blocks of 32 or 56 super-blocks);
    * a real model's 4096 weight rows on 4 threads (16 chunks of 256 rows per plane), one block."""
    return [MulMatShape(48, 11, 1, 1, 3), MulMatShape(272, 5, 2, 2, 2),
            MulMatShape(16, 5, 1, 2, real_blocks(Q.block_size(kernel.layout.weight))[-1]),
            MulMatShape(4096, 5, 1, 4, 1)]


def mul_mat_examples(kernel: RepackKernel, *, exact: bool) -> list[MulMatCase]:
    """:func:`mul_mat_shapes` with seeded data (exact by construction, or ordinary weights)."""
    out = []
    for i, s in enumerate(mul_mat_shapes(kernel)):
        if exact:
            out.append(exact_mul_mat_case(kernel, s.m, s.n, s.batch, s.threads, s.n_blocks, seed=i))
        else:
            out.append(random_mul_mat_case(kernel, s.m, s.n, s.batch, s.threads, s.n_blocks, seed=i,
                                           recipe=QB.RowRecipe(i, ("normal",), "random", "random")))
    return out


def mul_mat_chunks(m: int, threads: int, ncols: int = 16) -> tuple[int, list[tuple[int, int]]]:
    """How ``forward_mul_mat`` (repack.cpp) splits ``m`` weight rows of one plane (no NUMA): the
    rows per chunk ``dr0`` (about 4 chunks per thread, at least ``ncols`` rows each) and the
    chunks' ranges, boundaries rounded up to a multiple of ``ncols``, empty chunks dropped."""
    nth4 = threads * 4
    size = -(-m // nth4)
    nchunk = -(-m // size)
    if nchunk > 0 and m // nchunk < ncols and m >= ncols:
        nchunk = -(-m // ncols)
    dr = -(-m // nchunk)
    if threads == 1 or (nchunk < threads and -(-m // threads) >= ncols):
        nchunk = threads
        dr = -(-m // nchunk)
    nchunk = min(nchunk, -(-m // ncols))
    up = lambda v: -(-v // ncols) * ncols  # noqa: E731
    out = []
    for i in range(nchunk):
        start, end = up(dr * i), min(up(min(dr * i + dr, m)), m)
        if start < end:
            out.append((start, end))
    return dr, out



"""The mul_mat family's shapes (cases/mul_mat.py is the family's definition: the table, bounds,
checks, loop levels and coverage): a call's shape, the loops of both paths (tinyBLAS_RVV and its
vec_dot fallback) and the plan each takes, the shapes every run checks (``loop_shapes``) and the
shapes the strategies draw (small ones, and real-model sizes).
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st


@dataclass(frozen=True)
class Shape:
    k: int
    m: int
    n: int
    threads: int = 1
    batch: int = 1  # A matrices
    bcast: int = 1  # B matrices per A matrix (ggml's broadcast of src0)
    pad: int = 0  # extra elements at the end of each A row (lda = k + pad)


# ------------------------------------------------------------------ the loops of both paths
#
# tinyBLAS_RVV (llamafile/sgemm.cpp, LMUL 4: RM = RN = 2, BN = 36), per llamafile_sgemm call:
#   for each B matrix (batch x bcast, ggml-cpu.c ggml_compute_forward_mul_mat) ->
#   jobs = ytiles x NB_BN, thread ith takes job ith, then the next free one (chunk_add) ->
#   a job is a panel of RM * BM rows of A and an n-block of ~BN column tiles ->
#   BM row blocks of RM rows -> column tiles of RN = 2 (then one RN - 1 = 1 edge tile) ->
#   gemm_bloc_2x2 / 2x1: k-steps of VLMAX = VLEN / 8 (k % VLMAX == 0 by the entry condition).
# vec_dot fallback (ggml-cpu.c ggml_compute_forward_mul_mat / _one_chunk):
#   chunks of 16 x 16 outputs (64 when m or n*batch*bcast is 1; one chunk per thread when
#   there are fewer than 4 per thread), threads take them dynamically ->
#   blocks of 16 rows of A x 16 B rows -> one ggml_vec_dot_<type> over k per output.

RM = RN = 2  # tinyBLAS_RVV's register block at LMUL 4 (mnpack<2, 2, BM>)
BN = 36  # column tiles per n-block (mnpack's BN argument at LMUL 4)
FALLBACK_CHUNK = 16  # rows / columns of C per chunk and per block of the vec_dot fallback

#: Sizes real models use: the dot length k (hidden 2048-8192, FFN 5632-14336), the rows m
#: of a weight matrix, and the tokens n of a prompt batch.  All are multiples of VLEN / 8 at
#: every VLEN, so on tinyBLAS_RVV's path when m and n allow.
REAL_K = (2048, 4096, 5632, 8192, 11008, 14336)
REAL_M = (2048, 4096)
REAL_N = (512,)
#: The other two sizes of a shape with one real-model size: small, so it stays cheap under QEMU.
REAL_SMALL_M = (4, 8, 16, 1, 3)
REAL_SMALL_N = (2, 1, 3, 5)
#: k offsets of a real-model k: 0 stays on tinyBLAS_RVV, 1 takes the vec_dot fallback over a long row.
REAL_K_OFFSETS = (0, 1)
#: Small random shapes: m and n up to these.
SMALL_M = [4, 8, 12, 16, 24, 32, 48, 64, 1, 2, 3, 5, 6, 7, 10, 13, 21]
SMALL_N = [2, 3, 4, 5, 1, 6, 7, 8, 9, 16, 17, 31]
M_MAX = max(SMALL_M)
BATCH_MAX = 2  # A matrices, and B matrices per A matrix, of a small random shape


def block_rows(m: int, threads: int) -> int:
    """tinyBLAS_RVV's BM (row blocks of RM rows per panel) for m rows of A at LMUL 4."""
    return 8 if m % 16 == 0 and m // 16 >= threads else 4 if m % 8 == 0 else 2


def on_tinyblas(vlen: int, k: int, m: int, n: int, min_n: int = 2) -> bool:
    """tinyBLAS_RVV's entry conditions apart from the type (module docstring); ``min_n``: the smallest
    batch llamafile_sgemm hands it (cases/mul_mat.py reads it from the tree; 2 in the pinned tree)."""
    return n >= min_n and k % (vlen // 8) == 0 and m % 4 == 0


@dataclass(frozen=True)
class Plan:
    """How tinyBLAS_RVV's gemm<2, 2, BM> splits one B matrix's product (its own arithmetic)."""

    bm: int
    ytiles: int  # panels of RM * BM rows
    xtiles: int  # column tiles of RN (the last one of 1 column when n is odd)
    nb_bn: int  # n-blocks of about BN tiles
    jobs: int  # ytiles * nb_bn, shared by the threads


def tinyblas_plan(sh: Shape, vlen: int) -> Plan | None:
    """gemm's tiling of ``sh`` at ``vlen``; None when the shape takes the vec_dot fallback."""
    if not on_tinyblas(vlen, sh.k, sh.m, sh.n):
        return None
    bm = block_rows(sh.m, sh.threads)
    ytiles, xtiles = sh.m // (RM * bm), -(-sh.n // RN)
    nb_bn = 1 if xtiles < BN else (xtiles + BN // 2) // BN
    return Plan(bm, ytiles, xtiles, nb_bn, ytiles * nb_bn)


def fallback_chunks(sh: Shape) -> int:
    """Chunks of C the vec_dot fallback shares among the threads (ggml_compute_forward_mul_mat)."""
    nr0, nr1 = sh.m, sh.n * sh.batch * sh.bcast
    size = 64 if nr0 == 1 or nr1 == 1 else FALLBACK_CHUNK
    n0, n1 = -(-nr0 // size), -(-nr1 // size)
    if n0 * n1 < 4 * sh.threads:  # re-chunked by thread
        n0, n1 = (sh.threads, 1) if nr0 > nr1 else (1, sh.threads)
    return n0 * n1


def loop_shapes(vlen: int) -> list[Shape]:
    """Shapes checked on every run at ``vlen`` (``s`` = VLMAX = VLEN / 8) that cross every loop
    level of both paths at least twice plus a remainder:

    * (5s, 20, 5, 2 threads): five k-steps (more than four), BM = 2 with five panels of 4
      rows = five jobs on two threads, column tiles 2 + 2 + an edge tile of 1;
    * (s, 24, 3, batch 2 x bcast 2): BM = 4 with three panels of 8 rows, four B matrices
      over two A matrices;
    * (s, 32, 145, 2 threads): BM = 8 with two panels of 16 rows, 73 column tiles in two
      n-blocks (37 + 36 tiles), four jobs;
    * (4s + 3, 37, 17 x bcast 2, 2 threads): the vec_dot fallback with rows of two full
      strips of ggml_vec_dot_f32 (VLEN / 4) plus 3, 37 = 16 + 16 + 5 rows and 34 = 16 + 16 + 2
      columns, nine chunks on two threads.
    """
    s = vlen // 8
    return [
        Shape(5 * s, 20, 5, threads=2),
        Shape(s, 24, 3, batch=2, bcast=2),
        Shape(s, 32, 2 * BN * RN + 1, threads=2),
        Shape(4 * s + 3, 2 * FALLBACK_CHUNK + 5, FALLBACK_CHUNK + 1, threads=2, bcast=2),
    ]


@st.composite
def small_shapes(draw: st.DrawFn, vlen: int) -> Shape:
    """Shapes at and just outside tinyBLAS_RVV's conditions at ``vlen``: k multiples of
    VLEN/8 and near misses, m multiples of 4/8/16 and odd m, n from 1 up, 1-4 threads,
    batches with broadcast, padded A rows.  The edge values come first in each list, so a
    failure shrinks towards the smallest tinyBLAS-able shape that still fails."""
    step = vlen // 8
    ks = [step, 2 * step, step - 1, step + 1, 1, 2, 3, 3 * step, 4 * step, 2 * step - 2, 3 * step + 4]
    k = draw(st.one_of(st.sampled_from(list(dict.fromkeys(ks))), st.integers(1, 3 * step)), label="k")
    m = draw(st.one_of(st.sampled_from(SMALL_M), st.integers(1, M_MAX)), label="m")
    n = draw(st.sampled_from(SMALL_N), label="n")
    threads = draw(st.one_of(st.just(1), st.integers(2, 4)), label="threads")  # extra threads cost ~20 ms each
    batch = draw(st.integers(1, BATCH_MAX), label="batch")
    bcast = draw(st.integers(1, BATCH_MAX), label="bcast")
    pad = draw(st.sampled_from([0, 0, 3, step]), label="pad")
    return Shape(k, m, n, threads, batch, bcast, pad)


@st.composite
def real_shapes(draw: st.DrawFn, vlen: int) -> Shape:
    """One real-model size with the other two small (cheap under QEMU): a long k (2048-14336,
    hundreds of k-steps; +1 for the vec_dot fallback over a long row, n = 1 is decoding), many
    rows m of a weight matrix at one k-step, or a prompt batch of n columns.  Smallest first."""
    s = vlen // 8
    which = draw(st.sampled_from(["k", "m", "n"]), label="real")
    k = s
    m = draw(st.sampled_from(REAL_SMALL_M), label="m")
    n = draw(st.sampled_from(REAL_SMALL_N), label="n")
    if which == "k":
        k = draw(st.sampled_from(REAL_K), label="k") + draw(st.sampled_from(REAL_K_OFFSETS), label="k_offset")
    elif which == "m":
        m = draw(st.sampled_from(REAL_M), label="m_real")
    else:
        n = draw(st.sampled_from(REAL_N), label="n_real")
    threads = draw(st.one_of(st.just(1), st.integers(2, 4)), label="threads")
    return Shape(k, m, n, threads)


def shapes(vlen: int) -> st.SearchStrategy[Shape]:
    """Small shapes three times in four, a shape with one real-model size otherwise (small first,
    so a failure shrinks towards a small shape when one fails too)."""
    return st.sampled_from(["small", "small", "small", "real"]).flatmap(
        lambda kind: small_shapes(vlen) if kind == "small" else real_shapes(vlen))


def largest_shapes(vlen: int) -> list[Shape]:
    """The largest shapes ``shapes`` can draw on two threads, per kind and path (for the ranges
    of jobs and chunks in the size table): small; real k; real m on tinyBLAS_RVV and, with
    n = 1, on the fallback; real n on tinyBLAS_RVV and, with m = 3, on the fallback."""
    s = vlen // 8
    return [Shape(4 * s, M_MAX, max(SMALL_N), 2, BATCH_MAX, BATCH_MAX),
            Shape(max(REAL_K) + max(REAL_K_OFFSETS), max(REAL_SMALL_M), max(REAL_SMALL_N), 2),
            Shape(s, max(REAL_M), max(REAL_SMALL_N), 2), Shape(s, max(REAL_M), 1, 2),
            Shape(s, max(REAL_SMALL_M), max(REAL_N), 2), Shape(s, 3, max(REAL_N), 2)]

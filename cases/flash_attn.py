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
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from cases import coverage
from cases import loops as L
from cases.flash_attn_problems import (
    BLOCK_BYTES,
    CASES,
    CHUNK_KV,
    COS_GATE,
    F32_EPR,
    HEAD_SIZES,
    KV_TILE,
    Q_TILE,
    REAL_KV,
    SPLIT_KV,
    THREADS,
    TILED_KV,
    TILED_NQ,
    AttnCase,
    Options,
    Problem,
    Shape,
    fused_path,
    make_problem,
)
from cases.vec_source import file_notes, rvv_paths, where
from harness.check import compare, observe
from harness.emulators.protocol import In, Out
from harness.ggml import tree
from harness.ggml.tree import Tree
from harness.plugin.targets import session
from oracles import attention as A

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


#: The split path cuts the KV range into ceil(n_kv / threads) positions per thread: with more threads than
#: that leaves chunks, the last threads get none (``ic_start >= nek1``: the branch for an empty chunk, and the
#: reduction skipping it).  A 64-core server (SG2042) does this on many decodes below 4000 positions;
#: at n_kv >= 512 it needs at least 24 threads, and with a shorter last chunk as well at least 25: 526
#: positions on 25 threads give 23 chunks of 22, one of 20, and thread 24 without a position
#: (``empty_chunk_split``).  Fewer threads are cheaper under QEMU, where every ggml thread is a host thread
#: spinning at ggml_barrier (on two shared cores, the fused call took 0.4-0.75 s on 25 threads and 2.7-4.3 s
#: on 64, the materialised one 0.8-1.0 s and 3.2-4.3 s).
EMPTY_CHUNK_KV, EMPTY_CHUNK_THREADS = 526, 25
#: The split case that runs the empty-chunk shape.  The empty branch and the reduction are the same code for
#: every K / V type (the branch stores M = -inf, S = 0; ggml_flash_attn_ext_reduce_partials combines f32
#: partials whatever the types), so one case takes them: the f32 one, whose bound is the tighter and which
#: has the cosine gate.  The other split case crosses the same chunk loops with the shapes before it.
EMPTY_CHUNK_CASE = "split-f32"


def empty_chunk_split(n_kv: int, threads: int) -> tuple[int, int, int]:
    """The split path's cut of ``n_kv`` positions on ``threads`` threads (ops.cpp,
    ggml_compute_forward_flash_attn_ext_f16): (positions per chunk, positions of the last chunk,
    threads without a position)."""
    size = -(-n_kv // threads)
    chunks = -(-n_kv // size)
    return size, n_kv - (chunks - 1) * size, threads - chunks


def loop_shapes(case: AttnCase, vlen: int) -> list[Shape]:
    """The shapes every run checks (after ``test_flash_attn``'s drawn problems), so that each
    loop level of the case's path runs two full iterations and a remainder at ``vlen``:

    * tiled: 133 queries on one thread (two full 64-row Q tiles and 5 rows) x 135 KV positions
      (two full KV tiles and 7); then one tile with DV = 2.5 x KN (simd_gemm's column loop of
      the P.V product twice and a remainder: DV 40 / 80 / 160 / 320 at VLEN 128 ... 1024);
    * split: a decode of 4099 positions on 4 threads (three full chunks of 1025 and one of
      1024, ~1M multiply-adds), then 515 positions on 3 threads with the crossing head sizes,
      then, for ``EMPTY_CHUNK_CASE``, 526 positions on 25 threads: chunks of 22 and a last one of 20,
      so thread 24 gets no KV position (the branch for an empty chunk, and the reduction skipping it);
    * one-chunk: two queries, 67 positions, with DK / DV crossing the K type's vec_dot and
      V's accumulation (``_dims``).
    """
    dk, dv = _dims(case, vlen)
    if case.path == "tiled":
        n = crossing(gemm_n_step(vlen), F32_EPR)
        return [Shape(2 * Q_TILE + 5, 2 * KV_TILE + 7, 64, 64, 1, 1, 1), Shape(Q_TILE, KV_TILE, 64, n, 1, 1, 1)]
    if case.path == "split":
        empty = [Shape(1, EMPTY_CHUNK_KV, 64, 64, 2, 1, EMPTY_CHUNK_THREADS)] if case.name == EMPTY_CHUNK_CASE else []
        return [Shape(1, 4099, 128, 128, 1, 1, 4), Shape(1, 515, dk, dv, 1, 1, 3), *empty]
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
        "shorter last one of 1024; 515 positions on 3 threads give 172, 172, 171; 526 positions on 25 threads "
        "(split-f32 only: the empty-chunk branch and the reduction do not depend on the K / V types) give 23 "
        "chunks of 22, one of 20 and a thread without a chunk (drawn problems use 1-4 threads, where every "
        "thread has positions; 25 is the fewest threads that leave one empty with a shorter last chunk at "
        "n_kv >= 512).",
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
    path = fused_path(case.k, case.v, sh.n_q, sh.n_kv, sh.dv, vector=target.isa.vector)
    assert path == case.path, f"table error: {p!r} takes {path}, not {case.path}"
    q_f, arith_f = case.fused_arithmetic(sh.threads)
    ref_f = A.reference(p.att, q_f)
    judge_attention(case, target, p, path, ref_f, A.error_bound(p.att, ref_f, arith_f),
                    f"oracles.attention.error_bound({arith_f}) with Q as {q_f}",
                    ref_m=ref_f if case.materialised_arithmetic()[0] == q_f else None)


def judge_attention(case: AttnCase, target, p: Problem, path: str, ref_f: A.Reference, bound_f: np.ndarray,
                    derivation: str, *, ref_m: A.Reference | None = None,
                    run_fused: Callable[[], np.ndarray] | None = None,
                    run_materialised: Callable[[], np.ndarray] | None = None) -> None:
    """Run one problem on both sides and judge them: the fused side (which ran ``path``; ``run_fused`` runs it
    when it is not ggml_flash_attn_ext through the graph) against its oracle ``ref_f`` within ``bound_f``
    (derived as ``derivation`` says), the materialised side (``run_materialised``'s graph, else ``attention``'s
    with fused = 0) against its own (``case.materialised_arithmetic``; ``ref_m`` when the caller has it already),
    the two against each other, and the cosine of their rows."""
    sh = p.shape
    observe.note("path", path)
    q_m, arith_m = case.materialised_arithmetic()
    ref_m = ref_m if ref_m is not None else A.reference(p.att, q_m)
    bound_m = A.error_bound(p.att, ref_m, arith_m)

    # Each side is judged right after its call: a failure report replays the last call made.
    fused = run_fused() if run_fused is not None else run_attention(case, target, p, fused=True)
    assert_output_within(fused, ref_f.out, bound_f, name="fused", context=_context(case, target, p, f"fused {path}"),
                         derivation=derivation)
    mat = run_materialised() if run_materialised is not None else run_attention(case, target, p, fused=False)
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

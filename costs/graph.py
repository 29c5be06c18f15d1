"""Cost cases of the graph ops: float mul_mat (cases/mul_mat.py ``KERNELS``) and flash attention
(cases/flash_attn_problems.py ``CASES``), each one graph through its family's own call code, on one
thread (Spike runs one hart).  What a case measures is the whole op: ggml's graph compute around the
kernels it dispatches to.

* mul_mat: A (weights) of M = 64 rows x K = 4096 (a 7-8B model's hidden size), B of N = 64 rows (a
  prompt chunk of 64 tokens).  Every dimension is on tinyBLAS_RVV's path at every VLEN where the
  build has it (K a multiple of VLEN / 8, M of 16: ``gemm<2,2,8>``, N >= 2), else on the type's
  vec_dot (f16 without zvfh, bf16 without zvfbfwma); a 64 x 64 output tile takes 4-7 s of Spike's
  CPU time per measurement, where a 4096-row A would take minutes.  Units: M x N x K (MAC).
  The kernels whose B is f32 (``f32``, ``f16_f32``, ``bf16_f32``: a model's activations, converted by
  ggml to the weight's dot type) are also measured at the other batches of :func:`batches`: decoding (1),
  a small batch, 32 and 128, and both sides of every batch switch of the tree's tinyBLAS_RVV (its
  smallest n, read from the tree: ``MM.switch_batches``; 1 and 2 in the pinned tree).  Each row records
  the path the call took (the tinyBLAS_RVV gemm or the vec_dot fallback, from the functions it executed)
  and the report sets the batches side by side (harness/cost/tables/batch_paths.py).
* flash attention: one head (DK = DV = 128, the head size of Llama / Mistral / Qwen) over a KV cache
  of ``N_KV`` = 1024 positions, a causal mask, for each case's path: decode (1 query: the split-KV
  path of f32 / f16 K and V, the one-chunk path of the others) and prefill (64 queries: a tile of
  the tiled path; the one-chunk path of the other types; 32 queries for f32 / f16 one-chunk, which
  64 would take to the tiled path).  Units: queries x KV positions x (DK + DV) (MAC; masked
  positions counted).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pytest

from cases import flash_attn as FA
from cases import flash_attn_problems as FP
from cases import mul_mat as MM
from cases import strategies as S
from cases.mul_mat_shapes import Shape
from cases.vec_source import VEC_FILES, rvv_path
from costs.suite import CostCase
from harness.plugin.targets import session

#: mul_mat: A rows (weights), K, B rows (tokens).
M, K_LEN, N = 64, 4096, 64
#: The batches of the kernels with f32 activations, with N and the tree's switch sides (:func:`batches`).
BATCHES = (1, 4, 32, N, 128)
#: Flash attention: head size, KV cache positions, and the query counts a case may take (decode,
#: then prefill: the first of the others on the case's path).
HEAD, N_KV = 128, 1024
DECODE, PREFILL = 1, (64, 32)
SEED = 4096


def path_of(kernel: MM.MatMulKernel, shape: Shape) -> Callable[[Any, Mapping[str, int]], dict[str, str]]:
    """A cost row's path fields for ``kernel`` at ``shape`` (costs/suite.py ``CostCase.path``): the path the
    measured call executed, said whether a vec_dot it falls back to has RVV code in the build (bf16's
    needs zvfbfwma, f16's zvfh: elsewhere ggml's C loop runs), and the tree's prediction where it differs."""
    def fields(target, functions: Mapping[str, int]) -> dict[str, str]:
        ran = MM.executed_path(frozenset(functions))
        want = kernel.path(target.isa, target.vlen, shape.k, shape.m, shape.n, shape.threads)
        out = {"path": MM.path_kind(ran)}
        if ran.startswith("ggml_vec_dot_") and not rvv_path(session().source, target.isa, ran, VEC_FILES):
            out["path"] = f"{ran} (vec_dot fallback, C loop: no RVV intrinsics in the {target.isa.name} build)"
        if want != ran:
            out["path_expected"] = MM.path_kind(want)
        return out

    return fields


def _mul_mat(kernel: MM.MatMulKernel, n: int = N) -> CostCase:
    sh = Shape(K_LEN, M, n)

    def run(target) -> None:
        rng = np.random.default_rng(SEED)
        a = S.round_to(kernel.a, rng.standard_normal((1, M, K_LEN)))
        b = S.round_to(kernel.b, rng.standard_normal((1, n, K_LEN)))
        MM.run_mul_mat(kernel, target, sh, a, b)

    return CostCase("mul_mat", kernel.name, f"{M}x{K_LEN}x{n}", "rvv", "mul_mat", "ggml_mul_mat", M * n * K_LEN, "MAC",
                    run, entry_points=kernel.entry_points, requires=kernel.requires, has_twin=False,
                    batch=n, path=path_of(kernel, sh))


def batches(switches: tuple[int, ...]) -> tuple[int, ...]:
    """:data:`BATCHES` and the batches on both sides of the tree's switches, smallest first."""
    return tuple(sorted({*BATCHES, *switches}))


def _switches() -> tuple[int, ...]:
    """The tree under test's switch batches; outside a test session (no tree chosen) the pinned tree's rule."""
    try:
        src = session().source
    except RuntimeError:
        return (1, 2)
    return MM.switch_batches(src)


def _attention(case: FP.AttnCase, n_q: int) -> CostCase:
    sh = FP.Shape(n_q, N_KV, HEAD, HEAD, 1, 1, 1)

    def run(target) -> None:
        path = FP.fused_path(case.k, case.v, sh.n_q, sh.n_kv, sh.dv)
        if path != case.path:
            pytest.skip(f"{sh} takes the {path} path in this tree, not {case.path}")
        opts = FP.Options("causal", 1, 0.0, 0.0, False, float(np.float32(1 / math.sqrt(HEAD))), 1.0, 0.0)
        FA.run_attention(case, target, FP.make_problem(case, sh, opts, SEED), fused=True)

    return CostCase("flash_attn", case.name, f"q{n_q}-kv{N_KV}-d{HEAD}", "rvv", "attention", "ggml_flash_attn_ext",
                    n_q * N_KV * 2 * HEAD, "MAC", run, entry_points=case.entry_points, requires=case.requires,
                    has_twin=False)


def _query_counts(case: FP.AttnCase) -> list[int]:
    """Decode if the case's path takes it, and the first prefill count that does (pinned tree's rules)."""
    takes = lambda n_q: FP.fused_path(case.k, case.v, n_q, N_KV, HEAD) == case.path  # noqa: E731
    return [n for n in (DECODE,) if takes(n)] + [n for n in PREFILL if takes(n)][:1]


MUL_MAT = [_mul_mat(kernel, n) for kernel in MM.KERNELS
           for n in (batches(_switches()) if kernel.b == "f32" else (N,))]
FLASH_ATTN = [_attention(case, n_q) for case in FP.CASES for n_q in _query_counts(case)]

"""Cost cases of the graph ops: float mul_mat (cases/mul_mat.py ``KERNELS``) and flash attention
(cases/flash_attn_problems.py ``CASES``), each one graph through its family's own call code, on one
thread (Spike runs one hart).  What a case measures is the whole op: ggml's graph compute around the
kernels it dispatches to.

* mul_mat: A (weights) of M = 64 rows x K = 4096 (a 7-8B model's hidden size), B of N = 64 rows (a
  prompt chunk of 64 tokens).  Every dimension is on tinyBLAS_RVV's path at every VLEN where the
  build has it (K a multiple of VLEN / 8, M of 16: ``gemm<2,2,8>``, N >= 2), else on the type's
  vec_dot (f16 without zvfh, bf16 without zvfbfwma); a 64 x 64 output tile takes 4-7 s of Spike's
  CPU time per measurement, where a 4096-row A would take minutes.  Units: M x N x K (MAC).
* flash attention: one head (DK = DV = 128, the head size of Llama / Mistral / Qwen) over a KV cache
  of ``N_KV`` = 1024 positions, a causal mask, for each case's path: decode (1 query: the split-KV
  path of f32 / f16 K and V, the one-chunk path of the others) and prefill (64 queries: a tile of
  the tiled path; the one-chunk path of the other types; 32 queries for f32 / f16 one-chunk, which
  64 would take to the tiled path).  Units: queries x KV positions x (DK + DV) (MAC; masked
  positions counted).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from cases import flash_attn as FA
from cases import flash_attn_problems as FP
from cases import mul_mat as MM
from cases import strategies as S
from cases.mul_mat_shapes import Shape
from costs.suite import CostCase

#: mul_mat: A rows (weights), K, B rows (tokens).
M, K_LEN, N = 64, 4096, 64
#: Flash attention: head size, KV cache positions, and the query counts a case may take (decode,
#: then prefill: the first of the others on the case's path).
HEAD, N_KV = 128, 1024
DECODE, PREFILL = 1, (64, 32)
SEED = 4096


def _mul_mat(kernel: MM.MatMulKernel) -> CostCase:
    def run(target) -> None:
        rng = np.random.default_rng(SEED)
        a = S.round_to(kernel.a, rng.standard_normal((1, M, K_LEN)))
        b = S.round_to(kernel.b, rng.standard_normal((1, N, K_LEN)))
        MM.run_mul_mat(kernel, target, Shape(K_LEN, M, N), a, b)

    return CostCase("mul_mat", kernel.name, f"{M}x{K_LEN}x{N}", "rvv", "mul_mat", "ggml_mul_mat", M * N * K_LEN, "MAC",
                    run, entry_points=kernel.entry_points, requires=kernel.requires, has_twin=False)


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


MUL_MAT = [_mul_mat(kernel) for kernel in MM.KERNELS]
FLASH_ATTN = [_attention(case, n_q) for case in FP.CASES for n_q in _query_counts(case)]

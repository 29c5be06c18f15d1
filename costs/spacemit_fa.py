"""Cost cases of SpacemiT's flash attention (cases/spacemit_fa.py): its kernels against ggml-cpu's own flash
attention for the same graph.  One ``ggml_flash_attn_ext`` (the kernel server's ``attention`` request, fused; Q f32,
K and V f16, as llama.cpp's f16 KV cache sends it) measured in two builds:

* ``spacemit``: at VLEN 1024 (the A100's) ``ime.cpp`` takes it to SpacemiT's tiled kernel (n_q >= 64) or its
  one-chunk kernel (without a TCM: one query row at a time); at other VLENs to ggml's own;
* ``zvfh`` (or any ggml-cpu build): ggml-cpu's tiled, split-KV or one-chunk path (cases/flash_attn.py).

Shapes: real models' attention on one thread (Spike runs one hart), cases/spacemit_fa_problems.py's REAL_SHAPES:
SmolLM2-135M (DK 64, 9 heads over 3) and Qwen3-0.6B (DK 128, 16 heads over 8), decoding one token against a
2048-cell cache (padding mask: unused cells) and a prefill (causal mask).  Each at ``reps`` 1 and 2 (the request
computes its graph ``reps`` times after one set-up): the difference is one compute, as costs/spacemit_ops.py
(whose ``per_call`` and ``table`` read these rows too).  Units: query rows x heads x KV positions x (DK + DV)
(MAC).  Each row records the path executed (cases/spacemit_fa.py ``traced_path`` over the functions Spike saw
run) and ``path_expected`` where the build's rule (``fa_path``; ggml-cpu's ``fused_path``) says otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from cases import flash_attn_problems as FP
from cases import spacemit_fa as SFA
from cases import spacemit_fa_problems as SFP
from cases.flash_attn import attention_call
from costs.suite import CostCase

#: (name, shape, mask): decode of a 2048-cell cache (one-chunk kernel) and prefill (tiled), one thread.
SHAPES = (("smollm2-decode", FP.Shape(1, 2048, 64, 64, 9, 3, 1), "padding"),
          ("qwen3-decode", FP.Shape(1, 2048, 128, 128, 16, 8, 1), "padding"),
          ("smollm2-prefill", FP.Shape(128, 128, 64, 64, 9, 3, 1), "causal"),
          ("qwen3-prefill", FP.Shape(64, 96, 128, 128, 16, 8, 1), "causal"))
REPS = (1, 2)
SEED = 1024


def _generic(sh: FP.Shape) -> str:
    return FP.fused_path("f16", "f16", sh.n_q, sh.n_kv, sh.dv)


def path_of(sh: FP.Shape) -> Callable[[Any, Mapping[str, int]], dict[str, str]]:
    """A row's path fields: the path the functions executed show; the rule's where it differs."""
    def fields(target, functions: Mapping[str, int]) -> dict[str, str]:
        ran = SFA.traced_path(frozenset(functions))
        want = SFP.fa_path(sh, target.vlen) if target.isa.backend == "spacemit" else _generic(sh)
        return {"path": ran, **({} if ran == want else {"path_expected": want})}

    return fields


def _case(name: str, sh: FP.Shape, mask: str, reps: int) -> CostCase:
    problem = SFP.fixed_problem(sh, mask, SEED, sinks=False)
    kernel = SFP.BY_NAME["tiled" if sh.n_q >= FP.Q_TILE else "one_chunk"]
    generic = SFP.GENERIC[_generic(sh)]

    def run(target: Any) -> None:
        ip, fp, bufs = attention_call(SFP.F16, problem, True)
        target.call("attention", [*ip, reps], fp, bufs)

    return CostCase("spacemit_fa", name, f"q{sh.n_q}-kv{sh.n_kv}-d{sh.dk}-h{sh.heads}-r{reps}", "rvv", "attention",
                    "ggml_flash_attn_ext", sh.n_q * sh.heads * sh.n_kv * (sh.dk + sh.dv), "MAC", run,
                    entry_points=(*kernel.entry_points, *generic.entry_points),
                    requires=tuple(dict.fromkeys((*kernel.requires, *generic.requires))), has_twin=False,
                    path=path_of(sh), backend=("spacemit", "cpu"))


CASES = [_case(name, sh, mask, reps) for name, sh, mask in SHAPES for reps in REPS]

"""Cost cases of SpacemiT's IME1 GEMM (cases/spacemit_gemm.py): what IME saves.  The same ``ggml_mul_mat`` of the
spacemit build at VLEN 256, its weights placed in SpacemiT's buffer type as llama.cpp places them, measured twice:

* ``ime1``: on the A60's core type (Spike with rvvdiff's IME1 library, ``SPACEMIT_CORE_ARCH=0xA03C``): the weights
  repacked 16 rows at a time, the activations quantized by ``ime1::quantize_a_*row_i8``, ``gemm_kernel_i8i4``'s
  vmadot kernels;
* ``x60``: on the X60's (Spike without the library, ``0x503C``): the weights stay in the CPU buffer, ggml's generic
  mul_mat quantizes the activations to the type's q8 and calls ``ggml_vec_dot_<type>_<q8>`` (RVV) per output.

Each at ``reps`` 1 and 2 (the kernel server's ``repack_mul_mat``: one placement and repack, then the graph
``reps`` times): their difference is one compute, the set-up (a repack runs once per weight, when a model loads)
cancelled, as harness/cost/per_token.py does.  Shapes: Qwen3-0.6B's 1024 x 1024 projection for one token and for 16,
SmolLM2's 576 -> 1536 FFN for one token (q4_K: k % 256, so Qwen3's only).  Weights as ggml's quantizers make them
(cases/spacemit_gemm.py ``model_weights``), Gaussian activations.  Units: weight rows x k x activation rows (MAC).
Each row records the path its call executed (``path``: the IME1 kernel or the vec_dot), read from the functions run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cases import quant_variants as V
from cases import spacemit_gemm as G
from cases import spacemit_gemm_data as GD
from costs.suite import CostCase
from harness.cost.prices.per_token import size_label
from harness.emulators.protocol import In, Out

#: (k, weight rows, activation rows).
SHAPES = ((1024, 1024, 1), (1024, 1024, 16), (576, 1536, 1))
PATHS = ("ime1", "x60")
REPS = (1, 2)
SEED = 59


def _path(target, functions: Mapping[str, int]) -> dict[str, str]:
    """The GEMM the measured call executed (the functions' symbols are mangled: matched by their names)."""
    if any("gemm_kernel_i8i4" in f for f in functions):
        return {"path": "IME1: spacemit_kernels::ime1::gemm_kernel_i8i4"}
    dots = sorted(f for f in functions if f.startswith("ggml_vec_dot_"))
    return {"path": ", ".join(dots) or "neither the IME1 GEMM nor a vec_dot ran"}


def _case(name: str, k: int, n: int, m: int, path: str, reps: int) -> CostCase:
    code = G.Gemm(name).requires if path == "ime1" else ()  # the code an IME1 call runs (the X60's: ggml-cpu's)

    def run(target: Any) -> None:
        G.ime1_or_skip(target)
        w = GD.model_weights(name, n, k, SEED)
        x = GD.activations("gaussian", m, k, SEED + 1)
        ip = [V.type_id(target, name), k, n, m, 1, G.PLACEMENT, 1, reps]
        target.call("repack_mul_mat", ip, [], [In(w), In(x), Out(4 * m * n)],
                    emulator=None if path == "ime1" else G.without_ime1())

    return CostCase("spacemit_gemm", f"{name}-{path}", size_label(k, n, m, reps), "rvv", "repack_mul_mat",
                    "ggml_mul_mat", n * k * m, "MAC", run, entry_points=code, requires=code, has_twin=False, path=_path,
                    backend="spacemit")


CASES = [_case(name, k, n, m, path, reps) for name in G.TYPES for k, n, m in SHAPES if k % GD.block_of(name) == 0
         for path in PATHS for reps in REPS]

"""Cost cases of the quantized dot products (cases/quant_dot.py): every type ggml's CPU backend has a
vec_dot for, at the row lengths of real models (k = 4096: a 7-8B model's hidden size; 14336: the FFN
width of Llama 3 8B / Mistral 7B), the RVV entry point and its ``*_generic`` twin."""

from __future__ import annotations

from cases import quant_blocks as QB
from cases import quant_dot as QD
from cases import quant_strategies as QS
from costs.suite import CostCase

SIZES = (4096, 14336)


def _case(kernel: QD.QuantDot, k: int, impl: str) -> CostCase:
    unit = QS.pair_unit(kernel.name, kernel.vec_dot_type)

    def run(target) -> None:
        pair = QS.fixed_pair(kernel.name, kernel.vec_dot_type, k // unit,
                             QB.RowRecipe(k, ("normal",), "random", "random"), "random")
        QD.run_dot(kernel, target, pair, 0 if impl == "rvv" else 1)

    # What the case measures, and all it needs of the tree: the two types and that function (the twin does
    # not need the entry point, and a change to the entry point does not reach the twin).
    fn = kernel.entry + ("" if impl == "rvv" else "_generic")
    return CostCase("quant_dot", kernel.name, f"k{k}", impl, "quant_vec_dot", fn, k, "element", run,
                    entry_points=(fn,), requires=(*kernel.requires[:2], fn))


CASES = [_case(kernel, k, impl) for kernel in QD.DOTS for k in SIZES
         if k % QS.pair_unit(kernel.name, kernel.vec_dot_type) == 0 for impl in ("rvv", "generic")]

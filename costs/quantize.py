"""Cost cases of the activation quantizers (cases/quantize.py ``QUANTIZERS``: ``quantize_row_q8_0 /
_q8_1 / _q8_K``), the entry point and its ``*_generic`` twin, on one row of k = 4096 floats (a 7-8B
model's hidden size: the activation row a quantized mul_mat converts before its dot products) of
Gaussian blocks (``make_row``: each block at its own binade).  Units: elements of the row."""

from __future__ import annotations

from cases import quantize as QZ
from costs.suite import CostCase

K_LEN = 4096
SEED = 4096
IMPLS = {"rvv": QZ.IMPL_RVV, "generic": QZ.IMPL_GENERIC}


def _case(q: QZ.Quantizer, impl: str) -> CostCase:
    def run(target) -> None:
        QZ.run_quantizer(q, target, QZ.make_row(K_LEN // q.block, q.block, ("gaussian",), SEED), IMPLS[impl])

    # What the case measures, and all it needs of the tree: the type and that function (the twin does not
    # need the entry point, and a change to the entry point does not reach the twin).
    fn = f"quantize_row_{q.name}" + ("" if impl == "rvv" else "_generic")
    return CostCase("quantize", q.name, f"k{K_LEN}", impl, "quant_from_float", fn, K_LEN, "element", run,
                    entry_points=(fn,), requires=(q.requires[0], fn))


CASES = [_case(q, impl) for q in QZ.QUANTIZERS for impl in IMPLS]

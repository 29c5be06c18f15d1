"""Every cost case, family by family (one module per family group, beside this one).

The families are the differential suite's (cases/families.py ``MODULES``, the one list of them): each
has cost cases, or a written reason in :data:`UNMEASURED` why it has none; :func:`problems` says where
that does not hold (tests/test_cost_registry.py fails on it), so a new family cannot go unmeasured by
oversight.
"""

from __future__ import annotations

from collections import Counter

from cases import families
from costs import graph, model, model_rest, quant_dot, quantize, repack, spacemit_fa, spacemit_gemm, spacemit_ops, vec
from costs.suite import CostCase

#: Families of cases/families.py without cost cases, each with the reason.
UNMEASURED: dict[str, str] = {
    "spacemit_quant": "rvv_kernels.cpp's quantizers feed only the IME2 GEMM (ime.cpp), which no toolchain here builds, "
                      "so no model path here calls them (IME1's own, ime1::quantize_a_row_i8 / _4row_i8, are counted "
                      "inside the IME1 GEMM's cost cases, costs/spacemit_gemm.py); and each VLEN runs one body of "
                      "theirs (RVV at 256 / 1024, the scalar _ref elsewhere): no twin to compare with",
    "spacemit_layouts": "SpacemiT's weight repacks run once per weight when a model loads (set_tensor), not per token",
}

CASES: list[CostCase] = [*quant_dot.CASES, *quantize.CASES, *repack.CASES, *vec.VEC_OPS, *vec.DOTS, *vec.CONVERSIONS,
                         *graph.MUL_MAT, *graph.FLASH_ATTN, *spacemit_gemm.CASES, *spacemit_ops.CASES,
                         *spacemit_fa.CASES, *model.CASES, *model_rest.CASES]
BY_ID = {c.id: c for c in CASES}


def problems(names: list[str] | None = None) -> list[str]:
    """Where the cost cases and the families of ``names`` (default: cases/families.py's) disagree: a
    family with neither cost cases nor a reason, a reason for a family that has cases or does not
    exist, a case of no family, two cases with one id."""
    names = list(families.MODULES) if names is None else names
    have = {c.family for c in CASES}
    out = [f"family {n!r} (cases/families.py) has no cost case: add its cases to a costs/ module and "
           "that list to CASES in costs/registry.py, or the reason it has none to UNMEASURED there"
           for n in names if n not in have and n not in UNMEASURED]
    out += [f"UNMEASURED names {n!r}, which has cost cases" for n in UNMEASURED if n in have]
    out += [f"UNMEASURED names {n!r}, which is not a family of cases/families.py" for n in UNMEASURED if n not in names]
    out += [f"cost cases of family {f!r}, which is not one of cases/families.py" for f in sorted(have - set(names))]
    out += [f"{n} cost cases have the id {i!r}" for i, n in Counter(c.id for c in CASES).items() if n > 1]
    return out

"""Every cost case, family by family (one module per family group, beside this one)."""

from __future__ import annotations

from costs import graph, quant_dot, quantize, repack, vec
from costs.suite import CostCase

FAMILIES = {
    "quant_dot": quant_dot.CASES,
    "quantize": quantize.CASES,
    "repack": repack.CASES,
    "vec_ops": vec.VEC_OPS,
    "vec_dot": vec.DOTS,
    "conversions": vec.CONVERSIONS,
    "mul_mat": graph.MUL_MAT,
    "flash_attn": graph.FLASH_ATTN,
}

CASES: list[CostCase] = [c for cases in FAMILIES.values() for c in cases]
BY_ID = {c.id: c for c in CASES}

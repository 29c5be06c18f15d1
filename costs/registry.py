"""Every cost case, family by family (one module each, beside this one)."""

from __future__ import annotations

from costs import quant_dot
from costs.suite import CostCase

FAMILIES = {"quant_dot": quant_dot.CASES}

CASES: list[CostCase] = [c for cases in FAMILIES.values() for c in cases]
BY_ID = {c.id: c for c in CASES}

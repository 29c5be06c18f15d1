"""The two cycle estimates of a measured call side by side, and where they part.

* **table**: the call's instruction mix priced with a core's measured reciprocal throughputs
  (rvv-bench; harness/cost/prices/cores.py), for every core at the row's VLEN;
* **mca**: LLVM's SpacemiT X60 scheduling model run over the executed basic blocks
  (harness/cost/prices/mca.py), recorded in the row as ``mca`` at VLEN 256.

Both say "X60 cycles" for a VLEN 256 row.  Where they differ by more than :data:`DISAGREE` (either way),
:func:`disagreements` names the instructions responsible: the mix keys whose cycles differ most between
the two, each with both figures.  Which one the boards side with is docs/calibration.md's table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.cost.prices import cores

#: Label of the second estimate in tables and move lines.
MCA_LABEL = "X60 (llvm-mca)"
#: The core whose rvv-bench prices the LLVM model is set beside.
X60_KEY = "spacemit_x60"
#: Two estimates further apart than this factor are listed with the instructions responsible.
DISAGREE = 1.5
#: Instructions named per disagreement.
TOP = 4


def mca_cycles(row: dict[str, Any] | None) -> float | None:
    """The LLVM model's cycles of a row (None: not estimated: another VLEN, or no llvm-mca)."""
    m = (row or {}).get("mca") or {}
    return float(m["cycles"]) if m.get("cycles") else None


def x60(vlen: int) -> cores.Core | None:
    return next((c for c in cores.for_vlen(vlen) if c.key == X60_KEY), None)


@dataclass(frozen=True)
class Disagreement:
    case: str
    function: str
    vlen: int
    isa: str
    table: float  # rvv-bench X60 cycles
    mca: float  # LLVM model cycles
    #: (mix key, table cycles, mca cycles), the largest differences first.
    responsible: tuple[tuple[str, float, float], ...]

    @property
    def factor(self) -> float:
        return self.mca / self.table

    def describe(self) -> str:
        who = "; ".join(f"{k}: {t:.0f} vs {m:.0f}" for k, t, m in self.responsible)
        return (f"{self.function} ({self.case}, VLEN {self.vlen}, {self.isa}): llvm-mca {self.mca:.0f} cycles, "
                f"rvv-bench X60 {self.table:.0f} (x{self.factor:.2f}); most of the gap (table vs llvm-mca "
                f"cycles): {who}")

    def as_dict(self) -> dict[str, Any]:
        return {"case": self.case, "function": self.function, "vlen": self.vlen, "isa": self.isa,
                "table": round(self.table, 1), "mca": round(self.mca, 1), "factor": round(self.factor, 3),
                "responsible": [{"key": k, "table": round(t, 1), "mca": round(m, 1)} for k, t, m in self.responsible]}


def compare(row: dict[str, Any]) -> Disagreement | None:
    """The two estimates of a row when both exist (None otherwise)."""
    core, m = x60(int(row["vlen"])), mca_cycles(row)
    if core is None or m is None or not row.get("mix"):
        return None
    by_table = cores.breakdown(core, row["mix"])
    table = sum(by_table.values())
    if not table:
        return None
    by_mca = row["mca"].get("by_key", {})
    keys = set(by_table) | set(by_mca)
    gaps = sorted(keys, key=lambda k: -abs(by_mca.get(k, 0.0) - by_table.get(k, 0.0)))
    return Disagreement(row["case"], row["function"], int(row["vlen"]), row["isa"], table, m,
                        tuple((k, by_table.get(k, 0.0), by_mca.get(k, 0.0)) for k in gaps[:TOP]))


def disagreements(rows: dict[Any, dict[str, Any]], factor: float = DISAGREE) -> list[Disagreement]:
    """The rows whose two estimates differ by more than ``factor``, the widest first."""
    out = [d for r in rows.values() if (d := compare(r)) and max(d.factor, 1 / d.factor) > factor]
    return sorted(out, key=lambda d: -max(d.factor, 1 / d.factor))


def failures(rows: dict[Any, dict[str, Any]]) -> list[str]:
    """One line per row whose second estimate failed (llvm-mca's error), so that none goes missing unsaid."""
    return [f"{r['function']} ({r['case']}, VLEN {r['vlen']}, {r['isa']}): {r['mca']['error']}"
            for r in rows.values() if (r.get("mca") or {}).get("error")]


def mca_ratio(head: dict[str, Any], base: dict[str, Any]) -> float | None:
    """HEAD / BASE of the LLVM model's cycles, where both rows have them."""
    h, b = mca_cycles(head), mca_cycles(base)
    return h / b if h is not None and b else None

"""Coverage of the tree under test: what it has that rvvdiff does not test, and what rvvdiff knows
that the tree does not have.

Each kernel family registers one scan (:func:`register`; cases/families.py runs them all): given the tree's inventory
(harness/ggml/tree.py, read with harness/ggml/csource.py), it returns

* **uncovered** - RVV entry points the tree has and the family's table does not know (a new type's
  vec_dot, a new ``_vlN`` variant, a new repack layout or GEMV / GEMM, a new vec.h function with an
  RVV path, a new tinyBLAS type).  ``cases/test_coverage.py`` fails on any, by name and file:line,
  so a change that adds a kernel without a test is visible; the terminal summary lists them.
* **not in this tree** - kernels of the family's table the tree lacks (an older tree, a fork that
  removed one).  Never failures: their tests are skipped with the missing names (each kernel's
  ``requires``), and the summary counts them.
* **notes** - what the reader could not understand, with file:line and the kernels affected.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from harness.ggml.tree import Tree


@dataclass(frozen=True)
class Uncovered:
    """An RVV entry point of the tree that no test of the family exercises."""

    name: str  # ggml_vec_dot_q3_0_q8_0, q4_0_16x1 (a layout), ggml_vec_foo_f32 ...
    where: str  # file:line in the tree
    why: str = ""  # what the family would need (e.g. "a NumPy decoder and a bound for q3_0")


@dataclass
class FamilyScan:
    """What one family's coverage scan found in a tree."""

    family: str
    uncovered: list[Uncovered] = field(default_factory=list)
    not_in_tree: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: str | None = None  # the scan itself broke: test_coverage fails with this

    def lacks(self, inv: Tree, entry: object) -> bool:
        """Whether the tree lacks something a table entry (with ``name`` and ``requires``) needs;
        if so, the entry is recorded as not in this tree with the missing names."""
        missing = inv.missing(entry.requires)
        if missing:
            self.not_in_tree.append(f"{entry.name} ({', '.join(missing)})")
        return bool(missing)


ScanFn = Callable[[Tree], FamilyScan]
_SCANS: dict[str, ScanFn] = {}


def register(family: str) -> Callable[[ScanFn], ScanFn]:
    """Decorator: ``@register("quant_dot") def scan(tree) -> FamilyScan``."""
    def deco(fn: ScanFn) -> ScanFn:
        _SCANS[family] = fn
        return fn
    return deco


def run_registered(tree: Tree) -> list[FamilyScan]:
    """Every registered family's scan of ``tree``, by family name; a scan that raises is reported
    as broken (``error``), not as covered.  Which families are registered is cases/families.py's
    business (it imports them): use ``families.scans``."""
    out = []
    for family, fn in sorted(_SCANS.items()):
        try:
            out.append(fn(tree))
        except Exception as e:  # noqa: BLE001 - a scan that breaks is reported, not raised at collection
            msg = f"the {family} scan failed: {type(e).__name__}: {e}"
            out.append(FamilyScan(family, notes=[msg], error=msg))
    return out

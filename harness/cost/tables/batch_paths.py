"""The cost page's paths by batch: the cases of a batch sweep (costs/graph.py: float mul_mat at decoding,
a small batch, prompt batches and both sides of the tree's own switch between ggml's paths) set side by
side per kernel, ISA build and VLEN, each batch with the path its call measured (the row's ``path``:
tinyBLAS_RVV's gemm or the vec_dot fallback) and its instructions per unit, so a verdict that holds on
one side of a switch is not read as holding on the other.

A row takes part when it has a ``batch`` (costs/suite.py ``CostCase.batch``); ``path_expected`` (the
tree's prediction, recorded where the measured path differs from it) is shown beside the path.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

Key = tuple[str, int, str]  # (case, vlen, isa), as harness/cost/tables/suite_tables.py keys rows


@dataclass(frozen=True)
class Sweep:
    """One kernel's batches at one ISA build and VLEN: (batch, path, instructions per unit, HEAD / BASE)."""

    family: str
    name: str
    isa: str
    vlen: int
    points: tuple[tuple[int, str, float, float | None], ...]

    def switches(self) -> list[int]:
        """The batches whose path differs from the next smaller batch's."""
        return [b for (_, p0, _, _), (b, p, _, _) in zip(self.points, self.points[1:]) if p != p0]

    def describe(self) -> str:
        cells = []
        for batch, path, per_unit, hb in self.points:
            cell = f"n={batch}: {path} {per_unit:.3g}/unit"
            cells.append(cell + (f" [{hb:.3f} of base]" if hb is not None and abs(hb - 1) > 1e-9 else ""))
        sw = self.switches()
        return (f"{self.family} {self.name}, {self.isa}, VLEN {self.vlen}: " + " | ".join(cells)
                + (f" (path switches at n={', n='.join(map(str, sw))})" if sw else " (one path)"))

    def as_dict(self) -> dict[str, Any]:
        return {"family": self.family, "name": self.name, "isa": self.isa, "vlen": self.vlen,
                "switches": self.switches(),
                "batches": [{"batch": b, "path": p, "per_unit": round(u, 6), **({"head_over_base": round(hb, 4)}
                                                                                 if hb is not None else {})}
                            for b, p, u, hb in self.points]}


def _path(r: Mapping[str, Any]) -> str:
    path = r.get("path") or r["function"]
    return path + (f" (the tree predicted {r['path_expected']})" if r.get("path_expected") else "")


def sweeps(head: Mapping[Key, Mapping[str, Any]], base: Mapping[Key, Mapping[str, Any]] | None = None) -> list[Sweep]:
    """HEAD's batch sweeps with more than one batch measured, by family, kernel, ISA build and VLEN."""
    base = base or {}
    by: dict[tuple[str, str, str, int], list[tuple[int, str, float, float | None]]] = defaultdict(list)
    for key, r in head.items():
        if not r.get("batch") or not r.get("units"):
            continue
        b = base.get(key)
        hb = r["instret"] / b["instret"] if b and b.get("instret") else None
        by[(r["family"], r["name"], r["isa"], int(r["vlen"]))].append(
            (int(r["batch"]), _path(r), r["instret"] / r["units"], hb))
    return [Sweep(f, n, i, v, tuple(sorted(pts))) for (f, n, i, v), pts in sorted(by.items()) if len(pts) > 1]


def markdown(head: Mapping[Key, Mapping[str, Any]], base: Mapping[Key, Mapping[str, Any]] | None = None) -> list[str]:
    """The page's section (no lines when no row is part of a sweep)."""
    found = sweeps(head, base)
    if not found:
        return []
    return ["", f"Paths by batch ({len(found)}; the path each call measured and its instructions per unit, "
            "smallest batch first: a HEAD / BASE verdict holds for the path it was measured on):"] + \
        [f"- {s.describe()}" for s in found]


def label(function: str, rows: list[Mapping[str, Any]]) -> str:
    """The table's name of a case from its rows: the function, and for a case whose rows record a path the
    kernel and that path (its paths joined when they differ across the row's VLENs)."""
    paths = list(dict.fromkeys(_path(r) for r in rows if r.get("path")))
    return f"{function} ({rows[0]['name']}: {' / '.join(paths)})" if paths else function


"""A fix's cost as the fixes report prints it (harness/report/fix_summary.py): from the rows of a fix's cost
runs (harness/jobs/fix_cost_runs.py: ``rvvdiff cost --changed-only`` with HEAD = the tree plus the fix, BASE = the
tree, and the scalar twins), per VLEN the range of fixed / replaced and of fixed / twin (:func:`cost_summary`),
and the fix's cost section (:func:`cost_md`): per case and ISA build, the cases where the fix costs more than the
code it replaces at a VLEN where that code was right, what was not measured and the commands that measured it.
"""

from __future__ import annotations

from typing import Any

from harness.cost.tables import suite_tables


def cost_summary(rows: list[dict[str, Any]], vlens: list[int]) -> dict[int, dict[str, tuple[float, float] | None]]:
    """Per VLEN: the range (min, max) of fixed / replaced and of fixed / twin over the cases and ISA builds."""
    out: dict[int, dict[str, tuple[float, float] | None]] = {}
    for v in vlens:
        at = [x for x in rows if x["vlen"] == v]
        out[v] = {}
        for k in ("fixed_over_replaced", "fixed_over_twin"):
            vals = [x[k] for x in at if x[k] is not None]
            out[v][k] = (min(vals), max(vals)) if vals else None
    return out


def span(r: tuple[float, float] | None) -> str:
    """A range of ratios as the tables print it (``1.010``, ``0.980-1.010``; ``-``: none)."""
    if r is None:
        return "-"
    lo, hi = (f"{x:.3f}" for x in r)
    return lo if lo == hi else f"{lo}-{hi}"


def cost_md(name: str, c: dict[str, Any]) -> list[str]:
    """The cost section of one fix in summary.md: per VLEN the ranges, then per case and build."""
    vlens = c["vlens"]
    lines = ["", f"Cost ({', '.join(c['isas'])}; {c['seconds']:.0f} s): fixed / replaced, fixed / scalar twin, "
             "instructions under Spike; * = a VLEN where the replaced code is wrong."
             + (f" Both trees have {', '.join(c['with'])}." if c["with"] else ""), "",
             "| | " + " | ".join(f"VLEN {v}" + ("*" if any(x["replaced_wrong"] for x in c["rows"] if x["vlen"] == v)
                                              else "") for v in vlens) + " |",
             "|---|" + "---|" * len(vlens)]
    summ = cost_summary(c["rows"], vlens)
    lines.append("| fixed / replaced | " + " | ".join(span(summ[v]["fixed_over_replaced"]) for v in vlens) + " |")
    lines.append("| fixed / twin | " + " | ".join(span(summ[v]["fixed_over_twin"]) for v in vlens) + " |")
    lines += ["", "| case | ISA | " + " | ".join(str(v) for v in vlens) + " |", "|---|---|" + "---|" * len(vlens)]
    by: dict[tuple[str, str], dict[int, dict[str, Any]]] = {}
    for x in c["rows"]:
        by.setdefault((x["case"], x["isa"]), {})[x["vlen"]] = x

    def cell(x: dict[str, Any] | None) -> str:
        if x is None:
            return "-"
        r, t = x["fixed_over_replaced"], x["fixed_over_twin"]
        return (f"{r:.3f}" if r is not None else "n/a") + (f" (x{t:.2f} twin)" if t is not None else "")
    for (case, isa), per in sorted(by.items()):
        lines.append(f"| `{case}` | {isa} | " + " | ".join(cell(per.get(v)) for v in vlens) + " |")
    lines += [f"- costlier than the replaced code where it was right: {m}" for m in c["costlier_where_right"]]
    lines += [f"- not measured: {line}" for line in suite_tables.grouped(dict(sorted(c["unmeasured"].items())))]
    lines += [f"- command: `{cmd}`" for cmd in c["commands"]]
    return lines

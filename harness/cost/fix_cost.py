"""What a fix costs (``rvvdiff fixes cost``, and the cost step of ``fixes check``): ``rvvdiff cost
--changed-only`` (harness/cost/suite_runs.py; instructions under Spike, deterministic) with HEAD = the
tree plus the fix and BASE = the tree, in the ISA builds the fix's header names (``cost``), then the
scalar twins of the cases it measured; per case, ISA build and VLEN: fixed / replaced and fixed /
twin, and the cases where the fix costs more than the code it replaces at a VLEN where that code was
right (outside the header's ``wrong-vlens``).  The header's ``cost-with`` fixes are applied to both
trees first, its ``cost-k`` narrows the cases.  :func:`cost_md` is the fix's cost section of the
fixes report (harness/report/fix_summary.py).
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from harness.core.config import SPIKE_VLENS
from harness.core.errors import RvvdiffError
from harness.core.matrix import DEFAULT_ISAS, Matrix
from harness.cost import suite_runs, suite_tables
from harness.ggml import patches
from harness.ggml.fix_catalogue import Fix, select
from harness.ggml.source import GgmlSource

#: Fixed / replaced above this is "costlier" (the cost is exact: only rounding is forgiven).
COSTLIER = 1.0005


class CostStepError(RvvdiffError):
    """The cost of a fix could not be measured (no ISA build selected, a cost run did not complete)."""


def cost(fix: Fix, source: GgmlSource, out: Path, workers: str, vlens: tuple[int, ...] = SPIKE_VLENS,
         isas: tuple[str, ...] = DEFAULT_ISAS, k: str | None = None) -> dict[str, Any]:
    """The fix's cost (module docstring, ``fixes cost``): ``rvvdiff cost --changed-only`` between the
    tree and the patched tree in the fix's ISA builds, then the scalar twins of the cases it measured."""
    selected, isas = isas, tuple(i for i in fix.cost_isas if i in isas)
    if not isas:
        raise CostStepError(f"{fix.name}: its ISA builds ({', '.join(fix.cost_isas) or 'none: the header has no cost'})"
                            f" are not in the selection ({', '.join(selected)})")
    before = select(fix.cost_with) if fix.cost_with else []
    base = patches.apply(before, source, "fix") if before else source
    patched = patches.apply([*before, fix], source, "fix")
    on = Matrix(vlens=tuple(vlens), isas=tuple(isas), tree=str(patched.root))
    expr = " and ".join(f"({e})" for e in (fix.cost_k, k) if e)
    run = suite_runs.Options(on, base=str(base.root), changed_only=True, k=expr or None, out=out / "cost",
                             workers=str(workers))
    try:
        suite_runs.measure(run)  # its exit status says "a case was not measured": judged below, per case
    except suite_runs.CostSelectionError as e:
        lacks = "" if expr else ": the cost suite lacks a case calling it"
        raise CostStepError(f"{fix.name} ({', '.join(fix.meta.get('functions', '?').split(', '))}; "
                            f"{', '.join(isas)}): {e}{lacks}") from None
    data = json.loads((out / "cost" / "cost.json").read_text())
    rows = {(r["case"], r["vlen"], r["isa"]): r for r in data["head"]}
    base_rows = {(r["case"], r["vlen"], r["isa"]): r for r in data["base"]}
    seconds = data.get("seconds", 0.0)
    twins = sorted({r["twin"] for r in rows.values() if r.get("twin")} - {key[0] for key in rows})
    commands = [shlex.join(["rvvdiff", "cost", *run.argv()])]
    if twins:
        twin_run = suite_runs.Options(on, k=" or ".join(twins), out=out / "cost-twins", workers=str(workers))
        suite_runs.measure(twin_run)
        tdata = json.loads((out / "cost-twins" / "cost.json").read_text())
        rows.update({(r["case"], r["vlen"], r["isa"]): r for r in tdata["head"]})
        data["unmeasured"].update(tdata["unmeasured"])
        seconds += tdata.get("seconds", 0.0)
        commands.append(shlex.join(["rvvdiff", "cost", *twin_run.argv()]))
    table = []
    twins_of = {r["twin"] for r in data["head"] if r.get("twin")}
    for r in sorted(data["head"], key=lambda r: (r["case"], r["isa"], r["vlen"])):
        case, vlen, isa = r["case"], r["vlen"], r["isa"]
        b = base_rows.get((case, vlen, isa))
        if b is None and case in twins_of:  # a twin measured for the ratio (the patch does not change it)
            continue
        t = rows.get((r["twin"], vlen, isa)) if r.get("twin") else None
        table.append({"case": case, "function": r["function"], "vlen": vlen, "isa": isa,
                      "fixed": r["instret"], "replaced": b["instret"] if b else None,
                      "twin": t["instret"] if t else None,
                      "fixed_over_replaced": round(r["instret"] / b["instret"], 4) if b and b["instret"] else None,
                      "fixed_over_twin": round(r["instret"] / t["instret"], 4) if t and t["instret"] else None,
                      "replaced_wrong": fix.wrong_at(vlen)})
    costlier = [f"{x['case']} at VLEN {x['vlen']}, {x['isa']}: x{x['fixed_over_replaced']:.3f} ({x['replaced']} -> "
                f"{x['fixed']} instructions)" for x in table
                if x["fixed_over_replaced"] and x["fixed_over_replaced"] > COSTLIER and not x["replaced_wrong"]]
    return {"rows": table, "unmeasured": data["unmeasured"], "costlier_where_right": costlier,
            "isas": list(isas), "vlens": list(vlens), "with": fix.cost_with, "seconds": round(seconds, 1),
            "commands": commands, "report": str(out / "cost" / "cost.md")}


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

"""What a fix costs (``rvvdiff fixes cost``, the cost step of ``fixes check``, and ``rvvdiff series --cost``):
``rvvdiff cost --changed-only`` (harness/jobs/cost_suite_runs.py; instructions under Spike, deterministic) with
HEAD = the tree plus the fix and BASE = the tree, in the ISA builds the fix's header names (``cost``), then the
scalar twins of the cases it measured; per case, ISA build and VLEN: fixed / replaced and fixed / twin, and the
cases where the fix costs more than the code it replaces at a VLEN where that code was right (outside the
header's ``wrong-vlens``).  The header's ``cost-with`` fixes are applied to both trees first, its ``cost-k``
narrows the cases.  The fixes report's section is harness/cost/tables/fix_cost.py; a series' estimated cycles
per core (:func:`series_cycles`) are harness/cost/tables/fix_speed.py's.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from harness.core.config import SPIKE_VLENS
from harness.core.errors import RvvdiffError
from harness.core.matrix import DEFAULT_ISAS, Matrix
from harness.cost.tables import fix_speed
from harness.ggml import patches
from harness.ggml.fix_catalogue import Fix, select
from harness.ggml.source import GgmlSource, resolve
from harness.jobs import cost_suite_runs
from harness.upstream import fix_series

#: Fixed / replaced above this is "costlier" (the cost is exact: only rounding is forgiven).
COSTLIER = 1.0005


class CostStepError(RvvdiffError):
    """The cost of a fix could not be measured (no ISA build selected, a cost run did not complete)."""


def cost(fix: Fix, source: GgmlSource, out: Path, workers: str, *, vlens: tuple[int, ...] = SPIKE_VLENS,
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
    run = cost_suite_runs.Options(on, base=str(base.root), changed_only=True, k=expr or None, out=out / "cost",
                             workers=str(workers))
    try:
        cost_suite_runs.measure(run)  # its exit status says "a case was not measured": judged below, per case
    except cost_suite_runs.CostSelectionError as e:
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
        twin_run = cost_suite_runs.Options(on, k=" or ".join(twins), out=out / "cost-twins", workers=str(workers))
        cost_suite_runs.measure(twin_run)
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


def series_cycles(s: fix_series.Series, work: Path, vlens: tuple[int, ...] = fix_speed.CYCLES_VLENS) -> dict:
    """Each fix of the series measured as ``rvvdiff fixes cost`` measures it (Spike, the cost suite's cases the change
    reaches, the patched tree against the pinned one) at ``vlens``, in its first ISA build, clang; per fix the
    estimated cycles per core, fixed / replaced (:func:`harness.cost.tables.fix_speed.ratios`), or why there are
    none (``rvvdiff series --cost``: an entry of cycles.json)."""
    pinned = resolve(None)
    out: dict[str, dict] = {}
    for fx in s.fixes:
        isa = "zvfh" if "zvfh" in fx.cost_isas else (fx.cost_isas or ["zvfh"])[0]
        try:
            res = cost(fx, pinned, work / fx.name, "1", vlens=vlens, isas=(isa,))
        except CostStepError as e:
            out[fx.name] = {"why": str(e), "isa": isa, "compiler": "clang"}
            continue
        data = json.loads((work / fx.name / "cost" / "cost.json").read_text())
        out[fx.name] = {"cores": fix_speed.ratios(data), "isa": isa, "compiler": "clang", "vlens": list(vlens),
                        "seconds": res["seconds"], "unmeasured": fix_speed.unmeasured(data)}
        if not out[fx.name]["cores"]:
            out[fx.name]["why"] = "no measured case has an instruction mix at a VLEN with a core's prices"
    return out

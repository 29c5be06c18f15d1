"""The report of ``rvvdiff fixes`` (``reports/fixes/summary.md``): the tree and the command, all fixes
together when they were run so, the cost of each fix per VLEN (harness/cost/tables/fix_cost.py), then per fix
where it stands on the tree, its verification (harness/jobs/fix_checks.py) and its cost section.
"""

from __future__ import annotations

import os
from typing import Any

from harness.cost.tables.fix_cost import cost_md, cost_summary, span
from harness.ggml.fix_catalogue import Standing
from harness.ggml.source import GgmlSource


def summary_md(source: GgmlSource, standings: list[Standing], checks: dict[str, dict[str, Any]],
               costs: dict[str, dict[str, Any]], together_run: dict[str, Any] | None, argv: list[str]) -> str:
    lines = ["# rvvdiff fixes", "", f"Tree: {source.describe()}", f"Command: `rvvdiff fixes {' '.join(argv)}`",
             f"Machine: {os.uname().nodename}, {os.cpu_count()} cores", ""]
    if together_run:
        t = together_run
        lines += [f"## All fixes together: {t['result']}", "",
                  f"{len(t['fixes'])} fixes applied ({', '.join(t['fixes'])}); left out (do not apply): "
                  f"{', '.join(t['left_out']) or 'none'}. Outcomes: "
                  + ", ".join(f"{v} {k}" for k, v in sorted(t["outcomes"].items())) + f"; {t['seconds']:.0f} s.", ""]
        lines += [f"- {p}" for p in t["problems"]] + [""]
    if costs:
        vlens = sorted({v for c in costs.values() for v in c["vlens"]})
        lines += ["## Cost", "", "Instructions under Spike (`rvvdiff cost`), per VLEN over the cases the patch reaches and "
                  "its ISA builds: fixed / replaced, then in brackets fixed / scalar twin; * = the replaced code is "
                  "wrong at that VLEN.", "", "| fix | " + " | ".join(f"VLEN {v}" for v in vlens) + " |",
                  "|---|" + "---|" * len(vlens)]
        for name, c in costs.items():
            summ = cost_summary(c["rows"], vlens)
            wrong = {x["vlen"] for x in c["rows"] if x["replaced_wrong"]}
            lines.append(f"| `{name}` | " + " | ".join(
                f"{span(summ[v]['fixed_over_replaced'])}{'*' if v in wrong else ''} ({span(summ[v]['fixed_over_twin'])})"
                for v in vlens) + " |")
        lines.append("")
    lines += ["## Per fix", "", "| fix | on this tree | verification | finding tests fixed | other changes | time |",
              "|---|---|---|---|---|---|"]
    for s in standings:
        c = checks.get(s.fix)
        if c is None:
            lines.append(f"| `{s.fix}` | {s.describe().split(': ', 1)[1]} | not run | | | |")
            continue
        lines.append(f"| `{s.fix}` | {s.state} | **{c['result']}** | {len(c['fixed'])} of {c['finding_tests_ran']} "
                     f"ran | {len(c['also_fixed'])} also fixed, {c['pre_existing']} pre-existing (other findings) | "
                     f"{c['seconds'].get('total', 0):.0f} s |")
    for s in standings:
        c = checks.get(s.fix)
        lines += ["", f"### {s.fix}", "", s.describe(), ""] + [f"- entry {e}" for e in s.entries]
        if c:
            lines += [f"- result: **{c['result']}**; gate summary: {c['summary']}"]
            if c.get("with"):
                lines.append(f"- both trees with: {', '.join(c['with'])} (the header's check-with)")
            lines += [f"- changed: {', '.join(c['changes'])}",
                      "- runs: " + "; ".join(f"{k} {r['ran']} ran of {r['tests']} in {r['seconds']:.0f} s"
                                            for k, r in c["runs"].items())]
            lines += [f"- problem: {p}" for p in c["problems"]]
            lines += [f"- fixed: `{n}`" for n in c["fixed"][:40]]
            if len(c["fixed"]) > 40:
                lines.append(f"- ... and {len(c['fixed']) - 40} more fixed")
            lines += [f"- also fixed: `{n}`" for n in c["also_fixed"]]
        if s.fix in costs:
            lines += cost_md(s.fix, costs[s.fix])
    return "\n".join(lines) + "\n"

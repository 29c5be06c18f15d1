"""The run's summary matrix, written by the controlling process at the end of a run.

``summary.md`` (a matrix kernel x VLEN x ISA build: pass, fail, known failure, skipped with its
reason), ``summary.html`` (the same, with a plot of error/bound ratios per kernel and VLEN) and
``results.json`` (one entry per test: outcome, reason, duration, observations) -- the file every
command reads back through harness/core/runner.py.  JUnit XML comes from pytest's
``--junitxml``.  A failing test's own report is harness/report/failure.py's; ``rvvdiff repro``
replays it (harness/jobs/repro_runs.py).
"""

from __future__ import annotations

import html
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from harness.report.failure import jsonable
from harness.report.html import page
from harness.report.ids import parse_id
from harness.report.model_table import markdown as model_section

_MARK = {"passed": "pass", "failed": "FAIL", "xfailed": "known", "xpassed": "FIXED?", "skipped": "skip",
         "error": "ERROR"}


def write_summary(report_dir: Path, results: list[dict[str, Any]], header: list[str]) -> None:
    """summary.md, summary.html and results.json from the per-test results of a run."""
    report_dir.mkdir(parents=True, exist_ok=True)
    (report_dir / "results.json").write_text(json.dumps(jsonable(results), indent=1))
    rows: dict[str, dict[tuple[str, int], list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    cols: set[tuple[str, int]] = set()
    for r in results:
        tid = parse_id(r["nodeid"])
        if tid is None:
            continue
        rows[tid.row][(tid.column, tid.vlen)].append(r)
        cols.add((tid.column, tid.vlen))
    columns = sorted(cols)
    counts = defaultdict(int)
    for r in results:
        counts[r["outcome"]] += 1

    def cell(rs: list[dict[str, Any]]) -> str:
        if not rs:
            return ""
        worst = max(rs, key=lambda r: ["passed", "skipped", "xfailed", "xpassed", "failed", "error"].index(r["outcome"]))
        return _MARK[worst["outcome"]]

    md = ["# rvvdiff results", "", *[f"- {h}" for h in header], "",
          "- " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())), "",
          "| test | " + " | ".join(f"{c} {v}" for c, v in columns) + " |",
          "|---|" + "---|" * len(columns)]
    for row in sorted(rows):
        md.append(f"| `{row}` | " + " | ".join(cell(rows[row].get(c, [])) for c in columns) + " |")
    reasons = sorted({(r["nodeid"], r.get("reason", "")) for r in results
                      if r["outcome"] in ("skipped", "xfailed", "failed", "error")})
    if reasons:
        md += ["", "## Not passing", ""]
        md += [f"- `{n}`: {_MARK.get(next(r['outcome'] for r in results if r['nodeid'] == n), '')} {reason[:300]}"
               for n, reason in reasons]
    md += model_section(results)
    (report_dir / "summary.md").write_text("\n".join(md) + "\n")
    (report_dir / "summary.html").write_text(_html(rows, columns, header, counts, results))


def _html(rows, columns, header, counts, results) -> str:
    color = {"pass": "#cfc", "FAIL": "#f99", "known": "#fd8", "FIXED?": "#f9f", "skip": "#ddd", "ERROR": "#f66"}
    out = ["<h1>rvvdiff results</h1><ul>"]
    out += [f"<li>{html.escape(h)}</li>" for h in header]
    out.append("<li>" + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())) + "</li></ul>")
    out.append("<table><tr><th>test</th>" + "".join(f"<th>{html.escape(c)}<br>{v}</th>" for c, v in columns) + "</tr>")
    for row in sorted(rows):
        out.append(f"<tr><td><code>{html.escape(row)}</code></td>")
        for c in columns:
            rs = rows[row].get(c, [])
            mark = ""
            if rs:
                order = ["passed", "skipped", "xfailed", "xpassed", "failed", "error"]
                mark = _MARK[max(rs, key=lambda r: order.index(r["outcome"]))["outcome"]]
            out.append(f"<td style='background:{color.get(mark, '#fff')}'>{mark}</td>")
        out.append("</tr>")
    out.append("</table>")
    out.append(_plot(results))
    return page("rvvdiff results", "body{font:14px sans-serif}td,th{border:1px solid #999;padding:2px 6px}"
                "table{border-collapse:collapse}", out, sep="\n")


def _plot(results: list[dict[str, Any]]) -> str:
    """An inline SVG: per kernel row, the worst error/bound ratio at each VLEN (log scale, 1 = the bound)."""
    pts: dict[str, dict[int, float]] = defaultdict(dict)
    for r in results:
        tid = parse_id(r["nodeid"])
        ratio = r.get("error/bound")
        if tid is None or ratio is None or not isinstance(ratio, (int, float)):
            continue
        pts[tid.row][tid.vlen] = max(pts[tid.row].get(tid.vlen, 0.0), float(ratio))
    if not pts:
        return "<p>No error/bound ratios were recorded.</p>"
    rows = sorted(pts)
    w, left, h = 900, 330, 22 * len(rows) + 60
    lo, hi = -8.0, 1.0  # log10 range shown: 1e-8 .. 10

    def x(v: float) -> float:
        lv = math.log10(v) if v > 0 else lo
        return left + (min(max(lv, lo), hi) - lo) / (hi - lo) * (w - left - 20)

    palette = {128: "#1f77b4", 256: "#2ca02c", 512: "#ff7f0e", 1024: "#d62728"}
    s = [f"<h2>Error as a fraction of its bound</h2><svg xmlns='http://www.w3.org/2000/svg' width='{w}' height='{h}'>"]
    for e in range(int(lo), int(hi) + 1):
        s.append(f"<line x1='{x(10.0**e):.1f}' y1='20' x2='{x(10.0**e):.1f}' y2='{h - 30}' "
                 f"stroke='{'#c00' if e == 0 else '#ddd'}'/><text x='{x(10.0**e) - 10:.1f}' y='{h - 12}' "
                 f"font-size='11'>1e{e}</text>")
    for i, row in enumerate(rows):
        y = 30 + 22 * i
        s.append(f"<text x='4' y='{y + 4}' font-size='12'>{html.escape(row[:48])}</text>")
        for vlen, ratio in sorted(pts[row].items()):
            s.append(f"<circle cx='{x(ratio):.1f}' cy='{y}' r='5' fill='{palette.get(vlen, '#000')}'>"
                     f"<title>{html.escape(row)} VLEN {vlen}: {ratio:.3g}</title></circle>")
    s.append("".join(f"<text x='{left + 90 * k}' y='14' font-size='12' fill='{c}'>VLEN {v}</text>"
                     for k, (v, c) in enumerate(palette.items())))
    s.append("</svg>")
    return "\n".join(s)


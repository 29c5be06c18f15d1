"""The PR gate's summary (docs/gate.md): ``summary.md`` (also appended to ``$GITHUB_STEP_SUMMARY``),
``summary.html`` and ``gate.json`` from a :class:`~harness.report.gate_verdict.GateVerdict`; the lists
lead, the cost section, the changed functions and each run's reports follow.
"""

from __future__ import annotations

import html
import json
import os
from collections import defaultdict
from pathlib import Path

from harness.cost.tables import run_tally
from harness.cost.tables.gate_lists import CostLists
from harness.report.gate_verdict import LISTS, GateVerdict
from harness.report.html import cells, page
from harness.report.ids import parse_id

#: Rows of each cost list in the summary (the rest are in cost.json).
COST_ROWS = 40
#: The trees the cost section counts.
TREES = ("head", "base")


def _groups(nodeids: list[str]) -> list[str]:
    """Test ids folded over the target part: ``test_vec_dot[q4_0-*] (12)``."""
    n: dict[str, int] = defaultdict(int)
    for i in nodeids:
        tid = parse_id(i)
        key = (f"{tid.test}[{tid.kernel}-*]" if tid.kernel else f"{tid.test}[*]") if tid else i
        n[key] += 1
    return [f"{k} ({v})" for k, v in sorted(n.items())]


def summary_md(v: GateVerdict) -> str:
    """``summary.md``: the verdict and the counts, the lists with their replay lines, the uncovered
    changes and lines, the cost section, the changed functions and the tests that reach them."""
    out = [f"# rvvdiff gate: {v.word()}", "",
           f"- HEAD: {v.head}", f"- BASE: {v.base}",
           "- " + ", ".join(f"{k}: {len(v.of(k))}" for k in LISTS) + f", uncovered changes: {len(v.uncovered)}"
           + (f", uncovered lines: {len(v.uncovered_lines)} functions" if v.line_counts is not None else ""),
           "- " + (v.cost.headline() if v.cost else "cost not measured (--no-cost)"),
           *([f"- {incomplete_line(v)}"] if v.incomplete else []),
           "- time: " + ", ".join(f"{k} {s:.0f} s" for k, s in v.seconds.items()), ""]
    titles = {"regression": "Regressions (block)", "new kernel failing": "New kernels failing (block)",
              "pre-existing": "Pre-existing failures (do not block)", "fixed": "Fixed (do not block)"}
    for kind in LISTS:
        lines = v.of(kind)
        out += [f"## {titles[kind]}: {len(lines)}", ""]
        for ln in lines:
            out.append(f"- {ln.describe()}")
            for e in ln.known:
                out.append(f"  - known_failures.toml entry {e}" + (" — remove it" if kind == "fixed" else ""))
            if kind == "fixed" and not ln.known:
                out.append("  - no known_failures.toml entry lists it")
            for tree, cmd in ln.replay.items():
                out.append(f"  - replay on {tree.upper()}: `{cmd}`")
        out.append("")
    out += [f"## Uncovered changes (block): {len(v.uncovered)}", ""]
    by_name = {c["name"]: c for c in v.changes}
    ran = set(v.runs.get("head", {}).get("ran", ()))
    for n in v.uncovered:
        c = by_name.get(n, {})
        covering = [t for t, names in v.covers.items() if n in names]
        why = ("its tests were selected but none ran to a verdict on HEAD (skipped, or their build failed: see "
               "the HEAD run's report)" if covering and not ran.intersection(covering) else
               "no collected test reaches it; add a test (docs/architecture.md)")
        out.append(f"- `{n}` ({c.get('what')}, {c.get('kind')}, {c.get('file')}:{c.get('line')}): changed RVV code; "
                   f"{why}; or, once a reviewer judged it harmless, pass --allow-uncovered {n}")
    for n in v.accepted:
        out.append(f"- `{n}`: uncovered, accepted with --allow-uncovered")
    if v.line_counts is not None:
        out += ["", f"## Uncovered lines (block): {len(v.uncovered_lines)} functions", "",
                "Changed lines that a build run compiles and no test executed at any target (--lines; "
                + ", ".join(f"{k}: {n}" for k, n in v.line_counts.items()) + "):", ""]
        out += [f"- {d}" for d in v.uncovered_lines] + ([f"- {v.line_problem}"] if v.line_problem else [])
        if v.uncovered_lines:
            out.append("- widen the tests that reach these functions (docs/coverage.md), or, once a reviewer judged "
                       "the lines harmless, pass --allow-uncovered FUNCTION")
    if v.cost and v.cost.measured:
        out += ["", *cost_md(v.cost)]
    out += ["", f"## Changed functions and macros: {len(v.changes)}", ""]
    for c in v.changes:
        own = sorted(t for t, names in v.owns.items() if c["name"] in names and t in ran)
        other = sorted(t for t, names in v.covers.items() if c["name"] in names and t in ran and t not in own)
        parts = ([f"{len(own)} tests own it (thorough budget): " + ", ".join(_groups(own))] if own else []) + \
                ([f"{len(other)} more reach it through other tested kernels (default budget): "
                  + ", ".join(_groups(other))] if other else [])
        out.append(f"- `{c['name']}` ({c['what']}, {c['kind']}, {c['file']}:{c['line']}"
                   + (", RVV" if c["rvv"] else "") + f", builds {'/'.join(c['builds'])}): "
                   + ("; ".join(parts) if parts else "no test that ran reaches it"))
    if v.outside:
        out += ["", "Changed files the C reader does not follow (build files, other backends): "
                + ", ".join(f"`{p}`" for p in v.outside)]
    if v.notes:
        out += ["", "Reader notes (taken as not compiled): " + "; ".join(v.notes[:20])]
    out += ["", "Each run's own reports: " + ", ".join(f"{k}: `{r['report_dir']}` ({len(r['ran'])} tests ran)"
                                                    for k, r in v.runs.items()), ""]
    return "\n".join(out)


def incomplete_line(v: GateVerdict) -> str:
    """The one line of a cost step that measured nothing on HEAD or BASE: why, and what the exit status is."""
    return (f"cost step incomplete: {v.incomplete}" + ("" if v.blocking else f" (exit {v.status})"))


def cost_md(c: CostLists) -> list[str]:
    """The summary's cost section: the slower and faster lists as one table."""
    block = (f"; slower beyond {c.block_slower:g} % blocks (--block-slower)" if c.block_slower is not None
             else "; they do not block (--block-slower PCT makes a slower one block)")
    out = [f"## Cost: {len(c.slower)} slower, {len(c.faster)} faster"
           + (f", {len(c.blocking)} beyond --block-slower (block)" if c.blocking else ""), "",
           f"Instructions retired per call under Spike, HEAD against BASE, for the cost cases the change reaches "
           f"(VLEN {', '.join(map(str, c.vlens))}; ISA build {', '.join(c.isas)}; "
           + run_tally.summary({t: c.measurements.get(t, 0) for t in TREES}, {t: c.selected.get(t, 0) for t in TREES})
           + f"; {c.seconds:.0f} s). Listed beyond {c.threshold:g} %{block}."
           + (f" Full table: `{c.report}`." if c.report else "")]
    if c.note:
        out += ["", c.note]
    if c.slower or c.faster:
        blocking = set(c.blocking)
        out += ["", "| list | function | case | VLEN | ISA build | BASE | HEAD | change |", "|---|---|---|---|---|---|---|---|"]
        for what, moves in (("slower", c.slower), ("faster", c.faster)):
            for m in moves[:COST_ROWS]:
                tag = "slower (blocks)" if m in blocking else what
                out.append(f"| {tag} | `{m.function}` | {m.case} | {m.vlen} | {m.isa} | {m.base} | {m.head} | "
                           f"{(m.ratio - 1) * 100:+.1f} % |")
            if len(moves) > COST_ROWS:
                out.append(f"| {what} | ... and {len(moves) - COST_ROWS} more (cost.json) | | | | | | |")
    else:
        out += ["", "No case moved beyond the threshold."]
    if c.head_only:
        out += ["", f"Measured on HEAD only, not compared ({len(c.head_only)}): " + ", ".join(c.head_only[:20])
                + (" ..." if len(c.head_only) > 20 else "")]
    if c.unmeasured:
        out += ["", "Not measured (one line each):"] + [f"- {x}" for x in c.unmeasured]
    return out


def summary_html(v: GateVerdict, md: str) -> str:
    """``summary.html``: the lists and the cost lists as tables, then the Markdown ``md``."""
    rows = []
    for kind in (*LISTS,):
        for ln in v.of(kind):
            rows.append("<tr>" + cells("td", (
                kind, ln.nodeid, ln.kernel, ln.vlen or "", ln.isa, "on" if ln.stress else "off", ln.why,
                "\n".join(ln.known))) + "<td>" + "<br>".join(
                f"<b>{t}</b> <code>{html.escape(c)}</code>" for t, c in ln.replay.items()) + "</td></tr>")
    for n in v.uncovered:
        rows.append(f"<tr><td>uncovered change</td><td>{html.escape(n)}</td>" + "<td></td>" * 7 + "</tr>")
    head = cells("th", ("list", "test", "kernel", "VLEN", "ISA build", "stress", "why", "known failure", "replay"))
    cost = [f"<h2>Cost</h2><p>{html.escape(v.cost.headline() if v.cost else 'cost not measured (--no-cost)')}</p>",
            *([f"<p><b>{html.escape(incomplete_line(v))}</b></p>"] if v.incomplete else [])]
    if v.cost and (v.cost.slower or v.cost.faster):
        blocking = set(v.cost.blocking)
        crows = ["<tr>" + cells("td", ("slower (blocks)" if m in blocking else what, m.function, m.case, m.vlen, m.isa,
                                       m.base, m.head, f"{(m.ratio - 1) * 100:+.1f} %")) + "</tr>"
                 for what, moves in (("slower", v.cost.slower), ("faster", v.cost.faster)) for m in moves]
        chead = cells("th", ("list", "function", "case", "VLEN", "ISA build", "BASE", "HEAD", "change"))
        cost.append(f"<table><tr>{chead}</tr>{''.join(crows)}</table>")
    return page("rvvdiff gate", "body{font-family:sans-serif}td{vertical-align:top;border-top:1px solid #ccc;padding:3px}"
                "code{font-size:80%}", [f"<h1>rvvdiff gate: {v.word()}</h1>",
                                        f"<table><tr>{head}</tr>{''.join(rows)}</table>", *cost,
                                        f"<h2>Summary</h2><pre>{html.escape(md)}</pre>"])


def write(v: GateVerdict, out: Path) -> Path:
    """``out/gate/summary.md``, ``summary.html`` and ``gate.json``; the Markdown also to
    ``$GITHUB_STEP_SUMMARY`` when it is set.  Returns the Markdown's path."""
    g = out / "gate"
    md = summary_md(v)
    (g / "summary.md").write_text(md)
    (g / "summary.html").write_text(summary_html(v, md))
    (g / "gate.json").write_text(json.dumps(v.as_json(), indent=1, default=str))
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        with open(os.environ["GITHUB_STEP_SUMMARY"], "a") as f:
            f.write(md + "\n")
    return g / "summary.md"

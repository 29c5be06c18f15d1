"""``rvvdiff fixes``: a verified patch for every finding, checked against any tree it applies to.

``harness/data/fixes/<name>.patch`` fixes one finding of docs/findings.md (header: ``rvvdiff fix:`` title,
``finding``, ``functions``, ``tests``, ``cost``, ``wrong-vlens``, ``vector-path``; then the diff, llama.cpp paths,
``patch -p1`` from a llama.cpp root, ``-p2`` from a ggml repository: harness/ggml/patches.py), and
``harness/data/fixes/<name>.md`` is its upstream-ready report.  The entries of known_failures.toml that name
the fix (``fix = "<name>"``) are the finding's expected failures.

``rvvdiff fixes list [--ggml-src TREE]``
    each fix and where it stands on the tree: applies, already in the tree, or no longer applies
    (and then whether the buggy code is still there -- the patch needs rebasing -- or changed:
    fixed upstream or moved).

``rvvdiff fixes check [NAME ...] [--ggml-src TREE] [--full] [--no-cost] [pytest options]``
    for each fix that applies: the PR gate (harness/commands/gate.py) with BASE = the tree and HEAD = the tree
    plus the patch, over every VLEN, ISA build and stress mode (``--vlen`` / ``--isa`` /
    ``--rvv-stress`` narrow it).  The tests that reach the change run (``--full``: every test),
    the thorough budget for those that own it and for the finding's tests.  A fix is *verified*
    when the gate blocks nothing (no regression, no failing new kernel, no uncovered change), the
    finding's tests ran, none fails on HEAD and at least one is named fixed (it failed on BASE),
    and the finding's known-failure entries apply to BASE and no longer to HEAD.  Then its cost,
    as ``fixes cost`` measures it.

``rvvdiff fixes cost [NAME ...] [--ggml-src TREE] [--vlen LIST] [--isa LIST] [-k EXPR]``
    only the cost: ``rvvdiff cost --changed-only`` (harness/commands/cost.py; instructions under
    Spike, deterministic) with HEAD = the patched tree and BASE = the tree, in the ISA builds the
    header's ``cost`` names, at every Spike VLEN (128 to 4096), and the scalar twins of the cases
    it measured; per case, ISA build and VLEN: fixed / replaced and fixed / twin.  A fix that costs
    more than the code it replaces at a VLEN where that code was right (outside the header's
    ``wrong-vlens``) is listed.  The header's ``cost-with`` names fixes applied to both trees first
    (the replaced code cannot be measured without them: it traps on Spike), its ``cost-k`` a pytest
    ``-k`` narrowing the cases (``-k`` on the command line narrows them further; in ``check`` it
    selects the gate's tests, and the cost step takes only ``--vlen`` and ``--isa`` from the options).

``rvvdiff fixes check --together [--ggml-src TREE] [pytest options]``
    every fix that applies, applied together; the whole suite (every VLEN, ISA build, stress mode)
    with the known failures applied must pass with no expected failure left and no entry applying.

Reports: ``reports/fixes/summary.md`` and ``fixes.json``; per fix the gate's reports under
``reports/fixes/<name>/`` (the cost runs' cost.md / cost.json / cost.html under ``<name>/cost/``).
Exit status: 0 when every fix checked is verified (or the tree already has it), 1 when one fails its
verification, 3 when none failed but one could not be checked (it no longer applies, the selection
does not reach the finding, or its cost could not be measured).
"""

from __future__ import annotations

import argparse
import fnmatch
import functools
import json
import os
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.commands import gate
from harness.core import settings
from harness.core.config import DATA_DIR, ISA_BUILDS, PROJECT_ROOT, SPIKE_VLENS, selection_type
from harness.core.errors import RvvdiffError, UnknownName
from harness.core.proc import own_session_env
from harness.core.runner import add_cc_option, cc_args, read_results, run_suite
from harness.cost import suite_runs, suite_tables
from harness.ggml import known, patches
from harness.ggml.source import GgmlSource, resolve
from harness.report import gate_verdict
from harness.report.gate_summary import write as write_gate

FIXES_DIR = DATA_DIR / "fixes"


def fixes_dir() -> Path:
    """``$RVVDIFF_FIXES_DIR`` if set (the project's tests use their own), else ``harness/data/fixes/``."""
    return settings.path("FIXES_DIR") or FIXES_DIR

#: The main job's matrix: every VLEN, ISA build, stress mode (narrowed by the user's options).
MATRIX = ["--vlen", "all", "--isa", "all", "--rvv-stress", "both"]
#: Fixed / replaced above this is "costlier" (the cost is exact: only rounding is forgiven).
COSTLIER = 1.0005


class Fix(patches.Patch):
    @property
    def title(self) -> str:
        return self.meta.get("rvvdiff fix", self.name)

    @property
    def report(self) -> Path:
        return self.patch.with_suffix(".md")

    @functools.cached_property
    def entries(self) -> list[known.Known]:
        return [e for e in known.load() if e.fix == self.name]

    @functools.cached_property
    def tests(self) -> list[str]:
        """The finding's tests: its known-failure entries' globs and the header's ``tests``."""
        return list(dict.fromkeys([e.test for e in self.entries] + self._list("tests")))

    def _list(self, key: str) -> list[str]:
        """A comma-separated header value as a list."""
        return [t.strip() for t in self.meta.get(key, "").split(",") if t.strip()]

    @property
    def cost_isas(self) -> list[str]:
        """The ISA builds whose code the patch changes (header ``cost``): the cost runs measure these."""
        return self._list("cost")

    @property
    def cost_with(self) -> list[str]:
        """Fixes applied to both trees before the cost is measured (header ``cost-with``)."""
        return self._list("cost-with")

    @property
    def cost_k(self) -> str:
        """A pytest -k expression narrowing the cost cases the change reaches (header ``cost-k``): the
        reach of a graph op (mul_mat dispatches to every repacked kernel) is wider than what it runs."""
        return self.meta.get("cost-k", "").strip()

    def wrong_at(self, vlen: int) -> bool:
        """Whether the replaced code is wrong at ``vlen`` (header ``wrong-vlens``: ``all`` or a list):
        there the fix may cost more than it."""
        vlens = self._list("wrong-vlens")
        return "all" in vlens or str(vlen) in vlens

    def is_finding_test(self, nodeid: str) -> bool:
        return any(fnmatch.fnmatchcase(nodeid, g) or nodeid.startswith(g) for g in self.tests)


def catalogue() -> dict[str, Fix]:
    return patches.catalogue(fixes_dir(), Fix)  # type: ignore[return-value]


def select(names: list[str]) -> list[Fix]:
    cat = catalogue()
    unknown = [n for n in names if n not in cat]
    if unknown:
        raise UnknownName(f"no fix {', '.join(unknown)}; known: {', '.join(cat) or '(none)'} (in {fixes_dir()})")
    return [cat[n] for n in names] if names else list(cat.values())


# ------------------------------------------------------------------ where a fix stands on a tree


@dataclass
class Standing:
    fix: str
    state: str  # applies, applied, conflict
    detail: str
    entries: list[str] = field(default_factory=list)  # "#n applies (fingerprint)" ...

    def describe(self) -> str:
        words = {"applies": "applies", "applied": "already in the tree",
                 "conflict": "no longer applies"}[self.state]
        return f"{self.fix}: {words}" + (f" -- {self.detail}" if self.detail else "")


def standing(fix: Fix, source: GgmlSource) -> Standing:
    state, said = patches.applies(fix, source)
    verdicts = [e.judge(source) for e in fix.entries]
    entries = [f"#{v.entry.number} {'applies' if v.applies else 'does not apply'} ({v.why})" for v in verdicts]
    detail = ""
    if state == "conflict":
        if any(v.applies for v in verdicts):
            detail = ("the buggy code is still there (a known-failure entry's fingerprint matches) but the patch "
                      "does not apply: the code around it moved; rebase the patch")
        else:
            detail = ("the functions the finding names changed or are gone: the bug may be fixed upstream or "
                      f"moved; run the finding's tests to see ({', '.join(fix.tests)})")
        detail += f". patch says: {' '.join(said.split())[:300]}"
    elif state == "applies" and ("offset" in said or "fuzz" in said):
        detail = f"with {' '.join(said.split())[:200]}"
    return Standing(fix.name, state, detail, entries)


# ------------------------------------------------------------------ one fix: the gate, then the speed


def verify(fix: Fix, source: GgmlSource, out: Path, pytest_args: list[str], *, full: bool, workers: str) -> dict[str, Any]:
    patched = patches.apply([fix], source, "fix")
    v = gate.gate(patched.root, str(source.root), f"the tree without {fix.name}", out, pytest_args,
                  changed_only=not full, also=tuple(fix.tests), workers=workers)
    write_gate(v, out)
    ran = {n: r for n, r in (read_results(out / "head") or {}).items()  # the finding's tests that ran to a verdict
           if fix.is_finding_test(n) and gate_verdict.state(r) in ("pass", "fail")}
    failing = sorted(n for n, r in ran.items() if gate_verdict.state(r) == "fail")
    fixed = [ln.nodeid for ln in v.of("fixed")]
    named = [n for n in fixed if fix.is_finding_test(n)]
    entries_base = {e.number: e.judge(source).applies for e in fix.entries}
    entries_head = {e.number: e.judge(patched).applies for e in fix.entries}
    problems = [f"{ln.list}: {ln.describe()}" for k in ("regression", "new kernel failing") for ln in v.of(k)]
    problems += [f"uncovered change: {n}" for n in v.uncovered]
    problems += [f"finding test still fails on the patched tree: {n}" for n in failing]
    problems += [f"known-failure entry #{n} still applies to the patched tree (the patch leaves its functions as they "
                 "were)" for n, a in entries_head.items() if a and entries_base.get(n)]
    inconclusive = []
    if not problems:
        if not [n for n, r in ran.items() if gate_verdict.state(r) == "pass"]:
            inconclusive.append("none of the finding's tests ran in this selection")
        elif not named:
            inconclusive.append("none of the finding's tests failed on the tree without the fix in this selection "
                                "(the selection does not reach the bug, or the tree does not have it)")
    result = "failed" if problems else "inconclusive" if inconclusive else "verified"
    return {"result": result, "problems": problems + inconclusive, "tree": str(patched.root),
            "finding_tests_ran": len(ran), "fixed": named, "also_fixed": [n for n in fixed if n not in named],
            "pre_existing": len(v.of("pre-existing")), "entries_base": entries_base, "entries_head": entries_head,
            "changes": [c["name"] for c in v.changes], "seconds": v.seconds,
            "runs": {k: {"tests": r["tests"], "ran": len(r["ran"]), "seconds": r["seconds"]} for k, r in v.runs.items()},
            "summary": str(out / "gate" / "summary.md")}


class CostStepError(RvvdiffError):
    """The cost of a fix could not be measured (no ISA build selected, a cost run did not complete)."""


def cost(fix: Fix, source: GgmlSource, out: Path, workers: str, vlens: tuple[int, ...] = SPIKE_VLENS,
         isas: tuple[str, ...] = tuple(ISA_BUILDS), k: str | None = None) -> dict[str, Any]:
    """The fix's cost (module docstring, ``fixes cost``): ``rvvdiff cost --changed-only`` between the
    tree and the patched tree in the fix's ISA builds, then the scalar twins of the cases it measured."""
    selected, isas = isas, tuple(i for i in fix.cost_isas if i in isas)
    if not isas:
        raise CostStepError(f"{fix.name}: its ISA builds ({', '.join(fix.cost_isas) or 'none: the header has no cost'})"
                            f" are not in the selection ({', '.join(selected)})")
    before = select(fix.cost_with) if fix.cost_with else []
    base = patches.apply(before, source, "fix") if before else source
    patched = patches.apply([*before, fix], source, "fix")
    common = {"vlen": tuple(vlens), "isa": tuple(isas), "workers": str(workers)}
    expr = " and ".join(f"({e})" for e in (fix.cost_k, k) if e)
    run = suite_runs.Options(ggml_src=str(patched.root), base=str(base.root), changed_only=True, k=expr or None,
                             out=out / "cost", **common)
    suite_runs.measure(run)  # its exit status says "a case was not measured": judged below, per case
    data = json.loads((out / "cost" / "cost.json").read_text())
    if not data["head"] and not data["unmeasured"]:
        raise CostStepError(f"{fix.name}: no case of the cost suite (costs/) reaches the change "
                            f"({', '.join(fix.meta.get('functions', '?').split(', '))}) in {', '.join(isas)}: "
                            "the cost suite lacks a case calling it")
    rows = {(r["case"], r["vlen"], r["isa"]): r for r in data["head"]}
    base_rows = {(r["case"], r["vlen"], r["isa"]): r for r in data["base"]}
    seconds = data.get("seconds", 0.0)
    twins = sorted({r["twin"] for r in rows.values() if r.get("twin")} - {key[0] for key in rows})
    commands = [shlex.join(["rvvdiff", "cost", *run.argv()])]
    if twins:
        twin_run = suite_runs.Options(ggml_src=str(patched.root), k=" or ".join(twins), out=out / "cost-twins", **common)
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


def _span(r: tuple[float, float] | None) -> str:
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
    lines.append("| fixed / replaced | " + " | ".join(_span(summ[v]["fixed_over_replaced"]) for v in vlens) + " |")
    lines.append("| fixed / twin | " + " | ".join(_span(summ[v]["fixed_over_twin"]) for v in vlens) + " |")
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


# ------------------------------------------------------------------ all fixes together


def combined(fixes: list[Fix], source: GgmlSource) -> tuple[GgmlSource, list[Fix], list[Fix]]:
    """The tree with every fix that applies to ``source`` applied, those fixes, and those left out."""
    ok = [f for f in fixes if patches.applies(f, source)[0] == "applies"]
    return patches.apply(ok, source, "fix", name="all"), ok, [f for f in fixes if f not in ok]


def together(fixes: list[Fix], source: GgmlSource, out: Path, pytest_args: list[str], workers: str) -> dict[str, Any]:
    """Every applicable fix at once; the whole suite with the known failures applied."""
    tree, ok, left = combined(fixes, source)
    applying = [v for v in known.judge(known.load(), tree) if v.applies]
    out.mkdir(parents=True, exist_ok=True)
    run = run_suite(["cases", "-p", "no:cacheprovider", *MATRIX, *pytest_args, "--ggml-src", str(tree.root),
                     "--junitxml", str(out / "run" / "junit.xml"), "-n", workers], report_dir=out / "run",
                    env=own_session_env(), echo=f"\n=== rvvdiff fixes: all {len(ok)} applicable fixes together ({tree.root})")
    code, seconds, counts = run.exit, run.seconds, dict(run.counts())
    problems = []
    if code != 0:
        problems.append(f"pytest exit status {code} (report: {out / 'run' / 'summary.md'})")
    if counts.get("xfailed"):
        problems.append(f"{counts['xfailed']} expected failures left")
    problems += [f"known-failure entry #{v.entry.number} still applies ({v.why}): {v.entry.reason}" for v in applying]
    return {"result": "failed" if problems else "verified", "problems": problems, "fixes": [f.name for f in ok],
            "left_out": [f.name for f in left], "tree": str(tree.root), "outcomes": counts,
            "seconds": seconds}


# ------------------------------------------------------------------ report and command line


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
                f"{_span(summ[v]['fixed_over_replaced'])}{'*' if v in wrong else ''} ({_span(summ[v]['fixed_over_twin'])})"
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
            lines += [f"- result: **{c['result']}**; gate summary: {c['summary']}",
                      f"- changed: {', '.join(c['changes'])}",
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


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="rvvdiff fixes", allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("action", choices=("list", "check", "cost"),
                   help="list: where each fix stands on the tree; check: verify each (and measure its cost); "
                        "cost: only measure each fix's cost under Spike")
    p.add_argument("names", nargs="*", help="fixes (default: all in harness/data/fixes/)")
    p.add_argument("--ggml-src", help="the tree to check against (default: the pinned tree)")
    p.add_argument("--full", action="store_true", help="run every test on each patched tree, not only those reaching the change")
    p.add_argument("--no-cost", action="store_true", help="check: skip the cost (instructions under Spike, `fixes cost`)")
    p.add_argument("--together", action="store_true", help="all applicable fixes at once, the whole suite")
    p.add_argument("--out", type=Path, default=PROJECT_ROOT / "reports" / "fixes")
    p.add_argument("--workers", default=settings.get("WORKERS") or "auto")
    add_cc_option(p)
    a, pytest_args = p.parse_known_args(argv)
    pytest_args += cc_args(a.cc)
    vlens, isas, k = cost_selection(pytest_args)
    source = resolve(a.ggml_src)
    fixes = select(a.names)
    standings = [standing(f, source) for f in fixes]
    for s in standings:
        print(s.describe())
        for e in s.entries:
            print(f"    entry {e}")
    if a.action == "list":
        return 0
    a.out.mkdir(parents=True, exist_ok=True)
    checks: dict[str, dict[str, Any]] = {}
    costs: dict[str, dict[str, Any]] = {}
    cost_errors: dict[str, str] = {}
    together_run = None
    if a.together:
        together_run = together(fixes, source, a.out / "together", pytest_args, a.workers)
    else:
        for f, s in zip(fixes, standings):
            if s.state != "applies":
                continue
            if a.action == "check":
                checks[f.name] = verify(f, source, a.out / f.name, [*MATRIX, *pytest_args], full=a.full,
                                        workers=a.workers)
                print(f"rvvdiff fixes: {f.name}: {checks[f.name]['result']}", flush=True)
            if not a.no_cost and checks.get(f.name, {}).get("result") != "failed":
                try:
                    # -k selects tests for check's gate, cost cases only for the cost action
                    costs[f.name] = cost(f, source, a.out / f.name, a.workers, vlens, isas,
                                         k if a.action == "cost" else None)
                except (RvvdiffError, OSError, KeyError, ValueError) as e:  # the cost is lost, not the verdict
                    cost_errors[f.name] = str(e)
                    print(f"rvvdiff fixes: {f.name}: the cost could not be measured: {e}", file=sys.stderr)
                    continue
                for m in costs[f.name]["costlier_where_right"]:
                    print(f"rvvdiff fixes: {f.name}: costlier than the replaced code where it was right: {m}")
    md = summary_md(source, standings, checks, costs, together_run, argv)
    md += "".join(f"\nThe cost of {n} could not be measured: {e}\n" for n, e in cost_errors.items())
    (a.out / "summary.md").write_text(md)
    (a.out / "fixes.json").write_text(json.dumps({"tree": source.describe(), "standings": [s.__dict__ for s in standings],
                                                  "checks": checks, "cost": costs, "cost_errors": cost_errors,
                                                  "together": together_run},
                                                 indent=1, default=str))
    print("\n" + md)
    results = [c["result"] for c in checks.values()] + ([together_run["result"]] if together_run else [])
    if "failed" in results:
        return 1
    if "inconclusive" in results or cost_errors or any(s.state == "conflict" for s in standings):
        return 3
    return 0


def cost_selection(pytest_args: list[str]) -> tuple[tuple[int, ...], tuple[str, ...], str | None]:
    """The VLENs (Spike's: 128 to 4096), ISA builds and cost cases (``-k``) the cost step measures:
    every one, or what ``--vlen`` / ``--isa`` / ``-k`` among the pytest options select."""
    p = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    p.add_argument("--vlen", type=selection_type("--vlen", SPIKE_VLENS, "VLENs Spike runs", argparse.ArgumentTypeError),
                   default=SPIKE_VLENS)
    p.add_argument("--isa", type=selection_type("--isa", tuple(ISA_BUILDS), "ISA builds", argparse.ArgumentTypeError),
                   default=tuple(ISA_BUILDS))
    p.add_argument("-k", default=None)
    known_args, _ = p.parse_known_args(pytest_args)
    return tuple(known_args.vlen), tuple(known_args.isa), known_args.k


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

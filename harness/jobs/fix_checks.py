"""A fix's verification, and all fixes together (``rvvdiff fixes check``; harness/commands/fixes.py says
what the command promises).

:func:`verify`: the PR gate (harness/jobs/gate_runs.py) with BASE = the tree and HEAD = the tree plus the
patch; the fix is *verified* when the gate blocks nothing, the finding's tests ran, none fails on HEAD
and at least one is named fixed, and the finding's known-failure entries apply to BASE and no longer to
HEAD.  :func:`together`: every fix that applies, applied together; the whole suite with the known
failures applied must pass with no expected failure left and no entry applying.  :func:`run` is the
command after its options are parsed: the standings, the checks and each fix's cost
(harness/jobs/fix_cost_runs.py), the report (harness/report/fix_summary.py) and ``fixes.json``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from harness.core.errors import RvvdiffError
from harness.core.matrix import WHOLE, Matrix, vlens_on
from harness.core.proc import own_session_env
from harness.core.runner import read_results, run_suite
from harness.ggml import known, patches
from harness.ggml.fix_catalogue import Fix, select, standing
from harness.ggml.source import GgmlSource
from harness.jobs import gate_runs
from harness.jobs.fix_cost_runs import cost
from harness.report import gate_verdict
from harness.report.fix_summary import summary_md
from harness.report.gate_summary import write as write_gate


def verify(fix: Fix, source: GgmlSource, out: Path, given: Matrix, pytest_args: list[str], *, full: bool,
           workers: str, compiler: str = "") -> dict[str, Any]:
    """One fix judged by the gate over the main job's matrix, narrowed by the axes ``given``.  The fixes of
    the header's ``check-with`` are applied to both trees: BASE is the tree with them, HEAD adds the fix."""
    before = select(fix.check_with) if fix.check_with else []
    base = patches.apply(before, source, "fix") if before else source
    patched = patches.apply([*before, fix], source, "fix")
    with_ = f" (both with {', '.join(fix.check_with)})" if before else ""
    v = gate_runs.gate(patched.root, str(base.root), f"the tree without {fix.name}{with_}", out, given, pytest_args,
                       compiler=compiler, changed_only=not full, also=tuple(fix.tests), workers=workers)
    write_gate(v, out)
    ran = {n: r for n, r in (read_results(out / "head") or {}).items()  # the finding's tests that ran to a verdict
           if fix.is_finding_test(n) and gate_verdict.state(r) in ("pass", "fail")}
    failing = sorted(n for n, r in ran.items() if gate_verdict.state(r) == "fail")
    fixed = [ln.nodeid for ln in v.of("fixed")]
    named = [n for n in fixed if fix.is_finding_test(n)]
    entries_base = {e.number: e.judge(base).applies for e in fix.entries}
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
            "changes": [c["name"] for c in v.changes], "seconds": v.seconds, "with": fix.check_with,
            "runs": {k: {"tests": r["tests"], "ran": len(r["ran"]), "seconds": r["seconds"]} for k, r in v.runs.items()},
            "summary": str(out / "gate" / "summary.md")}


def combined(fixes: list[Fix], source: GgmlSource) -> tuple[GgmlSource, list[Fix], list[Fix]]:
    """The tree with every fix that applies to ``source`` applied, those fixes, and those left out."""
    ok = [f for f in fixes if patches.applies(f, source)[0] == "applies"]
    return patches.apply(ok, source, "fix", name="all"), ok, [f for f in fixes if f not in ok]


def together(fixes: list[Fix], source: GgmlSource, out: Path, given: Matrix, pytest_args: list[str],
             workers: str) -> dict[str, Any]:
    """Every applicable fix at once; the whole suite (the main job's matrix, narrowed by the axes ``given``)
    with the known failures applied."""
    tree, ok, left = combined(fixes, source)
    applying = [v for v in known.judge(known.load(), tree) if v.applies]
    out.mkdir(parents=True, exist_ok=True)
    selection = WHOLE.merged(given).merged(Matrix(tree=str(tree.root)))
    run = run_suite(["cases", "-p", "no:cacheprovider", *pytest_args, *selection.pytest_args(),
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


def run(action: str, fixes: list[Fix], source: GgmlSource, out: Path, given: Matrix, pytest_args: list[str], *,
        full: bool, no_cost: bool, all_together: bool, workers: str, k: str | None, argv: list[str],
        compiler: str = "") -> int:
    """``rvvdiff fixes ACTION`` once its options are parsed (harness/commands/fixes.py says what each action
    does and what the exit status means): where each fix stands on ``source``, then (``check``, ``cost``) each
    applicable fix verified and measured, or (``all_together``) every fix at once; ``summary.md`` and
    ``fixes.json`` in ``out``; the exit status.  ``given``: the axes of the matrix the command was given (the
    cost step measures its VLENs, every one Spike runs by default, and ISA builds); ``compiler``: the compiler
    of the tests when it names none."""
    standings = [standing(f, source) for f in fixes]
    for s in standings:
        print(s.describe())
        for e in s.entries:
            print(f"    entry {e}")
    if action == "list":
        return 0
    out.mkdir(parents=True, exist_ok=True)
    checks: dict[str, dict[str, Any]] = {}
    costs: dict[str, dict[str, Any]] = {}
    cost_errors: dict[str, str] = {}
    together_run = None
    if all_together:
        together_run = together(fixes, source, out / "together", given, pytest_args, workers)
    else:
        for f, s in zip(fixes, standings):
            if s.state != "applies":
                continue
            if action == "check":
                checks[f.name] = verify(f, source, out / f.name, given, pytest_args, full=full, workers=workers,
                                        compiler=compiler)
                print(f"rvvdiff fixes: {f.name}: {checks[f.name]['result']}", flush=True)
            if not no_cost and checks.get(f.name, {}).get("result") != "failed":
                try:
                    # -k selects tests for check's gate, cost cases only for the cost action
                    costs[f.name] = cost(f, source, out / f.name, workers, vlens=vlens_on("spike", given.vlens),
                                         isas=given.isa_builds, k=k if action == "cost" else None)
                except (RvvdiffError, OSError, KeyError, ValueError) as e:  # the cost is lost, not the verdict
                    cost_errors[f.name] = str(e)
                    print(f"rvvdiff fixes: {f.name}: the cost could not be measured: {e}", file=sys.stderr)
                    continue
                for m in costs[f.name]["costlier_where_right"]:
                    print(f"rvvdiff fixes: {f.name}: costlier than the replaced code where it was right: {m}")
    md = summary_md(source, standings, checks, costs, together_run, argv)
    md += "".join(f"\nThe cost of {n} could not be measured: {e}\n" for n, e in cost_errors.items())
    (out / "summary.md").write_text(md)
    (out / "fixes.json").write_text(json.dumps({"tree": source.describe(), "standings": [s.__dict__ for s in standings],
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

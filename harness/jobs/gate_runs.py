"""The PR gate's runs and verdict (``rvvdiff gate HEAD --base BASE``, harness/commands/gate.py): did this
change make the RVV kernels worse?

The gate tests two trees with the same suite and judges HEAD against BASE (a directory, a revision
of HEAD's checkout or its merge-base with the branch it targets: harness/ggml/gitrev.py,
``resolve_base``):

1. **The diff** (harness/ggml/changes.py): the functions and macros that differ between BASE and
   HEAD as the ISA builds compile them, and the files the reader does not follow.
2. **HEAD** runs the suite (``--known-failures ignore``: raw outcomes) with ``--changes``: each
   test that owns a changed function (harness/ggml/changes.py: reaches it from its own entry points,
   not through another tested kernel) runs at the thorough budget, the other tests at the
   default (``--changed-only``: only the tests that reach a change).  Its failing examples land in an example database.
3. **BASE** runs every test that failed on HEAD in replay mode (the same shrunk examples from a
   copy of HEAD's database, and the fixed cases; nothing new is drawn), and every test that
   owns a change at the default budget (HEAD's failing examples first, then new draws: what
   BASE got wrong that HEAD gets right).  The tests that only reach a change through another
   kernel are not rerun on BASE: a fix shows in the tests of the kernel it fixes.
4. **HEAD again**, in replay mode, for the tests that failed on BASE and passed on HEAD: BASE's
   shrunk example is tried on HEAD before a fix is called a fix.

Each result lands in one list (harness/report/gate_verdict.py): a **regression** or a **new kernel
failing** blocks; a **pre-existing** failure (with the known-failures entry that lists it) and a
**fixed** one (with the entry to remove) are reported.

**Cost** (after the three runs; ``--no-cost`` skips it): the cost cases (costs/) the change reaches
are measured under Spike on HEAD and on BASE (harness/jobs/gate_cost_step.py: ``rvvdiff cost``'s runner
with ``--changes`` and ``--changed-only`` and the gate's own diff; a case whose code did not change is
not measured), at the gate's ``--vlen`` / ``--isa`` (``gate_cost_step.cost_targets``; without them every
Spike VLEN, ISA build zvfh), with each of its compilers.  A case whose instructions per call moved
beyond ``--cost-threshold`` (2 %) is listed **slower** or **faster**; a case measured on HEAD only (a
new kernel) is named, not compared.  Slower cases block only with ``--block-slower PCT`` (beyond
PCT).  Without Spike, or when a tree's cost run measures none of the cases it has (a run that did not
complete, a build that failed, every case failing), the summary says why in one line and the step is
incomplete: the gate exits 3 unless something blocks (``--no-cost`` skips the step).  A change no
cost case reaches is not measured and passes.

A changed RVV function or macro that no collected test reaches, or whose selected tests all
ended without a verdict on HEAD (skipped, or their ISA build failed), is an **uncovered change**
and blocks too (``--allow-uncovered NAME`` accepts one, for a change a reviewer judged harmless).
The exit status is 1 exactly when something blocks (with ``--block-slower``, a slower cost case
too); else 3 when the cost step is incomplete, 0 otherwise; 2 when the gate could not judge (bad
arguments, a correctness run that did not complete).  ``<out>/gate/summary.md`` (appended to
``$GITHUB_STEP_SUMMARY``), ``summary.html`` and ``gate.json`` (harness/report/gate_summary.py) lead
with the lists (the cost lists among them); each run's own reports are in ``<out>/head``,
``<out>/base`` and ``<out>/head-replay``, the cost step's in ``<out>/gate/cost``.

A failure found on both trees with different shrunk inputs is judged by HEAD's example: if it
fails on BASE the failure is pre-existing, even when HEAD also fails elsewhere for a new reason
that the same test's minimal example does not show (Hypothesis reports one failure per test).
"""


from __future__ import annotations

import fnmatch
import json
import shutil
import time
from pathlib import Path
from typing import Any

from harness.core.config import PROJECT_ROOT
from harness.core.errors import RvvdiffError
from harness.core.matrix import DEFAULT_EMULATOR, WHOLE, Matrix
from harness.core.proc import own_session_env
from harness.core.runner import run_suite
from harness.ggml import changes, known
from harness.ggml.source import GgmlSource, resolve
from harness.jobs import gate_cost_step
from harness.report import coverage, linegate
from harness.report.gate_summary import COST_ROWS
from harness.report.gate_verdict import GateVerdict, Run, classify, state, untested

ROOT = PROJECT_ROOT


class GateError(RvvdiffError, RuntimeError):
    """The gate cannot judge: the message says why and what to do."""


def _workers(args: list[str]) -> str | None:
    """The value of the last ``-n`` / ``--numprocesses`` in the runs' pytest options (``-n 2``, ``-n2``,
    ``--numprocesses=2``): the cost step's workers too."""
    value = None
    for i, a in enumerate(args):
        if a in ("-n", "--numprocesses") and i + 1 < len(args):
            value = args[i + 1]
        elif a.startswith("--numprocesses="):
            value = a.split("=", 1)[1]
        elif a.startswith("-n") and not a.startswith("--") and len(a) > 2:
            value = a[2:].lstrip("=")
    return value


def _pytest(run: Run, extra: list[str], selection: Matrix, pytest_args: list[str], workers: str) -> Run:
    """Run the suite on ``run``'s tree at the targets of ``selection``; stream its output; read its results."""
    args = ["cases", "-p", "no:cacheprovider", *pytest_args, *selection.merged(Matrix(tree=run.tree)).pytest_args(),
            "--known-failures", "ignore", "--example-db", str(run.db), "--junitxml", str(run.report_dir / "junit.xml"),
            *extra]
    if workers != "0" and not any(x in ("-n", "--numprocesses") or x.startswith(("-n", "--numprocesses="))
                                  for x in pytest_args):
        args += ["-n", workers]
    done = run_suite(args, report_dir=run.report_dir, env=own_session_env(), clean=True,
                     echo=f"\n=== rvvdiff gate: {run.name} ({run.tree})")
    run.exit, run.seconds = done.exit, done.seconds
    if run.exit not in (0, 1, 5):  # 5: nothing collected (a plan whose tests this selection lacks)
        raise GateError(f"the {run.name} run did not complete (pytest exit status {run.exit}); its output is above")
    run.results = done.results
    return run


def gate(head_dir: Path, base_dir: str, base_how: str, out: Path, given: Matrix, pytest_args: list[str], *,
         compiler: str = "", changed_only: bool = False, allow_uncovered: tuple[str, ...] = (),
         also: tuple[str, ...] = (), workers: str = "auto", cost: dict[str, Any] | None = None,
         line_coverage: str = "") -> GateVerdict:
    """The three runs, the cost step and the verdict.  ``given``: the axes of the matrix the gate was
    given (the others: the main job's, every VLEN, ISA build and stress mode); ``compiler``: the compiler
    of the runs' tests when ``given`` names none (the setting's); ``pytest_args``: the other options of
    the runs.  ``also``: node-id globs that run on HEAD whatever they reach and on BASE whenever they ran
    on HEAD (a finding's tests, when a fix is judged).  ``cost``: ``gate_cost_step.measure_cost``'s options
    (``vlens``, ``isas``, ``threshold``, ``block_slower``, ``compilers``); None skips the step."""
    head_src, base_src = resolve(str(head_dir)), resolve(base_dir)
    selection = WHOLE.merged(given)
    names = selection.compiler_names or (compiler,)
    on = {"compiler": names[0] if len(names) == 1 else "", "emulator": selection.emulator or DEFAULT_EMULATOR}
    g = out / "gate"
    if g.exists():
        shutil.rmtree(g)
    g.mkdir(parents=True)
    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    diff = changes.diff(base_src, head_src)
    seconds["diff"] = time.perf_counter() - t0
    (g / "changes.json").write_text(json.dumps(diff.to_json(), indent=1))
    print(f"rvvdiff gate: HEAD {head_src.describe()}\n              BASE {base_src.describe()} ({base_how})\n"
          f"  {len(diff.changes)} changed functions / macros ({sum(c.rvv for c in diff.changes)} with an RVV path) "
          f"in {seconds['diff']:.1f} s", flush=True)
    for c in diff.changes:
        print(f"    {c.describe()}")

    head = _pytest(Run("head", str(head_src.root), out / "head", g / "db-head", **on),
                   ["--changes", str(g / "changes.json"), *(["--changed-only"] if changed_only else []),
                    *(x for a in also for x in ("--also-run", a)), *(["--rvv-coverage"] if line_coverage else [])],
                   selection, pytest_args, workers)
    seconds["head"] = head.seconds
    cov_path = head.report_dir / "covers.json"
    cov = json.loads(cov_path.read_text()) if cov_path.is_file() else {"covers": {}, "uncovered": [], "changes": []}

    plan = {n: "replay" for n, r in head.results.items() if state(r) == "fail"}
    named = [n for n in head.results if any(fnmatch.fnmatchcase(n, a) for a in also)]
    for n in [*cov.get("owns", {}), *named]:
        if n in head.results and state(head.results[n]) in ("pass", "fail"):
            plan[n] = "default"  # HEAD's saved examples replay first (the reuse phase)
    def planned(name: str, tree: str, tests: dict[str, str], db_from: str) -> Run:
        """Run ``tests`` (id -> budget) on ``tree`` with a copy of run ``db_from``'s example database."""
        (g / f"plan-{name}.json").write_text(json.dumps({"tests": tests}, indent=1))
        if (g / f"db-{db_from}").is_dir():
            shutil.copytree(g / f"db-{db_from}", g / f"db-{name}")
        r = _pytest(Run(name, tree, out / name, g / f"db-{name}", **on), ["--plan", str(g / f"plan-{name}.json")],
                    selection, pytest_args, workers)
        seconds[name] = r.seconds
        return r

    base = again = None
    if plan:
        base = planned("base", str(base_src.root), plan, "head")
        back = {n: "replay" for n, r in base.results.items()
                if state(r) == "fail" and state(head.results.get(n)) == "pass"}
        if back:
            again = planned("head-replay", str(head_src.root), back, "base")

    lists = None
    if cost is not None:
        print(f"\n=== rvvdiff gate: cost (Spike), HEAD and BASE, the cost cases the change reaches: VLEN "
              f"{','.join(map(str, cost['vlens']))}, ISA build {','.join(cost['isas'])}", flush=True)
        t_cost = time.perf_counter()
        cost_workers = _workers(pytest_args) or workers
        lists = gate_cost_step.measure_cost(str(head_src.root), str(base_src.root), g, workers=cost_workers, **cost)
        seconds["cost"] = time.perf_counter() - t_cost
        print(f"rvvdiff gate: {lists.headline()} ({seconds['cost']:.0f} s)", flush=True)
        if lists.incomplete:
            print(f"rvvdiff gate: cost step incomplete: {lists.incomplete}", flush=True)
        for m in lists.slower[:COST_ROWS]:
            print(f"    slower{' (blocks)' if m in lists.blocking else ''}: {m.describe()}")
        for m in lists.faster[:COST_ROWS]:
            print(f"    faster: {m.describe()}")

    entries = known.load()
    verdicts_head, verdicts_base = known.judge(entries, head_src), known.judge(entries, base_src)
    lines = classify(head, base, again, [x.entry for x in verdicts_head if x.applies],
                     [x.entry for x in verdicts_base if x.applies])
    uncovered = [n for n in cov.get("uncovered", []) if n not in allow_uncovered]
    uncovered += [n for n in untested(cov, head.results) if n not in allow_uncovered and n not in uncovered]
    line_extra: dict[str, Any] = {}
    if line_coverage:
        line_extra = judge_lines(base_src, head_src, head.report_dir / "coverage", allow_uncovered,
                                 defer=line_coverage == "defer")
    seconds["total"] = time.perf_counter() - t0
    runs = {r.name: {"tree": r.tree, "report_dir": str(r.report_dir), "seconds": r.seconds, "exit": r.exit,
                     "tests": len(r.results),
                     "ran": sorted(n for n, x in r.results.items() if x["outcome"] in ("passed", "failed"))}
            for r in (head, base, again) if r}
    return GateVerdict(head_src.describe(), f"{base_src.describe()} ({base_how})", lines, cov.get("changes", []),
                       cov.get("covers", {}), cov.get("owns", {}), uncovered,
                       [n for n in cov.get("uncovered", []) if n in allow_uncovered],
                       diff.outside, diff.notes, seconds, runs, lists, **line_extra)


def judge_lines(base: GgmlSource, head: GgmlSource, cov_dir: Path, allowed: tuple[str, ...],
                defer: bool = False) -> dict[str, Any]:
    """--lines: HEAD's changed in-scope lines against the coverage of HEAD's run (harness/report/linegate.py);
    ``defer`` (a shard of a CI matrix): recorded in ``gate-lines.json`` for the merge over shards, not blocking."""
    changed = linegate.changed_lines(base, head)
    if not (cov_dir / "targets.json").is_file():
        why = "" if not changed else (f"the HEAD run wrote no line coverage ({cov_dir}/targets.json is missing; see "
                                      "its report's coverage problems): the changed lines could not be judged")
        return {"line_counts": {"changed": sum(map(len, changed.values()))}, "line_problem": why}
    lv = linegate.judge(changed, coverage.load(cov_dir))
    (cov_dir / "gate-lines.json").write_text(json.dumps(lv.as_json(), indent=1))
    if defer:
        return {"line_counts": {**lv.counts(), "judged over the shards (linegate merge)": 1}}
    return {"uncovered_lines": lv.describe(allowed), "line_counts": lv.counts()}

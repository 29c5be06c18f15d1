"""Per-test budgets and selections: what the PR gate (harness/jobs/gate_runs.py) asks of one pytest run.

Three budgets, each a Hypothesis profile sharing one example database:

* ``default`` - ``--max-examples`` (25);
* ``thorough`` - the nightly budget (200, or ``--max-examples`` when larger), for the tests that
  cover a changed function;
* ``replay`` - no generation and no shrinking: the explicit and fixed cases, then the failing
  examples saved in the database (``--example-db``) by an earlier run, on whatever tree this run
  tests.  Test ids do not name the tree, so a failure found on one tree replays on another.

Two ways to choose them:

* ``--changes FILE`` (a diff written by ``rvvdiff gate`` / :mod:`harness.ggml.changes`): each test
  that owns a changed function or macro (reaches it from its own entry points, not through
  another tested kernel) runs thorough; the other tests that reach a change, and the rest, at
  the default; with ``--changed-only`` the tests that reach no change do not run, except those
  ``--also-run GLOB`` names (thorough: a finding's tests when a fix is verified).  What each test
  reaches and owns, and the changed RVV code no collected test reaches, go to
  ``<report-dir>/covers.json``.
* ``--plan FILE``: ``{"tests": {node id: budget}}``; only those tests run.
"""

from __future__ import annotations

import fnmatch
import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import Phase, settings
from hypothesis.database import DirectoryBasedExampleDatabase

from harness.core.matrix import split_compiler
from harness.ggml.changes import Diff, Reach
from harness.plugin.options import report_dir

BUDGETS = ("default", "thorough", "replay")
#: The budget --plan or --changes gave a collected test (none: ``default``).
BUDGET = pytest.StashKey[str]()


def register_profiles(n_default: int, n_thorough: int, database_dir: str | None, **common: Any) -> None:
    if database_dir:
        common["database"] = DirectoryBasedExampleDatabase(database_dir)
    settings.register_profile("rvvdiff", max_examples=n_default, **common)
    settings.register_profile("rvvdiff-default", max_examples=n_default, **common)
    settings.register_profile("rvvdiff-thorough", max_examples=max(n_thorough, n_default), **common)
    settings.register_profile("rvvdiff-replay", max_examples=n_default, phases=(Phase.explicit, Phase.reuse), **common)


def use(item: pytest.Item) -> None:
    """Load the item's budget as Hypothesis's default settings (before the test runs)."""
    budget = item.stash.get(BUDGET, "default")
    if item.config.getoption("hypothesis_profile", None):
        return
    settings.load_profile(f"rvvdiff-{budget}")
    inner = getattr(getattr(getattr(item, "obj", None), "hypothesis", None), "inner_test", None)
    if inner is not None:  # a module-level @given test took its settings when it was decorated
        inner._hypothesis_internal_use_settings = settings.default


def done(item: pytest.Item) -> None:
    if not item.config.getoption("hypothesis_profile", None):
        settings.load_profile("rvvdiff")


def _load_json(path: str, option: str) -> Any:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise pytest.UsageError(f"{option} {path}: cannot read it ({e})") from None


def select(config: pytest.Config, items: list[pytest.Item], requirements, entry_points, source) -> None:
    """Apply ``--plan`` or ``--changes`` to the collected items (before ``-k`` narrows them)."""
    plan_path, changes_path = config.getoption("plan"), config.getoption("changes")
    if plan_path and changes_path:
        raise pytest.UsageError("--plan and --changes do not go together (a plan already names each test's budget)")
    if plan_path:
        plan = _load_json(plan_path, "--plan").get("tests", {})
        bad = {b for b in plan.values() if b not in BUDGETS}
        if bad:
            raise pytest.UsageError(f"--plan {plan_path}: unknown budget(s) {', '.join(sorted(bad))}; use {', '.join(BUDGETS)}")
        keep, drop = [], []
        for it in items:
            (keep if it.nodeid in plan else drop).append(it)
            it.stash[BUDGET] = plan.get(it.nodeid, "default")
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep
        return
    if not changes_path:
        if config.getoption("changed_only"):
            raise pytest.UsageError("--changed-only needs --changes FILE (rvvdiff gate writes it)")
        return
    diff = Diff.from_json(_load_json(changes_path, "--changes"))
    reach = Reach(source)
    changed = diff.names
    differential = [it for it in items if "target" in getattr(it, "fixturenames", ())]
    kernels = {n for it in differential for n in reach.roots(entry_points(it))}
    covers: dict[str, list[str]] = {}
    owns: dict[str, list[str]] = {}
    also = config.getoption("also_run")
    keep, drop = [], []
    for it in items:
        if "target" not in getattr(it, "fixturenames", ()):
            keep.append(it)  # the coverage scans and the like: always run
            continue
        hit = reach.covers(requirements(it), changed)
        own = reach.owns(entry_points(it), kernels - set(reach.roots(entry_points(it))), changed) if hit else []
        covers[it.nodeid], owns[it.nodeid] = hit, own
        named = any(fnmatch.fnmatchcase(split_compiler(it.nodeid)[0], g) for g in also)  # as known globs match
        it.stash[BUDGET] = "thorough" if own or named else "default"
        (keep if hit or named or not config.getoption("changed_only") else drop).append(it)
    reached = {n for hit in covers.values() for n in hit}
    out = {"covers": {k: v for k, v in covers.items() if v},
           "owns": {k: v for k, v in owns.items() if v},
           "changes": [{**c.__dict__, "builds": list(c.builds), "tests": sum(c.name in v for v in covers.values()),
                        "owners": sum(c.name in v for v in owns.values())} for c in diff.changes],
           "uncovered": [c.name for c in diff.changes if c.rvv and c.kind != "removed" and c.name not in reached],
           "collected": len(covers)}
    d = report_dir(config)
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / f".covers.{os.getpid()}.json"
    tmp.write_text(json.dumps(out, indent=1))
    os.replace(tmp, d / "covers.json")  # every xdist worker collects the same items: same content
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep

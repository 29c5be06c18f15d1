"""``rvvdiff other-arch``: the series' regression tests off RISC-V, on x86-64 (natively) and aarch64 (under
qemu-aarch64), before and after the fixes.

The command line; the builds and runs are harness/upstream/other_arch.py (docs/ggml-tests.md).  Prints one line
per architecture and side; ``--record`` also records them in docs/upstream/series/test-runs.json.  Exit status 1
when a run fails.
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
    a = p.parse_args(argv)
    every = fix_series.load(fix_catalogue.catalogue())
    runs = [other_arch.run(arch, every, fixed, a.work) for arch in (a.arch or other_arch.ARCHS) for fixed in (False, True)]
    lines = other_arch.record_lines(runs)
    print("\n".join(lines))
    if a.record:
        other_arch.record(every, runs, lines)
    return 0 if all(r.passed for r in runs) else 1

"""``rvvdiff bench``: where the suite's time goes, per representative kernel and VLEN.

The command line of the bench; the tests it runs, what the bench log records and what is derived from it
is harness/jobs/bench_runs.py.  Writes ``bench.json`` and ``bench.md`` in ``--out`` and prints the latter.
Exit status: 0; 2 when no test matches the selection; the suite's own when it did not run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.core.config import work_dir
from harness.core.matrix import Matrix, add_options
from harness.jobs import bench_runs


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="rvvdiff bench", description=__doc__.split("\n\n")[0])
    add_options(p, "vlens", "isas", "compilers", "tree", unset=True, defaults={"isas": ("zvfh",)})
    p.add_argument("--max-examples", type=int, default=50)
    p.add_argument("--select", action="append", help="node id prefix (repeatable; default: one test per family)")
    p.add_argument("--out", type=Path, default=work_dir() / "reports" / "bench")
    a = p.parse_args(argv)
    chosen = Matrix.of(a)
    ids = bench_runs.tests(chosen, a.select)
    if not ids:
        print("rvvdiff bench: no test matches the selection", file=sys.stderr)
        return 2
    cp, md = bench_runs.run(ids, chosen, a.max_examples, a.out)
    if md is None:
        print(cp.stdout[-3000:], cp.stderr[-3000:], file=sys.stderr)
        return cp.exit
    print(md)
    return 0

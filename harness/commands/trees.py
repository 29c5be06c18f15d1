"""``rvvdiff trees``: the differential suite on several ggml trees, and one table of the outcomes.

For each tree (a path, or ``llama-cpp-python==X``): every ISA build is built (or reported as not
expressible for the tree, or failed, with the reason), then ``pytest cases --ggml-src TREE --vlen
all --isa all`` runs with its own report directory, and its ``results.json`` is counted: passed,
failed (and errors), known failures (xfailed), skipped as "not in this tree", other skips (each
distinct reason listed), and the time.  The table is what docs/trees.md records.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.core.config import work_dir
from harness.core.matrix import add_options
from harness.jobs.tree_runs import render, run_tree


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="rvvdiff trees", description=__doc__.split("\n\n")[0])
    p.add_argument("trees", nargs="+", help="ggml / llama.cpp checkouts, or llama-cpp-python==VERSION; "
                   "extra pytest arguments follow a -- (e.g. -- -n 2)")
    p.add_argument("--report-dir", type=Path, default=work_dir() / "reports" / "trees")
    p.add_argument("--out", type=Path, help="also write the table to this file")
    add_options(p, "compilers", unset=True)
    argv = sys.argv[1:] if argv is None else argv
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    a = p.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    a.report_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for t in a.trees:
        print(f"rvvdiff trees: {t} ...", file=sys.stderr, flush=True)
        rows.append(run_tree(t, a.report_dir, extra, a.cc))
        print(render(rows[-1:]), file=sys.stderr, flush=True)
    table = render(rows)
    print(table)
    if a.out:
        a.out.write_text(table + "\n")
    return 1 if any(r.counts["failed"] + r.counts["error"] + r.counts["xpassed"] for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""``rvvdiff spike-check``: every known failure (finding) re-checked on Spike, with a verdict.

The command line of the check; how each entry fails on QEMU, runs and replays on Spike and gets its verdict is
harness/jobs/spike_checks.py.  Prints each entry's verdict as its check ends, then the table (written with
``--out`` too) that docs/findings.md carries.  Exit status: 1 when an entry is not reproduced on Spike
(suspect the emulator), else 0.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.core.matrix import add_options
from harness.jobs import spike_checks


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="rvvdiff spike-check", description=__doc__.split("\n\n")[0])
    p.add_argument("entries", nargs="*", type=int, help="entry numbers (default: every entry)")
    p.add_argument("--tree", action="append", default=[], metavar="LABEL=PATH",
                   help="where the tree a reproducer names as <ggml tree of LABEL> is (repeatable)")
    p.add_argument("--max-examples", type=int, default=25, help="Hypothesis examples of each QEMU run (25)")
    p.add_argument("--out", type=Path, help="also write the table (markdown) here")
    add_options(p, "compilers", one=True, prefix="the compiler whose builds are checked: ",
                default_words={"compilers": "RVVDIFF_COMPILER, else clang"})
    a = p.parse_args(argv)
    trees = dict(t.split("=", 1) for t in a.tree)
    rows = []
    for row in spike_checks.check_all(spike_checks.entries(a.entries), trees, a.max_examples, a.cc or ""):
        rows.append(row)
        print(spike_checks.row_text(row), flush=True)
    lines = spike_checks.table(rows)
    if a.out:
        a.out.write_text("\n".join(lines) + "\n")
    print("\n".join(["", *lines]))
    return 1 if spike_checks.suspects(rows) else 0

"""`rvvdiff repro`: replay a failure report, optionally as a standalone C reproducer.

The command line of the replay; where a report replays, how its call is judged on each emulator and how the
reproducers are written is harness/jobs/repro_runs.py.  Exit status: 1 while the call fails, 0 when it
passes, 2 when it could not be replayed.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.core.matrix import add_options, one_values
from harness.jobs import repro_runs


def main_repro(argv: list[str]) -> int:
    """``rvvdiff repro``: replay a failure report outside pytest."""
    p = argparse.ArgumentParser(prog="rvvdiff repro", description=main_repro.__doc__)
    p.add_argument("report", type=Path, help="a directory under <report-dir>/cases/ (or its case.json)")
    # Each replays at another target than the recorded one: spike replays on both emulators and prints them side by
    # side with a verdict; a board (native, ssh:HOST[:DIR]) replays at its own VLEN under its own tail/mask policy.
    add_options(p, "tree", "vlens", "isas", "compilers", "emulator", one=True, prefix="replay at another target: ",
                default_words=dict.fromkeys(("tree", "vlens", "isas", "compilers", "emulator"), "the recorded one"))
    p.add_argument("--c", action="store_true", help="also write and print the standalone C++ reproducer (and, for a "
                   "vec_dot that ggml's API reaches, a ggml-only C program for an upstream report)")
    a = p.parse_args(argv)
    try:
        t = repro_runs.target(a.report.resolve(), a.ggml_src, one_values(a))
    except repro_runs.ReproError as e:
        print(f"rvvdiff repro: {e}")
        return 2
    print(t.heading())
    done = repro_runs.replay(t)
    for line in done.lines:
        print(line)
    if done.failing is None:
        return 2
    if a.c:
        for line in repro_runs.reproducers(t, done.argv):
            print(line)
    print(repro_runs.closing(t, done.failing))
    return 1 if done.failing else 0

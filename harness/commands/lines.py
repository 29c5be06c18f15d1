"""``rvvdiff coverage``: the RVV line coverage of several runs as one, and ``rvvdiff linegate``: the gate's changed
lines judged over every shard.

The command lines; what a run records and how runs combine is harness/report/coverage.py (docs/coverage.md), the
gate's line verdict harness/report/linegate.py (docs/gate.md).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from harness.report import coverage, linegate


def main_coverage(argv: list[str]) -> int:
    """``merge OUT RUN...``: the coverage of several runs (their ``<report-dir>/coverage`` directories, e.g. one
    VLEN each) in one set of files and one matrix.  ``missed OUT RUN...``: the lines each target dispatches to
    and does not run (``OUT/missed.md``).  ``arms RUN... [--out FILE.md]``: the same narrowed to the arm of each
    ``switch (__riscv_vlenb() * 8)`` the target's VLEN dispatches to (printed, or written to FILE.md).
    Exit status 1 when a merge met problems, 2 when a run's targets.json cannot be read."""
    ap = argparse.ArgumentParser(prog="rvvdiff coverage", description=main_coverage.__doc__)
    ap.add_argument("action", choices=["merge", "missed", "arms"],
                    help="merge: one set of files from several runs; missed: the lines each target dispatches to "
                         "and does not run (missed.md in OUT); arms: those of the VLEN switch arms it dispatches to")
    ap.add_argument("paths", type=Path, nargs="+", metavar="OUT RUN", help="merge, missed: OUT RUN...; arms: RUN...")
    ap.add_argument("--out", type=Path, help="arms: write the report to this file (default: print it)")
    args = ap.parse_args(argv)
    if args.action == "arms":
        out, runs = args.out, args.paths
    elif len(args.paths) < 2 or args.out:
        ap.error(f"{args.action} takes OUT RUN... (no --out)")
    else:
        out, runs = args.paths[0], args.paths[1:]
    try:
        cov = coverage.combine(coverage.load(r) for r in runs)
    except (OSError, ValueError, KeyError) as e:
        print(f"coverage {args.action}: cannot read a run's targets.json: {e}", file=sys.stderr)
        return 2
    if args.action == "arms":
        md = "\n".join(["# Per arm: the lines each VLEN dispatches to", "", *coverage.arms_md(cov)]) + "\n"
        if out is None:
            print(md, end="")
        else:
            out.write_text(md)
            print(f"{len(coverage.missed(coverage.arms(cov)))} functions with in-arm lines not executed: {out}")
        return 0
    if args.action == "missed":
        out.mkdir(parents=True, exist_ok=True)
        md = ["# Lines dispatched to and not executed", "", *coverage.totals(cov), "", *coverage.missed_md(cov)]
        (out / "missed.md").write_text("\n".join(md) + "\n")
        print(f"{len(coverage.missed(cov))} functions with missed lines: {out / 'missed.md'}")
        return 0
    coverage.write(cov, out)
    for line in [*coverage.totals(cov), f"written: {out}/index.html, merged.info, coverage.md", *cov.problems]:
        print(line)
    return 1 if cov.problems else 0


def main_linegate(argv: list[str]) -> int:
    """``merge [--allow-uncovered NAMES] SHARD...``: the uncovered changed lines over every shard's
    ``gate-lines.json`` (a file, or a directory searched for it), printed and added to the CI job's summary
    (``GITHUB_STEP_SUMMARY``); exit status 1 when some remain, 2 when no shard recorded lines."""
    ap = argparse.ArgumentParser(prog="rvvdiff linegate", description=main_linegate.__doc__)
    ap.add_argument("action", choices=["merge"])
    ap.add_argument("shards", type=Path, nargs="+")
    ap.add_argument("--allow-uncovered", default="", metavar="NAMES",
                    help="functions (comma-separated) whose uncovered lines do not block")
    a = ap.parse_args(argv)
    v, shards = linegate.merge_shards(a.shards)
    if not shards:
        print("linegate merge: no gate-lines.json under " + ", ".join(map(str, a.shards))
              + " (did the shards run the gate with --lines-defer?)", file=sys.stderr)
        return 2
    allowed = tuple(x for x in a.allow_uncovered.split(",") if x)
    md = linegate.merged_summary(v, shards, allowed)
    print("\n".join(md))
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        with open(os.environ["GITHUB_STEP_SUMMARY"], "a") as f:
            f.write("\n".join(md) + "\n")
    return 1 if v.describe(allowed) else 0

"""``rvvdiff cost [--ggml-src HEAD] [--base BASE] [-k EXPR]``: what each kernel costs at every VLEN.

Runs the cost suite (costs/: fixed, seeded calls of every family at real-model sizes) under Spike on
HEAD (default: the pinned tree) and, with ``--base``, on BASE, every VLEN (128 to 4096) and ISA build
selected, with pytest-xdist (``-n``).  Writes ``cost.md``, ``cost.json`` and ``cost.html`` (a plot per
kernel: instructions per unit against VLEN, HEAD and BASE) to ``--out`` and prints the lists: the
cases slower / faster on HEAD than on BASE beyond ``--threshold``, the RVV kernels that get no
cheaper with a longer VLEN, those that cost more than their scalar twin, and the cases that could
not be measured (one line each).

``--changed-only`` (with ``--base``): only the cases whose code the change reaches (the gate's diff,
harness/ggml/changes.py) are measured, on both trees.

Exit status: 0 when both runs completed (cases that could not be measured are listed, one line per
reason: a kernel that traps under Spike, a build that fails, a tree without the kernel); 1 with
``--block-slower PCT`` when a case is slower than that; 2 when a run did not complete.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from harness.commands.runner import run_suite
from harness.core.config import ISA_BUILDS, SPIKE_VLENS, selection_type
from harness.core.errors import RvvdiffError
from harness.ggml import changes
from harness.ggml.source import resolve
from harness.report import cost as cost_report


class CostRunError(RvvdiffError):
    """A cost run that did not complete (pytest could not start or was killed)."""


def run_costs(tree: str | None, out: Path, name: str, args: argparse.Namespace,
              extra: list[str] = ()) -> tuple[dict[cost_report.Key, dict], dict[str, str], float]:
    """Measure the selected cases on ``tree``: (rows, unmeasured case -> reason, seconds)."""
    log = out / f"{name}.jsonl"
    log.unlink(missing_ok=True)
    argv = ["costs", "--emulator", "spike", "--vlen", ",".join(map(str, args.vlen)), "--isa", ",".join(args.isa),
            "--cost-log", str(log), "-n", str(args.workers), "-q", "--kernel-timeout", str(args.kernel_timeout),
            *(["--ggml-src", tree] if tree else []), *(["-k", args.k] if args.k else []), *extra]
    run = run_suite(argv, report_dir=out / f"{name}-report", output=out / f"{name}.log", clean=True,
                    echo=f"rvvdiff cost: measuring {name} ({tree or 'the pinned tree'})")
    if not run.has_results:
        raise CostRunError(f"the {name} run did not complete (exit {run.exit}); its log: {run.log}\n"
                           f"  command: {shlex.join(run.argv)}")
    return cost_report.read_rows(log), cost_report.unmeasured(run.results, f"{name}: "), run.seconds


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="rvvdiff cost", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ggml-src", default=None, metavar="HEAD", help="the tree to measure (default: the pinned tree)")
    p.add_argument("--base", default=None, metavar="BASE", help="a tree to compare HEAD with")
    p.add_argument("-k", default=None, metavar="EXPR", help="pytest -k over the case ids (e.g. 'q4_0 or repack')")
    p.add_argument("--vlen", type=selection_type("--vlen", SPIKE_VLENS, "VLENs Spike runs", argparse.ArgumentTypeError),
                   default=SPIKE_VLENS, metavar="LIST", help="'all' (default: 128 to 4096) or a comma list")
    p.add_argument("--isa", type=selection_type("--isa", tuple(ISA_BUILDS), "ISA builds", argparse.ArgumentTypeError),
                   default=tuple(ISA_BUILDS), metavar="LIST", help="'all' (default) or a comma list")
    p.add_argument("-n", dest="workers", default="auto", help="pytest-xdist workers (default: auto)")
    p.add_argument("--changed-only", action="store_true",
                   help="with --base: measure only the cases whose code differs between the trees")
    p.add_argument("--threshold", type=float, default=cost_report.THRESHOLD * 100, metavar="PCT",
                   help="HEAD / BASE change listed as slower or faster (default: 2)")
    p.add_argument("--block-slower", type=float, default=None, metavar="PCT",
                   help="exit 1 when a case is slower on HEAD than on BASE by more than PCT %%")
    p.add_argument("--kernel-timeout", type=float, default=120.0, metavar="SECONDS",
                   help="deadline of one measured call (times Spike's slowdown, 10; default: 120)")
    p.add_argument("--out", type=Path, default=Path("reports/cost"), metavar="DIR",
                   help="where cost.md, cost.json, cost.html and the runs' logs go (default: reports/cost)")
    args = p.parse_args(argv)
    if args.changed_only and not args.base:
        p.error("--changed-only compares two trees: give --base")
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    extra: list[str] = []
    if args.changed_only:
        diff = changes.diff(resolve(args.base), resolve(args.ggml_src))
        (out / "changes.json").write_text(json.dumps(diff.to_json(), indent=1))
        print(f"rvvdiff cost: {len(diff.changes)} changed functions / macros: "
              + ", ".join(c.describe() for c in diff.changes[:8]), flush=True)
        extra = ["--changes", str(out / "changes.json"), "--changed-only"]
    head, missing, seconds = run_costs(args.ggml_src, out, "head", args, extra)
    base: dict[cost_report.Key, dict] = {}
    if args.base:
        base, missing_base, base_s = run_costs(args.base, out, "base", args, extra)
        missing.update(missing_base)
        seconds += base_s
    table = cost_report.CostTable(head, base, missing, args.threshold / 100)
    md = table.markdown()
    (out / "cost.md").write_text(md)
    (out / "cost.json").write_text(json.dumps({**table.as_json(), "seconds": round(seconds, 1)}, indent=1))
    (out / "cost.html").write_text(table.html(md))
    slower, faster = table.moves()
    print(f"rvvdiff cost: {len(head)} measurements on HEAD" + (f", {len(base)} on BASE" if args.base else "")
          + f" in {seconds:.0f} s; {out / 'cost.md'}, cost.json, cost.html")
    if args.base:
        print(f"  slower: {len(slower)}, faster: {len(faster)} (beyond {args.threshold:g} %)")
        for m in slower[:20]:
            print(f"    slower: {m.describe()}")
        for m in faster[:20]:
            print(f"    faster: {m.describe()}")
    for line in cost_report.grouped(missing):
        print(f"  not measured: {line}")
    status = 0
    if args.block_slower is not None and any(m.ratio > 1 + args.block_slower / 100 for m in slower):
        print(f"rvvdiff cost: blocking: a case is slower by more than {args.block_slower:g} %", file=sys.stderr)
        status = 1
    return status

"""``rvvdiff cost [--ggml-src HEAD] [--base BASE] [-k EXPR]``: what each kernel costs at every VLEN.

Runs the cost suite (costs/: fixed, seeded calls of every family at real-model sizes) under Spike on
HEAD (default: the pinned tree) and, with ``--base``, on BASE, every VLEN (128 to 4096) and ISA build
selected, with pytest-xdist (``-n``).  Writes ``cost.md``, ``cost.json`` and ``cost.html`` (a plot per
kernel: instructions per unit against VLEN, HEAD and BASE) to ``--out`` and prints the lists: the
cases slower / faster on HEAD than on BASE beyond ``--threshold``, the RVV kernels that get no
cheaper with a longer VLEN, those that cost more than their scalar twin, and the cases that could
not be measured (one line each).

``--model SHAPE:TYPE:BATCH+BATCH[:check]`` adds the model-shaped cases (harness/cost/prices/per_token.py: one
transformer layer's mul_mats through ggml's graph on one thread, sliced, set-up cancelled) and prints
their estimated cycles per token, the BASE / HEAD tokens/s ratio and a ceiling rate at ``--clock-ghz``
x ``--threads`` (``model.md``); ``-k model`` measures only them.

``--changed-only`` (with ``--base``): only the cases whose code the change reaches (the gate's diff,
harness/ggml/changes.py) are measured, on both trees.

``--cc LIST`` (``all``, or a comma list of compiler names, ``NAME:ISA+ISA`` limiting one to those ISA
builds: harness/core/matrix.py; default: the ``RVVDIFF_COMPILER`` setting, else clang): the runs are made
once per compiler, each on that compiler's builds.  With more than one, ``cost.md`` leads with the
kernels where one compiler's code is more than ``--cc-gap`` % dearer than another's at some VLEN
(harness/cost/tables/compiler_gaps.py), then has each compiler's table (its HEAD / BASE lists are that
compiler's), and ``cost-<cc>.html`` is each compiler's page.

Before any run, what cannot be measured is one line: a ``--model`` TYPE the model-shaped case does not
take (a usage error) or a tree lacks, a ``-k`` (or ``--changed-only``) that selects no case (a collection
of the cost suite, nothing built).  After the runs, ``N of M selected cases measured`` (per tree), and
each reason a selected case was not measured, one line per reason with its count: a kernel that traps
under Spike, a build that fails, a tree without the kernel.

Exit status: 0 when every selected case was measured on every tree and none blocks; 1 with
``--block-slower PCT`` when a case is slower than that; 2 for a usage error, a selection that holds
nothing to measure, or a run that did not complete; 3 when nothing blocks but not every selected case
was measured (none, or fewer than selected: the reasons are listed).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.core.matrix import Matrix, add_options
from harness.cost.prices import per_token
from harness.jobs import board_cost_runs, cost_suite_runs

D = cost_suite_runs.Options()  # the defaults


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="rvvdiff cost", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    # HEAD (--ggml-src), the VLENs, ISA builds, compilers and the emulator: the axes of the matrix.
    add_options(p, "tree", "vlens", "isas", "compilers", "emulator", unset=True,
                default_words={"vlens": "every VLEN Spike runs, 128 to 4096",
                               "emulator": "spike: counted and estimated; native or ssh:HOST[:DIR]: measured on a board "
                                           "by its hardware counters, beside Spike's estimates for it (docs/board.md)"})
    p.add_argument("--base", default=None, metavar="BASE", help="a tree to compare HEAD with")
    p.add_argument("-k", default=None, metavar="EXPR", help="pytest -k over the case ids (e.g. 'q4_0 or repack')")
    p.add_argument("-n", dest="workers", default=D.workers, help="pytest-xdist workers (default: auto)")
    p.add_argument("--changed-only", action="store_true",
                   help="with --base: measure only the cases whose code differs between the trees")
    p.add_argument("--threshold", type=float, default=D.threshold, metavar="PCT",
                   help="HEAD / BASE change listed as slower or faster (default: 2)")
    p.add_argument("--block-slower", type=float, default=D.block_slower, metavar="PCT",
                   help="exit 1 when a case is slower on HEAD than on BASE by more than PCT %%")
    p.add_argument("--kernel-timeout", type=float, default=D.kernel_timeout, metavar="SECONDS",
                   help="deadline of one measured call (times Spike's slowdown, 10; default: 120)")
    p.add_argument("--out", type=Path, default=D.out, metavar="DIR",
                   help="where cost.md, cost.json, cost.html and the runs' logs go (default: reports/cost)")
    p.add_argument("--cc-gap", type=float, default=D.cc_gap, metavar="PCT",
                   help="with several --cc: list a call one compiler makes dearer than another by more than PCT "
                        "%% (default: 10)")
    p.add_argument("--model", default=D.model, metavar="SPEC",
                   help="model-shaped cases SHAPE:TYPE:BATCH+BATCH[:check], comma-separated (tinyllama:q4_0:1+32; "
                        "shapes: " + ", ".join(per_token.SHAPES) + "); sets RVVDIFF_COST_MODEL for the runs")
    p.add_argument("--clock-ghz", type=float, default=D.clock_ghz, metavar="GHZ",
                   help="with --model: the core's clock for the ceiling rate (default: 1.6, the BPI-F3's X60)")
    p.add_argument("--threads", type=int, default=D.threads, metavar="N",
                   help="with --model: threads for the ceiling rate (default: 8)")
    p.add_argument("--no-estimates", action="store_true", help="with a board: measure only, no Spike run for the estimates")
    ns = p.parse_args(argv)
    args = cost_suite_runs.Options(cost_suite_runs.COST_MATRIX.merged(Matrix.of(ns)), **Matrix.others(ns))
    if args.emulator != "spike":
        if args.base or args.changed_only:
            p.error("--base / --changed-only compare two trees under Spike; a board run measures one tree")
        return board_cost_runs.main(args)
    if args.changed_only and not args.base:
        p.error("--changed-only compares two trees: give --base")
    specs: list[per_token.Spec] = []
    if args.model:
        try:
            specs = per_token.parse_spec(args.model)
        except per_token.ModelCostError as e:
            p.error(str(e))
        for line in per_token.notes(specs, tuple(args.matrix.isa_builds)):
            print(f"rvvdiff cost: {line}", flush=True)
    return cost_suite_runs.measure(args, specs)

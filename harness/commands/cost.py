"""``rvvdiff cost [--ggml-src HEAD] [--base BASE] [-k EXPR]``: what each kernel costs at every VLEN.

Runs the cost suite (costs/: fixed, seeded calls of every family at real-model sizes) under Spike on
HEAD (default: the pinned tree) and, with ``--base``, on BASE, every VLEN (128 to 4096) and ISA build
selected, with pytest-xdist (``-n``).  Writes ``cost.md``, ``cost.json`` and ``cost.html`` (a plot per
kernel: instructions per unit against VLEN, HEAD and BASE) to ``--out`` and prints the lists: the
cases slower / faster on HEAD than on BASE beyond ``--threshold``, the RVV kernels that get no
cheaper with a longer VLEN, those that cost more than their scalar twin, and the cases that could
not be measured (one line each).

``--model SHAPE:TYPE:BATCH+BATCH[:check]`` adds the model-shaped cases (harness/report/model_cost.py: one
transformer layer's mul_mats through ggml's graph on one thread, sliced, set-up cancelled) and prints
their estimated cycles per token, the BASE / HEAD tokens/s ratio and an upper-bound rate at ``--clock-ghz``
x ``--threads`` (``model.md``); ``-k model`` measures only them.

``--changed-only`` (with ``--base``): only the cases whose code the change reaches (the gate's diff,
harness/ggml/changes.py) are measured, on both trees.

``--cc LIST`` (``all``, or a comma list of compiler names, harness/toolchain/compilers.py; default: the
``RVVDIFF_COMPILER`` setting, else clang): the runs are made once per compiler, each on that
compiler's builds.  With more than one, ``cost.md`` leads with the kernels where one compiler's code
is more than ``--cc-gap`` % dearer than another's at some VLEN (harness/report/cost_compilers.py),
then has each compiler's table (its HEAD / BASE lists are that compiler's), and ``cost-<cc>.html``
is each compiler's page.

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

from harness.commands import cost_board
from harness.core import settings
from harness.core.config import ISA_BUILDS, SPIKE_VLENS, selection_type
from harness.core.errors import RvvdiffError
from harness.core.runner import run_suite
from harness.ggml import changes
from harness.ggml.source import resolve
from harness.report import calibration, calibration_model, cost_compilers
from harness.report import cost as cost_report
from harness.report import model_cost as MC
from harness.toolchain.compilers import COMPILERS, selected


class CostRunError(RvvdiffError):
    """A cost run that did not complete (pytest could not start or was killed)."""


def run_costs(tree: str | None, out: Path, name: str, args: argparse.Namespace, extra: list[str] = (),
              compiler: str | None = None, emulator: str = "spike") -> tuple[dict[cost_report.Key, dict], dict[str, str], float]:
    """Measure the selected cases on ``tree`` (built by ``compiler``, a name of
    harness/toolchain/compilers.py's ``COMPILERS``; None: the selected one): (rows, unmeasured case -> reason, seconds)."""
    log = out / f"{name}.jsonl"
    log.unlink(missing_ok=True)
    argv = ["costs", "--emulator", emulator, "--vlen", ",".join(map(str, args.vlen)), "--isa", ",".join(args.isa),
            "--cost-log", str(log), "-n", str(args.workers), "-q", "--kernel-timeout", str(args.kernel_timeout),
            *(["--ggml-src", tree] if tree else []), *(["-k", args.k] if args.k else []),
            *(["--cc", compiler] if compiler else []), *extra]
    run = run_suite(argv, report_dir=out / f"{name}-report", output=out / f"{name}.log", clean=True,
                    echo=f"rvvdiff cost: measuring {name} ({tree or 'the pinned tree'}"
                         + (f", {compiler}" if compiler else "") + ")")
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
    p.add_argument("--cc", type=selection_type("--cc", tuple(COMPILERS), "compilers", argparse.ArgumentTypeError),
                   default=None, metavar="LIST",
                   help="'all' or a comma list of compilers to measure each (default: RVVDIFF_COMPILER, else clang)")
    p.add_argument("--cc-gap", type=float, default=cost_compilers.GAP * 100, metavar="PCT",
                   help="with several --cc: list a call one compiler makes dearer than another by more than PCT "
                        "%% (default: 10)")
    p.add_argument("--emulator", default="spike", metavar="NAME",
                   help="spike (default): counted and estimated; native or ssh:HOST[:DIR]: measured on a board by its "
                        "hardware counters, beside Spike's estimates for it (harness/commands/cost_board.py; docs/board.md)")
    p.add_argument("--model", default=None, metavar="SPEC",
                   help="model-shaped cases SHAPE:TYPE:BATCH+BATCH[:check], comma-separated (tinyllama:q4_0:1+32; "
                        "shapes: " + ", ".join(MC.SHAPES) + "); sets RVVDIFF_COST_MODEL for the runs")
    p.add_argument("--clock-ghz", type=float, default=1.6, metavar="GHZ",
                   help="with --model: the core's clock for the upper-bound rate (default: 1.6, the BPI-F3's X60)")
    p.add_argument("--threads", type=int, default=8, metavar="N",
                   help="with --model: threads for the upper-bound rate (default: 8)")
    p.add_argument("--no-estimates", action="store_true", help="with a board: measure only, no Spike run for the estimates")
    args = p.parse_args(argv)
    if args.emulator != "spike":
        return cost_board.main(args, p)
    if args.changed_only and not args.base:
        p.error("--changed-only compares two trees: give --base")
    specs: list[MC.Spec] = []
    if args.model:
        try:
            specs = MC.parse_spec(args.model)
        except MC.ModelCostError as e:
            p.error(str(e))
        settings.put("COST_MODEL", args.model)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    extra: list[str] = []
    if args.changed_only:
        diff = changes.diff(resolve(args.base), resolve(args.ggml_src))
        (out / "changes.json").write_text(json.dumps(diff.to_json(), indent=1))
        print(f"rvvdiff cost: {len(diff.changes)} changed functions / macros: "
              + ", ".join(c.describe() for c in diff.changes[:8]), flush=True)
        extra = ["--changes", str(out / "changes.json"), "--changed-only"]
    compilers = args.cc or (selected(),)
    several = len(compilers) > 1
    tables: dict[str, cost_report.CostTable] = {}
    seconds = 0.0
    for cc in compilers:
        tag, named = (f"-{cc}" if several else ""), (cc if args.cc else None)
        head, missing, head_s = run_costs(args.ggml_src, out, f"head{tag}", args, extra, named)
        base: dict[cost_report.Key, dict] = {}
        seconds += head_s
        if args.base:
            base, missing_base, base_s = run_costs(args.base, out, f"base{tag}", args, extra, named)
            missing.update(missing_base)
            seconds += base_s
        tables[cc] = cost_report.CostTable(head, base, missing, args.threshold / 100, cc if several else "")
    write_report(out, tables, seconds, args.cc_gap / 100)
    slower = [m for t in tables.values() for m in t.moves()[0]]
    for cc, table in tables.items():
        print(f"rvvdiff cost: {len(table.head)} measurements on HEAD" + (f", {len(table.base)} on BASE" if args.base else "")
              + (f" ({cc})" if several else "") + f"; {out / 'cost.md'}")
        if args.base:
            s, f = table.moves()
            print(f"  slower: {len(s)}, faster: {len(f)} (beyond {args.threshold:g} %)")
            for m in s[:20]:
                print(f"    slower: {m.describe()}")
            for m in f[:20]:
                print(f"    faster: {m.describe()}")
            if any(m.on_cores for m in s + f):
                print(f"  est.: {calibration.summary()}")
        for line in cost_report.grouped(table.unmeasured):
            print(f"  not measured: {line}")
    if several:
        found = cost_compilers.gaps({cc: t.head for cc, t in tables.items()}, args.cc_gap / 100)
        print(f"rvvdiff cost: {len(found)} calls where one compiler's code is more than {args.cc_gap:g} % dearer:")
        for g in found[:40]:
            print(f"    {g.describe()}")
    if specs:
        for cc, table in tables.items():
            try:
                lines = MC.report(table.as_json(), specs, args.clock_ghz, args.threads)
            except MC.ModelCostError as e:
                lines = [f"model-shaped cases ({cc}): {e}"]
            if args.base:
                lines.append(f"  est.: {calibration_model.summary()}")
            (out / (f"model-{cc}.md" if several else "model.md")).write_text("\n".join(lines) + "\n")
            print("\n".join(lines))
    print(f"rvvdiff cost: measured in {seconds:.0f} s")
    status = 0
    if args.block_slower is not None and any(m.ratio > 1 + args.block_slower / 100 for m in slower):
        print(f"rvvdiff cost: blocking: a case is slower by more than {args.block_slower:g} %", file=sys.stderr)
        status = 1
    return status


def write_report(out: Path, tables: dict[str, cost_report.CostTable], seconds: float, gap: float) -> None:
    """``cost.md``, ``cost.json`` and the HTML page(s) of the tables, one per compiler measured: with one,
    exactly the single table's; with several, the compiler comparison first and a page per compiler."""
    if len(tables) == 1:
        table = next(iter(tables.values()))
        md = table.markdown()
        (out / "cost.md").write_text(md)
        (out / "cost.json").write_text(json.dumps({**table.as_json(), "seconds": round(seconds, 1)}, indent=1))
        (out / "cost.html").write_text(table.html(md))
        return
    heads = {cc: t.head for cc, t in tables.items()}
    found = cost_compilers.gaps(heads, gap)
    parts = {cc: t.markdown(title=f"Cost per VLEN: {cc}") for cc, t in tables.items()}
    (out / "cost.md").write_text(cost_compilers.markdown(heads, found, gap) + "\n" + "\n".join(parts.values()))
    (out / "cost.json").write_text(json.dumps({**cost_compilers.as_json(heads, found, gap),
                                               "per_compiler": {cc: t.as_json() for cc, t in tables.items()},
                                               "seconds": round(seconds, 1)}, indent=1))
    for cc, t in tables.items():
        (out / f"cost-{cc}.html").write_text(t.html(parts[cc]))

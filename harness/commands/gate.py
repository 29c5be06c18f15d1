"""``rvvdiff gate HEAD --base BASE``: did this change make the RVV kernels worse?  The command line of
the PR gate; what it runs and how it judges is harness/jobs/gate_runs.py (docs/gate.md).  The exit
status is 1 exactly when something blocks; else 3 when the cost step measured nothing on HEAD or BASE
where it had cases to measure (no Spike, a run that did not complete, every case failing), 0 otherwise;
2 when the gate could not judge.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.core import settings
from harness.core.config import work_dir
from harness.core.errors import RvvdiffError
from harness.core.matrix import Matrix, add_options, option_type, parse_isas, parse_vlens, vlens_on
from harness.cost.tables.gate_lists import COST_THRESHOLD
from harness.ggml import gitrev
from harness.jobs import gate_cost_step
from harness.jobs.gate_runs import GateError, gate
from harness.report.gate_summary import summary_md, write
from harness.toolchain.compilers import selected


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog="rvvdiff gate", allow_abbrev=False,
        description="Judge a HEAD tree against its BASE: regressions and failing new kernels "
        "block, pre-existing failures do not, fixes are named; the tests that reach a change run at the thorough "
        "budget, over every VLEN, ISA build and stress mode unless the options of the matrix narrow it. Options "
        "rvvdiff gate does not know go to pytest (e.g. -k ...).")
    p.add_argument("head", help="the tree under review: a llama.cpp or ggml checkout")
    add_options(p, "vlens", "isas", "compilers", "stress", "emulator", unset=True,
                default_words={"vlens": "all", "stress": "both"})
    p.add_argument("--base", help="BASE: a directory, or a revision of HEAD's git checkout "
                                  "(default: the merge-base of HEAD with the branch it targets)")
    p.add_argument("--target-branch", help="the branch HEAD targets, for the default BASE (default: "
                                           "origin/$GITHUB_BASE_REF, else the first of origin/master, origin/main, master, main)")
    p.add_argument("--changed-only", action="store_true", help="run only the tests that reach a change")
    p.add_argument("--allow-uncovered", default="", metavar="NAMES",
                   help="comma list of changed RVV functions / macros accepted without a test (or, with --lines, "
                        "with uncovered lines)")
    p.add_argument("--lines", action="store_const", const="block", default="",
                   help="run HEAD with --rvv-coverage and block on changed RVV lines no test executed at any "
                        "target that compiles them (docs/gate.md)")
    p.add_argument("--lines-defer", dest="lines", action="store_const", const="defer",
                   help="a shard of a CI matrix: record the changed lines' coverage (gate-lines.json) for "
                        "`rvvdiff linegate merge`, which judges them over all shards")
    p.add_argument("--out", default=str(work_dir() / "reports"), help="where the reports go (default: reports/)")
    p.add_argument("--workers", default=settings.get("WORKERS") or "auto",
                   help="pytest-xdist workers per run (default: $RVVDIFF_WORKERS or auto; 0: no xdist)")
    c = p.add_argument_group("cost (docs/gate.md: the cost lists)")
    c.add_argument("--no-cost", action="store_true",
                   help="skip the cost step (instructions under Spike, HEAD against BASE, of the cost cases the "
                        "change reaches)")
    c.add_argument("--cost-threshold", type=float, default=COST_THRESHOLD, metavar="PCT",
                   help="list a cost case as slower / faster when HEAD / BASE moves beyond PCT %% (default: 2)")
    c.add_argument("--block-slower", type=float, default=None, metavar="PCT",
                   help="block (exit 1) when a cost case is slower on HEAD than on BASE by more than PCT %% "
                        "(default: slower cases are listed, never block)")
    c.add_argument("--cost-vlen", type=option_type(lambda v: vlens_on("spike", parse_vlens(v))), default=None,
                   metavar="LIST",
                   help="VLENs the cost step measures (default: the gate's --vlen, plus 2048 and 4096 when it "
                        "includes 1024; without --vlen: " + ",".join(map(str, gate_cost_step.COST_VLENS)) + ")")
    c.add_argument("--cost-isa", type=option_type(parse_isas), default=None, metavar="LIST",
                   help="ISA builds the cost step measures (default: the gate's --isa, else "
                        + ",".join(gate_cost_step.COST_ISAS) + ")")
    a, pytest_args = p.parse_known_args(argv)
    given = Matrix.of(a)  # HEAD and BASE with the same matrix
    head_dir = Path(a.head).resolve()
    try:
        if not head_dir.is_dir():
            raise GateError(f"HEAD {a.head}: no such directory (give a llama.cpp or ggml checkout)")
        cost = None
        if not a.no_cost:
            vlens, isas = gate_cost_step.cost_targets(given, a.cost_vlen, a.cost_isa)
            cost = {"vlens": vlens, "isas": isas, "threshold": a.cost_threshold, "block_slower": a.block_slower,
                    "compilers": given.compiler_names}
        base_dir, how = gitrev.resolve_base(head_dir, a.base, a.target_branch)
        out = Path(a.out).resolve()
        v = gate(head_dir, base_dir, how, out, given, pytest_args, compiler=selected(), changed_only=a.changed_only,
                 allow_uncovered=tuple(x for x in a.allow_uncovered.split(",") if x), workers=a.workers, cost=cost,
                 line_coverage=a.lines)
    except RvvdiffError as e:
        print(f"rvvdiff gate: {e}", file=sys.stderr)
        return 2
    path = write(v, out)
    print("\n" + summary_md(v))
    print(f"rvvdiff gate: {v.word()} ({path})")
    return v.status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

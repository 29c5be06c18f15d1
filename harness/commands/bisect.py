"""``rvvdiff bisect``: the first commit of a ggml history at which a shrunk failure fails.

The command line of the bisect; how a step replays the failure, judges it and drives ``git bisect`` is
harness/jobs/bisect_runs.py (the failure it replays: harness/jobs/bisect_failure.py).  Exit status: 0 when
the first bad commit was found; 1 when an end does not behave as given (BAD passes, GOOD fails, either cannot
be tested) or only untestable commits are left; 2 for a wrong argument, repository or revision.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.core.config import work_dir
from harness.core.errors import RvvdiffError
from harness.core.matrix import add_options, one_values
from harness.jobs.bisect_failure import BisectError, from_report, from_test
from harness.jobs.bisect_runs import BUDGETS, Bisect, run


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="rvvdiff bisect", description=__doc__.split("\n\n")[0],
        usage="rvvdiff bisect (REPORT_DIR | --test NODEID [--vlen V --isa I --rvv-stress --cc C]) --repo CHECKOUT "
              "--good REV --bad REV [--example-db DIR] [--out DIR] [-- extra pytest args]")
    p.add_argument("report", nargs="?", type=Path, help="a failure report: a directory under <report-dir>/cases/")
    p.add_argument("--test", metavar="NODEID", help="a test id instead of a report")
    add_options(p, "vlens", "isas", "stress", "compilers", one=True, prefix="with --test: ", aliases={"stress": ("--stress",)},
                default_words={"vlens": "the one the id names", "isas": "the one the id names",
                               "stress": "the one the id names",
                               "compilers": "the one the id names, else RVVDIFF_COMPILER, else clang"})
    p.add_argument("--repo", type=Path, required=True, help="the llama.cpp or ggml git repository (only read)")
    p.add_argument("--good", required=True, metavar="REV", help="a revision where the test passes")
    p.add_argument("--bad", required=True, metavar="REV", help="a later revision where it fails")
    p.add_argument("--example-db", type=Path, metavar="DIR",
                   help="the Hypothesis database with the shrunk example (default: the one the failing run used; "
                        "with --test, .hypothesis/examples of rvvdiff's root)")
    p.add_argument("--budget", choices=BUDGETS, default="replay",
                   help="the test's budget at each step (default replay: the saved examples and the fixed cases, "
                        "the same at every step)")
    p.add_argument("--out", type=Path, default=work_dir() / "reports" / "bisect",
                   help="bisect.json and each step's log and reports (default: reports/bisect)")
    p.add_argument("--step-timeout", type=float, default=3600.0, metavar="S",
                   help="a step running longer (build included) is skipped (default 3600)")
    argv = sys.argv[1:] if argv is None else list(argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    a = p.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    try:
        if (a.report is None) == (a.test is None):
            raise BisectError("give a failure report directory or --test NODEID (one of them)")
        asked = one_values(a)
        if a.report is not None:
            if any(v is not None for v in asked.values()):
                raise BisectError("--vlen, --isa, --rvv-stress and --cc go with --test; a report names its target")
            failure = from_report(a.report.resolve(), a.example_db and a.example_db.resolve())
        else:
            failure = from_test(a.test, asked, a.example_db and a.example_db.resolve())
        bs = Bisect.of(failure, a.repo, a.good, a.bad, out=a.out.resolve(), budget=a.budget, extra=extra,
                       step_timeout=a.step_timeout)
    except RvvdiffError as e:
        print(f"rvvdiff bisect: {e}", file=sys.stderr)
        return 2
    return run(bs)


if __name__ == "__main__":
    raise SystemExit(main())

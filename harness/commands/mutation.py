"""``rvvdiff mutants``: how well the suite finds planted bugs, and ``rvvdiff audit``: how often it cries wolf.
The command lines; the runs and the tables are harness/jobs/mutant_runs.py.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.core.config import work_dir
from harness.core.matrix import add_options
from harness.ggml import mutants
from harness.jobs import mutant_runs


def main_mutants(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="rvvdiff mutants", description="list the planted bugs, or run the detection")
    p.add_argument("action", nargs="?", choices=["list", "run"], default="list")
    p.add_argument("--only", action="append", help="mutant name (repeatable)")
    p.add_argument("--max-examples", type=int, default=None, help="default: the suite's default budget")
    p.add_argument("--out", type=Path, default=work_dir() / "docs" / "mutants.md")
    p.add_argument("--report-dir", type=Path, default=work_dir() / "reports" / "mutants",
                   help="where each mutant's failure reports go (default: reports/mutants)")
    p.add_argument("--timeout", type=float, default=3600)
    add_options(p, "compilers", unset=True)
    a = p.parse_args(argv)
    cat = mutants.catalogue()
    if a.action == "list":
        for name, m in cat.items():
            print(f"{name}: {m.meta.get('class', '?')} [{m.meta.get('family', '?')}]")
        return 0
    return mutant_runs.detection(cat, a.only, max_examples=a.max_examples, out=a.out, report_dir=a.report_dir,
                                 timeout=a.timeout, compilers=a.cc)


def main_audit(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="rvvdiff audit",
                                description="run the full suite N times with different seeds; list unexplained failures")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--seed", type=int, default=1, help="first Hypothesis seed (then +1 per run)")
    p.add_argument("--out", type=Path, default=work_dir() / "docs" / "audit.md")
    p.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    a = p.parse_args(argv)
    return mutant_runs.audit(a.runs, a.seed, a.pytest_args, a.out)

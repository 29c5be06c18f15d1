"""``rvvdiff report CASE_DIR --upstream``: a failure report as an issue text for ggml's maintainers.

Writes ``upstream/issue.md`` (at most 60 lines) and ``upstream/repro.c`` (ggml's public API only) into
the case directory (or ``--out``), after building the program with each compiler (``--cc``: GCC 14 and
zig's clang by default, where installed) against every ISA build of the tree and running it at every
QEMU VLEN, with the recorded tail/mask stress mode: the title names the VLENs, builds and compilers
where it fails, as run.  A compiler whose build is right everywhere without stress runs again with
stress, and the text says how to see the bug there.  When the case's known-failure entry names a fix
(harness/data/fixes/), or with ``--fixed TREE``, the program also runs against the fixed tree.

Exit status: 0 when the program fails on the tree at the recorded target (and, with a fix, passes
on the fixed tree everywhere; the stock commands agree with rvvdiff's builds); 1 otherwise (the issue
would not be true); 2 when there is no public form (the reason is printed) or nothing could be built.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.core.matrix import COMPILER_NAMES, add_options, parse_selection, vlens_on
from harness.ggml import fix_catalogue
from harness.jobs import issue_runs
from harness.toolchain.compilers import ToolchainError


def _stock_table(value: str) -> tuple[str, ...]:
    """``--stock-table``: compilers by the matrix's grammar of a selection ('all' or a comma list)."""
    try:
        return parse_selection("--stock-table", value, COMPILER_NAMES)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--stock-table {value}: use 'all' or a comma list of "
                                         f"{', '.join(COMPILER_NAMES)}") from None


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="rvvdiff report", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("case", type=Path, nargs="?", help="a directory under <report-dir>/cases/")
    p.add_argument("--fix", default=None, metavar="NAME",
                   help="instead of CASE: the finding of a fix of harness/data/fixes/ (its known-failure entry's "
                        "reproducer is run with --runxfail to make the case)")
    p.add_argument("--upstream", action="store_true", required=True,
                   help="write the issue text and the public-API program (the only form so far)")
    p.add_argument("--fixed", default=None, metavar="TREE",
                   help="a fixed tree to run the program against (default: the known-failure entry's fix applied)")
    add_options(p, "vlens", "isas", "compilers", unset=True,
                default_words={"vlens": "every VLEN QEMU runs", "compilers": "every one that is installed"})
    p.add_argument("--spike", action="store_true",
                   help="also run the program under Spike at VLEN 2048 and 4096 (ci/setup.sh --spike)")
    p.add_argument("--no-stock", action="store_true",
                   help="do not build the program with the stock toolchain's commands (Debian's clang-22 and GCC 14, "
                        "ggml's CMake)")
    p.add_argument("--stock-table", type=_stock_table, default=(), metavar="LIST",
                   help="the table rows of these compilers ('all' or a comma list of " + ", ".join(COMPILER_NAMES)
                        + ") built by the commands the issue prints (Debian's clang-22 or GCC 14, ggml's CMake) "
                        "instead of by rvvdiff; with --spike their Spike rows run under riscv-pk (RVVDIFF_PK)")
    p.add_argument("--enable", type=Path, default=None, metavar="PATCH",
                   help="with --fix, for a finding the tree's selection never reaches: a patch (a stand-in of the "
                        "upstream change that makes the code live) applied to the tree and to the fixed tree; the "
                        "program is an exact repacked mul_mat through the CPU_REPACK buffer, copied to --out")
    p.add_argument("--rerender", action="store_true",
                   help="write --out's issue text again from the runs kept beside it (runs.json; no build, no run); "
                        "without --out, every issue text of docs/upstream")
    p.add_argument("--out", type=Path, default=None, help="default: CASE/upstream")
    a = p.parse_args(argv)
    if a.rerender:
        return issue_runs.rerender(a.out.resolve() if a.out else None)
    if (a.case is None) == (a.fix is None):
        p.error("give a case directory or --fix NAME")
    try:
        a.vlen = vlens_on("qemu", a.vlen)
        a.cc = issue_runs.compilers(a.cc)
    except ValueError as e:
        p.error(str(e))
    except ToolchainError as e:
        print(f"rvvdiff report: --cc: {e}")
        return 2
    if a.fix and a.fix not in fix_catalogue.catalogue():
        p.error(f"--fix {a.fix}: no such fix ({', '.join(fix_catalogue.catalogue())})")
    req = issue_runs.Request(a.vlen, a.cc, a.isa, a.fix, a.fixed, a.spike, a.no_stock, a.enable, a.out, a.stock_table)
    if a.enable is not None:
        if not a.fix or not a.enable.is_file():
            p.error("--enable PATCH needs --fix NAME and an existing patch file")
        return issue_runs.enabled_issue(req)
    return issue_runs.case_issue(req, None if a.fix else a.case)

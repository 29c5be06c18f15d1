"""``rvvdiff ggml-tests``: ggml's own tests, patched to catch the findings, run on the pinned tree and with the fixes.

For a bug class (``--list`` names them), :func:`harness.upstream.ggml_own_tests.run_class` builds llama.cpp's
``test-quantize-fns`` with the class's test patch (harness/data/ggml-tests/) using the stock toolchain,
runs it with ctest under QEMU at the class's VLENs on the pinned tree and with the class's fixes, and this prints
the verdict table and the commands that reproduce it by hand (docs/ggml-tests.md).

Exit status: 0 when the pinned tree fails and the fixed tree passes at every VLEN run (or with
``--list`` / ``--commands``); 1 otherwise.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.core.matrix import add_options
from harness.upstream.ggml_own_tests import CLASSES, DEFAULT_WORK, commands, run_class, table


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="rvvdiff ggml-tests", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cls", nargs="?", choices=sorted(CLASSES), help="bug class")
    ap.add_argument("--list", action="store_true", help="list the classes")
    add_options(ap, "vlens", repeat=True, prefix="(repeatable) ", default_words={"vlens": "the class's"})
    ap.add_argument("--pinned-only", action="store_true")
    ap.add_argument("--fixed-only", action="store_true")
    ap.add_argument("--commands", action="store_true", help="only print the commands")
    ap.add_argument("--work", type=Path, help=f"tree copy and build directory (default {DEFAULT_WORK})")
    a = ap.parse_args(argv)
    if a.list or not a.cls:
        for c in CLASSES.values():
            print(f"{c.name:<26} VLEN {','.join(map(str, c.vlens)):<16} fixes: {', '.join(c.fixes)}")
        return 0
    ok = True
    if not a.commands:
        res = run_class(a.cls, targets=CLASSES[a.cls].targets(vlens=a.vlen), pinned=not a.fixed_only,
                        fixed=not a.pinned_only, work=a.work)
        print(table(res))
        print()
        ok = res.ok()
    print("commands:")
    for ln in commands(a.cls, a.work):
        print("  " + ln)
    return 0 if ok else 1

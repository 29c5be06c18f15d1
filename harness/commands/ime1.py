"""``rvvdiff ime1``: SpacemiT's IME1 under Spike (docs/ime.md).

``rvvdiff ime1 build``
    build rvvdiff's IME1 extension library for the installed Spike (harness/emulators/spike_ext.py) and print
    its path; ``ci/setup.sh --spike`` runs it.
``rvvdiff ime1 run FILE.c [--vlen N] [--timeout S]``
    build a standalone C program with IME1 (zig's clang, the specification's mnemonics) and run it under Spike
    with the library at VLEN N (default 256, the K1's); its output, then the Spike command on stderr.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.core.matrix import add_options
from harness.emulators import spike_ext


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="rvvdiff ime1", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="action", required=True)
    sub.add_parser("build", help="build the IME1 library for the installed Spike and print its path")
    r = sub.add_parser("run", help="build a C program with IME1 and run it under Spike with the library")
    r.add_argument("file", type=Path, metavar="FILE.c")
    add_options(r, "vlens", one=True, defaults={"vlens": 256}, prefix="the VLEN to run at: ",
                default_words={"vlens": "256, the K1's"})
    r.add_argument("--timeout", type=float, default=300, help="seconds before the run is stopped (default 300)")
    a = p.parse_args(argv)
    if a.action == "build":
        print(spike_ext.library())
        return 0
    emu, exe = spike_ext.with_ime1(), spike_ext.program(a.file)
    ran = emu.run_program(exe, a.vlen, {}, timeout=a.timeout, what=a.file.name)
    print(" ".join(ran.argv), file=sys.stderr)
    sys.stdout.write(ran.stdout)
    sys.stderr.write(emu.explain(exe, ran.stderr))
    if ran.returncode is None:
        print(f"did not finish within {a.timeout:g} s", file=sys.stderr)
        return 124
    return ran.returncode

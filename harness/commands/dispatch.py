"""``rvvdiff dispatch``: a distribution's build of the tree (every riscv64 CPU variant as a shared library, ggml
loading one at run time) and which variant each emulated CPU gets, judged (docs/dispatch.md).

Builds the dispatch build by each compiler (harness/toolchain/dispatch_build.py), runs its probe under QEMU on a
CPU without V and on CPUs with V at every VLEN, with and without zfh / zvfh / zvfbfwma (harness/jobs/
dispatch_runs.py), and prints, per compiler, the variants (their flags, what their code may use) and the table of
emulated CPU against the variant loaded and whether that is right.  Exit status: 1 when a CPU got a variant it
should not have (or a variant did not build), 0 otherwise; 2 when no compiler could make the build.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from harness.core.matrix import DEFAULT_COMPILER, add_options
from harness.core.proc import CommandError
from harness.ggml.source import resolve
from harness.jobs import dispatch_runs
from harness.toolchain.builds import BuildError, IsaUnavailable
from harness.toolchain.compilers import ToolchainError
from harness.toolchain.dispatch_build import ensure_dispatch


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="rvvdiff dispatch", description=__doc__.split("\n\n")[0])
    add_options(p, "tree", "compilers", unset=True, default_words={"compilers": "gcc14,clang"})
    p.add_argument("--cpu", action="append", default=[], metavar="NAME",
                   help="only these emulated CPUs (repeatable): no-V, vlen<N>-<v|zvfh|zvfbfwma> (default: all "
                        f"{len(dispatch_runs.cpus())})")
    p.add_argument("--out", type=Path, help="also write the tables (markdown) here")
    a = p.parse_args(argv)
    known = {c.name: c for c in dispatch_runs.cpus()}
    unknown = [n for n in a.cpu if n not in known]
    if unknown:
        p.error(f"--cpu {', '.join(unknown)}: the emulated CPUs are {', '.join(known)}")
    only = [known[n] for n in a.cpu] or None
    src = resolve(a.ggml_src)
    names = list(a.cc or {"gcc14": (), DEFAULT_COMPILER: ()})
    lines: list[str] = []
    wrong = built = 0
    for name in names:
        t0 = time.perf_counter()
        try:
            d = ensure_dispatch(src, name)
        except (IsaUnavailable, BuildError, ToolchainError, CommandError) as e:
            lines += [f"{name}: no dispatch build: {e}", ""]
            print(lines[-2], file=sys.stderr)
            continue
        built += 1
        took = time.perf_counter() - t0
        rows = dispatch_runs.table_rows(d, only)
        table = dispatch_runs.markdown(d, rows)
        lines += [*table, "", f"(build {took:.0f} s, {len(rows)} CPUs run in {time.perf_counter() - t0 - took:.0f} s; "
                  f"log: {d.log})", ""]
        print("\n".join(lines[-len(table) - 2:]), flush=True)
        wrong += sum(not r.right for r in rows) + sum(v.library is None for v in d.variants)
        for r in rows:
            if not r.right:
                print(f"{name} {r.cpu.name}: reproduce with\n{dispatch_runs.reproducer(r)}", file=sys.stderr)
    if a.out:
        a.out.write_text("\n".join(lines) + "\n")
    return 2 if not built else 1 if wrong else 0

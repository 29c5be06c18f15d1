"""``rvvdiff``: set-up, builds and mutants from the command line (the tests run under pytest)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

from harness.commands import (
    bench,
    bisect,
    calibration,
    cost,
    dispatch,
    docs,
    fixes,
    gate,
    ggmltests,
    ime1,
    lines,
    models,
    mutation,
    otherarch,
    prices,
    recorded,
    report,
    repro,
    series,
    spikecheck,
    trees,
)
from harness.core import matrix
from harness.core.errors import RvvdiffError
from harness.core.proc import CommandError
from harness.emulators import qemu
from harness.emulators.qemu import emulation_gap
from harness.ggml import known, mutants, patches, proposals
from harness.ggml.source import resolve
from harness.toolchain import compilers
from harness.toolchain.builds import BuildError, IsaUnavailable, ensure_built
from harness.toolchain.compilers import SERVER_DIR
from harness.toolchain.server import adapter_kernels


def cmd_setup(args: argparse.Namespace) -> int:
    """Fetch the ggml source, check the compiler and QEMU, and (with --build) build every ISA build."""
    t0 = time.perf_counter()
    src = resolve(args.ggml_src)
    print(f"ggml source: {src.describe()} ({time.perf_counter() - t0:.1f} s)")
    for k, v in {**compilers.describe(), "qemu": qemu.describe()}.items():
        print(f"{k}: {v}")
    q = qemu.qemu()
    for name in args.isa:
        lacking = q.lacking(matrix.ISAS[name].qemu)
        if lacking:
            print(f"warning: QEMU {q.version} cannot emulate {', '.join(lacking)}: ISA build {name} will be skipped",
                  file=sys.stderr)
    if args.build:
        cmd_build(args)
    print(f"set-up done in {time.perf_counter() - t0:.1f} s")
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    """Build each selected ISA build (or check it is current); an ISA build the tree's CMake cannot
    express is reported and skipped, a failing one does not stop the others (and fails the command)."""
    src = resolve(args.ggml_src)
    failed = []
    for name in args.isa:
        t = time.perf_counter()
        try:
            b = ensure_built(src, matrix.ISAS[name])
        except IsaUnavailable as e:
            print(f"{name}: not built: {e}")
            continue
        except (BuildError, CommandError) as e:
            print(f"{name}: FAILED: {e}", file=sys.stderr)
            failed.append(name)
            continue
        print(f"{name}: {b.server} ({time.perf_counter() - t:.1f} s; -march={b.march})")
        ggml_undeclared = [o for o in b.cmake_undeclared if o.startswith("GGML_")]
        if ggml_undeclared:
            print(f"  options this tree neither declares nor reads (not passed): {', '.join(ggml_undeclared)}")
        for adapter, err in b.failed_adapters.items():
            print(f"  adapter {adapter} does not compile against this tree; left out of the server, so its kernels "
                  f"({', '.join(adapter_kernels(SERVER_DIR / adapter)) or 'none'}) are skipped:")
            print("    " + err.replace("\n", "\n    "))
        if b.failed_adapters:
            print(f"  compiler output: {b.log}")
        gap = emulation_gap(b)
        if gap:
            print(f"  warning: {gap}", file=sys.stderr)
    if failed:
        raise BuildError(f"ISA build{'s' if len(failed) > 1 else ''} {', '.join(failed)} failed (errors above)")
    return 0


def cmd_mutant(args: argparse.Namespace) -> int:
    """Print the path of a mutant tree (made if needed), to pass as --ggml-src."""
    tree = mutants.apply(mutants.get(args.name), resolve(args.ggml_src))
    print(tree.root)
    return 0


def cmd_proposal(args: argparse.Namespace) -> int:
    """Print the path of a proposal's patched tree (made if needed), to pass as --ggml-src; without a name, list the
    proposals (harness/data/proposals/) and whether each applies to the tree."""
    src = resolve(args.ggml_src)
    if args.name is None:
        for p in proposals.catalogue().values():
            state, _ = patches.applies(p, src)
            print(f"{p.name}: {state} ({p.title}; tested by --isa {p.isa or '-'}; text: {p.text_path or '-'})")
        return 0
    tree = proposals.apply(proposals.get(args.name), src)
    print(tree.root)
    return 0


def cmd_known(args: argparse.Namespace) -> int:
    """known failures: whether each entry applies to a tree (its functions' fingerprints there)"""
    return known.main(args.ggml_src, args.fingerprint)


#: Sub-commands with their own argument parsers (``rvvdiff NAME --help``).
COMMANDS_ELSEWHERE = {
    "repro": "replay a failure report outside pytest; --c writes a standalone C reproducer",
    "report": "a failure report as an upstream issue: --upstream writes issue.md and a public-API program, run at "
              "every VLEN and build (and on the fixed tree)",
    "series": "the fixes as pull-request-sized series per bug class: do they apply in order (pinned tree, "
              "--ggml-src trees, b11434); each as git format-patch files with its regression test, git am on every tree, "
              "and its description (docs/upstream/series/)",
    "ggml-tests": "ggml's own test-quantize-fns, patched per bug class: built with the stock toolchain, run by ctest under QEMU "
                  "on the pinned tree (fails) and with the class's fixes (passes) (docs/ggml-tests.md)",
    "bench": "where the suite's time goes, per representative kernel and VLEN",
    "cost": "what each kernel costs at every VLEN: instructions under Spike, HEAD against --base (docs/cost.md)",
    "prices": "the real cores' per-instruction prices that make Spike's counts estimated cycles: list them, the scalar "
              "prices by class, import a core's rvv-bench page (docs/cost.md)",
    "calibration": "the cost estimates held against boards' measurements: show / write the tables, estimate a cost "
                   "run, record / check / compare / measure again a row (docs/calibration.md)",
    "mutants": "list the planted bugs, or `run` the detection table (docs/mutants.md)",
    "audit": "run the full suite with several seeds and list unexplained failures (docs/audit.md)",
    "trees": "run the suite on several ggml trees and print one table of the outcomes (docs/trees.md)",
    "gate": "judge a HEAD tree against its BASE: regressions block, old bugs do not, fixes are named (docs/gate.md)",
    "bisect": "find the first commit of a git history at which a failure report's shrunk case fails",
    "fixes": "list the fixes of the findings (harness/data/fixes/) on a tree, or check them: each patch verified by the "
             "gate and timed, or all together through the whole suite (docs/fixes.md)",
    "spike-check": "re-check every known failure on Spike: fail it on QEMU, replay its report on Spike, "
                   "print the verdict (docs/spike.md)",
    "model": "the real models (list, fetch) and the model family's studies: what each finding does to a model "
             "(effects), the noise between correct builds its bound is derived from (noise) (docs/model.md)",
    "other-arch": "the series' regression tests off RISC-V: built and run on x86-64 and aarch64, before and after "
                  "the fixes (docs/ggml-tests.md)",
    "coverage": "RVV line coverage of several runs as one: merge, the lines missed, per VLEN switch arm "
                "(docs/coverage.md)",
    "linegate": "the PR gate's changed lines judged over every shard's gate-lines.json (docs/gate.md)",
    "docs": "print the docs' generated tables (loop sizes, quantized types, options, settings), or --write them",
    "recorded": "print a table the suite's runs recorded: the quantized dots' variants, the repack selection",
    "ime1": "SpacemiT's IME1 under Spike: build the extension library, or build and run a C program with it "
            "(docs/ime.md)",
    "dispatch": "a distribution's build (every riscv64 CPU variant, loaded by score at run time): which variant each "
                "emulated CPU gets, and whether that is right (docs/dispatch.md)",
}


def _elsewhere(name: str) -> Callable[[list[str]], int]:
    """The ``main`` of a sub-command with its own argument parser."""
    return {"trees": trees.main, "bisect": bisect.main, "gate": gate.main, "fixes": fixes.main,
            "spike-check": spikecheck.main, "repro": repro.main_repro, "report": report.main, "series": series.main,
            "ggml-tests": ggmltests.main, "bench": bench.main, "cost": cost.main, "prices": prices.main,
            "calibration": calibration.main, "mutants": mutation.main_mutants, "audit": mutation.main_audit,
            "model": models.main, "other-arch": otherarch.main, "coverage": lines.main_coverage,
            "linegate": lines.main_linegate, "docs": docs.main, "recorded": recorded.main,
            "ime1": ime1.main, "dispatch": dispatch.main}[name]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="rvvdiff", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    common = argparse.ArgumentParser(add_help=False)
    matrix.add_options(common, "tree", "isas")
    s = sub.add_parser("setup", parents=[common], help=cmd_setup.__doc__)
    s.add_argument("--build", action="store_true", help="also build every selected ISA build now")
    s.set_defaults(fn=cmd_setup)
    sub.add_parser("build", parents=[common], help="build (or check) the selected ISA builds; "
                   "says which ones the tree cannot express and which adapters it leaves out").set_defaults(fn=cmd_build)
    m = sub.add_parser("mutant", parents=[common], help=cmd_mutant.__doc__)
    m.add_argument("name", help="mutant name (`rvvdiff mutants` lists them)")
    m.set_defaults(fn=cmd_mutant)
    pr = sub.add_parser("proposal", parents=[common], help=cmd_proposal.__doc__)
    pr.add_argument("name", nargs="?", help="proposal name (without it: the list)")
    pr.set_defaults(fn=cmd_proposal)
    k = sub.add_parser("known", help=cmd_known.__doc__)
    matrix.add_options(k, "tree")
    k.add_argument("--fingerprint", nargs="+", metavar=("FILE", "FUNCTION"),
                   help="print the function / file / fingerprint lines of a new entry (FILE relative to "
                        "the tree's ggml directory; several functions allowed)")
    k.set_defaults(fn=cmd_known)
    for name, help_text in COMMANDS_ELSEWHERE.items():
        sub.add_parser(name, help=help_text, add_help=False)
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] and argv[0] in COMMANDS_ELSEWHERE:
        try:
            return _elsewhere(argv[0])(argv[1:])
        except (RvvdiffError, FileNotFoundError) as e:  # (a report or file the user named that is not there)
            print(f"rvvdiff {argv[0]}: {e}", file=sys.stderr)
            return 2
    args = p.parse_args(argv)
    try:
        return args.fn(args)
    except RvvdiffError as e:
        print(f"rvvdiff: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

"""The noise between correct builds that the model family's bound is derived from (docs/model.md, "The bound").

``python -m cases.model_noise [--pair NAME ...]`` runs each pair on the pinned tree, SmolLM2 as shipped (Q4_1),
the main job's run shape, and prints a line per pair: what llama-perplexity's ``--kl-divergence`` reports for
the second build's logits held against the first's.  Every pair is of builds believed correct, so the figures
are the spread that arithmetic order alone makes; the bound (``cases/model.py``, ``BOUND``) is a multiple of the
largest, and a pair measured above the bound's base would mean re-deriving it, never a failure let through.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from cases import model as M
from harness.core.config import ISA_BUILDS, NOVECTOR
from harness.ggml.source import resolve
from harness.model.perplexity import Kld, measure

CASE = M.Case("smollm2", M.BY_NAME["q4_1"])


def _generic_against_generic(reference: str, other: str) -> Callable[[], Kld]:
    """``other``'s no-V riscv64 build held against ``reference``'s (both ggml's generic C, under QEMU)."""
    def run() -> Kld:
        src = resolve(None)
        model = M.model_file(src, CASE)
        ref = M.reference_for(src, reference, model, M.SHAPE)
        tools = M.reference_tools(src, other)
        return measure(M.emulator_prefix(128, NOVECTOR, False), tools.tool("llama-perplexity"), model, M.SHAPE, ref.path,
                       timeout=3600, what=f"llama-perplexity ({tools.describe()}) on {CASE.id}")
    return run


def _rvv(compiler: str, vlen: int) -> Callable[[], Kld]:
    """The zvfh build by ``compiler`` at ``vlen`` held against the same compiler's generic riscv64 build."""
    def run() -> Kld:
        return M.check(resolve(None), CASE, M.RunPath(True, 1), vlen, ISA_BUILDS["zvfh"], False, compiler, M.SHAPE)
    return run


#: The pairs, by name: (what is held against what, how to run it).
PAIRS: dict[str, tuple[str, Callable[[], Kld]]] = {
    "gcc14-generic-vs-clang-generic": ("GCC 14's generic riscv64 against clang's", _generic_against_generic("clang", "gcc14")),
    "gcc14-zvfh-128": ("GCC 14's zvfh build at VLEN 128 against GCC 14's generic riscv64", _rvv("gcc14", 128)),
    "clang-zvfh-128": ("clang's zvfh build at VLEN 128 against clang's generic riscv64", _rvv("clang", 128)),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m cases.model_noise", description=__doc__.split("\n\n")[0])
    ap.add_argument("--pair", action="append", choices=sorted(PAIRS), help="a pair (repeatable; default: every one)")
    a = ap.parse_args(argv)
    for name in a.pair or list(PAIRS):
        what, run = PAIRS[name]
        k = run()
        print(f"{name}: {what}: {k.line()}; {k.seconds:.0f} s (the bound's base: mean KLD {M.NOISE_MEAN}, "
              f"top token lost at {M.NOISE_TOP:.1f} % of positions)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``rvvdiff recorded``: the tables the suite's runs record in the cache, printed.

``quant-variants [TREE...]``: which variant of each RVV quantized dot ran, per type and VLEN (recorded by
``cases/test_quant_dot.py -k traced_vec_dot_variant``; cases/quant_variants.py).  ``repack-selection [COMMIT]``:
the layout ggml's repack selection chose per weight type and row count (recorded by
``cases/test_repack_layout.py::test_selection``; cases/repack_selection.py).  Exit status 1 when nothing is
recorded yet.
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="rvvdiff recorded", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="table", required=True)
    v = sub.add_parser("quant-variants", help="the variant each quantized dot ran, per type and VLEN")
    v.add_argument("trees", nargs="*", metavar="TREE", help="the trees' tables (default: every tree recorded)")
    s = sub.add_parser("repack-selection", help="the repack layouts ggml chose, per weight type and row count")
    s.add_argument("commit", nargs="?", help="the tree whose directory name starts with this (default: the pinned "
                                             "tree's, else the tree recorded last)")
    a = ap.parse_args(argv)
    # The suite's definition modules are imported here, not at the top: they load Hypothesis and the harness's
    # plugin, a second every other command would pay at start-up.
    if a.table == "quant-variants":
        from cases import quant_variants

        trees = a.trees or quant_variants.recorded_trees()
        if not trees:
            print(f"no variant table recorded yet under {quant_variants.reports_dir()} "
                  "(run cases/test_quant_dot.py -k traced_vec_dot_variant)")
            return 1
        for t in trees:
            print(quant_variants.render(t))
        return 0
    from cases import repack_selection

    chosen = repack_selection.recorded(a.commit)
    if chosen is None:
        print(f"no selection recorded{' for ' + a.commit if a.commit else ''} yet: run "
              "cases/test_repack_layout.py::test_selection", file=sys.stderr)
        return 1
    print(f"ggml_repack_get_optimal_repack_type on RISC-V ({chosen.name}); '-': not repacked\n")
    print(repack_selection.render(chosen))
    return 0

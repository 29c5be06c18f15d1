"""``rvvdiff prices``: what each instruction costs on the real RVV cores rvvdiff prices (docs/cost.md).

``rvvdiff cost`` counts a call's instruction mix under Spike; each core's table turns that mix into estimated
cycles (harness/cost/prices/cores.py: rvv-bench's measured reciprocal throughputs, one file per core in
harness/data/cost/cores/; scalar instructions by class, harness/cost/prices/scalar_prices.py).

``rvvdiff prices cores``
    every priced core: its key, name, VLEN, how many instruction forms its table prices, and its source.
``rvvdiff prices scalar [--write]``
    each core's scalar prices by class and where each comes from (rvv-bench's add / mul, LLVM's model of the
    core, approximated); ``--write`` first recomputes LLVM's figures with llvm-mca into
    harness/data/cost/scalar_prices.toml.
``rvvdiff prices import PAGE --key K --core LABEL --vlen N [--source URL]``
    a core's table from its rvv-bench-results page (``<core>/index.html``) into harness/data/cost/cores/K.tsv.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.core.matrix import add_options
from harness.cost.prices import cores, scalar_prices


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="rvvdiff prices", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="action", required=True)
    sub.add_parser("cores", help="every priced core: key, name, VLEN, instruction forms, source")
    s = sub.add_parser("scalar", help="each core's scalar prices by class, and where each comes from")
    s.add_argument("--write", action="store_true",
                   help="recompute LLVM's figures with llvm-mca into harness/data/cost/scalar_prices.toml first")
    i = sub.add_parser("import", help="a core's table from its rvv-bench-results page")
    i.add_argument("page", type=Path, metavar="PAGE", help="an rvv-bench-results <core>/index.html")
    i.add_argument("--key", required=True, help="the core's key: the file harness/data/cost/cores/KEY.tsv")
    i.add_argument("--core", required=True, metavar="LABEL", help="the core's name as the reports print it")
    add_options(i, "vlens", one=True, prefix="the core's: ", default_words={"vlens": "none: give it"})
    i.add_argument("--source", default="", metavar="URL", help="where the page comes from")
    a = p.parse_args(argv)
    if a.action == "cores":
        for c in cores.all_cores():
            print(f"{c.key}\t{c.label}\tVLEN {c.vlen}\t{len(c.prices)} instruction forms\t{c.source}")
        return 0
    if a.action == "scalar":
        if a.write:
            print(f"{scalar_prices.write()}: written")
        for c in cores.all_cores():
            print(f"{c.label}: {scalar_prices.show(c.key, c.prices)}")
        return 0
    if not a.vlen:
        p.error("import needs --vlen")
    out = cores.import_core(a.page, key=a.key, core=a.core, vlen=a.vlen, source=a.source)
    print(f"{out}: {sum(1 for ln in out.read_text().splitlines() if not ln.startswith('#')) - 1} rows")
    return 0

"""Every kernel family of the differential suite, imported by name: the one place that knows them.

Each family's definition module (its kernel table, strategies and checks, beside its test module)
registers its loop levels with cases/loops.py (``loops.register``) and its coverage scan with
cases/coverage.py (``coverage.register``); those two stay low-level and import no family.  This
module imports every definition module, so ``families()`` and ``scans()`` see all of them, and
carries the ``python -m cases.families`` command (which needs every family).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from cases import (
    conversions,
    coverage,
    flash_attn,
    mul_mat,
    quant_dot,
    quantize,
    repack,
    spacemit_fa,
    spacemit_ops,
    vec_dot,
    vec_ops,
)
from cases import loops as L

#: Every family and the module that declares it.
MODULES = {
    "conversions": conversions,
    "vec_dot": vec_dot,
    "vec_ops": vec_ops,
    "mul_mat": mul_mat,
    "flash_attn": flash_attn,
    "quant_dot": quant_dot,
    "quantize": quantize,
    "repack": repack,
    "spacemit_ops": spacemit_ops,
    "spacemit_fa": spacemit_fa,
}


def families(names: Sequence[str] | None = None) -> dict[str, L.Family]:
    """The named families (default: all), by name."""
    names = list(MODULES) if names is None else list(names)
    unknown = [n for n in names if n not in MODULES]
    if unknown:
        raise KeyError(f"unknown families {unknown}; known: {', '.join(MODULES)}")
    for n in names:
        if n not in L.FAMILIES:
            raise KeyError(f"{MODULES[n].__name__} does not register family {n!r} (cases.loops.register)")
    return {n: L.FAMILIES[n] for n in names}


def scans(tree: coverage.Tree) -> list[coverage.FamilyScan]:
    """Every family's coverage scan of ``tree`` (cases/coverage.py), sorted by family; a scan that
    breaks is reported with its ``error``, not raised."""
    return coverage.run_registered(tree)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m cases.families", description=L.__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help="rewrite the tables in the docs pages")
    ap.add_argument("family", nargs="*", help=f"families (default: all of {', '.join(MODULES)})")
    a = ap.parse_args(argv)
    fams = families(a.family or None)
    if a.write:
        for page in sorted({f.doc for f in fams.values()}):
            p = L.ROOT / page
            text = p.read_text()
            missing = [f.name for f in fams.values() if f.doc == page and f.name not in L.doc_blocks(text)]
            if missing:
                text += "".join(f"\n## Loop sizes: {n}\n\n<!-- loops:{n} -->\n<!-- /loops -->\n" for n in missing)
            new = L.render_doc(text, fams, only=True)
            if new != text or missing:
                p.write_text(new)
                print(f"wrote {page}")
        return 0
    bad = []
    for name in fams:
        f = fams[name]
        print(f"## {name} ({f.doc})\n\n{L.table(f)}")
        bad += L.problems(f)
    for b in bad:
        print(f"GAP: {b}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

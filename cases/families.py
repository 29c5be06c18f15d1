"""Every kernel family of the differential suite, imported by name: the one place that knows them.

Each family's definition module (its kernel table, strategies and checks, beside its test module)
registers its loop levels with cases/loops.py (``loops.register``) and its coverage scan with
cases/coverage.py (``coverage.register``); those two stay low-level and import no family.  This
module imports every definition module, so ``families()`` and ``scans()`` see all of them, and
renders the loop-size tables of their docs pages (``doc_pages``: ``rvvdiff docs loops``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from cases import (
    conversions,
    coverage,
    flash_attn,
    mul_mat,
    quant_dot,
    quantize,
    repack,
    spacemit_fa,
    spacemit_gemm,
    spacemit_layouts,
    spacemit_ops,
    spacemit_quant,
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
    "spacemit_gemm": spacemit_gemm,
    "spacemit_quant": spacemit_quant,
    "spacemit_layouts": spacemit_layouts,
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


def doc_pages(names: Sequence[str] | None = None) -> dict[str, Callable[[str], str]]:
    """Each docs page of the named families (default: all), relative to the checkout, and how its loop-size
    tables are rendered: the ``<!-- loops:NAME -->`` blocks of those families made current, and a block
    appended for a family whose page has none yet (move it where it reads best)."""
    fams = families(names)

    def renderer(page: str) -> Callable[[str], str]:
        def render(text: str) -> str:
            missing = [f.name for f in fams.values() if f.doc == page and f.name not in L.doc_blocks(text)]
            text += "".join(f"\n## Loop sizes: {n}\n\n<!-- loops:{n} -->\n<!-- /loops -->\n" for n in missing)
            return L.render_doc(text, fams, only=True)
        return render

    return {page: renderer(page) for page in sorted({f.doc for f in fams.values()})}

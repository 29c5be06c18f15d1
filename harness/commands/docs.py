"""``rvvdiff docs``: the docs' tables that are generated from rvvdiff's own tables, printed or rewritten.

``loops``: each kernel family's loop-size table (cases/loops.py), in the family's docs page; ``quant-types``:
the quantized types (oracles/quant_types.py), in docs/quants.md; ``options``: the test matrix's options
(harness/core/matrix.py), in docs/options.md, and the job matrices of the CI workflow (ci/github/rvvdiff.yml);
``settings``: the ``RVVDIFF_*`` variables (harness/core/settings.py), in docs/settings.md; ``memory``: each priced core's
published caches and DRAM bus (harness/data/cost/memory.toml), in docs/cost.md.

Without ``--write`` the selected tables (default: all) are printed, the loops' gaps on stderr (exit status 1 when
a loop level is not reached); with it, their generated blocks are rewritten in this checkout's files.  The
project's tests fail while a block is stale, naming this command.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from types import ModuleType

from harness.core import matrix_doc, settings
from harness.cost.prices import memory_system
from oracles import quant_types

TABLES = ("loops", "quant-types", "options", "settings", "memory")


def _families() -> ModuleType:
    """cases/families.py, imported when a command needs it: it loads every family's definition module
    (Hypothesis, the oracles, the plugin), a second every other command would pay at start-up."""
    from cases import families

    return families


def files(table: str, families: list[str] | None = None) -> dict[str, Callable[[str], str]]:
    """The checkout's files ``table`` is written into (relative paths) and how each is rendered; ``families``:
    the loop tables of these families only."""
    if table == "loops":
        return _families().doc_pages(families)
    if table == "quant-types":
        return {quant_types.DOC: quant_types.render_doc}
    if table == "options":
        return dict(matrix_doc.RENDERED)
    if table == "memory":
        return {memory_system.DOC: memory_system.render_doc}
    return {settings.DOC: settings.render_doc}


def show(table: str, families: list[str] | None = None) -> int:
    """Print ``table``; 1 when a loop table has a gap (each on stderr), else 0."""
    if table != "loops":
        print({"quant-types": quant_types.table, "options": matrix_doc.markdown, "settings": settings.markdown,
               "memory": memory_system.markdown}[table](), end="")
        return 0
    from cases import loops

    gaps = []
    for name, f in _families().families(families).items():
        print(f"## {name} ({f.doc})\n\n{loops.table(f)}")
        gaps += loops.problems(f)
    for g in gaps:
        print(f"GAP: {g}", file=sys.stderr)
    return 1 if gaps else 0


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="rvvdiff docs", description=__doc__.split("\n\n")[0])
    ap.add_argument("tables", nargs="*", metavar="TABLE", help=f"{', '.join(TABLES)} (default: all)")
    ap.add_argument("--write", action="store_true", help="rewrite the tables' generated blocks in this checkout")
    ap.add_argument("--family", action="append", metavar="NAME",
                    help="loops: this family's table only (repeatable; default: every family)")
    a = ap.parse_args(argv)
    unknown = [t for t in a.tables if t not in TABLES]
    if unknown:
        ap.error(f"no table {', '.join(unknown)}; the tables are {', '.join(TABLES)}")
    status = 0
    for table in a.tables or TABLES:
        if a.write:
            for rel, render in files(table, a.family).items():
                settings.rewrite_generated(rel, render)
        else:
            status = max(status, show(table, a.family))
    return status

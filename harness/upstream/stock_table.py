"""An issue table's rows built by the commands the issue prints, so that a row and a maintainer's commands are one build.

``rvvdiff report --upstream --stock-table CC`` takes that compiler's rows from here: the program built by
:mod:`harness.upstream.stock`'s commands (ggml's CMake, Debian's clang-22 or GCC 14, the static link of ``repro.c``) for each
tree and ISA build, run at every QEMU VLEN and, with ``--spike``, under Spike with riscv-pk (the same static
program: ``spike --isa=... pk ./repro``, :class:`harness.emulators.spike.SpikePk`).  Its verdicts are
:class:`~harness.upstream.runs.Verdict` s with ``by="stock"``, run and judged by :func:`harness.upstream.runs.verify`
as rvvdiff's own builds are.

Each tree is built in one scratch copy per compiler and ISA build (``$RVVDIFF_CACHE/stock-table/<compiler>-<isa>/``):
:func:`sync` gives the copy the tree's files that differ (a fixed tree differs from the pinned one in a file or two,
which get new times), so CMake recompiles those alone; the commands are those the issue prints, on that copy.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from harness.core.config import IsaBuild, cache_dir, locked
from harness.core.matrix import Point
from harness.emulators.spike import SpikePk
from harness.ggml.source import GgmlSource
from harness.upstream import runs, stock
from harness.upstream.runs import Verdict

SCRATCH = "stock-table"


def sync(src: Path, dst: Path) -> int:
    """Make ``dst`` a copy of ``src``: each file that differs (or is new) copied, each file ``src`` lacks removed;
    the number of files written or removed.  Unchanged files keep their times, so a build there redoes only what the
    changed ones feed."""
    src, dst = Path(src), Path(dst)
    seen: set[Path] = set()
    changed = 0
    for f in sorted(src.rglob("*")):
        if f.is_symlink() or not f.is_file():
            continue
        rel = f.relative_to(src)
        seen.add(rel)
        data, d = f.read_bytes(), dst / rel
        if d.is_file() and not d.is_symlink() and d.stat().st_size == len(data) and d.read_bytes() == data:
            continue
        d.parent.mkdir(parents=True, exist_ok=True)
        if d.is_symlink():
            d.unlink()
        d.write_bytes(data)
        changed += 1
    for d in sorted(dst.rglob("*"), reverse=True):
        if (d.is_file() or d.is_symlink()) and d.relative_to(dst) not in seen:
            d.unlink()
            changed += 1
    return changed


def build(tree: GgmlSource, isa: IsaBuild, cc: str, program: Path, exe: Path) -> Path:
    """``program`` built against ``tree`` by the stock commands of compiler ``cc`` (:func:`stock.build_program`) in
    the scratch copy of (``cc``, ``isa``); raises :class:`~harness.core.errors.RvvdiffError` with the step that
    failed."""
    base = cache_dir() / SCRATCH / f"{cc}-{isa.name}"
    base.mkdir(parents=True, exist_ok=True)
    with locked(base / ".lock"):
        sync(Path(tree.root), base / "tree")
        return stock.build_program(base / "tree", isa, cc, base / "build", program, exe)


def verify(program: Path, trees: dict[str, GgmlSource], targets: Sequence[Point], work: Path, *, trap: bool = False,
           emulator: SpikePk | None = None) -> list[Verdict]:
    """The program built by the stock commands of the targets' compiler against each tree and ISA build, run at each
    target under QEMU (or ``emulator``: Spike with riscv-pk): :func:`harness.upstream.runs.verify` with this module's
    build (one executable per tree, ISA build and compiler, kept in ``work`` for the stress and Spike runs)."""
    def make(label: str, tree: GgmlSource, at: Point) -> Path:
        exe = work / f"repro-{label}-{at.isa.name}-stock-{at.compiler}"
        return exe if exe.is_file() else build(tree, at.isa, at.compiler, program, exe)

    return runs.verify(program, trees, targets, work, emulator=emulator, trap=trap, make=make, by="stock")

"""What a core's scalar instructions cost, by class (harness/cost/prices/scalar_classes.py), from evidence that does
not come from the calibration rows: rvv-bench's measurements on the chip and LLVM's scheduling models.

rvv-bench's tables (harness/data/cost/cores/*.tsv) time two scalar instructions on some cores, ``add`` and
``mul``: a core's integer arithmetic and multiplies are priced at their measured cycles where its table has
them.  Every other class -- loads, stores, conditional branches, jumps, divides, floating-point arithmetic and
its divides, and integer arithmetic on a core whose table has no ``add`` -- is priced at the reciprocal
throughput LLVM's scheduling model of the core gives it, where LLVM has a model of the core: ``llvm-mca``
over a block of 16 independent instructions of the class (:data:`BLOCKS`, distinct destination registers, so
that no latency enters), cycles per instruction in the steady state.  The figures are kept in
harness/data/cost/scalar_prices.toml with the LLVM version that gave them, written by
``rvvdiff prices scalar --write`` and recomputed by tests/test_scalar_prices.py.

A class neither source prices falls back to the core's integer arithmetic (a divide to its multiply), counted
as approximated by the estimate; a core with no scalar evidence at all prices no scalar instruction (counted as
unpriced, never guessed).  Why throughputs and not latencies: the price table is a sum of reciprocal
throughputs for vector code too (harness/cost/prices/cores.py); the latency of dependent instructions is what LLVM's
model, the second estimate (harness/cost/prices/mca.py), adds over whole blocks.

No price here is chosen from a calibration row: the module reads the cores' tables and LLVM, nothing else
(tests/test_scalar_prices.py checks it imports no calibration module).
"""

from __future__ import annotations

import functools
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path

from harness.core.config import DATA_DIR
from harness.core.proc import execute
from harness.cost.prices import scalar_classes as SC

PRICES = DATA_DIR / "cost" / "scalar_prices.toml"
#: The cores with a price table that LLVM models, and its name for each: the Ascalon X of rvv-bench's page is
#: Tenstorrent's 8-wide Ascalon, LLVM's ``tt-ascalon-d8``.  (LLVM 22 knows ``xiangshan-kunminghu``, XiangShan
#: V3, as a name only: no scheduling model.)
LLVM_CPUS = {"spacemit_x60": "spacemit-x60", "tt_asc_x": "tt-ascalon-d8"}
ITERATIONS = 200
_X = ("t0", "t1", "t2", "t3", "t4", "t5", "t6", "a2", "a3", "a4", "a5", "a6", "a7", "s2", "s3", "s4")
_F = ("ft0", "ft1", "ft2", "ft3", "ft4", "ft5", "ft6", "ft7", "ft8", "ft9", "ft10", "ft11", "fs0", "fs1", "fs2", "fs3")
#: One block per class: 16 independent instructions (no one reads what another writes).
BLOCKS: dict[str, tuple[str, ...]] = {
    SC.ALU: tuple(f"add {r}, a0, a1" for r in _X),
    SC.LOAD: tuple(f"ld {r}, {8 * i}(a0)" for i, r in enumerate(_X)),
    SC.STORE: tuple(f"sd a1, {8 * i}(a0)" for i in range(16)),
    SC.BRANCH: ("beq a0, a1, .+4",) * 16,
    SC.JUMP: ("j .+4",) * 16,
    SC.MUL: tuple(f"mul {r}, a0, a1" for r in _X),
    SC.DIV: tuple(f"div {r}, a0, a1" for r in _X),
    SC.FP: tuple(f"fmadd.s {r}, fa0, fa1, fa2" for r in _F),
    SC.FP_DIV: tuple(f"fdiv.s {r}, fa0, fa1" for r in _F),
}
#: Classes rvv-bench's tables time (the scalar rows of the page), by the row's name.
MEASURED = {SC.ALU: "add", SC.MUL: "mul"}


@functools.lru_cache(maxsize=1)
def modelled() -> dict:
    """The kept LLVM figures: ``{"llvm": version, core key: {class: cycles}}`` (empty without the file)."""
    if not PRICES.is_file():
        return {}
    return tomllib.loads(PRICES.read_text())


def median(row: Mapping[str, float]) -> float | None:
    """The middle of an rvv-bench row's prices (its cells by vtype), or None for an empty row."""
    vals = sorted(row.values())
    return vals[len(vals) // 2] if vals else None


def price(core_key: str, table: Mapping[tuple[str, bool], Mapping[str, float]], cls: str) -> tuple[float | None, bool]:
    """(cycles of one scalar instruction of class ``cls`` on the core, approximated?); ``table`` is the core's
    rvv-bench prices.  An unknown class is priced as integer arithmetic (approximated)."""
    llvm = modelled().get(core_key, {})

    def evidence(c: str) -> float | None:
        row = table.get((MEASURED[c], False)) if c in MEASURED else None
        got = median(row) if row else None
        return got if got is not None else llvm.get(c)

    got = evidence(cls)
    if got is not None:
        return got, False
    fallback = evidence(SC.MUL if cls == SC.DIV else SC.ALU)
    if fallback is None and cls == SC.DIV:
        fallback = evidence(SC.ALU)
    return fallback, fallback is not None


def source(core_key: str, table: Mapping[tuple[str, bool], Mapping[str, float]]) -> dict[str, str]:
    """Where each class's price of the core comes from, in words (the cost pages' note)."""
    llvm = modelled().get(core_key, {})
    out = {}
    for cls in SC.CLASSES:
        if cls in MEASURED and table.get((MEASURED[cls], False)):
            out[cls] = f"rvv-bench's {MEASURED[cls]}"
        elif cls in llvm:
            out[cls] = f"LLVM {modelled().get('llvm', '?')}'s {LLVM_CPUS[core_key]} model"
        else:
            out[cls] = "approximated" if price(core_key, table, cls)[0] is not None else "unpriced"
    return out


# ------------------------------------------------------------------ the LLVM figures


def measure(cpu: str) -> dict[str, float]:
    """Cycles per instruction of each class's block on LLVM's model of ``cpu`` (module docstring)."""
    from harness.cost.prices import mca

    t = mca.tools()
    if t is None:
        raise RuntimeError(f"no llvm-mca: {mca.INSTALL}")
    out = {}
    for cls, block in BLOCKS.items():
        cp = execute([t.mca, "-mtriple=riscv64", f"-mcpu={cpu}", "-mattr=+m,+f,+d,+c,+v",
                      f"-iterations={ITERATIONS}"], input="\n".join(block) + "\n", timeout=60).finished("llvm-mca")
        m = re.search(r"Total Cycles:\s+(\d+)", cp.stdout)
        if cp.returncode != 0 or not m:
            raise RuntimeError(f"llvm-mca -mcpu={cpu} on the {cls} block: {cp.stderr.strip()[-300:]}")
        out[cls] = round(int(m.group(1)) / (len(block) * ITERATIONS), 2)
    return out


def render() -> str:
    """The data file's text from llvm-mca now."""
    from harness.cost.prices import mca

    t = mca.tools()
    lines = ["# Scalar instructions' reciprocal throughput (cycles) by class on LLVM's scheduling model of each core",
             "# that has one: llvm-mca over a block of 16 independent instructions of the class.",
             "# Written by `rvvdiff prices scalar --write` (harness/cost/prices/scalar_prices.py says how the",
             "# figures are used); tests/test_scalar_prices.py recomputes them.",
             f'llvm = "{t.version if t else "?"}"']
    for key, cpu in LLVM_CPUS.items():
        lines += ["", f"[{key}]", f'cpu = "{cpu}"']
        lines += [f'"{cls}" = {v}' for cls, v in measure(cpu).items()]
    return "\n".join(lines) + "\n"


def show(core_key: str, table: Mapping[tuple[str, bool], Mapping[str, float]]) -> str:
    """One line: each class's price on the core and where it comes from."""
    src = source(core_key, table)
    cells = []
    for cls in SC.CLASSES:
        p = price(core_key, table, cls)[0]
        name = "alu" if cls == SC.ALU else cls.removeprefix("scalar ")
        cells.append(f"{name} {p:g} ({src[cls]})" if p is not None else f"{name} unpriced")
    return "; ".join(cells)


def write() -> Path:
    """The data file rewritten from llvm-mca now (``rvvdiff prices scalar --write``); its path."""
    PRICES.write_text(render())
    modelled.cache_clear()
    return PRICES

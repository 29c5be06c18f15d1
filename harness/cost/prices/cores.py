"""Estimated cycles on real RVV cores: a measured call's instruction mix priced with a core's
per-instruction throughput table.

Spike counts what a kernel asks a core to do (harness/cost/measure/spike_count.py), the same at every VLEN for
every core.  What a given core takes for it depends on how it executes each instruction: on the
SpacemiT X60 (VLEN 256, 128-bit datapath) a ``vadd.vv`` at LMUL 1 occupies the vector unit for one
cycle and a ``vrgather.vv`` at LMUL 8 for 256.  The tables here are rvv-bench's instruction
timings (camel-cdr/rvv-bench-results, MIT): for every instruction, SEW and LMUL, the cycles per
instruction measured on the real chip by looping over independent copies of it -- a reciprocal
throughput, at vl = VLMAX, tail and mask agnostic (blank cells of that table filled from the
undisturbed ones, which these cores execute alike).  One file per core in
``harness/data/cost/cores/``, made by ``rvvdiff prices import`` from the page.

The estimate of a call on a core is its mix (:attr:`harness.cost.measure.spike_count.Cost.mix`) priced
instruction by instruction: each vector instruction at the price of its name and the vtype in force,
each scalar one at its class's price (harness/cost/prices/scalar_prices.py: the core's measured ``add`` and ``mul``,
LLVM's model of the core for loads, stores, branches, divides and floating point).  It holds only
for a run at the core's own VLEN.  What it assumes and ignores, said in docs/cost.md: no overlap of
scalar and vector work, no dependency stalls (latency), no memory system (every load hits), vl not
mattering (true of these cores by the same measurements), the vtype found in the code
(harness/cost/measure/spike_count.py).  An instruction the table does not price (an indexed load, a bf16
widening FMA on a core without Zvfbfwma) is counted as unpriced and reported, never guessed; an
approximated price (a masked form priced as unmasked, a SEW the table left blank priced at the
nearest one measured, a whole-register move priced as the unit-stride one of the same size) is
counted apart.
"""

from __future__ import annotations

import functools
import html
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from harness.core.config import DATA_DIR
from harness.cost.prices import scalar_classes, scalar_prices

CORES_DIR = DATA_DIR / "cost" / "cores"
LMULS = ("mf8", "mf4", "mf2", "m1", "m2", "m4", "m8")
COLUMNS = tuple(f"e{sew}{lm}" for sew in (8, 16, 32, 64) for lm in LMULS)
#: A vector load or store in a mix key or a table's instruction name (unit-stride, strided, indexed, segment:
#: ``vle8.v``, ``vsse32.v``, ``vluxei8.v``, ``vlseg2e16.v``), not ``vsetvli`` or ``vsext``.
MEMORY_OP = re.compile(r"v[ls](?:[suo]?e\d|[suo]?seg\d|[uo]xei\d)")
#: The page's tables, in the order they fill a cell (vl = VLMAX; ta/ma first).
TABLES = ("tblMaa", "tblMau", "tblMua", "tblMuu")


@dataclass(frozen=True)
class Core:
    key: str  # file stem, e.g. "spacemit_x60"
    label: str  # "SpacemiT X60"
    vlen: int
    source: str  # where the prices come from (URL, commit)
    prices: Mapping[tuple[str, bool], Mapping[str, float]] = field(repr=False)

    #: What its table cannot price, in words (the file's ``# cannot price:`` line; "" when it prices every kind).
    cannot_price: str = ""

    @property
    def scalar(self) -> float | None:
        """Its integer arithmetic's price (harness/cost/prices/scalar_prices.py), or None when nothing prices it."""
        return scalar_prices.price(self.key, self.prices, scalar_classes.ALU)[0]


@dataclass(frozen=True)
class Estimate:
    cycles: float  # the whole call
    vector: float  # of which vector instructions
    unpriced: int  # instructions the table has no price for (not in cycles)
    approximated: int  # instructions priced by a stated approximation
    unpriced_names: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        return {"cycles": round(self.cycles, 1), "vector": round(self.vector, 1), "unpriced": self.unpriced,
                "approximated": self.approximated, "unpriced_names": list(self.unpriced_names)}


# ------------------------------------------------------------------ pricing


_WHOLE = re.compile(r"v(l|s)(\d)r(?:e(\d+))?\.v$")
_VT = re.compile(r"e(\d+)(m\w+)$")


def price(core: Core, key: str) -> tuple[float | None, bool]:
    """(cycles of one instruction of mix key ``key`` on ``core`` or None when unpriced, approximated?)."""
    if key.startswith("scalar"):  # by class (harness/cost/prices/scalar_prices.py)
        return scalar_prices.price(core.key, core.prices, key)
    if key.startswith("vset"):  # configuration: a scalar-pipe instruction on these cores
        return core.scalar, core.scalar is not None
    parts = key.split()
    name, vt = parts[0], parts[1] if len(parts) > 1 else "e?"
    masked = len(parts) > 2
    if vt not in COLUMNS:
        return None, False
    approx = False
    m = _WHOLE.match(name)
    if m:  # vl4re8.v / vs4r.v: as many bytes as a unit-stride access at LMUL 4
        eew = m.group(3) or "8"
        name, vt, approx = f"v{m.group(1)}e{eew}.v" if m.group(1) == "l" else f"vse{eew}.v", f"e{eew}m{m.group(2)}", True
    if re.fullmatch(r"vmv\dr\.v", name):  # whole-register move: its price does not depend on the vtype
        row = core.prices.get((name, False))
        return (scalar_prices.median(row), False) if row else (None, False)
    row = core.prices.get((name, masked))
    if row is None and masked:
        row, approx = core.prices.get((name, False)), True
    if not row:
        return None, False
    if vt in row:
        return row[vt], approx
    sew, lmul = _VT.match(vt).groups()
    near = sorted((abs(int(m[1]) - int(sew)), c) for c in row if (m := _VT.match(c)) and m[2] == lmul)
    return (row[near[0][1]], True) if near else (None, False)


def breakdown(core: Core, mix: Mapping[str, int]) -> dict[str, float]:
    """The estimate of ``mix`` on ``core`` by mix key: cycles of each priced key (unpriced ones left out)."""
    out = {}
    for key, n in mix.items():
        p, _ = price(core, key)
        if p is not None:
            out[key] = p * n
    return out


def estimate(core: Core, mix: Mapping[str, int]) -> Estimate:
    """The cycles of a call with instruction mix ``mix`` on ``core`` (module docstring)."""
    total = vector = 0.0
    unpriced = approximated = 0
    names: set[str] = set()
    for key, n in mix.items():
        p, approx = price(core, key)
        if p is None:
            unpriced += n
            names.add(key)
            continue
        total += p * n
        if not key.startswith("scalar"):
            vector += p * n
        approximated += n if approx else 0
    return Estimate(total, vector, unpriced, approximated, tuple(sorted(names)))


# ------------------------------------------------------------------ the tables


def _parse_file(path: Path) -> Core:
    meta: dict[str, str] = {}
    prices: dict[tuple[str, bool], dict[str, float]] = {}
    cols: list[str] = []
    for line in path.read_text().splitlines():
        if line.startswith("#"):
            k, _, v = line[1:].partition(":")
            meta[k.strip()] = v.strip()
            continue
        cells = line.split("\t")
        if cells[0] == "instruction":
            cols = cells[2:]
            continue
        prices[(cells[0], cells[1] == "v0.t")] = {c: float(x) for c, x in zip(cols, cells[2:]) if x}
    return Core(path.stem, meta.get("core", path.stem), int(meta["vlen"]), meta.get("source", ""), prices,
                meta.get("cannot price", ""))


@functools.lru_cache(maxsize=1)
def all_cores() -> tuple[Core, ...]:
    """The cores with a price table, by VLEN then name."""
    if not CORES_DIR.is_dir():
        return ()
    return tuple(sorted((_parse_file(p) for p in CORES_DIR.glob("*.tsv")), key=lambda c: (c.vlen, c.label)))


def vlens() -> frozenset[int]:
    """The VLENs some core's prices apply to."""
    return frozenset(c.vlen for c in all_cores())


def for_vlen(vlen: int) -> list[Core]:
    return [c for c in all_cores() if c.vlen == vlen]


def estimates(vlen: int, mix: Mapping[str, int]) -> dict[str, dict]:
    """{core key: estimate} for the cores at ``vlen`` (empty without a mix)."""
    if not mix:
        return {}
    return {c.key: estimate(c, mix).as_dict() for c in for_vlen(vlen)}


# ------------------------------------------------------------------ import


def _cells(table_html: str) -> dict[tuple[str, bool], list[str]]:
    rows: dict[tuple[str, bool], list[str]] = {}
    for text, rest in re.findall(r"<tr><td>([^<]*)</td>(.*?)</tr>", table_html, re.S):
        text = html.unescape(text).strip()
        rows[(text.split()[0], text.endswith("v0.t"))] = re.findall(r"<td>([^<]*)</td>", rest)
    return rows


def import_page(page: str, header: str) -> str:
    """A core's price file (TSV) from an rvv-bench results page: table ``tblMaa``, blank cells filled
    from the other vl = VLMAX tables (:data:`TABLES`)."""
    merged: dict[tuple[str, bool], list[str]] = {}
    for tid in TABLES:
        i = page.find(f'<table id="{tid}"')
        if i < 0:
            continue
        for k, cells in _cells(page[i:page.index("</table>", i)]).items():
            cells = [c.strip() for c in cells][:len(COLUMNS)]
            have = merged.setdefault(k, [""] * len(COLUMNS))
            for j, c in enumerate(cells):
                if not have[j] and c:
                    have[j] = f"{float(c):g}"
    if not merged:
        raise ValueError("no instruction table (tblMaa...) in the page")
    head = [header.rstrip("\n")]
    if not any(MEMORY_OP.match(n) for n, _ in merged):  # the older pages (C908, XiangShan V3) time no memory op
        head.append("# cannot price: vector loads and stores (the page times no memory instruction: every vle*, vse*, "
                    "strided, indexed and segment access is counted as unpriced, so the estimate is of the arithmetic)")
    lines = [*head, "\t".join(["instruction", "mask", *COLUMNS])]
    lines += ["\t".join([n, "v0.t" if m else "", *cells]) for (n, m), cells in sorted(merged.items())]
    return "\n".join(lines) + "\n"


def import_core(page: Path, *, key: str, core: str, vlen: int, source: str = "") -> Path:
    """The table of rvv-bench-results' page of a core (``<core>/index.html``) written as ``CORES_DIR/<key>.tsv``
    (``rvvdiff prices import``), headed by the core's name, VLEN and source; the file written."""
    header = (f"# core: {core}\n# vlen: {vlen}\n# source: {source}\n"
              "# prices: cycles per instruction (reciprocal throughput) at vl = VLMAX, by the vtype in force; "
              "tables tblMaa, then tblMau / tblMua / tblMuu for blank cells\n")
    CORES_DIR.mkdir(parents=True, exist_ok=True)
    out = CORES_DIR / f"{key}.tsv"
    out.write_text(import_page(page.read_text(), header))
    return out

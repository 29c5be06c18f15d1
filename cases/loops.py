"""Loop levels of every kernel family, the sizes the strategies draw for each, and the size table.

A kernel's bugs hide in its loops: the second trip of a strip-mined loop, the
leftover after an unrolled main loop, the k-steps of a GEMM, the blocks of a
quantized row processed in pairs, the tiles and chunks of flash attention.
Each family module declares its loops as the tree implements them (``Loop``),
and a function that says, per size variable, what its tests draw at a VLEN
(``Drawn``): the sizes every run checks (fixed cases before or after the draws, sweeps, built
by the same function the tests call) and the range the random draws cover.

A loop level is *reached* at a VLEN when a size checked on every run makes at
least two full iterations and then a remainder (``2 * step + r`` with
``0 < r < step``, or any larger size that is not a multiple of the step); a
loop without a remainder by construction (``remainder=False``) needs two full
iterations.  Real models' sizes (hidden 2048-8192, FFN 5632-14336, head dim
64-256, ...) must be drawn at least occasionally: the random range or a size
of every run reaches the smallest of them.

``rvvdiff docs loops`` (through cases/families.py, which knows every family) prints every family's
table; ``--write`` puts each into its docs page between ``<!-- loops:FAMILY -->`` and ``<!-- /loops -->``.
``tests/test_loops.py`` fails when a loop is not reached at some VLEN, when no
real-model size is drawn, or when a docs table is out of date.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.core.config import VLENS

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Loop:
    """One loop level of a kernel as the tree implements it.

    ``step(vlen)`` is the amount of ``var`` one full iteration consumes at that
    VLEN (elements of a strip-mined loop: VLMAX times the unroll; k-steps of a
    GEMM: its vector length; blocks of a row processed two at a time: 2).
    ``vlens`` are the VLENs at which this loop runs at all (a kernel variant
    for VLEN 512 only, say).
    """

    kernels: str
    level: str
    var: str
    step: Callable[[int], int]
    remainder: bool = True
    real: Sequence[int] = ()
    vlens: Sequence[int] = tuple(VLENS)
    source: str = ""  # file:function where the loop is, for the reader of the table

    def __post_init__(self) -> None:
        for v in self.vlens:
            if self.step(v) < 1:
                raise ValueError(f"{self.kernels} / {self.level}: step({v}) = {self.step(v)} < 1")


@dataclass(frozen=True)
class Drawn:
    """What a family's tests draw of one size variable at one VLEN."""

    every_run: Sequence[int]  # sizes checked on every run (fixed cases, sweeps)
    lo: int  # smallest random draw
    hi: int  # largest random draw

    def __post_init__(self) -> None:
        if self.lo > self.hi:
            raise ValueError(f"Drawn: lo={self.lo} > hi={self.hi}")


@dataclass(frozen=True)
class Family:
    name: str
    doc: str  # docs page (relative to the repository) that carries the table
    loops: Sequence[Loop]
    drawn: Callable[[int], Mapping[str, Drawn]]  # VLEN -> size variable -> what is drawn
    notes: Sequence[str] = field(default_factory=tuple)


def witness(loop: Loop, sizes: Sequence[int], vlen: int) -> int | None:
    """The smallest size among ``sizes`` that makes two full iterations of ``loop`` at ``vlen``
    and then a remainder (or, without a remainder by construction, two full iterations)."""
    step = loop.step(vlen)
    ok = [s for s in sizes if s >= 2 * step and (not loop.remainder or s % step)]
    return min(ok) if ok else None


def real_drawn(loop: Loop, drawn: Drawn) -> int | None:
    """The largest drawn size (every run or random) when it reaches the smallest real-model
    size of ``loop``; None when real sizes are not drawn (or the loop lists none)."""
    if not loop.real:
        return None
    top = max([drawn.hi, *drawn.every_run])
    return top if top >= min(loop.real) else None


@dataclass(frozen=True)
class Row:
    loop: Loop
    steps: dict[int, int]
    witnesses: dict[int, int | None]
    ranges: dict[int, tuple[int, int]]
    real: int | None

    @property
    def reached(self) -> bool:
        return all(w is not None for w in self.witnesses.values())


def rows(family: Family) -> list[Row]:
    out = []
    for loop in family.loops:
        steps, wit, rng = {}, {}, {}
        real = None
        for vlen in loop.vlens:
            d = family.drawn(vlen)
            if loop.var not in d:
                raise KeyError(f"{family.name}: loop {loop.level!r} iterates over {loop.var!r}, "
                               f"but drawn({vlen}) describes only {sorted(d)}")
            dv = d[loop.var]
            steps[vlen] = loop.step(vlen)
            wit[vlen] = witness(loop, dv.every_run, vlen)
            rng[vlen] = (min([dv.lo, *dv.every_run]), max([dv.hi, *dv.every_run]))
            r = real_drawn(loop, dv)
            real = r if real is None or (r is not None and r > real) else real
        out.append(Row(loop, steps, wit, rng, real))
    return out


def problems(family: Family) -> list[str]:
    """Every loop level not reached at some VLEN, and every loop whose real sizes are not drawn."""
    out = []
    for r in rows(family):
        for vlen, w in r.witnesses.items():
            if w is None:
                out.append(f"{family.name}: {r.loop.kernels} / {r.loop.level} ({r.loop.var}, step "
                           f"{r.steps[vlen]}): no size of every run makes two full iterations"
                           f"{' and a remainder' if r.loop.remainder else ''} at VLEN {vlen}")
        if r.loop.real and r.real is None:
            out.append(f"{family.name}: {r.loop.kernels} / {r.loop.level}: real-model sizes of {r.loop.var} "
                       f"({', '.join(map(str, r.loop.real))}) are never drawn")
    return out


def _span(values: Mapping[int, object]) -> str:
    """'16 / 32 / 64 / 128' across VLENs, collapsed when equal."""
    vs = [str(v) for v in values.values()]
    return vs[0] if len(set(vs)) == 1 else " / ".join(vs)


def table(family: Family) -> str:
    """The family's size table in Markdown."""
    head = ("| kernels | loop level | size | step at VLEN " + " / ".join(map(str, VLENS)) +
            " | drawn (min-max) | reached: 2 full + remainder, witness at each VLEN | real models | real drawn |")
    lines = [head, "|" + "---|" * 8]
    for r in rows(family):
        wit = " / ".join(f"{v}: {w}" if w is not None else f"{v}: **no**" for v, w in r.witnesses.items())
        real = ", ".join(map(str, r.loop.real)) or "-"
        real_ok = "-" if not r.loop.real else (f"yes (up to {r.real})" if r.real is not None else "**no**")
        steps = " / ".join(str(r.steps.get(v, "-")) for v in VLENS)
        rng = _span({v: f"{a}-{b}" for v, (a, b) in r.ranges.items()})
        lines.append(f"| {r.loop.kernels} | {r.loop.level} | {r.loop.var} | {steps} | {rng} | {wit} | {real} | {real_ok} |")
    lines += [f"\n{n}" for n in family.notes]
    return "\n".join(lines) + "\n"


#: Every family, by name, as registered by its module.
FAMILIES: dict[str, Family] = {}


def register(family: Family) -> Family:
    """Called by a family's definition module on its ``Family``; cases/families.py imports every one."""
    FAMILIES[family.name] = family
    return family


_BLOCK = re.compile(r"(<!-- loops:(?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /loops -->)", re.S)


def render_doc(text: str, fams: Mapping[str, Family], *, only: bool = False) -> str:
    """``text`` with every ``<!-- loops:NAME -->`` block replaced by NAME's current table
    (with ``only``: just the blocks of ``fams``, others left as they are)."""
    def sub(m: re.Match[str]) -> str:
        name = m.group("name")
        if only and name not in fams:
            return m.group(0)
        if name not in fams:
            raise KeyError(f"docs block names family {name!r}; known: {', '.join(sorted(fams))}")
        return m.group(1) + table(fams[name]) + m.group(4)
    return _BLOCK.sub(sub, text)


def doc_blocks(text: str) -> list[str]:
    return [m.group("name") for m in _BLOCK.finditer(text)]


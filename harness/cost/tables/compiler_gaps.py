"""Cost per compiler: the cost cases measured on the builds of two or more compilers (``rvvdiff cost
--cc gcc14,clang``, docs/cost.md), side by side, and the kernels where one compiler's code is dearer
than another's.

A row here is a cost-suite row (harness/cost/tables/suite_tables.py) of one compiler's build; the same case,
VLEN and ISA build of two compilers is the same call on the same inputs, so their instruction
counts compare exactly.  *Dearer* is judged on two measures: the instructions retired, and the
instruction mix priced as estimated cycles on each real core of that VLEN (harness/cost/prices/cores.py),
because one compiler may retire fewer instructions that each cost more (an LMUL-8 reduction
against a few LMUL-1 adds).  A pair is listed when either measure differs by more than the
threshold (default :data:`GAP`, 10 %); which compiler is the dearer one is said by the
instructions when they differ beyond the threshold, else by the estimate that does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from harness.cost.prices import cores
from harness.cost.tables.suite_tables import Key

#: One compiler's code is listed as dearer than another's beyond this fraction (instructions or estimated cycles).
GAP = 0.10

Rows = dict[Key, dict[str, Any]]


@dataclass(frozen=True)
class Gap:
    """A call whose code from one compiler is dearer than from another at one target."""

    case: str
    function: str
    vlen: int
    isa: str
    dearer: str  # the compiler whose code costs more
    cheaper: str
    dear: int  # instructions of the dearer compiler's call
    cheap: int
    #: dearer / cheaper estimated cycles on the cores of this VLEN (core label -> ratio), where both have a mix.
    on_cores: dict[str, float] = field(default_factory=dict, compare=False)

    @property
    def ratio(self) -> float:
        """dearer / cheaper instructions (below 1 when only an estimate makes it dearer)."""
        return self.dear / self.cheap

    def worst(self) -> float:
        """The largest dearer / cheaper ratio of any measure (the list's order)."""
        return max([self.ratio, *self.on_cores.values()])

    def describe(self) -> str:
        est = "".join(f"; est. {c} {(r - 1) * 100:+.1f} %" for c, r in self.on_cores.items())
        return (f"{self.function} ({self.case}) at VLEN {self.vlen}, {self.isa}: {self.dearer} dearer than "
                f"{self.cheaper}: {self.dear} against {self.cheap} instructions ({(self.ratio - 1) * 100:+.1f} %{est})")

    def as_dict(self) -> dict[str, Any]:
        return {"case": self.case, "function": self.function, "vlen": self.vlen, "isa": self.isa,
                "dearer": self.dearer, "cheaper": self.cheaper, "dear": self.dear, "cheap": self.cheap,
                "ratio": round(self.ratio, 4), "on_cores": {c: round(r, 4) for c, r in self.on_cores.items()}}


def _core_cycles(r: dict[str, Any]) -> dict[str, float]:
    """{core label: estimated cycles} of a row at the cores of its VLEN (none without an instruction mix)."""
    est = cores.estimates(int(r["vlen"]), r.get("mix") or {})
    return {c.label: est[c.key]["cycles"] for c in cores.for_vlen(int(r["vlen"])) if c.key in est}


def _beyond(ratio: float, threshold: float) -> bool:
    return ratio > 1 + threshold or ratio < 1 / (1 + threshold)


def gaps(rows: dict[str, Rows], threshold: float = GAP) -> list[Gap]:
    """Every (case, VLEN, ISA build) measured by two compilers whose instructions or estimated cycles on
    some core differ by more than ``threshold``, one :class:`Gap` per pair of compilers, largest first."""
    out: list[Gap] = []
    names = list(rows)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            for key in sorted(rows[a].keys() & rows[b].keys()):
                ra, rb = rows[a][key], rows[b][key]
                if not ra["instret"] or not rb["instret"]:
                    continue
                ca, cb = _core_cycles(ra), _core_cycles(rb)
                est = {c: ca[c] / cb[c] for c in ca if c in cb and ca[c] and cb[c]}
                by_count = ra["instret"] / rb["instret"]
                beyond = [r for r in est.values() if _beyond(r, threshold)]
                if not _beyond(by_count, threshold) and not beyond:
                    continue
                lead = by_count if _beyond(by_count, threshold) else max(beyond, key=lambda r: abs(math.log(r)))
                (dearer, rd), (cheaper, rc) = ((a, ra), (b, rb)) if lead > 1 else ((b, rb), (a, ra))
                on_cores = {c: (r if dearer == a else 1 / r) for c, r in est.items()}
                out.append(Gap(key[0], ra["function"], key[1], key[2], dearer, cheaper, rd["instret"], rc["instret"],
                               on_cores))
    return sorted(out, key=lambda g: (-g.worst(), g.case, g.isa, g.vlen))


def markdown(rows: dict[str, Rows], found: list[Gap], threshold: float = GAP) -> str:
    """The comparison section of ``cost.md``: the gaps, then instructions (and estimated cycles) per
    call for each compiler, per kernel and target."""
    names = list(rows)
    out = [f"## Cost per compiler: {', '.join(names)}", "",
           f"The same calls on each compiler's build. Listed: a kernel whose code from one compiler is more "
           f"than {threshold * 100:g} % dearer than another's at some VLEN, in instructions or in estimated "
           f"cycles on a core of that VLEN (docs/cost.md).", "",
           f"**Dearer by compiler** ({len(found)}):"]
    out += [f"- {g.describe()}" for g in found] or ["- none"]
    keys = sorted(set().union(*(r.keys() for r in rows.values())), key=lambda k: (k[0], k[2], k[1]))
    head = ["kernel", "size", "ISA build", "VLEN", *(f"{n} instr." for n in names),
            *(f"{n} / {names[0]}" for n in names[1:]), "est. cycles per core (" + " / ".join(names) + ")"]
    out += ["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key in keys:
        per = [rows[n].get(key) for n in names]
        r0 = next(r for r in per if r)
        counts = [str(r["instret"]) if r else "-" for r in per]
        ratios = [f"{r['instret'] / per[0]['instret']:.3f}" if r and per[0] and per[0]["instret"] else "-"
                  for r in per[1:]]
        cyc = [_core_cycles(r) if r else {} for r in per]
        est = "; ".join(f"{c}: " + " / ".join(f"{x[c]:.0f}" if c in x else "-" for x in cyc)
                        for c in dict.fromkeys(c for x in cyc for c in x))
        out.append(f"| {r0['function']} | {r0['size']} | {key[2]} | {key[1]} | " + " | ".join([*counts, *ratios, est])
                   + " |")
    return "\n".join(out) + "\n"


def as_json(rows: dict[str, Rows], found: list[Gap], threshold: float = GAP) -> dict[str, Any]:
    return {"compilers": list(rows), "threshold": threshold, "dearer": [g.as_dict() for g in found]}

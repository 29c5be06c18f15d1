"""The memory system around a priced core, from its published figures (harness/data/cost/memory.toml), and the
roofline that sets a call's memory traffic against its compute estimate.

Every other estimate here prices one core's instruction stream with every load an L1 hit.  A board runs its
threads over caches it shares and one DRAM bus (the SpacemiT K1: eight X60 cores, two clusters of four on one
512 KiB L2 each, one 32-bit LPDDR4X bus at 2666 MT/s, 10.66 GB/s for all eight).  This module holds what is
published of that per core -- cache sizes, sets and lines (so ways), which cores share a cache, the DRAM bus --
as :class:`MemorySystem`; the cache model of a traffic count is configured from it (:meth:`Cache.spike_option`:
Spike's ``--dc`` / ``--l2`` form), and :func:`roofline` sets the traffic against the compute estimate.

:func:`roofline` is a **ceiling**, not a bound on what a board reaches: the compute estimate it takes is itself a
sum of throughputs (no stall); the memory roofs are one core's measured read streams times the threads, capped by
the bus's peak for DRAM (what eight cores sustain together is not published, and a board sustains less than the
peak); and it takes the largest of the roofs as if the others were hidden under it completely.  Terms a figure or
a count is missing for (the latency of dependent misses: published for the X60, but which misses wait on an
earlier one is not counted; any figure a core's entry lacks) are left out and named
(:attr:`Roofline.left_out`), never guessed.

No figure here comes from a calibration row (tests/test_calibration.py checks that no estimator module reaches
one; the data file says where each figure is published).
"""

from __future__ import annotations

import functools
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.core.config import DATA_DIR
from harness.core.errors import RvvdiffError

DATA = DATA_DIR / "cost" / "memory.toml"
LEVELS = ("l1d", "l1i", "l2")
#: The page that carries :func:`markdown`, relative to the checkout, between ``<!-- memory -->`` markers.
DOC = "docs/cost.md"
_BLOCK = re.compile(r"(<!-- memory -->\n)(.*?)(<!-- /memory -->)", re.S)


class MemoryDataError(RvvdiffError, ValueError):
    """harness/data/cost/memory.toml does not hold what this module needs; the message names the core and field."""


@dataclass(frozen=True)
class Cache:
    size: int  # bytes
    sets: int
    line: int  # bytes
    shared_by: int  # cores on this one cache

    @property
    def ways(self) -> int:
        return self.size // (self.sets * self.line)

    def spike_option(self) -> str:
        """Spike's cache-model form ``SETS:WAYS:LINE`` (``--ic=`` / ``--dc=`` / ``--l2=``)."""
        return f"{self.sets}:{self.ways}:{self.line}"


@dataclass(frozen=True)
class Dram:
    kind: str
    bus_bits: int
    mt_s: int  # millions of transfers a second
    source: str

    @property
    def peak_bytes_per_s(self) -> float:
        """The bus's peak: bytes a transfer times transfers a second, for the whole chip."""
        return self.bus_bits / 8 * self.mt_s * 1e6


@dataclass(frozen=True)
class Stream:
    """One core's measured read stream from a level (its L2, or DRAM): bytes a cycle of the core's clock, on a
    board whose core ran at ``clock_ghz``."""

    bytes_per_cycle: float
    clock_ghz: float
    source: str

    @property
    def bytes_per_s(self) -> float:
        """The stream as measured, in bytes a second (at the measuring board's clock)."""
        return self.bytes_per_cycle * self.clock_ghz * 1e9


@dataclass(frozen=True)
class Latency:
    """One core's measured time for a dependent load served by its L2 and by DRAM."""

    l2_ns: float
    dram_ns: float
    source: str


@dataclass(frozen=True)
class MemorySystem:
    core: str  # the price table's key, e.g. "spacemit_x60"
    soc: str
    source: str
    missing: tuple[str, ...]
    caches: Mapping[str, Cache]  # level ("l1d", "l1i", "l2") -> cache, the published ones only
    dram: Dram | None = None
    cores: int = 0
    cluster: int = 0
    l2_read: Stream | None = None
    dram_read: Stream | None = None
    latency: Latency | None = None

    def spike_options(self) -> list[str]:
        """Spike's cache model of this core (``--ic=``, ``--dc=``, ``--l2=``), the levels published; [] for none."""
        flag = {"l1i": "--ic", "l1d": "--dc", "l2": "--l2"}
        return [f"{flag[lv]}={self.caches[lv].spike_option()}" for lv in LEVELS if lv in self.caches]


def _cache(core: str, level: str, raw: Mapping) -> Cache:
    try:
        c = Cache(int(raw["size"]), int(raw["sets"]), int(raw["line"]), int(raw.get("shared_by", 1)))
    except (KeyError, TypeError, ValueError) as e:
        raise MemoryDataError(f"{DATA}: [{core}] {level}: needs size, sets and line in bytes ({e})") from None
    if c.size <= 0 or c.sets <= 0 or c.line <= 0 or c.size % (c.sets * c.line):
        raise MemoryDataError(f"{DATA}: [{core}] {level}: size {c.size} is not sets x ways x line "
                              f"({c.sets} x ? x {c.line})")
    for what, n in (("sets", c.sets), ("line", c.line)):
        if n & (n - 1):
            raise MemoryDataError(f"{DATA}: [{core}] {level}: {what} {n} is not a power of two (Spike's model "
                                  "needs one)")
    return c


def _stream(core: str, what: str, raw: Mapping) -> Stream:
    try:
        s = Stream(float(raw["bytes_per_cycle"]), float(raw["clock_ghz"]), str(raw["source"]))
    except (KeyError, TypeError, ValueError) as e:
        raise MemoryDataError(f"{DATA}: [{core}.{what}] needs bytes_per_cycle, clock_ghz and source ({e})") from None
    if s.bytes_per_cycle <= 0 or s.clock_ghz <= 0 or not s.source:
        raise MemoryDataError(f"{DATA}: [{core}.{what}] needs a positive bytes_per_cycle and clock_ghz and a source")
    return s


def _latency(core: str, raw: Mapping) -> Latency:
    try:
        lat = Latency(float(raw["l2_ns"]), float(raw["dram_ns"]), str(raw["source"]))
    except (KeyError, TypeError, ValueError) as e:
        raise MemoryDataError(f"{DATA}: [{core}.latency] needs l2_ns, dram_ns and source ({e})") from None
    if not lat.source:
        raise MemoryDataError(f"{DATA}: [{core}.latency] says no source")
    return lat


def parse(text: str) -> dict[str, MemorySystem]:
    """Every core's memory system from the data file's text (module docstring); raises :class:`MemoryDataError`."""
    out: dict[str, MemorySystem] = {}
    for core, raw in tomllib.loads(text).items():
        if not raw.get("source"):
            raise MemoryDataError(f"{DATA}: [{core}] says no source: every figure needs one")
        caches = {lv: _cache(core, lv, raw[lv]) for lv in LEVELS if lv in raw}
        dram = None
        if "dram" in raw:
            d = raw["dram"]
            if not d.get("source"):
                raise MemoryDataError(f"{DATA}: [{core}] dram says no source")
            dram = Dram(str(d["kind"]), int(d["bus_bits"]), int(d["mt_s"]), str(d["source"]))
        streams = {w: _stream(core, w, raw[w]) for w in ("l2_read", "dram_read") if w in raw}
        out[core] = MemorySystem(core, str(raw.get("soc", "")), str(raw["source"]), tuple(raw.get("missing", ())),
                                 caches, dram, int(raw.get("cores", 0)), int(raw.get("cluster", 0)),
                                 streams.get("l2_read"), streams.get("dram_read"),
                                 _latency(core, raw["latency"]) if "latency" in raw else None)
    return out


@functools.lru_cache(maxsize=1)
def systems(path: Path = DATA) -> dict[str, MemorySystem]:
    return parse(path.read_text())


@dataclass(frozen=True)
class Roofline:
    """The time one unit of work (a token, a call) takes by the largest of its roofs (module docstring)."""

    compute_s: float
    dram_s: float | None
    left_out: tuple[str, ...]
    l2_s: float | None = None

    @property
    def seconds(self) -> float:
        return max(self.compute_s, self.dram_s or 0.0, self.l2_s or 0.0)

    @property
    def bound(self) -> str:
        roofs = {"compute": self.compute_s, "DRAM": self.dram_s or 0.0, "L2": self.l2_s or 0.0}
        return max(roofs, key=lambda k: roofs[k])


def dram_bandwidth(system: MemorySystem, threads: int) -> float | None:
    """Bytes a second ``threads`` cores read from DRAM together: each at one core's measured read stream, and no
    more than the bus's peak, which they share (what they sustain together is not published: a ceiling); the peak
    alone without a measured stream; None without a published bus."""
    if system.dram is None:
        return None
    peak = system.dram.peak_bytes_per_s
    return min(threads * system.dram_read.bytes_per_s, peak) if system.dram_read else peak


def roofline(cycles: float, dram_bytes: float, system: MemorySystem, *, clock_hz: float, threads: int,
             l2_bytes: float | None = None) -> Roofline:
    """The ceiling on a unit of work run on ``threads`` cores of ``system``'s chip: ``cycles`` (one core's compute
    estimate of the whole unit) shared by the threads; ``dram_bytes`` (the unit's traffic between the L2s and DRAM,
    all threads together) over :func:`dram_bandwidth`; ``l2_bytes`` (between the L1s and the L2s, all threads
    together) over ``threads`` times one core's measured read stream from its L2 (the L2's rate to four cores at
    once is not published: each core is taken to get one core's rate).  Terms without a published figure or a
    count are left out and named."""
    if threads <= 0 or clock_hz <= 0:
        raise ValueError(f"roofline: threads {threads} and clock {clock_hz} Hz must be positive")
    left = []
    if system.latency is None:
        left.append("the latency of dependent misses (not published)")
    else:
        left.append(f"the latency of dependent misses (published: {system.latency.l2_ns:g} ns from the L2, "
                    f"{system.latency.dram_ns:g} ns from DRAM; how many of the misses wait on an earlier one is not "
                    "counted)")
    l2_s = None
    if l2_bytes is None:
        left.append("the L2's traffic (not counted)")
    elif system.l2_read is None:
        left.append("the L2's bandwidth (not published)")
    else:
        l2_s = l2_bytes / (threads * system.l2_read.bytes_per_cycle * clock_hz)
    bandwidth = dram_bandwidth(system, threads)
    if bandwidth is None:
        left.insert(0, f"DRAM ({system.soc}: no published DRAM interface)")
        return Roofline(cycles / threads / clock_hz, None, tuple(left), l2_s)
    return Roofline(cycles / threads / clock_hz, dram_bytes / bandwidth, tuple(left), l2_s)


def _geometry(c: Cache | None) -> str:
    if c is None:
        return "-"
    shared = f", {c.shared_by} cores" if c.shared_by > 1 else ""
    return f"{c.size // 1024} KiB, {c.ways}-way, {c.line} B lines{shared}"


def _read(s: Stream | None) -> str:
    return f"{s.bytes_per_cycle:g} B/cycle ({s.bytes_per_s / 1e9:.2f} GB/s at {s.clock_ghz:g} GHz)" if s else "-"


def markdown() -> str:
    """The data file as a table: each core's caches, DRAM bus and peak, one core's measured read streams and load
    latencies, and what is not published."""
    out = ["| core (chip) | L1D | L1I | L2 | DRAM (peak, whole chip) | one core reads from L2 / DRAM (measured) | "
           "dependent load from L2 / DRAM (measured) | not published |", "|---|---|---|---|---|---|---|---|"]
    for s in systems().values():
        d = s.dram
        dram = f"{d.bus_bits}-bit {d.kind}, {d.mt_s} MT/s ({d.peak_bytes_per_s / 1e9:.2f} GB/s)" if d else "-"
        streams = f"{_read(s.l2_read)} / {_read(s.dram_read)}" if s.l2_read or s.dram_read else "-"
        lat = f"{s.latency.l2_ns:g} ns / {s.latency.dram_ns:g} ns" if s.latency else "-"
        out.append(f"| `{s.core}` ({s.soc}) | {_geometry(s.caches.get('l1d'))} | {_geometry(s.caches.get('l1i'))} | "
                   f"{_geometry(s.caches.get('l2'))} | {dram} | {streams} | {lat} | {', '.join(s.missing) or '-'} |")
    return "\n".join(out) + "\n"


def render_doc(text: str) -> str:
    """``text`` with its ``<!-- memory -->`` block replaced by the current :func:`markdown`."""
    if not _BLOCK.search(text):
        raise ValueError(f"{DOC} has no <!-- memory --> ... <!-- /memory --> block")
    return _BLOCK.sub(lambda m: m.group(1) + markdown() + m.group(3), text, count=1)

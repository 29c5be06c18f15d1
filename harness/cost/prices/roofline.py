"""The third estimate: a call's or a model-shaped token's time as the largest of its roofs on the board's cores.

The two cycle estimates (rvv-bench's X60 prices, LLVM's X60 model: harness/cost/prices/estimate_pair.py) price one
core's instructions with every load an L1 hit.  This sets each of them against the call's memory traffic through
the X60's published caches (``traffic`` of a cost row, counted by Spike's cache model:
harness/cost/measure/spike_traffic.py) with :func:`memory_system.roofline`: the time is the largest of

* the compute: the estimate's cycles shared by the threads, at the clock;
* the DRAM: the bytes between the L2s and DRAM over the threads' share of the bus (one core's measured read stream
  times the threads, no more than the bus's peak: harness/data/cost/memory.toml);
* the L2: the bytes between the L1s and the L2s over the threads times one core's measured read stream from its L2;

and what has no published figure or no count (the latency of the misses that wait on an earlier one) is left out,
named.  A **ceiling** estimate, not a bound: the compute is a sum of throughputs, each roof hides the others
completely, and the streams are one core's taken for every core.

* :func:`call`: one call of a kernel's cost row, each of ``threads`` cores making its own (the threads of a
  mul_mat each take their share of the rows): the time of one call.
* :func:`token`: one token of a model-shaped case (harness/cost/prices/per_token.py) on ``threads`` cores: its
  cycles and its traffic per token, scaled to a layer by rows as the cycles are.  A layer's weights do not fit a
  cache, so a pass reads each at least once from DRAM into the L2 and from the L2 into the L1 (a line the L2
  fills from DRAM, the L1 fills from the L2); the slices' own traffic undercounts that (their weights were
  placed, and so cached, just before the compute; a slice that fits the caches moves next to nothing, and two
  such slices scale to noise), so the DRAM and the L2 bytes of a token are each the larger of the slices' figure
  and the weights once a pass: a floor, and the roofline a ceiling still.

BEFORE's time over AFTER's is the estimated speed-up (:func:`ratios`).  Nothing here reads a calibration row: the
threads and the clock are the caller's (the board's run), the rest the cost rows' and the memory data file's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.cost.prices import estimate_pair, memory_system, per_token

#: The estimators a roofline is computed for (the instruction count is no core's cycles).
ROOFED = ("table", "mca")
#: The core clock of the rows' boards (the SpacemiT K1's X60 on a BPI-F3), GHz.
CLOCK_GHZ = 1.6


def system() -> memory_system.MemorySystem:
    return memory_system.systems()[estimate_pair.X60_KEY]


def _cycles(row: Mapping[str, Any], estimator: str) -> float | None:
    if estimator == "table":
        got = (row.get("estimates") or {}).get(estimate_pair.X60_KEY) or {}
        return float(got["cycles"]) if got.get("cycles") else None
    return estimate_pair.mca_cycles(dict(row)) if estimator == "mca" else None


def call(row: Mapping[str, Any], estimator: str, *, threads: int, clock_ghz: float = CLOCK_GHZ,
         on: memory_system.MemorySystem | None = None) -> memory_system.Roofline | None:
    """One call of ``row`` (a cost row with its X60 traffic) while each of ``threads`` cores makes one: the
    roofline of the ``threads`` calls together, which is one call's time; None without the estimate or traffic."""
    cycles, traffic = _cycles(row, estimator), (row.get("traffic") or {}).get(estimate_pair.X60_KEY)
    if cycles is None or not traffic:
        return None
    return memory_system.roofline(cycles * threads, float(traffic["dram_bytes"]) * threads, on or system(),
                                  clock_hz=clock_ghz * 1e9, threads=threads,
                                  l2_bytes=float(traffic["l2_bytes"]) * threads)


def token(result: per_token.Result, estimator: str, *, threads: int, clock_ghz: float = CLOCK_GHZ,
          on: memory_system.MemorySystem | None = None) -> memory_system.Roofline | None:
    """One token of a model-shaped result on ``threads`` cores (module docstring); None without the estimate or
    the traffic."""
    t = result.per_token
    if estimator not in t or any(k not in t for k in per_token.TRAFFIC):
        return None
    weights = per_token.weight_bytes(result.spec) / result.batch
    return memory_system.roofline(t[estimator], max(t["dram_bytes"], weights), on or system(),
                                  clock_hz=clock_ghz * 1e9, threads=threads, l2_bytes=max(t["l2_bytes"], weights))


def ratios(before: dict[str, memory_system.Roofline | None], after: dict[str, memory_system.Roofline | None],
           before_units: float = 1.0, after_units: float = 1.0) -> dict[str, dict[str, Any]]:
    """Per estimator with a roofline on both sides: BEFORE's time per unit over AFTER's (``x``) and which roof
    bound each (``bound``: ``BEFORE / AFTER``)."""
    out = {}
    for e in ROOFED:
        b, a = before.get(e), after.get(e)
        if b is not None and a is not None:
            out[e] = {"x": (b.seconds / before_units) / (a.seconds / after_units), "bound": f"{b.bound} / {a.bound}"}
    return out

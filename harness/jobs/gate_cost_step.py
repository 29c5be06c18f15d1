"""The PR gate's cost step (docs/gate.md: the cost lists): the cost cases (costs/) the change reaches,
measured under Spike on HEAD and on BASE with ``rvvdiff cost``'s runs (harness/jobs/cost_suite_runs.py),
at the VLENs and ISA builds :func:`cost_targets` picks; the lists come from
harness/cost/tables/gate_lists.py.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from harness.core.config import SPIKE_VLENS, VLENS
from harness.core.matrix import Matrix
from harness.cost.tables import compiler_gaps, suite_tables
from harness.cost.tables.gate_lists import COST_THRESHOLD, CostLists, cost_lists, merged, not_measured
from harness.emulators import spike
from harness.jobs import cost_suite_runs

#: What the cost step measures when the gate is given no ``--vlen`` (or ``all``) / ``--isa``: every VLEN Spike runs
#: (where the RVV kernels dispatch differently) in ggml's default riscv64 build only.  Every ISA build
#: too took 27 min for a one-function change on 2 cores, this 8 (docs/gate.md: the cost lists).
COST_VLENS: tuple[int, ...] = SPIKE_VLENS
COST_ISAS: tuple[str, ...] = ("zvfh",)
#: Deadline of one measured call, as ``rvvdiff cost``'s (Spike's slowdown applies on top).
COST_KERNEL_TIMEOUT = 120.0
#: Why a step without Spike is incomplete, and how to run the gate without it.
NOTHING_MEASURED = "nothing measured on HEAD or BASE (give --no-cost to run the gate without the cost step)"


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def _reached_nothing(report_dir: Path) -> bool:
    """The cost run selected no case: its collection found none that reaches the change (covers.json)."""
    try:
        return not json.loads((report_dir / "covers.json").read_text()).get("covers")
    except (OSError, ValueError):
        return False


def measure_cost(head_tree: str, base_tree: str, g: Path, *, vlens: tuple[int, ...], isas: tuple[str, ...],
                 workers: str, threshold: float = COST_THRESHOLD, block_slower: float | None = None,
                 compilers: tuple[str, ...] = ()) -> CostLists:
    """Run the cost cases the change reaches (``g/changes.json``, ``--changed-only``) on HEAD and on
    BASE under Spike; write ``g/cost/cost.md``, ``cost.json``, ``cost.html``; the lists.  Never raises
    for a run that could not measure: the section's note says what happened, in one line, and a step
    that measured nothing on HEAD or on BASE where it had cases to measure is ``incomplete`` (no Spike,
    a run that did not complete, a tree whose cases all failed); one that no cost case reaches is not.

    ``compilers`` (names of harness/toolchain/compilers.py's ``COMPILERS``; empty: the selected one): with
    more than one, HEAD and BASE are measured with each, each compiler's HEAD against its own BASE, and
    the lists are the union of each compiler's (every move names its compiler: harness/cost/tables/gate_lists.merged)."""
    t0 = time.perf_counter()
    plain = CostLists(False, "", threshold, block_slower, list(vlens), list(isas))
    why = spike.available()
    if why:
        plain.note = not_measured(why)
        plain.incomplete = NOTHING_MEASURED
        return plain
    out = g / "cost"
    out.mkdir(parents=True, exist_ok=True)
    args = cost_suite_runs.Options(Matrix(vlens=vlens, isas=isas), workers=workers, kernel_timeout=COST_KERNEL_TIMEOUT)
    extra = ["--changes", str(g / "changes.json"), "--changed-only"]
    several = len(compilers) > 1
    lists: dict[str, CostLists] = {}
    tables: dict[str, suite_tables.CostTable] = {}
    for cc in compilers or (None,):
        t1 = time.perf_counter()
        tag = f"-{cc}" if several else ""
        try:
            head, missing, _ = cost_suite_runs.run_costs(head_tree, out, f"head{tag}", args, extra, compiler=cc)
        except cost_suite_runs.CostRunError as e:
            nothing = _reached_nothing(out / f"head{tag}-report")
            lists[cc or ""] = CostLists(False, "cost: no cost case (costs/) reaches the change; nothing to measure"
                                        if nothing else f"cost not measured: {_first_line(e)}", threshold, block_slower,
                                        list(vlens), list(isas), seconds=time.perf_counter() - t1,
                                        incomplete="" if nothing else "HEAD's cost run did not complete")
            continue
        note = incomplete = ""
        base: dict[suite_tables.Key, dict[str, Any]] = {}
        try:
            base, missing_base, _ = cost_suite_runs.run_costs(base_tree, out, f"base{tag}", args, extra, compiler=cc)
            missing.update(missing_base)
        except cost_suite_runs.CostRunError as e:
            note = f"BASE not measured ({_first_line(e)}); HEAD's figures only"
            incomplete = "BASE's cost run did not complete"
        table = tables[cc or ""] = suite_tables.CostTable(head, base, missing, threshold / 100, cc if several else "")
        lists[cc or ""] = cost_lists(table, block_slower=block_slower, vlens=vlens, isas=isas,
                                     seconds=time.perf_counter() - t1, note=note, report=str(out / "cost.md"),
                                     incomplete=incomplete)
    if tables:
        cost_suite_runs.write_report(out, tables, time.perf_counter() - t0, compiler_gaps.GAP)
    return merged(lists) if several else next(iter(lists.values()))


def cost_targets(given: Matrix, vlens: tuple[int, ...] | None = None, isas: tuple[str, ...] | None = None
                 ) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """The VLENs and ISA builds the cost step measures: ``vlens`` / ``isas`` (``--cost-vlen`` /
    ``--cost-isa``), else the gate's own (``given``'s ``--vlen`` / ``--isa``; ``all``: every VLEN Spike
    runs), else :data:`COST_VLENS` / :data:`COST_ISAS`.  A gate's ``--vlen`` that includes QEMU's longest
    VLEN also measures the longer ones only Spike runs (2048, 4096): no shard of the differential suite
    has them."""
    if vlens is None:
        vlens = given.vlens or COST_VLENS
        if given.vlens is not None and VLENS[-1] in vlens:
            vlens = tuple(dict.fromkeys([*vlens, *(v for v in SPIKE_VLENS if v > VLENS[-1])]))
    return tuple(sorted(vlens)), isas or given.isas or COST_ISAS

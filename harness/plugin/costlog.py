"""The cost suite's side of the plugin: a target that meters one call, and the rows of ``--cost-log``.

A cost case (costs/) runs a family's own call code (the function its differential tests use) on a
:class:`Metered` target: the one call of the kernel being costed is measured by the emulator
(:meth:`harness.plugin.targets.Target.measure`), every other request (type ids, layouts) goes to the
ordinary server.  The row it records is one JSON line of ``--cost-log`` (``rvvdiff cost`` reads them).

A cost case that no build of the run can measure (its module's ``rvvdiff_cost`` mark) is deselected at collection,
not skipped: its backend has no ISA build among those selected (SpacemiT's cases at ``--isa v``), or the target's
build cannot be made (a compiler that cannot make it, a tree whose CMake cannot express it).  A skip would count as
a selected case not measured (``rvvdiff cost`` exits 3); the reasons are printed once, in the terminal summary.
"""

from __future__ import annotations

import fcntl
import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest

from harness.core.matrix import CANNOT_MAKE, ISAS, Matrix
from harness.cost.measure.spike_count import Cost
from harness.cost.tables.run_tally import DESELECTED
from harness.emulators import protocol as P
from harness.emulators.base import Emulator
from harness.ggml.source import GgmlSource
from harness.plugin.targets import Target, session
from harness.toolchain.cmake import plan_options

#: The mark of the cost suite's test modules (costs/test_cost.py, costs/test_cost_spacemit.py).
MARK = "rvvdiff_cost"


class Metered:
    """``target`` for a family's call code, with the calls of ``kernel`` measured (exactly one allowed)."""

    def __init__(self, target: Target, kernel: str) -> None:
        self.target = target
        self.kernel = kernel
        self.cost: Cost | None = None
        self.response: P.Response | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.target, name)

    def call(self, kernel: str, ip: Sequence[int] = (), fp: Sequence[float] = (), bufs: Sequence[P.Buf] = (),
             *, repeat: int = 1, timeout: float | None = None, emulator: Emulator | None = None) -> P.Response:
        if kernel != self.kernel:
            return self.target.call(kernel, ip, fp, bufs, repeat=repeat, timeout=timeout, emulator=emulator)
        if self.cost is not None:
            raise AssertionError(f"harness: a cost case calls {kernel} more than once; it must make exactly one call")
        self.response, self.cost = self.target.measure(kernel, ip, fp, bufs, emulator=emulator)
        return self.response


def record(config: pytest.Config, row: dict[str, Any]) -> None:
    """Append ``row`` (with the tree's name and commit) to ``--cost-log`` (one JSON line; workers append)."""
    path = config.getoption("cost_log")
    if not path:
        return
    src = session().source
    line = json.dumps({**row, "tree": src.label, "commit": src.commit}) + "\n"
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.write(line)


def unbuildable(item: pytest.Item, run: Matrix, source: GgmlSource, plans: dict[str, str | None]) -> str | None:
    """Why a cost case of this run can be measured by no build: its backend has no ISA build among those selected
    (the item has no target), the target's compiler cannot make its build, or the tree's CMake cannot express it;
    None for any other item.  ``plans``: ISA build -> why the tree cannot express it, filled as read."""
    if item.get_closest_marker(MARK) is None:
        return None
    target = getattr(getattr(item, "callspec", None), "params", {}).get("target")
    if not isinstance(target, Target):
        mark = item.get_closest_marker("rvvdiff_backend")
        backends = mark.args if mark else ("cpu",)
        own = [n for n, isa in ISAS.items() if isa.backend in backends]
        return (f"no ISA build of the {' / '.join(backends)} backend is selected (--isa {','.join(run.isa_builds)}; "
                f"its builds: {', '.join(own)})")
    if why := CANNOT_MAKE.get((target.compiler, target.isa.name)):
        return why
    if target.isa.variant:
        return None
    if target.isa.name not in plans:
        plans[target.isa.name] = plan_options(source, target.isa).unavailable
    return plans[target.isa.name]


def deselect_unbuildable(config: pytest.Config, items: list[pytest.Item], run: Matrix,
                         source: GgmlSource) -> dict[str, int]:
    """Remove from ``items`` the cost cases no build of the run can measure (:func:`unbuildable`), reported to
    pytest as deselected: each reason with its number of cases."""
    if not any(it.get_closest_marker(MARK) for it in items):
        return {}
    plans: dict[str, str | None] = {}
    why = {it: unbuildable(it, run, source, plans) for it in items}
    gone = [it for it in items if why[it]]
    if gone:
        items[:] = [it for it in items if not why[it]]
        config.hook.pytest_deselected(items=gone)
    return dict(Counter(why[it] for it in gone))


def deselected_lines(reasons: dict[str, int]) -> list[str]:
    """The terminal summary's lines for :func:`deselect_unbuildable`'s reasons."""
    return [f"{DESELECTED} {n} cost case{'s' if n > 1 else ''}: {why}" for why, n in reasons.items()]

"""The cost cases: one record per measured call, each family's in a module of its own (costs/<family>.py).

A :class:`CostCase` names the call (a family's own run function, fed fixed seeded inputs at a real
model's size), what one unit of its work is (an element, a weight-activation product), the ggml
code it exists to measure (``entry_points``: the gate's change selection, harness/ggml/changes.py)
and, for an RVV entry point, the case of its scalar twin (the ``*_generic`` function of the same
build) that its cost is compared with -- unless the case says it has none (``has_twin=False``: the FP
vector kernels, whose scalar loop an RVV build does not compile as a function of its own).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from harness.cost.measure.spike_count import CostError
from harness.plugin.costlog import Metered, record

#: Implementations a case measures: the entry point ggml calls (RVV where the build has it), or its
#: scalar ``*_generic`` twin.
IMPLS = ("rvv", "generic")


@dataclass(frozen=True, repr=False)
class CostCase:
    family: str  # the differential family (cases/families.py names)
    name: str  # the kernel, in the family's words (a type, a layout, an op)
    size: str  # the size label (k4096, 4096x4096x8, ...)
    impl: str  # one of IMPLS
    kernel: str  # the kernel server's name for the call that is measured
    function: str  # the ggml function measured (what the report names)
    units: int  # units of work in the call
    unit: str  # what a unit is ("element", "MAC", "row element")
    run: Callable[[Any], None]  # makes the call on a (metered) target
    entry_points: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()
    has_twin: bool = True  # False: no callable scalar twin in an RVV build (twin_id is None)
    #: The batch (activation rows) of a case of a batch sweep, whose path may switch with it (0: none);
    #: its row carries it, and the report sets the batches of one kernel side by side
    #: (harness/cost/tables/batch_paths.py).
    batch: int = 0
    #: What the row records of the path the call took, given the target and the functions the measured
    #: call executed (``path``: the path measured; ``path_expected``: the tree's prediction where it differs).
    path: Callable[[Any, Mapping[str, int]], dict[str, str]] | None = None
    #: The CPU backend whose builds the case runs at (costs/test_cost.py: ggml-cpu's; costs/test_cost_spacemit.py:
    #: SpacemiT's), as a differential test's ``rvvdiff_backend`` mark says; a tuple for a case run at several
    #: (SpacemiT's ops: the same graph on each backend's kernels, costs/spacemit_ops.py).
    backend: str | tuple[str, ...] = "cpu"

    def runs_on(self, backend: str) -> bool:
        """Whether the case runs at the builds of ``backend`` (``cpu``, ``spacemit``)."""
        return backend in ((self.backend,) if isinstance(self.backend, str) else self.backend)

    @property
    def id(self) -> str:
        return f"{self.family}-{self.name}-{self.size}" + ("" if self.impl == "rvv" else f"-{self.impl}")

    @property
    def twin_id(self) -> str | None:
        """The case of the scalar twin this one is compared with (None for a twin itself, and for a case
        without one)."""
        return f"{self.family}-{self.name}-{self.size}-generic" if self.impl == "rvv" and self.has_twin else None

    def __repr__(self) -> str:
        return f"CostCase({self.id!r})"


#: Instructions the histogram of one more repetition may count beyond the counter around the call:
#: the repeat loop's compare and branch and the counter reads themselves.
LOOP_OVERHEAD = 16


def measure(case: CostCase, target: Any, request: pytest.FixtureRequest) -> None:
    """Run ``case`` on a metered ``target`` and record its row (the body of the cost suite's tests,
    costs/test_cost.py and costs/test_cost_spacemit.py).  A case fails when its call cannot be measured (a trap,
    a hang, a rejected request) or when the two counts of the call disagree (the counter around the call and
    the PC histogram of one more repetition: harness/cost/spike_count.py); the message says which."""
    m = Metered(target, case.kernel)
    try:
        case.run(m)
    except CostError as e:  # the whole message, then the one line the report lists (the last)
        pytest.fail(f"{e}\n{e.summary()}", pytrace=False)
    assert m.cost is not None, f"harness: cost case {case.id} made no {case.kernel} call"
    c = m.cost
    extra = c.executed - c.instret
    assert 0 <= extra <= LOOP_OVERHEAD, (
        f"{case.id}: the counter says {c.instret} instructions, the PC histogram of one more repetition "
        f"{c.executed}: the two measures of the call disagree by {extra} (more than the repeat loop's "
        f"{LOOP_OVERHEAD}); the call is not what was measured")
    record(request.config, {"nodeid": request.node.nodeid, "case": case.id, "family": case.family,
                            "name": case.name, "size": case.size, "impl": case.impl, "function": case.function,
                            "twin": case.twin_id, "units": case.units, "unit": case.unit,
                            "vlen": target.vlen, "isa": target.isa.name, **c.as_dict(),
                            **({"batch": case.batch} if case.batch else {}),
                            **(case.path(target, c.functions) if case.path else {})})

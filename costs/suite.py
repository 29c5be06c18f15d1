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

"""What the runs of the cost suite measured of what they selected, and the exit status that follows
(``rvvdiff cost``: harness/jobs/cost_suite_runs.py and board_cost_runs.py; the gate's cost step:
harness/cost/tables/gate_lists.py).  Pure: the rows each run measured and its cases that produced none
(harness/cost/tables/suite_tables.unmeasured: ``"<run>[-<cc>]: <case>"`` -> ``"<outcome>: <reason>"``) in;
counts per run, one line per reason and the status out.

A selected case is a test of the cost suite that ran (case x VLEN x ISA build); it is measured when it left a row.
A case no build of the run can measure is not selected: the plugin deselects it at collection
(harness/plugin/costlog.py, :data:`DESELECTED`). A run that measured fewer than it selected (a case that failed,
one that was skipped) makes ``rvvdiff cost`` exit :data:`INCOMPLETE`; a run that measured none of the cases its
tree has (a case skipped as "not in this tree" is one it does not have) makes the gate's cost step incomplete.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from harness.cost.tables.suite_tables import CostTable, by_reason

#: The exit status of a cost run where nothing blocks but not every selected case was measured (as
#: ``rvvdiff fixes``'s 3: nothing failed, something could not be checked); a blocking slower case is 1.
INCOMPLETE = 3
#: How the plugin's skip of a case whose kernel the tree lacks begins (harness/plugin/marks.py).
ABSENT = "not in this tree"
#: How the plugin's terminal-summary line of the cost cases it deselected at collection begins, after ``rvvdiff: ``
#: (harness/plugin/costlog.py: no build of the run can measure them; ``rvvdiff cost`` echoes these lines).
DESELECTED = "deselected"
#: How a run is named in the lines (its label in the unmeasured keys otherwise).
LABELS = {"head": "HEAD", "base": "BASE", "board": "the board", "spike": "Spike"}


def run_of(key: str) -> str:
    """The run an unmeasured key belongs to: ``head-gcc14: quant_dot-...`` -> ``head``."""
    return key.partition(": ")[0].split("-")[0]


def label(run: str) -> str:
    return LABELS.get(run, run)


@dataclass(frozen=True)
class Tally:
    """Rows measured per run (``head``, ``base``; ``board``, ``spike``) and the cases that left none."""

    measured: dict[str, int]
    unmeasured: dict[str, str]

    @classmethod
    def of(cls, tables: Iterable[CostTable], base: bool) -> Tally:
        """The tally of HEAD's (and, with ``base``, BASE's) runs over tables of one or more compilers."""
        measured = {"head": 0, **({"base": 0} if base else {})}
        unmeasured: dict[str, str] = {}
        for t in tables:
            measured["head"] += len(t.head)
            if base:
                measured["base"] += len(t.base)
            unmeasured.update(t.unmeasured)
        return cls(measured, unmeasured)

    def runs(self) -> list[str]:
        return list(dict.fromkeys([*self.measured, *(run_of(k) for k in self.unmeasured)]))

    def missing(self, run: str) -> dict[str, str]:
        return {k: why for k, why in self.unmeasured.items() if run_of(k) == run}

    def selected(self, run: str | None = None) -> int:
        if run is None:
            return sum(self.selected(r) for r in self.runs())
        return self.measured.get(run, 0) + len(self.missing(run))

    def measured_total(self) -> int:
        return sum(self.measured.values())

    @property
    def complete(self) -> bool:
        """Every selected case measured (and at least one selected)."""
        return 0 < self.selected() == self.measured_total()

    def summary(self) -> str:
        """``N of M selected cases measured``, per run when there are several."""
        return summary({r: self.measured.get(r, 0) for r in self.runs()}, {r: self.selected(r) for r in self.runs()})

    def counts(self) -> str:
        """How many cases ended with each outcome but measured: ``48 failed, 2 skipped``."""
        n = Counter(why.partition(":")[0] for why in self.unmeasured.values())
        return ", ".join(f"{c} {outcome}" for outcome, c in n.items())

    def reasons(self) -> list[str]:
        """One line per reason (the failures first, then the skips): the outcome, how many cases (per run
        when there are several), the first case, the reason."""
        several = len(self.runs()) > 1
        out = []
        groups = sorted(by_reason(self.unmeasured).items(), key=lambda g: g[0].startswith("skipped"))
        for why, cases in groups:
            outcome, _, text = why.partition(": ")
            per = Counter(run_of(c) for c in cases)
            where = ", ".join(f"{n} on {label(r)}" for r, n in per.items()) + "; " if several else ""
            n = len(cases)
            out.append(f"{outcome}, {n} case{'s' if n > 1 else ''} ({where}{cases[0]}{', ...' if n > 1 else ''}): "
                       f"{text}")
        return out

    def empty(self) -> list[str]:
        """The runs that measured none of the cases their tree has (a case skipped as not in the tree is
        not one it has: a new kernel measured on HEAD only leaves BASE nothing to measure)."""
        out = []
        for r in self.runs():
            missing = self.missing(r).values()
            absent = sum(1 for why in missing if why.startswith("skipped") and ABSENT in why)
            if not self.measured.get(r, 0) and len(missing) > absent:
                out.append(r)
        return out


def summary(measured: Mapping[str, int], selected: Mapping[str, int]) -> str:
    """``N of M selected cases measured`` from the counts per run, per run when there are several."""
    per = (" (" + ", ".join(f"{label(r)} {measured.get(r, 0)} of {n}" for r, n in selected.items()) + ")"
           if len(selected) > 1 else "")
    return f"{sum(measured.values())} of {sum(selected.values())} selected cases measured{per}"


def exit_status(tally: Tally, blocking: bool) -> int:
    """1 when a slower case blocks, else :data:`INCOMPLETE` when not every selected case was measured, else 0."""
    return 1 if blocking else 0 if tally.complete else INCOMPLETE

"""The PR gate's cost lists (docs/gate.md: the cost lists): from a table of HEAD's and BASE's cost rows
(harness/cost/tables/suite_tables.py) to the cases slower or faster beyond the threshold, the ones that block with
``--block-slower``, and the one line the summary leads with.  Pure: the step that measures the rows
is harness/jobs/gate_cost_step.py, the summary's cost section harness/report/gate_summary.py.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.cost.tables import run_tally, suite_tables

#: HEAD / BASE beyond this many percent is listed as slower or faster (``--cost-threshold``).
COST_THRESHOLD = suite_tables.THRESHOLD * 100
#: Where a gate without Spike is told to get it.
INSTALL_SPIKE = "install with ci/setup.sh --spike"


@dataclass
class CostLists:
    """The cost step: the cost cases (costs/) the change reaches, measured on HEAD and BASE under
    Spike (harness/jobs/gate_cost_step.py), slower / faster beyond ``threshold`` % of BASE's instructions.

    ``note`` is one line when something was not measured (no Spike, a run that did not complete,
    BASE not measurable, nothing reached).  ``incomplete`` says why the step measured nothing on HEAD
    or on BASE although it had cases to measure there (no Spike, a run that did not complete, a build
    that failed, every case failing); the gate then exits 3 unless something blocks.  A change no
    cost case reaches, or cases a tree does not have (a new kernel on BASE), leave it empty."""

    measured: bool = False  # HEAD's cost run completed
    note: str = ""
    threshold: float = COST_THRESHOLD  # percent
    block_slower: float | None = None  # percent; None: slower never blocks
    vlens: list[int] = field(default_factory=list)
    isas: list[str] = field(default_factory=list)
    slower: list[suite_tables.Move] = field(default_factory=list)
    faster: list[suite_tables.Move] = field(default_factory=list)
    head_only: list[str] = field(default_factory=list)  # "case (n targets)": no BASE figure, not compared
    unmeasured: list[str] = field(default_factory=list)  # one line per reason
    measurements: dict[str, int] = field(default_factory=dict)  # tree -> rows
    seconds: float = 0.0
    report: str = ""  # cost.md of the step
    selected: dict[str, int] = field(default_factory=dict)  # tree -> cases selected (rows + unmeasured)
    incomplete: str = ""

    @property
    def blocking(self) -> list[suite_tables.Move]:
        """The slower cases beyond ``--block-slower`` (none without it)."""
        if self.block_slower is None:
            return []
        return [m for m in self.slower if m.ratio > 1 + self.block_slower / 100]

    def headline(self) -> str:
        """The summary's one line about cost."""
        if not self.measured:
            return self.note
        block = "" if self.block_slower is None else f"; {len(self.blocking)} beyond --block-slower " \
                                                     f"{self.block_slower:g} % (block)"
        return (f"cost (Spike, HEAD / BASE instructions beyond {self.threshold:g} %): {len(self.slower)} slower, "
                f"{len(self.faster)} faster{block}" + (f"; {self.note}" if self.note else ""))

    def as_json(self) -> dict[str, Any]:
        return {**{k: v for k, v in asdict(self).items() if k not in ("slower", "faster")},
                "slower": [m.as_dict() for m in self.slower], "faster": [m.as_dict() for m in self.faster],
                "blocking": [m.as_dict() for m in self.blocking]}


def not_measured(why: str) -> str:
    """The one line a gate without a usable Spike prints: why, and how to install it."""
    first = why.strip().splitlines()[0] if why.strip() else "Spike is not available"
    first = first.split(": install it with")[0].split("; install it with")[0].rstrip(" .;:")
    return f"cost not measured: {first}" + ("" if "ci/setup.sh --spike" in first else f"; {INSTALL_SPIKE}")


def _build_failure(why: str) -> bool:
    return "ISA build" in why and ("failed" in why or "does not build" in why)


def _collapse(unmeasured: dict[str, str]) -> dict[str, list[str]]:
    """Tree ("head", "base") -> one line per reason (harness/cost/tables/suite_tables.grouped), and one line for
    all the cases the ISA builds that did not build left unmeasured (the first test of a build
    carries its error, the others are skipped pointing to it): a BASE that does not build is one line."""
    builds: dict[str, dict[str, Any]] = {}
    rest: dict[str, dict[str, str]] = defaultdict(dict)
    for key, why in unmeasured.items():
        tree, _, case = key.partition(": ")
        if _build_failure(why):
            b = builds.setdefault(tree, {"isas": set(), "cases": 0, "why": ""})
            b["isas"].add(case.rsplit("-", 1)[-1])
            b["cases"] += 1
            if why.startswith("error") and not b["why"].startswith("error"):
                b["why"] = why  # the build's own error, not a skip that points to it
            b["why"] = b["why"] or why
        else:
            rest[tree][key] = why
    out: dict[str, list[str]] = defaultdict(list)
    for tree, b in builds.items():
        out[tree].append(f"{tree}: ISA build {', '.join(sorted(b['isas']))} did not build, {b['cases']} measurements "
                         f"missing ({' '.join(b['why'].split())[:240]})")
    for tree, why in rest.items():
        out[tree] += suite_tables.grouped(why)
    return out


def cost_lists(table: suite_tables.CostTable, *, block_slower: float | None = None, vlens: tuple[int, ...] = (),
               isas: tuple[str, ...] = (), seconds: float = 0.0, note: str = "", report: str = "",
               incomplete: str = "") -> CostLists:
    """The gate's cost section from a table of HEAD's and BASE's rows.  A case measured on HEAD only
    (a new kernel, or BASE could not run it) is not compared: it is named, never slower or faster.  A
    tree that measured none of the cases it has makes the step incomplete (harness/cost/tables/run_tally.py),
    as does ``incomplete`` (BASE's run that did not complete)."""
    slower, faster = table.moves()
    tally = run_tally.Tally.of([table], base=True)
    incomplete = "; ".join([*filter(None, [incomplete]), *(
        f"{run_tally.label(r)} measured none of its {tally.selected(r)} selected cases" for r in tally.empty())])
    only: dict[str, int] = defaultdict(int)
    for key in table.head:
        if key not in table.base:
            only[key[0]] += 1
    lines = _collapse(table.unmeasured)
    if table.head and not table.base and not note:  # BASE measured nothing: that is the news, in one line
        why = lines.pop("base", [])
        note = (f"BASE not measured ({'; '.join(why)})" if why else "BASE not measured (no row)") + \
            "; HEAD's figures only"
    return CostLists(True, note, table.threshold * 100, block_slower, list(vlens), list(isas), slower, faster,
                     [f"{c} ({n} target{'s' if n > 1 else ''})" for c, n in only.items()],
                     [x for tree in sorted(lines, key=lambda t: t != "head") for x in lines[tree]],
                     {"head": len(table.head), "base": len(table.base)}, seconds, report,
                     {"head": tally.selected("head"), "base": tally.selected("base")}, incomplete)




def _counts(per_compiler: dict[str, CostLists], what: str = "measurements") -> dict[str, int]:
    """Rows (or cases selected: ``what``) per tree over every compiler (``head``, ``base``: what the summary
    reads), then per tree and compiler."""
    out: dict[str, int] = defaultdict(int)
    for c in per_compiler.values():
        for tree, n in getattr(c, what).items():
            out[tree] += n
    return {**out, **{f"{tree}-{cc}": n for cc, c in per_compiler.items() for tree, n in getattr(c, what).items()}}


def merged(per_compiler: dict[str, CostLists]) -> CostLists:
    """One cost section from each compiler's (``rvvdiff gate`` measuring several): every compiler's
    slower and faster moves (each names its compiler), its HEAD-only and unmeasured lines prefixed
    with its name, its notes and why it is incomplete; measured when any compiler's HEAD run completed."""
    first = next(iter(per_compiler.values()))
    order = lambda m: (-abs(m.ratio - 1), m.case, m.isa, m.vlen)  # noqa: E731  (stable: compilers in run order)
    return CostLists(
        any(c.measured for c in per_compiler.values()),
        "; ".join(f"{cc}: {c.note}" for cc, c in per_compiler.items() if c.note),
        first.threshold, first.block_slower, first.vlens, first.isas,
        sorted((m for c in per_compiler.values() for m in c.slower), key=order),
        sorted((m for c in per_compiler.values() for m in c.faster), key=order),
        [f"{cc}: {x}" for cc, c in per_compiler.items() for x in c.head_only],
        [f"{cc}: {x}" for cc, c in per_compiler.items() for x in c.unmeasured],
        _counts(per_compiler),
        sum(c.seconds for c in per_compiler.values()),
        next((c.report for c in per_compiler.values() if c.report), ""),
        _counts(per_compiler, "selected"),
        "; ".join(f"{cc}: {c.incomplete}" for cc, c in per_compiler.items() if c.incomplete))

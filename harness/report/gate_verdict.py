"""The PR gate's verdict (docs/gate.md): each test's outcomes on HEAD, BASE and HEAD again, sorted
into the four lists, the changed code no test judged, and what blocks.

* **regression** - fails on HEAD, passes on BASE (or fails there another way) - blocks;
* **new kernel failing** - fails on HEAD in a kernel BASE does not have (not in that tree, or
  BASE cannot build / express that ISA build) - blocks;
* **pre-existing** - fails on both the same way (same comparison, or same kind of failure) -
  reported, with the known-failures entry that lists it;
* **fixed** - fails on BASE, passes on HEAD, BASE's example included - reported, with the
  known-failures entry to remove.

Pure: a :class:`Run` holds one pytest run's results as harness/jobs/gate_runs.py read them; the only
I/O here is reading a failing test's ``case.json``.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.core.config import PROJECT_ROOT, VENV_BIN
from harness.core.matrix import DEFAULT_EMULATOR
from harness.cost.tables.gate_lists import CostLists
from harness.cost.tables.run_tally import INCOMPLETE
from harness.ggml import known
from harness.report.ids import parse_id, replay_argv, slug

ROOT = PROJECT_ROOT
LISTS = ("regression", "new kernel failing", "pre-existing", "fixed")


@dataclass
class Run:
    """One pytest run of the gate (harness/jobs/gate_runs.py runs it): its tree, its reports, its example
    database and its results by test id."""

    name: str  # "head", "base", "head-replay"
    tree: str
    report_dir: Path
    db: Path
    #: The compiler of a test whose id names none (the run's one compiler), and the emulator.
    compiler: str = ""
    emulator: str = DEFAULT_EMULATOR
    seconds: float = 0.0
    exit: int | None = None
    results: dict[str, dict[str, Any]] = field(default_factory=dict)

    def case(self, nodeid: str) -> dict[str, Any] | None:
        """The failure report of ``nodeid`` in this run (case.json), if one was written."""
        p = self.report_dir / "cases" / slug(nodeid) / "case.json"
        return json.loads(p.read_text()) if p.is_file() else None

    def replay(self, nodeid: str) -> str:
        """The command that replays ``nodeid`` on this run's tree with its saved examples."""
        argv = replay_argv(nodeid, ggml_src=self.tree, known_failures="ignore", example_db=str(self.db),
                           compiler=self.compiler, emulator=self.emulator)
        return f"cd {shlex.quote(str(ROOT))} && {VENV_BIN}{shlex.join(argv)}"


def state(r: dict[str, Any] | None, *, error: str = "fail") -> str:
    """fail, pass, absent (not in the tree), unrunnable (the build or emulator cannot run it), none;
    a set-up error (the build failed) is ``error`` ("fail" on HEAD: the change broke or kept
    broken a build; "unrunnable" where BASE is asked about a failure HEAD has)."""
    if r is None:
        return "none"
    o = r["outcome"]
    if o == "error":
        return error
    if o in ("failed", "xpassed"):
        return "fail"
    if o in ("passed", "xfailed"):
        return "pass"
    reason = r.get("reason", "")
    return "absent" if "not in this tree" in reason else "unrunnable"


def failure_kind(r: dict[str, Any], case: dict[str, Any] | None) -> str:
    """How a test failed, without the numbers: the comparison that failed, a build error, or the
    exception and the first words of its message (a crash, a hang, a write outside a buffer)."""
    if r["outcome"] == "error":
        return "build or set-up error"
    comp = (case or {}).get("comparison")
    if comp:  # the comparison's name without the element it found worst (s[2, 5] and s[2, 0] are one check)
        return f"{comp.get('mode')} comparison {_numberless(str(comp.get('name')))}"
    reason = r.get("reason", "")
    head, _, rest = reason.partition(":")
    return f"{head.strip()}: {' '.join(_numberless(rest).split()[:8])}".strip(": ")


def _numberless(text: str) -> str:
    """``text`` without its indices and numbers (not the digits of a name: ``q8_K`` stays)."""
    text = re.sub(r"\[[^\]]*\]", "[...]", text)
    return re.sub(r"\b0x[0-9a-f]+|(?<![\w.])[-+]?\d[\d.e+-]*", "#", text).strip()


@dataclass
class Line:
    list: str
    nodeid: str
    test: str
    kernel: str
    vlen: int | None
    isa: str
    stress: bool | None
    why: str
    replay: dict[str, str]
    known: list[str] = field(default_factory=list)

    def describe(self) -> str:
        where = (f"{self.kernel or '-'}, VLEN {self.vlen}, {self.isa}, stress {'on' if self.stress else 'off'}"
                 if self.vlen else "the build" if self.nodeid.startswith("ISA build") else "not a differential test")
        return f"`{self.nodeid}` ({where}): {self.why}"


def _line(kind: str, nodeid: str, why: str, runs: dict[str, Run], entries: list[known.Known]) -> Line:
    tid = parse_id(nodeid)
    replay = {n: runs[n].replay(nodeid) for n in ("head", "base") if n in runs}
    return Line(kind, nodeid, nodeid.split("::")[-1].split("[")[0], tid.kernel if tid else "",
                tid.vlen if tid else None, tid.isa if tid else "", tid.stress if tid else None, why, replay,
                [f"#{e.number} {e.test}: {e.reason}" for e in entries
                 if e.matches(nodeid, runs["head"].emulator, runs["head"].compiler)])


def classify(head: Run, base: Run | None, again: Run | None,
             entries_head: list[known.Known], entries_base: list[known.Known]) -> list[Line]:
    """The four lists, from the three runs' results (see the module docstring)."""
    runs = {"head": head, **({"base": base} if base else {})}
    out: list[Line] = []
    base_results = base.results if base else {}
    for nodeid in sorted(set(head.results) | set(base_results)):
        h, b = head.results.get(nodeid), base_results.get(nodeid)
        hs = state(h)
        # BASE's build error explains nothing about a wrong result on HEAD (BASE cannot run it);
        # it is a failure next to HEAD's build error (pre-existing) or HEAD's pass (fixed)
        bs = state(b, error="unrunnable" if hs == "fail" and h["outcome"] != "error" else "fail")
        if hs == "fail":
            kind = failure_kind(h, head.case(nodeid))
            # (for a build error, which build and its first error)
            hk = kind + (f" ({h['reason'][:300]})" if h["outcome"] == "error" and h.get("reason") else "")
            if bs == "absent":
                out.append(_line("new kernel failing", nodeid, f"HEAD: {hk}; BASE does not have it ({b['reason']})",
                                 runs, entries_head))
            elif bs == "unrunnable":
                out.append(_line("new kernel failing", nodeid, f"HEAD: {hk}; BASE cannot run it ({b['reason']})",
                                 runs, entries_head))
            elif bs == "fail":
                bk = failure_kind(b, base.case(nodeid) if base else None)
                if bk == kind:
                    out.append(_line("pre-existing", nodeid, f"both: {hk}", runs, entries_base))
                else:
                    out.append(_line("regression", nodeid, f"HEAD: {hk}; BASE fails another way: {bk}",
                                     runs, entries_head))
            elif bs == "pass":
                out.append(_line("regression", nodeid, f"HEAD: {hk}; HEAD's example passes on BASE",
                                 runs, entries_head))
            else:
                out.append(_line("regression", nodeid, f"HEAD: {hk}; not replayed on BASE", runs,
                                 entries_head))
        elif hs == "pass" and bs == "fail":
            bk = failure_kind(b, base.case(nodeid) if base else None)
            a = again.results.get(nodeid) if again else None
            if state(a) == "fail":
                out.append(_line("pre-existing", nodeid,
                                 f"BASE: {bk}; HEAD's own examples passed, BASE's example fails on HEAD too",
                                 runs, entries_base))
            else:
                out.append(_line("fixed", nodeid, f"BASE: {bk}; passes on HEAD, BASE's example included",
                                 runs, entries_base))
    # A build that fails on BASE and builds on HEAD is a fix of its own: its tests are skipped on
    # BASE (no line above), so the build gets one.
    broken = {name: _broken_builds(r.results) for name, r in runs.items()}
    built_on_head = {(parse_id(n).isa if parse_id(n) else "") for n, r in head.results.items()
                     if r["outcome"] in ("passed", "failed")}
    for isa, why in sorted(broken.get("base", {}).items()):
        if isa not in broken["head"] and isa in built_on_head:
            cmd = {n: f"cd {shlex.quote(str(ROOT))} && {VENV_BIN}rvvdiff build --ggml-src {shlex.quote(r.tree)} "
                      f"--isa {isa}" for n, r in runs.items()}
            out.append(Line("fixed", f"ISA build {isa}", "", "", None, isa, None,
                            f"does not build on BASE ({why[:300]}); builds on HEAD", cmd))
    return out


def _broken_builds(results: dict[str, dict[str, Any]]) -> dict[str, str]:
    """ISA build -> the error of a run's build that failed (its first test carries it)."""
    out = {}
    for n, r in results.items():
        tid = parse_id(n)
        if r["outcome"] == "error" and tid and "ISA build" in r.get("reason", "") and "failed" in r.get("reason", ""):
            out.setdefault(tid.isa, r["reason"])
    return out


def untested(cov: dict[str, Any], results: dict[str, dict[str, Any]]) -> list[str]:
    """Changed RVV code whose covering tests were selected on HEAD but none of them ran to a
    verdict (every one skipped, or its build failed): covered on paper, tested by nothing."""
    out = []
    for c in cov.get("changes", []):
        if not c["rvv"] or c["kind"] == "removed":
            continue
        selected = [t for t, names in cov.get("covers", {}).items() if c["name"] in names and t in results]
        if selected and not any(results[t]["outcome"] in ("passed", "failed") for t in selected):
            out.append(c["name"])
    return out


@dataclass
class GateVerdict:
    """What the gate found: the four lists, the changed code and the tests that reach it, the changes no
    test judged, each run's figures and the cost lists; :attr:`status` is the exit status."""

    head: str
    base: str
    lines: list[Line]
    changes: list[dict[str, Any]]
    covers: dict[str, list[str]]
    owns: dict[str, list[str]]
    uncovered: list[str]
    accepted: list[str]
    outside: list[str]
    notes: list[str]
    seconds: dict[str, float]
    runs: dict[str, dict[str, Any]]
    cost: CostLists | None = None  # None: --no-cost
    #: --lines: the changed lines no target executed (``file:lines (function)``, one per function), those
    #: accepted with --allow-uncovered, the counts, and why the lines could not be judged ("" when they were).
    uncovered_lines: list[str] = field(default_factory=list)
    line_counts: dict[str, int] | None = None  # None: not judged (no --lines)
    line_problem: str = ""

    def of(self, kind: str) -> list[Line]:
        return [ln for ln in self.lines if ln.list == kind]

    @property
    def blocking(self) -> bool:
        return bool(self.of("regression") or self.of("new kernel failing") or self.uncovered
                    or self.uncovered_lines or self.line_problem or (self.cost and self.cost.blocking))

    @property
    def incomplete(self) -> str:
        """Why the cost step measured nothing on HEAD or BASE where it had cases to measure ("" when it did)."""
        return self.cost.incomplete if self.cost else ""

    @property
    def status(self) -> int:
        """The exit status: 1 when something blocks, else 3 when the cost step is incomplete, else 0."""
        return 1 if self.blocking else INCOMPLETE if self.incomplete else 0

    def word(self) -> str:
        """The verdict in one word, as the summary's title and the last line say it."""
        return {1: "BLOCKS", INCOMPLETE: "INCOMPLETE", 0: "passes"}[self.status]

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "cost": self.cost.as_json() if self.cost else None, "blocking": self.blocking,
                "incomplete": self.incomplete, "status": self.status}


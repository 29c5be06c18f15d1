"""``rvvdiff gate HEAD --base BASE``: did this change make the RVV kernels worse?

The gate tests two trees with the same suite and judges HEAD against BASE:

1. **The diff** (harness/ggml/changes.py): the functions and macros that differ between BASE and
   HEAD as the ISA builds compile them, and the files the reader does not follow.
2. **HEAD** runs the suite (``--known-failures ignore``: raw outcomes) with ``--changes``: each
   test that owns a changed function (harness/ggml/changes.py: reaches it from its own entry points,
   not through another tested kernel) runs at the thorough budget, the other tests at the
   default (``--changed-only``: only the tests that reach a change).  Its failing examples land in an example database.
3. **BASE** runs every test that failed on HEAD in replay mode (the same shrunk examples from a
   copy of HEAD's database, and the fixed cases; nothing new is drawn), and every test that
   owns a change at the default budget (HEAD's failing examples first, then new draws: what
   BASE got wrong that HEAD gets right).  The tests that only reach a change through another
   kernel are not rerun on BASE: a fix shows in the tests of the kernel it fixes.
4. **HEAD again**, in replay mode, for the tests that failed on BASE and passed on HEAD: BASE's
   shrunk example is tried on HEAD before a fix is called a fix.

Each result lands in one list:

* **regression** - fails on HEAD, passes on BASE (or fails there another way) - blocks;
* **new kernel failing** - fails on HEAD in a kernel BASE does not have (not in that tree, or
  BASE cannot build / express that ISA build) - blocks;
* **pre-existing** - fails on both the same way (same comparison, or same kind of failure) -
  reported, with the known-failures entry that lists it;
* **fixed** - fails on BASE, passes on HEAD, BASE's example included - reported, with the
  known-failures entry to remove.

**Cost** (after the three runs; ``--no-cost`` skips it): the cost cases (costs/) the change reaches
are measured under Spike on HEAD and on BASE (harness/commands/cost.py, ``--changes`` and
``--changed-only`` with the gate's own diff; a case whose code did not change is not measured), at
the gate's ``--vlen`` / ``--isa`` (:func:`cost_targets`; without them every Spike VLEN, ISA build
zvfh).  A case whose instructions per call moved beyond ``--cost-threshold`` (2 %) is listed
**slower** or **faster**; a case measured on HEAD only (a new kernel) is named, not compared.
Slower cases block only with ``--block-slower PCT`` (beyond PCT).  Without Spike, or when a tree's
cost run cannot measure, the summary says so in one line and the verdict is the correctness runs'
alone.

A changed RVV function or macro that no collected test reaches, or whose selected tests all
ended without a verdict on HEAD (skipped, or their ISA build failed), is an **uncovered change**
and blocks too (``--allow-uncovered NAME`` accepts one, for a change a reviewer judged harmless).
The exit status is 1 exactly when something blocks (with ``--block-slower``, a slower cost case
too), 0 otherwise, 2 when the gate could not judge (bad arguments, a correctness run that did not
complete).  ``<out>/gate/summary.md`` (appended to
``$GITHUB_STEP_SUMMARY``), ``summary.html`` and ``gate.json`` lead with the lists (the cost lists
among them); each run's own reports are in ``<out>/head``, ``<out>/base`` and ``<out>/head-replay``,
the cost step's in ``<out>/gate/cost``.

A failure found on both trees with different shrunk inputs is judged by HEAD's example: if it
fails on BASE the failure is pre-existing, even when HEAD also fails elsewhere for a new reason
that the same test's minimal example does not show (Hypothesis reports one failure per test).
"""

from __future__ import annotations

import argparse
import fnmatch
import html
import json
import os
import re
import shlex
import shutil
import sys
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.commands import cost as cost_cmd
from harness.commands.runner import run_suite
from harness.core import settings
from harness.core.config import ISA_BUILDS, PROJECT_ROOT, SPIKE_VLENS, VLENS, parse_selection
from harness.core.errors import RvvdiffError
from harness.core.proc import own_session_env
from harness.emulators import spike as spike_emu
from harness.ggml import changes, gitrev, known
from harness.ggml.source import GgmlSource, resolve
from harness.report import cost as R
from harness.report import coverage, linegate
from harness.report.html import cells, page
from harness.report.ids import parse_id, replay_argv, slug

ROOT = PROJECT_ROOT
LISTS = ("regression", "new kernel failing", "pre-existing", "fixed")
#: What the gate runs unless the pytest options given after HEAD say otherwise (later options win).
DEFAULT_PYTEST = ["--vlen", "all", "--isa", "all", "--rvv-stress", "both"]


class GateError(RvvdiffError, RuntimeError):
    """The gate cannot judge: the message says why and what to do."""


# ------------------------------------------------------------------ one pytest run


@dataclass
class Run:
    name: str  # "head", "base", "head-replay"
    tree: str
    report_dir: Path
    db: Path
    seconds: float = 0.0
    exit: int | None = None
    results: dict[str, dict[str, Any]] = field(default_factory=dict)

    def case(self, nodeid: str) -> dict[str, Any] | None:
        """The failure report of ``nodeid`` in this run (case.json), if one was written."""
        p = self.report_dir / "cases" / slug(nodeid) / "case.json"
        return json.loads(p.read_text()) if p.is_file() else None

    def replay(self, nodeid: str) -> str:
        """The command that replays ``nodeid`` on this run's tree with its saved examples."""
        argv = replay_argv(nodeid, ggml_src=self.tree, known_failures="ignore", example_db=str(self.db))
        return f"cd {shlex.quote(str(ROOT))} && .venv/bin/{shlex.join(argv)}"


def _pytest(run: Run, extra: list[str], pytest_args: list[str], workers: str) -> Run:
    """Run the suite as ``run`` says; stream its output; read its results."""
    args = ["cases", "-p", "no:cacheprovider", *DEFAULT_PYTEST, *pytest_args, "--ggml-src", run.tree,
            "--known-failures", "ignore", "--example-db", str(run.db), "--junitxml", str(run.report_dir / "junit.xml"),
            *extra]
    if workers != "0" and not any(x in ("-n", "--numprocesses") or x.startswith(("-n", "--numprocesses="))
                                  for x in pytest_args):
        args += ["-n", workers]
    done = run_suite(args, report_dir=run.report_dir, env=own_session_env(), clean=True,
                     echo=f"\n=== rvvdiff gate: {run.name} ({run.tree})")
    run.exit, run.seconds = done.exit, done.seconds
    if run.exit not in (0, 1, 5):  # 5: nothing collected (a plan whose tests this selection lacks)
        raise GateError(f"the {run.name} run did not complete (pytest exit status {run.exit}); its output is above")
    run.results = done.results
    return run


# ------------------------------------------------------------------ outcomes


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
                [f"#{e.number} {e.test}: {e.reason}" for e in entries if e.matches(nodeid)])


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
            cmd = {n: f"cd {shlex.quote(str(ROOT))} && .venv/bin/rvvdiff build --ggml-src {shlex.quote(r.tree)} "
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


# ------------------------------------------------------------------ cost (Spike)

#: HEAD / BASE beyond this many percent is listed as slower or faster (``--cost-threshold``).
COST_THRESHOLD = R.THRESHOLD * 100
#: What the cost step measures when the gate is given no ``--vlen`` / ``--isa``: every VLEN Spike runs
#: (where the RVV kernels dispatch differently) in ggml's default riscv64 build only.  Every ISA build
#: too took 27 min for a one-function change on 2 cores, this 8 (docs/gate.md: the cost lists).
COST_VLENS: tuple[int, ...] = SPIKE_VLENS
COST_ISAS: tuple[str, ...] = ("zvfh",)
#: Deadline of one measured call, as ``rvvdiff cost``'s (Spike's slowdown applies on top).
COST_KERNEL_TIMEOUT = 120.0
#: Where a gate without Spike is told to get it.
INSTALL_SPIKE = "install with ci/setup.sh --spike"


@dataclass
class CostLists:
    """The cost step: the cost cases (costs/) the change reaches, measured on HEAD and BASE under
    Spike (harness/commands/cost.py), slower / faster beyond ``threshold`` % of BASE's instructions.

    ``note`` is one line when something was not measured (no Spike, a run that did not complete,
    BASE not measurable, nothing reached); the rest of the gate is unaffected by it."""

    measured: bool = False  # HEAD's cost run completed
    note: str = ""
    threshold: float = COST_THRESHOLD  # percent
    block_slower: float | None = None  # percent; None: slower never blocks
    vlens: list[int] = field(default_factory=list)
    isas: list[str] = field(default_factory=list)
    slower: list[R.Move] = field(default_factory=list)
    faster: list[R.Move] = field(default_factory=list)
    head_only: list[str] = field(default_factory=list)  # "case (n targets)": no BASE figure, not compared
    unmeasured: list[str] = field(default_factory=list)  # one line per reason
    measurements: dict[str, int] = field(default_factory=dict)  # tree -> rows
    seconds: float = 0.0
    report: str = ""  # cost.md of the step

    @property
    def blocking(self) -> list[R.Move]:
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
    """Tree ("head", "base") -> one line per reason (harness/report/cost.grouped), and one line for
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
        out[tree] += R.grouped(why)
    return out


def cost_lists(table: R.CostTable, *, block_slower: float | None = None, vlens: tuple[int, ...] = (),
               isas: tuple[str, ...] = (), seconds: float = 0.0, note: str = "", report: str = "") -> CostLists:
    """The gate's cost section from a table of HEAD's and BASE's rows.  A case measured on HEAD only
    (a new kernel, or BASE could not run it) is not compared: it is named, never slower or faster."""
    slower, faster = table.moves()
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
                     {"head": len(table.head), "base": len(table.base)}, seconds, report)


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def _reached_nothing(report_dir: Path) -> bool:
    """The cost run selected no case: its collection found none that reaches the change (covers.json)."""
    try:
        return not json.loads((report_dir / "covers.json").read_text()).get("covers")
    except (OSError, ValueError):
        return False


def measure_cost(head_tree: str, base_tree: str, g: Path, *, vlens: tuple[int, ...], isas: tuple[str, ...],
                 workers: str, threshold: float = COST_THRESHOLD, block_slower: float | None = None) -> CostLists:
    """Run the cost cases the change reaches (``g/changes.json``, ``--changed-only``) on HEAD and on
    BASE under Spike; write ``g/cost/cost.md``, ``cost.json``, ``cost.html``; the lists.  Never raises
    for a run that could not measure: the section's note says what happened, in one line."""
    t0 = time.perf_counter()
    plain = CostLists(False, "", threshold, block_slower, list(vlens), list(isas))
    why = spike_emu.available()
    if why:
        plain.note = not_measured(why)
        return plain
    out = g / "cost"
    out.mkdir(parents=True, exist_ok=True)
    args = argparse.Namespace(vlen=vlens, isa=isas, workers=workers, kernel_timeout=COST_KERNEL_TIMEOUT, k=None)
    extra = ["--changes", str(g / "changes.json"), "--changed-only"]
    try:
        head, missing, _ = cost_cmd.run_costs(head_tree, out, "head", args, extra)
    except cost_cmd.CostRunError as e:
        plain.seconds = time.perf_counter() - t0
        plain.note = ("cost: no cost case (costs/) reaches the change; nothing to measure"
                      if _reached_nothing(out / "head-report") else f"cost not measured: {_first_line(e)}")
        return plain
    note = ""
    base: dict[R.Key, dict[str, Any]] = {}
    try:
        base, missing_base, _ = cost_cmd.run_costs(base_tree, out, "base", args, extra)
        missing.update(missing_base)
    except cost_cmd.CostRunError as e:
        note = f"BASE not measured ({_first_line(e)}); HEAD's figures only"
    table = R.CostTable(head, base, missing, threshold / 100)
    seconds = time.perf_counter() - t0
    md = table.markdown()
    (out / "cost.md").write_text(md)
    (out / "cost.json").write_text(json.dumps({**table.as_json(), "seconds": round(seconds, 1)}, indent=1))
    (out / "cost.html").write_text(table.html(md))
    return cost_lists(table, block_slower=block_slower, vlens=vlens, isas=isas, seconds=seconds, note=note,
                      report=str(out / "cost.md"))


def _last_option(args: list[str], *names: str) -> str | None:
    """The value of the last of ``names`` in a pytest command line (``--vlen 256`` or ``--vlen=256``)."""
    value = None
    for i, a in enumerate(args):
        for n in names:
            if a == n and i + 1 < len(args):
                value = args[i + 1]
            elif a.startswith(n + "="):
                value = a[len(n) + 1:]
            elif n.startswith("-") and not n.startswith("--") and a.startswith(n) and len(a) > len(n):
                value = a[len(n):]  # -n2
    return value


def cost_targets(pytest_args: list[str], vlen: str | None = None, isa: str | None = None
                 ) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """The VLENs and ISA builds the cost step measures: ``--cost-vlen`` / ``--cost-isa``, else the
    gate's own ``--vlen`` / ``--isa`` (its pytest options; ``all``: every one Spike runs), else
    :data:`COST_VLENS` / :data:`COST_ISAS`.  A ``--vlen`` that includes QEMU's longest VLEN also
    measures the longer ones only Spike runs (2048, 4096): no shard of the differential suite has them."""
    chosen = vlen or _last_option(pytest_args, "--vlen")
    if chosen is None or chosen.strip() == "all":
        vlens: tuple[int, ...] = COST_VLENS if chosen is None else SPIKE_VLENS
    else:
        vlens = parse_selection("--vlen", chosen, SPIKE_VLENS)
        if vlen is None and VLENS[-1] in vlens:
            vlens = tuple(dict.fromkeys([*vlens, *(v for v in SPIKE_VLENS if v > VLENS[-1])]))
    chosen = isa or _last_option(pytest_args, "--isa")
    isas = COST_ISAS if chosen is None else parse_selection("--isa", chosen, tuple(ISA_BUILDS))
    return tuple(sorted(vlens)), isas


# ------------------------------------------------------------------ the gate


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

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "cost": self.cost.as_json() if self.cost else None, "blocking": self.blocking}


def _groups(nodeids: list[str]) -> list[str]:
    """Test ids folded over the target part: ``test_vec_dot[q4_0-*] (12)``."""
    n: dict[str, int] = defaultdict(int)
    for i in nodeids:
        tid = parse_id(i)
        key = (f"{tid.test}[{tid.kernel}-*]" if tid.kernel else f"{tid.test}[*]") if tid else i
        n[key] += 1
    return [f"{k} ({v})" for k, v in sorted(n.items())]


def summary_md(v: GateVerdict) -> str:
    status = "BLOCKS" if v.blocking else "passes"
    out = [f"# rvvdiff gate: {status}", "",
           f"- HEAD: {v.head}", f"- BASE: {v.base}",
           "- " + ", ".join(f"{k}: {len(v.of(k))}" for k in LISTS) + f", uncovered changes: {len(v.uncovered)}"
           + (f", uncovered lines: {len(v.uncovered_lines)} functions" if v.line_counts is not None else ""),
           "- " + (v.cost.headline() if v.cost else "cost not measured (--no-cost)"),
           "- time: " + ", ".join(f"{k} {s:.0f} s" for k, s in v.seconds.items()), ""]
    titles = {"regression": "Regressions (block)", "new kernel failing": "New kernels failing (block)",
              "pre-existing": "Pre-existing failures (do not block)", "fixed": "Fixed (do not block)"}
    for kind in LISTS:
        lines = v.of(kind)
        out += [f"## {titles[kind]}: {len(lines)}", ""]
        for ln in lines:
            out.append(f"- {ln.describe()}")
            for e in ln.known:
                out.append(f"  - known_failures.toml entry {e}" + (" — remove it" if kind == "fixed" else ""))
            if kind == "fixed" and not ln.known:
                out.append("  - no known_failures.toml entry lists it")
            for tree, cmd in ln.replay.items():
                out.append(f"  - replay on {tree.upper()}: `{cmd}`")
        out.append("")
    out += [f"## Uncovered changes (block): {len(v.uncovered)}", ""]
    by_name = {c["name"]: c for c in v.changes}
    ran = set(v.runs.get("head", {}).get("ran", ()))
    for n in v.uncovered:
        c = by_name.get(n, {})
        covering = [t for t, names in v.covers.items() if n in names]
        why = ("its tests were selected but none ran to a verdict on HEAD (skipped, or their build failed: see "
               "the HEAD run's report)" if covering and not ran.intersection(covering) else
               "no collected test reaches it; add a test (docs/architecture.md)")
        out.append(f"- `{n}` ({c.get('what')}, {c.get('kind')}, {c.get('file')}:{c.get('line')}): changed RVV code; "
                   f"{why}; or, once a reviewer judged it harmless, pass --allow-uncovered {n}")
    for n in v.accepted:
        out.append(f"- `{n}`: uncovered, accepted with --allow-uncovered")
    if v.line_counts is not None:
        out += ["", f"## Uncovered lines (block): {len(v.uncovered_lines)} functions", "",
                "Changed lines that a build run compiles and no test executed at any target (--lines; "
                + ", ".join(f"{k}: {n}" for k, n in v.line_counts.items()) + "):", ""]
        out += [f"- {d}" for d in v.uncovered_lines] + ([f"- {v.line_problem}"] if v.line_problem else [])
        if v.uncovered_lines:
            out.append("- widen the tests that reach these functions (docs/coverage.md), or, once a reviewer judged "
                       "the lines harmless, pass --allow-uncovered FUNCTION")
    if v.cost and v.cost.measured:
        out += ["", *cost_md(v.cost)]
    out += ["", f"## Changed functions and macros: {len(v.changes)}", ""]
    for c in v.changes:
        own = sorted(t for t, names in v.owns.items() if c["name"] in names and t in ran)
        other = sorted(t for t, names in v.covers.items() if c["name"] in names and t in ran and t not in own)
        parts = ([f"{len(own)} tests own it (thorough budget): " + ", ".join(_groups(own))] if own else []) + \
                ([f"{len(other)} more reach it through other tested kernels (default budget): "
                  + ", ".join(_groups(other))] if other else [])
        out.append(f"- `{c['name']}` ({c['what']}, {c['kind']}, {c['file']}:{c['line']}"
                   + (", RVV" if c["rvv"] else "") + f", builds {'/'.join(c['builds'])}): "
                   + ("; ".join(parts) if parts else "no test that ran reaches it"))
    if v.outside:
        out += ["", "Changed files the C reader does not follow (build files, other backends): "
                + ", ".join(f"`{p}`" for p in v.outside)]
    if v.notes:
        out += ["", "Reader notes (taken as not compiled): " + "; ".join(v.notes[:20])]
    out += ["", "Each run's own reports: " + ", ".join(f"{k}: `{r['report_dir']}` ({len(r['ran'])} tests ran)"
                                                    for k, r in v.runs.items()), ""]
    return "\n".join(out)


#: Rows of each cost list in the summary (the rest are in cost.json).
COST_ROWS = 40


def cost_md(c: CostLists) -> list[str]:
    """The summary's cost section: the slower and faster lists as one table."""
    block = (f"; slower beyond {c.block_slower:g} % blocks (--block-slower)" if c.block_slower is not None
             else "; they do not block (--block-slower PCT makes a slower one block)")
    out = [f"## Cost: {len(c.slower)} slower, {len(c.faster)} faster"
           + (f", {len(c.blocking)} beyond --block-slower (block)" if c.blocking else ""), "",
           f"Instructions retired per call under Spike, HEAD against BASE, for the cost cases the change reaches "
           f"(VLEN {', '.join(map(str, c.vlens))}; ISA build {', '.join(c.isas)}; "
           f"{c.measurements.get('head', 0)} measurements on HEAD, {c.measurements.get('base', 0)} on BASE; "
           f"{c.seconds:.0f} s). Listed beyond {c.threshold:g} %{block}."
           + (f" Full table: `{c.report}`." if c.report else "")]
    if c.note:
        out += ["", c.note]
    if c.slower or c.faster:
        blocking = set(c.blocking)
        out += ["", "| list | function | case | VLEN | ISA build | BASE | HEAD | change |", "|---|---|---|---|---|---|---|---|"]
        for what, moves in (("slower", c.slower), ("faster", c.faster)):
            for m in moves[:COST_ROWS]:
                tag = "slower (blocks)" if m in blocking else what
                out.append(f"| {tag} | `{m.function}` | {m.case} | {m.vlen} | {m.isa} | {m.base} | {m.head} | "
                           f"{(m.ratio - 1) * 100:+.1f} % |")
            if len(moves) > COST_ROWS:
                out.append(f"| {what} | ... and {len(moves) - COST_ROWS} more (cost.json) | | | | | | |")
    else:
        out += ["", "No case moved beyond the threshold."]
    if c.head_only:
        out += ["", f"Measured on HEAD only, not compared ({len(c.head_only)}): " + ", ".join(c.head_only[:20])
                + (" ..." if len(c.head_only) > 20 else "")]
    if c.unmeasured:
        out += ["", "Not measured (one line each):"] + [f"- {x}" for x in c.unmeasured]
    return out


def summary_html(v: GateVerdict, md: str) -> str:
    rows = []
    for kind in (*LISTS,):
        for ln in v.of(kind):
            rows.append("<tr>" + cells("td", (
                kind, ln.nodeid, ln.kernel, ln.vlen or "", ln.isa, "on" if ln.stress else "off", ln.why,
                "\n".join(ln.known))) + "<td>" + "<br>".join(
                f"<b>{t}</b> <code>{html.escape(c)}</code>" for t, c in ln.replay.items()) + "</td></tr>")
    for n in v.uncovered:
        rows.append(f"<tr><td>uncovered change</td><td>{html.escape(n)}</td>" + "<td></td>" * 7 + "</tr>")
    head = cells("th", ("list", "test", "kernel", "VLEN", "ISA build", "stress", "why", "known failure", "replay"))
    cost = [f"<h2>Cost</h2><p>{html.escape(v.cost.headline() if v.cost else 'cost not measured (--no-cost)')}</p>"]
    if v.cost and (v.cost.slower or v.cost.faster):
        blocking = set(v.cost.blocking)
        crows = ["<tr>" + cells("td", ("slower (blocks)" if m in blocking else what, m.function, m.case, m.vlen, m.isa,
                                       m.base, m.head, f"{(m.ratio - 1) * 100:+.1f} %")) + "</tr>"
                 for what, moves in (("slower", v.cost.slower), ("faster", v.cost.faster)) for m in moves]
        chead = cells("th", ("list", "function", "case", "VLEN", "ISA build", "BASE", "HEAD", "change"))
        cost.append(f"<table><tr>{chead}</tr>{''.join(crows)}</table>")
    return page("rvvdiff gate", "body{font-family:sans-serif}td{vertical-align:top;border-top:1px solid #ccc;padding:3px}"
                "code{font-size:80%}", [f"<h1>rvvdiff gate: {'BLOCKS' if v.blocking else 'passes'}</h1>",
                                        f"<table><tr>{head}</tr>{''.join(rows)}</table>", *cost,
                                        f"<h2>Summary</h2><pre>{html.escape(md)}</pre>"])


def resolve_base(head_dir: Path, base: str | None, target_branch: str | None) -> tuple[str, str]:
    """(BASE's path, how it was chosen): a directory, a revision of HEAD's checkout, or the
    merge-base of HEAD with the branch it targets."""
    if base and Path(base).is_dir():
        return str(Path(base).resolve()), f"directory {base}"
    repo = gitrev.toplevel(head_dir)
    if repo is None:
        raise GateError(f"{head_dir} is not a git checkout, so BASE must be a directory: give --base PATH"
                        + (f" ({base!r} is not a directory)" if base else ""))
    if base:
        sha = gitrev.commit(repo, base)
        how = f"revision {base} of {repo} ({gitrev.subject(repo, sha)})"
    else:
        sha, branch = gitrev.merge_base(repo, target_branch)
        how = f"merge-base of HEAD with {branch} ({gitrev.subject(repo, sha)})"
    return str(gitrev.checkout(repo, sha, "base")), how


def gate(head_dir: Path, base_dir: str, base_how: str, out: Path, pytest_args: list[str], *,
         changed_only: bool = False, allow_uncovered: tuple[str, ...] = (), also: tuple[str, ...] = (),
         workers: str = "auto", cost: dict[str, Any] | None = None, line_coverage: str = "") -> GateVerdict:
    """The three runs, the cost step and the verdict.  ``also``: node-id globs that run on HEAD
    whatever they reach and on BASE whenever they ran on HEAD (a finding's tests, when a fix is
    judged).  ``cost``: :func:`measure_cost`'s options (``vlens``, ``isas``, ``threshold``,
    ``block_slower``); None skips the step."""
    head_src, base_src = resolve(str(head_dir)), resolve(base_dir)
    g = out / "gate"
    if g.exists():
        shutil.rmtree(g)
    g.mkdir(parents=True)
    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    diff = changes.diff(base_src, head_src)
    seconds["diff"] = time.perf_counter() - t0
    (g / "changes.json").write_text(json.dumps(diff.to_json(), indent=1))
    print(f"rvvdiff gate: HEAD {head_src.describe()}\n              BASE {base_src.describe()} ({base_how})\n"
          f"  {len(diff.changes)} changed functions / macros ({sum(c.rvv for c in diff.changes)} with an RVV path) "
          f"in {seconds['diff']:.1f} s", flush=True)
    for c in diff.changes:
        print(f"    {c.describe()}")

    head = _pytest(Run("head", str(head_src.root), out / "head", g / "db-head"),
                   ["--changes", str(g / "changes.json"), *(["--changed-only"] if changed_only else []),
                    *(x for a in also for x in ("--also-run", a)), *(["--rvv-coverage"] if line_coverage else [])],
                   pytest_args, workers)
    seconds["head"] = head.seconds
    cov_path = head.report_dir / "covers.json"
    cov = json.loads(cov_path.read_text()) if cov_path.is_file() else {"covers": {}, "uncovered": [], "changes": []}

    plan = {n: "replay" for n, r in head.results.items() if state(r) == "fail"}
    named = [n for n in head.results if any(fnmatch.fnmatchcase(n, a) for a in also)]
    for n in [*cov.get("owns", {}), *named]:
        if n in head.results and state(head.results[n]) in ("pass", "fail"):
            plan[n] = "default"  # HEAD's saved examples replay first (the reuse phase)
    def planned(name: str, tree: str, tests: dict[str, str], db_from: str) -> Run:
        """Run ``tests`` (id -> budget) on ``tree`` with a copy of run ``db_from``'s example database."""
        (g / f"plan-{name}.json").write_text(json.dumps({"tests": tests}, indent=1))
        if (g / f"db-{db_from}").is_dir():
            shutil.copytree(g / f"db-{db_from}", g / f"db-{name}")
        r = _pytest(Run(name, tree, out / name, g / f"db-{name}"), ["--plan", str(g / f"plan-{name}.json")],
                    pytest_args, workers)
        seconds[name] = r.seconds
        return r

    base = again = None
    if plan:
        base = planned("base", str(base_src.root), plan, "head")
        back = {n: "replay" for n, r in base.results.items()
                if state(r) == "fail" and state(head.results.get(n)) == "pass"}
        if back:
            again = planned("head-replay", str(head_src.root), back, "base")

    lists = None
    if cost is not None:
        print(f"\n=== rvvdiff gate: cost (Spike), HEAD and BASE, the cost cases the change reaches: VLEN "
              f"{','.join(map(str, cost['vlens']))}, ISA build {','.join(cost['isas'])}", flush=True)
        t_cost = time.perf_counter()
        cost_workers = _last_option(pytest_args, "-n", "--numprocesses") or workers
        lists = measure_cost(str(head_src.root), str(base_src.root), g, workers=cost_workers, **cost)
        seconds["cost"] = time.perf_counter() - t_cost
        print(f"rvvdiff gate: {lists.headline()} ({seconds['cost']:.0f} s)", flush=True)
        for m in lists.slower[:COST_ROWS]:
            print(f"    slower{' (blocks)' if m in lists.blocking else ''}: {m.describe()}")
        for m in lists.faster[:COST_ROWS]:
            print(f"    faster: {m.describe()}")

    entries = known.load()
    verdicts_head, verdicts_base = known.judge(entries, head_src), known.judge(entries, base_src)
    lines = classify(head, base, again, [x.entry for x in verdicts_head if x.applies],
                     [x.entry for x in verdicts_base if x.applies])
    uncovered = [n for n in cov.get("uncovered", []) if n not in allow_uncovered]
    uncovered += [n for n in untested(cov, head.results) if n not in allow_uncovered and n not in uncovered]
    line_extra: dict[str, Any] = {}
    if line_coverage:
        line_extra = judge_lines(base_src, head_src, head.report_dir / "coverage", allow_uncovered,
                                 defer=line_coverage == "defer")
    seconds["total"] = time.perf_counter() - t0
    runs = {r.name: {"tree": r.tree, "report_dir": str(r.report_dir), "seconds": r.seconds, "exit": r.exit,
                     "tests": len(r.results),
                     "ran": sorted(n for n, x in r.results.items() if x["outcome"] in ("passed", "failed"))}
            for r in (head, base, again) if r}
    return GateVerdict(head_src.describe(), f"{base_src.describe()} ({base_how})", lines, cov.get("changes", []),
                   cov.get("covers", {}), cov.get("owns", {}), uncovered,
                   [n for n in cov.get("uncovered", []) if n in allow_uncovered],
                   diff.outside, diff.notes, seconds, runs, lists, **line_extra)


def judge_lines(base: GgmlSource, head: GgmlSource, cov_dir: Path, allowed: tuple[str, ...],
                defer: bool = False) -> dict[str, Any]:
    """--lines: HEAD's changed in-scope lines against the coverage of HEAD's run (harness/report/linegate.py);
    ``defer`` (a shard of a CI matrix): recorded in ``gate-lines.json`` for the merge over shards, not blocking."""
    changed = linegate.changed_lines(base, head)
    if not (cov_dir / "targets.json").is_file():
        why = "" if not changed else (f"the HEAD run wrote no line coverage ({cov_dir}/targets.json is missing; see "
                                      "its report's coverage problems): the changed lines could not be judged")
        return {"line_counts": {"changed": sum(map(len, changed.values()))}, "line_problem": why}
    lv = linegate.judge(changed, coverage.load(cov_dir))
    (cov_dir / "gate-lines.json").write_text(json.dumps(lv.as_json(), indent=1))
    if defer:
        return {"line_counts": {**lv.counts(), "judged over the shards (linegate merge)": 1}}
    return {"uncovered_lines": lv.describe(allowed), "line_counts": lv.counts()}


def write(v: GateVerdict, out: Path) -> Path:
    g = out / "gate"
    md = summary_md(v)
    (g / "summary.md").write_text(md)
    (g / "summary.html").write_text(summary_html(v, md))
    (g / "gate.json").write_text(json.dumps(v.as_json(), indent=1, default=str))
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        with open(os.environ["GITHUB_STEP_SUMMARY"], "a") as f:
            f.write(md + "\n")
    return g / "summary.md"


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog="rvvdiff gate", allow_abbrev=False,
        description="Judge a HEAD tree against its BASE: regressions and failing new kernels "
        "block, pre-existing failures do not, fixes are named; the tests that reach a change run at the thorough "
        "budget. Options rvvdiff gate does not know go to pytest (e.g. --vlen 512 --isa zvfh, -k ...).")
    p.add_argument("head", help="the tree under review: a llama.cpp or ggml checkout")
    p.add_argument("--base", help="BASE: a directory, or a revision of HEAD's git checkout "
                                  "(default: the merge-base of HEAD with the branch it targets)")
    p.add_argument("--target-branch", help="the branch HEAD targets, for the default BASE (default: "
                                           "origin/$GITHUB_BASE_REF, else the first of origin/master, origin/main, master, main)")
    p.add_argument("--changed-only", action="store_true", help="run only the tests that reach a change")
    p.add_argument("--allow-uncovered", default="", metavar="NAMES",
                   help="comma list of changed RVV functions / macros accepted without a test (or, with --lines, "
                        "with uncovered lines)")
    p.add_argument("--lines", action="store_const", const="block", default="",
                   help="run HEAD with --rvv-coverage and block on changed RVV lines no test executed at any "
                        "target that compiles them (docs/gate.md)")
    p.add_argument("--lines-defer", dest="lines", action="store_const", const="defer",
                   help="a shard of a CI matrix: record the changed lines' coverage (gate-lines.json) for "
                        "`python -m harness.report.linegate merge`, which judges them over all shards")
    p.add_argument("--out", default=str(ROOT / "reports"), help="where the reports go (default: reports/)")
    p.add_argument("--workers", default=settings.get("WORKERS") or "auto",
                   help="pytest-xdist workers per run (default: $RVVDIFF_WORKERS or auto; 0: no xdist)")
    c = p.add_argument_group("cost (docs/gate.md: the cost lists)")
    c.add_argument("--no-cost", action="store_true",
                   help="skip the cost step (instructions under Spike, HEAD against BASE, of the cost cases the "
                        "change reaches)")
    c.add_argument("--cost-threshold", type=float, default=COST_THRESHOLD, metavar="PCT",
                   help="list a cost case as slower / faster when HEAD / BASE moves beyond PCT %% (default: 2)")
    c.add_argument("--block-slower", type=float, default=None, metavar="PCT",
                   help="block (exit 1) when a cost case is slower on HEAD than on BASE by more than PCT %% "
                        "(default: slower cases are listed, never block)")
    c.add_argument("--cost-vlen", default=None, metavar="LIST",
                   help="VLENs the cost step measures (default: the gate's --vlen, plus 2048 and 4096 when it "
                        "includes 1024; without --vlen: " + ",".join(map(str, COST_VLENS)) + ")")
    c.add_argument("--cost-isa", default=None, metavar="LIST",
                   help="ISA builds the cost step measures (default: the gate's --isa, else "
                        + ",".join(COST_ISAS) + ")")
    a, pytest_args = p.parse_known_args(argv)
    head_dir = Path(a.head).resolve()
    try:
        if not head_dir.is_dir():
            raise GateError(f"HEAD {a.head}: no such directory (give a llama.cpp or ggml checkout)")
        cost = None
        if not a.no_cost:
            try:
                vlens, isas = cost_targets(pytest_args, a.cost_vlen, a.cost_isa)
            except ValueError as e:
                raise GateError(str(e)) from None
            cost = {"vlens": vlens, "isas": isas, "threshold": a.cost_threshold, "block_slower": a.block_slower}
        base_dir, how = resolve_base(head_dir, a.base, a.target_branch)
        out = Path(a.out).resolve()
        v = gate(head_dir, base_dir, how, out, pytest_args, changed_only=a.changed_only,
                 allow_uncovered=tuple(x for x in a.allow_uncovered.split(",") if x), workers=a.workers, cost=cost,
                 line_coverage=a.lines)
    except RvvdiffError as e:
        print(f"rvvdiff gate: {e}", file=sys.stderr)
        return 2
    path = write(v, out)
    print("\n" + summary_md(v))
    print(f"rvvdiff gate: {'BLOCKS' if v.blocking else 'passes'} ({path})")
    return 1 if v.blocking else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

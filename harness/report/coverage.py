"""RVV line coverage: executed PCs mapped to source lines, per target, and what a run writes of them.

The PCs come from the emulator (harness/emulators/executed.py: QEMU's translation log of the
pooled servers, or Spike's PC histogram); the server binary's DWARF line table (harness/binary/dwarf.py) maps
them to the in-scope source lines, the RVV code under test and its generic twins.  A line is executable in a
target when the line table maps an address of that target's binary to it, and executed when the emulator
ran one of those addresses.

Per target (VLEN x ISA build x stress mode) an lcov tracefile (``<target>.info``: TN, SF, DA, LF,
LH, end_of_record; a hit count is 1, as the log says whether an instruction ran, not how often),
``merged.info`` (a line's count is the number of targets that ran it), ``coverage.md`` (the matrix:
per function, lines executed / executable per target) and ``index.html`` with one page per source
file showing at which targets each line ran (harness/report/coverage_html.py).  Problems
(a binary without a line table, PCs outside the binary, a file that cannot be written) are
one line each in :attr:`Coverage.problems`; they never change a test's outcome.  The per-arm
statement narrows each target to the arms of the ``switch (__riscv_vlenb() * 8)`` its VLEN
dispatches to (the switches as rvvdiff's C reader finds them, harness/ggml/cwalk.py).  Several runs (their
``<report-dir>/coverage`` directories) are combined by ``rvvdiff coverage merge | missed | arms``."""

from __future__ import annotations

import functools
import json
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from harness.binary.dwarf import CoverageError, line_table
from harness.emulators.executed import Executed, named
from harness.ggml.cwalk import vlen_switches
from harness.report.coverage_html import write_html

# ------------------------------------------------------------------ lcov


def lcov(test_name: str, lines: dict[str, dict[int, int]]) -> str:
    """An lcov tracefile: per source file ``SF``, ``DA:<line>,<count>``, ``LF``, ``LH``, ``end_of_record``."""
    out = [f"TN:{re.sub(r'[^A-Za-z0-9_]', '_', test_name)}"]
    for path in sorted(lines):
        da = lines[path]
        out.append(f"SF:{path}")
        out += [f"DA:{ln},{n}" for ln, n in sorted(da.items())]
        out += [f"LF:{len(da)}", f"LH:{sum(1 for n in da.values() if n > 0)}", "end_of_record"]
    return "\n".join(out) + "\n"


def read_lcov(text: str) -> dict[str, dict[int, int]]:
    """The ``DA`` records of an lcov tracefile, per source file."""
    out: dict[str, dict[int, int]] = defaultdict(dict)
    sf = None
    for line in text.splitlines():
        if line.startswith("SF:"):
            sf = line[3:]
        elif line.startswith("DA:") and sf is not None:
            ln, n = line[3:].split(",")[:2]
            out[sf][int(ln)] = out[sf].get(int(ln), 0) + int(n)
        elif line == "end_of_record":
            sf = None
    return dict(out)


def merge(tracefiles: Iterable[dict[str, dict[int, int]]]) -> dict[str, dict[int, int]]:
    """Tracefiles merged: a line of any of them, its counts summed (here: the targets that ran it)."""
    out: dict[str, dict[int, int]] = defaultdict(dict)
    for t in tracefiles:
        for path, da in t.items():
            for ln, n in da.items():
                out[path][ln] = out[path].get(ln, 0) + n
    return dict(out)


# ------------------------------------------------------------------ one run


@dataclass
class TargetLines:
    """One target's executable and executed in-scope (file, line, function) keys."""

    target: str
    vlen: int
    isa: str
    stress: bool
    executable: set[tuple[str, int, str]]
    executed: set[tuple[str, int, str]]
    #: The compiler of the target's build ("": a coverage written before compilers were recorded).
    compiler: str = ""

    @property
    def build(self) -> str:
        """Its build as the tables name it: the ISA build (``zvfh``), and its compiler where the target's name
        carries it (``zvfh gcc14``: a coverage of several compilers)."""
        return self.target.removeprefix(f"vlen{self.vlen}-").replace("-stress", "").replace("-", " ")

    def tracefile(self) -> dict[str, dict[int, int]]:
        out: dict[str, dict[int, int]] = defaultdict(dict)
        for path, ln, _ in self.executable:
            out[path].setdefault(ln, 0)
        for path, ln, _ in self.executed:
            out[path][ln] = 1
        return dict(out)


@dataclass
class Coverage:
    targets: list[TargetLines] = field(default_factory=list)
    #: One line per problem (a binary without a line table, PCs outside it, a file not written).
    problems: list[str] = field(default_factory=list)


def measure(executed: dict[str, Executed]) -> Coverage:
    """Each target's PCs mapped to in-scope lines, per compiler; a target that cannot be mapped is one problem
    line."""
    cov = Coverage()
    for name in sorted(executed, key=lambda t: (executed[t].isa, executed[t].vlen, executed[t].stress,
                                                executed[t].compiler)):
        e = executed[name]
        if e.lost:
            cov.problems.append(f"{name}: {e.lost} server start(s) left no record of what they executed (a Spike server "
                                "killed after a hang prints no PC histogram): their lines are not counted")
        try:
            table = line_table(e.program)
        except (CoverageError, OSError) as err:
            cov.problems.append(f"{name}: no line coverage: {err}")
            continue
        hit, outside = table.lines(e.pcs)
        if outside:
            cov.problems.append(f"{name}: {outside} executed PC(s) outside {e.program.name}'s code sections "
                                "(not mapped to any line; ignored)")
        if e.others:
            cov.problems.append(f"{name}: the logs of {len(e.others)} other server binary(ies) of this target "
                                f"(rebuilt during the run) are not counted: {', '.join(sorted(map(str, e.others)))}")
        cov.targets.append(TargetLines(name, e.vlen, e.isa, e.stress,
                                       table.executable(e.pcs, {fn for _, _, fn in hit}), hit, e.compiler))
    return cov


def functions(cov: Coverage) -> dict[str, dict[str, tuple[int, int]]]:
    """{function: {target: (lines executed, lines executable)}}: a line belongs to the function whose
    source holds it (harness/binary/dwarf.py's ``source_function``; an inlined copy counts for the
    function it was written in), else to the symbol holding its code (class members: tinyBLAS_RVV,
    repack's tensor_traits)."""
    out: dict[str, dict[str, tuple[int, int]]] = defaultdict(dict)
    for t in cov.targets:
        total: dict[str, set] = defaultdict(set)
        ran: dict[str, set] = defaultdict(set)
        for path, ln, fn in t.executable:
            total[fn].add((path, ln))
        for path, ln, fn in t.executed:
            ran[fn].add((path, ln))
        for fn in total:
            out[fn][t.target] = (len(ran[fn]), len(total[fn]))
    return dict(out)


def matrix_md(cov: Coverage, *, only_run: bool = False) -> list[str]:
    """The matrix as markdown: per function, ``executed/executable`` per target (``-``: not in that
    build); ``only_run``: the functions some target executed, the others counted in one line."""
    fns = functions(cov)
    cols = [t.target for t in cov.targets]
    md = ["| function | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    never = []
    for fn in sorted(fns):
        cells = fns[fn]
        if only_run and not any(h for h, _ in cells.values()):
            never.append(fn)
            continue
        md.append(f"| `{fn}` | " + " | ".join(f"{cells[c][0]}/{cells[c][1]}" if c in cells else "-" for c in cols) + " |")
    if never:
        md += ["", f"{len(never)} in-scope function(s) executed at no target (listed in coverage/coverage.md)."]
    return md


def missed(cov: Coverage) -> dict[tuple[str, str], dict[int, set[str]]]:
    """The lines a target dispatches to and does not execute: for each (file, function) some target
    entered (executed at least one of its lines), {line: the targets that entered the function, have
    code for the line, and did not execute it}.  A function a target never entered (the ``_vl1024``
    variant at VLEN 128) is not dispatched there and counts nothing."""
    out: dict[tuple[str, str], dict[int, set[str]]] = defaultdict(lambda: defaultdict(set))
    for t in cov.targets:
        entered = {fn for _, _, fn in t.executed}
        ran = {(p, ln) for p, ln, _ in t.executed}
        for path, ln, fn in t.executable:
            if fn in entered and (path, ln) not in ran:
                out[(path, fn)][ln].add(t.target)
    return {k: dict(v) for k, v in out.items()}


def missed_md(cov: Coverage) -> list[str]:
    """:func:`missed` as markdown, one row per function: the lines (ranges) and at how many targets."""
    rows = []
    for (path, fn), lines in sorted(missed(cov).items(), key=lambda kv: (-len(kv[1]), kv[0])):
        where = "; ".join(f"{line_ranges(lns)} at {len(ts)} target(s)" + (f" ({', '.join(sorted(ts))})" if len(ts) <= 3 else "")
                          for ts, lns in by_targets(lines))
        rows.append(f"| `{fn}` | {path.split('/ggml-cpu/')[-1]} | {len(lines)} | {where} |")
    return ["| function | file | lines missed | lines: targets that entered the function and did not run them |",
            "|---|---|---|---|", *rows]


def by_targets(lines: dict[int, set[str]]) -> list[tuple[frozenset[str], list[int]]]:
    """{line: targets} grouped: (targets, their lines) per distinct set of targets, by first line."""
    by: dict[frozenset[str], list[int]] = defaultdict(list)
    for ln, targets in sorted(lines.items()):
        by[frozenset(targets)].append(ln)
    return sorted(by.items(), key=lambda kv: min(kv[1]))


def line_ranges(lines: list[int]) -> str:
    """Sorted line numbers as ranges: ``3-5,9``."""
    lines = sorted(lines)
    out, start = [], lines[0]
    for a, b in zip(lines, [*lines[1:], None]):
        if b != a + 1:
            out.append(f"{start}" if start == a else f"{start}-{a}")
            start = b
    return ",".join(out)


# ------------------------------------------------------------------ per arm of a VLEN switch

@functools.cache
def other_arms(path: str, vlen: int) -> frozenset[int]:
    """The lines of ``path`` in an arm of a VLEN switch that ``vlen`` does not dispatch to."""
    return frozenset(ln for sw in vlen_switches(path) for ln in sw.others(vlen))


def in_arm(t: TargetLines) -> TargetLines:
    """``t`` with its executable lines narrowed to the functions it entered, without the lines of the
    VLEN switch arms its VLEN does not dispatch to (those run at their own VLEN; a line outside any
    switch stays).  Its executed lines are kept, so :func:`missed` sees the same functions entered."""
    entered = {fn for _, _, fn in t.executed}
    return TargetLines(t.target, t.vlen, t.isa, t.stress,
                       {k for k in t.executable if k[2] in entered and k[1] not in other_arms(k[0], t.vlen)},
                       set(t.executed), t.compiler)


def arms(cov: Coverage) -> Coverage:
    """Each target of ``cov`` narrowed to the arms its VLEN dispatches to (:func:`in_arm`):
    :func:`missed` of it lists the in-arm lines a target did not execute."""
    return Coverage([in_arm(t) for t in cov.targets], list(cov.problems))


def arm_counts(t: TargetLines) -> tuple[int, int, int]:
    """Of a target narrowed by :func:`in_arm`: (lines executed, lines executable) in the functions it
    entered, and the executed lines of another VLEN's arm (0 unless a switch was misread)."""
    lines = {(p, ln) for p, ln, _ in t.executable}
    ran = {(p, ln) for p, ln, _ in t.executed}
    wrong = {(p, ln) for p, ln in ran if ln in other_arms(p, t.vlen)}
    return len(ran & lines), len(lines), len(wrong)


def describe_targets(targets: Iterable[str], cov: Coverage) -> str:
    """A set of target names, read: VLENs with the same builds together, ``(stress only)`` / ``(plain
    only)`` where the other stress mode of that build x VLEN is in ``cov`` and not in the set."""
    by_name = {t.target: t for t in cov.targets}
    modes = defaultdict(set)
    for t in cov.targets:
        modes[(t.build, t.vlen)].add(t.stress)
    got: dict[tuple[str, int], set[bool]] = defaultdict(set)
    for name in targets:
        t = by_name[name]
        got[(t.build, t.vlen)].add(t.stress)
    builds: dict[int, list[str]] = defaultdict(list)
    for (isa, vlen), stress in sorted(got.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        only = "" if stress == modes[(isa, vlen)] else (" (stress only)" if True in stress else " (plain only)")
        builds[vlen].append(isa + only)
    by_builds: dict[str, list[int]] = defaultdict(list)
    for vlen, isas in sorted(builds.items()):
        by_builds[", ".join(isas)].append(vlen)
    return "; ".join(f"VLEN {', '.join(map(str, vlens))}: {isas}" for isas, vlens in by_builds.items())


def arms_md(cov: Coverage) -> list[str]:
    """The per-arm statement as markdown: per build x VLEN, the lines executed / executable in the
    dispatched arms of the functions the target entered; then each in-arm line not executed, with the
    targets where it was not."""
    narrowed = arms(cov)
    switches = sorted({(p.split("/ggml-cpu/")[-1], sw.line) for p in {k[0] for t in cov.targets for k in t.executable}
                       for sw in vlen_switches(p)})
    files = defaultdict(list)
    for f, ln in switches:
        files[f].append(str(ln))
    md = [f"{len(switches)} `switch (__riscv_vlenb() * 8)` in the scope: "
          + "; ".join(f"{f} {', '.join(lns)}" for f, lns in files.items()) + ".", ""]
    cells: dict[tuple[str, int], dict[bool, tuple[tuple[int, int, int], TargetLines]]] = defaultdict(dict)
    for t in narrowed.targets:
        cells[(t.build, t.vlen)][t.stress] = (arm_counts(t), t)
    vlens = sorted({v for _, v in cells})
    merged = all(len(c) == 1 or (c[False][1].executable == c[True][1].executable
                                 and c[False][1].executed == c[True][1].executed) for c in cells.values())

    def cell(isa: str, vlen: int) -> str:
        c = cells.get((isa, vlen))
        if not c:
            return "-"
        shown = [c[s][0] for s in sorted(c)][:1 if merged else 2]
        return " / ".join(f"{h}/{n} ({100 * h / max(1, n):.1f} %)" for h, n, _ in shown)

    isas = list(dict.fromkeys(t.build for t in narrowed.targets))
    md += ["| build | " + " | ".join(f"VLEN {v}" for v in vlens) + " |", "|---|" + "---|" * len(vlens),
           *[f"| {isa} | " + " | ".join(cell(isa, v) for v in vlens) + " |" for isa in isas], ""]
    md.append("Stress modes merged: each build x VLEN ran the same lines with and without `--rvv-stress`."
              if merged else "A cell with two figures: without / with `--rvv-stress` (they differ).")
    wrong = sum(c[0][2] for cs in cells.values() for c in cs.values())
    md += ["", f"Lines of an arm the target's VLEN does not dispatch to, executed there: {wrong} "
           "(0 unless a switch was misread).", ""]
    rows = []
    lines = set()
    for (path, fn), missed_lines in sorted(missed(narrowed).items()):
        for targets, lns in by_targets(missed_lines):
            lines.update((path, ln) for ln in lns)
            rows.append(f"| {path.split('/ggml-cpu/')[-1]} | `{fn}` | {line_ranges(lns)} | {describe_targets(targets, cov)} |")
    md += [f"In-arm lines not executed at a target that entered their function: {len(lines)} lines, "
           f"{len(rows)} groups.", "", "| file | function | lines | not executed at |", "|---|---|---|---|", *rows]
    return md


def totals(cov: Coverage) -> list[str]:
    """One line per target: in-scope lines executed / executable."""
    out = []
    for t in cov.targets:
        lines = {(p, ln) for p, ln, _ in t.executable}
        ran = {(p, ln) for p, ln, _ in t.executed}
        out.append(f"{t.target}: {len(ran)}/{len(lines)} lines ({100 * len(ran) / max(1, len(lines)):.1f} %)")
    return out


def write(cov: Coverage, out: Path) -> list[Path]:
    """``<target>.info`` per target, ``merged.info``, ``coverage.md`` and the HTML view into ``out``;
    a file that cannot be written is a problem line (the others are still written)."""
    written = []

    def put(p: Path, text: str) -> None:
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
            written.append(p)
        except OSError as e:
            cov.problems.append(f"cannot write {p}: {e.strerror or e}")

    traces = {t.target: t.tracefile() for t in cov.targets}
    for name, tf in traces.items():
        put(out / f"{name}.info", lcov(name, tf))
    put(out / "merged.info", lcov("merged", merge(traces.values())))
    put(out / "targets.json", json.dumps([{"target": t.target, "vlen": t.vlen, "isa": t.isa, "stress": t.stress,
                                            "compiler": t.compiler, "executable": sorted(t.executable),
                                            "executed": sorted(t.executed)}
                                           for t in cov.targets]))
    md = ["# RVV line coverage", "", "Lines executed / executable per target (docs/coverage.md).", "",
          *[f"- {line}" for line in totals(cov)], "", *matrix_md(cov)]
    if cov.problems:
        md += ["", "## Problems", "", *[f"- {p}" for p in cov.problems]]
    put(out / "coverage.md", "\n".join(md) + "\n")
    try:
        written += write_html(cov, out, functions(cov), totals(cov))
    except OSError as e:
        cov.problems.append(f"cannot write the HTML view in {out}: {e.strerror or e}")
    return written


# ------------------------------------------------------------------ several runs


def load(d: Path) -> list[TargetLines]:
    """The targets a run's coverage directory holds (its ``targets.json``)."""
    return [TargetLines(j["target"], j["vlen"], j["isa"], j["stress"], {tuple(k) for k in j["executable"]},
                        {tuple(k) for k in j["executed"]}, j.get("compiler", ""))
            for j in json.loads((d / "targets.json").read_text())]


def combine(runs: Iterable[list[TargetLines]]) -> Coverage:
    """Several runs' targets in one coverage; a target of two runs with the same compiler is their union
    (two compilers' builds of one target stay two targets, named with their compilers)."""
    by: dict[tuple[int, str, bool, str], TargetLines] = {}
    for targets in runs:
        for t in targets:
            key = (t.vlen, t.isa, t.stress, t.compiler)
            if key in by:
                by[key].executable |= t.executable
                by[key].executed |= t.executed
            else:
                by[key] = TargetLines(t.target, t.vlen, t.isa, t.stress, set(t.executable), set(t.executed),
                                      t.compiler)
    for key, name in zip(by, named(list(by))):
        by[key].target = name
    return Coverage(sorted(by.values(), key=lambda t: (t.isa, t.vlen, t.stress)))

"""The gate, line by line: changed RVV lines that no test executed at any target that compiles them.

``rvvdiff gate --lines`` runs HEAD's tests with ``--rvv-coverage`` (harness/plugin/linecov.py): every
target (VLEN x ISA build x stress mode) records the in-scope source lines its build can execute (the
DWARF line table) and those its kernel servers executed.  A line HEAD adds or modifies against BASE
(``difflib`` over each in-scope file) is

- **covered** when some target executed it;
- **uncovered** when some target's build compiles it (it is in that build's line table) and no target
  executed it: it blocks, like an uncovered change, with ``file:line`` and its function;
- **compiled by no target run** when no build of the run has code for it (a comment, a declaration, a
  branch the preprocessor removed in every ISA build run, code the compiler folded away): listed, not
  blocking, since no test could execute it here.

Files are matched by their path below ``ggml-cpu/`` (the coverage scope, harness/report/coverage.py).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path

from harness.ggml.source import GgmlSource
from harness.report.coverage import TargetLines, in_scope


def scope_key(path: str) -> str | None:
    """``ggml-cpu/<rest>`` for a path inside the coverage scope, else None."""
    i = path.rfind("/ggml-cpu/")
    return ("ggml-cpu/" + path[i + len("/ggml-cpu/"):]) if i >= 0 and in_scope(path) is not None else None


def changed_lines(base: GgmlSource, head: GgmlSource) -> dict[str, set[int]]:
    """Per in-scope file (``ggml-cpu/...``), the HEAD line numbers added or modified against BASE."""
    def files(src: GgmlSource) -> dict[str, Path]:
        out = {}
        for p in (src.ggml / "src" / "ggml-cpu").rglob("*"):
            key = scope_key("/" + str(p)) if p.is_file() else None
            if key:
                out[key] = p
        return out

    b, h = files(base), files(head)
    out: dict[str, set[int]] = {}
    for key, hp in h.items():
        new = hp.read_text(errors="replace").splitlines()
        old = b[key].read_text(errors="replace").splitlines() if key in b else []
        if new == old:
            continue
        lines: set[int] = set()
        for op, _i1, _i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
            if op in ("replace", "insert"):
                lines.update(range(j1 + 1, j2 + 1))
        if lines:
            out[key] = lines
    return out


@dataclass
class LineVerdict:
    covered: list[tuple[str, int, str]] = field(default_factory=list)
    uncovered: list[tuple[str, int, str]] = field(default_factory=list)  # (file, line, function)
    not_compiled: list[tuple[str, int]] = field(default_factory=list)
    targets: int = 0

    def uncovered_functions(self) -> list[str]:
        return sorted({f for _, _, f in self.uncovered})

    def describe(self, allowed: tuple[str, ...] = ()) -> list[str]:
        """One line per function with uncovered lines: ``file:a-b,c (function)``."""
        by: dict[tuple[str, str], list[int]] = {}
        for path, ln, fn in self.uncovered:
            if fn not in allowed:
                by.setdefault((path, fn), []).append(ln)
        return [f"{path}:{_ranges(lines)} ({fn})" for (path, fn), lines in sorted(by.items())]

    def as_json(self) -> dict:
        return {"targets": self.targets, "covered": len(self.covered), "uncovered": [list(k) for k in self.uncovered],
                "not_compiled": [list(k) for k in self.not_compiled]}


def _ranges(lines: list[int]) -> str:
    lines = sorted(set(lines))
    out, start = [], lines[0]
    for a, b in zip(lines, lines[1:] + [None]):
        if b != a + 1:
            out.append(f"{start}" if start == a else f"{start}-{a}")
            start = b
    return ",".join(out)


def judge(changed: dict[str, set[int]], targets: list[TargetLines]) -> LineVerdict:
    """Each changed line against every target's executable and executed lines."""
    executable: dict[tuple[str, int], str] = {}
    executed: set[tuple[str, int]] = set()
    for t in targets:
        for path, ln, fn in t.executable:
            key = scope_key(path)
            if key:
                executable.setdefault((key, ln), fn)
        for path, ln, _fn in t.executed:
            key = scope_key(path)
            if key:
                executed.add((key, ln))
    v = LineVerdict(targets=len(targets))
    for path in sorted(changed):
        for ln in sorted(changed[path]):
            if (path, ln) in executed:
                v.covered.append((path, ln, executable.get((path, ln), "")))
            elif (path, ln) in executable:
                v.uncovered.append((path, ln, executable[(path, ln)]))
            else:
                v.not_compiled.append((path, ln))
    return v

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

Files are matched by their path below ``ggml-cpu/`` (the coverage scope, harness/binary/dwarf.py).

Sharded (a CI matrix over VLEN x ISA build), no shard sees every target: each writes its
:func:`record` (``gate-lines.json``: the changed lines, and which of them its targets compile and
execute) and ``rvvdiff linegate merge SHARD...`` judges their union (:func:`merge_shards`): a line is
uncovered when some shard compiles it and none executes it.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from harness.binary.dwarf import in_scope
from harness.ggml.source import GgmlSource
from harness.report.coverage import TargetLines, line_ranges


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
        return [f"{path}:{line_ranges(lines)} ({fn})" for (path, fn), lines in sorted(by.items())]

    def as_json(self) -> dict:
        """The verdict and the record a merge over shards needs (:func:`record`)."""
        return {"targets": self.targets, "covered": [list(k) for k in self.covered],
                "uncovered": [list(k) for k in self.uncovered], "not_compiled": [list(k) for k in self.not_compiled]}

    def counts(self) -> dict[str, int]:
        return {"changed": len(self.covered) + len(self.uncovered) + len(self.not_compiled), "covered": len(self.covered),
                "uncovered": len(self.uncovered), "not compiled by a target run": len(self.not_compiled),
                "targets": self.targets}


def merge(verdicts: list[dict]) -> LineVerdict:
    """Shards' verdicts (:meth:`LineVerdict.as_json`) as one: covered where any shard executed the line,
    uncovered where some shard compiles it and none executed it, not compiled where no shard has code."""
    covered: dict[tuple[str, int], str] = {}
    compiled: dict[tuple[str, int], str] = {}
    lines: set[tuple[str, int]] = set()
    targets = 0
    for v in verdicts:
        targets += v["targets"]
        for path, ln, fn in v["covered"]:
            covered[(path, ln)] = fn
        for path, ln, fn in v["uncovered"]:
            compiled[(path, ln)] = fn
        lines |= {(p, ln) for p, ln, *_ in v["covered"] + v["uncovered"] + v["not_compiled"]}
    out = LineVerdict(targets=targets)
    for key in sorted(lines):
        if key in covered:
            out.covered.append((*key, covered[key]))
        elif key in compiled:
            out.uncovered.append((*key, compiled[key]))
        else:
            out.not_compiled.append(key)
    return out


def merge_shards(shards: Iterable[Path]) -> tuple[LineVerdict, int]:
    """The verdict over the shards' ``gate-lines.json`` (a shard is the file, or a directory searched for it)
    and how many files it read (0: none was found)."""
    files = [f for s in shards for f in ([s] if s.is_file() else sorted(s.rglob("gate-lines.json")))]
    return merge([json.loads(f.read_text()) for f in files]), len(files)


def merged_summary(v: LineVerdict, shards: int, allowed: tuple[str, ...] = ()) -> list[str]:
    """The merged verdict in Markdown: a heading with the functions that still have uncovered lines (those of
    ``allowed`` left out), the counts, one line per function."""
    rows = v.describe(allowed)
    return [f"## rvvdiff: uncovered lines over {shards} shards (block): {len(rows)} functions", "",
            ", ".join(f"{k}: {n}" for k, n in v.counts().items()), "", *[f"- {r}" for r in rows]]


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

"""Reading C statements: the repack selection walked with one build's answers, and the VLEN switches.

The C reader (harness/ggml/csource.py) finds a function and keeps what a build compiles; this module
reads code as the few kinds of statements ggml's dispatch code is made of (``if`` / ``else``,
``switch`` with ``case`` labels, ``for`` / ``while`` / ``do`` loops, blocks, ``return``, ``break``,
anything else up to its ``;``: :func:`statements`).  Its users:

* ``ggml_repack_get_optimal_repack_type`` (:func:`read_selection`), walked as the machine would:
  what layout ggml repacks each weight type to on RISC-V, per VLEN, in a build with or without zvfh
  (cases/repack.py's ``scan_selection`` and its coverage scan).  What it does not understand is a
  note (file:line, the types affected), never an exception;
* every ``switch (__riscv_vlenb() * 8)`` of a source file (:func:`vlen_switches`): its arms, their
  lines and which of them fall through, for the per-arm statement of RVV line coverage
  (harness/report/coverage.py).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from harness.core.config import VLENS
from harness.ggml import csource
from harness.ggml.csource import closing
from harness.ggml.tree import type_name

SELECT_FN = "ggml_repack_get_optimal_repack_type"
_INSTANCE = re.compile(r"tensor_traits<\s*(block_\w+)\s*,\s*(\d+)\s*,\s*(\d+)\s*,\s*GGML_TYPE_(\w+)\s*>\s*(\w+)\s*;")
_BRANCH = re.compile(r"cur->type\s*==\s*GGML_TYPE_(\w+)")
_TYPE_TEST = re.compile(r"cur->type\s*(==|!=)\s*GGML_TYPE_(\w+)")
_ROW_TEST = re.compile(r"cur->ne\[1\]\s*%\s*(\w+)\s*==\s*0")
_IF, _SWITCH = re.compile(r"if\s*\("), re.compile(r"switch\s*\(")
_LOOP, _DO, _WHILE = re.compile(r"(?:for|while)\s*\("), re.compile(r"do\b"), re.compile(r"while\s*\(")
_ELSE, _BREAK = re.compile(r"else\b"), re.compile(r"break\s*;")
_RETURN = re.compile(r"return\b([^;]*);")
_LABEL = re.compile(r"(?:case\s+([^:;]+?)|default)\s*:(?!:)")


@dataclass(frozen=True)
class Rule:
    """ggml repacks to ``layout`` when the row count is a multiple of ``divisor``."""

    layout: str  # "q4_0_16x1"
    divisor: int


@dataclass(frozen=True)
class Selection:
    """What ``ggml_repack_get_optimal_repack_type`` returns on RISC-V in one build of a tree."""

    rules: dict[str, dict[int, Rule | None]]  # weight type -> VLEN -> rule (None: not repacked)
    where: dict[str, str]  # layout -> file:line of the return that picks it
    notes: tuple[str, ...]  # what the reader did not understand, file:line and the types affected


def layout_name(block: str, inter: int, cols: int) -> str:
    return f"{block.removeprefix('block_')}_{cols}x{inter}"


@dataclass
class Stmt:
    """One statement of the selection function (the few kinds it is made of)."""

    kind: str  # if / switch / loop / block / label / return / break / other
    pos: int  # offset in the body
    text: str = ""  # the condition (of an if or a loop), the switch expression, the case value, the returned expression
    body: list[Stmt] = field(default_factory=list)
    orelse: list[Stmt] = field(default_factory=list)


def _skip(text: str, i: int, end: int) -> int:
    while i < end and (text[i].isspace() or text[i] == ";"):
        i += 1
    return i


def _skip_space(text: str, i: int, end: int) -> int:
    while i < end and text[i].isspace():
        i += 1
    return i


def _loop_body(text: str, i: int, end: int) -> tuple[list[Stmt], int]:
    """The statement a loop repeats, from ``i`` on (none for an empty ``;``), and where the next starts."""
    i = _skip_space(text, i, end)
    if i >= end or text[i] == ";":
        return [], i + 1
    st, j = statement(text, i, end)
    return [st], j


def statements(text: str, i: int, end: int) -> list[Stmt]:
    out = []
    while (i := _skip(text, i, end)) < end:
        st, i = statement(text, i, end)
        out.append(st)
    return out


def statement(text: str, i: int, end: int) -> tuple[Stmt, int]:
    """The statement at ``i`` and where the next one starts (brackets matched by csource.closing)."""
    for kind, start in (("if", _IF), ("switch", _SWITCH)):
        if m := start.match(text, i):
            close = closing(text, m.end() - 1)
            st = Stmt(kind, i, text[m.end():close - 1])
            j = _skip(text, close, end)
            if kind == "switch":
                if j < end and text[j] == "{":
                    stop = closing(text, j)
                    st.body = statements(text, j + 1, stop - 1)
                    return st, stop
                return Stmt("other", i, text[i:j]), j
            then, j = statement(text, j, end)
            st.body = [then]
            k = _skip(text, j, end)
            if e := _ELSE.match(text, k):
                orelse, j = statement(text, _skip(text, e.end(), end), end)
                st.orelse = [orelse]
            return st, j
    if m := _LOOP.match(text, i):  # for (...) / while (...) and the statement it repeats
        close = closing(text, m.end() - 1)
        body, j = _loop_body(text, close, end)
        return Stmt("loop", i, text[m.end():close - 1], body), j
    if m := _DO.match(text, i):  # do statement while (...);
        body, j = _loop_body(text, m.end(), end)
        k = _skip_space(text, j, end)
        if w := _WHILE.match(text, k):
            close = closing(text, w.end() - 1)
            j = _skip_space(text, close, end)
            return Stmt("loop", i, text[w.end():close - 1], body), j + 1 if j < end and text[j] == ";" else j
        return Stmt("loop", i, "", body), j
    if text[i] == "{":
        stop = closing(text, i)
        return Stmt("block", i, body=statements(text, i + 1, stop - 1)), stop
    if m := _LABEL.match(text, i):
        return Stmt("label", i, (m.group(1) or "default").strip()), m.end()
    if m := _RETURN.match(text, i):
        return Stmt("return", i, m.group(1).strip()), m.end()
    if m := _BREAK.match(text, i):
        return Stmt("break", i), m.end()
    j = i  # any other statement (a declaration): up to its ';'
    while j < end and text[j] != ";":
        j = closing(text, j) if text[j] in "({[" else j + 1
    return Stmt("other", i, text[i:j]), j + 1


class SelectionWalk:
    """One walk of the selection function: weight type ``weight`` at ``vlen`` on RISC-V, where
    ``ggml_cpu_has_riscv_v()`` is 1, every other ``ggml_cpu_has_*`` / ``ggml_cpu_get_*`` 0,
    ``ggml_cpu_get_rvv_vlen()`` and ``__riscv_vlenb()`` VLEN / 8 bytes.  A row-count test
    ``cur->ne[1] % N == 0`` is taken both ways: the first return it guards becomes the rule
    (row counts that are multiples of N), and the walk goes on as if it failed."""

    def __init__(self, weight: str, vlen: int, consts: dict[str, int], instances: dict[str, str],
                 line: Callable[[int], str]) -> None:
        self.weight, self.vlen, self.consts, self.instances, self.line = weight, vlen, consts, instances, line
        self.rule: Rule | None = None
        self.rule_at = ""
        self.divisors: list[int] = []
        self.notes: dict[str, None] = {}

    def note(self, pos: int, message: str) -> None:
        self.notes[f"{self.line(pos)}: {SELECT_FN}: {message} (affects what {self.weight} repacks to)"] = None

    def value(self, expr: str, pos: int) -> int | None:
        e = _ROW_TEST.sub("1", expr)
        e = _TYPE_TEST.sub(lambda m: str(int((type_name("GGML_TYPE_" + m.group(2)) == self.weight) == (m.group(1) == "=="))), e)
        e = re.sub(r"\bggml_cpu_has_riscv_v\s*\(\s*\)", "1", e)
        e = re.sub(r"\b(?:ggml_cpu_get_rvv_vlen|__riscv_vlenb)\s*\(\s*\)", str(self.vlen // 8), e)
        e = re.sub(r"\bggml_cpu_(?:has|get)_\w+\s*\(\s*\)", "0", e)
        unknown = sorted(set(re.findall(r"[A-Za-z_]\w*", e)) - set(self.consts))
        try:
            if unknown:
                raise ValueError(f"unknown {', '.join(unknown)}")
            return csource.evaluate(e, self.consts)
        except ValueError as err:
            self.note(pos, f"cannot evaluate `{' '.join(expr.split())}` ({err}); taken as false")
            return None

    def run(self, stmts: list[Stmt]) -> str | None:
        """None: carry on; "break"; "return": the function returned; "row-return": returned under
        a row-count test (the enclosing test turns it back into carry on)."""
        for stmt in stmts:
            if sig := self.step(stmt):
                return sig
        return None

    def step(self, st: Stmt) -> str | None:
        if st.kind == "block":
            return self.run(st.body)
        if st.kind == "if":
            rows = [self.consts.get(d, int(d) if d.isdigit() else 0) for d in _ROW_TEST.findall(st.text)]
            if not all(rows):
                self.note(st.pos, f"a row-count test `{' '.join(st.text.split())}` this reader cannot evaluate; taken as false")
                return None
            on = self.value(st.text, st.pos)
            if on is None:
                return None
            if not on:
                return self.run(st.orelse)
            self.divisors += rows
            sig = self.run(st.body)
            del self.divisors[len(self.divisors) - len(rows):]
            return None if sig == "row-return" and rows else sig
        if st.kind == "switch":
            on = self.value(st.text, st.pos)
            if on is None:
                return None
            labels = {}
            for i, s in enumerate(st.body):
                if s.kind == "label":
                    v = "default" if s.text == "default" else self.value(s.text, s.pos)
                    labels.setdefault(v, i)
            start = labels.get(on, labels.get("default"))
            sig = None if start is None else self.run(st.body[start + 1:])
            return None if sig == "break" else sig
        if st.kind == "break":
            return "break"
        if st.kind == "return":
            return self.returned(st)
        return None  # a label passed by fall-through, a declaration

    def returned(self, st: Stmt) -> str:
        under_rows = bool(self.divisors)
        if st.text in ("nullptr", "NULL", "0"):
            if under_rows:
                self.note(st.pos, "returns nullptr for some row counts only; not modelled, taken as repacking them")
            return "row-return" if under_rows else "return"
        m = re.fullmatch(r"&\s*(\w+)", st.text)
        layout = self.instances.get(m.group(1)) if m else None
        if layout is None:
            self.note(st.pos, f"returns `{st.text}`, which is not a tensor_traits instance this reader knows; "
                              "taken as not repacking")
            return "return"
        divisor = math.lcm(*self.divisors) if under_rows else 1
        if self.rule is None:
            self.rule, self.rule_at = Rule(layout, divisor), self.line(st.pos)
        elif self.rule != Rule(layout, divisor):
            self.note(st.pos, f"a second layout ({layout}, rows % {divisor} == 0) after {self.rule.layout} "
                              f"(rows % {self.rule.divisor} == 0); not modelled, the first is kept")
        return "row-return" if under_rows else "return"


def read_selection(cpu_dir: Path, zvfh: bool) -> Selection:
    """What ``ggml_repack_get_optimal_repack_type`` of ``<cpu_dir>/repack.cpp`` returns on RISC-V,
    per weight type and VLEN, in a build with or without zvfh: the function as that build
    compiles it (harness/ggml/csource.py), walked with the RISC-V answers of ``ggml_cpu_has_*`` and
    the VLEN (:class:`SelectionWalk`).  A type the function does not mention, or whose walk returns
    nothing, gets None at every VLEN.  What the reader does not understand becomes a note (file:line,
    the types affected), never an exception; read again when the file changes."""
    path = Path(cpu_dir) / "repack.cpp"
    common = Path(cpu_dir).parent / "ggml-common.h"
    stamp = (path.stat().st_mtime if path.exists() else 0.0, common.stat().st_mtime if common.exists() else 0.0)
    return _read_selection(path, common, zvfh, stamp)


@cache
def _read_selection(path: Path, common: Path, zvfh: bool, stamp: tuple[float, float]) -> Selection:
    if not path.exists():
        return Selection({}, {}, (f"{path}: no such file; nothing is repacked",))
    cfile = csource.read(path)
    macros = csource.rvv_macros(["zfh", "zvfh"] if zvfh else [])
    fn = cfile.functions(macros).get(SELECT_FN)
    if fn is None:
        return Selection({}, {}, (f"{path}: no {SELECT_FN} in a {'zvfh' if zvfh else 'v'} build; nothing is repacked",))
    consts = csource.read(common).defines({**macros, "GGML_COMMON_DECL_CPP": 1}) if common.exists() else {}
    consts.update(cfile.defines(macros))
    # line of the body's opening brace: the first '{' from the definition's first line on
    lines = csource.strip_comments(cfile.text).split("\n")
    brace = next((n for n in range(fn.line - 1, len(lines)) if "{" in lines[n]), fn.line - 1) + 1

    def line(pos: int) -> str:
        return f"{path}:{brace + fn.body.count(chr(10), 0, pos)}"

    last = brace + fn.body.count("\n")
    notes: dict[str, None] = {f"{n} (affects the selection: {SELECT_FN})": None
                              for n in cfile.preprocessed(macros).notes if fn.line <= n.line <= last}
    body = fn.body
    instances = {m.group(5): layout_name(m.group(1), int(m.group(2)), int(m.group(3))) for m in _INSTANCE.finditer(body)}
    stmts = statements(body, 0, len(body))
    rules: dict[str, dict[int, Rule | None]] = {}
    where: dict[str, str] = {}
    for weight in dict.fromkeys(type_name("GGML_TYPE_" + t) for t in _BRANCH.findall(body)):
        rules[weight] = {}
        for v in VLENS:
            run = SelectionWalk(weight, v, consts, instances, line)
            run.run(stmts)
            rules[weight][v] = run.rule
            if run.rule:
                where.setdefault(run.rule.layout, run.rule_at)
            notes.update(run.notes)
    return Selection(rules, where, tuple(notes))


# ------------------------------------------------------------------ VLEN switches

_VLEN_SWITCH = re.compile(r"\bswitch\s*\(\s*__riscv_vlenb\s*\(\s*\)\s*\*\s*8\s*\)\s*\{")
_CASE_VLEN = re.compile(r"\(?\s*(\d+)\s*\)?")
#: A statement (besides ``break`` and ``return``) after which control does not reach the next label.
_LEAVES_ARM = re.compile(r"(?:continue|goto\s+\w+|(?:GGML_ABORT|GGML_UNREACHABLE|abort|__builtin_unreachable)"
                         r"\s*\(.*)", re.S)


@dataclass(frozen=True)
class Arm:
    """One label of a VLEN switch and the code up to the next label: ``vlen`` None for ``default:``;
    ``first``..``last`` its lines (the label's line to its last code); ``falls_through`` when control
    reaches the next label (an empty arm, or code whose last statement is not a break / return)."""

    vlen: int | None
    first: int
    last: int
    falls_through: bool


@dataclass(frozen=True)
class VlenSwitch:
    """A ``switch (__riscv_vlenb() * 8)`` of a source file: its line, the line of its closing brace, its arms."""

    path: str
    line: int
    end: int
    arms: tuple[Arm, ...]

    def dispatched(self, vlen: int) -> set[int]:
        """The lines of the arm ``vlen`` dispatches to (``case vlen``, else ``default``), and of the
        arms it falls through into."""
        i = next((k for k, a in enumerate(self.arms) if a.vlen == vlen), None)
        if i is None:
            i = next((k for k, a in enumerate(self.arms) if a.vlen is None), len(self.arms))
        out: set[int] = set()
        for a in self.arms[i:]:
            out.update(range(a.first, a.last + 1))
            if not a.falls_through:
                break
        return out

    def others(self, vlen: int) -> set[int]:
        """The lines of the arms ``vlen`` does not dispatch to (a line shared with its arm is not one)."""
        every = {ln for a in self.arms for ln in range(a.first, a.last + 1)}
        return every - self.dispatched(vlen)


def _leaves(code: list[Stmt]) -> bool:
    """Whether control leaves the switch at the end of an arm's statements: the last is a ``break``,
    ``return``, ``continue``, ``goto`` or a call that does not return (``GGML_ABORT`` ...), or a block
    whose last statement leaves, or an ``if`` / ``else`` both of whose branches leave.  A loop does not
    (its ``break`` leaves the loop), nor an ``if`` without ``else``."""
    if not code:
        return False
    last = code[-1]
    if last.kind in ("break", "return"):
        return True
    if last.kind == "block":
        return _leaves(last.body)
    if last.kind == "if":
        return bool(last.orelse) and _leaves(last.body) and _leaves(last.orelse)
    return last.kind == "other" and bool(_LEAVES_ARM.fullmatch(last.text.strip()))


def vlen_switches(path: str) -> tuple[VlenSwitch, ...]:
    """Every ``switch (__riscv_vlenb() * 8)`` of a source file (none when it cannot be read), in every
    preprocessor branch: its ``case N:`` / ``default:`` labels (not those of a switch nested in an
    arm), each arm's lines, and whether it falls through into the next (:func:`_leaves`).  Read again
    when the file changes."""
    try:
        return _vlen_switches(path, Path(path).stat().st_mtime)
    except OSError:
        return ()


@cache
def _vlen_switches(path: str, mtime: float) -> tuple[VlenSwitch, ...]:
    cfile = csource.read(Path(path))
    if "__riscv_vlenb" not in cfile.text:
        return ()
    text = cfile.preprocessed(None).text  # comments, literals and directives blanked, lines kept

    def line(i: int) -> int:
        return text.count("\n", 0, i) + 1

    out = []
    for m in _VLEN_SWITCH.finditer(text):
        sw, stop = statement(text, m.start(), len(text))
        close = stop - 1  # the switch's closing brace
        groups: list[tuple[Stmt, list[Stmt]]] = []  # a label and the statements up to the next one
        for st in sw.body:
            if st.kind == "label" and (st.text == "default" or _CASE_VLEN.fullmatch(st.text)):
                groups.append((st, []))
            elif groups:
                groups[-1][1].append(st)
        arms = []
        for k, (label, code) in enumerate(groups):
            upto = groups[k + 1][0].pos if k + 1 < len(groups) else close
            last = label.pos + len(text[label.pos:upto].rstrip()) - 1
            case = _CASE_VLEN.fullmatch(label.text)
            arms.append(Arm(int(case.group(1)) if case else None, line(label.pos), line(last), not _leaves(code)))
        out.append(VlenSwitch(path, line(m.start()), line(close), tuple(arms)))
    return tuple(out)

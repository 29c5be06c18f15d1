"""The lowest layer of the C reader (harness/ggml/csource.py): comments and string literals, the
``#if`` expressions, and the conditional preprocessor that keeps what one build compiles.

* comments and string literals are removed / kept opaque before anything else is read;
* ``#if`` / ``#ifdef`` / ``#ifndef`` / ``#elif`` / ``#else`` / ``#endif`` with ``defined``, integer
  literals, macros with known values, ``! && || == != < <= > >= + - * /`` and parentheses.  An
  identifier it does not know is 0, as in C.  An expression it cannot evaluate (a function-like
  macro such as ``__has_include(...)``) becomes a :class:`Note` naming file:line, and that branch
  is taken as not compiled.

Its names are csource's too (``csource.preprocess``, ``csource.Note`` ...): read through csource.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from harness.core.memo import DiskMemo, code_digest

#: Macros every riscv64 build of ggml-cpu with RVV defines (the compiler's and CMake's).
RVV_MACROS: dict[str, int] = {"__riscv": 1, "__riscv_v": 1000000, "__riscv_v_intrinsic": 12000,
                              "__riscv_xlen": 64, "__linux__": 1, "__GNUC__": 4, "__clang__": 1,
                              "GGML_USE_CPU_REPACK": 1, "GGML_USE_LLAMAFILE": 1}


def rvv_macros(extensions: Iterable[str] = ()) -> dict[str, int]:
    """The predefined macros of an RVV build that also has ``extensions`` (``zfh``, ``zvfh``, ...):
    the compiler defines ``__riscv_<ext>`` for each."""
    return {**RVV_MACROS, **{f"__riscv_{e}": 1 for e in extensions}}


@dataclass(frozen=True)
class Note:
    """Something the reader did not understand, and where."""

    file: Path
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.message}"


# ------------------------------------------------------------------ comments and strings

_LEXEME = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def strip_comments(text: str) -> str:
    """``text`` with comments blanked (newlines kept, so line numbers stay) and string / character
    literals replaced by ``""`` / ``' '`` padded to their length (so braces inside them do not count)."""
    def repl(m: re.Match[str]) -> str:
        s = m.group(0)
        if s.startswith("/"):
            return re.sub(r"[^\n]", " ", s)
        q = s[0]
        inner = re.sub(r"[^\n]", " ", s[1:-1])
        return q + inner + q
    # Line continuations join directive lines; keep the line count by moving the newline.
    return _LEXEME.sub(repl, text)


def string_literals(text: str) -> list[str]:
    """The string literals of ``text`` (with their quotes), comments skipped, in order: the instructions of inline
    assembly, which :func:`strip_comments` blanks."""
    return [m.group(0) for m in _LEXEME.finditer(text) if m.group(0).startswith('"')]


# ------------------------------------------------------------------ #if expressions

_TOKEN = re.compile(r"\s*(?:(defined)\b|(0[xX][0-9a-fA-F]+|\d+)[uUlL]*|([A-Za-z_]\w*)|(&&|\|\||==|!=|<=|>=|[!<>+\-*/%()]))")


class _Unsupported(ValueError):
    pass



#: C's binary operators on the integers of a preprocessor expression (division by zero taken as 0).
_BINARY = {"||": lambda v, w: int(bool(v) or bool(w)), "&&": lambda v, w: int(bool(v) and bool(w)),
           "==": lambda v, w: int(v == w), "!=": lambda v, w: int(v != w), "<": lambda v, w: int(v < w),
           "<=": lambda v, w: int(v <= w), ">": lambda v, w: int(v > w), ">=": lambda v, w: int(v >= w),
           "+": lambda v, w: v + w, "-": lambda v, w: v - w, "*": lambda v, w: v * w,
           "/": lambda v, w: v // w if w else 0, "%": lambda v, w: v % w if w else 0}

def evaluate(expr: str, macros: Mapping[str, int]) -> int:
    """The value of a ``#if`` expression; raises ValueError when it cannot be evaluated."""
    toks: list[tuple[str, str]] = []
    pos, expr = 0, expr.strip()
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if not m or m.end() == pos:
            if expr[pos:].strip() == "":
                break
            raise _Unsupported(f"cannot read {expr[pos:]!r}")
        pos = m.end()
        if m.group(1):
            toks.append(("defined", ""))
        elif m.group(2):
            toks.append(("num", m.group(2)))
        elif m.group(3):
            toks.append(("id", m.group(3)))
        else:
            toks.append(("op", m.group(4)))
    i = 0

    def peek() -> tuple[str, str] | None:
        return toks[i] if i < len(toks) else None

    def take() -> tuple[str, str]:
        nonlocal i
        if i >= len(toks):
            raise _Unsupported("unexpected end")
        i += 1
        return toks[i - 1]

    def primary() -> int:
        t = take()
        if t == ("op", "("):
            v = binary(0)
            if take() != ("op", ")"):
                raise _Unsupported("missing )")
            return v
        if t == ("op", "!"):
            return int(not primary())
        if t == ("op", "-"):
            return -primary()
        if t[0] == "defined":
            paren = peek() == ("op", "(")
            if paren:
                take()
            name = take()
            if name[0] != "id":
                raise _Unsupported("defined without a name")
            if paren and take() != ("op", ")"):
                raise _Unsupported("missing )")
            return int(name[1] in macros)
        if t[0] == "num":
            return int(t[1], 0)
        if t[0] == "id":
            if peek() == ("op", "("):
                raise _Unsupported(f"function-like macro {t[1]}(...)")
            return int(macros.get(t[1], 0))
        raise _Unsupported(f"unexpected {t[1]!r}")

    levels = [("||",), ("&&",), ("==", "!="), ("<", "<=", ">", ">="), ("+", "-"), ("*", "/", "%")]

    def binary(level: int) -> int:
        if level == len(levels):
            return primary()
        v = binary(level + 1)
        while (t := peek()) is not None and t[0] == "op" and t[1] in levels[level]:
            take()
            w = binary(level + 1)
            op = t[1]
            v = _BINARY[op](v, w)
        return v

    v = binary(0)
    if i != len(toks):
        raise _Unsupported(f"unexpected {toks[i][1]!r}")
    return v


# ------------------------------------------------------------------ the conditional preprocessor

_DIRECTIVE = re.compile(r"^\s*#\s*(\w+)(.*)$")


@dataclass
class Preprocessed:
    """A file with the branches a build does not compile blanked out (line numbers kept)."""

    text: str
    notes: list[Note]
    #: For each line (0-based), the conditions of the enclosing #if branches, outermost first.
    conditions: list[tuple[str, ...]]
    #: The object-like macros at the end of the file (those given, with its #define / #undef
    #: followed); None when read with ``macros=None``.
    macros: dict[str, int] | None = None
    #: Every ``#define`` in a compiled branch (object- and function-like): name -> (line, its text
    #: after the name, whitespace collapsed); the last one wins.
    definitions: dict[str, tuple[int, str]] = field(default_factory=dict)
    #: The digest of what it was read from (text, macros, path and the reader's code): the key under which
    #: readings of this text are kept (:data:`MEMO`).
    digest: str = ""


#: The reader's results kept between runs (harness/core/memo.py), keyed by the reader's code: every module
#: of harness/ggml, so a change to any of them reads afresh.
MEMO = DiskMemo("csource", code_digest(Path(__file__).parent.glob("*.py")))


def preprocess(text: str, macros: Mapping[str, int] | None, path: Path = Path("?")) -> Preprocessed:
    """Keep what a build with ``macros`` compiles; ``macros=None`` keeps every branch (then only the
    conditions are recorded).  ``#define`` / ``#undef`` of object-like macros are followed.  Read once
    per text, macros and path (:data:`MEMO`)."""
    key = MEMO.key("preprocess", text, json.dumps(None if macros is None else sorted(dict(macros).items())), str(path))

    def compute() -> Preprocessed:
        pp = _preprocess(text, macros, path)
        pp.digest = key
        return pp
    return MEMO.through(key, compute, Preprocessed)


def _preprocess(text: str, macros: Mapping[str, int] | None, path: Path) -> Preprocessed:
    macros = None if macros is None else dict(macros)
    lines = strip_comments(text).split("\n")
    out: list[str] = []
    conds: list[tuple[str, ...]] = []
    notes: list[Note] = []
    definitions: dict[str, tuple[int, str]] = {}
    # stack entries: (this branch active, some branch taken, condition text of this branch)
    stack: list[tuple[bool, bool, str]] = []
    prev: list[str] = []  # conditions of the earlier branches of the innermost #if (for #elif / #else)
    prevs: list[list[str]] = []
    n = 0
    while n < len(lines):
        line = lines[n]
        start = n
        while line.endswith("\\") and n + 1 < len(lines):  # a continued directive
            n += 1
            line = line[:-1] + " " + lines[n]
        d = _DIRECTIVE.match(line)
        active = all(a for a, _, _ in stack)
        if d:
            kind, rest = d.group(1), d.group(2).strip()

            def value(expr: str, kind: str = kind, start: int = start) -> bool:
                if macros is None:
                    return True
                try:
                    return bool(evaluate(expr, macros))
                except ValueError as e:
                    notes.append(Note(path, start + 1, f"#{kind} {expr}: {e}; taken as not compiled"))
                    return False

            if kind in ("if", "ifdef", "ifndef"):
                expr = rest if kind == "if" else (f"defined({rest.split()[0]})" if kind == "ifdef"
                                                  else f"!defined({rest.split()[0]})")
                on = active and value(expr)
                stack.append((on, on, expr))
                prevs.append(prev)
                prev = [expr]
            elif kind == "elif" and stack:
                _, taken, _ = stack.pop()
                outer = all(a for a, _, _ in stack)
                on = outer and not taken and value(rest)
                cond = " && ".join([f"!({p})" for p in prev] + [f"({rest})"])
                stack.append((on, taken or on, cond))
                prev.append(rest)
            elif kind == "else" and stack:
                _, taken, _ = stack.pop()
                outer = all(a for a, _, _ in stack)
                cond = " && ".join(f"!({p})" for p in prev)
                stack.append((outer and not taken if macros is not None else True, True, cond))
            elif kind == "endif" and stack:
                stack.pop()
                prev = prevs.pop()
            if kind == "define" and active and (dm := re.match(r"(\w+)(.*)", rest, re.S)):
                definitions[dm.group(1)] = (start + 1, re.sub(r"\s+", " ", dm.group(2)).strip())
            if macros is not None and active and kind == "define":
                m = re.match(r"(\w+)(\(?)\s*(.*)", rest)
                if m and not m.group(2):
                    try:
                        macros[m.group(1)] = evaluate(m.group(3), macros) if m.group(3) else 1
                    except ValueError:
                        macros[m.group(1)] = 1
            elif macros is not None and active and kind == "undef":
                macros.pop(rest.split()[0] if rest else "", None)
            for _ in range(start, n + 1):
                out.append("")
                conds.append(tuple(c for _, _, c in stack))
        else:
            keep = macros is None or active
            # a backslash-continued code line (e.g. inline asm) keeps its own lines, so line numbers stay
            for k in range(start, n + 1):
                out.append(lines[k] if keep else "")
                conds.append(tuple(c for _, _, c in stack))
        n += 1
    return Preprocessed("\n".join(out), notes, conds, macros, definitions)

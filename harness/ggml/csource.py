"""The one reader of ggml's C and C++ sources.

Every place that needs to know what a ggml tree contains asks this module: the kernel server's
generated bindings (harness/build/bindings.py), the coverage scans of the kernel families (RVV entry
points, VLEN variants and their dispatch, the repack selection, vec.h's RVV paths), and the
known-failure fingerprints (the source of the buggy function).

It is not a C parser.  It understands what ggml's kernel sources are made of:

* comments and string literals (removed / kept opaque before anything else is read);
* the conditional preprocessor: ``#if`` / ``#ifdef`` / ``#ifndef`` / ``#elif`` / ``#else`` /
  ``#endif`` with ``defined``, integer literals, macros with known values, ``! && || == != < <= >
  >= + - * /`` and parentheses.  An identifier it does not know is 0, as in C.  An expression it
  cannot evaluate (a function-like macro such as ``__has_include(...)``) becomes a :class:`Note`
  naming file:line, and that branch is taken as not compiled;
* top-level function definitions (free functions, template specialisations, inside namespaces and
  ``extern "C"`` blocks), with the preprocessor conditions that enclose them;
* prototypes, ``enum`` members with their values, ``struct`` / ``typedef`` names;
* a VLEN dispatch: a ``switch`` on ``__riscv_vlenb() * 8`` or an ``if`` chain on a variable
  holding it.

What it cannot understand is reported (``notes``), never raised at collection.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from harness.core.config import VLENS

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


def preprocess(text: str, macros: Mapping[str, int] | None, path: Path = Path("?")) -> Preprocessed:
    """Keep what a build with ``macros`` compiles; ``macros=None`` keeps every branch (then only the
    conditions are recorded).  ``#define`` / ``#undef`` of object-like macros are followed."""
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


# ------------------------------------------------------------------ definitions

@dataclass(frozen=True)
class Function:
    """A function definition of a tree."""

    name: str  # as written before its parameter list (template arguments included)
    file: Path
    line: int  # 1-based line of the opening brace's statement
    signature: str  # the text before the body, whitespace collapsed
    body: str  # between the outer braces (comments removed; preprocessed when read with macros)
    conditions: tuple[str, ...] = ()  # #if conditions around the definition, outermost first
    end: int = 0  # 1-based line of the closing brace

    @property
    def static(self) -> bool:
        return bool(re.search(r"\bstatic\b", self.signature))

    @property
    def noinline(self) -> bool:
        return "NOINLINE" in self.signature or "noinline" in self.signature

    @property
    def fingerprint(self) -> str:
        """A digest of the function's code: signature and body with comments removed and whitespace
        collapsed, so reformatting a comment does not change it and any change to the code does."""
        code = re.sub(r"\s+", " ", f"{self.signature} {{{self.body}}}").strip()
        return hashlib.sha256(code.encode()).hexdigest()[:16]

    def where(self) -> str:
        return f"{self.file}:{self.line}"


_NAME_BEFORE_PAREN = re.compile(r"([A-Za-z_~][\w:~]*(?:\s*<[^<>(){};]*>)?)\s*$")
_NOT_FUNCTIONS = {"if", "for", "while", "switch", "return", "sizeof", "defined", "catch"}


def _match_brace(text: str, start: int) -> int:
    """Index just past the brace that closes the one at ``start``."""
    depth = 0
    for i in range(start, len(text)):
        c = text[i]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i + 1
    return len(text)


def closing(text: str, start: int) -> int:
    """Index just past the bracket that closes the ``(``, ``[`` or ``{`` at ``start`` (``len(text)``
    when unbalanced), in code read by this module (comments removed, literals blanked): for
    readers of a function body's statements (cases/repack_cases.py reads the repack selection)."""
    open_, close = text[start], {"(": ")", "[": "]", "{": "}"}[text[start]]
    depth = 0
    for i in range(start, len(text)):
        c = text[i]
        if c == open_:
            depth += 1
        elif c == close:
            depth -= 1
            if depth == 0:
                return i + 1
    return len(text)


def _definitions(pp: Preprocessed, path: Path) -> list[Function]:
    text = pp.text
    out: list[Function] = []
    i, n = 0, len(text)
    stmt = 0  # where the current top-level statement starts
    while i < n:
        c = text[i]
        if c in ";}":
            stmt = i + 1
            i += 1
            continue
        if c != "{":
            i += 1
            continue
        head = text[stmt:i]
        flat = re.sub(r"\s+", " ", head).strip()
        if re.fullmatch(r'(?:inline\s+)?namespace(?:\s+[\w:]+)?|extern\s+"[^"]*"', flat):
            # (the linkage's string literal is blanked by strip_comments: extern "C" reads extern " ")
            stmt = i + 1  # descend: the block's members are top level
            i += 1
            continue
        end = _match_brace(text, i)
        paren = head.find("(")
        if paren > 0 and not re.search(r"\b(struct|class|union|enum)\b[^(]*$", head[:paren]) and "=" not in head[:paren]:
            m = _NAME_BEFORE_PAREN.search(head[:paren])
            if m and m.group(1) not in _NOT_FUNCTIONS:
                line = text.count("\n", 0, stmt + len(head) - len(head.lstrip())) + 1
                name = re.sub(r"\s+", "", m.group(1)).replace(",", ", ")
                out.append(Function(name, path, line, flat, text[i + 1:end - 1],
                                    pp.conditions[min(line - 1, len(pp.conditions) - 1)],
                                    line + text.count("\n", stmt + len(head) - len(head.lstrip()), end - 1)))
        i = end
        stmt = end
        # a definition's closing brace may be followed by ';' (struct) - harmless
    return out


@dataclass
class CFile:
    """One source file of a tree, read once."""

    path: Path
    text: str
    notes: list[Note] = field(default_factory=list)

    @classmethod
    def read(cls, path: Path) -> CFile:
        return cls(Path(path), Path(path).read_text(errors="replace"))

    def preprocessed(self, macros: Mapping[str, int] | None) -> Preprocessed:
        pp = preprocess(self.text, macros, self.path)
        self.notes.extend(n for n in pp.notes if n not in self.notes)
        return pp

    def functions(self, macros: Mapping[str, int] | None = None) -> dict[str, Function]:
        """Definitions a build with ``macros`` compiles (every branch when None: then a name
        defined in two branches keeps its first definition)."""
        out: dict[str, Function] = {}
        for f in _definitions(self.preprocessed(macros), self.path):
            out.setdefault(f.name, f)
        return out

    def defines(self, macros: Mapping[str, int]) -> dict[str, int]:
        """``macros`` after a build with them reads this file: its object-like ``#define`` /
        ``#undef`` in the compiled branches followed (a header's effect on what includes it,
        e.g. simd-mappings.h defining ``GGML_SIMD`` for vec.h in an RVV build)."""
        return dict(self.preprocessed(macros).macros or {})

    def declared(self) -> set[str]:
        """Names of the functions this file declares or defines (every branch)."""
        text = strip_comments(self.text)
        names = set(re.findall(r"\b([A-Za-z_]\w*)\s*\([^;{}()]*(?:\([^()]*\)[^;{}()]*)*\)\s*(?:const\s*)?[;{]", text))
        return names - _NOT_FUNCTIONS

    def types(self) -> set[str]:
        """Names of the structs and typedefs this file declares."""
        text = strip_comments(self.text)
        names = set(re.findall(r"\bstruct\s+(\w+)\s*\{", text))
        names |= set(re.findall(r"\}\s*(\w+)\s*;", text))
        names |= set(re.findall(r"\btypedef\s+[^;{}]*?\b(\w+)\s*;", text))
        names |= set(re.findall(r"\busing\s+(\w+)\s*=", text))
        return names

    def enum(self, name: str) -> dict[str, int]:
        """Members of ``enum name { ... }`` with their values."""
        text = strip_comments(self.text)
        m = re.search(rf"\benum\s+{re.escape(name)}\s*\{{", text)
        if not m:
            return {}
        body = text[m.end():_match_brace(text, m.end() - 1) - 1]
        out: dict[str, int] = {}
        nxt = 0
        for item in body.split(","):
            item = item.strip()
            if not item or item.startswith("#"):
                continue
            mm = re.match(r"(\w+)\s*(?:=\s*(.+))?$", item, re.S)
            if not mm:
                self.notes.append(Note(self.path, text.count("\n", 0, m.end()) + 1,
                                       f"enum {name}: cannot read member {item!r}"))
                continue
            if mm.group(2):
                try:
                    nxt = evaluate(mm.group(2), out)
                except ValueError:
                    self.notes.append(Note(self.path, text.count("\n", 0, m.end()) + 1,
                                           f"enum {name}: cannot read the value of {mm.group(1)}"))
                    continue
            out[mm.group(1)] = nxt
            nxt += 1
        return out


@functools.lru_cache(maxsize=256)
def _read_cached(path: Path, mtime: float) -> CFile:
    return CFile.read(path)


def read(path: Path) -> CFile:
    """``path`` read once per content change (mtime)."""
    p = Path(path)
    return _read_cached(p, p.stat().st_mtime)


# ------------------------------------------------------------------ VLEN dispatch

_CALL = re.compile(r"\b([A-Za-z_]\w*)\s*\(")


def vlen_dispatch(body: str, callees: Iterable[str], vlens: Iterable[int] = VLENS) -> dict[int, str] | None:
    """VLEN -> the function of ``callees`` that ``body`` calls for it, when ``body`` dispatches on
    ``__riscv_vlenb() * 8`` with a ``switch`` or an ``if`` chain; None when it calls none of them.
    Raises ValueError when it calls them through a dispatch this reader does not know."""
    names = set(callees)
    calls = [c for c in _CALL.findall(body) if c in names]
    if not calls:
        return None
    vlens = tuple(vlens)
    sw = re.search(r"switch\s*\(\s*__riscv_vlenb\(\)\s*\*\s*8\s*\)\s*\{", body)
    if sw:
        block = body[sw.end():_match_brace(body, sw.end() - 1) - 1]
        table: dict[int, str] = {}
        default = None
        pending: list[str] = []
        for label, code in re.findall(r"(case\s+\d+|default)\s*:(.*?)(?=case\s+\d+\s*:|default\s*:|$)", block, re.S):
            pending.append(label)
            callee = next((c for c in _CALL.findall(code) if c in names), None)
            if callee is None and not re.search(r"\b(break|return)\b", code):
                continue  # falls through to the next label
            for lab in pending:
                if callee is None:
                    continue
                if lab == "default":
                    default = callee
                else:
                    table[int(lab.split()[1])] = callee
            pending = []
        return {v: table.get(v, default) for v in vlens if table.get(v, default)}
    var = re.search(r"(\w+)\s*=\s*__riscv_vlenb\(\)\s*\*\s*8\s*;", body)
    if var:
        # (an ``else if`` is the next link of the chain, not an else arm calling "if")
        chain = re.findall(r"(?:if\s*\(\s*" + var.group(1) + r"\s*(>=|==|>)\s*(\d+)\s*\)|else(?!\s*if\b))"
                           r"\s*\{?\s*(?:return\s+)?(\w+)\s*\(", body)
        out: dict[int, str] = {}
        for v in vlens:
            for op, threshold, callee in chain:
                if callee not in names:
                    continue
                if not threshold or (op == ">=" and v >= int(threshold)) or (op == ">" and v > int(threshold)) \
                        or (op == "==" and v == int(threshold)):
                    out[v] = callee
                    break
        return out
    raise ValueError(f"calls {sorted(set(calls))} but not through a switch or an if chain on "
                     "__riscv_vlenb() * 8 that this reader knows")


# ------------------------------------------------------------------ RVV paths

#: Macros only a build with the vector extension has: __riscv_v, __riscv_v_intrinsic,
#: __riscv_vector, __riscv_v_min_vlen ..., and the vector sub-extensions __riscv_zv*.
_VECTOR_MACRO = re.compile(r"__riscv_(?:v|zv)")
_INTRINSIC = re.compile(r"\b__riscv_\w+\s*\(")


def scalar_macros(macros: Mapping[str, int]) -> dict[str, int]:
    """``macros`` of the same build without the vector extension (and its ``zv*`` sub-extensions)."""
    return {k: v for k, v in macros.items() if not _VECTOR_MACRO.match(k)}


def build_macros(extensions: Iterable[str] = (), headers: Iterable[CFile] = (), *, vector: bool = True) -> dict[str, int]:
    """The macros of an RVV build with ``extensions`` where a file starts, after it included
    ``headers`` in that order (simd-mappings.h defines ``GGML_SIMD`` and the vector mappings in an
    RVV build); ``vector=False``: the same build without the vector extension."""
    macros = rvv_macros(extensions)
    if not vector:
        macros = scalar_macros(macros)
    for h in headers:
        macros = h.defines(macros)
    return macros


def calls_intrinsics(body: str) -> bool:
    """The code calls ``__riscv_*`` intrinsics (vector loads, ``__riscv_vlenb()`` ...)."""
    return bool(_INTRINSIC.search(body))


@dataclass(frozen=True)
class RvvPath:
    """A function with an RVV path, as a build with the vector extension compiles it."""

    function: Function
    only_rvv: bool  # defined only when the vector extension is on
    intrinsics: bool  # its body (as that build compiles it) calls __riscv_* intrinsics

    def describe(self) -> str:
        if self.intrinsics:
            return "calls RVV intrinsics"
        if self.only_rvv:
            return "defined only in RVV builds, calls no RVV intrinsic"
        return "has a branch only RVV builds compile, calling no RVV intrinsic (a scalar loop, or GGML_SIMD macros)"


def rvv_functions(file: CFile, extensions: Iterable[str] = (), headers: Iterable[CFile] = ()) -> dict[str, RvvPath]:
    """The functions of ``file`` with an RVV path in a build with ``extensions`` (after
    ``headers``): defined in a branch that build compiles and the same build without the vector
    extension does not, or whose body calls ``__riscv_*`` intrinsics, or has lines only the RVV
    build compiles (a ``__riscv_v_intrinsic`` branch, GGML_SIMD code on the vector mappings).
    Both builds are read with this module's preprocessor: an ``#if`` it cannot evaluate is a note
    on ``file`` (taken as not compiled), never an exception."""
    headers = list(headers)
    return rvv_definitions(file.preprocessed(build_macros(extensions, headers)),
                           file.preprocessed(build_macros(extensions, headers, vector=False)), file.path)


def rvv_definitions(on_pp: Preprocessed, off_pp: Preprocessed, path: Path) -> dict[str, RvvPath]:
    """:func:`rvv_functions` of a file already read as the RVV build (``on_pp``) and the same build
    without the vector extension (``off_pp``)."""
    off = {f.name for f in _definitions(off_pp, path)}
    on_lines, off_lines = on_pp.text.split("\n"), off_pp.text.split("\n")
    out: dict[str, RvvPath] = {}
    for f in _definitions(on_pp, path):
        if f.name in out:
            continue
        only = f.name not in off
        vector_code = any(on_lines[i].strip() and not off_lines[i].strip()
                          for i in range(f.line - 1, min(f.end, len(on_lines), len(off_lines))))
        intrinsics = calls_intrinsics(f.body)
        if only or intrinsics or vector_code:
            out[f.name] = RvvPath(f, only, intrinsics)
    return out

"""The one reader of ggml's C and C++ sources.

Every place that needs to know what a ggml tree contains asks this module: the kernel server's
generated bindings (harness/toolchain/bindings.py), the coverage scans of the kernel families (RVV entry
points, VLEN variants and their dispatch, the repack selection, vec.h's RVV paths), and the
known-failure fingerprints (the source of the buggy function).

It is not a C parser.  It understands what ggml's kernel sources are made of:

* comments and string literals (removed / kept opaque before anything else is read) and the
  conditional preprocessor, in harness/ggml/cpreproc.py (its names are re-exported here:
  ``csource.preprocess``, ``csource.evaluate``, ``csource.Note`` ...);
* the local headers a file includes in compiled branches, and their ``#define`` (:func:`with_includes`);
* top-level function definitions (free functions, template specialisations, inside namespaces and
  ``extern "C"`` blocks), with the preprocessor conditions that enclose them;
* prototypes, ``enum`` members with their values, ``struct`` / ``typedef`` names;
* a VLEN dispatch: a ``switch`` on ``__riscv_vlenb() * 8`` or an ``if`` chain on a variable
  holding it;
* a function body's statements (``if`` / ``switch`` / blocks / ``return``), walked with a build's
  answers: harness/ggml/cwalk.py (the repack selection).

What it cannot understand is reported (``notes``), never raised at collection.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from harness.core.config import VLENS
from harness.ggml.cpreproc import MEMO, string_literals
from harness.ggml.cpreproc import RVV_MACROS as RVV_MACROS
from harness.ggml.cpreproc import Note as Note
from harness.ggml.cpreproc import Preprocessed as Preprocessed
from harness.ggml.cpreproc import evaluate as evaluate
from harness.ggml.cpreproc import preprocess as preprocess
from harness.ggml.cpreproc import rvv_macros as rvv_macros
from harness.ggml.cpreproc import strip_comments as strip_comments

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
        collapsed, so reformatting a comment does not change it and any change to the code does.  The reading
        blanks string literals; a function with inline assembly has its code in them, so its digest also takes
        the non-empty literals of its lines in the file (a changed instruction is a changed function)."""
        asm = self.assembly()
        if not asm:
            return self.fingerprint_without_asm
        code = re.sub(r"\s+", " ", f"{self.signature} {{{self.body}}} asm: {asm}").strip()
        return hashlib.sha256(code.encode()).hexdigest()[:16]

    @property
    def fingerprint_without_asm(self) -> str:
        """The digest of the code with string literals blanked: the fingerprint as it was taken before inline
        assembly was read (known-failure entries written then list it; harness/ggml/known.py matches either)."""
        code = re.sub(r"\s+", " ", f"{self.signature} {{{self.body}}}").strip()
        return hashlib.sha256(code.encode()).hexdigest()[:16]

    def assembly(self) -> str:
        """The string literals with content of a function that holds inline assembly ('' for any other)."""
        if not _ASM.search(self.body):
            return ""
        return " ".join(x for x in _literals(self.file, self.line, self.end) if x.strip('" \t\n'))

    def where(self) -> str:
        return f"{self.file}:{self.line}"


_ASM = re.compile(r"\b(?:__asm__|__asm|asm)\b")


@functools.lru_cache(maxsize=256)
def _literals(path: Path, first: int, last: int) -> tuple[str, ...]:
    """The string literals of lines ``first``..``last`` (1-based) of ``path`` as written (none when it cannot be read)."""
    try:
        lines = Path(path).read_text(errors="replace").splitlines()
    except OSError:
        return ()
    return tuple(string_literals("\n".join(lines[max(first - 1, 0):last or len(lines)])))


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
    readers of a function body's statements (harness/ggml/cwalk.py walks the repack selection)."""
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


_CLASS_HEAD = re.compile(r"(?:\btemplate\s*<[^{};]*>\s*)?\b(?:class|struct)\s+(\w+)[^;{}()=]*\{")


def open_classes(pp: Preprocessed) -> Preprocessed:
    """``pp`` with each class / struct definition's head read as a namespace's, so the reader
    descends into it and its member functions (tinyBLAS_RVV's ``matmul``, ``gemm`` ...) are
    definitions too; line numbers are kept."""
    def head(m: re.Match[str]) -> str:
        lines = m.group(0).count("\n")
        return f"namespace {m.group(1)}" + "\n" * lines + " {"
    return replace(pp, text=_CLASS_HEAD.sub(head, pp.text))


def _definitions(pp: Preprocessed, path: Path) -> list[Function]:
    """The top-level definitions of a preprocessed file, read once per preprocessing and text (``cpreproc.MEMO``).
    The key holds the text itself besides the preprocessing's digest: a reader that rewrites a preprocessed text
    (``dataclasses.replace``, as harness/ggml/changes.py opens class bodies) carries the digest over unchanged."""
    if not pp.digest:
        return _read_definitions(pp, path)
    return MEMO.through(MEMO.key("definitions", pp.digest, pp.text, str(path)), lambda: _read_definitions(pp, path), list)


def _read_definitions(pp: Preprocessed, path: Path) -> list[Function]:
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

    def functions(self, macros: Mapping[str, int] | None = None, *, members: bool = False) -> dict[str, Function]:
        """Definitions a build with ``macros`` compiles (every branch when None: then a name
        defined in two branches keeps its first definition).  ``members``: class and struct member functions
        too, where no top-level definition has the name (SpacemiT's ``forward_norm_f32`` was a member of
        ``tensor_traits_common`` in ime.cpp before it became a function of rvv_kernels.cpp)."""
        out: dict[str, Function] = {}
        pp = self.preprocessed(macros)
        for f in _definitions(pp, self.path):
            out.setdefault(f.name, f)
        if members:
            for f in _definitions(open_classes(pp), self.path):
                out.setdefault(f.name, f)
        return out

    def definitions(self) -> list[Function]:
        """Every top-level definition of every preprocessor branch, in file order (a name defined in
        two branches appears twice): which function a source line belongs to (RVV line coverage)."""
        return _definitions(self.preprocessed(None), self.path)

    def defines(self, macros: Mapping[str, int]) -> dict[str, int]:
        """``macros`` after a build with them reads this file: its object-like ``#define`` /
        ``#undef`` in the compiled branches followed (a header's effect on what includes it,
        e.g. simd-mappings.h defining ``GGML_SIMD`` for vec.h in an RVV build)."""
        return dict(self.preprocessed(macros).macros or {})

    def declared(self) -> set[str]:
        """Names of the functions this file declares or defines (every branch; read once per text: ``cpreproc.MEMO``)."""
        return MEMO.through(MEMO.key("declared", self.text), self._declared, set)

    def _declared(self) -> set[str]:
        text = strip_comments(self.text)
        names = set(re.findall(r"\b([A-Za-z_]\w*)\s*\([^;{}()]*(?:\([^()]*\)[^;{}()]*)*\)\s*(?:const\s*)?[;{]", text))
        return names - _NOT_FUNCTIONS

    def types(self) -> set[str]:
        """Names of the structs and typedefs this file declares (read once per text: ``cpreproc.MEMO``)."""
        return MEMO.through(MEMO.key("types", self.text), self._types, set)

    def _types(self) -> set[str]:
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


# ------------------------------------------------------------------ local includes

_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"\n]+)"[^\n]*$', re.M)


def included(path: Path, macros: Mapping[str, int]) -> list[Path]:
    """The local headers (``#include "..."``) ``path`` includes in the branches a build with
    ``macros`` compiles, in order.  Each include line is turned into a code line naming it before
    preprocessing, so only those of compiled branches survive.  Headers are looked up as the
    compiler would for ggml-cpu: next to ``path``, then the ggml-cpu, src and include directories."""
    text = read(path).text
    names: list[str] = []

    def mark(m: re.Match[str]) -> str:
        names.append(m.group(1))
        return f"__rvvdiff_include_{len(names) - 1}__;"

    pp = preprocess(_INCLUDE.sub(mark, text), macros, path)
    ggml = next((p for p in path.parents if (p / "src" / "ggml-cpu").is_dir()), path.parent)
    dirs = (path.parent, ggml / "src" / "ggml-cpu", ggml / "src", ggml / "include")
    out = []
    for i in re.findall(r"__rvvdiff_include_(\d+)__;", pp.text):
        found = next((d / names[int(i)] for d in dirs if (d / names[int(i)]).is_file()), None)
        if found is not None:
            out.append(found.resolve())
    return out


def _after_includes(path: Path, macros: dict[str, int], seen: set[Path]) -> dict[str, int]:
    """``macros`` after the local headers ``path`` includes (recursively, each header once, as with
    ``#pragma once``): their object-like ``#define`` in compiled branches followed.  ggml's headers
    decide what a kernel file compiles (simd-mappings.h defines ``GGML_SIMD`` in an RVV build, and
    vec.h's RVV paths sit inside ``#if defined(GGML_SIMD)``).  An approximation of the real
    preprocessor: a header's defines apply to the whole including file."""
    for h in included(path, macros):
        if h in seen:
            continue
        seen.add(h)
        macros = _after_includes(h, macros, seen)
        macros = read(h).defines(macros)
    return macros


def with_includes(path: Path, macros: Mapping[str, int]) -> dict[str, int]:
    """``macros`` as ``path``'s own code sees them: after the object-like ``#define`` of the local
    headers it includes in compiled branches, recursively (:func:`included`; the known failures'
    fingerprints read a kernel file so)."""
    return _after_includes(path, dict(macros), {path.resolve()})


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

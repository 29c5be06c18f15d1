"""What changed between two ggml trees, function by function, and which kernels reach each change.

The PR gate (harness/jobs/gate_runs.py) runs the tests that cover a changed function at the thorough
budget, and blocks on a changed RVV function no test covers.  Both questions are answered here
with the C reader (harness/ggml/csource.py), never by compiling:

* **The diff.**  Every source file the tree inventory reads (``src/ggml-cpu/*.{c,cpp,h}``,
  ``arch/riscv/*``, ``llamafile/*``) is read as each ISA build compiles it (its ``-march``
  macros, after ``simd-mappings.h``), so a change in another architecture's branch of a shared
  function is not a change.  A function whose source fingerprint differs in some build, or that
  one tree lacks, is *changed* / *added* / *removed*; so is a ``#define`` whose text differs.
  Files outside that set that differ (CMake files, ``ggml.c``, another backend's directory) are
  listed as changes the reader does not follow.
* **The reach.**  The head tree's call graph: a function or macro reaches every function and
  macro its body names (through ``object-like`` aliases in both directions, so
  ``ggml_vec_dot_iq3_s_q8_K_generic`` defined as ``ggml_vec_dot_iq3_s_q8_K`` links the two).  A
  test's roots are what its kernel table entry ``requires`` (the entry points its adapter calls),
  each graph op's compute function (``ggml_mul_mat`` -> ``ggml_compute_forward_mul_mat``) and each
  entry point's generic twin (``<name>_generic``, the second opinion).  A test covers a change
  when the change is reachable from its roots.  Calls through function-pointer tables
  (``type_traits_cpu``) are not followed: the families name those kernels in ``requires``.
* **Ownership.**  A test *owns* a change reachable from its ``entry_points`` (the code it exists
  to check; its ``requires`` unless the family says less: mul_mat owns the op, not the vec_dot
  it falls back to) without passing through another test's entry point: a kernel and its private
  helpers.  The gate runs the owners of a change at the thorough budget and the other tests
  that reach it (flash attention through ``ggml_vec_scale_f32``) at the default.

A changed function has an RVV path (``rvv``) when it lives in ``arch/riscv/`` or some ISA build
compiles RVV-only code into it (``csource.rvv_functions``); a changed macro when it is defined
only in vector builds or differently there.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections import deque
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from harness.core.config import ISA_BUILDS
from harness.ggml import csource
from harness.ggml.source import GgmlSource, _hashed_files
from harness.ggml.tree import _source_files

#: Headers whose object-like macros decide what the readers compile (GGML_SIMD and the vector
#: mappings of an RVV build).
HEADERS = ("src/ggml-cpu/simd-mappings.h",)

_IDENT = re.compile(r"\b[A-Za-z_]\w*\b")


def short(name: str) -> str:
    """The last identifier of a function's name: ``tinyBLAS_RVV<TA, TB, TC>::gemm`` -> ``gemm``."""
    return _IDENT.findall(re.sub(r"<[^<>]*>", "", name))[-1] if _IDENT.search(name) else name


@dataclass(frozen=True)
class Change:
    name: str  # function (short name) or macro
    what: str  # "function" | "macro"
    kind: str  # "changed" | "added" | "removed"
    file: str  # relative to the ggml directory
    line: int  # in head (in base when removed)
    rvv: bool  # has an RVV path
    builds: tuple[str, ...]  # the ISA builds in which it differs

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    def describe(self) -> str:
        return (f"{self.name} ({self.what}, {self.kind}, {self.where}"
                + (", RVV" if self.rvv else "") + ")")


@dataclass
class Diff:
    base: str
    head: str
    changes: list[Change] = field(default_factory=list)
    outside: list[str] = field(default_factory=list)  # changed files the reader does not follow
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"base": self.base, "head": self.head, "changes": [asdict(c) for c in self.changes],
                "outside": self.outside, "notes": self.notes}

    @classmethod
    def from_json(cls, d: dict) -> Diff:
        return cls(d["base"], d["head"], [Change(**{**c, "builds": tuple(c["builds"])}) for c in d["changes"]],
                   list(d.get("outside", ())), list(d.get("notes", ())))

    @property
    def names(self) -> set[str]:
        return {c.name for c in self.changes}


# ------------------------------------------------------------------ reading one tree


@dataclass
class Reading:
    """One tree as the ISA builds compile it."""

    # (build, rel, short name) -> (fingerprint, line); macros keyed by name with their text
    functions: dict[tuple[str, str, str], tuple[str, int]] = field(default_factory=dict)
    macros: dict[tuple[str, str, str], tuple[str, int]] = field(default_factory=dict)
    rvv: set[tuple[str, str]] = field(default_factory=set)  # (rel, name) with an RVV path in some build
    bodies: dict[str, set[str]] = field(default_factory=dict)  # name -> identifiers its code names
    aliases: dict[str, str] = field(default_factory=dict)  # macro -> the identifier it stands for
    notes: list[str] = field(default_factory=list)


def _rel(src: GgmlSource, p: Path) -> str:
    return str(p.relative_to(src.ggml))


@functools.lru_cache(maxsize=8)
def _read(src: GgmlSource, content: str) -> Reading:
    r = Reading()
    files = [p for p in _source_files(src.ggml) if p.is_relative_to(src.cpu_dir)]
    headers = [csource.read(src.ggml / h) for h in HEADERS if (src.ggml / h).is_file()]
    for name, isa in ISA_BUILDS.items():
        ext = tuple(isa.extensions)
        on = csource.build_macros(ext, headers)
        off = csource.build_macros(ext, headers, vector=False)
        for p in files:
            f = csource.read(p)
            rel = _rel(src, p)
            pp_on = f.preprocessed(on)
            pp = csource.open_classes(pp_on)
            pp_off = f.preprocessed(off)
            riscv = rel.startswith("src/ggml-cpu/arch/riscv/")
            for fn in csource._definitions(pp, p):
                key = (name, rel, short(fn.name))
                if riscv or csource.calls_intrinsics(fn.body):  # (member functions: rvv_definitions skips them)
                    r.rvv.add((rel, short(fn.name)))
                if key in r.functions:  # overloads / specialisations: one entry, all their code
                    fp, line = r.functions[key]
                    r.functions[key] = (hashlib.sha256((fp + fn.fingerprint).encode()).hexdigest()[:16], line)
                else:
                    r.functions[key] = (fn.fingerprint, fn.line)
                r.bodies.setdefault(short(fn.name), set()).update(_IDENT.findall(fn.body))
            for m, (line, text) in pp.definitions.items():
                r.macros[(name, rel, m)] = (text, line)
                r.bodies.setdefault(m, set()).update(_IDENT.findall(text))
                if re.fullmatch(r"[A-Za-z_]\w*", text):
                    r.aliases[m] = text
                if pp_off.definitions.get(m, (0, None))[1] != text:
                    r.rvv.add((rel, m))
            r.rvv.update((rel, short(fname)) for fname in csource.rvv_definitions(pp_on, pp_off, p))
            r.notes += [str(n) for n in f.notes if str(n) not in r.notes]
    return r


def reading(src: GgmlSource) -> Reading:
    return _read(src, src.content_hash())


# ------------------------------------------------------------------ the diff


def _other_files(src: GgmlSource) -> dict[str, str]:
    """Digest of each file that decides the build but is not read as C source (relative path)."""
    read = set(_source_files(src.ggml))
    out = {}
    for p in _hashed_files(src.root, src.ggml):
        if p not in read and p.is_file():
            out[str(p.relative_to(src.root if not p.is_relative_to(src.ggml) else src.ggml))] = \
                hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def diff(base: GgmlSource, head: GgmlSource) -> Diff:
    """The functions and macros that differ between ``base`` and ``head``, as any ISA build
    compiles them, with whether each has an RVV path."""
    b, h = reading(base), reading(head)
    out = Diff(base.describe(), head.describe(), notes=sorted(set(b.notes) | set(h.notes)))
    found: dict[tuple[str, str, str], tuple[str, int, set[str]]] = {}  # (what, rel, name) -> kind, line, builds

    def compare(what: str, bm: dict, hm: dict) -> None:
        for key in sorted(set(bm) | set(hm)):
            build, rel, name = key
            if bm.get(key, (None,))[0] == hm.get(key, (None,))[0]:
                continue
            kind = "added" if key not in bm else "removed" if key not in hm else "changed"
            line = (hm.get(key) or bm[key])[1]
            k = (what, rel, name)
            prev = found.get(k)
            if prev:
                prev[2].add(build)
                if prev[0] != kind:
                    found[k] = ("changed", prev[1], prev[2])
            else:
                found[k] = (kind, line, {build})

    compare("function", b.functions, h.functions)
    compare("macro", b.macros, h.macros)
    for (what, rel, name), (kind, line, builds) in sorted(found.items(), key=lambda kv: (kv[0][1], kv[1][1])):
        rvv = (rel, name) in (b.rvv if kind == "removed" else h.rvv)
        out.changes.append(Change(name, what, kind, rel, line, rvv, tuple(n for n in ISA_BUILDS if n in builds)))
    ob, oh = _other_files(base), _other_files(head)
    out.outside = sorted(p for p in set(ob) | set(oh) if ob.get(p) != oh.get(p))
    return out


# ------------------------------------------------------------------ the reach


class Reach:
    """The head tree's call graph (functions and macros by name)."""

    def __init__(self, src: GgmlSource) -> None:
        r = reading(src)
        self.names = set(r.bodies)
        self.edges: dict[str, set[str]] = {n: ids & self.names for n, ids in r.bodies.items()}
        for m, target in r.aliases.items():  # an alias stands for its target, both ways
            self.edges.setdefault(target, set()).add(m)
        self._memo: dict[tuple[str, ...], frozenset[str]] = {}

    def roots(self, requires: Iterable[str]) -> tuple[str, ...]:
        """A test's roots: the functions it requires, each graph op's compute function, generic twins."""
        out = []
        for n in requires:
            out.append(n)
            if n.startswith("ggml_") and n not in self.names:
                op = n[len("ggml_"):]
                for cand in (f"ggml_compute_forward_{op}", f"ggml_compute_forward_{op.removesuffix('_ext')}"):
                    if cand in self.names:
                        out.append(cand)
                        break
            out.append(f"{n}_generic")
        return tuple(sorted(n for n in dict.fromkeys(out) if n in self.names))

    def reachable(self, roots: tuple[str, ...]) -> frozenset[str]:
        if roots not in self._memo:
            seen = set(roots)
            todo = deque(roots)
            while todo:
                for m in self.edges.get(todo.popleft(), ()):
                    if m not in seen:
                        seen.add(m)
                        todo.append(m)
            self._memo[roots] = frozenset(seen)
        return self._memo[roots]

    def covers(self, requires: Iterable[str], changed: set[str]) -> list[str]:
        """The changed names a test with these ``requires`` reaches."""
        return sorted(self.reachable(self.roots(requires)) & changed)

    def owns(self, entry_points: Iterable[str], kernels: set[str], changed: set[str]) -> list[str]:
        """The changed names that are a test's own code: reachable from its entry points without
        passing through ``kernels`` (the entry points of the other tests, which test those)."""
        roots = self.roots(entry_points)
        seen = set(roots)
        todo = deque(roots)
        while todo:
            for m in self.edges.get(todo.popleft(), ()):
                if m not in seen and m not in kernels:
                    seen.add(m)
                    todo.append(m)
        return sorted(seen & changed)

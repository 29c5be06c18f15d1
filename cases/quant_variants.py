"""What the tree under test says about its RVV quantized kernels, and which variant ran.

Two jobs, both for the quant_dot and quantize families (cases/quant_dot.py, cases/quantize.py):

* **Coverage discovered from the source.**  :func:`scan` reads ``arch/riscv/quants.c`` of the
  tree under test with harness/ggml/csource.py as a ``__riscv_v`` build compiles it, and lists every
  ``ggml_vec_dot_<type>_<q8>`` and ``quantize_row_<q8>`` entry point with an RVV body, the
  VLEN-specialised variants (``*_vl128`` ...) it has, and, where the dispatch is a ``switch`` on
  ``__riscv_vlenb() * 8`` or an ``if`` chain on it (``csource.vlen_dispatch``), which function
  serves each VLEN.  What the reader cannot understand (an ``#if`` it cannot evaluate, a
  dispatch of another shape) is a note naming file:line and the kernels affected, never an
  exception.  :func:`dot_coverage` and :func:`quantizer_coverage` compare it with the test
  tables (the ``quant_dot`` and ``quantize`` scans of cases/coverage.py): an RVV entry point or
  a VLEN variant the table does not know is *uncovered* (cases/test_coverage.py fails), a
  table entry the tree lacks (its ``requires``, or no RVV body) is *not in this tree*.

* **The tree's types.**  :func:`type_id` gives the tree's own ``enum ggml_type`` values (read from
  its ggml.h by harness/ggml/tree.py), so no ggml enum value is hard-coded; :func:`tree_types` asks
  the kernel server (``quant_types``) for the build's view of the types (ids, block sizes,
  pairings) and is the one place the build's ids are compared with the tree's.

* **Which variant ran.**  :func:`observed_variant` turns a QEMU trace of one call
  (``Target.trace``) into a label: the ``static NOINLINE`` variants are named in the trace;
  the non-static ones (q2_K, q3_K) are inlined into their dispatcher by the compiler, so the
  trace shows only the dispatcher and the label says so (the arm is the one the source
  assigns to the VLEN the server proved).  :func:`record` keeps one row per (tree, ISA build,
  VLEN, type) under the cache and re-renders the type x VLEN table (:func:`render`), printed
  by ``rvvdiff recorded quant-variants``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from cases import coverage
from harness.core.config import cache_dir, locked
from harness.ggml import csource, tree
from harness.ggml.tree import Tree
from harness.plugin.targets import session

# ------------------------------------------------------------------ the tree's RVV entry points (harness/ggml/csource.py)

_VARIANT = re.compile(r"_vl(\d+)$")
_ENTRY = re.compile(r"^ggml_vec_dot_(\w+?)_(q8_0|q8_1|q8_K)$")
_QUANTIZER = re.compile(r"^quantize_row_(q8_0|q8_1|q8_K)$")
_CALL = re.compile(r"\b((?:ggml_vec_dot|quantize_row)_\w+)\s*\(")


@dataclass(frozen=True)
class EntryPoint:
    """An RVV entry point of the tree and how it dispatches."""

    name: str  # ggml_vec_dot_q2_K_q8_K / quantize_row_q8_0
    type: str  # q2_K / q8_0
    vec_dot_type: str | None  # q8_K; None for a quantizer
    rvv: bool  # a __riscv_v build compiles a vector body for it (not only a call to *_generic)
    variants: dict[str, bool] = field(default_factory=dict)  # *_vlN variant -> NOINLINE
    dispatch: dict[int, str] | None = None  # VLEN -> function serving it; None: the entry's own body
    where: str = ""  # file:line of its definition
    variant_where: dict[str, str] = field(default_factory=dict)  # *_vlN variant -> file:line
    #: Why the reader could not tell which function serves each VLEN (None: it could).
    dispatch_note: str | None = None

    @property
    def generic(self) -> str:
        return f"{self.name}_generic"

    def expected(self, vlen: int) -> str:
        """The function the source says runs at ``vlen`` (the entry point itself if it does not dispatch)."""
        if self.dispatch is None:
            return self.name
        return self.dispatch.get(vlen, self.name)


@dataclass(frozen=True)
class VariantScan:
    """Everything :func:`scan` found in one quants.c."""

    path: Path
    dots: dict[str, EntryPoint]  # by type
    quantizers: dict[str, EntryPoint]  # by type
    #: What the reader did not understand: file:line, what, and the kernels it affects.
    notes: tuple[str, ...] = ()


def rvv_quantizer_runs(target, q8: str) -> bool:
    """quantize_row_<q8> runs an RVV body on ``target``: the tree has one and the build compiles it (not rv64gc)."""
    entry = scan(session().source.cpu_dir).quantizers.get(q8)
    return entry is not None and entry.rvv and target.isa.vector


def scan(cpu_dir: Path) -> VariantScan:
    """Read ``<cpu_dir>/arch/riscv/quants.c`` of the tree under test, as a ``__riscv_v`` build
    compiles it (harness/ggml/csource.py; read again when the file changes)."""
    path = Path(cpu_dir) / "arch" / "riscv" / "quants.c"
    return _scan(path, path.stat().st_mtime)


@cache
def _scan(path: Path, mtime: float) -> VariantScan:
    cfile = csource.read(path)
    macros = csource.rvv_macros()
    funcs = cfile.functions(macros)
    notes = [f"{n} (affects {', '.join(names) or 'no entry point of this scan'})"
             for n, names in _affected(cfile, macros)]
    dots, quantizers = {}, {}
    for name, f in funcs.items():
        m, q = _ENTRY.match(name), _QUANTIZER.match(name)
        if not (m or q) or _VARIANT.search(name) or name.endswith(("_generic", "_xtheadvector")):
            continue
        calls = set(_CALL.findall(f.body))
        only_generic = calls <= {f"{name}_generic"} and "__riscv_" not in f.body
        only_ref = q is not None and "__riscv_" not in f.body
        variants = {v: g for v, g in funcs.items() if v.startswith(name + "_vl") and _VARIANT.search(v)}
        dispatch, why = None, None
        called = {c for c in calls if c.startswith(name + "_vl") and _VARIANT.search(c)}
        if called:  # it calls a VLEN variant: through which dispatch?
            try:
                dispatch = csource.vlen_dispatch(f.body, [*variants, *called, f"{name}_generic"])
            except ValueError as e:
                why = (f"{f.where()}: {name} {e}; which function serves each VLEN is unknown "
                       "(extend harness/ggml/csource.py vlen_dispatch)")
                notes.append(f"{why} (affects {name})")
        e = EntryPoint(name, (m or q).group(1), m.group(2) if m else None, not (only_generic or only_ref),
                       {v: g.noinline for v, g in variants.items()}, dispatch, f.where(),
                       {v: g.where() for v, g in variants.items()}, why)
        (dots if m else quantizers)[e.type] = e
    return VariantScan(path, dots, quantizers, tuple(notes))


def _affected(cfile: csource.CFile, macros: dict[str, int]) -> list[tuple[csource.Note, list[str]]]:
    """The reader's notes on ``cfile`` (an ``#if`` it could not evaluate, taken as not compiled),
    each with the entry points and variants defined inside that branch."""
    pp = cfile.preprocessed(macros)
    if not pp.notes:
        return []
    every = cfile.functions(None)
    conditions = cfile.preprocessed(None).conditions
    out = []
    for n in pp.notes:
        inside = conditions[min(n.line, len(conditions) - 1)]  # the branch below the directive
        names = [f.name for f in every.values() if f.name.startswith(("ggml_vec_dot_", "quantize_row_"))
                 and f.line > n.line and f.conditions[:len(inside)] == inside]
        out.append((n, names))
    return out


def _vlen(variant: str) -> int:
    return int(_VARIANT.search(variant).group(1))


def _read(tree: Tree, family: str) -> tuple[VariantScan, coverage.FamilyScan]:
    out = coverage.FamilyScan(family)
    try:
        found = scan(tree.source.cpu_dir)
    except FileNotFoundError as e:
        found = VariantScan(Path(tree.source.cpu_dir) / "arch" / "riscv" / "quants.c", {}, {})
        out.notes.append(f"{found.path}: {e.strerror}: the tree has no RISC-V quantized kernels")
    out.notes += found.notes
    return found, out


#: What adding a type takes (the message of an uncovered vec_dot).
_ADD_TYPE = ("add {t}'s record to oracles/quant_types.py (block layout, largest integer, vec_dot_type {q}, and "
             "the bound derived from the kernel's arithmetic) and its decoder to oracles/quants.py (@decoder); "
             "tests/test_quant_types.py names whatever is still missing")


def dot_coverage(tree: Tree, dots: Iterable) -> coverage.FamilyScan:
    """The ``quant_dot`` scan: ``dots`` is cases/quant_dot.py's DOTS (``entry``, ``name``,
    ``variants``, ``requires``).  Uncovered: an RVV vec_dot of the tree the table does not know,
    a VLEN variant of a known one whose arithmetic the bound was not derived from.  Not in this
    tree: a table entry whose ``requires`` the tree lacks, or that quants.c has no RVV body for."""
    found, out = _read(tree, "quant_dot")
    known = {k.entry: k for k in dots}
    for t, e in sorted(found.dots.items()):
        if not e.rvv:
            continue
        k = known.get(e.name)
        if k is None:
            out.uncovered.append(coverage.Uncovered(
                e.name, e.where, f"an RVV vec_dot of {t} x {e.vec_dot_type} that the quant_dot table does not know: "
                f"{_ADD_TYPE.format(t=t, q=e.vec_dot_type)}"))
            continue
        for v in sorted(e.variants, key=_vlen):
            if _vlen(v) not in k.variants:
                out.uncovered.append(coverage.Uncovered(
                    v, e.variant_where[v], f"a VLEN variant the bound of {k.name} was not derived from: read its "
                    f"arithmetic and update the bound (depth, derivation, variants) of {k.name}'s record in "
                    "oracles/quant_types.py"))
    rvv = {e.name for e in found.dots.values() if e.rvv}
    for k in dots:
        if missing := tree.missing(k.requires):
            out.not_in_tree.append(f"{k.entry} (the tree lacks {', '.join(missing)})")
        elif k.entry not in rvv:
            out.not_in_tree.append(f"{k.entry} (no RVV body in {found.path.name}: ggml's generic serves it)")
    return out


def quantizer_coverage(tree: Tree, quantizers: Iterable) -> coverage.FamilyScan:
    """The ``quantize`` scan: ``quantizers`` is cases/quantize.py's QUANTIZERS (``name``,
    ``requires``).  Uncovered: an RVV ``quantize_row_<q8>`` of the tree the table does not know;
    not in this tree: a table entry the tree lacks, or that quants.c has no RVV body for."""
    found, out = _read(tree, "quantize")
    known = {q.name for q in quantizers}
    for t, e in sorted(found.quantizers.items()):
        if e.rvv and t not in known:
            out.uncovered.append(coverage.Uncovered(
                e.name, e.where, f"an RVV activation quantizer that the quantize table does not know: add {t}'s record "
                "(kind 'activation') to oracles/quant_types.py, its decoder to oracles/quants.py (@decoder), its "
                "reference quantizer to oracles/q8.py (REFERENCE_QUANTIZERS) and its RVV oracle to ORACLES in "
                "cases/quantize.py; "
                "tests/test_quant_types.py names whatever is still missing"))
    for q in quantizers:
        e = found.quantizers.get(q.name)
        if missing := tree.missing(q.requires):
            out.not_in_tree.append(f"quantize_row_{q.name} (the tree lacks {', '.join(missing)})")
        elif e is None or not e.rvv:
            out.not_in_tree.append(f"quantize_row_{q.name} (no RVV body in {found.path.name}: ggml's reference serves it)")
    return out


# ------------------------------------------------------------------ the tree's types (from its build)


@dataclass(frozen=True)
class TreeType:
    """One line of the server's ``quant_types``: ggml's own view of a type."""

    name: str
    id: int
    block: int
    nbytes: int
    has_vec_dot: bool
    vec_dot_type: int
    has_generic: bool


_TYPES: dict[str, dict[str, TreeType]] = {}  # by kernel server binary (one per tree and ISA build)


def _parse_types(message: str) -> dict[str, TreeType]:
    out = {}
    for line in message.split():
        key, value = line.split("=", 1)
        f = [int(v) for v in value.split(",")]
        name = key[len("type."):]
        out[name] = TreeType(name, f[0], f[1], f[2], bool(f[4]), f[5], bool(f[8]))
    return out


def tree_types(target) -> dict[str, TreeType]:
    """The types of the tree under test as its own build reports them (ids, block sizes, pairings), asked
    once per kernel server binary.  Every id must be the one the tree's ggml.h gives (where
    :func:`type_id` takes them from): a server built from another tree, or an enum the header reader
    misreads, fails here, in every test that needs a type."""
    key = str(target.server().build.server)
    if key not in _TYPES:
        types = _parse_types(target.call("quant_types").message)
        src = session().source
        ids = tree.of(src).types
        wrong = [f"{t.name}={t.id}, but the tree's ggml.h says {ids.get(t.name)}" for t in types.values()
                 if ids.get(t.name) != t.id]
        if wrong:
            raise AssertionError(f"the kernel server's type ids are not the tree's [quant_types, {target.id}, "
                                 f"{src.describe()}]:\n  " + "\n  ".join(wrong))
        _TYPES[key] = types
    return _TYPES[key]


def type_id(target, name: str) -> int:
    """The ``enum ggml_type`` value of ``name`` (``q4_0``, ``bf16`` ...) in the tree under test, as the
    kernel server takes it: from the tree's ggml.h (harness/ggml/tree.py), the build's view of it
    checked once per server (:func:`tree_types`)."""
    tree_types(target)
    return tree.of(session().source).type_id(name)


# ------------------------------------------------------------------ what ran


def observed_variant(entry: EntryPoint, ran: Iterable[str], vlen: int) -> tuple[str, str | None]:
    """A label for what a trace shows at ``vlen``, and a failure message if it is not what the
    source dispatches to (or if the scalar twin ran although the tree has an RVV path)."""
    ran = {r for r in ran if r.startswith(entry.name)}
    expected = entry.expected(vlen)
    short = expected[len(entry.name):].lstrip("_") or "entry"
    if entry.generic in ran and entry.rvv and expected != entry.generic:
        return "generic", (f"{entry.name} fell back to {entry.generic} at VLEN {vlen}, although the tree has an "
                           f"RVV path for it there ({expected})")
    if expected in ran:
        return short, None
    if expected in entry.variants and not entry.variants[expected]:
        foreign = sorted(ran - {entry.name})
        if entry.name in ran and not foreign:
            return f"{short} (inlined)", None
        return f"? ({', '.join(foreign) or 'nothing'})", (f"{entry.name} at VLEN {vlen}: expected its {short} arm "
                                                          f"(inlined), but the trace shows {sorted(ran)}")
    return f"? ({', '.join(sorted(ran)) or 'nothing'})", (f"{entry.name} at VLEN {vlen}: the source dispatches to "
                                                          f"{expected}, but the trace shows {sorted(ran)}")


# ------------------------------------------------------------------ the table


def reports_dir() -> Path:
    """Where the variant tables are recorded: a directory per tree."""
    return cache_dir() / "reports" / "quant_variants"


def _report_dir(tree: str) -> Path:
    return reports_dir() / tree


def recorded_trees() -> list[str]:
    """The trees with a recorded variant table, the most recently recorded last."""
    base = reports_dir()
    trees = [p for p in base.iterdir() if p.is_dir()] if base.exists() else []
    return [p.name for p in sorted(trees, key=lambda p: p.stat().st_mtime)]


def record(tree: str, isa: str, vlen: int, stress: bool, type_: str, label: str) -> Path:
    """Store one cell and re-render the table of ``tree``; return the table's path."""
    d = _report_dir(tree)
    d.mkdir(parents=True, exist_ok=True)
    with locked(d / ".lock"):
        row = {"isa": isa, "vlen": vlen, "stress": stress, "type": type_, "label": label}
        (d / f"{isa}-{vlen}-{int(stress)}-{type_}.json").write_text(json.dumps(row))
        table = d / "table.md"
        tmp = table.with_suffix(".tmp")
        tmp.write_text(render(tree))
        tmp.replace(table)
    return table


def render(tree: str) -> str:
    """The recorded cells of ``tree`` as one Markdown table per ISA build (type x VLEN)."""
    rows = [json.loads(p.read_text()) for p in sorted(_report_dir(tree).glob("*.json"))]
    out = [f"Variant that ran, per type and VLEN (tree {tree}); 'entry': the entry point's own RVV body, "
           "'(inlined)': a non-static variant the compiler inlined into its dispatcher"]
    for isa in sorted({r["isa"] for r in rows}):
        for stress in sorted({r["stress"] for r in rows if r["isa"] == isa}):
            cells = {(r["type"], r["vlen"]): r["label"] for r in rows if r["isa"] == isa and r["stress"] == stress}
            vlens = sorted({v for _, v in cells})
            out.append(f"\nISA build {isa}" + (" (stress)" if stress else "") + ":\n")
            out.append("| type | " + " | ".join(f"VLEN {v}" for v in vlens) + " |")
            out.append("|---" * (len(vlens) + 1) + "|")
            for t in sorted({t for t, _ in cells}):
                out.append(f"| {t} | " + " | ".join(cells.get((t, v), "") for v in vlens) + " |")
    return "\n".join(out) + "\n"

"""What the tree under test says about its RVV quantized kernels, and which variant ran.

Two jobs, both for cases/test_quant_dot.py and cases/test_quantize.py:

* **Coverage discovered from the source.**  :func:`scan` reads ``arch/riscv/quants.c`` of the
  tree under test, keeps what a ``__riscv_v`` build compiles (a small evaluator of the
  ``#if`` / ``#elif`` lines), and lists every ``ggml_vec_dot_<type>_<q8>`` and
  ``quantize_row_<q8>`` entry point with an RVV body, the VLEN-specialised variants
  (``*_vl128`` ...) it has, and, where the dispatch is a ``switch`` on
  ``__riscv_vlenb() * 8`` or an ``if`` chain on it, which function serves each VLEN.  A type
  the test table does not know is then a failing test, not a silent gap.

* **The tree's types.**  :func:`tree_types` asks the kernel server (``quant_types``) for the
  tree's own type ids, block sizes and pairings, so no ggml enum value is hard-coded.

* **Which variant ran.**  :func:`observed_variant` turns a QEMU trace of one call
  (``Target.trace``) into a label: the ``static NOINLINE`` variants are named in the trace;
  the non-static ones (q2_K, q3_K) are inlined into their dispatcher by the compiler, so the
  trace shows only the dispatcher and the label says so (the arm is the one the source
  assigns to the VLEN the server proved).  :func:`record` keeps one row per (tree, ISA build,
  VLEN, type) under the cache and re-renders the type x VLEN table (:func:`render`), printed
  by ``python -m cases.quant_variants``.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from harness.config import VLENS, cache_dir, locked

# ------------------------------------------------------------------ the preprocessor

#: Macros a ``__riscv_v`` build of ggml-cpu defines, as far as quants.c asks.
RVV_MACROS = frozenset({"__riscv_v", "__riscv_v_intrinsic", "__riscv"})

_DEFINED = re.compile(r"defined\s*\(?\s*(\w+)\s*\)?")


def _condition(expr: str) -> bool:
    """The value of an ``#if`` expression built from ``defined`` tests, ``!``, ``&&``, ``||``."""
    py = _DEFINED.sub(lambda m: " True " if m.group(1) in RVV_MACROS else " False ", expr)
    py = py.replace("&&", " and ").replace("||", " or ").replace("!", " not ")
    if re.search(r"[^\sA-Za-z()]", py) or set(re.findall(r"\w+", py)) - {"True", "False", "and", "or", "not"}:
        raise ValueError(f"unsupported #if expression: {expr!r}")
    return bool(eval(py, {"__builtins__": {}}))  # noqa: S307 -- only True/False/and/or/not reach here


def preprocess(text: str) -> str:
    """``text`` with the ``#if`` / ``#elif`` / ``#else`` / ``#endif`` branches a ``__riscv_v``
    build does not compile removed (other directives are dropped; their lines kept blank)."""
    out = []
    stack: list[tuple[bool, bool]] = []  # (this branch active, some branch of this #if taken)
    for line in text.splitlines():
        s = line.strip()
        active = all(a for a, _ in stack)
        if s.startswith("#if"):
            if s.startswith("#ifdef"):
                on = s.split()[1] in RVV_MACROS
            elif s.startswith("#ifndef"):
                on = s.split()[1] not in RVV_MACROS
            else:
                on = _condition(s[3:])
            stack.append((on, on))
        elif s.startswith("#elif"):
            _, taken = stack.pop()
            on = not taken and _condition(s[5:])
            stack.append((on, taken or on))
        elif s.startswith("#else"):
            _, taken = stack.pop()
            stack.append((not taken, True))
        elif s.startswith("#endif"):
            stack.pop()
        elif not s.startswith("#") and active:
            out.append(line)
            continue
        out.append("")
    return "\n".join(out)


# ------------------------------------------------------------------ functions of quants.c

_FUNC = re.compile(r"^(static\s+NOINLINE\s+)?(?:static\s+)?void\s+((?:ggml_vec_dot|quantize_row)_\w+)\s*\(", re.M)


@dataclass(frozen=True)
class Function:
    name: str
    body: str  # between the outer braces, preprocessed
    noinline: bool  # static NOINLINE: a call to it is a call in the trace


def _functions(text: str) -> dict[str, Function]:
    out = {}
    for m in _FUNC.finditer(text):
        start = text.index("{", m.end())
        depth, i = 0, start
        while True:
            c = text[i]
            depth += c == "{"
            depth -= c == "}"
            i += 1
            if depth == 0:
                break
        out[m.group(2)] = Function(m.group(2), text[start + 1:i - 1], bool(m.group(1)))
    return out


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

    @property
    def generic(self) -> str:
        return f"{self.name}_generic"

    def expected(self, vlen: int) -> str:
        """The function the source says runs at ``vlen`` (the entry point itself if it does not dispatch)."""
        if self.dispatch is None:
            return self.name
        return self.dispatch.get(vlen, self.name)


def _dispatch(entry: str, body: str) -> dict[int, str] | None:
    """VLEN -> callee for a ``switch (__riscv_vlenb() * 8)`` or an ``if (v >= N)`` chain on it."""
    calls = [c for c in _CALL.findall(body) if c.startswith(entry) and _VARIANT.search(c)]
    if not calls:  # no VLEN variant called: the entry's own body (or its generic) serves every VLEN
        return None
    sw = re.search(r"switch\s*\(\s*__riscv_vlenb\(\)\s*\*\s*8\s*\)\s*\{(.*)\}", body, re.S)
    if sw:
        table: dict[int, str] = {}
        default = None
        for label, code in re.findall(r"(case\s+\d+|default)\s*:(.*?)(?=case\s+\d+\s*:|default\s*:|$)", sw.group(1), re.S):
            callee = _CALL.search(code)
            if callee is None:
                continue
            if label == "default":
                default = callee.group(1)
            else:
                table[int(label.split()[1])] = callee.group(1)
        return {v: table.get(v, default) for v in VLENS if table.get(v, default)}
    var = re.search(r"(\w+)\s*=\s*__riscv_vlenb\(\)\s*\*\s*8\s*;", body)
    if var:
        chain = re.findall(r"(?:if\s*\(\s*" + var.group(1) + r"\s*>=\s*(\d+)\s*\)|else)\s*\{\s*(\w+)\s*\(", body)
        out: dict[int, str] = {}
        for v in VLENS:
            for threshold, callee in chain:
                if not threshold or v >= int(threshold):
                    out[v] = callee
                    break
        return out
    raise ValueError(f"{entry}: calls {sorted(set(calls))} but its VLEN dispatch is neither a switch nor an if chain "
                     "on __riscv_vlenb() * 8 that this parser knows")


@dataclass(frozen=True)
class Scan:
    """Everything :func:`scan` found in one quants.c."""

    path: Path
    dots: dict[str, EntryPoint]  # by type
    quantizers: dict[str, EntryPoint]  # by type


@cache
def scan(cpu_dir: Path) -> Scan:
    """Read ``<cpu_dir>/arch/riscv/quants.c`` of the tree under test."""
    path = Path(cpu_dir) / "arch" / "riscv" / "quants.c"
    funcs = _functions(preprocess(path.read_text()))
    dots, quantizers = {}, {}
    for name, f in funcs.items():
        m, q = _ENTRY.match(name), _QUANTIZER.match(name)
        if not (m or q) or _VARIANT.search(name) or name.endswith(("_generic", "_xtheadvector")):
            continue
        calls = set(_CALL.findall(f.body))
        only_generic = calls <= {f"{name}_generic"} and "__riscv_" not in f.body
        only_ref = q is not None and "__riscv_" not in f.body
        variants = {v: funcs[v].noinline for v in funcs if v.startswith(name + "_vl") and _VARIANT.search(v)}
        e = EntryPoint(name, (m or q).group(1), m.group(2) if m else None, not (only_generic or only_ref),
                       variants, _dispatch(name, f.body))
        (dots if m else quantizers)[e.type] = e
    return Scan(path, dots, quantizers)


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
    """The types of the tree under test, as its own build reports them (ids, block sizes)."""
    key = str(target.server().build.server)
    if key not in _TYPES:
        _TYPES[key] = _parse_types(target.call("quant_types").message)
    return _TYPES[key]


def type_id(target, name: str) -> int:
    types = tree_types(target)
    if name not in types:
        raise AssertionError(f"the tree under test has no ggml type {name!r} (it has {', '.join(types)})")
    return types[name].id


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


def _report_dir(tree: str) -> Path:
    return cache_dir() / "reports" / "quant_variants" / tree


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


def main(argv: list[str]) -> int:
    """``python -m cases.quant_variants [TREE]``: print the latest table (of TREE, or of every tree)."""
    base = cache_dir() / "reports" / "quant_variants"
    trees = argv or sorted((p.name for p in base.iterdir() if p.is_dir()), key=lambda t: (base / t).stat().st_mtime) \
        if base.exists() else []
    if not trees:
        print(f"no variant table recorded yet under {base} (run cases/test_quant_dot.py -k traced_vec_dot_variant)")
        return 1
    for t in trees:
        print(render(t))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

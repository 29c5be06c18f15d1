"""What the repack selection is: read from the tree's source, seen in a trace, recorded by the runs."""

from __future__ import annotations

import json
import re
from pathlib import Path

from cases.repack_kernels import SWEEP_ROWS, SWEEP_TYPES, RepackKernel
from harness.core.config import ISA_BUILDS, VLENS, cache_dir, locked
from harness.ggml import cwalk
from harness.ggml.source import PINNED_COMMIT
from harness.ggml.tree import Tree
from harness.plugin.targets import session
from oracles import quants as Q

# ------------------------------------------------------------------ selection, from the source


def scan_selection(cpu_dir: Path, zvfh: bool) -> dict[str, dict[int, cwalk.Rule | None]]:
    """Weight type -> VLEN -> the :class:`cwalk.Rule` ggml's selection declares on RISC-V (None: it does
    not repack), in a build with or without zvfh (:func:`read_selection`)."""
    return cwalk.read_selection(cpu_dir, zvfh).rules


def expected_layout(target, weight: str, rows: int) -> str | None:
    """The layout ggml's source says it picks for a ``rows``-row matrix of ``weight`` on ``target``."""
    table = scan_selection(session().source.cpu_dir, bool(target.features.get("zvfh")))
    rule = table.get(weight, {}).get(target.vlen)
    return rule.layout if rule and rows % rule.divisor == 0 else None


def sweep_types(inv: Tree) -> tuple[list[str], list[str]]:
    """The weight types test_selection sweeps on tree ``inv``: SWEEP_TYPES and the types its
    selection names (either build), those the tree has and oracles/quants.py can lay out; and
    the ones left out, each with why."""
    named = [w for zvfh in (True, False) for w in scan_selection(inv.source.cpu_dir, zvfh)]
    out, left = [], []
    for w in dict.fromkeys([*SWEEP_TYPES, *named]):
        if w not in inv.types:
            left.append(f"{w} (not in this tree)")
        elif w not in Q.FORMATS:
            left.append(f"{w} (oracles/quants.py has no block layout for it)")
        else:
            out.append(w)
    return out, left


_TRAITS = re.compile(r"tensor_traits<(block_\w+), (\d+)l?, (\d+)l?, \(ggml_type\)(\d+)>")


def chosen_layout(traits: str) -> str | None:
    """The server's demangled traits class (``ggml::cpu::repack::tensor_traits<block_q4_0, 1l, 16l,
    (ggml_type)8>``) -> ``q4_0_16x1``; ``none`` -> None."""
    if traits == "none":
        return None
    m = _TRAITS.search(traits)
    if not m:
        raise AssertionError(f"traits={traits!r} is not a ggml::cpu::repack::tensor_traits this parser knows")
    return cwalk.layout_name(m.group(1), int(m.group(2)), int(m.group(3)))


# ------------------------------------------------------------------ the path a trace shows

_GEMX = re.compile(r"^ggml_gem[mv]_\w+$")
_QUANTIZE = re.compile(r"^(ggml_quantize_mat_\w+|quantize_row_q8_\w+)$")


def executed_path(calls: frozenset[str]) -> str:
    """The GEMV / GEMM functions a mul_mat trace shows, else its vec_dot entry point(s)."""
    gemx = sorted(c for c in calls if _GEMX.match(c))
    if gemx:
        return " + ".join(gemx)
    dots = sorted(c for c in calls if re.fullmatch(r"ggml_vec_dot_\w+?_q8_[0K]", c))
    return " + ".join(dots) or "neither a repacked kernel nor a vec_dot"


def executed_quantizers(calls: frozenset[str]) -> str:
    return " + ".join(sorted(c for c in calls if _QUANTIZE.match(c))) or "none"


def expected_path(kernel: RepackKernel, layout: str | None, n: int) -> str:
    """mul_mat with ``n`` activation rows: GEMM for the first ``n - n % 4`` (if any), GEMV for the
    rest (forward_mul_mat_one_chunk), when repacked; else the type's vec_dot."""
    lay = kernel.layout
    if layout is None:
        return f"ggml_vec_dot_{lay.weight}_{lay.activation}"
    parts = ([kernel.entry("gemm")] if n >= 4 else []) + ([kernel.entry("gemv")] if n % 4 else [])
    return " + ".join(sorted(parts))


def expected_quantizers(kernel: RepackKernel, layout: str | None, n: int, *, rvv_row: bool = True) -> str:
    """The activation quantizers of the repacked path: ggml_quantize_mat_<q8>_4x<blocklen> for the
    groups of 4 rows, the type's quantize_row_<q8> (from_float) for the leftovers.  ``rvv_row`` False:
    the build compiles no RVV body of quantize_row_<q8> (rv64gc, or a tree without one), so the
    generic one runs, and it calls quantize_row_<q8>_ref."""
    lay = kernel.layout
    row = [f"quantize_row_{lay.activation}"] + ([] if rvv_row else [f"quantize_row_{lay.activation}_ref"])
    if layout is None:
        return " + ".join(sorted(row))
    parts = ([f"ggml_quantize_mat_{lay.activation}_4x{lay.activation_blocklen}"] if n >= 4 else [])
    parts += row if n % 4 else []
    return " + ".join(sorted(parts))


# ------------------------------------------------------------------ the selection table


def _reports() -> Path:
    """Where the selections are recorded: a directory per tree (its commit and content hash)."""
    return cache_dir() / "reports" / "repack_selection"


def _table_dir() -> Path:
    src = session().source
    return _reports() / f"{src.commit}-{src.content_hash()[:12]}"


def record_selection(target, rows: dict[str, dict[int, str | None]]) -> None:
    """Keep what ggml chose on ``target`` (weight type -> row count -> layout or None)."""
    d = _table_dir()
    d.mkdir(parents=True, exist_ok=True)
    with locked(d / ".lock"):
        (d / f"vlen{target.vlen}-{target.isa.name}.json").write_text(json.dumps(rows, indent=1))


#: Row-count classes of the rendered table.
ROW_CLASSES = (("multiple of 16", lambda m: m % 16 == 0), ("multiple of 8, not 16", lambda m: m % 8 == 0 and m % 16),
               ("neither", lambda m: m % 8 != 0))


def render(d: Path) -> str:
    """The recorded selections as a Markdown table: weight type and row-count class against
    VLEN x ISA build; a cell lists the layouts chosen for the class's row counts ('-': none)."""
    cols = [(v, i) for i in ISA_BUILDS for v in VLENS if (d / f"vlen{v}-{i}.json").exists()]
    data = {c: json.loads((d / f"vlen{c[0]}-{c[1]}.json").read_text()) for c in cols}
    lines = ["| type | rows | " + " | ".join(f"{v} {i}" for v, i in cols) + " |", "|" + "---|" * (len(cols) + 2)]
    types = sorted({t for c in cols for t in data[c]}, key=lambda t: SWEEP_TYPES.index(t) if t in SWEEP_TYPES else 99)
    for t in types:
        for label, member in ROW_CLASSES:
            rows = [m for m in SWEEP_ROWS if member(m)]
            cells = ["/".join(sorted({data[c].get(t, {}).get(str(m)) or "-" for m in rows})) for c in cols]
            lines.append(f"| {t} | {label} ({', '.join(map(str, rows))}) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def recorded(prefix: str | None = None) -> Path | None:
    """The most recent recorded selection of the trees whose directory name starts with ``prefix`` (a commit
    prefix); without one, the pinned tree's, else the most recent of any tree; None when there is none."""
    runs = sorted(_reports().glob("*/"), key=lambda p: p.stat().st_mtime) if _reports().exists() else []
    chosen = [r for r in runs if r.name.startswith(prefix or PINNED_COMMIT)] or ([] if prefix else runs)
    return chosen[-1] if chosen else None

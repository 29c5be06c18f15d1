"""The kernel server's tables of entry points, generated from the tree under test.

The adapters (harness/server/k_*.cpp) do not name a type, a generic twin, a repack layout or an
optional function the tree may lack.  At build time this module reads the tree (harness/ggml/csource.py)
and writes into the build directory:

``rvvdiff_tree.h``
    ``RVVDIFF_HAS_<name>`` (1 or 0) for every name an adapter tests with ``#if RVVDIFF_HAS_...``
    (found by reading the adapters), and X-macro lists of what the tree has:
    ``RVVDIFF_GENERIC_DOTS(X)`` - ``X(GGML_TYPE_Q4_0, ggml_vec_dot_q4_0_q8_0_generic)`` for every
    ``*_generic`` vec_dot twin quants.h declares whose type the tree's ``enum ggml_type`` has;
    ``RVVDIFF_GENERIC_QUANTIZERS(X)`` - the same for ``quantize_row_q8_*_generic``.
``rvvdiff_repack_decls.inc`` / ``rvvdiff_repack_layouts.inc``
    One entry per interleaved layout with an RVV GEMV in ``arch/riscv/repack.cpp``: the explicit
    specialisation ``repack<block_X, I, C>`` of ``repack.cpp`` it is made by, its GEMV / GEMM and
    their ``_generic`` twins, under the same preprocessor conditions as the tree's definitions (the
    compiler evaluates them with the build's own flags).
``rvvdiff_quantize_mats.inc``
    The activation quantizers ``ggml_quantize_mat_<q8>_4x<I>`` those layouts use.

A tree that lacks a type, a twin or a layout therefore produces a server without it, and the
Python side skips its tests as "not in this tree" (harness/ggml/tree.py).
"""

from __future__ import annotations

import re
from pathlib import Path

from harness.ggml import csource, tree
from harness.ggml.source import GgmlSource
from harness.toolchain.compilers import SERVER_DIR

HEADER = "rvvdiff_tree.h"


def _guard(conditions: tuple[str, ...]) -> str:
    return " && ".join(f"({c})" for c in conditions)


def _enumerator(inv: tree.Tree, type_name: str) -> str | None:
    """``q4_K`` -> ``GGML_TYPE_Q4_K`` when the tree's enum has it."""
    e = "GGML_TYPE_" + type_name.upper()
    return e if inv.has(e) else None


def _has_names() -> list[str]:
    names: set[str] = set()
    for p in sorted(SERVER_DIR.glob("*.cpp")) + sorted(SERVER_DIR.glob("*.h")):
        names |= set(re.findall(r"\bRVVDIFF_HAS_(\w+)", p.read_text()))
    return sorted(names)


def _generic_lists(inv: tree.Tree, cpu: Path) -> tuple[list[str], list[str]]:
    declared = csource.read(cpu / "quants.h").declared() if (cpu / "quants.h").exists() else set()
    dots, quantizers = [], []
    for name in sorted(declared):
        m = re.fullmatch(r"ggml_vec_dot_(\w+?)_(q8_0|q8_1|q8_K)_generic", name)
        if m and (e := _enumerator(inv, m.group(1))):
            dots.append(f"X({e}, {name})")
        m = re.fullmatch(r"quantize_row_(q8_0|q8_1|q8_K)_generic", name)
        if m and (e := _enumerator(inv, m.group(1))):
            quantizers.append(f"X({e}, {name})")
    return dots, quantizers


def _repack(inv: tree.Tree, cpu: Path) -> tuple[list[str], list[str], list[str]]:
    """(declarations, layout entries, quantize_mat entries), each with its #if lines."""
    arch = cpu / "arch" / "riscv" / "repack.cpp"
    generic = cpu / "repack.cpp"
    if not arch.exists() or not generic.exists():
        return [], [], []
    rvv = csource.read(arch).functions(None)
    specs = {f.name: f for f in csource.read(generic).functions(None).values() if f.name.startswith("repack<")}
    decls, layouts, mats = [], [], []
    seen_mats: set[str] = set()
    for name, f in rvv.items():
        m = re.fullmatch(r"ggml_gemv_(\w+?)_(\d+)x(\d+)_(q8_0|q8_K)", name)
        if not m:
            continue
        block, cols, inter, act = m.group(1), int(m.group(2)), int(m.group(3)), m.group(4)
        spec = specs.get(f"repack<block_{block}, {inter}, {cols}>")
        gemm = rvv.get(f"ggml_gemm_{block}_{cols}x{inter}_{act}")
        xblock = f"block_{block}x{cols}"
        etype = _enumerator(inv, block)
        needs = [f"{name}_generic", f"ggml_gemm_{block}_{cols}x{inter}_{act}_generic", xblock]
        if spec is None or gemm is None or etype is None or inv.missing(needs):
            continue
        conds = tuple(dict.fromkeys(f.conditions + gemm.conditions + spec.conditions))
        spec_guard = _guard(spec.conditions)
        decls += ([f"#if {spec_guard}"] if spec_guard else []) + [
            f"template <> int repack<block_{block}, {inter}, {cols}>(struct ggml_tensor *, const void *, size_t);"
        ] + (["#endif"] if spec_guard else [])
        guard = _guard(conds)
        layouts += ([f"#if {guard}"] if guard else []) + [
            f'{{"{block}_{cols}x{inter}", {etype}, {inter}, {cols}, sizeof({xblock}), '
            f"R::repack<block_{block}, {inter}, {cols}>, {name}, ggml_gemm_{block}_{cols}x{inter}_{act}, "
            f"{name}_generic, ggml_gemm_{block}_{cols}x{inter}_{act}_generic}},"
        ] + (["#endif"] if guard else [])
        mat = f"ggml_quantize_mat_{act}_4x{inter}"
        if mat not in seen_mats and inv.has(mat) and (ea := _enumerator(inv, act)):
            seen_mats.add(mat)
            mats += ([f"#if {guard}"] if guard else []) + [f"{{{ea}, {inter}, {mat}}},"] + (["#endif"] if guard else [])
    return decls, layouts, mats


def render(source: GgmlSource) -> dict[str, str]:
    """The generated files' names and contents for ``source``."""
    inv = tree.of(source)
    cpu = source.cpu_dir
    top = f"// Generated by rvvdiff (harness/toolchain/bindings.py) from {source.label}, ggml {source.version}.  Do not edit.\n"
    lines = [top, "#pragma once", ""]
    for n in _has_names():
        lines.append(f"#define RVVDIFF_HAS_{n} {int(inv.has(n))}")
    dots, quantizers = _generic_lists(inv, cpu)
    for macro, entries in (("RVVDIFF_GENERIC_DOTS", dots), ("RVVDIFF_GENERIC_QUANTIZERS", quantizers)):
        lines.append("")
        lines.append(f"#define {macro}(X)" + "".join(f" \\\n    {e}" for e in entries))
    decls, layouts, mats = _repack(inv, cpu)
    return {
        HEADER: "\n".join(lines) + "\n",
        "rvvdiff_repack_decls.inc": top + "\n".join(decls) + "\n",
        "rvvdiff_repack_layouts.inc": top + "\n".join(layouts) + "\n",
        "rvvdiff_quantize_mats.inc": top + "\n".join(mats) + "\n",
    }


def write(source: GgmlSource, out_dir: Path) -> Path:
    """Write the generated files into ``out_dir`` (only those whose content changed); return it."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, text in render(source).items():
        p = out_dir / name
        if not p.exists() or p.read_text() != text:
            tmp = p.with_suffix(p.suffix + ".tmp")
            tmp.write_text(text)
            tmp.replace(p)
    return out_dir

"""What a tree's vec.h / vec.cpp hold, for every family whose kernels live there or call into them
(conversions, vec_dot, vec_ops, mul_mat, flash attention): the files and the headers they are read
after, which functions have an RVV path in a build and whether it calls intrinsics, where a
function is, and what the C reader (harness/ggml/csource.py) could not read.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import cache

from cases import coverage
from harness.core.config import ISA_BUILDS, IsaBuild
from harness.ggml import csource, tree
from harness.ggml.source import GgmlSource

#: The vector kernels' sources (relative to the ggml directory), and the header they are read
#: after: simd-mappings.h defines GGML_SIMD and the vector mappings in an RVV build.
VEC_FILES = ("src/ggml-cpu/vec.h", "src/ggml-cpu/vec.cpp")
HEADERS = ("src/ggml-cpu/simd-mappings.h",)
#: Every ISA build's extensions at once: a function with an RVV path in any build.
ALL_EXTENSIONS = tuple(sorted({e for b in ISA_BUILDS.values() for e in b.extensions}))


def headers(src: GgmlSource) -> list[csource.CFile]:
    """The headers vec.h is read after (HEADERS) that this tree has."""
    return [tree.of(src).file(h) for h in HEADERS if (src.ggml / h).is_file()]


@cache
def rvv_paths(src: GgmlSource, files: tuple[str, ...], extensions: tuple[str, ...] = ALL_EXTENSIONS
              ) -> dict[str, csource.RvvPath]:
    """The functions of ``files`` (relative to the ggml directory; absent ones are skipped) with an
    RVV path in a build with ``extensions`` (harness/ggml/csource.py: ``rvv_functions``)."""
    out: dict[str, csource.RvvPath] = {}
    for rel in files:
        if (src.ggml / rel).is_file():
            for name, r in csource.rvv_functions(tree.of(src).file(rel), extensions, headers(src)).items():
                out.setdefault(name, r)
    return out


def rvv_path(src: GgmlSource, isa: IsaBuild, function: str, files: tuple[str, ...]) -> bool:
    """``function`` of ``files``, as the ISA build compiles it in this tree, calls RVV intrinsics
    (the test's path is "rvv"; else the build runs a scalar loop)."""
    r = rvv_paths(src, files, tuple(isa.extensions)).get(function)
    return bool(r and r.intrinsics)


def widens_to_f32(src: GgmlSource, isa: IsaBuild, function: str) -> bool:
    """The RVV body of ``function`` (as ``isa`` compiles it) converts its fp16 data to fp32 and
    does its arithmetic there (``vfwcvt`` to f32, no fp16 multiply): the oracle's fp32 model."""
    r = rvv_paths(src, VEC_FILES, tuple(isa.extensions)).get(function)
    body = r.function.body if r else ""
    return "vfwcvt_f_f_v_f32" in body and not re.search(r"__riscv_vf(w?)(mul|macc|madd)_v[vf]_f16", body)


def where(src: GgmlSource, f: csource.Function) -> str:
    """file:line of a function, relative to the ggml directory."""
    return f"{f.file.relative_to(src.ggml)}:{f.line}"


def file_notes(src: GgmlSource, files: Sequence[str]) -> list[str]:
    """What harness/ggml/csource.py could not read in ``files``."""
    inv = tree.of(src)
    return [str(n) for rel in files if (src.ggml / rel).is_file() for n in inv.file(rel).notes]


def scan_rvv_file(inv: tree.Tree, family: str, file: str, entries: Sequence[object], known: set[str], owner: str,
                  select: Callable[[str], bool] = lambda name: True) -> coverage.FamilyScan:
    """The coverage scan of a family whose kernels are the RVV functions of one file (``file``, relative to the ggml
    directory): a function there with an RVV path that ``select`` takes and ``known`` lacks is uncovered (``owner``:
    the family's module, named in the reason); a table entry (with ``requires``) the tree lacks is not in this tree,
    and a tree without the file has none of them."""
    out = coverage.FamilyScan(family)
    src = inv.source
    if not (src.ggml / file).is_file():
        out.not_in_tree.append(f"{file} (not in this tree)")
        return out
    for e in entries:
        out.lacks(inv, e)
    for name, r in sorted(rvv_paths(src, (file,)).items()):
        if select(name) and name not in known:
            out.uncovered.append(coverage.Uncovered(name, where(src, r.function),
                                                    f"{r.describe()}; no test knows it ({owner})"))
    out.notes += file_notes(src, (file,))
    return out

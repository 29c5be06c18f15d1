"""The repack family's definition: the tree's RISC-V repack layouts and the GEMV / GEMM kernels that
read them, in four modules beside the tests (cases/test_repack_layout.py, cases/test_repack_gemm.py):

* cases/repack_kernels.py: the table (``KERNELS``, ``QUANTIZE_MATS``), each kernel's bound with its
  derivation, and the build's own view (``build_info``);
* cases/repack_strategies.py: the strategies that draw weights and activations, and the shapes
  every run checks;
* cases/repack_selection.py: the selection ggml's source declares (read by harness/ggml/cwalk.py),
  the path a QEMU trace shows, and the selection table the last runs recorded
  (``rvvdiff recorded repack-selection`` prints it);
* this module: the size table (cases/loops.py) and the ``repack`` coverage scan (cases/coverage.py).

What the pinned tree has (ggml-cpu/repack.cpp, arch/riscv/repack.cpp):

* layouts ``q4_0_16x1``, ``q8_0_16x1``, ``iq4_nl_16x1``, ``q4_K_16x1``, ``q2_K_16x1`` (compiled only
  with zvfh: ``#if defined __riscv_zvfh``), and ``q4_0_8x8`` (every build);
* for each, ``ggml_gemv_<layout>_<q8>`` and ``ggml_gemm_<layout>_<q8>`` (RVV bodies) and their
  scalar ``*_generic`` twins; the activation quantizers ``ggml_quantize_mat_q8_0_4x1`` /
  ``_q8_K_4x1`` (zvfh) and ``ggml_quantize_mat_q8_0_4x8`` (RVV);
* ``ggml_repack_get_optimal_repack_type`` picks the 16x1 layouts only at VLEN 256, only in
  zvfh builds and only when the row count is a multiple of 16; q4_0 8x8 is never picked on
  RISC-V (AVX2 / SVE only).  :func:`cases.repack_selection.scan_selection` reads this from the tree under test.

Where the RVV bodies can run: the 16x1 kernels process 16 columns with ``vl = 16`` at SEW 8
and LMUL 1/2, which needs VLMAX(e8, mf2) = VLEN / 16 >= 16, i.e. VLEN >= 256; at VLEN 128
the intrinsics silently clamp vl to 8 and half the columns are never computed, so they are
not run there (their generic twins are).  ``ggml_gemv/gemm_q4_0_8x8_q8_0`` check
``__riscv_vlenb() >= QK4_0`` themselves and call their generic twin at VLEN 128.
"""

from __future__ import annotations

import re
from pathlib import Path

from cases import coverage
from cases import loops as L
from cases.repack_kernels import BY_NAME, KERNELS, KINDS, QUANTIZE_MATS, RepackKernel
from cases.repack_strategies import (
    GEMM_GROUPS,
    GEMX_TILES,
    MUL_MAT_PLANES,
    MUL_MAT_ROWS,
    MUL_MAT_THREADS,
    MUL_MAT_TILES,
    SMALL_BLOCKS,
    GemxShape,
    gemx_shapes,
    mul_mat_chunks,
    mul_mat_shapes,
    real_blocks,
)
from harness.core.config import VLENS
from harness.ggml import csource, cwalk
from harness.ggml.tree import Tree, type_name
from oracles import quants as Q

# ------------------------------------------------------------------ the size table (cases/loops.py)

#: The two block sizes of this family: blocks of 32 (q4_0, q8_0, iq4_nl; q8_0 activations) and
#: super-blocks of 256 (q4_K, q2_K; q8_K).
_B32, _B256 = 32, 256


def _kernels(block: int, ncols: int | None = 16) -> list[RepackKernel]:
    return [k for k in KERNELS if Q.block_size(k.layout.weight) == block and (ncols is None or k.layout.ncols == ncols)]


def layout_shapes(kernel: RepackKernel) -> list[GemxShape]:
    """Matrices ``test_layout`` repacks on every run (``nr`` unused): 3 interleaves x 3 blocks,
    one interleave x the longest real k."""
    return [GemxShape(0, GEMX_TILES[1], 3), GemxShape(0, 1, real_blocks(Q.block_size(kernel.layout.weight))[-1])]


def quantize_mat_blocks(act: str) -> list[int]:
    """Block counts ``test_quantize_mat`` checks on every run for activation type ``act``: 3, and
    the longest real k."""
    return [3, real_blocks(Q.block_size(act))[-1]]


def _random_chunking() -> tuple[list[int], list[int]]:
    """Chunks per plane and rows per chunk over every (weight rows, threads) the mul_mat strategy draws."""
    runs = [mul_mat_chunks(16 * i, t) for i in range(MUL_MAT_TILES[0], MUL_MAT_TILES[1] + 1)
            for t in range(MUL_MAT_THREADS[0], MUL_MAT_THREADS[1] + 1)]
    return [len(c) for _, c in runs], [dr for dr, _ in runs]


def drawn(vlen: int) -> dict[str, L.Drawn]:
    """What the tests draw of every size variable, from the functions that build their fixed
    examples (``gemx_shapes``, ``mul_mat_shapes``, ``quantize_mat_blocks``) and the constants
    of their strategies.  The same at every VLEN: no loop of this family steps by VLEN."""
    def gemx(kernels: list[RepackKernel], field: str, kinds: tuple[str, ...] = KINDS) -> list[int]:
        return sorted({getattr(s, field) * (k.layout.ncols if field == "interleaves" else 1)
                       for k in kernels for kind in kinds for s in gemx_shapes(k, kind)})

    mm = mul_mat_shapes(BY_NAME["q4_0_16x1"])
    mm_k = mul_mat_shapes(BY_NAME["q4_K_16x1"])
    chunks, rows_per_chunk = _random_chunking()
    small = SMALL_BLOCKS
    return {
        "nc": L.Drawn(gemx(_kernels(_B32) + _kernels(_B256), "interleaves"), 16 * GEMX_TILES[0], 16 * GEMX_TILES[1]),
        "nc (8x8)": L.Drawn(gemx(_kernels(_B32, 8), "interleaves"), 8 * GEMX_TILES[0], 8 * GEMX_TILES[1]),
        "nr (GEMM)": L.Drawn(gemx(KERNELS, "nr", ("gemm",)), 4 * GEMM_GROUPS[0], 4 * GEMM_GROUPS[1]),
        "blocks": L.Drawn(gemx(_kernels(_B32, None), "n_blocks"), small[0], real_blocks(_B32)[-1]),
        "super-blocks": L.Drawn(gemx(_kernels(_B256), "n_blocks"), small[0], real_blocks(_B256)[-1]),
        "layout row groups": L.Drawn(sorted({s.interleaves for k in KERNELS for s in layout_shapes(k)}), *GEMX_TILES),
        "layout blocks": L.Drawn(sorted({s.n_blocks for k in _kernels(_B32, None) for s in layout_shapes(k)}),
                                 small[0], real_blocks(_B32)[-1]),
        "layout super-blocks": L.Drawn(sorted({s.n_blocks for k in _kernels(_B256) for s in layout_shapes(k)}),
                                       small[0], real_blocks(_B256)[-1]),
        "qm blocks": L.Drawn(quantize_mat_blocks("q8_0"), small[0], real_blocks(_B32)[-1]),
        "qm super-blocks": L.Drawn(quantize_mat_blocks("q8_K"), small[0], real_blocks(_B256)[-1]),
        "mm n": L.Drawn(sorted({s.n for s in mm}), MUL_MAT_ROWS[0], MUL_MAT_ROWS[-1]),
        "mm chunks": L.Drawn(sorted({len(mul_mat_chunks(s.m, s.threads)[1]) for s in mm}), min(chunks), max(chunks)),
        "mm rows per chunk": L.Drawn(sorted({mul_mat_chunks(s.m, s.threads)[0] for s in mm}),
                                     min(rows_per_chunk), max(rows_per_chunk)),
        "mm planes": L.Drawn(sorted({s.batch for s in mm}), *MUL_MAT_PLANES),
        "mm blocks": L.Drawn(sorted({s.n_blocks for s in mm}), small[0], real_blocks(_B32)[-1]),
        "mm super-blocks": L.Drawn(sorted({s.n_blocks for s in mm_k}), small[0], real_blocks(_B256)[-1]),
    }


_RVV = (256, 512, 1024)  # the RVV bodies run from VLEN 256 (module doc); at 128 the generic twins
_MM = (256,)  # ggml repacks only at VLEN 256 (zvfh builds)
_RVV_SRC = "arch/riscv/repack.cpp"
#: Columns per kernel call in mul_mat on 4 threads (the chunk's rows, dr0 = m / 16) at m = 4096 / 5632 / 14336.
_REAL_NC = (256, 352, 896)
_REAL_B32, _REAL_B256 = real_blocks(_B32), real_blocks(_B256)


def _tiles(kernels: str, step: int, var: str, vlens: tuple[int, ...], source: str) -> L.Loop:
    return L.Loop(kernels, f"column tiles: x < nc / {step}", var, lambda v: step, remainder=False,
                  real=_REAL_NC, vlens=vlens, source=source)


def _blocks(kernels: str, block: int, vlens: tuple[int, ...], source: str, var: str | None = None) -> L.Loop:
    b32 = block == _B32
    return L.Loop(kernels, f"{'blocks' if b32 else 'super-blocks'} per row: l < n / {block}",
                  var or ("blocks" if b32 else "super-blocks"), lambda v: 1, remainder=False,
                  real=_REAL_B32 if b32 else _REAL_B256, vlens=vlens, source=source)


def _groups(kernels: str, vlens: tuple[int, ...], source: str) -> L.Loop:
    return L.Loop(kernels, "GEMM row groups: y < nr / 4 (nr % 4 == 0 asserted; leftovers are mul_mat's GEMV)",
                  "nr (GEMM)", lambda v: 4, remainder=False, vlens=vlens, source=source)


_Q32 = "ggml_gemv/gemm_{q4_0,q8_0,iq4_nl}_16x1_q8_0"
_QK = "ggml_gemv/gemm_{q4_K,q2_K}_16x1_q8_K"
_G16 = "the 10 ggml_gemv/gemm_*_16x1_*_generic"
_8x8 = "ggml_gemv/gemm_q4_0_8x8_q8_0"
LOOPS = [
    _tiles(f"{_Q32}, {_QK} (RVV)", 16, "nc", _RVV, f"{_RVV_SRC}: x loop; q2_K: col_tile += 16"),
    _blocks(f"{_Q32} (RVV)", _B32, _RVV, f"{_RVV_SRC}: l loop"),
    _blocks(f"{_QK} (RVV)", _B256, _RVV, f"{_RVV_SRC}: l loop; q2_K: k_block loop"),
    _groups("ggml_gemm_*_16x1_* (RVV, 5 layouts)", _RVV, f"{_RVV_SRC}: y loop; q2_K: row_tile += 4"),
    _tiles(_G16, 16, "nc", tuple(VLENS), "repack.cpp: x loop"),
    _blocks(f"{_G16} (q4_0, q8_0, iq4_nl)", _B32, tuple(VLENS), "repack.cpp: l loop"),
    _blocks(f"{_G16} (q4_K, q2_K)", _B256, tuple(VLENS), "repack.cpp: l loop"),
    _groups("ggml_gemm_*_16x1_*_generic", tuple(VLENS), "repack.cpp: y loop"),
    _tiles(f"{_8x8} (RVV body: vlenb >= 32)", 8, "nc (8x8)", _RVV, f"{_RVV_SRC}: x loop"),
    _blocks(f"{_8x8} (RVV body)", _B32, _RVV, f"{_RVV_SRC}: l loop"),
    _groups("ggml_gemm_q4_0_8x8_q8_0 (RVV body)", _RVV, f"{_RVV_SRC}: y loop"),
    _tiles(f"{_8x8}_generic (the entry's body at VLEN 128)", 8, "nc (8x8)", tuple(VLENS), "repack.cpp: x loop"),
    _blocks(f"{_8x8}_generic", _B32, tuple(VLENS), "repack.cpp: l loop"),
    _groups("ggml_gemm_q4_0_8x8_q8_0_generic", tuple(VLENS), "repack.cpp: y loop"),
    L.Loop("ggml::cpu::repack::repack<block, INTER_SIZE, NB_COLS> (repack_*_to_*_bl, 6 layouts)",
           "row groups (in interleaves of 16 or 8 rows): b < nrow, b += NB_COLS; other row counts refused",
           "layout row groups", lambda v: 1,
           remainder=False, source="repack.cpp: repack_q4_0_to_q4_0_16_bl ..."),
    _blocks("ggml::cpu::repack::repack<...> of q4_0, q8_0, iq4_nl", _B32, tuple(VLENS),
            "repack.cpp: x < nblocks", var="layout blocks"),
    _blocks("ggml::cpu::repack::repack<...> of q4_K, q2_K", _B256, tuple(VLENS), "repack.cpp: x < nblocks",
            var="layout super-blocks"),
    _blocks("ggml_quantize_mat_q8_0_4x8 (RVV), _q8_0_4x1", _B32, tuple(VLENS),
            f"{_RVV_SRC}, repack.cpp: i loop over blocks", var="qm blocks"),
    _blocks("ggml_quantize_mat_q8_K_4x1", _B256, tuple(VLENS), "repack.cpp: i loop over blocks", var="qm super-blocks"),
    L.Loop("mul_mat, CPU_REPACK weights (forward_mul_mat)", "activation rows: 4-row groups through "
           "ggml_quantize_mat_*_4x1 (strided over threads), the n % 4 others through quantize_row", "mm n",
           lambda v: 4, vlens=_MM, source="repack.cpp: forward_mul_mat, i11 loops"),
    L.Loop("mul_mat, CPU_REPACK weights (forward_mul_mat_one_chunk)", "activation rows: GEMM for n - n % 4 "
           "(when n > 3), one GEMV per leftover row", "mm n", lambda v: 4, vlens=_MM,
           source="repack.cpp: forward_mul_mat_one_chunk"),
    L.Loop("mul_mat, CPU_REPACK weights (forward_mul_mat)", "threads' chunks of weight rows per plane "
           "(current_chunk < nchunk0 * nchunk1)", "mm chunks", lambda v: 1, remainder=False, real=(16,), vlens=_MM,
           source="repack.cpp: forward_mul_mat, chunk loop"),
    L.Loop("mul_mat, CPU_REPACK weights (forward_mul_mat)", "rows per chunk (dr0), boundaries rounded up to a "
           "16-column tile", "mm rows per chunk", lambda v: 16, real=(256, 352, 896), vlens=_MM,
           source="repack.cpp: forward_mul_mat, src0_start / src0_end"),
    L.Loop("mul_mat, CPU_REPACK weights (forward_mul_mat)", "planes (nchunk1 = ne12)", "mm planes", lambda v: 1,
           remainder=False, vlens=_MM, source="repack.cpp: forward_mul_mat, i12 loop and chunk index"),
    _blocks("mul_mat, CPU_REPACK weights: q4_0, q8_0, iq4_nl (GEMM, GEMV, quantizers)", _B32, _MM,
            "the kernels' block loops, as mul_mat calls them", var="mm blocks"),
    _blocks("mul_mat, CPU_REPACK weights: q4_K, q2_K", _B256, _MM, "the kernels' block loops, as mul_mat calls them",
            var="mm super-blocks"),
]

FAMILY = L.register(L.Family(
    name="repack", doc="docs/repack.md", loops=LOOPS, drawn=drawn,
    notes=("Every kernel here strip-mines nothing: the RVV bodies set vl = 16 (SEW 8, LMUL 1/2; 16x1) or "
           "vl = 32 (q4_0 8x8) once, so no loop's step depends on VLEN; VLEN decides only where the bodies "
           "run (16x1 from 256, 8x8's RVV body from 256: `vlens`).",
           "Fixed-count inner loops (16 byte pairs or 32 quants per block, 2 x 2 sub-block pairs of q4_K, 4 "
           "phases x 16 of q2_K, 4 interleaved rows) run the same trips in every call: any call crosses them.",
           "nc real: the columns one kernel call gets in mul_mat on 4 threads (chunks of m / 16 rows) for "
           "m = 4096 / 5632 / 14336 (every run: 256 columns in one direct call, and mul_mat of 4096 rows "
           "on 4 threads); blocks real: k = 4096 / 5632 / 14336; chunks real: 16 per plane on 4 threads for "
           "any m >= 1024."),
))


_GEMX_FN = re.compile(r"ggml_gem[mv]_\w+")
_QUANTIZE_MAT_FN = re.compile(r"ggml_quantize_mat_(\w+)")
_REPACK_SPEC = re.compile(r"repack<(block_\w+), (\d+), (\d+)>")
_QUANTIZE_MAT_SPEC = re.compile(r"ggml_quantize_mat_t<(\d+), GGML_TYPE_(\w+)>")


def _riscv_only(fn: csource.Function) -> bool:
    return any("__riscv" in c for c in fn.conditions)


@coverage.register("repack")
def coverage_scan(inv: Tree) -> coverage.FamilyScan:
    """The repack family's coverage of tree ``inv`` (cases/coverage.py).  Uncovered: a layout the
    tree's selection picks on RISC-V (either build), a ``repack<block, INTER_SIZE, NB_COLS>`` or
    ``ggml_quantize_mat_t`` specialisation of repack.cpp compiled only for RISC-V (a zvfh RVV
    build), an RVV ``ggml_gemv/gemm_*`` or ``ggml_quantize_mat_*`` of arch/riscv/repack.cpp, that
    KERNELS / QUANTIZE_MATS do not know.  Not in this tree: table entries whose ``requires`` the
    tree lacks, or without an RVV body in arch/riscv/repack.cpp."""
    out = coverage.FamilyScan("repack")
    cpu = Path(inv.source.cpu_dir)
    known_fns = {k.entry(kind) for k in KERNELS for kind in KINDS}
    known_qm = {q.name for q in QUANTIZE_MATS}
    macros = csource.rvv_macros(["zfh", "zvfh"])

    def uncovered(name: str, where: str, why: str) -> None:
        if name not in {u.name for u in out.uncovered}:
            out.uncovered.append(coverage.Uncovered(name, where, why))

    picked: dict[tuple[str, str, str, str], list[str]] = {}  # (layout, weight, VLENs, where) -> builds
    for zvfh in (True, False):
        sel = cwalk.read_selection(cpu, zvfh)
        out.notes += [n for n in sel.notes if n not in out.notes]
        for weight, table in sel.rules.items():
            for lay in dict.fromkeys(r.layout for r in table.values() if r):
                vlens = ", ".join(str(v) for v, r in table.items() if r and r.layout == lay)
                picked.setdefault((lay, weight, vlens, sel.where[lay]), []).append("zvfh" if zvfh else "v")
    for (lay, weight, vlens, where), builds in picked.items():
        said = f"ggml selects {lay} for {weight} at VLEN {vlens} in {' and '.join(builds)} builds"
        if lay not in BY_NAME:
            uncovered(lay, where, f"{said}: add it to KERNELS (cases/repack_kernels.py) and its layout to oracles/repack.py")
        elif BY_NAME[lay].layout.ncols != 16:
            out.notes.append(f"{where}: {said}; test_mul_mat* (cases/test_repack_gemm.py) run only the 16x1 layouts "
                             f"through mul_mat, {lay}'s GEMV / GEMM are tested by direct calls (test_gemx)")
    rvv_bodies: set[str] = set()
    for rel in ("repack.cpp", "arch/riscv/repack.cpp"):
        path = cpu / rel
        if not path.exists():
            out.notes.append(f"{path}: no such file")
            continue
        cfile = csource.read(path)
        for n in cfile.preprocessed(macros).notes:
            if not any(o.startswith(f"{n.file}:{n.line}:") for o in out.notes):  # (the selection's are in)
                out.notes.append(f"{n} (the repack kernels defined there may be missed)")
        for name, fn in cfile.functions(macros).items():
            if m := _REPACK_SPEC.fullmatch(name):
                lay = cwalk.layout_name(m.group(1), int(m.group(2)), int(m.group(3)))
                if _riscv_only(fn) and lay not in BY_NAME:
                    uncovered(lay, fn.where(), f"repack.cpp's {name} is compiled only for RISC-V: add the layout to "
                              "KERNELS (cases/repack_kernels.py) and oracles/repack.py")
            elif m := _QUANTIZE_MAT_SPEC.fullmatch(name):
                qm = f"{type_name('GGML_TYPE_' + m.group(2))}_4x{m.group(1)}"
                if _riscv_only(fn) and qm not in known_qm:
                    uncovered(f"ggml_quantize_mat_{qm}", fn.where(), "compiled only for RISC-V: add it to QUANTIZE_MATS "
                              "(cases/repack_kernels.py)")
            elif rel.startswith("arch/") and "__riscv_" in fn.body and not name.endswith("_generic"):
                rvv_bodies.add(name)
                if _GEMX_FN.fullmatch(name) and name not in known_fns:
                    uncovered(name, fn.where(), "an RVV GEMV / GEMM that cases/repack_kernels.py does not know: add its "
                              "layout to KERNELS (with its bound) and oracles/repack.py")
                elif (m := _QUANTIZE_MAT_FN.fullmatch(name)) and m.group(1) not in known_qm:
                    uncovered(name, fn.where(), "an RVV activation quantizer of the repacked GEMMs: add it to "
                              "QUANTIZE_MATS (cases/repack_kernels.py)")
    for k in KERNELS:
        if missing := inv.missing(k.requires):
            out.not_in_tree.append(f"{k.name} (the tree lacks {', '.join(missing)})")
        elif lacking := [f for f in (k.entry("gemv"), k.entry("gemm")) if f not in rvv_bodies]:
            out.not_in_tree.append(f"{k.name} (no RVV body for {', '.join(lacking)} in arch/riscv/repack.cpp)")
    for q in QUANTIZE_MATS:
        if missing := inv.missing(q.requires):
            out.not_in_tree.append(f"{q.function} (the tree lacks {', '.join(missing)})")
    return out



"""Weight repacking, layout invariants and selection: ggml's repack code against the independent
NumPy layouts of oracles/repack.py, ggml's choice of layout per weight type, row count and VLEN
against what its source declares, and the activation quantizers of the repacked path.

* :func:`test_build_info` -- the build has exactly the layouts the table knows and the tree has
  (16x1 only with zvfh; a layout whose ``requires`` the tree lacks is not in this tree), each
  interleaved block as large as the blocks it holds, and the CPU device lists the CPU_REPACK
  buffer type; RISC-V repack code of the tree the table does not know fails it (the ``repack``
  scan of cases/coverage.py: :func:`cases.repack.coverage_scan`).
* :func:`test_layout` -- ggml's ``repack<block, INTER_SIZE, NB_COLS>`` (called directly, so every
  layout is checked at every VLEN, selected there or not; 1-3 interleaves x 1-7 blocks or a real
  count drawn, then on every run 3 interleaves x 3 blocks and one interleave x the longest real k) writes exactly
  :func:`oracles.repack.pack_matrix`'s bytes; unpacking them gives back the original blocks
  (a bijection: no block lost or duplicated); a row count that is not a multiple of the
  interleave is refused (return -1) and nothing is written.  Exact comparisons: a layout is a
  byte permutation (plus q4_0's XOR and q4_K's scale re-encoding).
* :func:`test_selection` -- through the backend API (CPU_REPACK found in the CPU device's extra
  buffer types, a tensor allocated there, ``ggml_backend_tensor_set``): the traits ggml attaches
  are the layout :func:`cases.repack_selection.scan_selection` reads from the tree's
  ``ggml_repack_get_optimal_repack_type`` for this VLEN and build (none where it must not
  repack), the device supports the mul_mat exactly then, sizes and alignment are as the buffer
  type declares, and the repacked bytes are the NumPy layout.  The types swept are those of
  ``sweep_types`` in cases/repack_selection.py (the tree's; the ones left out are noted).  The table is recorded
  (``rvvdiff recorded repack-selection`` prints it).
* :func:`test_quantize_mat` -- ``ggml_quantize_mat_<q8>_4x<blocklen>`` (the GEMM's activations)
  equal the reference quantizer's rows interleaved by :func:`oracles.repack.pack_activations`,
  bit for bit: q8_0 rounds half away from zero (``roundf``; the RVV 4x8 uses the RMM rounding
  mode), q8_K half to even (``nearest_int``), and the inputs include exact ties.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import strategies as st

from cases import quant_blocks as QB
from cases import quant_variants as V
from cases import quantize as QZ
from cases import repack as R
from cases import repack_kernels as K
from cases import repack_selection as SEL
from cases import repack_strategies as RS
from cases import strategies as S
from harness.check import observe
from harness.emulators.protocol import In, Out
from harness.ggml import tree
from harness.plugin.targets import session
from oracles import q8 as Q8
from oracles import quants as Q
from oracles import repack as RP


def test_build_info(target) -> None:
    """The build's layouts, block sizes, quantizers and buffer type are the ones the table expects
    of this tree (entries whose ``requires`` it lacks are not in this tree, and listed); a layout,
    GEMV / GEMM or activation quantizer of the tree's RISC-V code that the table does not know
    fails (the repack scan of cases/coverage.py, with file:line)."""
    inv = tree.of(session().source)
    scan = R.coverage_scan(inv)
    assert not scan.uncovered, ("the tree has RISC-V repack code cases/repack_kernels.py does not know:\n  " +
                                "\n  ".join(f"{u.name} ({u.where}): {u.why}" for u in scan.uncovered))
    if scan.not_in_tree:
        observe.note("not_in_tree", "; ".join(scan.not_in_tree))
    info = K.build_info(target)
    zvfh = bool(target.features.get("zvfh"))
    expected = {k.name for k in K.KERNELS if (zvfh or not k.zvfh_only) and not inv.missing(k.requires)}
    assert set(info.layouts) == expected, (f"layouts={sorted(info.layouts)}, but should be {sorted(expected)} "
                                           f"[repack_info, {target.id}]")
    for name, (tid, inter, cols, size) in info.layouts.items():
        lay = RP.layout(name)
        got = (tid, inter, cols, size)
        want = (V.type_id(target, lay.weight), lay.blocklen, lay.ncols, lay.block_bytes)
        assert got == want, f"layout {name}: (type, INTER_SIZE, NB_COLS, sizeof)={got}, but should be {want}"
    want_qm = {q.name for q in K.QUANTIZE_MATS if (zvfh or not q.zvfh_only) and not inv.missing(q.requires)}
    assert info.quantize_mats == want_qm, f"quantize_mat={sorted(info.quantize_mats)}, but should be {sorted(want_qm)}"
    assert info.buft == "CPU_REPACK", f"buft={info.buft!r}, but should be 'CPU_REPACK' [ggml_backend_dev_get_extra_bufts]"


@dataclass(frozen=True)
class RawMatrix:
    """Uniformly random bytes for ``rows x n_blocks`` blocks (every bit of every field moves)."""

    rows: int
    n_blocks: int
    seed: int
    whole: bool  # the row count is a whole number of interleaves

    def raw(self, weight: str) -> np.ndarray:
        rng = np.random.default_rng(self.seed)
        return rng.integers(0, 256, (self.rows, self.n_blocks, Q.block_bytes(weight)), dtype=np.uint8)


@st.composite
def _raw_matrices(draw: st.DrawFn, kernel: K.RepackKernel) -> RawMatrix:
    """Whole interleaves (1-3) or, half the time, a row count that is not a multiple of the
    interleave; 1-7 blocks or a real model's count."""
    lay = kernel.layout
    whole = draw(st.booleans(), label="whole")
    rows = lay.ncols * draw(st.integers(*RS.GEMX_TILES), label="interleaves")
    if not whole:
        rows += draw(st.integers(1, lay.ncols - 1), label="extra_rows")
    return RawMatrix(rows, draw(RS.block_counts(Q.block_size(lay.weight)), label="n_blocks"),
                     draw(st.integers(0, 2**32 - 1), label="seed"), whole)


@pytest.mark.parametrize("kernel", K.KERNELS, ids=K.IDS)
def test_layout(kernel: K.RepackKernel, target, request: pytest.FixtureRequest) -> None:
    """ggml's repack of random blocks = the NumPy layout, exactly; its inverse restores the blocks;
    first the shapes of ``R.layout_shapes`` (3 interleaves x 3 blocks, the longest real k)."""
    if reason := kernel.not_compiled(target):
        pytest.skip(reason)
    lay = kernel.layout

    def check(case: RawMatrix) -> None:
        raw, whole = case.raw(lay.weight), case.whole
        rows, nb = raw.shape[:2]
        ctx = f"ggml::cpu::repack::repack<{lay.weight}, {lay.blocklen}, {lay.ncols}> of {rows} x {nb} blocks, {target.id}"
        r = target.call("repack_layout", [V.type_id(target, lay.weight), lay.blocklen, lay.ncols, rows,
                                          nb * Q.block_size(lay.weight)], [], [In(raw), Out(raw.size)])
        got = r.output(0, np.uint8)
        rc = int(K.notes(r.message)["rc"])
        if not whole:
            assert rc == -1, f"rc={rc}, but should be -1 ({rows} rows is not a multiple of {lay.ncols}) [{ctx}]"
            K.assert_bytes_equal(got, np.full(raw.size, 0xA5, np.uint8), name="out (must stay unwritten)", context=ctx)
            return
        assert rc == 0, f"rc={rc}, but should be 0 [{ctx}]"
        K.assert_bytes_equal(got, RP.pack_matrix(lay, raw).ravel(), name="repacked bytes", context=ctx)
        K.assert_bytes_equal(RP.unpack_matrix(lay, got, nb).ravel(), raw.ravel(), name="unpacked blocks",
                             context=f"oracles.repack.unpack_matrix of {ctx}")

    examples = [RawMatrix(s.interleaves * lay.ncols, s.n_blocks, i, True) for i, s in enumerate(R.layout_shapes(kernel))]
    S.explore(request, _raw_matrices(kernel), [], check, after=examples)


def test_selection(target) -> None:
    """For every weight type and row count of the sweep: the layout ggml attaches through the
    CPU_REPACK buffer type is the one its source declares for this VLEN and build; sizes,
    alignment and repacked bytes are as declared; the table is recorded."""
    rng = np.random.default_rng(5)
    table: dict[str, dict[int, str | None]] = {}
    sweep, left_out = SEL.sweep_types(tree.of(session().source))
    if left_out:
        observe.note("not_swept", ", ".join(left_out))
    for weight in sweep:
        table[weight] = {}
        for rows in K.SWEEP_ROWS:
            nb = 1 + rows % 3
            raw = rng.integers(0, 256, (rows, nb, Q.block_bytes(weight)), dtype=np.uint8)
            r = target.call("repack_buffer", [V.type_id(target, weight), rows, nb * Q.block_size(weight)], [],
                            [In(raw), Out(raw.size)])
            n = K.notes(r.message)
            chosen = SEL.chosen_layout(n["traits"])
            expected = SEL.expected_layout(target, weight, rows)
            table[weight][rows] = chosen
            ctx = f"{weight}, {rows} rows x {nb} blocks in CPU_REPACK, {target.id}"
            assert chosen == expected, (f"layout={chosen}, but should be {expected} [{ctx}; "
                                        f"ggml_repack_get_optimal_repack_type in {session().source.cpu_dir}/repack.cpp]")
            assert n["supports_mul_mat"] == ("1" if chosen else "0"), (
                f"supports_mul_mat={n['supports_mul_mat']}, but should be {int(bool(chosen))} [{ctx}]")
            assert int(n["alloc_size"]) == int(n["nbytes"]) == raw.size, (
                f"alloc_size={n['alloc_size']}, nbytes={n['nbytes']}, but both should be {raw.size} [{ctx}]")
            align = int(n["alignment"])
            assert align >= 32 and align & (align - 1) == 0 and n["misalignment"] == "0", (
                f"alignment={align}, misalignment={n['misalignment']}, but should be a power of two >= 32 "
                f"(TENSOR_ALIGNMENT) and 0 [{ctx}]")
            if chosen:
                K.assert_bytes_equal(r.output(0, np.uint8), RP.pack_matrix(RP.layout(chosen), raw).ravel(),
                                     name="repacked bytes (tensor->data)", context=ctx)
    SEL.record_selection(target, table)
    picked = sorted({f"{t}->{lay}" for t, rows in table.items() for lay in rows.values() if lay})
    observe.note("selection", ", ".join(picked) or "nothing repacked")


FLOAT_KINDS = (*QB.FLOAT_KINDS, "ties", "scale_ties")


def scale_ties(n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` block maxima amax = 127 t, where t lies exactly halfway between two fp16 numbers whose
    lower one is even: amax / 127 = t exactly (t has 12 significant bits, 127 t 19), so the block's
    fp16 scale d is an exact tie, which round-to-nearest-even (ggml's conversion) rounds down and any
    other rounding mode (ties away, up) rounds up.  A quantizer that converts d while the FP rounding
    mode is not the default shows it (docs/findings.md: GCC 14's hoisted frm write)."""
    mant = rng.integers(0, 512, n) * 2  # an even fp16 mantissa (10 bits)
    exp = rng.integers(-8, 4, n)  # fp16 normal range, scales of real activations
    t = (1 + (mant + 0.5) / 1024) * np.exp2(exp)
    return (127 * t).astype(np.float32)


def _float_rows(kind: str, k: int, seed: int, block: int) -> np.ndarray:
    """4 rows of k floats; ``ties``: per block the maximum is 127 * 2^e and every other element
    (j + 1/2) * 2^e, so that every scaled value is an exact tie between two integers."""
    if kind == "near_ties":  # near ties of nearest_int (cases/quantize.py near_ties)
        return np.stack([QZ.make_row(k // block, block, ("near_ties",), seed + r) for r in range(4)])
    rng = np.random.default_rng(seed)
    if kind == "scale_ties":  # every block's maximum makes its fp16 scale an exact tie (scale_ties)
        amax = scale_ties(4 * (k // block), rng).reshape(4, k // block, 1)
        v = rng.uniform(-1, 1, (4, k // block, block)) * amax
        v[:, :, 0] = np.where(rng.random((4, k // block)) < 0.5, 1, -1) * amax[:, :, 0]
        return v.reshape(4, k).astype(np.float32)
    if kind != "ties":
        return np.stack([QB.activation_floats(kind, k, seed + r) for r in range(4)])
    v = rng.integers(-127, 127, (4, k // block, block)) + 0.5
    v[:, :, 0] = np.where(rng.random((4, k // block)) < 0.5, 127, -127)
    return (v * np.exp2(rng.integers(-6, 4, (4, k // block, 1)))).reshape(4, k).astype(np.float32)


@dataclass(frozen=True)
class FloatRows:
    """4 rows of ``n_blocks`` blocks of floats for an activation quantizer (``_float_rows``)."""

    n_blocks: int
    kind: str
    seed: int


@st.composite
def _float_row_cases(draw: st.DrawFn, act: str) -> FloatRows:
    """1-7 blocks or a real model's count, a kind of float data, a seed."""
    return FloatRows(draw(RS.block_counts(Q.block_size(act)), label="n_blocks"),
                     draw(st.sampled_from(FLOAT_KINDS), label="kind"), draw(st.integers(0, 2**32 - 1), label="seed"))


@pytest.mark.parametrize("qm", K.QUANTIZE_MATS, ids=[q.name for q in K.QUANTIZE_MATS])
def test_quantize_mat(qm: K.QuantizeMat, target, request: pytest.FixtureRequest) -> None:
    """ggml_quantize_mat_<name> = the reference quantizer's 4 rows, interleaved, bit for bit; first
    the block counts of ``R.quantize_mat_blocks`` (3, the longest real k), a block of near ties and
    two blocks whose fp16 scales are exact ties (:func:`scale_ties`), then drawn ones."""
    name, act, inter = qm.name, qm.act, qm.inter
    if name not in K.build_info(target).quantize_mats:
        pytest.skip(f"{qm.function} is compiled only with zvfh (repack.h); build {target.isa.name} has none")
    blk = Q.block_size(act)

    def check(case: FloatRows) -> None:
        nb, kind = case.n_blocks, case.kind
        x = _float_rows(kind, nb * blk, case.seed, blk)
        r = target.call("repack_quantize_mat", [V.type_id(target, act), inter, nb * blk], [],
                        [In(x), Out(4 * Q.row_bytes(act, nb * blk))])
        ref = np.stack([Q8.quantize_q8_0(row) if act == "q8_0" else Q8.quantize_q8_K(row, "first")[0] for row in x])
        K.assert_bytes_equal(r.output(0, np.uint8), RP.pack_activations(act, ref, inter).ravel(),
                             name="interleaved blocks", context=f"ggml_quantize_mat_{name}, k={nb * blk}, {kind} rows, "
                             f"{target.id}; reference: quantize_row_{act}_ref semantics")

    examples = [FloatRows(nb, "gaussian", i) for i, nb in enumerate(R.quantize_mat_blocks(act))] + [
        FloatRows(1, "near_ties", 0), FloatRows(2, "scale_ties", 0)]
    S.explore(request, _float_row_cases(act), [], check, after=examples)

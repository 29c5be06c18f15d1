"""The repack family's definition: one table of the tree's RISC-V repack layouts and the GEMV /
GEMM kernels that read them, their bounds, the strategies that draw weights and activations,
the selection ggml's source declares, and the path a QEMU trace shows.  Used by
cases/test_repack_layout.py and cases/test_repack_gemm.py; ``python -m cases.repack_cases``
prints the selection table the last runs recorded.

What the pinned tree has (ggml-cpu/repack.cpp, arch/riscv/repack.cpp):

* layouts ``q4_0_16x1``, ``q8_0_16x1``, ``iq4_nl_16x1``, ``q4_K_16x1``, ``q2_K_16x1`` (compiled only
  with zvfh: ``#if defined __riscv_zvfh``), and ``q4_0_8x8`` (every build);
* for each, ``ggml_gemv_<layout>_<q8>`` and ``ggml_gemm_<layout>_<q8>`` (RVV bodies) and their
  scalar ``*_generic`` twins; the activation quantizers ``ggml_quantize_mat_q8_0_4x1`` /
  ``_q8_K_4x1`` (zvfh) and ``ggml_quantize_mat_q8_0_4x8`` (RVV);
* ``ggml_repack_get_optimal_repack_type`` picks the 16x1 layouts only at VLEN 256, only in
  zvfh builds and only when the row count is a multiple of 16; q4_0 8x8 is never picked on
  RISC-V (AVX2 / SVE only).  :func:`scan_selection` reads this from the tree under test.

Where the RVV bodies can run: the 16x1 kernels process 16 columns with ``vl = 16`` at SEW 8
and LMUL 1/2, which needs VLMAX(e8, mf2) = VLEN / 16 >= 16, i.e. VLEN >= 256; at VLEN 128
the intrinsics silently clamp vl to 8 and half the columns are never computed, so they are
not run there (their generic twins are).  ``ggml_gemv/gemm_q4_0_8x8_q8_0`` check
``__riscv_vlenb() >= QK4_0`` themselves and call their generic twin at VLEN 128.

Bound (one rule, the constants per kernel derived from its arithmetic, as in
cases/test_quant_dot.py): every kernel forms exact integer sums of ``q_w * q_a`` (times integer
sub-block scales; widening multiplies, int16 accumulators whose range the types bound, int32
sums) and floating-point error enters where those sums are converted to fp32, multiplied by
the fp16 / fp32 scales and accumulated.  If every elementwise product passes through at most
``K = a + b * n_blocks`` fp32 roundings on its way to the result, then (Higham ch. 3)::

    |got - exact| <= gamma(K) * sum_i |w_i a_i|  +  2^-149 * (sum_i |int_i| + K)  +  oracle

with the magnitude taken part by part (main and minimums), the second term for scale products
that underflow into fp32's subnormals (q8_K's fp32 ``d``), and the float64 oracle's own
``2 k 2^-53 sum|w_i a_i|``.  Each table entry names its ``(a, b)`` for the RVV entry point and
for the generic twin, and why.

Exact by construction (the parity tests): every fp16 / fp32 scale of the weights is ``+-2^e``,
of an activation row ``+-2^e'``, and the quants are bounded so that ``sum |w_i a_i| <= 2^24``
units of ``2^(e + e')``: every partial sum any kernel forms is an fp32 number, so the repacked
kernels, the un-repacked ``vec_dot`` path and the oracle must agree bit for bit.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from hypothesis import strategies as st

from cases import coverage
from cases import loops as L
from cases import quant_strategies as QS
from cases.strategies import KernelSpec
from harness.check.compare import assert_bitwise_equal, assert_within_bound
from harness.core.config import ISA_BUILDS, VLENS, cache_dir, locked
from harness.ggml import csource, cwalk
from harness.ggml.tree import Tree, type_name
from harness.plugin.targets import session
from oracles import quants as Q
from oracles import repack as RP
from oracles.bounds import gamma

# ------------------------------------------------------------------ the build's own view


@dataclass(frozen=True)
class BuildInfo:
    """What one kernel server reports about repacking (``repack_info``)."""

    types: dict[str, int]  # ggml type name -> id
    layouts: dict[str, tuple[int, int, int, int]]  # layout -> (type id, INTER_SIZE, NB_COLS, sizeof block)
    quantize_mats: frozenset[str]  # "q8_0_4x1", ...
    buft: str  # the CPU device's extra buffer type called CPU_REPACK, or "none"


def _parse_info(message: str) -> BuildInfo:
    types, layouts, qm, buft = {}, {}, set(), "none"
    for line in message.split():
        key, value = line.split("=", 1)
        if key.startswith("type."):
            types[key[5:]] = int(value)
        elif key.startswith("layout."):
            layouts[key[7:]] = tuple(int(v) for v in value.split(","))
        elif key.startswith("quantize_mat."):
            qm.add(key[len("quantize_mat."):])
        elif key == "buft":
            buft = value
    return BuildInfo(types, layouts, frozenset(qm), buft)


_INFO: dict[str, BuildInfo] = {}  # by kernel server binary


def build_info(target) -> BuildInfo:
    key = str(target.server().build.server)
    if key not in _INFO:
        _INFO[key] = _parse_info(target.call("repack_info").message)
    return _INFO[key]


def type_id(target, name: str) -> int:
    types = build_info(target).types
    if name not in types:
        raise AssertionError(f"the tree under test has no ggml type {name!r}")
    return types[name]


def assert_bytes_equal(got: np.ndarray, expected: np.ndarray, *, name: str, context: str) -> None:
    """Byte arrays equal, reported element by element (as uint16: harness.check.compare's bitwise
    comparison works on 2-, 4- and 8-byte elements); byte offsets are the indices."""
    assert_bitwise_equal(np.asarray(got, np.uint8).astype(np.uint16), np.asarray(expected, np.uint8).astype(np.uint16),
                         name=name, context=context)


def assert_matrix_within(got: np.ndarray, expected: np.ndarray, bound: np.ndarray, *, name: str, context: str,
                         derivation: str) -> None:
    """Every element within its bound: the element with the largest error / bound is checked (and
    its ratio recorded) by harness.check.compare.assert_within_bound; its index is in the name."""
    err = np.abs(got.astype(np.float64) - expected)
    ratio = np.where(bound > 0, err / np.where(bound > 0, bound, 1), np.where(err > 0, np.inf, 0))
    ratio = np.where(np.isnan(ratio), np.inf, ratio)
    worst = np.unravel_index(int(np.argmax(ratio)), ratio.shape)
    assert_within_bound(float(got[worst]), float(expected[worst]), float(bound[worst]),
                        name=f"{name}[{', '.join(map(str, worst))}]", context=context, derivation=derivation)


def notes(message: str) -> dict[str, str]:
    """A response's ``key=value`` lines as a dict."""
    return dict(line.split("=", 1) for line in message.splitlines() if "=" in line)


# ------------------------------------------------------------------ the table


@dataclass(frozen=True)
class Depth:
    """``K = a + b * n_blocks``: the most fp32 roundings any elementwise product passes through."""

    a: int
    b: int
    derivation: str

    def k(self, n_blocks: int) -> int:
        return self.a + self.b * n_blocks


KINDS = ("gemv", "gemm")
IMPLS = ("rvv", "generic")


@dataclass(frozen=True, repr=False)
class RepackKernel(KernelSpec):
    """One interleaved layout of the tree and the GEMV / GEMM kernels that read it."""

    name: str  # the layout (oracles.repack.LAYOUTS) and test id
    rvv: Depth  # the entry point ggml calls (RVV body, or what it falls back to)
    generic: Depth  # the *_generic twin
    zvfh_only: bool  # compiled only with __riscv_zvfh (repack.h, repack.cpp)
    rvv_from: int  # smallest VLEN at which the entry point computes every column (see module doc)
    max_int: int  # largest |integer part| of w_i per unit of |q_a| (main + minimum), for exactness

    @property
    def layout(self) -> RP.Layout:
        return RP.layout(self.name)

    def entry(self, kind: str, impl: str = "rvv") -> str:
        lay = self.layout
        fn = f"ggml_{kind}_{lay.weight}_{lay.ncols}x{lay.blocklen}_{lay.activation}"
        return fn if impl == "rvv" else f"{fn}_generic"

    def depth(self, impl: str) -> Depth:
        return self.rvv if impl == "rvv" else self.generic

    @property
    def block(self) -> str:
        """The interleaved block struct of repack.h (``block_q4_0x16``, ``block_q4_Kx16`` ...)."""
        return f"block_{self.layout.weight}x{self.layout.ncols}"

    @property
    def quantize_mat(self) -> str:
        """The activation quantizer of its GEMM (``ggml_quantize_mat_q8_0_4x1`` ...)."""
        lay = self.layout
        return f"ggml_quantize_mat_{lay.activation}_4x{lay.activation_blocklen}"

    @property
    def requires(self) -> tuple[str, ...]:
        """What the tree must have for this layout's tests (harness/plugin/ skips them as "not
        in this tree" otherwise): the weight and activation types, the interleaved block, the GEMV
        / GEMM entry points and the GEMM's activation quantizer."""
        lay = self.layout
        return (f"GGML_TYPE_{lay.weight.upper()}", f"GGML_TYPE_{lay.activation.upper()}", self.block,
                self.entry("gemv"), self.entry("gemm"), self.quantize_mat)

    def bound(self, impl: str, n_blocks: int, p: RP.Products) -> np.ndarray:
        k = self.depth(impl).k(n_blocks)
        n = n_blocks * Q.block_size(self.layout.weight)
        return gamma(k) * p.magnitude + 2.0 ** -149 * (p.int_magnitude + k) + RP.oracle_error(n, p.magnitude)

    def describe_bound(self, impl: str, n_blocks: int) -> str:
        d = self.depth(impl)
        return (f"gamma(K) * sum|w_i a_i| + 2^-149 * (sum|int_i| + K) + oracle, K = {d.a} + {d.b} * {n_blocks} "
                f"blocks = {d.k(n_blocks)}: {d.derivation}")

    def not_compiled(self, target) -> str | None:
        """Why the layout and its kernels are not in ``target``'s build (None: they are)."""
        if self.zvfh_only and not target.features.get("zvfh"):
            return (f"{self.name}: the layout and its kernels are compiled only with zvfh "
                    f"(#if defined __riscv_zvfh in repack.h / repack.cpp); build {target.isa.name} has none")
        return None

    def unavailable(self, target, impl: str) -> str | None:
        """Why this kernel cannot run on ``target`` (None: it can)."""
        if reason := self.not_compiled(target):
            return reason
        if impl == "rvv" and target.vlen < self.rvv_from:
            return (f"{self.entry('gemv')} / gemm need VLEN >= {self.rvv_from}: vl = 16 at SEW 8, LMUL 1/2 exceeds "
                    f"VLMAX = VLEN/16 = {target.vlen // 16} (columns 8-15 are never computed); ggml selects "
                    "them only at VLEN 256; their generic twins run here")
        return None


_ONE_FMA = "per block one vfmacc of float(sumi) (exact: |sumi| < 2^24) by the fp16 x fp16 scale product (exact, vfwmul)"
_GENERIC_32 = "per byte pair sumi * d_w (rounded) * d_a (rounded) += (rounded)"

KERNELS = [
    RepackKernel("q4_0_16x1", Depth(0, 1, _ONE_FMA), Depth(2, 16, f"{_GENERIC_32}: 16 terms per block"),
                 True, 256, 8),
    RepackKernel("q8_0_16x1", Depth(0, 1, _ONE_FMA), Depth(2, 32, "per quant sumi * d_w * d_a += : 32 terms per block"),
                 True, 256, 128),
    RepackKernel("iq4_nl_16x1", Depth(0, 1, _ONE_FMA), Depth(2, 16, f"{_GENERIC_32}: 16 terms per block"),
                 True, 256, 127),
    RepackKernel("q4_K_16x1", Depth(2, 3, "per block the scale products dmin * d_a and d_w * d_a (1), two "
                                          "min corrections (product, subtraction) and one vfmacc of float(sumi) "
                                          "(|sumi| may pass 2^24: 1): 3 accumulations per block, 2 roundings before"),
                 Depth(3, 128, "main: 128 terms sumi * d * d_a per block (2 products, 1 addition); mins: 8 terms "
                               "per block; one final subtraction"),
                 True, 256, 63 * 15 + 63),
    RepackKernel("q2_K_16x1", Depth(2, 17, "per block 16 min corrections float(bsum * m) * (dmin * d_a) (2 roundings "
                                           "each, subtracted) and one float(isum) * (d * d_a) added: 17 "
                                           "accumulations per block; |isum| < 2^21 converts exactly"),
                 Depth(3, 1, "per block isum * (d_a * d) - summs * (d_a * dmin): 2 scale products, 2 products, one "
                             "subtraction, one accumulation"),
                 True, 256, 15 * 3 + 15),
    RepackKernel("q4_0_8x8", Depth(2, 2, "RVV: per block float(sumi) * d_a (rounded) then vfmacc by d_w: 1 + nb; "
                                         "at VLEN 128 the entry calls its generic twin: 2 + 2 nb"),
                 Depth(2, 2, "per 8-byte chunk sumi * d_w * d_a += : 2 terms per block, 2 roundings before"),
                 False, 128, 8),
]
BY_NAME = {k.name: k for k in KERNELS}
IDS = [k.name for k in KERNELS]


@dataclass(frozen=True, repr=False)
class QuantizeMat(KernelSpec):
    """One activation quantizer of the repacked GEMMs: ``ggml_quantize_mat_<name>`` writes 4 rows
    of ``act`` blocks interleaved ``inter`` bytes at a time."""

    name: str  # "q8_0_4x1" (test id)
    act: str  # the activation type
    inter: int  # INTER_SIZE
    zvfh_only: bool  # declared only with __riscv_zvfh (repack.h)

    @property
    def function(self) -> str:
        return f"ggml_quantize_mat_{self.name}"

    @property
    def requires(self) -> tuple[str, ...]:
        return (f"GGML_TYPE_{self.act.upper()}", self.function)


QUANTIZE_MATS = [QuantizeMat("q8_0_4x1", "q8_0", 1, True), QuantizeMat("q8_0_4x8", "q8_0", 8, False),
                 QuantizeMat("q8_K_4x1", "q8_K", 1, True)]

#: Weight types the selection sweep asks about: the table's, and types other architectures
#: repack (q5_K, q6_K, mxfp4, q1_0, q4_1 never) that must stay un-repacked on RISC-V; a tree's
#: sweep (:func:`sweep_types`) also has the types its selection names and drops those it lacks.
SWEEP_TYPES = ("q4_0", "q8_0", "iq4_nl", "q4_K", "q2_K", "q4_1", "q5_K", "q6_K", "mxfp4", "q1_0")
#: Row counts of the sweep: multiples of 16 and of 8, and neither.
SWEEP_ROWS = (1, 8, 15, 16, 17, 24, 32, 40, 48, 64)

# ------------------------------------------------------------------ strategies


#: Small block counts along K the strategies draw (shrinking goes to the first).
SMALL_BLOCKS = (1, 7)
#: k of real models' weight matrices (hidden 4096, FFN 5632 and 14336): 128 / 176 / 448 blocks of
#: 32, 16 / 22 / 56 super-blocks of 256 per row.  Long k is cheap with few columns and rows.
REAL_K = (4096, 5632, 14336)
#: Column tiles (interleaves) and GEMM row groups the direct-call strategy draws at small k.
GEMX_TILES = (1, 3)
GEMM_GROUPS = (1, 3)
#: Weight-row interleaves, activation rows, threads and planes of the mul_mat strategy.
MUL_MAT_TILES = (1, 4)
MUL_MAT_ROWS = (*range(1, 10), 12, 13)
MUL_MAT_THREADS = (1, 4)
MUL_MAT_PLANES = (1, 2)


def real_blocks(block: int) -> tuple[int, ...]:
    """Blocks of ``block`` elements per row of the real-model k (``REAL_K``)."""
    return tuple(k // block for k in REAL_K)


def block_counts(block: int | None = None) -> st.SearchStrategy[int]:
    """Blocks along K: 1 (shrinking goes there), 2, 3, odd / even counts up to 7, and (given the
    block size) now and then the block count of a real model's row (``REAL_K``)."""
    small = st.one_of(st.integers(1, 3), st.sampled_from([4, 5, 7]))
    return small if block is None else st.one_of(small, st.sampled_from(real_blocks(block)))


@dataclass(frozen=True)
class GemxCase:
    """Weights ``(nc, n_blocks, block)`` and activation rows ``(nr, n_blocks, block)``, raw."""

    kernel: RepackKernel
    kind: str
    weights: np.ndarray
    acts: np.ndarray

    @property
    def nc(self) -> int:
        return self.weights.shape[0]

    @property
    def n_blocks(self) -> int:
        return self.weights.shape[1]

    @property
    def nr(self) -> int:
        return self.acts.shape[0]

    @property
    def k(self) -> int:
        return self.n_blocks * Q.block_size(self.kernel.layout.weight)

    def __repr__(self) -> str:
        return f"GemxCase({self.kernel.name} {self.kind}: nr={self.nr}, nc={self.nc}, n_blocks={self.n_blocks})"

    def _repr_pretty_(self, p, cycle) -> None:  # Hypothesis's printer of failing examples
        p.text(repr(self))


def weight_matrix(name: str, rows: int, n_blocks: int, recipe: QS.RowRecipe) -> np.ndarray:
    """``rows`` weight rows of ``name`` from one recipe, as ``(rows, n_blocks, block_bytes)``."""
    return QS.weight_row(name, rows * n_blocks, recipe).reshape(rows, n_blocks, -1)


@st.composite
def activation_rows(draw: st.DrawFn, name: str, rows: int, n_blocks: int) -> np.ndarray:
    """``rows`` raw activation rows of ``name`` (consistent q8_K bsums): drawn scale classes and quant mode."""
    classes = draw(st.lists(st.sampled_from(QS.SCALE_CLASSES), min_size=1, max_size=3, unique=True), label="a_scales")
    qs_mode = draw(st.sampled_from(QS.QS_MODES), label="a_qs")
    seed = draw(st.integers(0, 2**32 - 1), label="a_seed")
    return np.stack([QS.activation_row(name, n_blocks, seed + r, classes, qs_mode) for r in range(rows)])


@st.composite
def gemx_cases(draw: st.DrawFn, kernel: RepackKernel, kind: str) -> GemxCase:
    """Column counts 1-3 interleaves (16 / 32 / 48 or 8 / 16 / 24), 1-7 blocks or a real model's
    count (then one interleave and one row group: long k is what is tested, and it stays cheap),
    GEMV 1-5 rows or GEMM 4 / 8 / 12 rows; weights from raw blocks with edge encodings,
    activations raw."""
    lay = kernel.layout
    nb = draw(block_counts(Q.block_size(lay.weight)), label="n_blocks")
    small = nb <= SMALL_BLOCKS[1]
    nc = lay.ncols * draw(st.integers(GEMX_TILES[0], GEMX_TILES[1] if small else 1), label="interleaves")
    nr = (draw(st.integers(1, 5 if small else 1), label="rows") if kind == "gemv"
          else 4 * draw(st.integers(GEMM_GROUPS[0], GEMM_GROUPS[1] if small else 1), label="row_groups"))
    w = weight_matrix(lay.weight, nc, nb, draw(QS.recipes(), label="w_recipe"))
    a = draw(activation_rows(lay.activation, nr, nb), label="acts")
    return GemxCase(kernel, kind, w, a)


@dataclass(frozen=True)
class GemxShape:
    """The shape of one fixed direct call: activation rows, column interleaves, blocks."""

    nr: int
    interleaves: int
    n_blocks: int


#: Columns one kernel call gets in mul_mat of a 4096-row matrix on 4 threads (chunks of 256 rows).
REAL_COLUMNS = 256


def gemx_shapes(kernel: RepackKernel, kind: str) -> list[GemxShape]:
    """The shapes every run checks for one kernel, smallest first: every loop level crossed
    three times (3 column tiles, 3 GEMM row groups, 3 blocks); the longest real k (448 blocks
    of 32 or 56 super-blocks) on one tile and one row group; as many columns as one call gets
    in a real model's mul_mat (``REAL_COLUMNS``: 16 or 32 tiles), on 2 blocks.  The size table reads these."""
    gemm = kind == "gemm"
    one = 4 if gemm else 1
    return [GemxShape(4 * GEMM_GROUPS[1] if gemm else 2, GEMX_TILES[1], 3),
            GemxShape(one, 1, real_blocks(Q.block_size(kernel.layout.weight))[-1]),
            GemxShape(one, REAL_COLUMNS // kernel.layout.ncols, 2)]


def gemx_examples(kernel: RepackKernel, kind: str) -> list[GemxCase]:
    """:func:`gemx_shapes` with seeded data: ordinary weights (normal scales, random payload and
    sub-scales) and activations (normal scales, random quants)."""
    lay = kernel.layout
    out = []
    for i, s in enumerate(gemx_shapes(kernel, kind)):
        recipe = QS.RowRecipe(i, ("normal",), "random", "random")
        w = weight_matrix(lay.weight, s.interleaves * lay.ncols, s.n_blocks, recipe)
        a = np.stack([QS.activation_row(lay.activation, s.n_blocks, 1000 * i + r, ("normal",), "random")
                      for r in range(s.nr)])
        out.append(GemxCase(kernel, kind, w, a))
    return out


@dataclass(frozen=True)
class MulMatCase:
    """mul_mat(W, X): weights ``(m, n_blocks, block)`` raw, X ``(batch, n, k)`` float32 whose every
    block quantizes without rounding (``acts``: the quantized rows, ``(batch * n, n_blocks, block)``)."""

    kernel: RepackKernel
    weights: np.ndarray
    x: np.ndarray
    acts: np.ndarray
    threads: int
    units: np.ndarray | None  # exact cases: per activation row the finest bit of any product; None: random

    @property
    def exact(self) -> bool:
        return self.units is not None

    @property
    def m(self) -> int:
        return self.weights.shape[0]

    @property
    def n_blocks(self) -> int:
        return self.weights.shape[1]

    @property
    def batch(self) -> int:
        return self.x.shape[0]

    @property
    def n(self) -> int:
        return self.x.shape[1]

    @property
    def k(self) -> int:
        return self.x.shape[2]

    def __repr__(self) -> str:
        return (f"MulMatCase({self.kernel.name}: m={self.m}, n={self.n}, batch={self.batch}, n_blocks={self.n_blocks}, "
                f"threads={self.threads}{', exact' if self.exact else ''})")

    def _repr_pretty_(self, p, cycle) -> None:  # Hypothesis's printer of failing examples
        p.text(repr(self))


def quantizable_rows(act: str, rows: int, n_blocks: int, seed: int, max_q: int, exps: np.ndarray) -> np.ndarray:
    """Float rows ``(rows, n_blocks * block)`` that ggml's q8 quantizers store without rounding:
    per block integers in [-max_q, max_q] with one +-127 (the block maximum, so the scale is
    exactly 2^e), times ``2^exps[row, block]``."""
    blk = Q.block_size(act)
    rng = np.random.default_rng(seed)
    q = rng.integers(-max_q, max_q + 1, (rows, n_blocks, blk))
    pos = rng.integers(0, blk, (rows, n_blocks))
    r, b = np.meshgrid(np.arange(rows), np.arange(n_blocks), indexing="ij")
    q[r, b, pos] = np.where(rng.random((rows, n_blocks)) < 0.5, -127, 127)
    return (q * np.exp2(exps)[:, :, None]).reshape(rows, -1).astype(np.float32)


def quantize_rows(act: str, x: np.ndarray) -> np.ndarray:
    """Rows of floats -> their q8 rows (the reference quantizer), ``(rows, n_blocks, block_bytes)``;
    asserts the premise that they quantize without rounding."""
    rows = np.stack([QS.quantized_activation_row(act, r) for r in x])
    back = np.stack([Q.dequantize(act, r) for r in rows])
    if not np.array_equal(back, x.astype(np.float64)):
        raise AssertionError(f"quantizable_rows premise broken: {act} rows do not quantize exactly")
    return rows


def _pow2_scales(name: str, w: np.ndarray, e: int, rng: np.random.Generator) -> np.ndarray:
    """``w`` with every fp16 scale set to +-2^e (random signs)."""
    flat = w.reshape(-1, w.shape[-1]).copy()
    mag = np.float16(2.0 ** e).view(np.uint16)
    for off in QS.LAYOUTS[name].fp16:
        signs = np.where(rng.random(len(flat)) < 0.5, 0, 0x8000).astype(np.uint16)
        flat[:, off:off + 2] = (mag | signs).reshape(-1, 1).view(np.uint8)
    return flat.reshape(w.shape)


def exact_mul_mat_case(kernel: RepackKernel, m: int, n: int, batch: int, threads: int, n_blocks: int, seed: int,
                       payload: str = "random", subscales: str = "random") -> MulMatCase:
    """Scales +-2^e (weights, one e) and +-2^e' (one per activation row), quants bounded so that
    every result is exact in fp32 (module doc)."""
    lay = kernel.layout
    rng = np.random.default_rng(seed)
    rows, k = batch * n, n_blocks * Q.block_size(lay.weight)
    e = int(rng.integers(-4, 5))
    w = weight_matrix(lay.weight, m, n_blocks, QS.RowRecipe(seed, ("pow2",), payload, subscales))
    w = _pow2_scales(lay.weight, w, e, rng)
    n_act = k // Q.block_size(lay.activation)
    max_q = int(np.clip((2 ** 24 // kernel.max_int - 127 * n_act) // max(1, k - n_act), 0, 127))
    e_row = rng.integers(-6, 3, rows)
    x = quantizable_rows(lay.activation, rows, n_act, seed + 1, max_q, np.repeat(e_row[:, None], n_act, axis=1))
    return MulMatCase(kernel, w, x.reshape(batch, n, k), quantize_rows(lay.activation, x), threads,
                      np.exp2(e + e_row.astype(np.float64)))


def random_mul_mat_case(kernel: RepackKernel, m: int, n: int, batch: int, threads: int, n_blocks: int, seed: int,
                        recipe: QS.RowRecipe) -> MulMatCase:
    """Weights with edge encodings; activations with one exponent per block in [-8, 4]."""
    lay = kernel.layout
    rows, k = batch * n, n_blocks * Q.block_size(lay.weight)
    n_act = k // Q.block_size(lay.activation)
    exps = np.random.default_rng(seed).integers(-8, 5, (rows, n_act))
    x = quantizable_rows(lay.activation, rows, n_act, seed, 127, exps)
    return MulMatCase(kernel, weight_matrix(lay.weight, m, n_blocks, recipe), x.reshape(batch, n, k),
                      quantize_rows(lay.activation, x), threads, None)


@st.composite
def mul_mat_cases(draw: st.DrawFn, kernel: RepackKernel, *, exact: bool) -> MulMatCase:
    """Weight rows 16-64 (one to four interleaves), activation rows 1-9 and 12, 13 (not multiples
    of 4: the leftover rows go through GEMV), 1-7 blocks or a real model's count (then 16 weight
    rows), 1-2 planes, 1-4 threads; :func:`exact_mul_mat_case` or :func:`random_mul_mat_case`."""
    nb = draw(block_counts(Q.block_size(kernel.layout.weight)), label="n_blocks")
    m = 16 * draw(st.integers(MUL_MAT_TILES[0], MUL_MAT_TILES[1] if nb <= SMALL_BLOCKS[1] else 1), label="interleaves")
    n = draw(st.one_of(st.integers(1, 9), st.sampled_from(MUL_MAT_ROWS[9:])), label="n")
    batch = draw(st.integers(*MUL_MAT_PLANES), label="batch")
    threads = draw(st.one_of(st.just(1), st.integers(2, MUL_MAT_THREADS[1])), label="threads")
    seed = draw(st.integers(0, 2**32 - 1), label="seed")
    if exact:
        return exact_mul_mat_case(kernel, m, n, batch, threads, nb, seed, draw(st.sampled_from(QS.PAYLOAD_MODES),
                                  label="payload"), draw(st.sampled_from(QS.SUBSCALE_MODES), label="subscales"))
    return random_mul_mat_case(kernel, m, n, batch, threads, nb, seed, draw(QS.recipes(), label="w_recipe"))


@dataclass(frozen=True)
class MulMatShape:
    """The shape of one fixed mul_mat: weight rows, activation rows, planes, threads, blocks."""

    m: int
    n: int
    batch: int
    threads: int
    n_blocks: int


def mul_mat_shapes(kernel: RepackKernel) -> list[MulMatShape]:
    """The mul_mat shapes every run checks, smallest first:

    * 48 weight rows (3 column tiles in one chunk), 11 activation rows (2 GEMM row groups and 3
      leftover rows through GEMV and quantize_row), 3 blocks;
    * 272 weight rows on 2 threads and 2 planes: 8 chunks of 34 rows per plane (two tiles and a
      remainder), each boundary rounded up to the next tile (chunks of 48 and 32 rows,
      :func:`mul_mat_chunks`), which no 16-64-row matrix makes (their chunks are one tile or
      the whole matrix);
    * one tile, 5 activation rows, the longest real k (448 blocks of 32 or 56 super-blocks);
    * a real model's 4096 weight rows on 4 threads (16 chunks of 256 rows per plane), one block."""
    return [MulMatShape(48, 11, 1, 1, 3), MulMatShape(272, 5, 2, 2, 2),
            MulMatShape(16, 5, 1, 2, real_blocks(Q.block_size(kernel.layout.weight))[-1]),
            MulMatShape(4096, 5, 1, 4, 1)]


def mul_mat_examples(kernel: RepackKernel, *, exact: bool) -> list[MulMatCase]:
    """:func:`mul_mat_shapes` with seeded data (exact by construction, or ordinary weights)."""
    out = []
    for i, s in enumerate(mul_mat_shapes(kernel)):
        if exact:
            out.append(exact_mul_mat_case(kernel, s.m, s.n, s.batch, s.threads, s.n_blocks, seed=i))
        else:
            out.append(random_mul_mat_case(kernel, s.m, s.n, s.batch, s.threads, s.n_blocks, seed=i,
                                           recipe=QS.RowRecipe(i, ("normal",), "random", "random")))
    return out


def mul_mat_chunks(m: int, threads: int, ncols: int = 16) -> tuple[int, list[tuple[int, int]]]:
    """How ``forward_mul_mat`` (repack.cpp) splits ``m`` weight rows of one plane (no NUMA): the
    rows per chunk ``dr0`` (about 4 chunks per thread, at least ``ncols`` rows each) and the
    chunks' ranges, boundaries rounded up to a multiple of ``ncols``, empty chunks dropped."""
    nth4 = threads * 4
    size = -(-m // nth4)
    nchunk = -(-m // size)
    if nchunk > 0 and m // nchunk < ncols and m >= ncols:
        nchunk = -(-m // ncols)
    dr = -(-m // nchunk)
    if threads == 1 or (nchunk < threads and -(-m // threads) >= ncols):
        nchunk = threads
        dr = -(-m // nchunk)
    nchunk = min(nchunk, -(-m // ncols))
    up = lambda v: -(-v // ncols) * ncols  # noqa: E731
    out = []
    for i in range(nchunk):
        start, end = up(dr * i), min(up(min(dr * i + dr, m)), m)
        if start < end:
            out.append((start, end))
    return dr, out


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
            uncovered(lay, where, f"{said}: add it to KERNELS (cases/repack_cases.py) and its layout to oracles/repack.py")
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
                              "KERNELS (cases/repack_cases.py) and oracles/repack.py")
            elif m := _QUANTIZE_MAT_SPEC.fullmatch(name):
                qm = f"{type_name('GGML_TYPE_' + m.group(2))}_4x{m.group(1)}"
                if _riscv_only(fn) and qm not in known_qm:
                    uncovered(f"ggml_quantize_mat_{qm}", fn.where(), "compiled only for RISC-V: add it to QUANTIZE_MATS "
                              "(cases/repack_cases.py)")
            elif rel.startswith("arch/") and "__riscv_" in fn.body and not name.endswith("_generic"):
                rvv_bodies.add(name)
                if _GEMX_FN.fullmatch(name) and name not in known_fns:
                    uncovered(name, fn.where(), "an RVV GEMV / GEMM that cases/repack_cases.py does not know: add its "
                              "layout to KERNELS (with its bound) and oracles/repack.py")
                elif (m := _QUANTIZE_MAT_FN.fullmatch(name)) and m.group(1) not in known_qm:
                    uncovered(name, fn.where(), "an RVV activation quantizer of the repacked GEMMs: add it to "
                              "QUANTIZE_MATS (cases/repack_cases.py)")
    for k in KERNELS:
        if missing := inv.missing(k.requires):
            out.not_in_tree.append(f"{k.name} (the tree lacks {', '.join(missing)})")
        elif lacking := [f for f in (k.entry("gemv"), k.entry("gemm")) if f not in rvv_bodies]:
            out.not_in_tree.append(f"{k.name} (no RVV body for {', '.join(lacking)} in arch/riscv/repack.cpp)")
    for q in QUANTIZE_MATS:
        if missing := inv.missing(q.requires):
            out.not_in_tree.append(f"{q.function} (the tree lacks {', '.join(missing)})")
    return out


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


def expected_quantizers(kernel: RepackKernel, layout: str | None, n: int) -> str:
    """The activation quantizers of the repacked path: ggml_quantize_mat_<q8>_4x<blocklen> for the
    groups of 4 rows, the type's quantize_row_<q8> (from_float) for the leftovers."""
    lay = kernel.layout
    if layout is None:
        return f"quantize_row_{lay.activation}"
    parts = ([f"ggml_quantize_mat_{lay.activation}_4x{lay.activation_blocklen}"] if n >= 4 else [])
    parts += [f"quantize_row_{lay.activation}"] if n % 4 else []
    return " + ".join(sorted(parts))


# ------------------------------------------------------------------ the selection table


def _table_dir() -> Path:
    src = session().source
    return cache_dir() / "reports" / "repack_selection" / f"{src.commit}-{src.content_hash()[:12]}"


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


def main(argv: list[str] | None = None) -> int:
    """Print the selection table of one recorded tree: the one whose directory name starts with
    the argument (a commit prefix), by default the pinned tree's, else the newest recorded."""
    from harness.ggml.source import PINNED_COMMIT

    argv = sys.argv[1:] if argv is None else argv
    root = cache_dir() / "reports" / "repack_selection"
    runs = sorted(root.glob("*/"), key=lambda p: p.stat().st_mtime) if root.exists() else []
    prefix = argv[0] if argv else PINNED_COMMIT
    chosen = [r for r in runs if r.name.startswith(prefix)] or ([] if argv else runs)
    if not chosen:
        print(f"no selection recorded{' for ' + prefix if argv else ''} yet: run "
              "cases/test_repack_layout.py::test_selection", file=sys.stderr)
        return 1
    print(f"ggml_repack_get_optimal_repack_type on RISC-V ({chosen[-1].name}); '-': not repacked\n")
    print(render(chosen[-1]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Cost cases of the repacked GEMV / GEMM (cases/repack_kernels.py): every layout of ``KERNELS``, GEMV
and GEMM, the entry point and its ``*_generic`` twin, called directly with the request that
cases/test_repack_gemm.py's ``run_gemx`` builds (:func:`call_gemx` repeats its few lines: no module
imports a test module), with k = 4096 (a 7-8B model's hidden size) along every row:

* GEMV: a 4096 x 4096 weight (the model's square projection) and 1 activation row (decode);
* GEMM: 1024 weight rows and 8 activation rows (two of the 4-row groups mul_mat hands it in a
  prompt).  The whole 4096 x 4096 weight is too long under Spike: 85 s per measurement for
  ggml_gemm_q4_0_16x1_q8_0_generic at VLEN 128 with 8 rows, 89 s for the q4_K twin with 4
  rows; on a quarter of it the slowest case (the q4_K twin at VLEN 128) takes 34 s of Spike's
  CPU time.  The column-tile loop makes a quarter of its trips, each the same work; every other
  loop runs as on the whole weight.

Units: weight elements x activation rows (MAC).

Plus the GEMM's activation quantizers (``QUANTIZE_MATS``: 4 rows of k = 4096, Gaussian), entry point
only (the kernel server calls no twin of them), with the request of cases/test_repack_layout.py's
``test_quantize_mat``.  A case runs where its differential test does: the 16x1 RVV
bodies from VLEN 256, the zvfh-only layouts and quantizers in zvfh builds (else skipped, saying why).
"""

from __future__ import annotations

import numpy as np
import pytest

from cases import quant_blocks as QB
from cases import quant_variants as V
from cases import repack_kernels as K
from cases import repack_strategies as RS
from costs.suite import CostCase
from harness.emulators.protocol import In, Out
from oracles import quants as Q
from oracles import repack as RP

#: k: a 7-8B model's hidden size, the row length of its square projections.
K_LEN = 4096
#: Per kind, (weight rows = output columns, activation rows): GEMV a 4096 x 4096 weight and one
#: token; GEMM two 4-row groups on a quarter of it (module docstring).
SHAPES = {"gemv": (4096, 1), "gemm": (1024, 8)}
SEED = 4096


def _gemx_case(kernel: K.RepackKernel, kind: str) -> RS.GemxCase:
    lay = kernel.layout
    nc, nr = SHAPES[kind]
    nb = K_LEN // Q.block_size(lay.weight)
    w = RS.weight_matrix(lay.weight, nc, nb, QB.RowRecipe(SEED, ("normal",), "random", "random"))
    a = np.stack([QB.activation_row(lay.activation, nb, SEED + r, ("normal",), "random") for r in range(nr)])
    return RS.GemxCase(kernel, kind, w, a)


def call_gemx(target, case: RS.GemxCase, impl: str) -> None:
    """The kernel on ``case`` as cases/test_repack_gemm.py's ``run_gemx`` calls it: weights packed by the
    NumPy layout, activations as rows (GEMV) or 4-row interleaved blocks (GEMM)."""
    lay = case.kernel.layout
    vx = RP.pack_matrix(lay, case.weights)
    vy = case.acts if case.kind == "gemv" else RP.pack_activations(lay.activation, case.acts, lay.activation_blocklen)
    ip = [V.type_id(target, lay.weight), lay.blocklen, lay.ncols, K.IMPLS.index(impl), K.KINDS.index(case.kind),
          case.k, case.nr, case.nc]
    target.call("repack_gemx", ip, [], [In(vx), In(vy), Out(4 * case.nr * case.nc)])


def _gemx(kernel: K.RepackKernel, kind: str, impl: str) -> CostCase:
    def run(target) -> None:
        if reason := kernel.unavailable(target, impl):
            pytest.skip(reason)
        call_gemx(target, _gemx_case(kernel, kind), impl)

    nc, nr = SHAPES[kind]
    # What the case measures, and all it needs of the tree: the two types, the interleaved block and that
    # function (not the layout's other kernels: a change to them does not reach this one).
    fn = kernel.entry(kind, impl)
    return CostCase("repack", f"{kernel.name}-{kind}", f"{nc}x{K_LEN}x{nr}", impl, "repack_gemx", fn, nc * K_LEN * nr,
                    "MAC", run, entry_points=(fn,), requires=(*kernel.requires[:3], fn))


def _quantize_mat(qm: K.QuantizeMat) -> CostCase:
    def run(target) -> None:
        if qm.name not in K.build_info(target).quantize_mats:
            pytest.skip(f"{qm.function} is compiled only with zvfh (repack.h); build {target.isa.name} has none")
        x = np.stack([QB.activation_floats("gaussian", K_LEN, SEED + r) for r in range(4)])
        target.call("repack_quantize_mat", [V.type_id(target, qm.act), qm.inter, K_LEN], [],
                    [In(x), Out(4 * Q.row_bytes(qm.act, K_LEN))])

    return CostCase("repack", f"quantize_mat_{qm.name}", f"4x{K_LEN}", "rvv", "repack_quantize_mat", qm.function,
                    4 * K_LEN, "element", run, entry_points=(qm.function,), requires=qm.requires, has_twin=False)


CASES = ([_gemx(kernel, kind, impl) for kernel in K.KERNELS for kind in K.KINDS for impl in K.IMPLS]
         + [_quantize_mat(qm) for qm in K.QUANTIZE_MATS])

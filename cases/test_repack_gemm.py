"""Repacked GEMV / GEMM parity: the kernels of arch/riscv/repack.cpp (and their generic twins)
called directly on weights in the NumPy layout, and ggml_mul_mat with its weights in the
CPU_REPACK buffer, against the float64 oracle (oracles/repack.py ``products``) and against the
same mul_mat with un-repacked weights.  Tables, bounds and strategies: cases/repack.py and the modules it names.

* :func:`test_gemx` -- every layout x GEMV / GEMM x {RVV entry point, generic twin}, at every
  VLEN where it can run (:meth:`RepackKernel.unavailable` says where not, and why): drawn
  shapes, then on every run the shapes of ``RS.gemx_shapes`` (3 column tiles x 3 GEMM row groups
  x 3 blocks; the longest real k, 448 blocks or 56 super-blocks; 256 columns, as one call gets
  in a real model's mul_mat).  Drawn: 16 / 32 / 48 (or 8 / 16 / 24) columns, 1-7 blocks along K or a
  real model's count, GEMV 1-5 rows, GEMM 4-12 rows; weights from raw
  blocks with edge encodings (subnormal, zero, largest scales; extreme sub-scales), activations
  raw (+-127 everywhere, subnormal scales...).  Each element within the kernel's derived bound.
* :func:`test_gemx_variant` -- which function the q4_0 8x8 entry points (the only ones that
  dispatch on VLEN) actually ran, from a QEMU trace.
* :func:`test_mul_mat` -- mul_mat where ggml repacks (VLEN 256, zvfh builds): drawn shapes,
  then on every run the shapes of ``RS.mul_mat_shapes`` (2 GEMM row groups and 3 GEMV rows; 8
  threads' chunks of 34 rows rounded to tiles, 2 planes; the longest real k; 4096 rows on 4
  threads).  Drawn:
  16-64 weight rows, 1-13 activation rows (those beyond a multiple of 4 go through GEMV), 1-7
  blocks or a real model's count, 1-2 planes, 1-4 threads; activations whose every block
  quantizes without rounding (so the oracle knows the quantized rows), each element within
  the bound.
* :func:`test_mul_mat_parity` -- the same shapes, exact by construction: the repacked mul_mat,
  the un-repacked mul_mat (``ggml_vec_dot``) and the oracle agree bit for bit.
* :func:`test_mul_mat_path` -- for a few shape classes per type and target, the GEMM / GEMV /
  vec_dot functions and the activation quantizers QEMU saw execute are the ones the selection
  and ``forward_mul_mat_one_chunk`` prescribe (GEMM for the first n - n % 4 rows, GEMV for the
  rest); the values of the same calls are exact.
"""

from __future__ import annotations

import numpy as np
import pytest

from cases import quant_blocks as QB
from cases import quant_variants as V
from cases import repack_kernels as K
from cases import repack_selection as SEL
from cases import repack_strategies as RS
from cases import strategies as S
from harness.check import observe
from harness.check.compare import assert_all_within, assert_bitwise_equal
from harness.emulators.protocol import In, Out
from oracles import quants as Q
from oracles import repack as RP

GEMX = [(k, kind) for k in K.KERNELS for kind in K.KINDS]
GEMX_IDS = [f"{k.name}-{kind}" for k, kind in GEMX]
#: The layouts ggml selects on RISC-V (test_build_info checks the source agrees): the 16x1 ones.
MUL_MAT = [k for k in K.KERNELS if k.layout.ncols == 16]
MUL_MAT_IDS = [k.name for k in MUL_MAT]


def run_gemx(target, case: RS.GemxCase, impl: str) -> np.ndarray:
    """The kernel on ``case``: weights packed by the NumPy layout, activations as rows (GEMV) or
    4-row interleaved blocks (GEMM); returns ``(nr, nc)``."""
    lay = case.kernel.layout
    vx = RP.pack_matrix(lay, case.weights)
    vy = case.acts if case.kind == "gemv" else RP.pack_activations(lay.activation, case.acts, lay.activation_blocklen)
    ip = [V.type_id(target, lay.weight), lay.blocklen, lay.ncols, K.IMPLS.index(impl), K.KINDS.index(case.kind),
          case.k, case.nr, case.nc]
    r = target.call("repack_gemx", ip, [], [In(vx), In(vy), Out(4 * case.nr * case.nc)])
    return r.output(0, np.float32).reshape(case.nr, case.nc)


@pytest.mark.parametrize("impl", K.IMPLS)
@pytest.mark.parametrize("kernel,kind", GEMX, ids=GEMX_IDS)
def test_gemx(kernel: K.RepackKernel, kind: str, impl: str, target, request: pytest.FixtureRequest) -> None:
    """s[r][c] = activation row r . weight row c for every element, within the kernel's bound;
    drawn shapes, then the shapes of ``RS.gemx_shapes`` (every loop crossed three times, the
    longest real k, a real call's 256 columns)."""
    if reason := kernel.unavailable(target, impl):
        pytest.skip(reason)

    def check(case: RS.GemxCase) -> None:
        got = run_gemx(target, case, impl)
        lay = kernel.layout
        p = RP.products(lay.weight, case.weights, lay.activation, case.acts)
        assert_all_within(got, p.value, kernel.bound(impl, case.n_blocks, p), name="s",
                          context=f"{kernel.entry(kind, impl)}, {case!r}, {target.id}",
                          derivation=kernel.describe_bound(impl, case.n_blocks))

    S.explore(request, RS.gemx_cases(kernel, kind), [], check, after=RS.gemx_examples(kernel, kind))


def test_gemx_variant(target) -> None:
    """ggml_gemv/gemm_q4_0_8x8_q8_0 run their RVV body from VLEN 256 (vlenb >= QK4_0) and call
    their generic twin below (and in a build without V, at every VLEN), as the trace of one call shows."""
    kernel = K.BY_NAME["q4_0_8x8"]
    lay = kernel.layout
    rng = np.random.default_rng(3)
    for kind in K.KINDS:
        case = RS.GemxCase(kernel, kind, RS.weight_matrix("q4_0", 8, 1, QB.RowRecipe(1, ("normal",), "random", "random")),
                          np.stack([QB.activation_row("q8_0", 1, int(rng.integers(1 << 30)), ("normal",), "random")
                                    for _ in range(4)]))
        vy = case.acts if kind == "gemv" else RP.pack_activations("q8_0", case.acts, lay.activation_blocklen)
        ip = [V.type_id(target, "q4_0"), lay.blocklen, lay.ncols, 0, K.KINDS.index(kind), case.k, case.nr, case.nc]
        calls = target.trace("repack_gemx", ip, [], [In(RP.pack_matrix(lay, case.weights)), In(vy),
                                                     Out(4 * case.nr * case.nc)]).call
        entry = kernel.entry(kind)
        ran = sorted(c for c in calls if c.startswith(entry))
        expected = [entry] if target.isa.vector and target.vlen >= 256 else [entry, f"{entry}_generic"]
        observe.note("variant", f"{entry}: {' -> '.join(ran)}")
        assert ran == expected, f"ran={ran}, but should be {expected} [{entry} at VLEN {target.vlen}]"


def _selected_or_skip(kernel: K.RepackKernel, target) -> None:
    if SEL.expected_layout(target, kernel.layout.weight, 16) != kernel.name:
        pytest.skip(f"ggml does not repack {kernel.layout.weight} on {target.id} (its selection picks {kernel.name} "
                    "only at VLEN 256 in zvfh builds: test_selection); mul_mat then runs "
                    f"ggml_vec_dot_{kernel.layout.weight}_{kernel.layout.activation} (cases/test_quant_dot.py), and "
                    "the repacked kernels are tested here by direct calls (test_gemx)")


def run_mul_mat(target, case: RS.MulMatCase, placement: int) -> tuple[np.ndarray, str]:
    """mul_mat(W, X) with the weights placed as llama.cpp places them (1) or in the CPU buffer (0):
    ``(batch * n, m)`` and where the weights were."""
    lay = case.kernel.layout
    ip = [V.type_id(target, lay.weight), case.k, case.m, case.n, case.batch, placement, case.threads]
    r = target.call("repack_mul_mat", ip, [], [In(case.weights), In(case.x), Out(4 * case.batch * case.n * case.m)])
    return r.output(0, np.float32).reshape(case.batch * case.n, case.m), K.notes(r.message)["weights"]


@pytest.mark.parametrize("kernel", MUL_MAT, ids=MUL_MAT_IDS)
def test_mul_mat(kernel: K.RepackKernel, target, request: pytest.FixtureRequest) -> None:
    """mul_mat with repacked weights: every element within the RVV kernel's bound of the oracle;
    drawn shapes, then the shapes of ``RS.mul_mat_shapes`` (row groups and leftovers, chunks wider than a tile
    on 2 threads and 2 planes, the longest real k, 4096 rows on 4 threads)."""
    _selected_or_skip(kernel, target)

    def check(case: RS.MulMatCase) -> None:
        got, placed = run_mul_mat(target, case, 1)
        ctx = f"ggml_mul_mat, {case!r}, {target.id}"
        assert placed == "CPU_REPACK", f"weights={placed}, but should be CPU_REPACK [{ctx}]"
        lay = kernel.layout
        p = RP.products(lay.weight, case.weights, lay.activation, case.acts)
        assert_all_within(got, p.value, kernel.bound("rvv", case.n_blocks, p), name="Y", context=ctx,
                          derivation=kernel.describe_bound("rvv", case.n_blocks))

    S.explore(request, RS.mul_mat_cases(kernel, exact=False), [], check, after=RS.mul_mat_examples(kernel, exact=False))


@pytest.mark.parametrize("kernel", MUL_MAT, ids=MUL_MAT_IDS)
def test_mul_mat_parity(kernel: K.RepackKernel, target, request: pytest.FixtureRequest) -> None:
    """Exact by construction: repacked mul_mat = un-repacked mul_mat = oracle, bit for bit; drawn
    shapes, then the shapes of ``RS.mul_mat_shapes``."""
    _selected_or_skip(kernel, target)

    def check(case: RS.MulMatCase) -> None:
        lay = kernel.layout
        exact = RP.products(lay.weight, case.weights, lay.activation, case.acts).value.astype(np.float32)
        for placement, want in ((1, "CPU_REPACK"), (0, "CPU")):
            got, placed = run_mul_mat(target, case, placement)
            ctx = f"ggml_mul_mat with weights in {placed}, {case!r}, {target.id}"
            assert placed == want, f"weights={placed}, but should be {want} [{ctx}]"
            assert_bitwise_equal(got, exact, name="Y", context=ctx)

    S.explore(request, RS.mul_mat_cases(kernel, exact=True), [], check, after=RS.mul_mat_examples(kernel, exact=True))


#: Shape classes of the path probes: (weight rows m, activation rows n, planes, threads).
PROBES = [(32, 1, 1, 1), (16, 6, 1, 2), (48, 4, 2, 3), (24, 5, 1, 1)]


@pytest.mark.parametrize("kernel", MUL_MAT, ids=MUL_MAT_IDS)
def test_mul_mat_path(kernel: K.RepackKernel, target) -> None:
    """The functions QEMU saw mul_mat execute are the ones selection and chunking prescribe: the
    16x1 GEMM for the first n - n % 4 rows and GEMV for the rest with the 4x1 quantizer, or the
    type's vec_dot where ggml does not repack (rows not a multiple of 16, other VLENs / builds).
    Where ggml never repacks only one probe runs (the selection sweep covers the rest)."""
    lay = kernel.layout
    probes = PROBES if SEL.expected_layout(target, lay.weight, 16) else PROBES[1:2]
    rvv_row = V.rvv_quantizer_runs(target, lay.activation)
    for i, (m, n, batch, threads) in enumerate(probes):
        case = RS.exact_mul_mat_case(kernel, m, n, batch, threads, n_blocks=2, seed=i)
        layout = SEL.expected_layout(target, lay.weight, m)
        ip = [V.type_id(target, lay.weight), case.k, m, n, batch, 1, threads]
        bufs = [In(case.weights), In(case.x), Out(4 * batch * n * m)]
        calls = target.trace("repack_mul_mat", ip, [], bufs).call
        ran, quant = SEL.executed_path(calls), SEL.executed_quantizers(calls)
        want, want_quant = SEL.expected_path(kernel, layout, n), SEL.expected_quantizers(kernel, layout, n, rvv_row=rvv_row)
        ctx = f"probe m={m}, n={n}, planes={batch}, threads={threads}, {target.id}"
        observe.note("variant", f"m={m} n={n}: {ran}")
        assert ran == want, f"path={ran!r}, but should be {want!r} [{ctx}]"
        assert quant == want_quant, f"quantizers={quant!r}, but should be {want_quant!r} [{ctx}]"
        got, _ = run_mul_mat(target, case, 1)
        exact = RP.products(lay.weight, case.weights, lay.activation, case.acts).value.astype(np.float32)
        assert_bitwise_equal(got, exact, name="Y", context=f"{ctx}, {case!r}")


# ------------------------------------------------------------------ mixture of experts: mul_mat_id

#: Every-run mul_mat_id shapes (llama.cpp's ffn_*_exps): (weight rows per expert m, experts, used per
#: token, activation rows per token (1: up / gate, shared by the token's experts; n_used: down), tokens,
#: threads, blocks).  Some experts unused (no rows: skipped), a thread whose row range is empty (3
#: threads over two 16-row tiles), every expert used, a real model's k.
MOE_SHAPES = [(32, 8, 2, 1, 3, 2, 2), (32, 4, 2, 2, 5, 3, 1), (16, 4, 4, 4, 2, 1, 3), (16, 4, 2, 1, 2, 2, None)]


def run_mul_mat_id(target, kernel: K.RepackKernel, case: RS.MulMatCase, n_expert: int, ids: np.ndarray,
                   placement: int) -> tuple[np.ndarray, str]:
    """mul_mat_id(W, X, ids) with the experts' weights placed as llama.cpp places them (1) or in the
    CPU buffer (0): ``(tokens, used, m)`` and where the weights were."""
    m, (n_tokens, n_used), x_rows = case.m // n_expert, ids.shape, case.n
    ip = [V.type_id(target, kernel.layout.weight), case.k, m, n_expert, n_used, x_rows, n_tokens, placement,
          case.threads]
    r = target.call("repack_mul_mat_id", ip, [], [In(case.weights), In(case.x), In(ids.astype(np.int32)),
                                                 Out(4 * n_tokens * n_used * m)])
    return r.output(0, np.float32).reshape(n_tokens, n_used, m), K.notes(r.message)["weights"]


@pytest.mark.parametrize("kernel", MUL_MAT, ids=MUL_MAT_IDS)
def test_mul_mat_id_parity(kernel: K.RepackKernel, target) -> None:
    """Mixture-of-experts products, exact by construction: mul_mat_id with the experts' weights where
    llama.cpp puts them (CPU_REPACK, forward_mul_mat_id's GEMV per row, where ggml repacks; the CPU
    buffer and ggml_vec_dot elsewhere), with them in the CPU buffer, and the oracle agree bit for bit:
    Y[t][u] = W[ids[t][u]] . X[t][u % x_rows]."""
    lay = kernel.layout
    for i, (m, n_expert, n_used, x_rows, n_tokens, threads, nb) in enumerate(MOE_SHAPES):
        nb = nb or RS.real_blocks(Q.block_size(lay.weight))[-1]
        case = RS.exact_mul_mat_case(kernel, n_expert * m, x_rows, n_tokens, threads, nb, seed=100 + i)
        rng = np.random.default_rng(i)
        ids = np.stack([rng.permutation(n_expert)[:n_used] for _ in range(n_tokens)])
        p = RP.products(lay.weight, case.weights, lay.activation, case.acts).value.astype(np.float32)
        rows = np.arange(n_tokens)[:, None] * x_rows + np.arange(n_used)[None, :] % x_rows
        want = np.stack([p[rows[t, u], ids[t, u] * m:(ids[t, u] + 1) * m] for t in range(n_tokens)
                         for u in range(n_used)]).reshape(n_tokens, n_used, m)
        repacks = SEL.expected_layout(target, lay.weight, m) == kernel.name
        for placement, where in ((1, "CPU_REPACK" if repacks else "CPU"), (0, "CPU")):
            got, placed = run_mul_mat_id(target, kernel, case, n_expert, ids, placement)
            ctx = (f"ggml_mul_mat_id with weights in {placed}, m={m} x {n_expert} experts, {n_used} used, x_rows={x_rows}, "
                   f"{n_tokens} tokens, {nb} blocks, {threads} threads, ids={ids.tolist()}, {target.id}")
            assert placed == where, f"weights={placed}, but should be {where} [{ctx}]"
            assert_bitwise_equal(got, want, name="Y", context=ctx)
        observe.note("mul_mat_id", f"{'repacked' if repacks else 'not repacked'} at {target.id}")

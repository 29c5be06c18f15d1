"""Float matrix multiplication (``ggml_mul_mat`` of F32 / F16 / BF16) on 1-4 threads against a float64 oracle.

Path (ggml-cpu.c ``ggml_compute_forward_mul_mat`` and llamafile/sgemm.cpp): with
GGML_LLAMAFILE, ``llamafile_sgemm`` is tried first.  Its RVV class
``tinyBLAS_RVV`` (LMUL 4: f32 vectors of e32m4, f16 / bf16 of e16m2, VLMAX =
VLEN / 8 elements either way) takes the product when

    n >= 2,  k % (VLEN / 8) == 0,  m % 4 == 0,  and A's type has a kernel in the build
    (f32: any RVV build; f16: zvfh; bf16: zvfbfwma),

where m = rows of A (``ne01``), n = rows of B (``ne11``), k = the dot length.  A B of
another type than A is first converted to A's dot type (``from_float``: f32 -> f16 /
bf16, round to nearest even) and tinyBLAS is tried again.  It then runs
``gemm<RM=2, RN=2, BM>`` with BM = 8 if m % 16 == 0 and m / 16 >= threads, else 4 if
m % 8 == 0, else 2.  Otherwise mul_mat falls back to the type's ``ggml_vec_dot_*``
per output element.  ``test_mul_mat_path`` checks these conditions against what QEMU
saw execute; the value tests record the expected path per example.

Bound (both paths): every output is a dot product of length k.  tinyBLAS_RVV
accumulates k / VLMAX products per vector lane with fused multiply-adds (f16 x f16
and bf16 x bf16 products are exact in f32: vfwmacc / vfwmaccbf16 round only the sum),
then adds the lanes with vfredusum in an unspecified order; the vec_dot kernels do
the same (or accumulate in double).  One rounding per term, any summation order, one
final store: ``|got - exact| <= gamma(k + 1) * sum_l |a_l b_l|`` with u = 2^-24, b
already rounded to A's type (the conversion above is exact to model), plus the
float64 oracle's own k 2^-53 sum|a b|.  A second test uses small integers whose
every partial sum is exact in f32: the result must be exact, so a missing, doubled
or misplaced term always shows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cases import strategies as S
from harness import observe
from harness.compare import assert_bitwise_equal, assert_within_bound
from harness.protocol import In, Out
from oracles.bounds import gamma
from oracles.matmul import matmul, oracle_error

#: ggml_type ids (ggml.h; the same numbers as gguf's GGMLQuantizationType).
GGML_TYPE = {"f32": 0, "f16": 1, "bf16": 30}

BOUND = "gamma(k+1) * sum|a_l b_l|, u = 2^-24: one rounding per term, any order, final store (+ oracle's k 2^-53)"


@dataclass(frozen=True, repr=False)
class MatMulKernel(S.KernelSpec):
    """One operand-type combination of ggml_mul_mat and where tinyBLAS_RVV exists for it."""

    name: str  # test id
    a: str  # A (src0) type
    b: str  # B (src1) type as stored; rounded to ``a`` before the product when different
    tinyblas_when: str  # extension that compiles tinyBLAS_RVV for A's type
    vector: str  # tinyBLAS_RVV's vector type for A, as in its mangled name (e.g. float16m2)

    def path(self, features: dict[str, bool], vlen: int, k: int, m: int, n: int, threads: int) -> str:
        """The path ggml-cpu takes for this shape (the module docstring's conditions)."""
        if features.get(self.tinyblas_when) and n >= 2 and k % (vlen // 8) == 0 and m % 4 == 0:
            bm = 8 if m % 16 == 0 and m // 16 >= threads else 4 if m % 8 == 0 else 2
            return f"tinyBLAS_RVV<{self.vector}>::gemm<2,2,{bm}>"
        return f"ggml_vec_dot_{self.a}"


KERNELS = [
    MatMulKernel("f32", "f32", "f32", "v", "float32m4"),
    MatMulKernel("f16", "f16", "f16", "zvfh", "float16m2"),
    MatMulKernel("f16_f32", "f16", "f32", "zvfh", "float16m2"),
    MatMulKernel("bf16", "bf16", "bf16", "zvfbfwma", "bfloat16m2"),
    MatMulKernel("bf16_f32", "bf16", "f32", "zvfbfwma", "bfloat16m2"),
]
IDS = [k.name for k in KERNELS]


@dataclass(frozen=True)
class Shape:
    k: int
    m: int
    n: int
    threads: int = 1
    batch: int = 1  # A matrices
    bcast: int = 1  # B matrices per A matrix (ggml's broadcast of src0)
    pad: int = 0  # extra elements at the end of each A row (lda = k + pad)


@st.composite
def shapes(draw: st.DrawFn, vlen: int) -> Shape:
    """Shapes at and just outside tinyBLAS_RVV's conditions at ``vlen``: k multiples of
    VLEN/8 and near misses, m multiples of 4/8/16 and odd m, n from 1 up, 1-4 threads,
    batches with broadcast, padded A rows.  The edge values come first in each list, so a
    failure shrinks towards the smallest tinyBLAS-able shape that still fails."""
    step = vlen // 8
    ks = [step, 2 * step, step - 1, step + 1, 1, 2, 3, 3 * step, 4 * step, 2 * step - 2, 3 * step + 4]
    k = draw(st.one_of(st.sampled_from(list(dict.fromkeys(ks))), st.integers(1, 3 * step)), label="k")
    m = draw(st.one_of(st.sampled_from([4, 8, 12, 16, 24, 32, 48, 64, 1, 2, 3, 5, 6, 7, 10, 13, 21]),
                       st.integers(1, 64)), label="m")
    n = draw(st.sampled_from([2, 3, 4, 5, 1, 6, 7, 8, 9, 16, 17, 31]), label="n")
    threads = draw(st.one_of(st.just(1), st.integers(2, 4)), label="threads")  # extra threads cost ~20 ms each
    batch = draw(st.integers(1, 2), label="batch")
    bcast = draw(st.integers(1, 2), label="bcast")
    pad = draw(st.sampled_from([0, 0, 3, step]), label="pad")
    return Shape(k, m, n, threads, batch, bcast, pad)


def _fill(kind: str, rows: int, shape: Shape, fmt: str, data: st.DataObject, label: str) -> np.ndarray:
    """A [rows, k] matrix of values representable in ``fmt`` (float32)."""
    size = rows * shape.k
    if kind == "integers":
        return data.draw(S.small_integer_vectors(size), label=label).reshape(rows, shape.k)
    return data.draw(S.float_vectors(size, fmt), label=label).reshape(rows, shape.k)


def _storage(fmt: str, x: np.ndarray, pad: int = 0) -> np.ndarray:
    """Rows of ``x`` in ggml's memory format, each followed by ``pad`` junk elements."""
    stored = S.to_storage(fmt, x)
    if pad:
        # NaN in every format (0x7FFF is a NaN as fp16 and as bf16): a row over-read poisons the result.
        junk = np.full((*stored.shape[:-1], pad), 0x7FFF if stored.dtype == np.uint16 else np.nan, stored.dtype)
        stored = np.concatenate([stored, junk], axis=-1)
    return stored


def run_mul_mat(kernel: MatMulKernel, target, shape: Shape, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C = A x B^T on the target: a [batch, m, k], b [batch * bcast, n, k] -> [batch * bcast, n, m]."""
    sh = shape
    observe.note("path", kernel.path(target.features, target.vlen, sh.k, sh.m, sh.n, sh.threads))
    ip = [GGML_TYPE[kernel.a], GGML_TYPE[kernel.b], sh.k, sh.m, sh.n, sh.k + sh.pad, sh.batch, sh.bcast, sh.threads]
    bufs = [In(_storage(kernel.a, a, sh.pad)), In(_storage(kernel.b, b)), Out(4 * sh.m * sh.n * sh.batch * sh.bcast)]
    r = target.call("mul_mat", ip, [], bufs)
    return r.output(0, np.float32).reshape(sh.batch * sh.bcast, sh.n, sh.m)


def _context(kernel: MatMulKernel, target, sh: Shape) -> str:
    path = kernel.path(target.features, target.vlen, sh.k, sh.m, sh.n, sh.threads)
    return f"ggml_mul_mat {kernel.a} x {kernel.b}, {sh}, {target.id}, {path}"


def _draw_case(kernel: MatMulKernel, target, data: st.DataObject, kind: str) -> tuple[Shape, np.ndarray, np.ndarray]:
    sh = data.draw(shapes(target.vlen), label="shape")
    a = np.stack([_fill(kind, sh.m, sh, kernel.a, data, f"a{i}") for i in range(sh.batch)])
    b = np.stack([_fill(kind, sh.n, sh, kernel.a, data, f"b{i}") for i in range(sh.batch * sh.bcast)])
    if kernel.b != kernel.a and kind != "integers":
        # Values of B's own format that A's format cannot hold: the conversion must round them.
        rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="nudge_seed"))
        nudge = 1 + rng.uniform(-2.0 ** -12, 2.0 ** -12, b.shape)
        b = (b * nudge).astype(np.float32)
    return sh, a, b


@pytest.mark.parametrize("kernel", KERNELS, ids=IDS)
@given(data=st.data())
def test_mul_mat(kernel: MatMulKernel, target, data: st.DataObject) -> None:
    """Random data of every kind; every element within the derived bound."""
    sh, a, b = _draw_case(kernel, target, data, "floats")
    got = run_mul_mat(kernel, target, sh, a, b)
    exact, abs_sum = matmul(a, S.round_to(kernel.a, b), sh.bcast)
    bound = gamma(sh.k + 1) * abs_sum + oracle_error(sh.k, abs_sum)
    err = np.abs(got - exact)
    worst = np.unravel_index(np.argmax(np.where(bound > 0, err / np.where(bound > 0, bound, 1), err)), err.shape)
    assert_within_bound(float(got[worst]), float(exact[worst]), float(bound[worst]), name=f"C[{', '.join(map(str, worst))}]",
                        context=_context(kernel, target, sh), derivation=BOUND)


def assert_exact(got: np.ndarray, exact: np.ndarray, context: str) -> None:
    """C bit for bit; indices are flat: C[b][j][i] is element (b * n + j) * m + i."""
    assert_bitwise_equal(got.ravel(), exact.astype(np.float32).ravel(), name="C.flat", context=context)


@pytest.mark.parametrize("kernel", KERNELS, ids=IDS)
@given(data=st.data())
def test_mul_mat_exact(kernel: MatMulKernel, target, data: st.DataObject) -> None:
    """Integers in [-8, 8]: every partial sum is exact in f32 (|sum| <= 64 k < 2^24), so C must be exact."""
    sh, a, b = _draw_case(kernel, target, data, "integers")
    got = run_mul_mat(kernel, target, sh, a, b)
    exact, _ = matmul(a, b, sh.bcast)
    assert_exact(got, exact, _context(kernel, target, sh))


#: One probe per shape class, as (class, shape at VLEN: function of VLEN/8).
PROBES = [
    ("tinyblas-bm8", lambda s: Shape(2 * s, 32, 5, threads=2)),
    ("tinyblas-bm4", lambda s: Shape(s, 24, 3, threads=3)),
    ("tinyblas-bm2", lambda s: Shape(3 * s, 12, 2, threads=1, batch=2, bcast=2)),
    ("tinyblas-bm4-threads", lambda s: Shape(s, 16, 4, threads=2)),  # m % 16 == 0 but m / 16 < threads
    ("k-not-multiple", lambda s: Shape(2 * s + 4, 16, 4, threads=2)),
    ("m-not-multiple", lambda s: Shape(s, 10, 4, threads=1)),
    ("n-is-1", lambda s: Shape(s, 16, 1, threads=2)),
]
# tinyBLAS_RVV<D, V, TA, TB, TC>::gemm<RM, RN, BM>, mangled: ...tinyBLAS_RVVIu17__rvv_<D>_tu17__rvv_<V>_t...4gemmILi<RM>ELi<RN>ELi<BM>E
_TINYBLAS = re.compile(r"tinyBLAS_RVVIu\d+__rvv_\w+?_tu\d+__rvv_(\w+?)_t.*4gemmILi(\d+)ELi(\d+)ELi(\d+)E")


def executed_path(calls: frozenset[str]) -> str:
    """The mul_mat path a trace shows: the tinyBLAS_RVV gemm that ran, else the vec_dot."""
    gemms = sorted({m.groups() for c in calls if (m := _TINYBLAS.search(c))})
    if gemms:
        return " + ".join(f"tinyBLAS_RVV<{v}>::gemm<{rm},{rn},{bm}>" for v, rm, rn, bm in gemms)
    dots = sorted(c for c in calls if c.startswith("ggml_vec_dot_"))
    return " + ".join(dots) or "neither tinyBLAS_RVV nor a vec_dot"


@pytest.mark.parametrize("kernel", KERNELS, ids=IDS)
def test_mul_mat_path(kernel: MatMulKernel, target) -> None:
    """Each shape class takes the path the conditions predict, as QEMU's trace shows; the
    values of the same call must be exact (small integers)."""
    rng = np.random.default_rng(7)
    for cls, make in PROBES:
        sh = make(target.vlen // 8)
        a = rng.integers(-8, 9, (sh.batch, sh.m, sh.k)).astype(np.float32)
        b = rng.integers(-8, 9, (sh.batch * sh.bcast, sh.n, sh.k)).astype(np.float32)
        expected = kernel.path(target.features, target.vlen, sh.k, sh.m, sh.n, sh.threads)
        ip = [GGML_TYPE[kernel.a], GGML_TYPE[kernel.b], sh.k, sh.m, sh.n, sh.k + sh.pad, sh.batch, sh.bcast,
              sh.threads]
        bufs = [In(_storage(kernel.a, a, sh.pad)), In(_storage(kernel.b, b)), Out(4 * sh.m * sh.n * sh.batch * sh.bcast)]
        ran = executed_path(target.trace("mul_mat", ip, [], bufs).call)
        observe.note("variant", f"{cls}: {ran}")
        assert ran == expected, (f"path={ran!r}, but should be {expected!r} [probe {cls}: "
                                 f"{_context(kernel, target, sh)}]")
        got = run_mul_mat(kernel, target, sh, a, b)
        exact, _ = matmul(a, b, sh.bcast)
        assert_exact(got, exact, f"probe {cls}: {_context(kernel, target, sh)}")

"""Floating-point dot products (``ggml_vec_dot_f32 / _f16 / _bf16`` in vec.cpp) against a float64 oracle.

Bound (one for the three kernels, derived from their arithmetic):

* Every product enters the sum through one fp32 rounding.  fp16 x fp16 and
  bf16 x bf16 products are exact in fp32 (11 + 11 and 8 + 8 significant bits
  fit in 24), and the widening multiply-accumulates (vfwmacc, vfwmaccbf16)
  round only the addition; fp32 products are rounded inside a fused
  multiply-add (vfmacc), again once per term.
* The per-lane partial sums are combined by vfredusum, whose order is
  unspecified.  Summing n terms in any order costs at most gamma(n - 1) *
  sum|x_i y_i| (Higham, ch. 4); the per-term roundings above add one more
  gamma step: gamma(n) * sum|x_i y_i|.
* The result is stored to ``float *s``: one more rounding, at most
  u |s| <= u sum|x_i y_i|.

So ``|got - exact| <= gamma(n + 1) * sum|x_i y_i|`` with u = 2^-24.  The
scalar fallbacks (f16 without zvfh, bf16 without zvfbfwma) accumulate in
double and stay far inside it.  The oracle's exact value is ``math.fsum`` of
float64 products, which are exact for these formats.

Because a dropped element can hide inside that bound when it is small, a
second test uses inputs exact by construction: integers in [-8, 8], whose
every partial sum (at most 64 * n < 2^24) is exact in fp32 in any order, so
the result must be exact -- a missing or doubled element always shows.
"""

from __future__ import annotations

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
from oracles.floats import dot_exact

BOUND = "gamma(n+1) * sum|x_i y_i|, u = 2^-24: one fp32 rounding per term, any reduction order, final store"


@dataclass(frozen=True, repr=False)
class DotKernel(S.KernelSpec):
    name: str  # test id: the element type
    fmt: str
    shape: S.VectorShape  # of the RVV path: element width loaded, LMUL, unroll
    rvv_when: str  # the extension that selects the RVV path (else a scalar loop)

    @property
    def server_name(self) -> str:
        return f"vec_dot_{self.name}"

    def path(self, features: dict[str, bool]) -> str:
        return "rvv" if features.get(self.rvv_when) else "scalar"


DOTS = [
    # vfmacc.vv e32/m8, tail-undisturbed accumulator, one vsetvl loop.
    DotKernel("f32", "f32", S.VectorShape(32, (8,)), "v"),
    # vfwmacc e16/m1 -> e32/m2 accumulator, one vsetvl loop.
    DotKernel("f16", "f16", S.VectorShape(16, (1,)), "zvfh"),
    # vfwmaccbf16 e16/m2 -> e32/m4, unrolled by two, then a vsetvl tail loop.
    DotKernel("bf16", "bf16", S.VectorShape(16, (2,), 2), "zvfbfwma"),
]


def run_dot(kernel: DotKernel, target, x: np.ndarray, y: np.ndarray) -> float:
    n = x.size
    observe.note("path", kernel.path(target.features))
    r = target.call(kernel.server_name, [n], [],
                    [In(S.to_storage(kernel.fmt, x)), In(S.to_storage(kernel.fmt, y)), Out(4)])
    return float(r.output(0, np.float32)[0])


def _context(kernel: DotKernel, target, n: int) -> str:
    return f"ggml_vec_dot_{kernel.name}, n={n}, {target.id}, {kernel.path(target.features)} path"


@pytest.mark.parametrize("kernel", DOTS, ids=[k.name for k in DOTS])
@given(data=st.data())
def test_vec_dot(kernel: DotKernel, target, data: st.DataObject) -> None:
    """Random data of every kind, lengths at every tail; error within the derived bound."""
    n = data.draw(S.lengths(kernel.shape), label="n")
    x = data.draw(S.float_vectors(n, kernel.fmt), label="x")
    y = data.draw(S.float_vectors(n, kernel.fmt), label="y")
    got = run_dot(kernel, target, x, y)
    exact, abs_sum = dot_exact(x, y)
    assert_within_bound(got, exact, gamma(n + 1) * abs_sum, name=f"vec_dot_{kernel.name}(x, y)",
                        context=_context(kernel, target, n), derivation=BOUND)


@pytest.mark.parametrize("kernel", DOTS, ids=[k.name for k in DOTS])
@given(data=st.data())
def test_vec_dot_exact(kernel: DotKernel, target, data: st.DataObject) -> None:
    """Small integers: every partial sum is exact in fp32, so the result must be exact.
    Optionally one element is NaN or infinite, which must propagate (IEEE semantics of the
    scalar reference: NaN stays NaN; a single infinity times a non-zero finite gives +-inf)."""
    n = data.draw(S.lengths(kernel.shape), label="n")
    x = data.draw(S.small_integer_vectors(n), label="x")
    y = data.draw(S.small_integer_vectors(n), label="y")
    poison = data.draw(st.sampled_from([None, "nan", "inf", "-inf"]), label="poison")
    if poison is not None:
        at = data.draw(st.integers(0, n - 1), label="at")
        x[at] = float(poison)
        if y[at] == 0:
            y[at] = 1.0
    got = run_dot(kernel, target, x, y)
    exact, _ = dot_exact(x, y)
    assert_bitwise_equal(np.array([got], np.float32), np.array([exact], np.float32),
                         name=f"vec_dot_{kernel.name}(x, y)", context=_context(kernel, target, n))

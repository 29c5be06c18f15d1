"""The mul_mat family's tests; the family (table, bounds, checks) is cases/mul_mat.py, its shapes
cases/mul_mat_shapes.py."""

from __future__ import annotations

import numpy as np
import pytest

from cases.mul_mat import (
    IDS,
    KERNELS,
    PROBES,
    MatMulKernel,
    assert_exact,
    check_bound,
    check_exact,
    executed_path,
    explore_then_loops,
    run_mul_mat,
    shape_context,
    stored_matrix,
    type_id,
)
from harness.check import observe
from harness.emulators.protocol import In, Out
from oracles.matmul import matmul


@pytest.mark.parametrize("kernel", KERNELS, ids=IDS)
def test_mul_mat(kernel: MatMulKernel, target, request: pytest.FixtureRequest) -> None:
    """Random data of every kind; every element within the derived bound.  Random shapes, then
    on every run the shapes of ``loop_shapes`` (every loop level crossed twice plus a remainder)."""
    explore_then_loops(request, kernel, target.vlen, "floats", lambda case: check_bound(kernel, target, case))


@pytest.mark.parametrize("kernel", KERNELS, ids=IDS)
def test_mul_mat_exact(kernel: MatMulKernel, target, request: pytest.FixtureRequest) -> None:
    """Integers in [-8, 8]: every partial sum is exact in f32 (|sum| <= 64 k < 2^24), so C must be
    exact.  Random shapes, then on every run the shapes of ``loop_shapes``."""
    explore_then_loops(request, kernel, target.vlen, "integers", lambda case: check_exact(kernel, target, case))


@pytest.mark.parametrize("kernel", KERNELS, ids=IDS)
def test_mul_mat_path(kernel: MatMulKernel, target) -> None:
    """Each shape class takes the path the conditions predict, as QEMU's trace shows; the
    values of the same call must be exact (small integers)."""
    rng = np.random.default_rng(7)
    for cls, make in PROBES:
        sh = make(target.vlen // 8)
        a = rng.integers(-8, 9, (sh.batch, sh.m, sh.k)).astype(np.float32)
        b = rng.integers(-8, 9, (sh.batch * sh.bcast, sh.n, sh.k)).astype(np.float32)
        expected = kernel.path(target.isa, target.vlen, sh.k, sh.m, sh.n, sh.threads)
        ip = [type_id(kernel.a), type_id(kernel.b), sh.k, sh.m, sh.n, sh.k + sh.pad, sh.batch, sh.bcast,
              sh.threads]
        bufs = [In(stored_matrix(kernel.a, a, sh.pad)), In(stored_matrix(kernel.b, b)),
                Out(4 * sh.m * sh.n * sh.batch * sh.bcast)]
        ran = executed_path(target.trace("mul_mat", ip, [], bufs).call)
        observe.note("variant", f"{cls}: {ran}")
        assert ran == expected, (f"path={ran!r}, but should be {expected!r} [probe {cls}: "
                                 f"{shape_context(kernel, target, sh)}]")
        got = run_mul_mat(kernel, target, sh, a, b)
        exact, _ = matmul(a, b, sh.bcast)
        assert_exact(got, exact, f"probe {cls}: {shape_context(kernel, target, sh)}")


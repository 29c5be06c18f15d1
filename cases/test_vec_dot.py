"""The vec_dot family's tests; its kernel table, strategies and checks are in cases/vec_dot.py."""

from __future__ import annotations

import pytest

from cases import strategies as S
from cases.vec_dot import (
    DOTS,
    DotKernel,
    check_bound,
    check_exact,
    crossing_cases,
    dot_cases,
    exact_cases,
)


@pytest.mark.parametrize("kernel", DOTS, ids=[k.name for k in DOTS])
def test_vec_dot(kernel: DotKernel, target, request: pytest.FixtureRequest) -> None:
    """Random data of every kind at lengths at every tail, then the loop-crossing lengths of
    this VLEN; error within the derived bound."""
    S.explore(request, dot_cases(kernel), [], lambda case: check_bound(kernel, target, case),
              after=crossing_cases(kernel, target.vlen, exact=False))


@pytest.mark.parametrize("kernel", DOTS, ids=[k.name for k in DOTS])
def test_vec_dot_exact(kernel: DotKernel, target, request: pytest.FixtureRequest) -> None:
    """Small integers: every partial sum is exact in fp32, so the result must be exact; after
    the draws also at the loop-crossing lengths of this VLEN.  Optionally one element is NaN or infinite,
    which must propagate (IEEE semantics of the scalar reference: NaN stays NaN; a single
    infinity times a non-zero finite gives +-inf)."""
    S.explore(request, exact_cases(kernel), [], lambda case: check_exact(kernel, target, case),
              after=crossing_cases(kernel, target.vlen, exact=True))


"""The IME1 GEMM family's tests (the spacemit build under Spike with rvvdiff's IME1 library, VLEN 256); its cases,
checks and loop sizes are in cases/spacemit_gemm.py, its oracle in oracles/spacemit_ime1.py."""

from __future__ import annotations

import pytest

from cases import strategies as S
from cases.spacemit_gemm import (
    FINDING_EXAMPLES,
    MUL_MAT,
    MUL_MAT_ID,
    X60,
    Gemm,
    check_format,
    check_gemm,
    check_generic,
    check_moe,
    fixed_cases,
    gemm_cases,
    ime1_or_skip,
    moe_cases,
)

pytestmark = pytest.mark.rvvdiff_backend("spacemit")


@pytest.mark.parametrize("gemm", MUL_MAT, ids=lambda g: g.name)
def test_spacemit_gemm(gemm: Gemm, target, request: pytest.FixtureRequest) -> None:
    """mul_mat on the IME1 core: drawn shapes, then the loop-crossing and real models' shapes (``fixed_cases``);
    the quantized activations bit for bit and every output within the IME1 product's bound, or, where the traits
    refuse the weights (``ne[1] % 16``), the generic path's."""
    ime1_or_skip(target)
    S.explore(request, gemm_cases(gemm.name), [], lambda case: check_gemm(case, target), after=fixed_cases(gemm.name))


@pytest.mark.parametrize("gemm", [g for g in MUL_MAT if g.name != "q4_0"], ids=lambda g: g.name)
def test_spacemit_gemm_format(gemm: Gemm, target, request: pytest.FixtureRequest) -> None:
    """The IME1 result against what the weight type means (q4_0's layout is its format: no test): the finding's
    reproducer first, then drawn IME1 shapes and the fixed ones."""
    ime1_or_skip(target)
    name = gemm.name
    S.explore(request, gemm_cases(name, ime1_only=True), [FINDING_EXAMPLES[name]],
              lambda case: check_format(case, target), after=fixed_cases(name, ime1_only=True))


@pytest.mark.parametrize("gemm", MUL_MAT_ID, ids=lambda g: g.name)
def test_spacemit_gemm_moe(gemm: Gemm, target) -> None:
    """mul_mat_id on the IME1 core: the fixed mixture-of-experts shapes (``moe_cases``)."""
    ime1_or_skip(target)
    for case in moe_cases(gemm.name):
        check_moe(case, target)


@pytest.mark.parametrize("gemm", X60, ids=lambda g: g.name)
def test_spacemit_gemm_x60(gemm: Gemm, target, request: pytest.FixtureRequest) -> None:
    """The second opinion: the same cases on the X60's core type (Spike without the IME1 library) through ggml's
    generic mul_mat of the same build."""
    ime1_or_skip(target)
    name = gemm.name
    S.explore(request, gemm_cases(name), [], lambda case: check_generic(case, target), after=fixed_cases(name))

"""The vec_ops family's tests; the family (table, checks, loops) is cases/vec_ops.py, its cases and
strategies cases/vec_op_cases.py."""

from __future__ import annotations

import pytest

from cases import strategies as S
from cases.vec_op_cases import (
    VecOp,
    elementwise_case,
)
from cases.vec_ops import (
    EXPF_STRIDE,
    VEC_OPS,
    check,
    crossing_cases,
    expf_sweep_inputs,
    ids,
    vec_op_cases,
)
from harness.check import observe
from harness.core import settings
from harness.plugin.targets import session


@pytest.mark.parametrize("spec", VEC_OPS, ids=ids)
def test_vec_op(spec: VecOp, target, request: pytest.FixtureRequest) -> None:
    """Random data of every kind (special values planted, the last element among them),
    lengths at every tail of the RVV loop, in-place aliasing where ggml uses it; then the
    loop-crossing lengths of this VLEN (seeded)."""
    src = session().source
    S.explore(request, vec_op_cases(spec, src), [], lambda case: check(spec, target, case),
              after=crossing_cases(spec, target.vlen, src))


@pytest.mark.parametrize("spec", VEC_OPS, ids=ids)
def test_vec_op_edges(spec: VecOp, target) -> None:
    """Named edge cases (see each kernel's ``edges``): every one must hold its bound."""
    for case in spec.edges(spec, session().source):
        check(spec, target, case)


@pytest.mark.parametrize("spec", [k for k in VEC_OPS if k.name == "soft_max_f32"], ids=["v_expf_m2_f32"])
def test_expf_sweep(spec: VecOp, target) -> None:
    """ggml's polynomial exp (through ggml_vec_soft_max_f32 with max = 0, which computes
    exactly ggml_v_expf_m2(x - 0) = ggml_v_expf_m2(x)) over every EXPF_STRIDE-th float32 plus
    every float32 near the regime edges (EXP_EDGES), against float64 exp: within EXPF_ULPS,
    with fp32 expf's overflow to +inf, NaN to NaN, -inf to 0.  The summary's worst ULP figure
    is the measurement."""
    stride = 1 if settings.get("EXPF_EXHAUSTIVE") == "1" else EXPF_STRIDE
    observe.note("stride", str(stride))
    for i, x in enumerate(expf_sweep_inputs(stride)):
        case = elementwise_case(spec, x.size, {"x": x}, [0.0], inputs=("x",), inplace=False, returns=True,
                                label=f"sweep chunk {i}, stride {stride}")
        check(spec, target, case)


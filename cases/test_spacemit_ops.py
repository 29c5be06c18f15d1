"""The SpacemiT ops family's tests (the spacemit build only); its table, strategies and checks are in
cases/spacemit_ops.py."""

from __future__ import annotations

import pytest

from cases import strategies as S
from cases.spacemit_ops import DOMAINS, OPS, check_op, finding_examples, fixed_cases, op_cases

pytestmark = pytest.mark.rvvdiff_backend("spacemit")

CASES = [(OPS[op], d) for op, ds in DOMAINS.items() for d in ds]


@pytest.mark.parametrize("op,domain", CASES, ids=[f"{o.name}-{d}" for o, d in CASES])
def test_spacemit_op(op, domain: str, target, request: pytest.FixtureRequest) -> None:
    """The findings' reproducers of this op and domain first, then drawn cases of the domain (cases/spacemit_ops.py:
    DOMAINS), then, in its core domain, the row lengths that cross the op's loops at this VLEN and real models'
    widths (``fixed_cases``)."""
    S.explore(request, op_cases(op, domain), finding_examples(op, domain), lambda case: check_op(case, target),
              after=fixed_cases(op, domain, target.vlen))

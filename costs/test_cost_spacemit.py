"""The cost suite's cases of SpacemiT's backend (the spacemit build): measured as costs/test_cost.py measures the
others (costs/suite.py ``measure``), at the spacemit build's targets."""

from __future__ import annotations

import pytest

from costs.registry import CASES
from costs.suite import measure

pytestmark = [pytest.mark.rvvdiff_backend("spacemit"), pytest.mark.rvvdiff_cost]

SPACEMIT_CASES = [c for c in CASES if c.runs_on("spacemit")]


@pytest.mark.parametrize("case", SPACEMIT_CASES, ids=[c.id for c in SPACEMIT_CASES])
def test_cost(case, target, request):
    measure(case, target, request)

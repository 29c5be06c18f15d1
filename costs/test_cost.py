"""The cost suite: each case measured under Spike at each target, one row of ``--cost-log`` each.

Run it through ``rvvdiff cost`` (docs/cost.md), or directly:
``pytest costs --emulator spike --vlen all --cost-log cost.jsonl``.
What a case measures and when it fails: costs/suite.py ``measure``.  These are the cases of ggml-cpu's builds;
SpacemiT's are in costs/test_cost_spacemit.py.
"""

from __future__ import annotations

import pytest

from costs.registry import CASES
from costs.suite import measure

pytestmark = pytest.mark.rvvdiff_cost

CPU_CASES = [c for c in CASES if c.runs_on("cpu")]


@pytest.mark.parametrize("case", CPU_CASES, ids=[c.id for c in CPU_CASES])
def test_cost(case, target, request):
    measure(case, target, request)

"""The cost suite: each case measured under Spike at each target, one row of ``--cost-log`` each.

Run it through ``rvvdiff cost`` (docs/cost.md), or directly:
``pytest costs --emulator spike --vlen all --cost-log cost.jsonl``.
A case fails when its call cannot be measured (a trap, a hang, a rejected request) or when the two
counts of the call disagree (the counter around the call and the PC histogram of one more
repetition: harness/cost/measure/spike_count.py); the message says which.
"""

from __future__ import annotations

import pytest

from costs.registry import CASES
from harness.cost.measure.spike_count import CostError
from harness.plugin.costlog import Metered, record

#: Instructions the histogram of one more repetition may count beyond the counter around the call:
#: the repeat loop's compare and branch and the counter reads themselves.
LOOP_OVERHEAD = 16


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_cost(case, target, request):
    m = Metered(target, case.kernel)
    try:
        case.run(m)
    except CostError as e:  # the whole message, then the one line the report lists (the last)
        pytest.fail(f"{e}\n{e.summary()}", pytrace=False)
    assert m.cost is not None, f"harness: cost case {case.id} made no {case.kernel} call"
    c = m.cost
    extra = c.executed - c.instret
    assert 0 <= extra <= LOOP_OVERHEAD, (
        f"{case.id}: the counter says {c.instret} instructions, the PC histogram of one more repetition "
        f"{c.executed}: the two measures of the call disagree by {extra} (more than the repeat loop's "
        f"{LOOP_OVERHEAD}); the call is not what was measured")
    record(request.config, {"nodeid": request.node.nodeid, "case": case.id, "family": case.family,
                            "name": case.name, "size": case.size, "impl": case.impl, "function": case.function,
                            "twin": case.twin_id, "units": case.units, "unit": case.unit,
                            "vlen": target.vlen, "isa": target.isa.name, **c.as_dict(),
                            **({"batch": case.batch} if case.batch else {}),
                            **(case.path(target, c.functions) if case.path else {})})

"""The SpacemiT quantizers' tests (the spacemit build only); their table, inputs, oracle and checks are in
cases/spacemit_quant.py."""

from __future__ import annotations

import pytest

from cases import strategies as S
from cases.spacemit_quant import DOMAINS, FINDING_EXAMPLES, QUANTIZERS, check_quant, fixed_cases, quant_cases

pytestmark = pytest.mark.rvvdiff_backend("spacemit")

CASES = [(q, d) for q in QUANTIZERS.values() for d in DOMAINS]


@pytest.mark.parametrize("q,domain", CASES, ids=[f"{q.name}-{d}" for q, d in CASES])
def test_spacemit_quantize(q, domain: str, target, request: pytest.FixtureRequest) -> None:
    """The findings' reproducers of this quantizer and domain first, then drawn rows of the domain's blocks, then (core)
    2 and 3 blocks and real models' row lengths: bytes as the oracle of the VLEN's path, and the format's promise."""
    S.explore(request, quant_cases(q, domain), FINDING_EXAMPLES.get((q.name, domain), ()),
              lambda case: check_quant(case, target), after=fixed_cases(q, domain))

"""The SpacemiT weight layouts' tests (the spacemit build only); their table, inputs and checks are in
cases/spacemit_layouts.py, the layouts in oracles/spacemit_repack.py."""

from __future__ import annotations

import pytest

from cases import strategies as S
from cases.spacemit_layouts import DOMAINS, FINDING_EXAMPLES, LAYOUTS, check_repack, fixed_cases, repack_cases

pytestmark = pytest.mark.rvvdiff_backend("spacemit")

CASES = [(LAYOUTS[name], d) for name, ds in DOMAINS.items() for d in ds]


@pytest.mark.parametrize("layout,domain", CASES, ids=[f"{x.name}-{d}" for x, d in CASES])
def test_spacemit_repack(layout, domain: str, target, request: pytest.FixtureRequest) -> None:
    """The findings' reproducers of this layout and domain first, then drawn tensors of the domain, then the fixed
    shapes (real models' K; tails over one and two matrices): return value, bytes, round trip."""
    S.explore(request, repack_cases(layout, domain), FINDING_EXAMPLES.get((layout.name, domain), ()),
              lambda case: check_repack(case, target), after=fixed_cases(layout, domain))

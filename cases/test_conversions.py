"""The conversions family's tests; its kernel table, strategies and checks are in cases/conversions.py."""

from __future__ import annotations

import pytest

from cases import strategies as S
from cases.conversions import (
    CONVERSIONS,
    Conversion,
    check_conversion,
    conversion_inputs,
    crossing_inputs,
    ids,
    sweep_inputs,
)


@pytest.mark.parametrize("kernel", CONVERSIONS, ids=ids)
def test_convert(kernel: Conversion, target, request: pytest.FixtureRequest) -> None:
    """Random lengths around every VLMAX boundary and long rows, inputs from every class of
    value; then the loop-crossing lengths of this VLEN (``crossing_inputs``)."""
    S.explore(request, conversion_inputs(kernel), [], lambda x: check_conversion(kernel, target, x),
              after=crossing_inputs(kernel, target.vlen))


@pytest.mark.parametrize("kernel", CONVERSIONS, ids=ids)
def test_convert_sweep(kernel: Conversion, target) -> None:
    """One call over every input that matters (``sweep_inputs``): all 65536 patterns of a
    16-bit source, or every rounding edge of a narrowing."""
    check_conversion(kernel, target, sweep_inputs(kernel, target.vlen))


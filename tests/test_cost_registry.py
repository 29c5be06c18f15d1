"""The cost suite measures every family of the differential suite: costs/registry.py's cases cover
cases/families.py's families, or the registry says in writing why a family has none."""

from __future__ import annotations

import pytest

from cases import families
from costs import registry


def test_every_family_has_cost_cases_or_a_reason() -> None:
    bad = registry.problems()
    assert not bad, "costs/registry.py and cases/families.py disagree:\n  " + "\n  ".join(bad)


def test_a_family_without_cost_cases_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    names = [*families.MODULES, "new_family"]
    assert registry.problems(names) == [
        "family 'new_family' (cases/families.py) has no cost case: add its cases to a costs/ module and that list "
        "to CASES in costs/registry.py, or the reason it has none to UNMEASURED there"]
    monkeypatch.setitem(registry.UNMEASURED, "new_family", "measured by another suite")
    assert registry.problems(names) == []
    monkeypatch.setitem(registry.UNMEASURED, "quantize", "no reason")
    assert registry.problems(names) == ["UNMEASURED names 'quantize', which has cost cases"]

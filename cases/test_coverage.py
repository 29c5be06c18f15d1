"""The tree under test against what rvvdiff knows (cases/coverage.py, every family's scan run by
cases/families.py): an RVV entry point of the tree that no family tests fails here, by name and
file:line; kernels the tree lacks are listed as "not in this tree" and never fail."""

from __future__ import annotations

import pytest

from cases import families
from harness.ggml import tree
from harness.ggml.source import resolve


def test_coverage(pytestconfig: pytest.Config) -> None:
    src = resolve(pytestconfig.getoption("ggml_src"))
    found = families.scans(tree.of(src))
    broken = [s.error for s in found if s.error]
    assert not broken, "a coverage scan could not run, so it checked nothing:\n  " + "\n  ".join(broken)
    lines = [f"{s.family}: {u.name} ({u.where}){': ' + u.why if u.why else ''}" for s in found for u in s.uncovered]
    assert not lines, (f"{len(lines)} RVV kernel(s) of {src.describe()} have no test (uncovered):\n  "
                       + "\n  ".join(lines))

"""The differential suite's one local hook: the coverage summary (cases/coverage.py)."""

from __future__ import annotations

from typing import Any

import pytest

from cases import families
from harness.ggml import tree
from harness.ggml.source import SourceError, resolve


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """What the tree has that rvvdiff does not test, and what rvvdiff knows that the tree lacks."""
    if getattr(config, "workerinput", None) is not None:
        return
    try:
        src = resolve(config.getoption("ggml_src"))
    except SourceError:
        return
    tr = terminalreporter
    found = families.scans(tree.of(src))
    if not any(s.uncovered or s.not_in_tree or s.notes for s in found):
        return
    tr.section("rvvdiff coverage of the tree")
    for s in found:
        for u in s.uncovered:
            tr.write_line(f"uncovered  {s.family}: {u.name} ({u.where})", yellow=True)
        if s.not_in_tree:
            tr.write_line(f"not in this tree  {s.family}: {', '.join(s.not_in_tree)}")
        for n in s.notes:
            tr.write_line(f"note  {s.family}: {n}", yellow=True)

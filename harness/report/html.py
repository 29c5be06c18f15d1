"""The scaffolding of rvvdiff's HTML pages: one self-contained file, no scripts, no external files.

Used by the run's ``summary.html`` (harness/report/summary.py) and the gate's
(harness/report/gate_summary.py).
"""

from __future__ import annotations

import html
from collections.abc import Iterable


def page(title: str, style: str, body: Iterable[str], *, sep: str = "") -> str:
    """A page: the doctype, UTF-8, ``title``, the CSS ``style``, then the ``body`` parts (HTML,
    joined by ``sep``)."""
    return sep.join([f"<!doctype html><meta charset=utf-8><title>{html.escape(title)}</title>",
                     f"<style>{style}</style>", *body])


def cells(tag: str, values: Iterable[object]) -> str:
    """One ``<td>`` (or ``<th>``) per value, its text escaped."""
    return "".join(f"<{tag}>{html.escape(str(v))}</{tag}>" for v in values)

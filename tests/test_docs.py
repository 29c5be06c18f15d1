"""The README and the pages of docs/: every relative link reaches a file, and the README stays a
one-screen guide (at most 150 lines, no timings: those live in docs/performance.md)."""

from __future__ import annotations

import re
from pathlib import Path

import helpers
import pytest

ROOT = helpers.ROOT
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_CODE = re.compile(r"```.*?```|`[^`\n]*`", re.S)  # code blocks and spans hold no links
#: A duration: a number with a unit of time, or minutes / hours by name.
_TIMING = re.compile(r"\b\d[\d.,]*\s*(?:s|sec|seconds?|min|minutes?|h|hours?)\b|\b(?:minutes?|hours?)\b", re.I)


def relative_links(page: Path) -> list[str]:
    """The link targets of ``page`` that are paths (no scheme, not a bare ``#anchor``), anchors cut."""
    text = _CODE.sub("", page.read_text())
    out = []
    for m in _LINK.finditer(text):
        target = m.group(1)
        if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith("#"):
            continue
        out.append(target.split("#", 1)[0])
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_reaches_a_file(page: Path) -> None:
    broken = [t for t in relative_links(page) if not (page.parent / t).exists()]
    assert not broken, f"{page.relative_to(ROOT)} links to what does not exist: {broken}"


def test_the_link_reader_sees_links_and_skips_code(tmp_path: Path) -> None:
    p = tmp_path / "x.md"
    p.write_text("[a](docs/a.md#sec) [b](https://x.org/y) [c](#top) ![i](img.png)\n`[d](no.md)`\n"
                 "```\n[e](no.md)\n```\n")
    assert relative_links(p) == ["docs/a.md", "img.png"]


def test_the_readme_is_one_screen_without_timings() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 150, "README.md is a one-screen guide: move reference material to docs/"
    found = [m.group(0) for m in _TIMING.finditer(_CODE.sub("", text))]
    assert not found, f"README.md states timings {found}: they live in docs/performance.md (link there)"
    assert "docs/performance.md" in text

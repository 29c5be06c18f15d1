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


#: The packages whose every module docs/architecture.md names.
PACKAGES = ("harness", "cases", "costs", "oracles")


def unnamed_modules(doc: str) -> list[str]:
    """The modules of :data:`PACKAGES` that ``doc`` (docs/architecture.md) does not name, each with where to: a
    module is named by its name in the table row of its package (the nearest folder with a row, ``| `harness/
    report/` | ...``) or as ``` `<name>.py` ``` anywhere (the families' table of cases/)."""
    rows = {m.group(1): line for line in doc.splitlines() if (m := re.match(r"\| `([\w/]+)/` \|", line))}
    out = []
    for p in sorted(f for top in PACKAGES for f in (ROOT / top).rglob("*.py") if f.name != "__init__.py"):
        own = folder = p.parent.relative_to(ROOT)
        while str(folder) not in rows and folder.parent != Path("."):
            folder = folder.parent
        row = rows.get(str(folder), "")
        if not re.search(rf"(?<![\w.]){re.escape(p.stem)}(?!\w)", row) and f"`{p.name}`" not in doc:
            out.append(f"{p.relative_to(ROOT)}: name it in the `{folder}/` row" if row else
                       f"{p.relative_to(ROOT)}: no row for `{own}/`: add one")
    return out


def test_the_architecture_names_every_module() -> None:
    missing = unnamed_modules((ROOT / "docs" / "architecture.md").read_text())
    assert not missing, "docs/architecture.md does not name these modules:\n  " + "\n  ".join(missing)


def test_a_module_is_named_in_its_package_row_or_as_its_file() -> None:
    doc = "| `harness/report/` | ids, failure |\n| `cases/` | see below |\nShared: `strategies.py`.\n"
    missing = unnamed_modules(doc)
    assert "harness/report/ids.py" not in "\n".join(missing) and "cases/strategies.py" not in "\n".join(missing)
    assert "harness/report/linegate.py: name it in the `harness/report/` row" in missing
    assert "harness/core/proc.py: no row for `harness/core/`: add one" in missing

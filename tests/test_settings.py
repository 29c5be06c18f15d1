"""Every RVVDIFF_* variable is read in one place (harness/core/settings.py), documented in
docs/settings.md, and shown in the report header when set."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.core import settings

ROOT = Path(__file__).resolve().parent.parent
# A read of the environment naming an RVVDIFF_ variable, outside the settings module.
_DIRECT = re.compile(r"""(os\.environ\b.{0,16}?|getenv\(\s*)["']RVVDIFF_""")


def test_docs_table_is_current() -> None:
    text = (ROOT / settings.DOC).read_text()
    assert settings.render_doc(text) == text, (
        f"{settings.DOC}'s table of RVVDIFF_* variables is stale: run rvvdiff docs --write settings")


def test_no_module_reads_an_rvvdiff_variable_itself() -> None:
    wrong = []
    for top in ("harness", "cases", "oracles"):
        for p in sorted((ROOT / top).rglob("*.py")):
            if p.name == "settings.py" and p.parent.name == "core":
                continue
            for i, line in enumerate(p.read_text().splitlines(), 1):
                if _DIRECT.search(line):
                    wrong.append(f"{p.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not wrong, "read RVVDIFF_* through harness.core.settings:\n" + "\n".join(wrong)


def test_every_variable_named_in_the_code_is_a_setting() -> None:
    known = {s.var for s in settings.SETTINGS}
    # RVVDIFF_HAS_<name> and RVVDIFF_KERNEL are C macros of the kernel server, not environment variables.
    macros = re.compile(r"RVVDIFF_(HAS_\w*|KERNEL\b|GENERIC_\w+)")
    named = set()
    for top in ("harness", "cases", "oracles", "ci"):
        for p in sorted((ROOT / top).rglob("*")):
            if p.is_file() and p.suffix in (".py", ".sh") and p.name != "settings.py":
                named |= {m.group(0) for m in re.finditer(r"RVVDIFF_[A-Z_]+[A-Z]", macros.sub("", p.read_text()))}
    assert named <= known, f"not in harness/core/settings.py: {sorted(named - known)}"


def test_header_shows_the_settings_that_are_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RVVDIFF_QEMU", "/opt/qemu/bin/qemu-riscv64")
    monkeypatch.setenv("RVVDIFF_SESSION", "abc")  # internal: not shown
    monkeypatch.delenv("RVVDIFF_CACHE", raising=False)
    assert "RVVDIFF_QEMU=/opt/qemu/bin/qemu-riscv64" in settings.shown()
    assert not any(s.startswith(("RVVDIFF_SESSION", "RVVDIFF_CACHE")) for s in settings.shown())


def test_an_unknown_name_says_where_to_add_it() -> None:
    with pytest.raises(KeyError, match="harness/core/settings.py"):
        settings.get("NO_SUCH")

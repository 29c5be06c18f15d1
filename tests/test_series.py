"""``rvvdiff series``: every fix is in exactly one series, each series applies in order to the pinned tree,
its pull-request description stays within 40 lines and its combined patch applies with ``patch -p1``."""

from __future__ import annotations

import subprocess
from pathlib import Path

from harness.commands import fixes
from harness.commands import series as command
from harness.ggml import patches, source
from harness.upstream import series


def test_every_fix_in_one_series_and_each_applies_in_order() -> None:
    pinned = source.pinned()
    for s in series.load(fixes.catalogue()):
        ok, why = series.applies_in_order(s, pinned)
        assert ok, f"{s.name}: {why}"


def test_descriptions_and_combined_patches(tmp_path: Path) -> None:
    assert command.main(["--out", str(tmp_path)]) == 0
    pinned = source.pinned()
    for s in series.load(fixes.catalogue()):
        text = (tmp_path / f"{s.stem}.md").read_text()
        assert len(text.splitlines()) <= series.MAX_LINES, s.stem
        assert all(f"`{fx.name}.patch`" in text for fx in s.fixes)
        r = subprocess.run(["patch", "-p1", "--dry-run", "--batch", "-s", "-d", str(pinned.root),
                            "-i", str(tmp_path / f"{s.stem}.patch")], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr


def test_a_series_that_no_longer_applies_says_which_patch(tmp_path: Path) -> None:
    s = series.load(fixes.catalogue())[0]
    pinned = source.pinned()
    fixed = patches.apply(s.fixes[:1], pinned, "fix", s.fixes[0].name)  # the first fix already in the tree
    ok, why = series.applies_in_order(s, fixed)
    assert not ok and s.fixes[0].name in why and "already has this change" in why

"""The test version on every recorded run line (docs/upstream/series/test-runs.json): each line ends with the version
of the test patches it applied (harness/upstream/testcmd.py) or says that it is unknown; a line of another version
than the current test's is stale, which ``rvvdiff series``, the series page and this test say
(harness/upstream/testversion.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.core.config import PROJECT_ROOT
from harness.ggml import fix_catalogue
from harness.upstream import fix_series, ggml_own_tests, other_arch, series_pages, testcmd, testversion

OUT = PROJECT_ROOT / "docs" / "upstream" / "series"


@pytest.fixture(scope="module")
def every() -> list[fix_series.Series]:
    return fix_series.load(fix_catalogue.catalogue())


def test_every_recorded_line_says_its_test_version_and_none_is_stale(every: list[fix_series.Series]) -> None:
    """A run of an older test fails here: run it again (``rvvdiff series --run-test N`` for riscv64,
    ``rvvdiff other-arch --record`` off RISC-V)."""
    runs = json.loads(testcmd.TEST_RUNS.read_text())
    for s in every:
        if not s.test_patch():  # a series without a regression test has no run (its page says why)
            assert s.name not in runs and testversion.of_series(s) == "", s.stem
            continue
        assert runs[s.name], s.stem
        for line in runs[s.name]:
            assert testcmd.stamp_of(line)[1], f"{s.stem}: no test version: {line[:100]}"
        assert testversion.problems(s, runs[s.name], every) == [], s.stem
        assert testversion.sentence(s, runs[s.name], every) in (OUT / f"{s.stem}.md").read_text(), s.stem


def test_a_stamped_line_reads_back_as_the_unstamped_one() -> None:
    line = ("pinned tree: VLEN 256 FAILS (q4_K dot product error (max values)); test-quantize-fns built with ggml's CMake"
            " by GCC 14 (v build), run by ctest under qemu-riscv64.")
    for stamp in ("0123456789ab", testcmd.UNKNOWN):
        got = testcmd.stamped(line, stamp)
        assert got.endswith(f" [test {stamp}]") and testcmd.stamp_of(got) == (line, stamp)
        assert testcmd.read_runs([got]) == testcmd.read_runs([line]) != []
        assert testcmd.stamped(got, "ba9876543210") == f"{line} [test ba9876543210]"  # a new stamp replaces the old
    assert testcmd.stamp_of(line) == (line, "")


def test_the_version_is_that_of_the_diffs_applied_in_order(tmp_path: Path) -> None:
    diff = "--- a/tests/t.cpp\n+++ b/tests/t.cpp\n@@ -1 +1 @@\n-a\n+b\n"
    a, b, c = tmp_path / "a.patch", tmp_path / "b.patch", tmp_path / "c.patch"
    a.write_text("rvvdiff ggml-test: t\nwhy: one wording\n\n" + diff)
    b.write_text("rvvdiff ggml-test: t\nwhy: another wording\n\n" + diff)  # the header is not the test
    c.write_text(diff.replace("+b", "+c"))
    assert len(testcmd.version([a])) == 12 and testcmd.version([a]) == testcmd.version([b])
    assert testcmd.version([a]) != testcmd.version([c]) and testcmd.version([a, c]) != testcmd.version([c, a])


def test_a_series_test_version_covers_the_tests_it_builds_on(every: list[fix_series.Series]) -> None:
    by = {s.name: s for s in every}
    six = by["generic-gemm-layout"]
    assert [p.name for p in ggml_own_tests.CLASSES[six.test].test_patches()] == [
        "odd_block_count.patch", "repack_vlen512.patch", "generic_gemm_layout.patch"]
    assert testversion.of_series(by["odd-block-counts"]) == testcmd.version([by["odd-block-counts"].test_patch()])
    assert testversion.of_stack(every) == testcmd.version([s.test_patch() for s in every if s.test_patch()])


def test_a_stale_or_unknown_line_is_said(every: list[fix_series.Series]) -> None:
    s = every[2]
    lines = fix_series.recorded_runs(s)
    riscv = next(ln for ln in lines if not other_arch.is_record(ln))
    off = next(ln for ln in lines if other_arch.is_record(ln))
    old = [testcmd.stamped(riscv, "000000000000"), testcmd.stamped(off, testcmd.UNKNOWN), testcmd.stamp_of(off)[0]]
    assert [st for _, st in testversion.states(s, old, every)] == ["stale", "unknown", "unknown"]
    said = testversion.sentence(s, old, every)
    assert "0 of the 3 recorded runs are of the current test" in said and "STALE" in said and "`000000000000`" in said
    assert "test version unknown" in said and "x86-64, before the fixes" in said
    (bad,) = testversion.problems(s, old, every)
    assert f"rvvdiff series --run-test {s.number}" in bad and testversion.of_series(s) in bad
    page = series_pages.description(s, {"t": (True, "")}, test_runs=old, every=every)
    assert said in page
    assert "Every recorded run is of the current test." in series_pages.description(s, {"t": (True, "")}, every=every)


def test_new_lines_off_risc_v_carry_the_version_they_ran() -> None:
    runs = [other_arch.ArchRun("x86-64", True, True, [], ["q4_0_8x8"], "0123456789ab"),
            other_arch.ArchRun("aarch64", False, True, [], [])]
    lines = other_arch.record_lines(runs)
    assert [testcmd.stamp_of(ln)[1] for ln in lines] == ["0123456789ab", testcmd.UNKNOWN]
    assert all(other_arch.is_record(ln) for ln in lines) and other_arch.summary(lines).endswith("aarch64: passes.")

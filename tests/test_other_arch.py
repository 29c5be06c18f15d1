"""The series' tests off RISC-V, each series alone and the stack (harness/upstream/other_arch.py): what a run of one
series applies, the version its lines carry, how they are recorded beside the stack's and said on the page."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.ggml import fix_catalogue
from harness.upstream import fix_series, other_arch, testcmd, testversion


@pytest.fixture(scope="module")
def every() -> list[fix_series.Series]:
    return fix_series.load(fix_catalogue.catalogue())


def test_a_series_alone_is_what_it_builds_on_then_its_test_then_its_fixes(every: list[fix_series.Series]) -> None:
    by = {s.name: s for s in every}
    two = by["vlen-specific-offsets"]
    assert two.needs == ["odd-block-counts"]
    one = by["odd-block-counts"]
    base = [one.test_patch(), *(fx.patch for fx in one.fixes)]
    assert other_arch.series_patches(two, every, fixed=False) == [*base, two.test_patch()]
    assert other_arch.series_patches(two, every, fixed=True) == [*base, two.test_patch(), *(fx.patch for fx in two.fixes)]
    assert other_arch.series_patches(one, every, fixed=False) == [one.test_patch()]
    # nothing of a series it does not build on
    four = by["tail-agnostic-accumulators"]
    assert not set(other_arch.series_patches(two, every, True)) & {fx.patch for fx in four.fixes}


def test_a_series_run_carries_its_own_test_version(every: list[fix_series.Series]) -> None:
    """The version of a series' run alone is the one its riscv64 runs carry, not the stack's."""
    for s in every:
        if s.test_patch():
            assert testcmd.version(other_arch.series_tests(s, every)) == testversion.of_series(s), s.name
    assert testversion.of_series(every[1]) != testversion.of_stack(every)


def _runs(series: str, version: str, passed: bool = True) -> list[other_arch.ArchRun]:
    return [other_arch.ArchRun(a, fixed, passed, [] if passed else ["q4_0 dot product error: FAILED (2.0)"], [],
                               version, series) for a in other_arch.ARCHS for fixed in (False, True)]


def test_lines_name_their_scope_and_are_judged_against_their_own_version(every: list[fix_series.Series]) -> None:
    s = every[1]
    mine, stacked = testversion.of_series(s), testversion.of_stack(every)
    own = other_arch.record_lines(_runs(s.name, mine))
    stack = other_arch.record_lines(_runs("", stacked))
    assert all(other_arch.is_record(ln) and not other_arch.is_stack(ln) for ln in own)
    assert all(other_arch.is_stack(ln) for ln in stack)
    assert {st for _, st in testversion.states(s, own + stack, every)} == {"current"}
    # a series' line stamped with the stack's version is stale, and the command to run again names the series
    wrong = other_arch.record_lines(_runs(s.name, stacked))
    assert {st for _, st in testversion.states(s, wrong, every)} == {"stale"}
    assert f"rvvdiff other-arch --series {s.number} --record" in testversion.problems(s, wrong[:1], every)[0]


def test_the_page_says_the_series_own_runs_first_then_the_stack(every: list[fix_series.Series]) -> None:
    own = other_arch.record_lines(_runs("x", "0123456789ab", passed=False)[:2] + _runs("x", "0123456789ab")[2:])
    stack = other_arch.record_lines(_runs("", "ba9876543210"))
    said = other_arch.summary(own + stack)
    assert said.startswith("Off RISC-V, this series' test alone") and "x86-64: FAILS; aarch64: passes." in said
    assert said.endswith("The stacked test (every series' check), also built and run on x86-64 natively and on aarch64 "
                         "with FP16 vector arithmetic (zig's clang, -mcpu=cortex_a76, qemu-aarch64 -cpu max), before and "
                         "after the fixes: x86-64: passes; aarch64: passes.")
    assert "has no recorded run yet" in other_arch.summary(stack)
    assert other_arch.summary([]) == ""


def test_a_series_record_replaces_its_own_lines_only(every: list[fix_series.Series], tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = every[0], every[1]
    runs_file = tmp_path / "test-runs.json"
    riscv = "pinned tree: VLEN 256 passes; test-quantize-fns built with ggml's CMake by GCC 14 (v build). [test 0]"
    stack = other_arch.record_lines(_runs("", "ba9876543210"))
    runs_file.write_text(json.dumps({a.name: [riscv, *stack], b.name: [riscv, *stack]}))
    monkeypatch.setattr(testcmd, "TEST_RUNS", runs_file)
    first = _runs(b.name, "0123456789ab", passed=False)
    other_arch.record(every, first, other_arch.record_lines(first))
    again = _runs(b.name, "0123456789ab")
    other_arch.record(every, again, other_arch.record_lines(again))
    data = json.loads(runs_file.read_text())
    assert data[a.name] == [riscv, *stack]  # another series is untouched
    assert data[b.name] == [riscv, *stack, *other_arch.record_lines(again)]  # the earlier run of b is replaced
    newer = _runs("", "0123456789ab")
    other_arch.record(every, newer, other_arch.record_lines(newer))  # a stack run replaces the stack's lines only
    data = json.loads(runs_file.read_text())
    assert data[b.name] == [riscv, *other_arch.record_lines(again), *other_arch.record_lines(newer)]

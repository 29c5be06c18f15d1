"""Whether a series' recorded test runs (docs/upstream/series/test-runs.json) are of its current test.

Each recorded line ends with the version of the test it ran (harness/upstream/testcmd.py's ``stamped``).  The current
version is that of the test patches in harness/data/ggml-tests/ now: for a riscv64 line, those its series' class
applies (the tests of the series it builds on, then its own: ``TestClass.test_patches``), and so for a line off RISC-V
of the series run alone; for a line off RISC-V of the stack (harness/upstream/other_arch.py), every series' test in
order (the stacked test).  :func:`state` says per line
``current``, ``stale`` (another version: the test changed since the run) or ``unknown`` (no record says which);
:func:`sentence` says it on the series page, :func:`problems` for ``rvvdiff series`` (a stale line is a defect).
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.upstream import ggml_own_tests, other_arch, testcmd
from harness.upstream.fix_series import Series

CURRENT, STALE, UNKNOWN = "current", "stale", "unknown"


def of_series(series: Series) -> str:
    """The current version of the series' regression test as its riscv64 runs apply it."""
    cls = ggml_own_tests.CLASSES.get(series.test)
    if not cls and not series.test_patch():
        return ""  # a series without a regression test (its test_note says why)
    return testcmd.version(cls.test_patches() if cls else [series.test_patch()])


def of_stack(every: Sequence[Series]) -> str:
    """The current version of the stacked test the runs off RISC-V apply (every series' test, in order)."""
    return testcmd.version(other_arch.stack_tests(every))


def state(line: str, riscv64: str, stacked: str) -> str:
    """``line``'s state against the current versions of its series' test (``riscv64``) and of the stacked test."""
    said = testcmd.stamp_of(line)[1]
    if said in ("", testcmd.UNKNOWN):
        return UNKNOWN
    return CURRENT if said == (stacked if other_arch.is_stack(line) else riscv64) else STALE


def states(series: Series, lines: Sequence[str], every: Sequence[Series]) -> list[tuple[str, str]]:
    """(line, state) for each recorded line of ``series``."""
    if not lines:
        return []
    mine, stacked = of_series(series), of_stack(every)
    return [(ln, state(ln, mine, stacked)) for ln in lines]


def _label(line: str) -> str:
    """A recorded line named in a few words: who built it and which side (``GCC 14, with the fixes``)."""
    arch = next((a for a in other_arch.ARCHS if line.startswith(other_arch.WORDS[a])), "")
    rest = line[len(other_arch.WORDS[arch]) + 2:] if arch else line
    run = [] if arch else testcmd.read_runs([line])
    return f"{arch or (run[0].compiler if run else 'riscv64')}, " + (
        "with the fixes" if rest.startswith("with the fixes") else "before the fixes")


def sentence(series: Series, lines: Sequence[str], every: Sequence[Series]) -> str:
    """What the series page says of its recorded runs' test versions ('' when none is recorded)."""
    if not lines:
        return ""
    said = states(series, lines, every)
    mine, stacked = of_series(series), of_stack(every)
    which = [f"`{mine}` for this series' test (riscv64, and off RISC-V alone)"] + (
        [f"`{stacked}` for the stacked test off RISC-V"] if any(other_arch.is_stack(ln) for ln in lines) else [])
    head = ("Test version (the first 12 hex digits of the sha256 of the test diffs a run applied): "
            + " and ".join(which) + ". ")
    unknown = [_label(ln) for ln, s in said if s == UNKNOWN]
    stale = [f"{_label(ln)} (`{testcmd.stamp_of(ln)[1]}`)" for ln, s in said if s == STALE]
    if not unknown and not stale:
        return head + "Every recorded run is of the current test."
    out = head + f"{sum(s == CURRENT for _, s in said)} of the {len(said)} recorded runs are of the current test"
    if unknown:
        out += f"; test version unknown (recorded before runs said theirs) for {len(unknown)}: {'; '.join(unknown)}"
    if stale:
        out += f"; STALE, of another version of the test, {len(stale)}: {'; '.join(stale)}; they need a new run"
    return out + "."


def problems(series: Series, lines: Sequence[str], every: Sequence[Series]) -> list[str]:
    """The stale lines of ``series`` as ``rvvdiff series`` reports them, each with the command that runs it again."""
    if not lines:
        return []
    mine, stacked = of_series(series), of_stack(every)
    def again(line: str) -> str:
        if other_arch.is_stack(line):
            return "rvvdiff other-arch --record"
        if other_arch.is_record(line):
            return f"rvvdiff other-arch --series {series.number} --record"
        return f"rvvdiff series --run-test {series.number}"

    return [f"stale test record (test {testcmd.stamp_of(ln)[1]}, current "
            f"{stacked if other_arch.is_stack(ln) else mine}; run again: {again(ln)}): "
            f"{testcmd.stamp_of(ln)[0][:100]}" for ln, s in states(series, lines, every) if s == STALE]

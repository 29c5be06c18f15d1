"""The series as one stack (harness/data/series.toml's ``needs``): ``git am`` of every series in order (1 to 10) on a
clean clone of the pinned tree and of llama.cpp b11434 (when ``rvvdiff series --fetch-b11434`` has brought it); each
series alone, on top of the series it builds on and nothing else; a series that builds on another is refused without
it; the ggml-tests classes build on the same classes as their series; and (long) the stacked tree's
test-quantize-fns built for riscv64 by both stock compilers."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.core.config import PROJECT_ROOT
from harness.ggml import fix_catalogue, source
from harness.upstream import fix_series, formatpatch, ggml_own_tests, other_arch, series_runs, stock


def _out() -> Path:
    return PROJECT_ROOT / "docs" / "upstream" / "series"


@pytest.fixture(scope="module")
def every() -> list[fix_series.Series]:
    return fix_series.load(fix_catalogue.catalogue())


def _files(s: fix_series.Series) -> list[Path]:
    return sorted((_out() / s.stem).glob("*.patch"))


def _b11434() -> source.GgmlSource:
    root = series_runs.b11434_root()
    if not (root / ".rvvdiff-extracted").is_file():
        pytest.skip(f"llama.cpp b11434 is not in the cache ({root}); `rvvdiff series --fetch-b11434` brings it")
    return source.resolve(root)


def _am_stack(tree: source.GgmlSource, every: list[fix_series.Series], tmp_path: Path) -> None:
    base = formatpatch.base_repo(Path(tree.root), tmp_path / "base")
    clone = formatpatch.clone(base, tmp_path / "stack")
    ok, why = formatpatch.am(clone, [f for s in every for f in _files(s)])
    assert ok, f"the stack on {series_runs.tree_name(tree)}: {why}"
    subjects = formatpatch.git(clone, "log", "--format=%s", f"-{sum(len(_files(s)) for s in every)}").stdout.split("\n")
    assert sum(x.startswith("tests: ") for x in subjects) == sum(bool(s.test_patch()) for s in every)
    for s in every:
        clone = formatpatch.clone(base, tmp_path / "alone")
        under = [f for x in fix_series.stack(s, every) for f in _files(x)]
        ok, why = formatpatch.am(clone, under + _files(s))
        assert ok, f"{s.stem} alone (on top of {[x.stem for x in fix_series.stack(s, every)]}): {why}"
        shutil.rmtree(clone)


def test_the_stack_and_each_series_alone_apply_on_the_pinned_tree(every: list[fix_series.Series],
                                                                   tmp_path: Path) -> None:
    _am_stack(source.pinned(), every, tmp_path)


def test_the_stack_and_each_series_alone_apply_on_b11434(every: list[fix_series.Series], tmp_path: Path) -> None:
    _am_stack(_b11434(), every, tmp_path)


def test_a_series_is_refused_without_the_series_it_builds_on(every: list[fix_series.Series], tmp_path: Path) -> None:
    """What "alone" means is not vacuous: a series that needs another does not apply on the bare tree."""
    s = next(x for x in every if x.needs)
    base = formatpatch.base_repo(Path(source.pinned().root), tmp_path / "base", fix_series.touched(s, every))
    ok, why = formatpatch.am(formatpatch.clone(base, tmp_path / "clone"), _files(s))
    assert not ok and "patch" in why.lower()


def test_needs_name_earlier_series_and_the_test_classes_build_on_theirs(every: list[fix_series.Series]) -> None:
    by = {s.name: s for s in every}
    tested = [s for s in every if s.test_patch()]  # a series without a test (SpacemiT's) shares no test helpers
    assert tested[0].needs == [] and all(s.needs for s in tested[1:]), "one stack: every later series builds on one"
    for s in every:
        assert all(by[n].number < s.number for n in s.needs), s.name
        if not s.test_patch():
            assert all(not by[n].test_patch() for n in s.needs), s.name  # it builds on no test's helpers
            continue
        cls = ggml_own_tests.CLASSES[s.test]
        assert cls.needs == tuple(by[n].test for n in s.needs), s.name
        # the class's runs apply what the series builds on: the needed tests and all of their series' fixes
        wanted = [p for x in fix_series.stack(s, every) for p in [x.test_patch(), *(fx.patch for fx in x.fixes)]]
        assert [p.name for p in cls.base_patches() if p.name in {w.name for w in wanted}] == [w.name for w in wanted]
    pages = {s.name: (_out() / f"{s.stem}.md").read_text() for s in every}
    for s in every:
        if s.needs:
            assert "alone means: on top of that series" in pages[s.name], s.stem
    assert "one stack" in (_out() / "README.md").read_text()


def test_a_test_the_selection_cannot_reach_says_so_in_every_fix_it_cannot_show(every: list[fix_series.Series]) -> None:
    for s in every:
        if s.test_patch() and not ggml_own_tests.CLASSES[s.test].reaches:
            assert set(s.unreached) == {fx.name for fx in s.fixes}, s.name
            test = s.test_patch().read_text()
            assert "ggml_backend_dev_get_extra_bufts" in test or s.needs, s.name
            assert "#pragma weak" not in test and "__attribute__((weak))" not in test
            assert "ggml-cpu/" not in fix_series.commits(s)[0][0], s.name  # no internal header, no repack.h change


_MISSING = [why for cc in ("clang", "gcc14") if (why := stock.missing(cc))]


@pytest.mark.skipif(bool(_MISSING), reason=f"the stacked build needs both stock compilers: {_MISSING}")
@pytest.mark.long(25)
def test_the_stacked_tree_builds_its_tests_for_riscv64_with_both_compilers(every: list[fix_series.Series],
                                                                         tmp_path: Path) -> None:
    """The pinned tree with every series (tests and fixes, in order) builds test-quantize-fns for riscv64 with
    clang-22 and GCC 14 (ggml's CMake, zvfh build: the repacked layouts are compiled in). Its own work directory
    (a fresh build of ggml, llama, llama-common and the test: 2026-11-28, two shared cores, clang-22 4 min, GCC 14
    18 min; docs/ggml-tests.md)."""
    patches = [ggml_own_tests.RUNNER_PATCH] + other_arch.stack_patches(every, fixed=True)
    for cc in ("clang", "gcc14"):
        exe = ggml_own_tests.build_patched(patches, ggml_own_tests.work_dir() / "stack", "zvfh", cc)
        assert exe.is_file(), cc


def test_the_shared_test_helpers_land_once_in_the_first_series(every: list[fix_series.Series]) -> None:
    """Each helper is defined by one test commit of the stack (series 1's); the tolerance is derived per type there,
    not one constant."""
    added = {s.name: [ln for ln in fix_series.commits(s)[0][0].splitlines() if ln.startswith("+")] for s in every}
    for helper in ("generate_data_q8_exact(size_t", "vec_dot_rounding_bound(ggml_type", "rounding_scale(ggml_type",
                   "dequantized_dot_product_error(ggml_type"):
        where = [n for n, lines in added.items() if any(ln.startswith("+static") and helper in ln for ln in lines)]
        assert where == [every[0].name], (helper, where)
    text = "\n".join(ln for lines in added.values() for ln in lines)
    assert "MAX_DOT_PRODUCT_ERROR_DEQUANTIZED" not in text and "GGML_TYPE_F16 ? " in text


def test_every_series_has_runs_off_risc_v_recorded_and_said_on_its_page(every: list[fix_series.Series]) -> None:
    """x86-64 and aarch64 lines (rvvdiff other-arch --record) name their architecture; the page
    says the result."""
    for s in every:
        lines = fix_series.recorded_runs(s)
        if not s.test_patch():  # no test to run anywhere: the page says why instead
            assert not lines and "none in this series" in (_out() / f"{s.stem}.md").read_text(), s.name
            continue
        for arch in other_arch.ARCHS:
            assert any(ln.startswith(other_arch.WORDS[arch]) for ln in lines), (s.name, arch)
            # its own test alone (rvvdiff other-arch --series N --record), before and with its fixes, not only the stack's
            own = [ln for ln in lines if ln.startswith(other_arch.WORDS[arch]) and not other_arch.is_stack(ln)]
            sides = {ln[len(other_arch.WORDS[arch]) + 2:].split(":")[0] for ln in own}
            assert sides == {"pinned tree", "with the fixes"}, (s.name, arch, sides)
        said = other_arch.summary(lines)
        assert said and said in (_out() / f"{s.stem}.md").read_text(), s.name
    runs = [other_arch.ArchRun("aarch64", False, False, [" f16 dot product error (ragged rows): FAILED (3.1)"], [])]
    assert "FAILS (f16 dot product error (ragged rows))" in other_arch.record_lines(runs)[0]
    assert other_arch.summary(other_arch.record_lines(runs)).endswith("aarch64: FAILS.")

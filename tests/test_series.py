"""``rvvdiff series``: every fix is in exactly one series, each series applies in order to the pinned tree;
each series is real ``git format-patch`` output (``git am`` of the stack and of each series alone on the trees:
tests/test_series_stack.py); no text for upstream holds a machine-local path or a sentence cut short."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from harness.commands import series
from harness.core.config import PROJECT_ROOT
from harness.ggml import fix_catalogue, patches, source
from harness.upstream import fix_series, formatpatch, series_pages, series_runs

OUT = PROJECT_ROOT / "docs" / "upstream" / "series"


@pytest.fixture(scope="module")
def every() -> list[fix_series.Series]:
    return fix_series.load(fix_catalogue.catalogue())


def test_every_fix_in_one_series_and_each_applies_in_order(every: list[fix_series.Series]) -> None:
    pinned = source.pinned()
    for s in every:
        ok, why = fix_series.applies_in_order(s, pinned)
        assert ok, f"{s.name}: {why}"


def test_a_series_that_no_longer_applies_says_which_patch(every: list[fix_series.Series]) -> None:
    s = every[0]
    pinned = source.pinned()
    fixed = patches.apply(s.fixes[:1], pinned, "fix", s.fixes[0].name)  # the first fix already in the tree
    ok, why = fix_series.applies_in_order(s, fixed)
    assert not ok and s.fixes[0].name in why and "already has this change" in why


def test_every_series_has_a_regression_test_first(every: list[fix_series.Series]) -> None:
    """Each series' first commit is its regression test, or the series has none and says why (its ``test_note``,
    on its page and in the index): SpacemiT's backend, which upstream's CI builds without running any test."""
    for s in every:
        test = s.test_patch()
        if test is None:
            assert len(s.test_note) > 40, f"{s.name}: no regression test and no test_note saying why"
            text = series_pages.description(s, {"t": (True, "")})
            assert f"**Regression test**: none in this series: {s.test_note}." in text, s.name
            assert "Does it fail before the fixes" not in text, s.name  # no run to ask about
            assert not fix_series.commits(s)[0][1].startswith("tests: "), s.name
            continue
        assert test.is_file(), s.name
        first = fix_series.commits(s)[0]
        assert first[1].startswith("tests: ") and "+++ b/tests/" in first[0], s.name
        # only public or test-suite interfaces: no test declares ggml's functions itself (their signatures come
        # from ggml's headers); one that includes an internal header by path says why in its description
        # (fix_series.toml's test_interface) and names the public route it could not take
        assert not re.search(r"^\+.*(extern \"C\"|__attribute__\(\(weak\)\) void )", first[0], re.M), s.name
        assert '#include "ggml-cpu/' not in first[0] or ("by path" in s.test_interface
                                                         and "CPU_REPACK" in s.test_interface), s.name
        text = series_pages.description(s, {"t": (True, "")})
        assert not s.test_interface or s.test_interface in text
        assert not s.test_scope or series_pages.named(s.test_scope, every) in text  # findings named by their commits


def test_the_written_series_are_format_patch_files_of_the_current_generator(every: list[fix_series.Series],
                                                                           tmp_path: Path) -> None:
    """docs/upstream/series/<n>-<name>/ holds what the generator writes now, as ``git format-patch`` writes it: the
    commit's own id on the From line, its author and real date, the subject (numbered in a series of several), the
    diffstat (the same bytes but for the commit id and the date)."""
    pinned = source.pinned()
    # the committed series are examples written as git's test identity (GIT_AUTHOR_NAME / _EMAIL set for the run)
    author = re.search(r"^From: (.+)$", next((OUT / every[0].stem).glob("0001-*.patch")).read_text(), re.M).group(1)
    assert author == formatpatch.TEST_IDENTITY
    for s in every:
        files = fix_series.write_commits(s, Path(pinned.root), tmp_path / "scratch", tmp_path / s.stem, author, every)
        assert [f.name for f in files] == sorted(p.name for p in (OUT / s.stem).glob("*.patch")), s.stem
        for i, f in enumerate(files, 1):
            text = f.read_text()
            assert re.match(r"From [0-9a-f]{40} Mon Sep 17 00:00:00 2001\n", text) and not text.startswith("From 0000")
            number = f" {i}/{len(files)}" if len(files) > 1 else ""  # git format-patch numbers a series of several
            assert re.search(rf"^Subject: \[PATCH{number}\] (ggml-cpu|tests): ", text, re.M), f.name
            assert re.search(r"\n---\n(?: \S.*\| +\d+ [+-]*\n)+ \d+ files? changed", text), f.name  # the diffstat
            assert "\ndiff --git a/" in text and f"\nFrom: {author}\n" in text
            assert _unstamped(text) == _unstamped((OUT / s.stem / f.name).read_text()), \
                f"{s.stem}/{f.name}: run `rvvdiff series` (as git's test identity, A U Thor <author@example.com>)"
        assert len(files) == len(s.fixes) + bool(s.test_patch())  # the regression test first, where there is one


_unstamped = formatpatch.unstamped  # a format-patch file without the commit id and the date


def test_a_series_is_written_as_the_person_who_runs_it_dated_now(every: list[fix_series.Series], tmp_path: Path) -> None:
    """Another identity, another author line; the date is the time of writing, not a made-up one."""
    import datetime
    import email.utils

    s = next(x for x in every if not x.needs)
    files = fix_series.write_commits(s, Path(source.pinned().root), tmp_path / "scratch", tmp_path / "out",
                                     "Ada Lovelace <ada@example.org>", every)
    for f in files:
        head = f.read_text().split("\ndiff --git ")[0]
        assert "\nFrom: Ada Lovelace <ada@example.org>\n" in head and "A U Thor" not in head
        when = email.utils.parsedate_to_datetime(re.search(r"^Date: (.+)$", head, re.M).group(1))
        assert abs((datetime.datetime.now(datetime.UTC) - when).total_seconds()) < 600, when


def test_a_rewrite_keeps_the_date_of_each_patch_that_did_not_change(every: list[fix_series.Series],
                                                                      tmp_path: Path) -> None:
    """Re-rendering a series over its earlier files: a commit whose patch is the same but for the commit id and the
    date keeps the earlier date, one whose patch changed is dated now, and a render over unchanged files rewrites
    none of their bytes (the commit ids too: the series below it take the dates of their own files)."""
    s = next(x for x in every if x.needs and len(fix_series.commits(x)) >= 3)
    root, out, author = Path(source.pinned().root), tmp_path / "series", formatpatch.TEST_IDENTITY
    for x in fix_series.stack(s, every):
        fix_series.write_commits(x, root, tmp_path / "scratch", out / x.stem, author, every)

    def write() -> list[Path]:
        return fix_series.write_commits(s, root, tmp_path / "scratch", out / s.stem, author, every)

    def date(f: Path) -> str:
        return re.search(r"^Date: (.+)$", f.read_text(), re.M).group(1)

    old = "Mon, 4 Jan 2027 10:00:00 +0000"
    for i, f in enumerate(write()):  # an earlier write: its dates, and the second commit's message since changed
        text = re.sub(r"^Date: .+$", f"Date: {old}", f.read_text(), count=1, flags=re.M)
        f.write_text(text.replace("\n---\n", "\nAn earlier message.\n---\n", 1) if i == 1 else text)
    files = write()
    assert [date(f) for i, f in enumerate(files) if i != 1] == [old] * (len(files) - 1)
    assert date(files[1]) != old and "An earlier message." not in files[1].read_text()
    texts = {f.name: f.read_text() for f in files}
    assert {f.name: f.read_text() for f in write()} == texts  # nothing changed: not a byte rewritten


def test_each_committed_page_says_it_is_an_example_of_a_test_identity(every: list[fix_series.Series]) -> None:
    for name in [f"{s.stem}.md" for s in every] + ["README.md"]:
        lines = (OUT / name).read_text().splitlines()
        top = lines[0] if name != "README.md" else lines[2]
        assert top.startswith("> An example, written by `rvvdiff series` as git's test identity "
                              f"({formatpatch.TEST_IDENTITY})"), name
        assert "check, run and rewrite in their own words" in top and "AI usage disclosure" in top, name


def test_git_am_refuses_a_series_whose_context_is_gone(every: list[fix_series.Series], tmp_path: Path) -> None:
    """The am check can fail: the pinned tree with the first fix already in it refuses the series."""
    s = every[0]
    pinned = source.pinned()
    fixed = patches.apply(s.fixes[:1], pinned, "fix", s.fixes[0].name)
    base = formatpatch.base_repo(Path(fixed.root), tmp_path / "base", fix_series.touched(s))
    ok, why = formatpatch.am(formatpatch.clone(base, tmp_path / "clone"), sorted((OUT / s.stem).glob("*.patch")))
    assert not ok and "patch" in why.lower()


def _texts(every: list[fix_series.Series]) -> dict[str, str]:
    """Every text for upstream, rendered now: descriptions, commit messages; and the written files."""
    out = {}
    for s in every:
        out[f"{s.stem}.md (rendered)"] = series_pages.description(
            s, {"pinned llama.cpp 0c1e570": (True, "applies")}, {"pinned llama.cpp 0c1e570": (True, "applies")})
        for i, (_, msg) in enumerate(fix_series.commits(s), 1):
            out[f"{s.stem} commit {i}"] = msg
        out[f"{s.stem}.md"] = (OUT / f"{s.stem}.md").read_text()
        for f in sorted((OUT / s.stem).glob("*.patch")):
            out[f"{s.stem}/{f.name}"] = f.read_text().split("\ndiff --git ")[0]
    out["README.md"] = (OUT / "README.md").read_text()
    return out


def test_no_text_holds_a_local_path_or_a_cut_sentence(every: list[fix_series.Series]) -> None:
    bad = {name: d for name, text in _texts(every).items() if (d := fix_series.text_defects(text))}
    assert not bad


@pytest.mark.parametrize("planted, kind", [
    ("over K = `ne[0]` (e.g. Nobody on this tree: no ggml op calls it.", "cut sentence"),
    ("**Applies to:** /tmp/trees/ggml-2026-08-21 (ggml 0.21.0): yes.", "local path"),
    ("Built in /home/someone/llama.cpp with clang.", "local path"),
    ("It ends at an abbreviation, e.g.", "cut sentence"),
])
def test_the_text_check_fails_on_a_planted_defect(planted: str, kind: str, every: list[fix_series.Series]) -> None:
    text = series_pages.description(every[3], {"t": (True, "")}) + "\n" + planted + "\n"
    assert any(d.startswith(kind) for d in fix_series.text_defects(text))


def test_first_sentence_does_not_stop_at_an_abbreviation() -> None:
    text = ("every op over K = `ne[0]` (e.g. `mul_mat` at decode, i.e. n = 1) returns NaN. Nobody else is hit.")
    assert fix_series.first_sentence(text).endswith("returns NaN.")
    assert fix_series.first_sentence("One. Two.") == "One."


def test_run_test_records_the_verdicts_per_vlen(every: list[fix_series.Series], monkeypatch: pytest.MonkeyPatch) -> None:
    """--run-test: the test class's result as one line per variant (fake runs: no build here)."""
    from harness.upstream import ggml_own_tests
    s = next(x for x in every if x.name == "tail-agnostic-accumulators")
    c = ggml_own_tests.CLASSES[s.test]
    runs = {"pinned": [ggml_own_tests.Run(128, False, 1, 1.0, [" bf16 dot product error (ragged row): FAILED (nan)"])],
            "fixed": [ggml_own_tests.Run(128, True, 0, 1.0)]}
    monkeypatch.setattr(ggml_own_tests, "run_class", lambda name, **kw: ggml_own_tests.Result(
        c, Path("t"), Path("b"), [ggml_own_tests.Variant(n, [], 0.0, [], r) for n, r in runs.items()]))
    lines = series_runs.run_test(s, None, vlens=[128])
    assert lines[0].startswith("pinned tree: VLEN 128 FAILS (bf16 dot product error (ragged row))")
    assert lines[1].startswith("with the fixes: VLEN 128 passes;") and "rvv_ta_all_1s" in lines[1]
    assert not fix_series.text_defects("\n".join(lines))


def test_a_build_the_compiler_cannot_make_is_said_in_the_record(every: list[fix_series.Series],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Series 4's test asks for a zvfbfwma build, which GCC 14 cannot make: its GCC 14 lines are of a zvfh build and
    say why, and read back as runs of that build (fake runs: no build here)."""
    from harness.core.matrix import CANNOT_MAKE
    from harness.upstream import ggml_own_tests, testcmd
    s = next(x for x in every if x.name == "tail-agnostic-accumulators")
    seen: dict = {}

    def fake(name: str, **kw: object) -> ggml_own_tests.Result:
        seen.update(kw)
        c = ggml_own_tests.CLASSES[name]
        c = replace(c, isa=kw["targets"][0].isa.name)  # type: ignore[index]
        return ggml_own_tests.Result(c, Path("t"), Path("b"), [ggml_own_tests.Variant(
            "pinned", [], 0.0, [], [ggml_own_tests.Run(512, False, 1, 1.0, [" q3_K dot product error: FAILED (0.5)"])])])
    monkeypatch.setattr(ggml_own_tests, "run_class", fake)
    line = series_runs.run_test(s, None, compiler="gcc14", vlens=[512])[0]
    assert seen["targets"][0].isa.name == "zvfh" and "by GCC 14 (zvfh build)" in line
    text, test = testcmd.stamp_of(line)  # the line ends with the version of the test the run applied
    assert text.endswith(f"; {CANNOT_MAKE[('gcc14', 'zvfbfwma')]}, so the zvfh build stands in for it."), line
    assert test == testcmd.version(ggml_own_tests.CLASSES[s.test].test_patches())
    run = testcmd.read_runs([line])[0]
    assert (run.isa, run.stress, run.failing) == ("zvfh", True, [512]) and "cannot make" in run.note
    assert not fix_series.text_defects(line)
    clang = series_runs.run_test(s, None, compiler="clang", vlens=[512])[0]
    assert "; " not in testcmd.stamp_of(clang)[0].split("qemu-riscv64")[-1]


def test_a_rerun_replaces_its_compilers_lines_where_they_stood() -> None:
    def line(side: str, cc: str) -> str:
        return (f"{side}: VLEN 512 passes; test-quantize-fns built with ggml's CMake by {cc} (v build), run by ctest "
                "under qemu-riscv64. [test 53b918e3e6e9]")

    gcc = [line("pinned tree", "GCC 14"), line("with the fixes", "GCC 14")]
    clang, off = line("pinned tree", "clang-22"), "x86-64 (the host ...): passes"
    new = [ln.replace("512 passes", "1024 passes") for ln in gcc]
    assert series_runs._replaced([*gcc, off, clang], new) == [*new, off, clang]
    assert series_runs._replaced([off, clang], new[:1]) == [off, clang, new[0]]


def test_run_test_passes_the_series_fixes_and_the_stress_mode(every: list[fix_series.Series],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """--run-test applies all of the series' fixes in its order (series 2: the misaligned-load fix too, which the
    test class alone lacks) and --stress / --no-stress reach the run."""
    from harness.upstream import ggml_own_tests
    s = next(x for x in every if x.name == "vlen-specific-offsets")
    seen: dict = {}

    def fake(name: str, **kw: object) -> ggml_own_tests.Result:
        seen.update(kw)
        return ggml_own_tests.Result(ggml_own_tests.CLASSES[name], Path("t"), Path("b"), [])
    monkeypatch.setattr(ggml_own_tests, "run_class", fake)
    series_runs.run_test(s, None, compiler="gcc14", vlens=[512], asked={"stress": True})
    assert list(seen["fixes"]) == [fx.name for fx in s.fixes] and "iq2_xxs_vl512_misaligned_load" in seen["fixes"]
    assert seen["targets"][0].stress is True and seen["targets"][0].compiler == "gcc14"
    assert "iq2_xxs_vl512_misaligned_load" not in ggml_own_tests.CLASSES[s.test].fixes


def test_the_speed_paragraph_gives_cycles_per_core_and_says_no_board(every: list[fix_series.Series]) -> None:
    from harness.cost.tables import fix_speed
    row = {"case": "c", "vlen": 256, "isa": "zvfh"}
    cost = {"cores": [{"key": "spacemit_x60", "core": "SpacemiT X60 (SpacemiT K1)", "vlen": 256}],
            "head": [{**row, "estimates": {"spacemit_x60": {"cycles": 90.0}}}],
            "base": [{**row, "estimates": {"spacemit_x60": {"cycles": 100.0}}}]}
    assert fix_speed.ratios(cost) == {"SpacemiT X60 (SpacemiT K1), VLEN 256": [0.9, 0.9]}
    s = every[0]
    cycles = {s.fixes[0].name: {"cores": fix_speed.ratios(cost), "isa": "zvfh", "compiler": "clang"}}
    text = series_pages.description(s, {"t": (True, "")}, cycles=cycles)
    para = next(ln for ln in text.splitlines() if ln.startswith("**Speed (an estimate).**"))
    assert "No board was used" in para and "SpacemiT X60 (SpacemiT K1), VLEN 256 0.900" in para
    assert f"Not measured yet: {series_pages.named(f'`{s.fixes[1].name}`', every)}" in text and "direction right" in text
    assert "not measured yet" in series_pages.description(s, {"t": (True, "")})
    assert not fix_series.text_defects(text)


def test_a_case_the_cost_run_could_not_measure_is_named_with_why(every: list[fix_series.Series]) -> None:
    from harness.cost.tables import fix_speed
    why = ("failed: quant_vec_dot [vlen1024-zvfh, on Spike]: the kernel server died of signal 7 under Spike before "
           "answering -- rvvdiff spike runtime: vector load with a misaligned element address (the RVV specification "
           "lets a hart trap here) (mcause 4)")
    lines = fix_speed.unmeasured({"unmeasured": {"base: quant_dot-iq2_xxs-k4096-vlen1024-zvfh": why}})
    assert lines == ["the replaced code, quant_dot-iq2_xxs-k4096 at VLEN 1024: vector load with a misaligned element "
                     "address"]
    s = every[0]
    cycles = {s.fixes[0].name: {"cores": {"SpacemiT X60 (SpacemiT K1), VLEN 256": [1.0, 1.0]}, "isa": "zvfh",
                                "compiler": "clang", "unmeasured": lines}}
    para = next(ln for ln in series_pages.description(s, {"t": (True, "")}, cycles=cycles).splitlines()
                if ln.startswith("**Speed (an estimate).**"))
    assert f"VLEN 256 1.000 (not measured: {lines[0]})" in para


def test_run_test_says_per_vlen_what_fails_where_the_vlens_differ(every: list[fix_series.Series],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.upstream import ggml_own_tests
    s = next(x for x in every if x.name == "vlen-specific-offsets")
    runs = [ggml_own_tests.Run(512, False, 1, 1.0, [" iq2_xxs dot product error (dequantized): FAILED (0.5)"]),
            ggml_own_tests.Run(1024, False, 1, 1.0, [" iq2_xxs dot product error (dequantized): FAILED (0.5)",
                                                " iq3_xxs dot product error (dequantized): FAILED (0.3)"])]
    monkeypatch.setattr(ggml_own_tests, "run_class", lambda name, **kw: ggml_own_tests.Result(
        ggml_own_tests.CLASSES[name], Path("t"), Path("b"), [ggml_own_tests.Variant("pinned", [], 0.0, [], runs)]))
    line = series_runs.run_test(s, None, vlens=[512, 1024])[0]
    assert line.startswith("pinned tree: VLEN 512 FAILS (iq2_xxs dot product error (dequantized)), VLEN 1024 FAILS "
                           "(iq2_xxs dot product error (dequantized); iq3_xxs dot product error (dequantized));"), line


def test_what_failed_is_read_back_per_vlen_and_said_so() -> None:
    """A line that says per VLEN what failed reads back per VLEN, and the texts say what failed at each VLEN; a line
    with one list after the last cell means the same at every failing VLEN."""
    from harness.upstream import testcmd
    tail = "; test-quantize-fns built with ggml's CMake by clang-22 (v build), run by ctest under qemu-riscv64."
    a, b, c = "bf16 dot product error (ragged rows)", "q3_K dot product error", "q6_K dot product error (odd blocks)"
    run = testcmd.read_runs([f"pinned tree: VLEN 128 FAILS ({a}), VLEN 256 passes, VLEN 512 FAILS ({a}; {b}; {c}){tail}"])[0]
    assert run.failed_at == {128: (a,), 512: (a, b, c)} and run.failures == (a, b, c)
    assert testcmd.where_it_fails([run])[0].endswith(f"): VLEN 128 and 512: {a}, and at VLEN 512 also: {b}; {c}")
    same = testcmd.read_runs([f"pinned tree: VLEN 128 FAILS, VLEN 256 FAILS ({a}; {b}){tail}"])[0]
    assert same.failed_at == {128: (a, b), 256: (a, b)}
    assert testcmd.where_it_fails([same])[0].endswith(f"): VLEN 128 and 256: {a}; {b}")
    apart = testcmd.read_runs([f"pinned tree: VLEN 128 FAILS ({a}), VLEN 512 FAILS ({b}){tail}"])[0]
    assert testcmd.where_it_fails([apart])[0].endswith(f"): VLEN 128: {a}, and VLEN 512: {b}")


def test_an_unknown_stock_compiler_is_one_clear_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        series.main(["--run-test", "1-odd-block-counts", "--cc", "clang,gcc13"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "--cc 'clang,gcc13': unknown compiler 'gcc13'; known are clang, gcc14" in err


def test_the_index_says_per_series_whether_its_test_fails_in_a_configuration_like_upstreams_ci(
        every: list[fix_series.Series]) -> None:
    """llama.cpp's RISC-V CI builds with GCC 14 and runs on hardware (no agnostic elements written with ones): from the
    recorded runs, each series says yes, no and why, or that no such run is recorded."""
    from harness.upstream import testcmd

    said = {s.name: testcmd.in_upstream_ci(testcmd.read_runs(fix_series.recorded_runs(s))) for s in every
            if s.test_patch()}
    assert said["odd-block-counts"].startswith("yes: built by GCC 14")
    assert said["repack-vlen512"].startswith("no: it passes before and after")
    assert "no known core" in said["tail-agnostic-accumulators"]
    index = (OUT / "README.md").read_text()
    assert "build-riscv.yml" in index and all(f"configuration like upstream's CI? {w}." in index for w in said.values())
    for s in every:  # a series without a test says so, with why, where the others give their verdict
        if not s.test_patch():
            assert f"the series has no regression test in ggml's suite: {s.test_note}." in index, s.name


def test_a_rerun_replaces_only_the_runs_of_its_own_compiler_and_stress_mode() -> None:
    """A GCC 14 run under the default tail policy is recorded beside GCC 14's stress run, not instead of it."""
    recorded = [
        "pinned tree: VLEN 512 FAILS (x); test-quantize-fns built with ggml's CMake by GCC 14 (v build), run by ctest "
        "under qemu-riscv64 with rvv_ta_all_1s / rvv_ma_all_1s. [test 53b918e3e6e9]",
        "pinned tree: VLEN 512 FAILS (x); test-quantize-fns built with ggml's CMake by clang-22 (v build), run by ctest "
        "under qemu-riscv64. [test 53b918e3e6e9]"]
    plain = recorded[0].replace(" with rvv_ta_all_1s / rvv_ma_all_1s", "").replace("FAILS (x)", "passes")
    assert series_runs._replaced(recorded, [plain]) == [*recorded, plain]
    again = recorded[1].replace("FAILS (x)", "passes")
    assert series_runs._replaced(recorded, [again]) == [recorded[0], again]


def _line(cc: str, cells: str, stress: bool = False, side: str = "pinned tree") -> str:
    return (f"{side}: {cells}; test-quantize-fns built with ggml's CMake by {cc} (v build), run by ctest under "
            f"qemu-riscv64{' with rvv_ta_all_1s / rvv_ma_all_1s' if stress else ''}. [test 53b918e3e6e9]")


def test_the_upstream_ci_verdict_says_what_gcc_14_under_the_default_policy_misses() -> None:
    """From the recorded runs only: yes, with the checks that fail elsewhere but not in upstream's configuration; no,
    with why (only agnostic elements written with ones, or only another compiler's code, make it fail)."""
    from harness.upstream import testcmd

    gcc = _line("GCC 14", "VLEN 512 passes, VLEN 1024 FAILS (a check; b check)")
    gcc_stress = _line("GCC 14", "VLEN 512 FAILS (x check), VLEN 1024 FAILS (a check; b check; x check)", stress=True)
    clang = _line("clang-22", "VLEN 512 FAILS (x check), VLEN 1024 FAILS (a check; b check; x check)")
    got = testcmd.in_upstream_ci(testcmd.read_runs([gcc_stress, clang, gcc]))
    assert got == ("yes: built by GCC 14, it fails under QEMU's default tail policy at VLEN 1024; there it does not "
                   "fail \"x check\" at VLEN 512 and 1024, as GCC 14 with rvv_ta_all_1s / rvv_ma_all_1s and clang-22 do,"
                   " so a CI configured like upstream's does not see that check's bug")
    assert testcmd.in_upstream_ci(testcmd.read_runs([gcc_stress, clang, _line("GCC 14", "VLEN 512 FAILS, VLEN 1024 "
                                                    "FAILS (a check; b check; x check)")])).endswith("at VLEN 512 and 1024")
    passing = _line("GCC 14", "VLEN 512 passes, VLEN 1024 passes")
    no = testcmd.in_upstream_ci(testcmd.read_runs([gcc_stress, clang, passing]))
    assert no.startswith("no: built by GCC 14 it passes under QEMU's default policy at VLEN 512 and 1024, so a CI "
                         "configured like upstream's does not see the bug; it fails with GCC 14 with rvv_ta_all_1s")
    assert no.endswith("under the default policy only clang-22's code fails")
    clang_stress = clang.replace("qemu-riscv64.", "qemu-riscv64 with rvv_ta_all_1s / rvv_ma_all_1s.")
    assert testcmd.in_upstream_ci(testcmd.read_runs([gcc_stress, clang_stress, passing])).endswith(
        "only agnostic elements written with ones make it fail, which no known core does")
    assert testcmd.in_upstream_ci(testcmd.read_runs([gcc_stress, clang])).startswith(
        "not recorded: no run built by GCC 14 under the default policy")

"""harness/upstream/ggml_own_tests.py and harness/data/ggml-tests/*.patch: patches to ggml's own test-quantize-fns that fail
on the pinned tree under QEMU and pass with the fixes (docs/ggml-tests.md)."""

from __future__ import annotations

import os
import shlex
import shutil
from pathlib import Path

import pytest

from harness.core import settings
from harness.core.proc import execute
from harness.upstream import ggml_own_tests, stock

HEADER_KEYS = ("rvvdiff ggml-test:", "class:", "fixes:", "vlens:")


def _pinned() -> Path | None:
    try:
        root = ggml_own_tests.pinned_root()
    except Exception:  # noqa: BLE001 - no cached tree: the dry runs are skipped, with the reason
        return None
    return root if (root / "tests" / "test-quantize-fns.cpp").is_file() else None


PINNED = _pinned()
needs_tree = pytest.mark.skipif(PINNED is None, reason="the pinned llama.cpp tree is not in rvvdiff's cache")


def test_every_class_has_its_patch_with_a_header() -> None:
    on_disk = {p.stem for p in ggml_own_tests.TEST_PATCHES.glob("*.patch")}
    assert on_disk == {c.patch.stem for c in ggml_own_tests.CLASSES.values() if c.patch}
    for c in ggml_own_tests.CLASSES.values():
        if c.patch is None:  # the unmodified test already fails
            assert not c.patched and c.fixes
            continue
        if c.test_patch:  # another class's patch: that class's fixes too, and its own bug must show
            owner = ggml_own_tests.CLASSES[c.test_patch]
            assert set(owner.fixes) <= set(c.fixes) and c.must_fail, c.name
            continue
        head = c.patch.read_text().split("\n--- a/", 1)[0]
        for key in HEADER_KEYS:
            assert any(line.startswith(key) for line in head.splitlines()), (c.name, key)
        assert f"class: {c.name}" in head
        assert f"fixes: {', '.join(c.fixes)}" in head
        # the test itself, and at most what it needs to reach the code: the test's CMake entry, ggml's headers
        # (declarations); never a ggml source file (that would be a fix)
        files = ggml_own_tests.patched_files(c.patch)
        assert "tests/test-quantize-fns.cpp" in files, c.name
        assert all(f in ("tests/test-quantize-fns.cpp", "tests/CMakeLists.txt") or
                   (f.startswith("ggml/src/") and f.endswith(".h")) for f in files), (c.name, files)
        for f in c.fix_patches():
            assert f.is_file(), f
        # No harness jargon in the C++ itself.
        added = [ln for ln in c.patch.read_text().splitlines() if ln.startswith("+") and not ln.startswith("+++")]
        assert added and not [ln for ln in added if "rvvdiff" in ln.lower()]


PATCHED = sorted(c.name for c in ggml_own_tests.CLASSES.values() if c.patched)


@needs_tree
@pytest.mark.parametrize("name", PATCHED)
def test_patch_applies_to_the_pinned_tree(name: str, tmp_path: Path) -> None:
    """On the pinned tree with what the class builds on (its ``needs``: their tests and fixes), and nothing else."""
    c = ggml_own_tests.CLASSES[name]
    assert c.patch is not None and PINNED is not None
    base = c.base_patches()
    tree = PINNED
    if base:
        tree = tmp_path / "base"
        for f in {f for p in base + [c.patch] for f in ggml_own_tests.patched_files(p)}:
            (tree / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(PINNED / f, tree / f)
        for p in base:
            assert ggml_own_tests.check_applies(p, tree) is None, p.name
            execute(ggml_own_tests.patch_argv(p, tree), timeout=60).finished("patch")
    assert ggml_own_tests.check_applies(c.patch, tree) is None


@needs_tree
@pytest.mark.parametrize("name", PATCHED)
def test_fixes_apply_on_top_of_the_test_patch(name: str, tmp_path: Path) -> None:
    """prepare_tree on a copy: the test patch and the fixes together, the cached tree untouched."""
    c = ggml_own_tests.CLASSES[name]
    assert PINNED is not None and c.patch is not None
    files = sorted({f for p in ggml_own_tests.all_patches() for f in ggml_own_tests.patched_files(p)})
    mini = tmp_path / "pinned"
    for f in files:
        (mini / f).parent.mkdir(parents=True, exist_ok=True)
        (mini / f).write_bytes((PINNED / f).read_bytes())
    before = {f: (mini / f).stat().st_ino for f in files}
    tree = tmp_path / "tree"
    changed = ggml_own_tests.prepare_tree(tree, [*c.base_patches(), c.patch, *c.fix_patches()], pinned=mini)
    assert "tests/test-quantize-fns.cpp" in changed
    own = set(ggml_own_tests.patched_files(c.patch))
    assert all((mini / f).read_bytes() == (PINNED / f).read_bytes() for f in files)  # the source is never written
    assert all((mini / f).stat().st_ino == before[f] for f in files)
    assert all((tree / f).stat().st_ino != (mini / f).stat().st_ino for f in changed)  # hard links broken
    # Back to the pinned test alone: every file the test patch does not change is the pinned one again.
    ggml_own_tests.prepare_tree(tree, [*c.base_patches(), c.patch], pinned=mini)
    own |= {f for p in c.base_patches() for f in ggml_own_tests.patched_files(p)}
    for f in files:
        if f not in own:
            assert (tree / f).read_bytes() == (PINNED / f).read_bytes()


@needs_tree
def test_the_runner_patch_lets_ctest_start_every_test_under_the_emulator(tmp_path: Path) -> None:
    """llama.cpp's add_test() commands name $<TARGET_FILE:...>, for which CMake prepends no emulator: the runner
    patch names the targets instead, and applies to the pinned tree."""
    assert PINNED is not None
    assert ggml_own_tests.check_applies(ggml_own_tests.RUNNER_PATCH, PINNED) is None
    assert ggml_own_tests.RUNNER_PATCH in ggml_own_tests.all_patches()
    tree = tmp_path / "tree"
    mini = tmp_path / "pinned"
    (mini / "tests").mkdir(parents=True)
    for f in {f for p in ggml_own_tests.all_patches() for f in ggml_own_tests.patched_files(p)}:
        (mini / f).parent.mkdir(parents=True, exist_ok=True)
        (mini / f).write_bytes((PINNED / f).read_bytes())
    assert "COMMAND $<TARGET_FILE:${TEST_TARGET}>" in (mini / "tests" / "CMakeLists.txt").read_text()
    ggml_own_tests.prepare_tree(tree, [ggml_own_tests.RUNNER_PATCH], pinned=mini)
    cmake = (tree / "tests" / "CMakeLists.txt").read_text()
    assert "$<TARGET_FILE:${TEST_TARGET}>" not in cmake and cmake.count("COMMAND ${TEST_TARGET}\n") == 2


def test_commands_build_the_test_with_the_stock_toolchain(tmp_path: Path) -> None:
    tree = tmp_path / "tree"  # llama.cpp-shaped, ggml/ without ggml.pc.in (like the pinned tree)
    (tree / "ggml" / "include").mkdir(parents=True)
    (tree / "ggml" / "CMakeLists.txt").write_text("")
    (tree / "CMakeLists.txt").write_text("")
    configure = ggml_own_tests.configure_argv(tree, tmp_path / "b")
    assert configure[:5] == ["cmake", "-S", str(tree), "-B", str(tmp_path / "b")]
    defs = dict(a[2:].split("=", 1) for a in configure if a.startswith("-D"))
    assert defs["CMAKE_C_COMPILER"] == "clang-22" and defs["GGML_RVV"] == "ON"
    assert defs["LLAMA_BUILD_TESTS"] == "ON" and defs["LLAMA_BUILD_COMMON"] == "ON"
    assert defs["CMAKE_EXE_LINKER_FLAGS"] == "-static"
    assert sum(a.startswith("-DLLAMA_BUILD_TESTS=") for a in configure) == 1
    assert defs["CMAKE_CROSSCOMPILING_EMULATOR"] == ggml_own_tests.emulator()
    assert Path(ggml_own_tests.emulator()).name.startswith("qemu-riscv64")
    c = ggml_own_tests.CLASSES["odd_block_count"]
    argv = ggml_own_tests.run_argv(c, tmp_path / "b", 256)
    assert argv[0] == "env" and argv[1].startswith("QEMU_CPU=rv64,v=true,vlen=256,elen=64,")
    assert argv[2:8] == ["ctest", "--test-dir", str(tmp_path / "b"), "-R", "^test-quantize-fns$", "--no-tests=error"]
    assert ggml_own_tests.build_argv(tmp_path / "b", c.target) == [
        "nice", "-n", "5", "cmake", "--build", str(tmp_path / "b"), "--target", "test-quantize-fns", "-j2"]


@needs_tree
def test_commands_are_printed_before_the_tree_copy_exists(tmp_path: Path) -> None:
    lines = ggml_own_tests.commands("odd_block_count", tmp_path)
    assert not (tmp_path / "tree").exists()
    assert shlex.split(lines[1])[-1] == str(ggml_own_tests.RUNNER_PATCH)
    assert shlex.split(lines[3])[:5] == ["cmake", "-S", str(tmp_path / "tree"), "-B", str(tmp_path / "build-v")]


def test_a_run_starts_the_printed_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """run_test runs what commands() prints: ctest with QEMU_CPU in its environment (here a ctest in its place
    that says FAILED with QEMU_CPU and its arguments, then ctest's own summary): a stress class has the tail/mask
    part of the stress mode, no rvv_vl_half_avl; ctest's summary line is not a failure of the test."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "ctest"
    fake.write_text('#!/bin/sh\necho "dot product error: FAILED $QEMU_CPU $*"\n'
                    'echo "The following tests FAILED:"\necho "  49 - test-quantize-fns (Failed)"\nexit 8\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    c = ggml_own_tests.CLASSES["tail_agnostic_accumulator"]
    printed = ggml_own_tests.run_argv(c, tmp_path / "b", 512)
    cpu = printed[1].split("=", 1)[1]
    assert "rvv_ta_all_1s=true,rvv_ma_all_1s=true" in cpu and "rvv_vl_half_avl" not in cpu
    run = ggml_own_tests.run_test(c, tmp_path / "b", 512)
    assert not run.passed and run.returncode == 8
    assert run.failures == [f"dot product error: FAILED {cpu} " + " ".join(printed[3:])]


@pytest.mark.skipif(shutil.which("ctest") is None, reason="no ctest (CMake) on this host")
def test_a_build_without_the_test_is_a_failure(tmp_path: Path) -> None:
    """ctest exits 0 when -R matches no test; the run asks it not to (--no-tests=error), so a build that lacks
    the test cannot pass."""
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "CTestTestfile.cmake").write_text("# no tests\n")
    run = ggml_own_tests.run_test(ggml_own_tests.CLASSES["odd_block_count"], tmp_path / "b", 256)
    assert not run.passed and run.returncode != 0 and run.failures


def test_a_crash_is_said_as_ctest_says_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ctest").write_text('#!/bin/sh\necho "1/1 Test #49: test-quantize-fns ***Exception: SegFault  1.2 sec"\n'
                                   'echo "The following tests FAILED:"\nexit 8\n')
    (bin_dir / "ctest").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    run = ggml_own_tests.run_test(ggml_own_tests.CLASSES["odd_block_count"], tmp_path / "b", 256)
    assert not run.passed and run.failures == ["1/1 Test #49: test-quantize-fns ***Exception: SegFault  1.2 sec"]


_MISSING = stock.missing("clang")


@needs_tree
@pytest.mark.skipif(_MISSING is not None, reason=f"end-to-end ggml test build skipped: {_MISSING}")
@pytest.mark.skipif(settings.get("SKIP_GGMLTESTS_E2E") == "1", reason="RVVDIFF_SKIP_GGMLTESTS_E2E=1")
@pytest.mark.long(25)
def test_odd_block_count_fails_on_the_pinned_tree_and_passes_with_the_fixes() -> None:
    """End to end: builds llama.cpp's test-quantize-fns with clang-22 (the first build of llama + common
    takes about 15 min on two cores; the work directory is reused, later builds take about 1 min),
    runs it at VLEN 128 and 256."""
    res = ggml_own_tests.run_class("odd_block_count",
                                   targets=ggml_own_tests.CLASSES["odd_block_count"].targets(vlens=(128, 256)))
    pinned, fixed = res.variants
    assert [r.passed for r in pinned.runs] == [False, False], ggml_own_tests.table(res)
    assert [r.passed for r in fixed.runs] == [True, True], ggml_own_tests.table(res)
    for r in pinned.runs:
        names = {f.split()[0] for f in r.failures}
        assert names == {"iq4_nl", "mxfp4"}, r.failures
    assert "ggml/src/ggml-cpu/arch/riscv/quants.c" in fixed.rebuilt and pinned.build_seconds >= 0
    assert all(shlex.split(ln.split("   #")[0]) for ln in ggml_own_tests.commands("odd_block_count"))


def test_no_test_patch_hides_its_check_from_gcc() -> None:
    """ggml's CMake gives the tests no -march, and GCC 14 defines __riscv_v_intrinsic only with V in -march (clang on
    every RISC-V target): a check guarded by it is compiled out of GCC's builds and the test passes vacuously there
    (series 5 and 6's first GCC 14 runs did)."""
    for p in ggml_own_tests.all_patches():
        if p.parent == ggml_own_tests.TEST_PATCHES:
            added = [ln for ln in p.read_text().splitlines() if ln.startswith("+#if") or ln.startswith("+#elif")]
            assert not [ln for ln in added if "defined(__riscv_v_intrinsic)" in ln], p.name

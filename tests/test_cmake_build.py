"""The one room that drives CMake (harness/toolchain/cmake_build.py): what a build is configured with, the builds
that come next (SpacemiT's backend, a distribution's dispatch build) expressed without a new driver, and a real
configure and build of a small project with a flag on one target."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.toolchain.cmake_build import (
    CONFIGURE_STAMP,
    TARGET_FLAGS_FILE,
    CmakeBuild,
    build,
    configure,
    target_flags_cmake,
    toolchain_file,
)
from harness.toolchain.compilers import Compiler

CC = Compiler("/w/cc", "/w/c++", "/w/ar", "/w/ranlib", "a test compiler", "test")


def defines(argv: list[str]) -> list[tuple[str, str]]:
    return [tuple(a[2:].split("=", 1)) for a in argv if a.startswith("-D")]  # type: ignore[misc]


def test_one_toolchain_file_for_a_compiler(tmp_path: Path) -> None:
    f = toolchain_file(tmp_path, CC)
    assert f == tmp_path / "riscv64-toolchain.cmake"
    text = f.read_text()
    for line in ("set(CMAKE_SYSTEM_NAME Linux)", "set(CMAKE_SYSTEM_PROCESSOR riscv64)", "set(CMAKE_C_COMPILER /w/cc)",
                 "set(CMAKE_CXX_COMPILER /w/c++)", 'set(CMAKE_AR /w/ar CACHE FILEPATH "")'):
        assert line in text.splitlines()
    assert "set(CMAKE_SYSTEM_PROCESSOR aarch64)" in toolchain_file(tmp_path, CC, "aarch64").read_text()


def test_the_spacemit_build_is_one_more_cmake_build(tmp_path: Path) -> None:
    """SpacemiT's backend: its options, -std=c++20 on ggml-cpu's C++ files, an assembler-macro include and a
    -march with _xsmtvdot after ggml's own (a flag on one target, added once the target exists)."""
    flags = ("$<$<COMPILE_LANGUAGE:CXX>:-std=c++20>", "-include", "/x/ime-macros.h",
             "-march=rv64gcv_zfh_zvfh_zba_zicbop_zihintpause_xsmtvdot")
    b = CmakeBuild(Path("/src"), tmp_path, {"GGML_CPU_RISCV64_SPACEMIT": "ON", "GGML_CPU_REPACK": "OFF"}, compiler=CC,
                   target_flags={"ggml-cpu": flags})
    argv = b.configure_argv()
    assert argv[:5] == ["cmake", "-S", "/src", "-B", str(tmp_path)]
    assert defines(argv) == [("CMAKE_TOOLCHAIN_FILE", str(tmp_path / "riscv64-toolchain.cmake")),
                             ("GGML_CPU_RISCV64_SPACEMIT", "ON"), ("GGML_CPU_REPACK", "OFF"),
                             ("CMAKE_PROJECT_INCLUDE", str(tmp_path / TARGET_FLAGS_FILE))]
    code = target_flags_cmake(b.target_flags)
    assert f"target_compile_options(ggml-cpu PRIVATE {' '.join(flags)})" in code
    assert "cmake_language(DEFER CALL rvvdiff_target_flags)" in code and "if(NOT TARGET ggml-cpu)" in code


def test_the_dispatch_build_is_one_more_cmake_build(tmp_path: Path) -> None:
    """A distribution's dispatch build: shared libraries, the CPU variants loaded at run time, a GCC (glibc)."""
    b = CmakeBuild(Path("/src"), tmp_path, {"BUILD_SHARED_LIBS": "ON", "GGML_BACKEND_DL": "ON",
                                            "GGML_CPU_ALL_VARIANTS": "ON"}, compiler=CC, cxx_flags=("-O2",))
    assert dict(defines(b.configure_argv()))["BUILD_SHARED_LIBS"] == "ON"
    assert dict(defines(b.configure_argv()))["CMAKE_CXX_FLAGS"] == "-O2"
    assert b.build_argv(("ggml-cpu",), jobs=3, nice=5) == [
        "nice", "-n", "5", "cmake", "--build", str(tmp_path), "--target", "ggml-cpu", "-j3"]
    with pytest.raises(ValueError, match="CMAKE_CXX_FLAGS is given twice"):
        CmakeBuild(Path("/src"), tmp_path, {"CMAKE_CXX_FLAGS": "-O1"}, cxx_flags=("-O2",))


def test_options_another_build_adds_come_last() -> None:
    b = CmakeBuild(Path("/s"), Path("/b"), {"A": "1", "T": "OFF", "C": "3"})
    assert defines(b.with_options({"T": "ON", "E": "5"}).without("C").configure_argv()) == [
        ("A", "1"), ("T", "ON"), ("E", "5")]


@pytest.mark.skipif(shutil.which("cmake") is None or shutil.which("cc") is None, reason="no cmake or cc on this host")
def test_a_flag_on_one_target_reaches_that_target_alone(tmp_path: Path) -> None:
    """A real configure and build: the target's flag is on its files only, after its own options; the same
    configure again is not redone (``reuse``), another one is, afresh."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.19)\nproject(t C)\n"
                                        "add_library(one STATIC one.c)\nadd_library(two STATIC two.c)\n"
                                        "target_compile_options(one PRIVATE -DWHICH=0)\n")
    (src / "one.c").write_text("#if WHICH != 1\n#error the flag did not come after the target's own\n#endif\n"
                               "int one(void) { return WHICH; }\n")
    (src / "two.c").write_text("#ifdef WHICH\n#error the flag reached another target\n#endif\nint two(void) { return 2; }\n")
    b = CmakeBuild(src, tmp_path / "b", {"CMAKE_BUILD_TYPE": "Release"}, target_flags={"one": ("-UWHICH", "-DWHICH=1")})
    log = tmp_path / "log"
    assert configure(b, what="test", log=log)
    build(b, ("one", "two"), what="building the test project", log=log, timeout=600)
    assert (b.dir / CONFIGURE_STAMP).is_file()
    assert not configure(b, what="test", log=log, reuse=True)
    assert configure(b.with_options({"CMAKE_BUILD_TYPE": "Debug"}), what="test", log=log, reuse=True)
    assert "configuring it afresh" in log.read_text()

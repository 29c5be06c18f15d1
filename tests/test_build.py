"""Sources and builds: validation, mutant trees, build failures, concurrent builders."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import helpers
import pytest
from launch import pytest_in

from harness.core import config
from harness.core.proc import CommandError
from harness.emulators.qemu import emulation_gap
from harness.ggml import mutants, source
from harness.toolchain.builds import BuildError, IsaUnavailable, build_dir, build_key, ensure_built
from harness.toolchain.cmake import (
    cmake_files,
    cmake_options,
    declared_options,
    march_extensions,
    march_extras,
    march_mismatch,
    plan_options,
    read_variables,
    set_variables,
)
from harness.toolchain.compilers import compiler
from harness.toolchain.server import adapter_kernels, server_objects

DATA = Path(__file__).parent / "data"


def test_pinned_tree_is_verified_and_described() -> None:
    s = source.pinned()
    assert s.pinned and s.commit == source.PINNED_COMMIT
    assert s.version == "0.25.3"
    assert (s.root / ".rvvdiff-extracted").read_text().startswith(source.PINNED_SDIST)
    for rel in source.RVV_SOURCES:
        assert (s.ggml / rel).is_file()


def test_resolve_accepts_the_ggml_folder_of_a_llama_checkout() -> None:
    s = source.pinned()
    r = source.resolve(s.ggml)
    assert r.root == s.root and r.ggml == s.ggml


@pytest.mark.parametrize("make, message", [
    (lambda p: p, "not a llama.cpp or ggml checkout"),
    (lambda p: (p / "ggml/src/ggml-cpu").mkdir(parents=True), "no RISC-V Vector sources"),
])
def test_resolve_rejects_unusable_trees(tmp_path: Path, make, message: str) -> None:
    make(tmp_path)
    with pytest.raises(source.SourceError, match=message):
        source.resolve(tmp_path)


def test_mutant_tree_leaves_the_original_untouched() -> None:
    s = source.pinned()
    before = (s.cpu_dir / "vec.cpp").read_bytes()
    m = mutants.apply(mutants.Mutant("harmless", DATA / "harmless.patch"), s)
    assert (s.cpu_dir / "vec.cpp").read_bytes() == before
    assert b"a harmless change" in (m.cpu_dir / "vec.cpp").read_bytes()
    assert m.content_hash() != s.content_hash()


def test_failed_build_names_the_command_and_the_compiler_error() -> None:
    tree = mutants.apply(mutants.Mutant("syntax_error", DATA / "syntax_error.patch"), source.pinned())
    with pytest.raises(BuildError) as e:
        ensure_built(tree, config.ISA_BUILDS["zvfh"])
    msg = str(e.value)
    assert "compiling ggml (zvfh) exited with code" in msg
    assert "argv: cmake --build" in msg
    assert "vec.cpp:4" in msg and "error:" in msg
    assert "rvvdiff-build.log" in msg


_BUILD = """
import sys
from pathlib import Path
from harness.toolchain.builds import ensure_built
from harness.core import config
from harness.ggml import mutants, source
tree = mutants.apply(mutants.Mutant("harmless", Path(sys.argv[1])), source.pinned())
print(ensure_built(tree, config.ISA_BUILDS["v"]).server)
"""


def test_concurrent_builders_build_once() -> None:
    """Two processes (as two xdist workers would) ask for the same new build at once."""
    tree = mutants.apply(mutants.Mutant("harmless", DATA / "harmless.patch"), source.pinned())
    d = build_dir(tree, config.ISA_BUILDS["v"])
    log = d / "rvvdiff-build.log"
    builds_before = log.read_text().count("=== build of") if log.exists() else 0
    stamp = d / "rvvdiff-stamp.json"
    if stamp.exists():
        stamp.unlink()  # force a (cheap, incremental) rebuild of the libraries
    procs = [subprocess.Popen([sys.executable, "-c", _BUILD, str(DATA / "harmless.patch")],
                              stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=3600)[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert outs[0] == outs[1] and Path(outs[0]).exists()
    assert log.read_text().count("=== build of") == builds_before + 1


# ------------------------------------------------- the build follows the tree's era

_CMAKE = """
cmake_minimum_required(VERSION 3.14)
set(GGML_VERSION_MAJOR 0)
set(GGML_VERSION_MINOR 9)
set(GGML_VERSION_PATCH 4)
option(GGML_RVV              "ggml: enable rvv"              ON)
option(GGML_RV_ZFH           "ggml: enable riscv zfh # not a comment"  ON)
  option( GGML_RV_ZVFH
          "ggml: enable riscv zvfh"
          ON)
# option(GGML_COMMENTED_OUT "a line comment" ON)
#[[ option(GGML_IN_BRACKET_COMMENT "a bracket comment" ON) ]]
cmake_dependent_option(GGML_DEPENDENT "depends" ON "GGML_RVV" OFF)
option(GGML_NO_DEFAULT "no default given")
option(GGML_LLAMAFILE "ggml: use LLAMAFILE" ${GGML_LLAMAFILE_DEFAULT})
"""


def test_declared_options_reads_option_commands_not_comments() -> None:
    assert declared_options(_CMAKE) == {
        "GGML_RVV": "ON", "GGML_RV_ZFH": "ON", "GGML_RV_ZVFH": "ON", "GGML_DEPENDENT": "ON",
        "GGML_NO_DEFAULT": "OFF", "GGML_LLAMAFILE": "${GGML_LLAMAFILE_DEFAULT}"}


def _tree(tmp_path: Path, cmake: str) -> source.GgmlSource:
    (tmp_path / "CMakeLists.txt").write_text(cmake)
    return source.GgmlSource(tmp_path, tmp_path, "synthetic", "none")


def test_an_isa_build_needing_an_undeclared_option_is_unavailable(tmp_path: Path, monkeypatch) -> None:
    """A tree from before GGML_RV_ZVFBFWMA: v and zvfh are planned (the OFF option simply not
    passed, and recorded), zvfbfwma cannot be expressed - ensure_built says so before building."""
    tree = _tree(tmp_path, _CMAKE)
    plans = {n: plan_options(tree, i) for n, i in config.ISA_BUILDS.items()}
    for n in ("v", "zvfh"):
        assert plans[n].unavailable is None
        assert "GGML_RV_ZVFBFWMA" in plans[n].undeclared and "GGML_RV_ZVFBFWMA" not in plans[n].passed
        assert plans[n].passed["GGML_RV_ZVFH"] == config.ISA_BUILDS[n].cmake["GGML_RV_ZVFH"]
        assert plans[n].passed["CMAKE_BUILD_TYPE"] == "Release"  # CMake's own: always passed
        assert "GGML_CPU_REPACK" in plans[n].undeclared  # wanted, neither declared nor read here: not passed
    assert plans["zvfbfwma"].unavailable == (
        f"no CMake file of ggml 0.9.4 at {tmp_path} reads GGML_RV_ZVFBFWMA (no option(), no if() or ${{}} of it "
        f"outside comments): its CMake cannot build zvfbfwma ({config.ISA_BUILDS['zvfbfwma'].summary})")
    monkeypatch.setenv("RVVDIFF_CACHE", str(tmp_path / "cache"))
    with pytest.raises(IsaUnavailable, match="no CMake file of .* reads GGML_RV_ZVFBFWMA"):
        ensure_built(tree, config.ISA_BUILDS["zvfbfwma"])


_CPU_CMAKE = """
if (GGML_RVV)
    set(MARCH_STR "rv64gc_v")
    if (GGML_RV_ZVFH AND (NOT GGML_XTHEADVECTOR OR (DEFINED GGML_NESTED)))
        string(APPEND MARCH_STR "_zvfh")
    endif()
    %s
    list(APPEND ARCH_FLAGS "-march=${MARCH_STR}" $<$<BOOL:${GGML_GENEX}>:-DX>)
elseif ($CACHE{GGML_CACHED})
    message(STATUS "GGML_IN_A_MESSAGE only")
endif()
while (GGML_LOOP)
endwhile()
"""


def test_read_variables_are_tests_and_expansions_outside_comments() -> None:
    names = read_variables(_CMAKE + _CPU_CMAKE % '# if (GGML_RV_ZVFBFWMA) string(APPEND MARCH_STR "_zvfbfwma")')
    assert {"GGML_RVV", "GGML_RV_ZVFH", "GGML_XTHEADVECTOR", "GGML_NESTED", "MARCH_STR", "GGML_GENEX",
            "GGML_CACHED", "GGML_LOOP", "GGML_LLAMAFILE_DEFAULT"} <= names
    assert not {"GGML_RV_ZVFBFWMA", "GGML_IN_A_MESSAGE", "GGML_COMMENTED_OUT", "GGML_IN_BRACKET_COMMENT",
                "GGML_RV_ZFH", "GGML_NO_DEFAULT"} & names  # comments, quoted text and option() alone are no reads


def _tree_with_cpu(tmp_path: Path, cpu_cmake: str) -> source.GgmlSource:
    tree = _tree(tmp_path, _CMAKE)
    (tree.cpu_dir).mkdir(parents=True)
    (tree.cpu_dir / "CMakeLists.txt").write_text(cpu_cmake)
    return tree


def test_an_option_read_but_not_declared_is_passed(tmp_path: Path) -> None:
    """A tree of 2026-02: ggml-cpu's CMake appends _zvfbfwma under if (GGML_RV_ZVFBFWMA), but no
    option() declares it; -DGGML_RV_ZVFBFWMA=ON builds zvfbfwma there (the -march check judges the rest)."""
    tree = _tree_with_cpu(tmp_path, _CPU_CMAKE % 'if (GGML_RV_ZVFBFWMA)\n string(APPEND MARCH_STR "_zvfbfwma")\nendif()')
    plans = {n: plan_options(tree, i) for n, i in config.ISA_BUILDS.items()}
    for n, isa in config.ISA_BUILDS.items():
        assert plans[n].unavailable is None
        assert plans[n].passed["GGML_RV_ZVFBFWMA"] == isa.cmake["GGML_RV_ZVFBFWMA"]
        assert plans[n].read_only == {"GGML_RV_ZVFBFWMA": "src/ggml-cpu/CMakeLists.txt"}
        assert "GGML_CPU_REPACK" in plans[n].undeclared  # neither declared nor read: still not passed


def test_a_comment_only_mention_is_not_a_read(tmp_path: Path) -> None:
    tree = _tree_with_cpu(tmp_path, _CPU_CMAKE % '#[[ if (GGML_RV_ZVFBFWMA) ]] # ${GGML_RV_ZVFBFWMA}')
    plan = plan_options(tree, config.ISA_BUILDS["zvfbfwma"])
    assert plan.unavailable is not None and plan.unavailable.startswith(
        f"no CMake file of ggml 0.9.4 at {tmp_path} reads GGML_RV_ZVFBFWMA")
    assert "GGML_RV_ZVFBFWMA" in plan.undeclared and not plan.read_only


# SpacemiT's backend in ggml-cpu's CMake, as trees before 2026-05 have it (the builder sets the IME level) and as later
# ones do (a probe of the assembler sets it); the zba option arrived with the later ones.
_SPACEMIT_2026_02 = """
if (GGML_CPU_RISCV64_SPACEMIT)
    target_compile_definitions(ggml-cpu PRIVATE GGML_USE_CPU_RISCV64_SPACEMIT ${RISCV64_SPACEMIT_IME_SPEC})
endif()
if (GGML_RV_ZFH)
endif()
if (GGML_CPU_REPACK)
endif()
"""
_FIND_SMTIME = """
list(APPEND RISCV64_SPACEMIT_IME_SPEC "")  # the probe's outcome, not the builder's
if (SPACEMIT_RISCV_COMPILER_SUPPORT_IME1)
    set(RISCV64_SPACEMIT_IME_SPEC "RISCV64_SPACEMIT_IME1")
endif()
if (GGML_RV_ZBA)
endif()
"""


def test_set_variables_are_set_and_list_append_outside_comments() -> None:
    assert set_variables(_FIND_SMTIME + '# set(COMMENTED x)\nlist(LENGTH L n)\nlist(PREPEND P a)') == \
        {"RISCV64_SPACEMIT_IME_SPEC", "P"}


def test_the_spacemit_build_of_a_tree_before_its_probe(tmp_path: Path) -> None:
    """Before 2026-05 the tree reads RISCV64_SPACEMIT_IME_SPEC and leaves it to the builder, as SpacemiT's document
    of that era does (IME1), and has no GGML_RV_ZBA: the build is made, with the setting passed and zba left out.
    A tree whose probe sets the variable gets nothing passed for it, and nothing is said to be missing."""
    for d in ("old", "new", "none"):
        (tmp_path / d).mkdir()
    old = _tree_with_cpu(tmp_path / "old", _CPU_CMAKE % "" + _SPACEMIT_2026_02)
    plan = plan_options(old, config.SPACEMIT)
    assert plan.unavailable is None
    assert plan.passed["RISCV64_SPACEMIT_IME_SPEC"] == "RISCV64_SPACEMIT_IME1"
    assert plan.read_only["RISCV64_SPACEMIT_IME_SPEC"] == "src/ggml-cpu/CMakeLists.txt"
    assert "GGML_RV_ZBA" in plan.undeclared and "GGML_RV_ZBA" not in plan.passed
    new = _tree_with_cpu(tmp_path / "new", _CPU_CMAKE % "" + _SPACEMIT_2026_02)
    (new.cpu_dir / "cmake").mkdir()
    (new.cpu_dir / "cmake" / "FindSMTIME.cmake").write_text(_FIND_SMTIME)
    plan = plan_options(new, config.SPACEMIT)
    assert plan.unavailable is None and plan.passed["GGML_RV_ZBA"] == "ON"
    assert "RISCV64_SPACEMIT_IME_SPEC" not in plan.passed and "RISCV64_SPACEMIT_IME_SPEC" not in plan.undeclared
    # an option the build needs is still needed: without GGML_CPU_RISCV64_SPACEMIT there is no such build
    none = _tree_with_cpu(tmp_path / "none", _CPU_CMAKE % "")
    assert "GGML_CPU_RISCV64_SPACEMIT" in (plan_options(none, config.SPACEMIT).unavailable or "")


def test_the_cmake_files_read_are_covered_by_the_content_hash() -> None:
    s = source.pinned()
    files = cmake_files(s)
    assert s.cpu_dir / "CMakeLists.txt" in files and s.ggml / "src" / "CMakeLists.txt" in files
    assert set(files) <= set(source._hashed_files(s.root, s.ggml))


def test_the_pinned_tree_gets_every_option_it_declares_and_keeps_its_build_key() -> None:
    s = source.pinned()
    for isa in config.ISA_BUILDS.values():
        plan = plan_options(s, isa)
        assert plan.unavailable is None
        assert plan.passed == {k: v for k, v in cmake_options(isa).items() if k != "LLAMA_CURL"}
        assert set(plan.undeclared) == {"LLAMA_CURL"}  # a deprecated llama option there, not an option()
    # The key hashes the wanted options (what is passed follows from them and the hashed CMake files),
    # so a tree that declares them all keeps the key, and the libraries, it had before the derivation.
    isa, cc = config.ISA_BUILDS["zvfh"], compiler()
    wanted = hashlib.sha256((s.content_hash() + json.dumps(cmake_options(isa), sort_keys=True) + cc.identity).encode())
    assert build_key(s, isa, cc) == wanted.hexdigest()


@pytest.mark.parametrize("march, extensions", [
    ("rv64gc_zfh_v_zvfh_zicbop", {"v", "zfh", "zvfh", "zicbop", "c", "i", "m", "a", "f", "d"}),  # 2025
    ("rv64gcv_zfh_zvfh_zvfbfwma_zicbop_zihintpause_zba", {"v", "zfh", "zvfh", "zvfbfwma", "zicbop", "zihintpause", "zba"}),
    ("-march=rv64gc_v_zicbop_zihintpause", {"v", "zicbop", "zihintpause"}),
    ("rv64gc", {"c", "zicsr", "zifencei"}),
])
def test_march_extensions_in_both_eras(march: str, extensions: set[str]) -> None:
    assert extensions <= march_extensions(march)
    assert not {"v", "zfh"} & (extensions ^ march_extensions(march))  # nothing vector or half-float added


@pytest.mark.parametrize("isa, march, problem", [
    ("v", "rv64gc_v_zicbop_zihintpause", None),
    ("v", "rv64gcv_zicbop_zihintpause", None),
    ("v", "rv64gc_zfh_v_zvfh_zicbop", "has zfh, zvfh"),
    ("zvfh", "rv64gc_zfh_v_zvfh_zicbop", None),
    ("zvfh", "rv64gcv_zfh_zvfh_zicbop_zihintpause", None),
    ("zvfh", "rv64gcv_zfh_zvfh_zvfbfwma_zicbop", "has zvfbfwma"),
    ("zvfh", "rv64gc_zfh_zicbop", "lacks v, zvfh"),
    ("zvfbfwma", "rv64gcv_zfh_zvfh_zvfbfwma_zicbop_zihintpause_zba", None),
    ("zvfbfwma", "rv64gc_zfh_v_zvfh_zicbop", "lacks zvfbfwma"),
    ("zvfh", None, "compiled without -march"),
])
def test_march_is_checked_against_what_the_isa_build_promises(isa: str, march: str | None, problem: str | None) -> None:
    why = march_mismatch(config.ISA_BUILDS[isa], march)
    if problem is None:
        assert why is None
    else:
        assert why is not None and problem in why


def test_extensions_the_tree_adds_on_its_own_are_extras() -> None:
    assert march_extras(config.ISA_BUILDS["zvfh"], "rv64gcv_zfh_zvfh_zicbop_zihintpause_zba") == (
        "zba", "zicbop", "zihintpause")
    assert march_extras(config.ISA_BUILDS["zvfbfwma"], "rv64gcv_zfh_zvfh_zvfbfwma") == ()
    assert emulation_gap(helpers.pinned_build("zvfh")) is None  # this QEMU runs zicbop / zihintpause


# ------------------------------------- one adapter that cannot compile costs its own kernels

_BROKEN_ADAPTER = """#include "server.h"
namespace { uint32_t k_broken(rvvdiff::Call & c) { return rvvdiff_no_such_symbol(c); } }
RVVDIFF_KERNEL("broken_kernel", k_broken);
"""


def test_an_adapter_that_does_not_compile_is_left_out_and_remembered(tmp_path: Path) -> None:
    b = helpers.pinned_build("zvfh")
    adapter = tmp_path / "k_broken.cpp"
    adapter.write_text(_BROKEN_ADAPTER)
    assert adapter_kernels(adapter) == ("broken_kernel",)
    d = tmp_path / "build"
    d.mkdir()
    objs, failed = server_objects(d, compiler(), b.cflags, b.key, sources=[adapter])
    assert objs == {} and list(failed) == ["k_broken.cpp"]
    assert failed["k_broken.cpp"].startswith("k_broken.cpp:2:") and "rvvdiff_no_such_symbol" in failed["k_broken.cpp"]
    assert "adapter k_broken.cpp does not compile" in (d / "rvvdiff-build.log").read_text()
    compiles = (d / "rvvdiff-build.log").read_text().count("$ ")
    assert server_objects(d, compiler(), b.cflags, b.key, sources=[adapter])[1] == failed  # cached, not retried
    assert (d / "rvvdiff-build.log").read_text().count("$ ") == compiles
    core = tmp_path / "core_broken.cpp"  # not an adapter: its failure is the build's
    core.write_text(_BROKEN_ADAPTER)
    with pytest.raises(CommandError, match="rvvdiff_no_such_symbol"):
        server_objects(d, compiler(), b.cflags, b.key, sources=[core])


def test_a_kernel_of_a_failed_adapter_is_missing_with_the_reason() -> None:
    b = dataclasses.replace(helpers.pinned_build("zvfh"),
                            failed_adapters={"k_quants.cpp": "k_quants.cpp:12:3: error: use of undeclared identifier 'X'"})
    why = b.missing_kernel("quant_vec_dot")
    assert why is not None and why.startswith("not in this build: adapter k_quants.cpp does not compile against ggml 0.25.3")
    assert "(k_quants.cpp:12:3: error: use of undeclared identifier 'X')" in why and str(b.log) in why
    assert b.missing_kernel("vec_dot_f16") is None


# ------------------------------------------------------ one clear error per ISA build

_DIFF_TEST = """
import numpy as np
from harness.emulators.protocol import In, Out

def test_dot(target):
    x = np.arange(10, dtype=np.float32)
    r = target.call("vec_dot_f32", [10], [], [In(x), In(x), Out(4)])
    assert r.output(0, np.float32)[0] == 285.0
"""


def test_a_failed_build_is_one_error_and_skips_the_rest_across_workers(pytester: pytest.Pytester) -> None:
    """The syntax-error mutant (built by test_failed_build_... above) under two xdist workers: one
    setup error with the compiler's message, the other tests skipped pointing at it, exit status 1."""
    tree = mutants.apply(mutants.Mutant("syntax_error", DATA / "syntax_error.patch"), source.pinned())
    pytester.makepyfile(test_diff=_DIFF_TEST)
    r = pytest_in(pytester, "--ggml-src", str(tree.root), "--isa", "zvfh", "--vlen", "128,256,512", "-n", "2", "-rs",
                  code=pytest.ExitCode.TESTS_FAILED)
    out = r.stdout
    r.assert_outcomes(errors=1, skipped=2)
    assert "ERROR at setup of test_dot" in out and "vec.cpp:4" in out and "Falsifying" not in out
    assert out.count("ISA build zvfh of ggml 0.25.3") >= 2  # the skips' reason and the summary line
    assert "rvvdiff: ISA build zvfh of ggml 0.25.3" in out and "failed: vec.cpp:4" in out


_BROKEN_SERVER_CONFTEST = """
import shutil
from pathlib import Path
import harness.toolchain.builds, harness.toolchain.server, harness.plugin.hooks

# The kernel server's sources, with k_vec.cpp broken as a tree lacking one of its names would break it.
copy = Path(__file__).parent / "server"
shutil.copytree(harness.toolchain.builds.SERVER_DIR, copy, dirs_exist_ok=True)
with open(copy / "k_vec.cpp", "a") as f:
    f.write("\\nstatic int rvvdiff_broken = rvvdiff_no_such_symbol;\\n")
harness.toolchain.builds.SERVER_DIR = harness.toolchain.server.SERVER_DIR = harness.plugin.hooks.SERVER_DIR = copy
"""

_TWO_FAMILIES = """
import numpy as np
from harness.emulators.protocol import In, InOut, Out

def test_dot(target):  # k_float.cpp
    x = np.arange(10, dtype=np.float32)
    r = target.call("vec_dot_f32", [10], [], [In(x), In(x), Out(4)])
    assert r.output(0, np.float32)[0] == 285.0

def test_scale(target):  # k_vec.cpp
    target.call("vec_scale_f32", [4], [2.0], [InOut(np.ones(4, dtype=np.float32))])
"""


def test_an_adapter_that_does_not_compile_costs_only_its_kernels(pytester: pytest.Pytester) -> None:
    """The pinned build with a kernel server whose k_vec.cpp does not compile: k_float's kernel
    runs, k_vec's is skipped with the compiler's message, the summary names the adapter once."""
    helpers.pinned_build("zvfh")  # its libraries and unchanged objects are reused
    pytester.makeconftest(_BROKEN_SERVER_CONFTEST)
    pytester.makepyfile(test_two=_TWO_FAMILIES)
    r = pytest_in(pytester, "--isa", "zvfh", "--vlen", "128", "-p", "no:xdist", "-rs")
    out = r.stdout
    r.assert_outcomes(passed=1, skipped=1)
    assert ("not in this build: adapter k_vec.cpp does not compile against ggml 0.25.3 at "
            f"{source.pinned().root} (k_vec.cpp:") in out and "rvvdiff_no_such_symbol" in out
    assert out.count("rvvdiff: ISA build zvfh: adapter k_vec.cpp does not compile") == 1
    assert "vec_scale_f32" in out.split("rvvdiff: ISA build zvfh: adapter k_vec.cpp")[1]

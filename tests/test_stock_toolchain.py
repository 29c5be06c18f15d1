"""harness/upstream/stock.py: the commands that build ggml with a stock toolchain (clang-22 and the GNU
cross sysroot, Debian's GCC 14, or rvvdiff's zig) and run a program under QEMU, and end-to-end checks."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from harness.core.config import ISA_BUILDS, STRESS_PROPS, cache_dir
from harness.core.matrix import Point
from harness.emulators import qemu
from harness.emulators.qemu import Qemu
from harness.ggml import source
from harness.upstream import stock


@pytest.fixture
def llama_tree(tmp_path: Path) -> Path:
    """A llama.cpp-shaped tree whose ggml/ lacks ggml.pc.in (like the pinned one)."""
    (tmp_path / "ggml" / "include").mkdir(parents=True)
    (tmp_path / "ggml" / "CMakeLists.txt").write_text("")
    (tmp_path / "CMakeLists.txt").write_text("")
    return tmp_path


def test_layout_prefers_ggml_alone_and_falls_back_to_the_llama_root(llama_tree: Path) -> None:
    lay = stock.layout(llama_tree)
    assert lay.source == llama_tree and lay.llama and lay.libdir == "ggml/src"
    (llama_tree / "ggml" / "ggml.pc.in").write_text("")
    lay = stock.layout(llama_tree)
    assert lay.source == llama_tree / "ggml" and not lay.llama and lay.libdir == "src"
    with pytest.raises(ValueError, match="neither a llama.cpp tree"):
        stock.layout(llama_tree / "ggml" / "include")


@pytest.mark.parametrize("isa", list(ISA_BUILDS))
def test_clang_build_commands_are_well_formed(llama_tree: Path, isa: str, tmp_path: Path) -> None:
    bd = tmp_path / "build dir"  # a space: the lines must quote it
    lines = stock.build_commands(llama_tree, isa, "clang", bd, jobs=2, nice=5)
    assert len(lines) == 2
    configure, build = (shlex.split(ln) for ln in lines)
    assert configure[:5] == ["cmake", "-S", str(llama_tree), "-B", str(bd)]
    defs = dict(a[2:].split("=", 1) for a in configure[5:])
    assert all(a.startswith("-D") for a in configure[5:])
    assert defs["CMAKE_C_COMPILER"] == "clang-22" and defs["CMAKE_CXX_COMPILER"] == "clang++-22"
    assert defs["CMAKE_C_COMPILER_TARGET"] == defs["CMAKE_CXX_COMPILER_TARGET"] == "riscv64-linux-gnu"
    assert defs["CMAKE_SYSTEM_NAME"] == "Linux" and defs["CMAKE_SYSTEM_PROCESSOR"] == "riscv64"
    assert defs["BUILD_SHARED_LIBS"] == "OFF" and defs["GGML_NATIVE"] == "OFF" and defs["GGML_RVV"] == "ON"
    for k, v in ISA_BUILDS[isa].cmake.items():
        assert defs[k] == v
    assert defs["CMAKE_EXPORT_COMPILE_COMMANDS"] == "ON"
    assert defs["LLAMA_BUILD_TOOLS"] == "OFF"  # the llama.cpp root is configured: llama.cpp off
    assert build == ["nice", "-n", "5", "cmake", "--build", str(bd), "--target", "ggml-cpu", "ggml-base", "-j2"]


def test_ggml_alone_gets_no_llama_options(llama_tree: Path, tmp_path: Path) -> None:
    (llama_tree / "ggml" / "ggml.pc.in").write_text("")
    configure = shlex.split(stock.build_commands(llama_tree, "zvfh", "clang", tmp_path)[0])
    assert configure[2] == str(llama_tree / "ggml")
    assert not [a for a in configure if a.startswith("-DLLAMA_")]
    assert shlex.split(stock.build_commands(llama_tree, "zvfh", "clang", tmp_path)[1])[0] == "cmake"


def test_zig_build_commands_use_rvvdiffs_wrapper(llama_tree: Path, tmp_path: Path) -> None:
    from harness.toolchain.compilers import compiler
    cc = compiler()
    defs = dict(a[2:].split("=", 1) for a in shlex.split(stock.build_commands(llama_tree, "v", "zig", tmp_path)[0])
                if a.startswith("-D"))
    assert (defs["CMAKE_C_COMPILER"], defs["CMAKE_CXX_COMPILER"], defs["CMAKE_AR"], defs["CMAKE_RANLIB"]) == (
        cc.cc, cc.cxx, cc.ar, cc.ranlib)
    link = shlex.split(stock.link_command(tmp_path / "p.c", tmp_path / "p", tree=llama_tree, build_dir=tmp_path,
                                          toolchain="zig"))
    assert link[0] == cc.cxx


@pytest.mark.parametrize("isa", list(ISA_BUILDS))
def test_gcc14_commands_as_printed_name_debians_compiler(llama_tree: Path, isa: str, tmp_path: Path) -> None:
    """What a maintainer types on Debian with gcc-14-riscv64-linux-gnu: the plain cross compiler, CMake finding
    riscv64-linux-gnu-ar by its prefix; GCC takes ggml's -march as it is (no target or wrapper options)."""
    configure = shlex.split(stock.build_commands(llama_tree, isa, "gcc14", tmp_path, printed=True)[0])
    defs = dict(a[2:].split("=", 1) for a in configure if a.startswith("-D"))
    assert defs["CMAKE_C_COMPILER"] == "riscv64-linux-gnu-gcc-14" and defs["CMAKE_CXX_COMPILER"] == "riscv64-linux-gnu-g++-14"
    assert "CMAKE_AR" not in defs and "CMAKE_C_COMPILER_TARGET" not in defs
    assert defs["CMAKE_SYSTEM_NAME"] == "Linux" and defs["CMAKE_SYSTEM_PROCESSOR"] == "riscv64"
    assert all(defs[k] == v for k, v in ISA_BUILDS[isa].cmake.items())
    link = shlex.split(stock.link_command(tmp_path / "p.c", tmp_path / "p", tree=llama_tree, build_dir=tmp_path,
                                          toolchain="gcc14", printed=True))
    assert link[:4] == ["riscv64-linux-gnu-g++-14", "-x", "c", "-O2"] and "-static" in link
    assert "g++-14-riscv64-linux-gnu" in stock.GCC_APT_INSTALL and "libstdc++-14-dev-riscv64-cross" in stock.GCC_APT_INSTALL


def _gcc14() -> object:
    from harness.toolchain.compilers import ToolchainError, compiler
    try:
        return compiler("gcc14")
    except ToolchainError as e:
        return str(e)


_GCC = _gcc14()


@pytest.mark.skipif(isinstance(_GCC, str), reason=f"GCC 14 not installed ({_GCC}): run ci/setup.sh --gcc14")
def test_gcc14_commands_rvvdiff_runs_use_the_roots_wrappers(llama_tree: Path, tmp_path: Path) -> None:
    """The same commands as rvvdiff runs them: the gcc14 root's wrappers (harness/toolchain/compilers.py), ar included."""
    cc = _GCC
    defs = dict(a[2:].split("=", 1) for a in shlex.split(stock.build_commands(llama_tree, "zvfh", "gcc14", tmp_path)[0])
                if a.startswith("-D"))
    assert (defs["CMAKE_C_COMPILER"], defs["CMAKE_CXX_COMPILER"], defs["CMAKE_AR"], defs["CMAKE_RANLIB"]) == (
        cc.cc, cc.cxx, cc.ar, cc.ranlib)  # type: ignore[attr-defined]
    link = shlex.split(stock.link_command(tmp_path / "p.c", tmp_path / "p", tree=llama_tree, build_dir=tmp_path,
                                          toolchain="gcc14"))
    assert link[0] == cc.cxx  # type: ignore[attr-defined]
    assert stock.missing("gcc14") is None


def test_link_command(llama_tree: Path, tmp_path: Path) -> None:
    argv = shlex.split(stock.link_command(tmp_path / "p.c", tmp_path / "p", tree=llama_tree,
                                          build_dir=tmp_path / "b", toolchain="clang"))
    assert argv[:2] == ["clang++-22", "--target=riscv64-linux-gnu"]
    assert ["-x", "c"] == argv[2:4] and "-static" in argv and argv[-2:] == ["-o", str(tmp_path / "p")]
    assert argv.index(str(tmp_path / "p.c")) < argv.index(str(tmp_path / "b" / "ggml/src/libggml-cpu.a")) \
        < argv.index(str(tmp_path / "b" / "ggml/src/libggml-base.a"))
    assert argv[argv.index("-I") + 1] == str(llama_tree / "ggml" / "include")


@pytest.mark.parametrize("isa", list(ISA_BUILDS))
@pytest.mark.parametrize("stress", [False, True])
def test_run_command_spells_the_cpu_as_the_harness_does(isa: str, stress: bool) -> None:
    argv = shlex.split(stock.run_command(Path("/x/prog"), Point(256, isa, stress)))
    assert argv[0] == "qemu-riscv64" and argv[1] == "-cpu" and argv[3] == "/x/prog" and len(argv) == 4
    props = dict(ISA_BUILDS[isa].qemu)
    if stress:
        props.update({"rvv_ta_all_1s": True, "rvv_ma_all_1s": True})
    assert argv[2] == Qemu.cpu(None, 256, props)  # type: ignore[arg-type]  # cpu() reads no field
    assert argv[2].startswith("rv64,v=true,vlen=256,elen=64,")
    assert ("rvv_ta_all_1s=true,rvv_ma_all_1s=true" in argv[2]) == stress
    assert "rvv_vl_half_avl=true" in stock.run_command(Path("/x"), Point(128, isa, True), half_avl=True)


@pytest.mark.parametrize("isa", list(ISA_BUILDS))
def test_one_cpu_builder_with_the_harness_stress_mode(isa: str) -> None:
    """The kernel servers' stress mode is config.STRESS_PROPS; the builder's default follows it, and leaves
    rvv_vl_half_avl out only when asked (ggml's own tests, the stock commands' plain stress)."""
    b = ISA_BUILDS[isa]
    assert qemu.cpu_props(b) == b.qemu
    assert qemu.cpu_props(b, stress=True) == {**b.qemu, **STRESS_PROPS}
    assert qemu.cpu_props(b, stress=True, half_avl=False) == {**b.qemu, "rvv_ta_all_1s": True, "rvv_ma_all_1s": True}
    assert qemu.cpu(Point(512, b, True)) == qemu.spell(512, {**b.qemu, **STRESS_PROPS})
    with pytest.raises(ValueError, match="QEMU emulates 128, 256, 512, 1024"):
        qemu.cpu(Point(2048, b))


def test_the_program_runs_with_the_printed_cpu(tmp_path: Path) -> None:
    """Emulator.run_program starts what the printed command says (here with echo in QEMU's place) and hands
    back the exit status and output instead of raising."""
    echo = Qemu("/bin/echo", "0", frozenset())
    props = qemu.cpu_props(ISA_BUILDS["zvfh"], stress=True, half_avl=False)
    r = echo.run_program(tmp_path / "prog", 256, props, args=["--flag"], timeout=30)
    printed = shlex.split(stock.run_command(tmp_path / "prog", Point(256, "zvfh", True)))
    assert r.returncode == 0 and r.stdout.split() == [*printed[1:], "--flag"]
    false = Qemu("/bin/false", "0", frozenset())
    assert false.run_program(tmp_path / "prog", 128, props, timeout=30).returncode == 1


def test_bad_arguments_say_what_is_allowed(llama_tree: Path) -> None:
    with pytest.raises(ValueError, match="use one of clang, gcc14, zig"):
        stock.build_commands(llama_tree, "v", "gcc", Path("/b"))
    with pytest.raises(ValueError, match="use one of v, zvfh, zvfbfwma"):
        stock.build_commands(llama_tree, "rv", "clang", Path("/b"))
    with pytest.raises(ValueError, match="QEMU emulates 128, 256, 512, 1024"):
        stock.run_command(Path("/x"), Point(2048, "v"))


def test_missing_toolchain_is_one_line_naming_package_and_apt_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stock.shutil, "which", lambda name: None if name == "clang-22" else f"/usr/bin/{name}")
    monkeypatch.setattr(stock, "CLANG_PACKAGES", stock.CLANG_PACKAGES[:1])
    why = stock.missing("clang")
    assert why is not None and "\n" not in why
    assert "clang-22 (package clang-22)" in why and "apt-get install -y clang-22" in why
    assert "bookworm-security" in why and "ci/setup.sh --stock" in why
    with pytest.raises(stock.StockToolchainError, match="apt-get install -y clang-22"):
        stock.build_libraries(Path("/nonexistent"), "v", "clang", Path("/nonexistent/b"))


def test_tiny_program_expectation() -> None:
    assert stock.TINY_EXPECTED == -8173


_MISSING = stock.missing("clang")


@pytest.mark.skipif(_MISSING is not None, reason=f"end-to-end stock build skipped: {_MISSING}")
def test_clang_builds_ggml_and_the_program_runs_under_qemu() -> None:
    """Builds the v build of the pinned tree with clang-22 (about 40 s on two cores, reused later),
    links the tiny program statically, runs it at VLEN 128 and 256."""
    tree = source.pinned().root
    exe = stock.build_program(tree, "v", "clang", cache_dir() / "stock" / "clang-v")
    for vlen in (128, 256):
        out = stock.run_program(exe, Point(vlen, "v")).splitlines()
        assert out[0] == f"rvv_vlen_bytes {vlen // 8}"
        assert out[1] == f"mul_mat_q4_0_q8_0 {stock.TINY_EXPECTED:.1f} expected {stock.TINY_EXPECTED}"
        assert out[2] == "extra_bufts CPU_REPACK"
    assert "rvv_ta_all_1s" in stock.run_command(exe, Point(256, "v", True))
    assert stock.run_program(exe, Point(256, "v", stress=True)).splitlines()[1].startswith(
        f"mul_mat_q4_0_q8_0 {stock.TINY_EXPECTED:.1f}")


@pytest.mark.skipif(isinstance(_GCC, str), reason=f"GCC 14 not installed ({_GCC}): run ci/setup.sh --gcc14")
def test_gcc14_builds_ggml_and_the_program_runs_under_qemu() -> None:
    """Builds the zvfh build of the pinned tree with GCC 14 through ggml's own CMake (about 2 min on two cores,
    reused later), links the tiny program statically, runs it at VLEN 128 and 512."""
    exe = stock.build_program(source.pinned().root, "zvfh", "gcc14", cache_dir() / "stock" / "gcc14-zvfh")
    for vlen in (128, 512):
        out = stock.run_program(exe, Point(vlen, "zvfh")).splitlines()
        assert out[0] == f"rvv_vlen_bytes {vlen // 8}"
        assert out[1] == f"mul_mat_q4_0_q8_0 {stock.TINY_EXPECTED:.1f} expected {stock.TINY_EXPECTED}"

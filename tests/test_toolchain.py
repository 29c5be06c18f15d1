"""harness/toolchain/compilers.py: the named compilers (clang, gcc14), how one is selected, what a missing
one says, and a -march a compiler rejects making an ISA build unavailable (docs/compilers.md)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from harness.core import config, matrix
from harness.ggml import source
from harness.toolchain import builds
from harness.toolchain.compilers import COMPILERS, GCC14_SETUP, Compiler, ToolchainError, rejected_flags, selected


@pytest.fixture
def no_compiler_settings(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for var in ("RVVDIFF_COMPILER", "RVVDIFF_CC", "RVVDIFF_CXX"):
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def test_the_registry_names_clang_the_default_and_gcc14() -> None:
    assert list(COMPILERS) == ["clang", "gcc14"]
    assert matrix.DEFAULT_COMPILER == "clang"
    assert COMPILERS["gcc14"].setup == GCC14_SETUP == "ci/setup.sh --gcc14"


def test_selection_follows_rvvdiff_compiler_and_keeps_rvvdiff_cc(no_compiler_settings: pytest.MonkeyPatch) -> None:
    mp = no_compiler_settings
    assert selected() == "clang"
    mp.setenv("RVVDIFF_COMPILER", "gcc14")
    assert selected() == "gcc14"
    mp.setenv("RVVDIFF_COMPILER", "icc")
    with pytest.raises(ToolchainError, match=r"unknown compiler 'icc' \(RVVDIFF_COMPILER\): "
                                             r"known are clang \(ci/setup.sh\), gcc14 \(ci/setup.sh --gcc14\)$"):
        selected()
    mp.delenv("RVVDIFF_COMPILER")
    mp.setenv("RVVDIFF_CC", "riscv64-linux-gnu-gcc-14")
    mp.setenv("RVVDIFF_CXX", "riscv64-linux-gnu-g++-14")
    assert selected() == "user"
    mp.setenv("RVVDIFF_COMPILER", "clang")
    with pytest.raises(ToolchainError, match="both name a compiler"):
        selected()


def test_missing_gcc14_names_the_setup_command(no_compiler_settings: pytest.MonkeyPatch, tmp_path: Path) -> None:
    no_compiler_settings.setenv("RVVDIFF_CACHE", str(tmp_path))
    with pytest.raises(ToolchainError) as e:
        COMPILERS["gcc14"].find()
    msg = str(e.value)
    assert "GCC 14 (compiler gcc14) is not installed" in msg and GCC14_SETUP in msg
    assert str(tmp_path / "gcc14-root") in msg and "\n" not in msg


def test_each_compiler_has_its_build_dir_and_key(no_compiler_settings: pytest.MonkeyPatch) -> None:
    s, isa = source.pinned(), config.ISA_BUILDS["zvfh"]
    clang_dir = builds.build_dir(s, isa)
    assert clang_dir == builds.build_dir(s, isa, "clang") and clang_dir.name.endswith("-zvfh")
    assert builds.build_dir(s, isa, "gcc14") == clang_dir.with_name(clang_dir.name + "-gcc14")
    no_compiler_settings.setenv("RVVDIFF_COMPILER", "gcc14")
    assert builds.build_dir(s, isa) == clang_dir.with_name(clang_dir.name + "-gcc14")
    a = Compiler("cc", "c++", "ar", "ranlib", "zig 0.17.1 (clang, ziglang package) at /z", "clang")
    b = Compiler("cc", "c++", "ar", "ranlib", "gcc14: riscv64-linux-gnu-gcc-14 (Debian 14.2.0-19) 14.2.0", "gcc14")
    c = Compiler("cc", "c++", "ar", "ranlib", "gcc14: riscv64-linux-gnu-gcc-14 (Debian 14.2.0-20) 14.2.0", "gcc14")
    assert len({builds.build_key(s, isa, x) for x in (a, b, c)}) == 3  # name and version both count


_REJECTING_CC = """#!/bin/sh
case "$*" in
  *zvfbfwma*) echo "cc: error: '-march=rv64gcv_zvfbfwma': extension 'zvfbfwma' is unsupported" >&2; exit 1;;
esac
exit 0
"""


def test_a_march_the_compiler_rejects_makes_the_build_unavailable(tmp_path: Path) -> None:
    cc_path = tmp_path / "cc"
    cc_path.write_text(_REJECTING_CC)
    cc_path.chmod(0o755)
    cc = Compiler(str(cc_path), str(cc_path), "ar", "ranlib", "a fake compiler 1.0", "fake")
    assert rejected_flags(cc, ("-march=rv64gcv_zfh_zvfh", "-mabi=lp64d")) is None
    flags = ("-march=rv64gcv_zfh_zvfh_zvfbfwma", "-mabi=lp64d")
    assert rejected_flags(cc, flags) == "cc: error: '-march=rv64gcv_zvfbfwma': extension 'zvfbfwma' is unsupported"
    why = builds._rejected(source.pinned(), config.ISA_BUILDS["zvfbfwma"], cc, ("-DX", *flags, "-std=c++17"))
    assert why is not None
    assert why.startswith("compiler fake rejects -march=rv64gcv_zfh_zvfh_zvfbfwma -mabi=lp64d, the flags the CMake of ggml")
    assert why.endswith("extension 'zvfbfwma' is unsupported): it cannot make the zvfbfwma build")


# ------------------------------------------------------------ with GCC 14 itself

def _gcc14_or_skip() -> Compiler:
    try:
        return COMPILERS["gcc14"].find()
    except ToolchainError as e:
        pytest.skip(f"GCC 14 is not installed ({GCC14_SETUP} installs it): {e}")


_RVV = r"""
#include <riscv_vector.h>
#include <stdio.h>
int main(void) {
    float x[64], y[64];
    for (int i = 0; i < 64; i++) x[i] = (float)i;
    for (size_t n = 64, i = 0, vl; n > 0; n -= vl, i += vl) {
        vl = __riscv_vsetvl_e32m2(n);
        __riscv_vse32_v_f32m2(y + i, __riscv_vfadd_vf_f32m2(__riscv_vle32_v_f32m2(x + i, vl), 1.0f, vl), vl);
    }
    printf("vlmax %zu sum %g\n", __riscv_vsetvlmax_e32m1(), (double)(y[0] + y[63]));
    return 0;
}
"""


def test_gcc14_builds_a_static_rvv_program_that_qemu_runs(tmp_path: Path) -> None:
    cc = _gcc14_or_skip()
    assert cc.name == "gcc14" and "14." in cc.identity
    src, exe = tmp_path / "rvv.c", tmp_path / "rvv"
    src.write_text(_RVV)
    subprocess.run([cc.cc, "-O2", "-march=rv64gcv_zfh_zvfh", "-mabi=lp64d", "-static", src, "-o", exe],
                   check=True, timeout=120)
    from harness.emulators.qemu import qemu
    out = subprocess.run([qemu().path, "-cpu", "rv64,v=true,zfh=true,zvfh=true,vlen=256", exe],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    assert out == "vlmax 8 sum 65\n"
    complaint = rejected_flags(cc, ("-march=rv64gcv_zfh_zvfh_zvfbfwma", "-mabi=lp64d"))
    assert complaint is not None and "zvfbfwma" in complaint  # GCC 14 does not know zvfbfwma (GCC 15 does)


def test_gcc14_cannot_make_the_zvfbfwma_build(no_compiler_settings: pytest.MonkeyPatch) -> None:
    """GCC 14.2 does not know zvfbfwma: the ISA build is unavailable with the compiler's reason
    (after a configure, no compile), not a build failure."""
    _gcc14_or_skip()
    no_compiler_settings.setenv("RVVDIFF_COMPILER", "gcc14")
    with pytest.raises(builds.IsaUnavailable) as e:
        builds.ensure_built(source.pinned(), config.ISA_BUILDS["zvfbfwma"])
    assert str(e.value).startswith("compiler gcc14 rejects -march=rv64gcv_zfh_zvfh_zvfbfwma")
    assert "unsupported standard extension" in str(e.value) and str(e.value).endswith("it cannot make the zvfbfwma build")


def test_the_compiler_is_an_explicit_argument_of_a_build(no_compiler_settings: pytest.MonkeyPatch) -> None:
    """--cc names the compiler of each target: the build takes it as an argument, the setting is only
    the default; the header's check says which ISA build a compiler cannot make before any build."""
    _gcc14_or_skip()
    zvfbfwma = config.ISA_BUILDS["zvfbfwma"]
    with pytest.raises(builds.IsaUnavailable, match="^compiler gcc14 rejects"):
        builds.ensure_built(source.pinned(), zvfbfwma, "gcc14")
    assert builds.build_dir(source.pinned(), zvfbfwma, "gcc14").name.endswith("-zvfbfwma-gcc14")
    assert builds.build_dir(source.pinned(), zvfbfwma).name.endswith("-zvfbfwma")  # the setting's: clang
    assert (builds.compiler_gap(zvfbfwma, "gcc14") or "").startswith("gcc14 rejects -march=rv64gcv_zfh_zvfh_zvfbfwma")
    assert builds.compiler_gap(config.ISA_BUILDS["zvfh"], "gcc14") is None
    assert builds.compiler_gap(zvfbfwma, "clang") is None

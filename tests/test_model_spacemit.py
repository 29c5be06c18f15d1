"""The model family on the spacemit build (SpacemiT's backend), without a build or an emulator: the build's
environment reaches llama-perplexity and its replay line as the kernel servers get it, the tools build carries
rvvdiff's additions, one case and one path run there and only with --thorough, and a refusal names the IME paths
that no model run reaches."""

from __future__ import annotations

import contextlib
import stat
from pathlib import Path
from types import SimpleNamespace

import pytest

from cases import model as M
from harness.core.config import ISA_BUILDS, SPACEMIT
from harness.core.matrix import Point
from harness.emulators.qemu import Qemu
from harness.model import machine, perplexity, tools
from tests.launch import pytest_child


def _fake_qemu(tmp_path: Path) -> Qemu:
    """A QEMU in name whose 'guest' prints the core type it was given and its arguments."""
    q = tmp_path / "qemu-riscv64"
    q.write_text('#!/bin/sh\necho "core=$SPACEMIT_CORE_ARCH mem=$SPACEMIT_MEM_BACKEND" "$@"\n')
    q.chmod(q.stat().st_mode | stat.S_IEXEC)
    return Qemu(str(q), "0", frozenset({"v", "zfh", "zfhmin", "zvfh", "zvfhmin", "zvfbfmin", "zvfbfwma", "zfbfmin"}))


def test_the_build_environment_reaches_the_tool_and_its_replay(tmp_path: Path) -> None:
    """As the pool starts a kernel server of the spacemit build with its IsaBuild.env, the model family runs
    llama-perplexity with it, and the replay line a failure prints sets it too."""
    on = machine.on(_fake_qemu(tmp_path), Point(256, "spacemit"))
    assert on.env == SPACEMIT.env and "SPACEMIT_CORE_ARCH=0x503C" in on.describe()
    out, _, replay = perplexity.invoke(on, tmp_path / "llama-perplexity", tmp_path / "m.gguf", ["-c", "16"],
                                       timeout=30, what="the run")
    assert out.startswith("core=0x503C mem=POSIX -cpu rv64,v=true,vlen=256")
    assert replay[:3] == ["env", "SPACEMIT_CORE_ARCH=0x503C", "SPACEMIT_MEM_BACKEND=POSIX"]
    assert replay[3] == str(tmp_path / "qemu-riscv64") and replay[-2:] == ["-c", "16"]
    # The reference (no V) and ggml-cpu's builds run without it: their replay is the argv.
    out, _, replay = perplexity.invoke(on.reference(), tmp_path / "llama-perplexity", tmp_path / "m.gguf", [],
                                       timeout=30, what="the reference")
    assert out.startswith("core= mem= -cpu rv64,v=false") and replay[0] == str(tmp_path / "qemu-riscv64")
    assert machine.on(_fake_qemu(tmp_path), Point(256, "zvfh")).env == {}


def test_a_refusal_names_the_ime_paths_no_model_run_reaches() -> None:
    spike = SimpleNamespace(no_linux_programs="Spike runs rvvdiff's programs bare metal")
    with pytest.raises(machine.CannotRun) as e:
        machine.on(spike, Point(256, "spacemit"))
    assert "xsmtvdot paths run only under Spike" in str(e.value) and "SPACEMIT_CORE_ARCH=0x503C" in str(e.value)
    with pytest.raises(machine.CannotRun) as e:
        machine.on(spike, Point(256, "zvfh"))
    assert str(e.value) == "Spike runs rvvdiff's programs bare metal"


def test_the_spacemit_build_runs_the_model_as_shipped_with_repacking_on() -> None:
    shipped, q4_0 = M.Case("smollm2", M.BY_NAME["q4_1"]), M.Case("smollm2", M.BY_NAME["q4_0"])
    assert M.repeated_in(SPACEMIT, shipped, M.RunPath(True, 1)) is None
    assert M.repeated_in(SPACEMIT, shipped, M.RunPath(True, 4)) is None
    assert "CPU_REPACK is off" in M.repeated_in(SPACEMIT, shipped, M.RunPath(False, 1))
    assert "the zvfh build's runs of smollm2-q4_0" in M.repeated_in(SPACEMIT, q4_0, M.RunPath(True, 1))
    user = M.Case("gguf", M.BY_NAME["q4_0"], Path("user.gguf"))
    assert M.repeated_in(SPACEMIT, user, M.RunPath(True, 1)) is None
    assert M.repeated_in(ISA_BUILDS["zvfh"], q4_0, M.RunPath(False, 1)) is None


def test_a_backend_without_core_types_runs_only_without_repacking(tmp_path: Path) -> None:
    """The backend before 2026-05 (no ime_env.cpp) takes q4_0 / q4_1 / q4_K weights into IME1 on every core: under
    QEMU only -nr runs (its norms still reached), the repacking paths are named as what no emulator runs; a tree
    with core types is the other way round."""
    spacemit = tmp_path / "src" / "ggml-cpu" / "spacemit"
    spacemit.mkdir(parents=True)
    (spacemit / "ime.cpp").write_text("\n")
    old = SimpleNamespace(ggml=tmp_path)
    shipped = M.Case("smollm2", M.BY_NAME["q4_1"])
    for path in (M.RunPath(True, 1), M.RunPath(True, 4), M.RunPath(True, 1, fuse=False)):
        assert M.repeated_in(SPACEMIT, shipped, path, old) == M.IME_ON_EVERY_CORE
    assert M.repeated_in(SPACEMIT, shipped, M.RunPath(False, 1), old) is None
    (spacemit / "ime_env.cpp").write_text("\n")
    assert "CPU_REPACK is off" in M.repeated_in(SPACEMIT, shipped, M.RunPath(False, 1), old)
    assert M.repeated_in(SPACEMIT, shipped, M.RunPath(True, 1), old) is None


def test_fusion_off_reaches_the_run_and_its_replay(tmp_path: Path) -> None:
    """The fusion-off path sets GGML_CPU_DISABLE_FUSION=1 beside the build's environment, in the run and in its
    replay line; the default path sets nothing more."""
    q = tmp_path / "qemu-riscv64"
    q.write_text('#!/bin/sh\necho "fusion=$GGML_CPU_DISABLE_FUSION core=$SPACEMIT_CORE_ARCH" "$@"\n')
    q.chmod(q.stat().st_mode | stat.S_IEXEC)
    qemu = Qemu(str(q), "0", frozenset({"v", "zfh", "zfhmin", "zvfh", "zvfhmin", "zvfbfmin", "zvfbfwma", "zfbfmin"}))
    on = machine.on(qemu, Point(1024, "spacemit"))
    off = M.RunPath(True, 1, fuse=False).shape(M.SHAPE)
    assert off.env == {"GGML_CPU_DISABLE_FUSION": "1"} and off.label().endswith("-nofuse")
    out, _, replay = perplexity.invoke(on, tmp_path / "llama-perplexity", tmp_path / "m.gguf", off.args(),
                                       timeout=30, what="the run", env=off.env)
    assert out.startswith("fusion=1 core=0x503C")
    assert replay[:4] == ["env", "GGML_CPU_DISABLE_FUSION=1", "SPACEMIT_CORE_ARCH=0x503C", "SPACEMIT_MEM_BACKEND=POSIX"]
    out, _, replay = perplexity.invoke(on, tmp_path / "llama-perplexity", tmp_path / "m.gguf", M.SHAPE.args(),
                                       timeout=30, what="the run", env=M.SHAPE.env)
    assert out.startswith("fusion= core=0x503C") and "GGML_CPU_DISABLE_FUSION=1" not in replay


def test_fusion_off_runs_where_a_backend_claims_a_fused_op(tmp_path: Path) -> None:
    """Fusion off runs at the spacemit build on a tree with ggml-cpu's switch; elsewhere it is skipped with why:
    ggml-cpu's own builds, a tree that fuses nothing, a tree that fuses without a switch."""
    from harness.ggml import source

    shipped, off = M.Case("smollm2", M.BY_NAME["q4_1"]), M.RunPath(True, 1, fuse=False)
    assert "spacemit build only" in M.repeated_in(ISA_BUILDS["zvfh"], shipped, off)
    assert M.repeated_in(SPACEMIT, shipped, off) is None
    assert M.unreached(source.pinned(), shipped, off, 1024, SPACEMIT, tmp_path / "m.gguf") is None
    cpu = tmp_path / "ggml" / "src" / "ggml-cpu" / "ggml-cpu.c"
    cpu.parent.mkdir(parents=True)
    tree = SimpleNamespace(ggml=tmp_path / "ggml")
    cpu.write_text("static void ggml_compute_forward(void) {}\n")
    assert "fuses no op" in M.unreached(tree, shipped, off, 1024, SPACEMIT, tmp_path / "m.gguf")
    cpu.write_text("ggml_compute_forward_rms_norm_mul_fused(params, node, mul_node);\n")
    assert "no switch" in M.unreached(tree, shipped, off, 1024, SPACEMIT, tmp_path / "m.gguf")
    assert M.unreached(tree, shipped, M.RunPath(True, 1), 1024, SPACEMIT, tmp_path / "m.gguf") is None


def test_the_tools_build_carries_rvvdiffs_additions(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """llama-perplexity of the spacemit build is configured in the CMake room with the flags the kernel server's
    build has (the C++ standard, IME1's names), named in its description; ggml-cpu's builds get none."""
    from harness.ggml import source
    from harness.toolchain import additions

    seen = {}
    monkeypatch.setattr(tools, "_build", lambda src, b, targets, key, what, jobs: seen.update({what: b}))
    monkeypatch.setattr(tools, "_remember", lambda key, d: None)
    monkeypatch.setattr(tools, "_known", lambda key, targets: tmp_path / key[:8])
    monkeypatch.setattr(tools, "locked", lambda path: contextlib.nullcontext())  # a real build may hold the lock
    tree = source.pinned()
    t = tools.riscv_tools(tree, "spacemit", "clang")
    b = seen["riscv64 spacemit by clang"]
    assert b.c_flags == additions.flags(SPACEMIT, "clang") and "+xsmtvdot" in b.c_flags
    assert "-std=gnu++20" in b.cxx_flags and b.options["GGML_CPU_RISCV64_SPACEMIT"] == "ON"
    assert "rvvdiff adds: -Xclang -std=gnu++20" in t.describe() and "no IME2" in t.describe()
    z = tools.riscv_tools(tree, "zvfh", "clang")
    assert seen["riscv64 zvfh by clang"].c_flags == () and z.added == () and z.key != t.key


def test_the_spacemit_runs_are_thorough_only() -> None:
    """The main job's budget holds: without --thorough no model test runs at the spacemit build; with it, the
    test ids name the build."""
    def collected(*extra: str) -> list[str]:
        r = pytest_child("cases/test_model.py", "--collect-only", "-q", "--vlen", "256", "--isa", "spacemit",
                         "--rvv-stress", "off", "--cc", "clang", *extra, timeout=600, code=(0, 5))
        # A test with no target at all is collected once as [NOTSET], skipped: not a run.
        return [ln for ln in r.stdout.splitlines() if ln.startswith("cases/test_model.py::") and "NOTSET" not in ln]

    assert collected() == []
    ids = collected("--thorough")
    assert "cases/test_model.py::test_model[smollm2-q4_1-repack-t1-vlen256-spacemit]" in ids
    assert all("test_model[" in i and i.endswith("-vlen256-spacemit]") for i in ids)

"""The model family on a distribution's build (the ``riscv64_v`` variant, docs/dispatch.md), without a build or an
emulator: the tools build is configured as distributions build llama.cpp, its programs run against the C library it
was linked with (QEMU's ``-L``) and its replay says so, the variant ggml loaded is read from its log and a run that
loaded another (or none) fails before its figures are judged, one case runs there, and the main job's budget holds."""

from __future__ import annotations

import contextlib
import stat
from pathlib import Path

import pytest

from cases import model as M
from harness.core.config import DISPATCH_V, ISA_BUILDS
from harness.core.matrix import Point
from harness.emulators.qemu import QEMU_PROPERTIES, Qemu
from harness.model import machine, model_runs, perplexity, tools
from tests.launch import pytest_child

#: What llama-perplexity prints of a run of the main job's shape: ggml's line for the variant it loaded, then the
#: running table of --kl-divergence (two chunks).
RUN = """load_backend: loaded CPU backend from {lib}
system_info: n_threads = 1 (n_threads_batch = 1) / 1 | CPU : RISCV_V = 1 | RVV_VLEN = 32 | OPENMP = 1 |
chunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence              Δp RMS            Same top p
   1      18.1230 ±    7.8300       0.02170 ±    0.03010       0.01600 ±    0.00560    3.561 ±  1.061 %   100.000 ±  0.000 %
   2      16.2300 ±    4.7200       0.03816 ±    0.02160       0.01854 ±    0.00464    3.809 ±  0.793 %    92.857 ±  7.143 %
"""


def _fake_qemu(tmp_path: Path, lib: str | None) -> Qemu:
    """A QEMU in name whose 'guest' prints its arguments and OMP_WAIT_POLICY to a file, and a run's output naming
    ``lib`` (None: no backend line)."""
    out = tmp_path / "run.txt"
    text = RUN.format(lib=lib) if lib else RUN.split("\n", 1)[1]
    out.write_text(text)
    q = tmp_path / "qemu-riscv64"
    q.write_text(f'#!/bin/sh\necho "omp=$OMP_WAIT_POLICY $@" > {tmp_path / "argv.txt"}\ncat {out}\n')
    q.chmod(q.stat().st_mode | stat.S_IEXEC)
    return Qemu(str(q), "0", frozenset(QEMU_PROPERTIES))


def _tools(tmp_path: Path, variant: str = "riscv64_v") -> tools.Tools:
    return tools.Tools(tmp_path / "build", "riscv64", "gcc14", "riscv64_v", "k", runtime=tmp_path / "glibc",
                       variant=variant)


def test_the_loaded_variant_is_read_and_the_run_against_the_c_library_it_was_linked_with(tmp_path: Path) -> None:
    lib = str(tmp_path / "build" / "bin" / "libggml-cpu-riscv64_v.so")
    on = machine.on(_fake_qemu(tmp_path, lib), Point(512, "riscv64_v", stress=True)).with_runtime(tmp_path / "glibc")
    k = perplexity.measure(on, tmp_path / "llama-perplexity", tmp_path / "m.gguf", M.SHAPE, tmp_path / "ref.kld",
                           timeout=30, what="the run")
    assert perplexity.LOG_LOADS == ("-lv", "4")  # ggml's INFO lines are llama.cpp's verbosity 4
    argv = (tmp_path / "argv.txt").read_text().split()
    assert argv[0] == "omp=PASSIVE" and argv[1:3] == ["-L", str(tmp_path / "glibc")]
    assert argv[4].startswith("rv64,v=true,vlen=512") and "zvfh=false" in argv[4] and "rvv_ta_all_1s=true" in argv[4]
    assert k.loaded == lib and k.loaded_variant == "riscv64_v" and "CPU variant riscv64_v loaded" in k.line()
    assert k.mean_kld == pytest.approx(0.01854) and k.argv[:4] == ("env", "OMP_WAIT_POLICY=PASSIVE",
                                                                    str(tmp_path / "qemu-riscv64"), "-L")
    assert f"the C library of {tmp_path / 'glibc'}" in on.describe()
    model_runs._expect_variant(k, _tools(tmp_path), on)  # the right variant: no error
    # The reference is the static no-V build: no -L, no variant.
    ref = on.reference()
    assert ref.runtime is None and ref.isa.name == "rv64gc" and not ref.stress
    perplexity.invoke(ref, tmp_path / "llama-perplexity", tmp_path / "m.gguf", [], timeout=30, what="the reference")
    assert "-L" not in (tmp_path / "argv.txt").read_text().split()


@pytest.mark.parametrize("lib", ["/b/bin/libggml-cpu-riscv64_0.so", None])
def test_a_run_that_loaded_another_variant_or_none_fails_clearly(tmp_path: Path, lib: str | None) -> None:
    on = machine.on(_fake_qemu(tmp_path, lib), Point(256, "riscv64_v")).with_runtime(tmp_path / "glibc")
    k = perplexity.measure(on, tmp_path / "llama-perplexity", tmp_path / "m.gguf", M.SHAPE, tmp_path / "ref.kld",
                           timeout=30, what="the run")
    with pytest.raises(model_runs.WrongVariant) as e:
        model_runs._expect_variant(k, _tools(tmp_path), on)
    said = str(e.value)
    assert "must load libggml-cpu-riscv64_v.so" in said and "replay: env OMP_WAIT_POLICY=PASSIVE" in said
    assert ("variant riscv64_0" in said) if lib else ("no 'loaded CPU backend from' line" in said)
    # A static build loads no backend library and is not asked for one.
    model_runs._expect_variant(k, _tools(tmp_path, variant=""), on)


def test_the_tools_are_built_as_distributions_build_them(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Shared libraries, every CPU variant, no static link, by the compiler as it builds for glibc; every
    variant's library beside the programs or the build is refused."""
    from harness.ggml import source
    from harness.toolchain import compilers

    try:
        compilers.shared_compiler("gcc14")
    except compilers.ToolchainError as e:
        pytest.skip(f"GCC 14 is not installed: {e}")
    seen = {}

    def build(src, b, targets, key, what, jobs) -> None:
        seen[what] = b
        (b.dir / "bin").mkdir(parents=True, exist_ok=True)
        (b.dir / "bin" / "libggml-cpu-riscv64_v.so").write_text("")

    monkeypatch.setattr(tools, "_build", build)
    monkeypatch.setattr(tools, "_remember", lambda key, d: None)
    monkeypatch.setattr(tools, "_known", lambda key, targets: tmp_path / key[:8])
    monkeypatch.setattr(tools, "glibc_root", lambda: tmp_path / "glibc")
    monkeypatch.setattr(tools, "locked", lambda path: contextlib.nullcontext())  # a real build may hold the lock
    tree = source.pinned()
    with pytest.raises(tools.BuildError, match=r"has no libggml-cpu-riscv64_0\.so in bin/"):
        tools.riscv_tools(tree, "riscv64_v", "gcc14")
    b = seen["riscv64 dispatch build by gcc14"]
    (b.dir / "bin" / "libggml-cpu-riscv64_0.so").write_text("")
    t = tools.riscv_tools(tree, DISPATCH_V, "gcc14")
    o = b.options
    assert (o["BUILD_SHARED_LIBS"], o["GGML_BACKEND_DL"], o["GGML_CPU_ALL_VARIANTS"], o["GGML_NATIVE"]) == ("ON",) * 3 + ("OFF",)
    assert o["LLAMA_BUILD_TOOLS"] == "ON" and "CMAKE_EXE_LINKER_FLAGS" not in o
    assert t.runtime == tmp_path / "glibc" and t.variant == "riscv64_v" and t.library("riscv64_v").is_file()
    assert "libggml-cpu-riscv64_v.so expected to load" in t.describe()
    assert t.key != tools.riscv_tools(tree, "v", "gcc14").key


def test_the_variant_runs_the_model_as_shipped_on_every_path() -> None:
    shipped, q4_0 = M.Case("smollm2", M.BY_NAME["q4_1"]), M.Case("smollm2", M.BY_NAME["q4_0"])
    for path in M.PATHS:
        if path.fuse:  # fusion off is the spacemit build's path (tests/test_model_spacemit.py)
            assert M.repeated_in(DISPATCH_V, shipped, path) is None
        else:
            assert "spacemit build only" in M.repeated_in(DISPATCH_V, shipped, path)
    assert "the v build's code" in M.repeated_in(DISPATCH_V, q4_0, M.PATHS[0])
    assert M.repeated_in(DISPATCH_V, M.Case("gguf", M.BY_NAME["q4_0"], Path("user.gguf")), M.PATHS[0]) is None
    assert M.repeated_in(ISA_BUILDS["v"], q4_0, M.PATHS[0]) is None


def test_a_run_that_selects_the_variant_runs_the_budgeted_part_and_the_main_job_s_default_none() -> None:
    def collected(*extra: str) -> list[str]:
        r = pytest_child("cases/test_model.py", "--collect-only", "-q", "--vlen", "256,1024", "--rvv-stress", "both",
                         *extra, timeout=600, code=(0, 5))
        return [ln for ln in r.stdout.splitlines() if ln.startswith("cases/test_model.py::") and "NOTSET" not in ln]

    ids = collected("--isa", "riscv64_v", "--cc", "gcc14")
    assert sorted(ids) == sorted(f"cases/test_model.py::test_model[smollm2-q4_1-repack-t1-vlen{v}-riscv64_v{s}]"
                                 for v in (256, 1024) for s in ("", "-stress"))
    assert not any("riscv64_v" in i for i in collected("--isa", "all", "--cc", "clang,gcc14:zvfh"))

"""A distribution's build (GGML_BACKEND_DL + GGML_CPU_ALL_VARIANTS): which CPU variant each emulated CPU gets, and
whether that is right (harness/jobs/dispatch_runs.py, docs/dispatch.md).

The judge is held against canned probe output first (no build); then, as a long verification, the pinned tree's
dispatch build by each compiler is made and every emulated CPU of the table is run under QEMU: each row must be
right, except the findings listed in :data:`FINDINGS` (docs/dispatch.md), which must still show.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from harness.core.config import DISPATCH_V, ISA_BUILDS, NOVECTOR
from harness.core.matrix import Point
from harness.emulators.protocol import In, Out
from harness.emulators.qemu import qemu
from harness.ggml import source
from harness.jobs.dispatch_runs import Cpu, ProbeRun, cpus, hwprobe_extensions, judge, markdown, table_rows
from harness.toolchain.builds import IsaUnavailable, ensure_built
from harness.toolchain.compilers import ToolchainError
from harness.toolchain.dispatch_build import Dispatch, Variant, ensure_dispatch, tree_variants
from tests.helpers import POOL, gcc14_missing

#: ``(compiler, variant): the compiler's words`` for the variants a compiler cannot build in the pinned tree, and
#: ``(compiler, emulated CPU): what its row must say`` for the rows that are findings (docs/dispatch.md): clang
#: defines ``__riscv_v_intrinsic`` without V, so riscv64_0 (no ``-march``) does not compile (llama.cpp #22159), and
#: a CPU without V then gets no CPU backend at all.
UNBUILT: dict[tuple[str, str], str] = {("clang", "riscv64_0"): "requires the 'zve32f' extension"}
FINDINGS: dict[tuple[str, str], str] = {("clang", "no-V"): "ggml loaded no CPU variant"}

V0 = Variant("riscv64_0", (), (), (), Path("/b/bin/libggml-cpu-riscv64_0.so"))
VV = Variant("riscv64_v", ("RVV",), ("-march=rv64gc_v", "-mabi=lp64d", "-DGGML_USE_RVV"), ("v",),
             Path("/b/bin/libggml-cpu-riscv64_v.so"))
BUILD = Dispatch(source=None, compiler="gcc14", identity="gcc", dir=Path("/b"), key="k", variants=(V0, VV),  # type: ignore[arg-type]
                 probe=Path("/b/bin/probe"), options={})
NO_V, V256, ZVFH256 = Cpu(NOVECTOR, None), Cpu(ISA_BUILDS["v"], 256), Cpu(ISA_BUILDS["zvfh"], 256)


def scores_ran(hwprobe: int, s0: int, sv: int) -> ProbeRun:
    return ProbeRun(["qemu"], 0, (f"hwprobe 0 0x{hwprobe:x}", "scoring libggml-cpu-riscv64_0.so",
                             f"score libggml-cpu-riscv64_0.so {s0}", "scoring libggml-cpu-riscv64_v.so",
                             f"score libggml-cpu-riscv64_v.so {sv}", "done"), "")


def load_ran(variant: str, *features: str, code: int = 0, bad: int = 0) -> ProbeRun:
    lines = (f"log 2 load_backend: loaded CPU backend from /b/bin/libggml-cpu-{variant}.so", "device CPU | cpu",
             *(f"feature {f}" for f in features), f"matmul f32 {bad} {bad * 0.5:g} status=0", "matmul f16 0 0 status=0",
             "matmul q8_0 0 0 status=0")
    return ProbeRun(["qemu"], code, lines if code else (*lines, "done"), "")


V_BITS = 1 << 0 | 1 << 1 | 1 << 2 | 1 << 3
ZVFH_BITS = V_BITS | 1 << 27 | 1 << 28 | 1 << 30 | 1 << 31


def test_the_table_has_a_cpu_without_v_and_every_vlen_with_each_build() -> None:
    names = [c.name for c in cpus()]
    assert names[0] == "no-V" and len(names) == 13
    assert {"vlen128-v", "vlen256-zvfh", "vlen1024-zvfbfwma"} <= set(names)
    assert not NO_V.props["v"] and ZVFH256.props["zvfh"] and not V256.props["zvfh"]


def test_hwprobe_bits_are_read() -> None:
    assert hwprobe_extensions(ZVFH_BITS) == ("v", "zba", "zfh", "zfhmin", "zvfh", "zvfhmin")
    assert hwprobe_extensions(1 << 54 | 1 << 2) == ("v", "zvfbfwma")


def test_a_cpu_without_v_gets_the_variant_without_v() -> None:
    row = judge(BUILD, NO_V, scores_ran(0b11, 1, 0), load_ran("riscv64_0"))
    assert row.right, row.problems
    assert (row.loaded, row.expected, row.best) == ("riscv64_0", "riscv64_0", "riscv64_0")


def test_a_zvfh_cpu_gets_the_v_variant_and_what_it_leaves_out_is_said() -> None:
    row = judge(BUILD, ZVFH256, scores_ran(ZVFH_BITS, 1, 3), load_ran("riscv64_v", "RISCV_V 1", "RVV_VLEN 32"))
    assert row.right, row.problems
    assert row.loaded == "riscv64_v" and row.unused == ("zfh", "zfhmin", "zvfh", "zvfhmin", "zba")
    table = "\n".join(markdown(dataclasses.replace(BUILD, source=source.pinned()), [row]))
    assert "| vlen256-zvfh | v, zba, zfh, zfhmin, zvfh, zvfhmin | riscv64_0 1, riscv64_v 3 | riscv64_v | yes |" in table


@pytest.mark.parametrize(("cpu", "scores", "load", "said"), [
    (NO_V, scores_ran(0b11, 1, 2), load_ran("riscv64_v"),
     "riscv64_v scores 2 on a CPU without v, which its code uses"),
    (NO_V, scores_ran(0b11, 1, 0), load_ran("riscv64_0", code=-4), "killed by SIGILL after 'matmul q8_0"),
    (V256, scores_ran(V_BITS, 1, 3), load_ran("riscv64_0"), "a lesser variant: riscv64_0 where riscv64_v (with v) runs"),
    (V256, scores_ran(V_BITS, 1, 3), load_ran("riscv64_0"), "ggml loaded riscv64_0 where the scores say riscv64_v"),
    (V256, scores_ran(V_BITS, 3, 3), load_ran("riscv64_v", "RISCV_V 1", "RVV_VLEN 32"), "variants tie at score 3"),
    (V256, scores_ran(V_BITS, 1, 3), load_ran("riscv64_v", "RISCV_V 1", "RVV_VLEN 16"),
     "ggml reads VLEN 128 on a CPU of VLEN 256"),
    (V256, scores_ran(V_BITS, 1, 3), load_ran("riscv64_v", "RVV_VLEN 32"), "says RISCV_V=absent but its code is compiled with V"),
    (V256, scores_ran(V_BITS, 1, 3), load_ran("riscv64_v", "RISCV_V 1", "RVV_VLEN 32", bad=3),
     "mul_mat of f32 weights: 3 wrong elements"),
])
def test_what_is_wrong_is_said(cpu: Cpu, scores: ProbeRun, load: ProbeRun, said: str) -> None:
    row = judge(BUILD, cpu, scores, load)
    assert not row.right and any(said in p for p in row.problems), row.problems


def test_an_extension_hwprobe_does_not_report_is_a_note_on_the_emulator() -> None:
    bf = Cpu(ISA_BUILDS["zvfbfwma"], 256)
    row = judge(BUILD, bf, scores_ran(ZVFH_BITS, 1, 3), load_ran("riscv64_v", "RISCV_V 1", "RVV_VLEN 32"))
    assert row.right and row.notes == ["hwprobe does not report zfbfmin, zvfbfmin, zvfbfwma, which the emulated CPU executes"]


def test_the_pinned_tree_declares_two_riscv64_variants() -> None:
    assert tree_variants(source.pinned()) == (("riscv64_0", ()), ("riscv64_v", ("RVV",)))


@pytest.mark.long(10)
@pytest.mark.parametrize("compiler", ["gcc14", "clang"])
def test_every_emulated_cpu_gets_the_variant_it_should(compiler: str) -> None:
    if gcc14_missing():   # the runs need its root's glibc, whichever compiler builds
        pytest.skip(gcc14_missing())
    try:
        d = ensure_dispatch(source.pinned(), compiler)
    except (IsaUnavailable, ToolchainError) as e:
        pytest.skip(str(e))
    for v in d.variants:
        unbuilt = UNBUILT.get((compiler, v.name))
        assert (v.library is None) == bool(unbuilt) and (unbuilt or "") in v.error, (v.name, v.error)
    rows = table_rows(d)
    table = "\n".join(markdown(d, rows))
    for r in rows:
        finding = FINDINGS.get((compiler, r.cpu.name))
        if finding:
            assert any(finding in p for p in r.problems), f"{r.cpu.name}: the finding no longer shows:\n{table}"
        else:
            assert r.right, f"{r.cpu.name}: {r.problems}\n{table}"


@pytest.mark.long(8)
def test_the_riscv64_v_build_runs_the_variants_own_library() -> None:
    """``--isa riscv64_v``: the kernel server is compiled with the dispatch build's riscv64_v flags, linked against
    that build's own libggml-cpu-riscv64_v.so, and answers under QEMU at the asked VLEN."""
    if gcc14_missing():
        pytest.skip(gcc14_missing())
    d = ensure_dispatch(source.pinned(), "gcc14")
    variant = next(v for v in d.variants if v.name == "riscv64_v")
    b = ensure_built(source.pinned(), DISPATCH_V, "gcc14")
    assert b.libs[0] == variant.library and b.runtime is not None and b.march == variant.march
    server = POOL.server(b, Point(256, "riscv64_v", False, "gcc14"), qemu())
    x = np.arange(10, dtype=np.float32)
    assert server.call("vec_dot_f32", [10], [], [In(x), In(x), Out(4)]).output(0, np.float32)[0] == 285.0

"""The proposal of a ``riscv64_v_zvfh`` variant for a distribution's build (harness/data/proposals/, docs/dispatch.md,
docs/upstream/proposals/riscv64-zvfh-variant.md): the patch applies to the pinned tree and the dispatch table reads
the third variant from the patched tree; the judge on canned probe output of three variants; the variant's ISA build
and its static twin; then, as a long verification, the patched tree's dispatch build by GCC 14 under QEMU.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.core.config import DISPATCH_V, DISPATCH_V_ZVFH, ISA_BUILDS, NOVECTOR, static_twin
from harness.core.matrix import ISAS, parse_isas
from harness.ggml import known, patches, proposals, source
from harness.jobs.dispatch_runs import Cpu, ProbeRun, judge, table_rows
from harness.toolchain.compilers import ToolchainError
from harness.toolchain.dispatch_build import Dispatch, Variant, ensure_dispatch, tree_variants
from tests.helpers import gcc14_missing

ROOT = Path(__file__).resolve().parent.parent
ZVFH = "riscv64_zvfh_variant"

V0 = Variant("riscv64_0", (), (), (), Path("/b/bin/libggml-cpu-riscv64_0.so"))
VV = Variant("riscv64_v", ("RVV",), ("-march=rv64gc_v", "-mabi=lp64d", "-DGGML_USE_RVV"), ("v",),
             Path("/b/bin/libggml-cpu-riscv64_v.so"))
VZ = Variant("riscv64_v_zvfh", ("RVV", "ZVFH"), ("-march=rv64gc_v_zfh_zvfh", "-mabi=lp64d", "-DGGML_USE_RVV",
                                                 "-DGGML_USE_ZVFH"),
             ("v", "zfh", "zfhmin", "zvfh", "zvfhmin"), Path("/b/bin/libggml-cpu-riscv64_v_zvfh.so"))
BUILD = Dispatch(source=None, compiler="gcc14", identity="gcc", dir=Path("/b"), key="k", variants=(V0, VV, VZ),  # type: ignore[arg-type]
                 probe=Path("/b/bin/probe"), options={})
V_BITS = 1 << 2 | 1 << 3
ZVFH_BITS = V_BITS | 1 << 27 | 1 << 28 | 1 << 30 | 1 << 31


def scores_ran(hwprobe: int, *scores: int) -> ProbeRun:
    lines = [f"hwprobe 0 0x{hwprobe:x}"]
    for v, s in zip(BUILD.variants, scores):
        lines += [f"scoring {v.library.name}", f"score {v.library.name} {s}"]  # type: ignore[union-attr]
    return ProbeRun(["qemu"], 0, (*lines, "done"), "")


def load_ran(variant: str) -> ProbeRun:
    features = ("feature RISCV_V 1", "feature RVV_VLEN 32") if variant != "riscv64_0" else ()
    return ProbeRun(["qemu"], 0, (f"log 2 load_backend: loaded CPU backend from /b/bin/libggml-cpu-{variant}.so",
                                  *features, "matmul f32 0 0 status=0", "matmul f16 0 0 status=0",
                                  "matmul q8_0 0 0 status=0", "done"), "")


def test_the_proposal_names_its_text_variants_and_isa_build() -> None:
    p = proposals.get(ZVFH)
    assert p.title.startswith("ggml-cpu: riscv64 GGML_CPU_ALL_VARIANTS")
    assert (ROOT / p.text_path).is_file() and p.variants == ("riscv64_0", "riscv64_v", "riscv64_v_zvfh")
    assert ISAS[p.isa] is DISPATCH_V_ZVFH and parse_isas(p.isa) == (p.isa,)
    assert p.files == ["ggml/src/CMakeLists.txt", "ggml/src/ggml-cpu/CMakeLists.txt",
                       "ggml/src/ggml-cpu/arch/riscv/cpu-feats.cpp"]
    # the text carries the patch as it is verified
    assert p.text.split("\n--- ", 1)[1].strip() in (ROOT / p.text_path).read_text()


def test_the_patch_applies_to_the_pinned_tree_and_the_table_reads_the_third_variant() -> None:
    pinned = source.pinned()
    p = proposals.get(ZVFH)
    assert patches.applies(p, pinned)[0] == "applies"
    tree = proposals.apply(p, pinned)
    assert tree_variants(tree) == (("riscv64_0", ()), ("riscv64_v", ("RVV",)), ("riscv64_v_zvfh", ("RVV", "ZVFH")))
    assert tuple(n for n, _ in tree_variants(tree)) == p.variants
    assert patches.applies(p, tree)[0] == "applied"
    assert "riscv64_v_zvfh" not in dict(tree_variants(pinned))


def test_the_variant_s_static_twin_is_zvfh() -> None:
    assert static_twin(DISPATCH_V_ZVFH) == static_twin("riscv64_v_zvfh") == "zvfh"
    assert DISPATCH_V_ZVFH.qemu == ISA_BUILDS["zvfh"].qemu and set(DISPATCH_V_ZVFH.march) == set(ISA_BUILDS["zvfh"].march)
    assert DISPATCH_V_ZVFH.variant == "riscv64_v_zvfh" and DISPATCH_V_ZVFH.cmake == DISPATCH_V.cmake


@pytest.mark.parametrize(("cpu", "hw", "scores", "loaded"), [
    (Cpu(NOVECTOR, None), 0b11, (1, 0, 0), "riscv64_0"),
    (Cpu(ISA_BUILDS["v"], 256), V_BITS, (1, 3, 0), "riscv64_v"),
    (Cpu(ISA_BUILDS["zvfh"], 256), ZVFH_BITS, (1, 3, 7), "riscv64_v_zvfh"),
    (Cpu(ISA_BUILDS["zvfbfwma"], 256), ZVFH_BITS, (1, 3, 7), "riscv64_v_zvfh"),
])
def test_each_cpu_gets_the_best_of_three_variants(cpu: Cpu, hw: int, scores: tuple[int, ...], loaded: str) -> None:
    row = judge(BUILD, cpu, scores_ran(hw, *scores), load_ran(loaded))
    assert row.right, row.problems
    assert row.loaded == row.expected == row.best == loaded


def test_a_zvfh_cpu_left_on_riscv64_v_is_a_lesser_variant() -> None:
    """What the pinned tree's scoring would do with the third variant built but not asked for: V alone scored."""
    row = judge(BUILD, Cpu(ISA_BUILDS["zvfh"], 256), scores_ran(ZVFH_BITS, 1, 3, 3), load_ran("riscv64_v"))
    assert not row.right
    assert any("a lesser variant: riscv64_v where riscv64_v_zvfh (with zfh, zfhmin, zvfh, zvfhmin)" in p
               for p in row.problems), row.problems
    row = judge(BUILD, Cpu(ISA_BUILDS["v"], 256), scores_ran(V_BITS, 1, 3, 7), load_ran("riscv64_v_zvfh"))
    assert any("riscv64_v_zvfh scores 7 on a CPU without zfh, zfhmin, zvfh, zvfhmin" in p for p in row.problems)


@pytest.mark.long(6)
def test_the_patched_tree_gives_zvfh_cpus_the_zvfh_variant() -> None:
    """``rvvdiff dispatch --ggml-src $(rvvdiff proposal riscv64_zvfh_variant) --cc gcc14``: every row right, every
    CPU with zfh and zvfh loads riscv64_v_zvfh, every other CPU with V riscv64_v."""
    if gcc14_missing():
        pytest.skip(gcc14_missing())
    tree = proposals.apply(proposals.get(ZVFH), source.pinned())
    try:
        d = ensure_dispatch(tree, "gcc14")
    except ToolchainError as e:
        pytest.skip(str(e))
    assert all(v.library is not None for v in d.variants) and [v.name for v in d.variants] == list(
        proposals.get(ZVFH).variants)
    assert set(next(v for v in d.variants if v.name == "riscv64_v_zvfh").extensions) >= {"v", "zfh", "zvfh"}
    for r in table_rows(d):
        assert r.right, (r.cpu.name, r.problems)
        want = "riscv64_0" if r.cpu.vlen is None else "riscv64_v_zvfh" if r.cpu.props.get("zvfh") else "riscv64_v"
        assert r.loaded == want, (r.cpu.name, r.loaded)


@pytest.mark.parametrize(("extensions", "said"), [
    (("v", "zfh", "zfhmin", "zvfh", "zvfbfwma"), "lets its code use v, zfh, zfhmin, zvfh, zvfbfwma"),
    (("v",), "not what the riscv64_v_zvfh build promises (v, zfh, zvfh)"),
])
def test_a_variant_whose_code_is_not_the_build_s_is_unavailable(monkeypatch: pytest.MonkeyPatch,
                                                               extensions: tuple[str, ...], said: str) -> None:
    """GCC 14 names no ``__riscv_zvfhmin`` under zvfh: a variant may leave out an implied extension, but it may use
    none the emulated CPU lacks and must have each the ISA build promises."""
    from harness.toolchain import builds
    odd = Variant("riscv64_v_zvfh", ("RVV", "ZVFH"), (), extensions, VZ.library)
    monkeypatch.setattr(builds, "glibc_root", lambda: Path("/root"))
    monkeypatch.setattr(builds, "ensure_dispatch", lambda *a, **k: Dispatch(
        source.pinned(), "gcc14", "gcc", Path("/b"), "k", (V0, VV, odd), Path("/b/bin/probe"), {}))
    with pytest.raises(builds.IsaUnavailable, match="riscv64_v_zvfh") as e:
        builds.variant_build(source.pinned(), DISPATCH_V_ZVFH, "gcc14")
    assert said in str(e.value)


def test_gcc14_s_frm_finding_names_v_and_riscv64_v_not_the_zvfh_variant() -> None:
    """The zvfh variant is compiled with zfh, as the zvfh build is, which converts with fcvt.h.s: no frm left at RMM."""
    entry = next(e for e in known.load() if e.test.startswith("cases/test_repack_layout.py::test_quantize_mat[[]q8_0_4x8"))
    ids = {isa: f"cases/test_repack_layout.py::test_quantize_mat[q8_0_4x8-vlen256-{isa}]" for isa in
           ("v", "v-stress", "riscv64_v", "riscv64_v-stress", "riscv64_v_zvfh", "riscv64_v_zvfh-stress", "zvfh")}
    assert {isa for isa, i in ids.items() if entry.matches(i, "qemu", "gcc14")} == {
        "v", "v-stress", "riscv64_v", "riscv64_v-stress"}


def test_the_zvfh_finding_of_dot_f16_unroll_names_the_zvfh_variant_too() -> None:
    """ggml_vec_dot_f16_unroll's tail-agnostic accumulator is zvfh code: the riscv64_v_zvfh variant has it, V alone not."""
    entry = next(e for e in known.load() if "dot_f16_unroll" in e.test)
    hit = {isa for isa in ("v", "zvfh", "zvfbfwma", "riscv64_v", "riscv64_v_zvfh")
           if entry.matches(f"cases/test_vec_ops.py::test_vec_op[dot_f16_unroll-vlen256-{isa}-stress]", "qemu", "gcc14")}
    assert hit == {"zvfh", "zvfbfwma", "riscv64_v_zvfh"}
    assert not entry.matches("cases/test_vec_ops.py::test_vec_op[dot_f16_unroll-vlen256-riscv64_v_zvfh]", "qemu", "gcc14")

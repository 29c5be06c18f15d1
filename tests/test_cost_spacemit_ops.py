"""The cost cases of SpacemiT's ops and flash attention (costs/spacemit_ops.py, costs/spacemit_fa.py): a change to a
SpacemiT kernel (or a helper it calls, or ggml-cpu's code it replaces) selects its cases and no other's, in the
gate's reach and in a real collection of the cost suite at both builds; each row's path is read from the functions
executed and says where the build's dispatch should have gone elsewhere; one compute is the reps-2 row minus the
reps-1 row; under Spike, one case measured at both builds takes each build's path; and a case no build of the run
can measure (SpacemiT's at ``--isa zvfh``, at a compiler that cannot make the spacemit build) is deselected at
collection with the reason, so ``rvvdiff cost`` measures every case it selected and exits 0, not 3."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from launch import pytest_child, rvvdiff

from costs import registry
from costs import spacemit_fa as cost_fa
from costs import spacemit_ops as cost_ops
from harness.core.matrix import CANNOT_MAKE
from harness.emulators import spike
from harness.ggml import changes, source

RVV_KERNELS = "src/ggml-cpu/spacemit/rvv_kernels.cpp"
#: A changed function -> the calls (op-type) whose cases must measure it.
REACHES = {
    "forward_norm_f32": {"norm-f32"},
    "forward_rms_norm_f32": {"rms_norm-f32"},
    "forward_binary": {"add-f32", "add-f16", "mul-f32", "mul-f16"},
    "forward_sum_rows": {"sum_rows-f32"},
    "forward_cont_with_permute": {"cont-f32"},
    "rvv_transposed_s32_mn_to_nm": {"cont-f32"},  # the transpose's inline assembly, a helper of the cont
    "memcpy1d": {"get_rows-f32"},  # get_rows' row copy
    "ggml_compute_forward_rms_norm": {"rms_norm-f32"},  # ggml-cpu's side of the same graph
}


def _selected(reach: changes.Reach, changed: set[str]) -> set[str]:
    """The spacemit_ops calls a change reaches, as the gate selects (harness/plugin/budget.py: ``requires``)."""
    return {c.name for c in cost_ops.CASES if reach.covers(c.requires, changed)}


@pytest.fixture(scope="module")
def reach() -> changes.Reach:
    return changes.Reach(source.pinned())


def test_a_change_to_a_kernel_selects_its_cases_and_no_others(reach: changes.Reach) -> None:
    for name, want in REACHES.items():
        assert _selected(reach, {name}) == want, name
    assert _selected(reach, {"ggml_vec_dot_q4_0_q8_0"}) == set()


def test_a_change_to_spacemit_flash_attention_selects_its_cases(reach: changes.Reach) -> None:
    """Either SpacemiT kernel, or ggml-cpu's tiled path, selects every flash-attention case (each reaches both
    kernels through ime.cpp's dispatch, ``forward_flash_attn_ext_f16``), and no op case; an op's kernel none."""
    fa = lambda changed: {c.name for c in cost_fa.CASES if reach.covers(c.requires, changed)}  # noqa: E731
    for changed in ("forward_flash_attn_ext_f16_tiled_vlen1024_vf16", "forward_flash_attn_ext_f16_one_chunk_vlen1024_vf16",
                    "ggml_compute_forward_flash_attn_ext_tiled"):
        assert fa({changed}) == {name for name, _, _ in cost_fa.SHAPES} and _selected(reach, {changed}) == set(), changed
    assert fa({"forward_norm_f32"}) == set()


def test_a_spacemit_change_selects_the_cases_at_both_builds_in_a_real_collection(tmp_path: Path) -> None:
    """``rvvdiff cost --changed-only`` collects the cost suite with the change: the norm's cases at the spacemit
    build (its kernel) and the zvfh build (ggml-cpu's norm, the other side of the ratio), every reps, no other."""
    diff = changes.Diff("b", "h", [changes.Change("forward_norm_f32", "function", "changed", RVV_KERNELS, 1, True,
                                                  ("spacemit",))])
    f = tmp_path / "changes.json"
    f.write_text(json.dumps(diff.to_json()))
    cp = pytest_child("costs/test_cost.py", "costs/test_cost_spacemit.py", "--collect-only", "-q", "--emulator", "spike",
                      "--vlen", "256", "--isa", "zvfh,spacemit", "--changes", str(f), "--changed-only",
                      "--report-dir", str(tmp_path / "r"))
    ids = sorted(ln for ln in cp.stdout.splitlines() if "::" in ln)
    want = sorted(f"costs/test_cost{'_spacemit' if isa == 'spacemit' else ''}.py::test_cost[{c.id}-vlen256-{isa}]"
                  for c in cost_ops.CASES if c.name == "norm-f32" for isa in ("zvfh", "spacemit"))
    assert ids == want and len(want) == 2 * len(cost_ops.WIDTHS) * len(cost_ops.REPS), ids


def test_the_cases_run_at_both_backends_and_are_registered() -> None:
    both = cost_ops.CASES + cost_fa.CASES
    assert cost_ops.CASES and cost_fa.CASES and all(c.runs_on("spacemit") and c.runs_on("cpu") for c in both)
    assert {"spacemit_ops", "spacemit_fa"}.isdisjoint(registry.UNMEASURED)
    assert all(registry.BY_ID[c.id] is c for c in cost_ops.CASES + cost_fa.CASES)
    gemm = next(c for c in registry.CASES if c.family == "spacemit_gemm")
    assert gemm.runs_on("spacemit") and not gemm.runs_on("cpu")


def _target(backend: str, vlen: int = 256) -> SimpleNamespace:
    return SimpleNamespace(isa=SimpleNamespace(backend=backend), vlen=vlen)


def test_the_path_is_read_from_the_functions_executed() -> None:
    add = cost_ops.CALLS[2].case(576)
    path = cost_ops.path_of(add)
    spacemit = {"_ZN16spacemit_kernels3rvv14forward_binaryIL7ggml_op2EfEEvP19ggml_compute_paramsP11ggml_tensor": 900,
                "ggml_graph_compute": 40, "memset": 7}
    assert path(_target("spacemit"), spacemit) == {"path": "SpacemiT: forward_binary"}
    ggml = {"ggml_compute_forward_add": 30, "_ZL38ggml_compute_forward_add_non_quantizedPK19ggml_compute_paramsP11"
            "ggml_tensor": 2000}
    assert path(_target("cpu"), ggml) == {
        "path": "ggml-cpu: ggml_compute_forward_add, ggml_compute_forward_add_non_quantized"}
    # the spacemit build that ran ggml-cpu's op, and a ggml-cpu build that ran SpacemiT's kernel: both said
    assert path(_target("spacemit"), ggml)["path_expected"] == "forward_binary<add, float>"
    assert path(_target("cpu"), spacemit)["path_expected"] == "ggml-cpu's own op"


def test_the_flash_attention_path_is_read_from_the_functions_executed() -> None:
    name, sh, _ = cost_fa.SHAPES[2]  # a prefill: SpacemiT's tiled kernel at VLEN 1024, ggml's tiled path elsewhere
    path = cost_fa.path_of(sh)
    mine = {"_ZN16spacemit_kernels3rvv46forward_flash_attn_ext_f16_tiled_vlen1024_vf16EP19ggml_compute_paramsP11"
            "ggml_tensor": 10**6}
    ggml = {"ggml_compute_forward_flash_attn_ext_tiled": 10**6, "simd_gemm": 10**5}
    assert path(_target("spacemit", 1024), mine) == {"path": "spacemit-tiled"}, name
    assert path(_target("cpu", 1024), ggml) == {"path": "tiled"}
    assert path(_target("spacemit", 256), ggml) == {"path": "tiled"}  # below VLEN 1024 the spacemit build runs ggml's
    assert path(_target("spacemit", 1024), ggml) == {"path": "tiled", "path_expected": "spacemit-tiled"}


def _row(name: str, size: str, isa: str, instret: int, memcpy: int = 0) -> dict:
    return {"family": "spacemit_ops", "name": name, "size": size, "vlen": 256, "isa": isa, "instret": instret,
            "functions": {"memcpy": memcpy}, "path": f"{isa} path"}


def test_one_compute_is_reps_2_minus_reps_1() -> None:
    rows = [_row("rms_norm-f32", "576x8-r1", "spacemit", 40_000, 10), _row("rms_norm-f32", "576x8-r2", "spacemit", 42_000, 20),
            _row("rms_norm-f32", "576x8-r1", "zvfh", 41_000, 10), _row("rms_norm-f32", "576x8-r2", "zvfh", 45_000, 3010)]
    # one compute is reps 2 minus reps 1, its C library part likewise; the ratio with and without that part
    assert cost_ops.per_call(rows) == {("rms_norm-f32", "576x8", 256, "spacemit"): (2000, 10, "spacemit path"),
                                ("rms_norm-f32", "576x8", 256, "zvfh"): (4000, 3000, "zvfh path")}
    head, _, line = cost_ops.table(rows).splitlines()
    assert head.startswith("| case | size | SpacemiT, VLEN 256 | ggml-cpu, VLEN 256 | ratio, VLEN 256 | paths")
    assert line == "| rms_norm-f32 | 576 x 8 | 2 000 (10) | 4 000 (3 000) | 0.5 (2) | spacemit path; zvfh path |", line
    assert cost_ops.per_call(rows[1:]) == {("rms_norm-f32", "576x8", 256, "zvfh"): (4000, 3000, "zvfh path")}  # no pair: none


@pytest.mark.skipif(spike.available() is not None, reason=f"SKIPPED: Spike is not here: {spike.available()}")
def test_one_case_measured_at_both_builds_takes_each_builds_path(tmp_path: Path) -> None:
    """Under Spike at VLEN 256: the norm of 576 x 8 runs SpacemiT's forward_norm_f32 in the spacemit build and
    ggml-cpu's norm in the zvfh build, each result within its bound, and reps 2 retires more than reps 1."""
    log = tmp_path / "cost.jsonl"
    pytest_child("costs/test_cost.py", "costs/test_cost_spacemit.py", "--emulator", "spike", "--vlen", "256",
                 "--isa", "zvfh,spacemit", "-k", "spacemit_ops and norm-f32-576x8 and not rms", "-p", "no:xdist",
                 "--cost-log", str(log), "--report-dir", str(tmp_path / "r"))
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    calls = cost_ops.per_call(rows)
    assert len(rows) == 4 and set(calls) == {("norm-f32", "576x8", 256, "spacemit"), ("norm-f32", "576x8", 256, "zvfh")}
    assert all("path_expected" not in r for r in rows), rows
    assert calls[("norm-f32", "576x8", 256, "spacemit")][2] == "SpacemiT: forward_norm_f32"
    assert calls[("norm-f32", "576x8", 256, "zvfh")][2].startswith("ggml-cpu: ggml_compute_forward_norm")
    assert all(n > 0 for n, _, _ in calls.values()), calls


def test_a_backend_without_a_build_has_its_cost_cases_deselected_with_the_reason(tmp_path: Path) -> None:
    """SpacemiT's cost cases are not collected at --isa zvfh (no [NOTSET] case, which would be skipped and count as
    selected but not measured), nor at a compiler that cannot make the spacemit build (GCC 14), and ggml-cpu's are not
    at --isa spacemit; the terminal summary says why and how many; the compiler that can make it keeps its cases."""
    def collect(*args: str) -> tuple[list[str], list[str]]:
        cp = pytest_child("costs/test_cost.py", "costs/test_cost_spacemit.py", "--collect-only", "-q", "--emulator",
                          "spike", "--vlen", "256", "-k", "spacemit_ops and norm-f32-576x8-r1 and not rms", *args,
                          "--report-dir", str(tmp_path / "r"), "-p", "no:xdist")
        lines = cp.stdout.splitlines()
        return sorted(ln for ln in lines if "::" in ln), [ln for ln in lines if ln.startswith("rvvdiff: deselected")]

    ids, said = collect("--isa", "zvfh")
    assert ids == ["costs/test_cost.py::test_cost[spacemit_ops-norm-f32-576x8-r1-vlen256-zvfh]"], ids
    assert said == ["rvvdiff: deselected 1 cost case: no ISA build of the spacemit backend is selected (--isa zvfh; "
                    "its builds: spacemit)"], said
    ids, said = collect("--isa", "spacemit", "--cc", "clang,gcc14")
    assert ids == ["costs/test_cost_spacemit.py::test_cost[spacemit_ops-norm-f32-576x8-r1-vlen256-spacemit-clang]"], ids
    assert said == ["rvvdiff: deselected 1 cost case: no ISA build of the cpu backend is selected (--isa spacemit; "
                    "its builds: v, zvfh, zvfbfwma, rv64gc, riscv64_v, riscv64_v_zvfh)",
                    f"rvvdiff: deselected 1 cost case: {CANNOT_MAKE[('gcc14', 'spacemit')]}"], said
    ids, said = collect("--isa", "zvfh,spacemit")  # both builds selected: nothing to deselect
    assert len(ids) == 2 and not said, (ids, said)


@pytest.mark.skipif(spike.available() is not None, reason=f"SKIPPED: Spike is not here: {spike.available()}")
def test_rvvdiff_cost_without_the_spacemit_build_measures_what_it_selected(tmp_path: Path) -> None:
    """``rvvdiff cost --isa zvfh`` over a selection that holds SpacemiT's case of the same graph: the case is
    deselected (the line says why), the zvfh case is measured, and the command exits 0: every selected case
    measured."""
    cp = rvvdiff("cost", "--isa", "zvfh", "--vlen", "256", "-n", "1", "-k",
                 "spacemit_ops and norm-f32-576x8-r1 and not rms", "--no-estimates", "--out", tmp_path / "out",
                 code=0, timeout=3600)
    assert ("rvvdiff cost: deselected 1 cost case: no ISA build of the spacemit backend is selected (--isa zvfh; "
            "its builds: spacemit)") in cp.stdout, cp.stdout
    assert "rvvdiff cost: 1 case selected" in cp.stdout and "1 of 1 selected cases measured" in cp.stdout, cp.stdout

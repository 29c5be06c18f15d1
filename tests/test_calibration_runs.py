"""A calibration row measured again by one command (harness/jobs/calibration_runs.py): the runs it plans are the
ones each row's committed source holds (kernel cases per compiler, on AFTER alone where the source measured both
paths there, every model-shaped case), and a row that is not in the data file is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cost.calibration import sources
from harness.cost.prices import per_token
from harness.jobs import calibration_runs

TREES = (Path("/trees/before"), Path("/trees/after"))


def _plan(name: str, cc: list[str] | None = None) -> list[tuple[str, list[str]]]:
    return calibration_runs.plan(name, cc, TREES, Path("/out"))


def _arg(args: list[str], flag: str) -> str | None:
    return args[args.index(flag) + 1] if flag in args else None


def test_every_row_with_a_source_plans_its_kernel_and_model_runs() -> None:
    for raw in sources.read()[1]:
        if not sources.source_path(raw["name"]).is_file():
            continue  # recorded, not measured yet: nothing to measure again
        runs = _plan(raw["name"])
        source = sources.load_source(raw["name"])["per_compiler"]
        assert {cc for cc, _ in runs} == set(source), raw["name"]
        for cc, args in runs:
            assert _arg(args, "--cc") == cc and _arg(args, "--ggml-src") == str(TREES[1])
            assert _arg(args, "--vlen") == str(raw["vlen"])
        for cc, run in source.items():
            specs = [_arg(a, "--model") for c, a in runs if c == cc and "--model" in a]
            names = {r.get("name") for side in run.values() for r in side}
            held = [c["spec"] for c in sources.model_cases(raw)
                    if per_token.case_name(per_token.parse_spec(c["spec"])[0]) in names]
            assert specs == held, (raw["name"], cc)
        assert {_arg(a, "--model") for _, a in runs if "--model" in a} == \
            {c["spec"] for c in sources.model_cases(raw)}, raw["name"]


def test_a_row_measured_on_after_alone_is_measured_so_again() -> None:
    """#19121's two paths (BEFORE's vec_dot, AFTER's repacked GEMM) were both measured on AFTER."""
    runs = _plan("llama.cpp #19121")
    kernel = [a for cc, a in runs if cc == "clang" and "--model" not in a]
    assert len(kernel) == 1 and "--base" not in kernel[0]
    assert _arg(kernel[0], "-k") == "quant_dot-q2_K-k4096-vlen256 or repack-q2_K_16x1-gemm-1024x4096x8-vlen256"
    assert all("--base" in a for _, a in runs if "--model" in a)


def test_a_compiler_the_source_lacks_gets_clangs_kernel_cases_only() -> None:
    runs = _plan("llama.cpp #18784", ["clang", "gcc14"])
    gcc = [a for cc, a in runs if cc == "gcc14"]
    assert len(gcc) == 1 and "--model" not in gcc[0] and _arg(gcc[0], "-k") == "quant_dot-iq1_s-k4096-vlen256"
    assert _arg(gcc[0], "--base") == str(TREES[0])


def test_an_unknown_row_is_refused() -> None:
    with pytest.raises(sources.CalibrationError, match="no such row"):
        _plan("llama.cpp #1")


def test_a_tiling_row_is_measured_on_after_with_its_switch_set(tmp_path: Path) -> None:
    tree = tmp_path / "after"
    (tree / calibration_runs.SGEMM).parent.mkdir(parents=True)
    (tree / calibration_runs.SGEMM).write_text("a\n#define LMUL 4\nb\n")
    got = calibration_runs.with_lmul(tree, 2)
    assert got.name == "after-lmul2" and (got / calibration_runs.SGEMM).read_text() == "a\n#define LMUL 2\nb\n"
    assert (tree / calibration_runs.SGEMM).read_text() == "a\n#define LMUL 4\nb\n"  # the exported tree is kept
    (tree / calibration_runs.SGEMM).write_text("no switch\n")
    with pytest.raises(sources.CalibrationError, match="no single"):
        calibration_runs.with_lmul(tree, 1)


def test_a_row_with_a_before_edit_is_measured_on_before_with_it_made(tmp_path: Path) -> None:
    tree = tmp_path / "before"
    (tree / "src").mkdir(parents=True)
    (tree / "src" / "q.c").write_text("if (v) { f_vl256(n); }\n")
    edit = {"file": "src/q.c", "old": "f_vl256(n);", "new": "f_vl128(n);"}
    got = calibration_runs.edited(tree, edit)
    assert got.name.startswith("before-edit-") and (got / "src" / "q.c").read_text() == "if (v) { f_vl128(n); }\n"
    assert calibration_runs.edited(tree, edit) == got and (tree / "src" / "q.c").read_text().count("vl256") == 1
    with pytest.raises(sources.CalibrationError, match="no single"):
        calibration_runs.edited(tree, {**edit, "old": "absent"})
    raw = calibration_runs.row("llama.cpp #22768 (VL128 kernel)")
    assert raw["before_edit"]["old"].startswith("ggml_vec_dot_q1_0_q8_0_vl256(")

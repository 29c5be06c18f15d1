"""Float mul_mat's cost by batch end to end under Spike, ``rvvdiff cost`` run as a user runs it on the
pinned tree at VLEN 256 of the zvfh build: f16 weights with f32 activations at batch 1 take the vec_dot
fallback and at batch 2 tinyBLAS_RVV, and the page says so; the model-shaped case of f16 weights names
the path of each batch (16 measurements of a layer's slices: about 110 s on two busy cores, 35 s for the
first test)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from launch import rvvdiff

from harness.emulators import spike

WHY_NOT = spike.available()
pytestmark = pytest.mark.skipif(WHY_NOT is not None, reason=f"SKIPPED: the cost checks did not run: {WHY_NOT}")

SELECT = ["--isa", "zvfh", "--vlen", "256", "-n", "1"]
FALLBACK, GEMM = "ggml_vec_dot_f16 (vec_dot fallback)", "tinyBLAS_RVV<float16m2>::gemm<2,2,8>"


def _cost(tmp: Path, *args: str) -> tuple[int, dict, str]:
    cp = rvvdiff("cost", *args, *SELECT, "--out", tmp, code=None, timeout=3600)
    data = json.loads((tmp / "cost.json").read_text()) if (tmp / "cost.json").is_file() else {}
    return cp.returncode, data, cp.stdout + cp.stderr


def test_each_side_of_the_batch_switch_is_measured_on_its_path(tmp_path: Path) -> None:
    code, data, out = _cost(tmp_path, "-k", "mul_mat and not bf16 and (f16_f32-64x4096x1- or f16_f32-64x4096x2-)")
    assert code == 0, out
    assert {r["case"]: r["path"] for r in data["head"]} == {"mul_mat-f16_f32-64x4096x1": FALLBACK,
                                                           "mul_mat-f16_f32-64x4096x2": GEMM}, out
    assert not any("path_expected" in r for r in data["head"]), "the tree's prediction is what ran"
    (sweep,) = data["batch_paths"]
    assert sweep["switches"] == [2] and [b["path"] for b in sweep["batches"]] == [FALLBACK, GEMM]
    # tinyBLAS_RVV's gemm at 2 rows costs less per MAC than a vec_dot per output element at 1.
    assert sweep["batches"][1]["per_unit"] < sweep["batches"][0]["per_unit"]
    assert f"n=1: {FALLBACK}" in (tmp_path / "cost.md").read_text()


@pytest.mark.long(2)
def test_a_float_model_names_the_path_of_each_batch(tmp_path: Path) -> None:
    code, data, out = _cost(tmp_path, "--model", "tinyllama:f16:1+2", "-k", "model")
    assert code == 0, out
    lines = (tmp_path / "model.md").read_text().splitlines()
    (one,) = [ln for ln in lines if "f16, batch 1:" in ln]
    (two,) = [ln for ln in lines if "f16, batch 2:" in ln]
    assert one.endswith(f"; path: {FALLBACK}") and two.endswith(f"; path: {GEMM}"), lines
    assert {r["family"] for r in data["head"]} == {"mul_mat"} and len(data["head"]) == 16

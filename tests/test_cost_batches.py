"""Float mul_mat's cost at the batches where ggml's paths switch: the switch read from the tree's
llamafile_sgemm (a tree with another threshold gets cases on both sides of its own), the cost cases of
the tree under test, the path labels and the cost page's paths by batch.  No Spike: rows are synthetic,
trees are written here."""

from __future__ import annotations

from pathlib import Path

from cases import mul_mat as MM
from cases.mul_mat_shapes import on_tinyblas
from costs import graph
from harness.cost.tables import batch_paths, suite_tables
from harness.ggml.source import GgmlSource

#: A llamafile_sgemm whose f16 tinyBLAS_RVV needs 8 B rows (a tree unlike the pinned one, where 2 do).
SGEMM = """\
bool llamafile_sgemm(const struct ggml_compute_params * params, int64_t m, int64_t n, int64_t k,
                     const void *A, int64_t lda, const void *B, int64_t ldb, void *C,
                     int64_t ldc, int Atype, int Btype, int Ctype) {
#if !defined(__MMA__)
    if (n < 2)
        return false;
#endif
    switch (Atype) {
    case GGML_TYPE_F32: {
#if defined(__riscv_v_intrinsic)
        tinyBLAS_RVV<vfloat32m4_t, vfloat32m4_t, float, float, float> tb{ params, k, (const float *)A, lda,
            (const float *)B, ldb, (float *)C, ldc};
        return tb.matmul(m, n);
#else
        return false;
#endif
    }
    case GGML_TYPE_F16: {
#if defined(__riscv_zvfh)
        if (n <= 7)
            return false;
        if (Btype == GGML_TYPE_F16) {
            tinyBLAS_RVV<vfloat32m4_t, vfloat16m2_t, ggml_fp16_t, ggml_fp16_t, float> tb{ params, k,
                (const ggml_fp16_t *)A, lda, (const ggml_fp16_t *)B, ldb, (float *)C, ldc};
            return tb.matmul(m, n);
        }
#endif
        return false;
    }
    default:
        return false;
    }
}
"""


def _tree(root: Path) -> GgmlSource:
    sgemm = root / MM.SGEMM
    sgemm.parent.mkdir(parents=True)
    sgemm.write_text(SGEMM)
    (root / "include").mkdir()
    (root / "include" / "ggml.h").write_text("#pragma once\nenum ggml_type { GGML_TYPE_F32 = 0, GGML_TYPE_F16 = 1 };\n")
    (root / "CMakeLists.txt").write_text("set(GGML_VERSION_MAJOR 0)\n")
    return GgmlSource(root, root, "synthetic tree", "abc1234def")


def test_the_batch_switch_is_read_from_the_tree(tmp_path: Path) -> None:
    src = _tree(tmp_path)
    zvfh = MM.tinyblas(src, ("v", "zvfh"))
    assert {t: tb.min_n for t, tb in zvfh.items()} == {"f32": 2, "f16": 8}
    assert MM.tinyblas(src, ("v",))["f32"].min_n == 2
    assert MM.switch_batches(src) == (1, 2, 7, 8)
    # Both sides of each switch join the sweep's batches; a case at 7 is on the fallback, at 8 on tinyBLAS.
    assert graph.batches(MM.switch_batches(src)) == (1, 2, 4, 7, 8, 32, 64, 128)
    assert not on_tinyblas(256, 4096, 64, 7, zvfh["f16"].min_n) and on_tinyblas(256, 4096, 64, 8, zvfh["f16"].min_n)


def test_the_pinned_tree_switches_at_two_rows() -> None:
    """The session's tree (the pinned one here): decoding takes the vec_dot fallback, 2 rows tinyBLAS_RVV;
    the kernels with f32 activations are measured on both sides and at the sweep's batches, the others at N."""
    ids = {c.id for c in graph.MUL_MAT}
    for name in ("f32", "f16_f32", "bf16_f32"):
        assert {f"mul_mat-{name}-64x4096x{n}" for n in (1, 2, 4, 32, 64, 128)} <= ids
    assert "mul_mat-f16-64x4096x64" in ids and "mul_mat-f16-64x4096x1" not in ids
    assert all(c.batch and c.path for c in graph.MUL_MAT)


def test_a_path_says_what_it_is() -> None:
    assert MM.path_kind("ggml_vec_dot_f16") == "ggml_vec_dot_f16 (vec_dot fallback)"
    assert MM.path_kind("tinyBLAS_RVV<float16m2>::gemm<2,2,8>") == "tinyBLAS_RVV<float16m2>::gemm<2,2,8>"
    gemm = "_ZN12_GLOBAL__N_112tinyBLAS_RVVIu17__rvv_float32m4_tu17__rvv_float16m2_tDF16_S3_fE4gemmILi2ELi2ELi8EEEvlll"
    assert MM.executed_path(frozenset({gemm, "ggml_cpu_fp32_to_fp16"})) == "tinyBLAS_RVV<float16m2>::gemm<2,2,8>"


FALLBACK, GEMM = "ggml_vec_dot_f16 (vec_dot fallback)", "tinyBLAS_RVV<float16m2>::gemm<2,2,8>"


def _row(n: int, vlen: int, path: str, instret: int, **extra) -> dict:
    return {"case": f"mul_mat-f16_f32-64x4096x{n}", "family": "mul_mat", "name": "f16_f32", "size": f"64x4096x{n}",
            "impl": "rvv", "function": "ggml_mul_mat", "twin": None, "units": 64 * 4096 * n, "unit": "MAC",
            "vlen": vlen, "isa": "zvfh", "instret": instret, "batch": n, "path": path, **extra}


def test_the_page_sets_each_side_of_a_switch_beside_the_other() -> None:
    head = suite_tables.merge([_row(1, 256, FALLBACK, 3 * 64 * 4096), _row(2, 256, GEMM, 64 * 4096),
                               _row(32, 256, GEMM, 8 * 64 * 4096)])
    base = suite_tables.merge([_row(1, 256, FALLBACK, 3 * 64 * 4096), _row(2, 256, FALLBACK, 4 * 64 * 4096)])
    (sweep,) = batch_paths.sweeps(head, base)
    assert sweep.switches() == [2]
    assert sweep.describe() == (f"mul_mat f16_f32, zvfh, VLEN 256: n=1: {FALLBACK} 3/unit | n=2: {GEMM} 0.5/unit "
                                f"[0.250 of base] | n=32: {GEMM} 0.25/unit (path switches at n=2)")
    table = suite_tables.CostTable(head, base)
    md = table.markdown()
    assert "Paths by batch (1;" in md and f"n=1: {FALLBACK}" in md
    assert f"| ggml_mul_mat (f16_f32: {GEMM}) | 64x4096x2 | zvfh | 0.5 [0.250 of base] |" in md  # the case's label
    (js,) = table.as_json()["batch_paths"]
    assert js["switches"] == [2] and js["batches"][1] == {"batch": 2, "path": GEMM, "per_unit": 0.5,
                                                           "head_over_base": 0.25}
    # The tree's prediction is shown where the measured path differs from it; a lone batch is no sweep.
    odd = suite_tables.merge([_row(1, 256, FALLBACK, 10, path_expected=GEMM), _row(2, 256, GEMM, 10)])
    assert f"{FALLBACK} (the tree predicted {GEMM})" in batch_paths.sweeps(odd)[0].describe()
    assert batch_paths.sweeps(suite_tables.merge([_row(1, 256, FALLBACK, 10)])) == []

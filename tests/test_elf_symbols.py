"""Symbol names as both compilers write them: GCC's clones read as the function they copy
(harness/binary/elf.base_symbol), in the trace, the coverage table and the cost histograms, and
the tinyBLAS_RVV gemm recognised in either mangling (cases/mul_mat.py)."""

from __future__ import annotations

import pytest

from cases import mul_mat as MM
from harness.binary import elf
from harness.cost.measure import spike_count
from harness.emulators import trace

#: A gemm as each compiler names it in the pinned tree's servers (f32 x f32, then f16 x f32).
CLANG_F32 = "_ZN12_GLOBAL__N_112tinyBLAS_RVVIu17__rvv_float32m4_tu17__rvv_float32m4_tfffE4gemmILi2ELi2ELi8EEEvlll"
GCC_F32 = "_ZN12_GLOBAL__N_112tinyBLAS_RVVIu17__rvv_float32m4_tS1_fffE4gemmILi2ELi2ELi8EEEvlll.constprop.0"
CLANG_F16 = "_ZN12_GLOBAL__N_112tinyBLAS_RVVIu17__rvv_float32m4_tu17__rvv_float16m2_tttfE4gemmILi2ELi1ELi2EEEvlll"
GCC_F16 = CLANG_F16 + ".constprop.0"


@pytest.mark.parametrize(("name", "base"), [
    ("ggml_vec_dot_q4_K_q8_K_vl128.isra.0", "ggml_vec_dot_q4_K_q8_K_vl128"),
    ("ggml_compute_forward_mul_mat.constprop.12", "ggml_compute_forward_mul_mat"),
    ("quantize_row_q8_K.part.0", "quantize_row_q8_K"),
    ("ggml_graph_compute.cold", "ggml_graph_compute"),
    ("f.cold.3", "f"),
    ("f.part.0.isra.0", "f"),
    ("f.constprop.0.isra.0.cold", "f"),
    ("f.lto_priv.0", "f"),
    ("foo(int) [clone .isra.0]", "foo(int)"),
    ("foo(int) [clone .isra.0] [clone .cold]", "foo(int)"),
    (GCC_F32, GCC_F32.removesuffix(".constprop.0")),
    # not clone suffixes: kept
    ("ggml_vec_dot_q4_K_q8_K_vl128", "ggml_vec_dot_q4_K_q8_K_vl128"),
    ("my.constprop_table", "my.constprop_table"),
    ("part", "part"),
    ("f.isra.0x", "f.isra.0x"),
    ("_Z3fooi.llvm.123", "_Z3fooi.llvm.123"),
])
def test_base_symbol(name, base):
    assert elf.base_symbol(name) == base


def test_trace_reads_clones_as_their_function(tmp_path, monkeypatch):
    """The names a trace holds are the functions' own: a GCC build's ``_vl128.isra.0`` variant is
    the ``_vl128`` variant the dispatch check expects."""
    log = ("IN: main\n"
           "12 write(1,0x1,8) = 8\n"
           "IN: ggml_vec_dot_q4_K_q8_K\n"
           "IN: ggml_vec_dot_q4_K_q8_K_vl128.isra.0\n"
           f"IN: {GCC_F32}\n"
           "13 write(1,0x1,8) = 8\n")
    assert trace.read_log(log.splitlines()) == [{"main"},
                                            {"ggml_vec_dot_q4_K_q8_K", "ggml_vec_dot_q4_K_q8_K_vl128",
                                             GCC_F32.removesuffix(".constprop.0")},
                                            set()]


@pytest.mark.parametrize(("clang", "gcc"), [(CLANG_F32, GCC_F32), (CLANG_F16, GCC_F16)])
def test_tinyblas_gemm_in_both_manglings(clang, gcc):
    """The mul_mat path check names the same gemm for both compilers' symbols (as the trace gives
    them: clone suffix dropped)."""
    want = MM.executed_path(frozenset({clang}))
    assert want.startswith("tinyBLAS_RVV<")
    assert MM.executed_path(frozenset({elf.base_symbol(gcc)})) == want


def test_tinyblas_gemm_types():
    assert MM.executed_path(frozenset({CLANG_F32, CLANG_F16})) == \
        "tinyBLAS_RVV<float16m2>::gemm<2,1,2> + tinyBLAS_RVV<float32m4>::gemm<2,2,8>"
    assert MM.executed_path(frozenset({elf.base_symbol(GCC_F32)})) == "tinyBLAS_RVV<float32m4>::gemm<2,2,8>"


def test_cost_counts_clones_under_their_function():
    """A clone and its cold part add up under the function they copy in a call's histogram."""
    img = spike_count.Image(segments=(), starts=(0x1000, 0x2000, 0x3000),
                     names=("ggml_vec_dot_q4_K_q8_K_vl128.isra.0", "ggml_vec_dot_q4_K_q8_K_vl128.cold", "main"))
    c = spike_count.tally(img, spike_count.Counter({0x1000: 5, 0x1004: 5, 0x2000: 3, 0x3000: 1}), 14, 14)
    assert c.functions == {"ggml_vec_dot_q4_K_q8_K_vl128": 13, "main": 1}

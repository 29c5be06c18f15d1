"""The known-failure entries whose bug shows under one compiler only (harness/data/known_failures.toml,
``compiler = ...``): which test ids of which compiler each one claims, with one compiler selected (ids as
they are) and with both (ids ending in the compiler's name).  Needs known.py's ``compiler`` key."""

from __future__ import annotations

import pytest

from harness.ggml import known

IQ2 = "cases/test_quant_dot.py::test_vec_dot_finding[iq2_xxs_vl512_subblock_offsets-vlen{v}-zvfh{s}]"
IQ2_PROP = "cases/test_quant_dot.py::test_vec_dot_exact[iq2_xxs-vlen{v}-{isa}{s}]"
Q8K_MAT = "cases/test_repack_layout.py::test_quantize_mat[q8_K_4x1-vlen{v}-zvfh{s}]"
Q8K_EDGE = "cases/test_quantize.py::test_quantize_edges[q8_K-vlen{v}-{isa}{s}]"
Q8K_DRAWN = "cases/test_quantize.py::test_quantize[q8_K-vlen{v}-zvfh]"


def _claims(nodeid: str, compiler: str, emulator: str = "qemu") -> list[str]:
    """The reasons of the entries matching ``nodeid`` in a build of ``compiler`` (first words only)."""
    return [k.reason.split(" ")[0] for k in known.load() if k.matches(nodeid, emulator, compiler)]


def _ids(pattern: str, both: bool, compiler: str, **kw: str) -> str:
    nodeid = pattern.format(**kw)
    return nodeid[:-1] + f"-{compiler}]" if both else nodeid


@pytest.mark.parametrize("both", [False, True], ids=["one-compiler", "both-compilers"])
@pytest.mark.parametrize("stress", ["", "-stress"])
@pytest.mark.parametrize("vlen", ["512", "1024"])
def test_iq2_xxs_offsets_per_compiler(both, stress, vlen):
    """clang: with and without stress; GCC 14: only with stress; VLEN 128 / 256: neither."""
    for pattern, kw in ((IQ2, {}), (IQ2_PROP, {"isa": "zvfh"}), (IQ2_PROP, {"isa": "v"})):
        clang = _claims(_ids(pattern, both, "clang", v=vlen, s=stress, **kw), "clang")
        gcc = _claims(_ids(pattern, both, "gcc14", v=vlen, s=stress, **kw), "gcc14")
        assert clang == ["ggml_vec_dot_iq2_xxs_q8_K_vl512"]
        assert gcc == (["ggml_vec_dot_iq2_xxs_q8_K_vl512"] if stress else [])
    for v in ("128", "256"):
        for c in ("clang", "gcc14"):
            assert _claims(_ids(IQ2_PROP, both, c, v=v, s=stress, isa="zvfh"), c) == []


def test_iq2_xxs_misaligned_load_on_spike_for_both():
    """The Spike-only entry of the same kernel keeps no compiler condition: both builds load
    misaligned."""
    for c in ("clang", "gcc14"):
        assert "ggml_vec_dot_iq2_xxs_q8_K_vl512" in _claims(IQ2_PROP.format(v="512", isa="zvfh", s=""), c, "spike")


@pytest.mark.parametrize("both", [False, True], ids=["one-compiler", "both-compilers"])
@pytest.mark.parametrize("stress", ["", "-stress"])
@pytest.mark.parametrize("vlen", ["128", "256", "512", "1024"])
def test_q8_K_contraction_gcc_only(both, stress, vlen):
    """The fmadd.s contraction: GCC 14 at every VLEN and stress mode, never clang; the drawn
    test_quantize is not claimed (its draws hit a near tie only by chance)."""
    for pattern, kw, first in ((Q8K_MAT, {}, "ggml_quantize_mat_q8_K_4x1"),
                               (Q8K_EDGE, {"isa": "zvfh"}, "quantize_row_q8_K_ref"),
                               (Q8K_EDGE, {"isa": "v"}, "quantize_row_q8_K_ref")):
        assert _claims(_ids(pattern, both, "gcc14", v=vlen, s=stress, **kw), "gcc14") == [first]
        assert _claims(_ids(pattern, both, "clang", v=vlen, s=stress, **kw), "clang") == []
    assert _claims(Q8K_DRAWN.format(v=vlen), "gcc14") == []


def test_entries_without_compiler_apply_to_both():
    """An entry without ``compiler`` (here q4_K's int16 sums at VLEN 1024) claims the test for both."""
    nodeid = "cases/test_quant_dot.py::test_vec_dot_finding[q4_K_int16_subblock_sum-vlen1024-zvfh]"
    for c in ("clang", "gcc14"):
        assert "ggml_vec_dot_q4_K_q8_K_vl256" in _claims(nodeid, c)
        assert "ggml_vec_dot_q4_K_q8_K_vl256" in _claims(nodeid[:-1] + f"-{c}]", c)

"""The quantization oracles checked against independent references: gguf-py's dequantizers for
every type gguf supports, worked examples for the ones it lacks (q1_0, q8_1, q8_K), the tables
against the pinned tree's ``ggml-common.h``, the exact dot product against rational arithmetic,
and the strategies' promises (exact-by-construction rows are exact, grid sweeps reach every
grid entry).  No kernel server is needed except for the table check (the pinned source)."""

from __future__ import annotations

import math
import re
from fractions import Fraction

import numpy as np
import pytest
from gguf import GGMLQuantizationType as G
from gguf import quants as gq

from cases import quant_blocks as QB
from cases import quant_strategies as QS
from cases import quant_variants as V
from harness.ggml import source
from oracles import dots as OD
from oracles import q8 as Q8
from oracles import quant_tables as T
from oracles import quant_types as QT
from oracles import quants as Q
from oracles.bounds import gamma

WEIGHTS = [n for n, f in Q.FORMATS.items() if f.kind == "weight"]
GGUF_TYPES = [n for n in WEIGHTS + ["q8_0"] if n != "q1_0"]


def _random_rows(name: str, nb: int, seed: int) -> np.ndarray:
    """Random blocks with every float scale class (finite)."""
    return QB.weight_row(name, nb, QB.RowRecipe(seed, QB.SCALE_CLASSES, "random", "random"))


# ------------------------------------------------------------------ dequantization vs gguf-py


@pytest.mark.parametrize("name", GGUF_TYPES)
@pytest.mark.parametrize("seed", range(4))
def test_dequantize_matches_gguf(name: str, seed: int) -> None:
    """gguf-py's dequantizer computes in float32 with at most three roundings per element (e.g.
    (d * sc) * q - dmin * m); ours is the exact value rounded once.  So they agree within
    gamma(4) * (|main part| + |offset part|) -- and exactly where gguf's steps are exact."""
    raw = _random_rows(name, 16, seed)
    dec = Q.decode(name, raw)
    ours = dec.values()
    with np.errstate(over="ignore"):  # mxfp4's largest exponents overflow float32 in gguf-py, as in ggml
        theirs = gq.dequantize(raw.reshape(-1), G[name.upper()]).astype(np.float64).reshape(-1)
    size = np.abs(dec.scale * dec.q)
    if dec.offset_scale is not None:
        size = size + np.abs(dec.offset_scale * dec.offset_q)
    tol = gamma(4) * size
    with np.errstate(over="ignore", invalid="ignore"):
        # Beyond float32's range gguf-py (like ggml's float32 dequantizers) gives inf.
        overflow = np.isinf(theirs) & (ours.astype(np.float32) == theirs)
        bad = np.flatnonzero((np.abs(ours - theirs) > tol) & ~overflow)
    assert bad.size == 0, (f"{name}: {bad.size} elements differ from gguf-py beyond gamma(4)*|terms|; first "
                           f"{bad[:5].tolist()}: ours {ours[bad[:5]].tolist()}, gguf {theirs[bad[:5]].tolist()}")


def test_q1_0_worked_example() -> None:
    """q1_0 (gguf-py has no dequantizer for it): d = 0.5, bit b of byte k is element 8k + b,
    set -> +d, clear -> -d."""
    raw = np.zeros((1, 18), np.uint8)
    raw[0, 0:2] = np.array([0.5], np.float16).view(np.uint8)
    raw[0, 2] = 0b00000101  # elements 0 and 2 positive
    raw[0, 17] = 0b10000000  # element 127 positive
    v = Q.dequantize("q1_0", raw)
    expected = np.full(128, -0.5)
    expected[[0, 2, 127]] = 0.5
    assert np.array_equal(v, expected)


def test_q8_1_worked_example() -> None:
    """q8_1: d, then s, then 32 int8 quants; values d * q (s is the block sum, kept apart)."""
    raw = np.zeros((1, 36), np.uint8)
    raw[0, 0:2] = np.array([0.25], np.float16).view(np.uint8)
    raw[0, 2:4] = np.array([-1.5], np.float16).view(np.uint8)
    q = np.arange(-16, 16, dtype=np.int8)
    raw[0, 4:] = q.view(np.uint8)
    dec = Q.decode("q8_1", raw)
    assert np.array_equal(dec.values(), 0.25 * q.astype(np.float64))
    assert dec.block_sums.tolist() == [-1.5]


def test_q8_K_worked_example() -> None:
    """q8_K: an fp32 d, 256 int8 quants, 16 int16 sums of 16 quants."""
    raw = np.zeros((1, 292), np.uint8)
    raw[0, 0:4] = np.array([3.0], np.float32).view(np.uint8)
    q = (np.arange(256) % 7 - 3).astype(np.int8)
    raw[0, 4:260] = q.view(np.uint8)
    raw[0, 260:292] = q.reshape(16, 16).sum(axis=1).astype("<i2").view(np.uint8)
    dec = Q.decode("q8_K", raw)
    assert np.array_equal(dec.values(), 3.0 * q.astype(np.float64))
    assert np.array_equal(dec.bsums[0], q.reshape(16, 16).sum(axis=1))


def test_mxfp4_scale_edges() -> None:
    """E8M0 halves: 2^(e - 128) for every e, 0 and 255 included (ggml gives 0xFF no NaN meaning)."""
    raw = np.zeros((3, 17), np.uint8)
    raw[:, 0] = [0, 128, 255]
    raw[:, 1] = 0x01  # element 0: kvalue 1
    v = Q.dequantize("mxfp4", raw).reshape(3, 32)[:, 0]
    assert v.tolist() == [2.0 ** -128, 1.0, 2.0 ** 127]


# ------------------------------------------------------------------ tables vs the pinned tree


def _c_table(text: str, name: str) -> list[int]:
    m = re.search(r"GGML_TABLE_BEGIN\(\s*(\w+)\s*,\s*" + name + r"\s*,[^)]*\)(.*?)GGML_TABLE_END", text, re.S)
    assert m, f"{name} not found in ggml-common.h"
    return [int(v, 0) for v in re.findall(r"-?0x[0-9a-fA-F]+|-?\d+", re.sub(r"//[^\n]*", "", m.group(2)))]


@pytest.fixture(scope="module")
def common_h() -> str:
    return (source.pinned().ggml / "src" / "ggml-common.h").read_text()


@pytest.mark.parametrize("grid", sorted(T.GRIDS))
def test_grids_match_pinned_tree(grid: str, common_h: str) -> None:
    """gguf-py's grids are ggml-common.h's, byte for byte (little-endian packed entries)."""
    _, entries, width = T.GRIDS[grid]
    words = np.array(_c_table(common_h, grid), np.uint64)
    assert words.size == entries
    as_bytes = words.astype("<u8").view(np.uint8).reshape(entries, 8)[:, :width]
    signed = grid == "iq1s_grid"
    tree = as_bytes.view(np.int8) if signed else as_bytes
    assert np.array_equal(tree.astype(np.int64), T.grid(grid))


def test_small_tables_match_pinned_tree(common_h: str) -> None:
    assert _c_table(common_h, "ksigns_iq2xs") == T.ksigns_iq2xs().tolist()
    assert _c_table(common_h, "kvalues_iq4nl") == T.kvalues_iq4nl().tolist()
    assert _c_table(common_h, "kvalues_fp4") == T.kvalues_mxfp4().tolist()


# ------------------------------------------------------------------ the dot product


def _fraction_dot(x_name: str, x: np.ndarray, y_name: str, y: np.ndarray) -> Fraction:
    """The dot product in rational arithmetic, from the decoded parts (q8_1: m * s per block)."""
    dx, dy = Q.decode(x_name, x), Q.decode(y_name, y)
    total = sum((Fraction(float(a)) * Fraction(float(b)) * int(i) * int(j)
                 for a, b, i, j in zip(dx.scale, dy.scale, dx.q, dy.q)), Fraction(0))
    if dx.offset_scale is not None:
        if dy.block_sums is not None:
            g = dx.offset_group
            total += sum((Fraction(float(m)) * int(o) * Fraction(float(s))
                          for m, o, s in zip(dx.offset_scale[::g], dx.offset_q[::g], dy.block_sums)), Fraction(0))
        else:
            total += sum((Fraction(float(a)) * Fraction(float(b)) * int(i) * int(j)
                          for a, b, i, j in zip(dx.offset_scale, dy.scale, dx.offset_q, dy.q)), Fraction(0))
    return total


def _vec_dot_type(name: str) -> str:
    return QT.record(name).vec_dot_type


@pytest.mark.parametrize("name", WEIGHTS + ["q8_0"])
def test_dot_is_correctly_rounded(name: str) -> None:
    """OD.dot's value is the rational dot product rounded once to float64; its magnitude is
    sum |x_i y_i| part by part."""
    yn = _vec_dot_type(name)
    unit = int(np.lcm(Q.fmt(name).block, Q.fmt(yn).block))
    for seed in range(3):
        x = _random_rows(name, unit // Q.fmt(name).block * 2, seed)
        y = QB.activation_row(yn, unit // Q.fmt(yn).block * 2, seed, ("normal", "pow2"), "random")
        e = OD.dot(name, x, yn, y)
        exact = _fraction_dot(name, x, yn, y)
        assert e.value == float(exact), f"{name}: {e.value!r} != {float(exact)!r}"
        assert e.magnitude >= abs(float(exact)) * (1 - 2.0 ** -50)


@pytest.mark.parametrize("name", WEIGHTS + ["q8_0"])
@pytest.mark.parametrize("nb", [1, 2, 3, 17])
def test_exact_pairs_are_exact(name: str, nb: int) -> None:
    """What the exact-by-construction strategy promises, the oracle confirms (so a kernel that
    misses the exact value is wrong, not the premise)."""
    yn = _vec_dot_type(name)
    for payload in ("random", "ones"):
        p = QS.exact_pair(name, yn, nb, seed=nb, payload=payload, subscales="ones")
        e = OD.dot(name, p.x, yn, p.y)
        assert e.exact, f"{name}: {e}"
        assert float(np.float32(e.value)) == e.value


@pytest.mark.parametrize("name", sorted(QB.GRID_SWEEPS))
def test_grid_sweep_reaches_every_entry(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Decode the sweep against a tagged grid (entry i holds i + 1 everywhere) with every
    sub-scale 1: the integer parts, group by group, read back 1, 2, ..., entries."""
    grid_name = QT.record(name).grid
    entries, width = T.GRIDS[grid_name][1:]
    tagged = np.repeat(np.arange(1, entries + 1, dtype=np.int64)[:, None], width, axis=1)
    real = T.grid
    monkeypatch.setattr(T, "grid", lambda g: tagged if g == grid_name else real(g))
    raw = QB.grid_sweep_row(name, seed=0, subscale=0)  # sub-scale field 0 -> ls = 1
    q = np.abs(Q.decode(name, raw).q).reshape(-1, width)
    assert np.array_equal(q[:, 0], np.arange(1, entries + 1)), f"{name}: entries read back {q[:12, 0].tolist()}..."
    assert np.all(q == q[:, :1])


# ------------------------------------------------------------------ quantizers


def test_quantize_q8_0_matches_gguf() -> None:
    """gguf-py's Q8_0 quantizer is written to be bit-exact with quantize_row_q8_0_ref
    (float32 arithmetic, rounding half away from zero)."""
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(32 * 64) * np.exp2(rng.integers(-10, 10, 32 * 64))).astype(np.float32)
    x[:32] = np.arange(32) - 15.5  # a block full of ties after scaling (amax 15.5 * ...)
    ours = Q8.quantize_q8_0(x)
    theirs = gq.quantize(x.reshape(1, -1), G.Q8_0).reshape(-1, 34)
    assert np.array_equal(ours, theirs)


def test_quantize_ties() -> None:
    """A block with amax = 127 has d = 1, 1/d = 1: x = k + 1/2 are exact ties, which round away
    from zero (reference) or to even (half_even)."""
    x = np.zeros(32, np.float32)
    x[0] = 127
    x[1:5] = [0.5, 1.5, -2.5, -3.5]
    ref = Q.blocks("q8_0", Q8.quantize_q8_0(x))[0, 2:].view(np.int8)
    even = Q.blocks("q8_0", Q8.quantize_q8_0(x, "half_even"))[0, 2:].view(np.int8)
    assert ref[:5].tolist() == [127, 1, 2, -3, -4]
    assert even[:5].tolist() == [127, 0, 2, -2, -4]


def test_quantize_q8_1_sum() -> None:
    """q8_1's s is fp16(sum(qs) * d) with the product in float32."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal(64).astype(np.float32)
    raw = Q.blocks("q8_1", Q8.quantize_q8_1(x))
    for i, b in enumerate(raw):
        d = np.float32(np.max(np.abs(x[32 * i:32 * i + 32])) / np.float32(127))
        qs = b[4:].view(np.int8).astype(np.int64)
        s = b[2:4].view(np.float16)[0]
        assert s == np.float16(np.float32(qs.sum()) * d)


def test_quantize_q8_K_reference_and_sign_choice() -> None:
    """q8_K: iscale = -127 / max (max: the first element of largest magnitude), qs rounded half
    to even, d = 1 / iscale, bsums the sums of 16; with +a before -a, ``first`` picks +a and
    ``negative_on_tie`` picks -a: d, qs and bsums change sign, d * qs does not."""
    x = np.zeros(256, np.float32)
    x[3], x[9], x[10] = 2.0, -2.0, 1.0
    first, zero = Q8.quantize_q8_K(x, "first")
    neg, _ = Q8.quantize_q8_K(x, "negative_on_tie")
    assert not zero[0]
    df, dn = first[0, 0:4].view(np.float32)[0], neg[0, 0:4].view(np.float32)[0]
    qf, qn = first[0, 4:260].view(np.int8), neg[0, 4:260].view(np.int8)
    assert qf[3] == -127 and qf[10] == -64 and df == np.float32(1) / (np.float32(-127) / np.float32(2))
    assert dn == -df and np.array_equal(qn, -qf)
    assert np.array_equal(first[0, 260:].view("<i2"), qf.reshape(16, 16).sum(axis=1))
    assert math.isclose(float(df) * int(qf[3]), 2.0, rel_tol=1e-6)


# ------------------------------------------------------------------ the source scanner (cases/quant_variants.py)

SYNTHETIC_QUANTS_C = """
#if defined(__riscv_v)
static NOINLINE void ggml_vec_dot_q9_9_q8_0_vl128(int n, float * s) { vint8m1_t v; }
static NOINLINE void ggml_vec_dot_q9_9_q8_0_vl256(int n, float * s) { vint8m1_t v; }
#endif
void ggml_vec_dot_q9_9_q8_0(int n, float * s) {
#if defined __riscv_xtheadvector
    ggml_vec_dot_q9_9_q8_0_xtheadvector(n, s);
#elif defined __riscv_v
    switch (__riscv_vlenb() * 8) {
        case 128:
            ggml_vec_dot_q9_9_q8_0_vl128(n, s);
            break;
        default:
            ggml_vec_dot_q9_9_q8_0_vl256(n, s);
            break;
    }
#else
    ggml_vec_dot_q9_9_q8_0_generic(n, s);
#endif
}
void ggml_vec_dot_q7_7_q8_K(int n, float * s) {
#if defined(__riscv_v)
    const size_t vlen_bits = __riscv_vlenb() * 8;
    if (vlen_bits >= 512) {
        ggml_vec_dot_q7_7_q8_K_vl512(n, s);
    } else {
        ggml_vec_dot_q7_7_q8_K_generic(n, s);
    }
#else
    ggml_vec_dot_q7_7_q8_K_generic(n, s);
#endif
}
void ggml_vec_dot_q6_6_q8_0(int n, float * s) {
    ggml_vec_dot_q6_6_q8_0_generic(n, s);
}
void quantize_row_q8_0(const float * x, void * y, long k) {
#if defined(__riscv_v)
    vfloat32m8_t v = __riscv_vle32_v_f32m8(x, 32);
#else
    quantize_row_q8_0_ref(x, y, k);
#endif
}
"""


def test_scanner_finds_new_kernels_and_dispatch(tmp_path) -> None:
    """A tree with a kernel the table does not know is seen (and so fails test_rvv_vec_dot_coverage by name);
    switch and if-chain dispatch are read per VLEN; a plain call of the generic is no RVV path."""
    (tmp_path / "arch" / "riscv").mkdir(parents=True)
    (tmp_path / "arch" / "riscv" / "quants.c").write_text(SYNTHETIC_QUANTS_C)
    found = V.scan(tmp_path)
    q9, q7, q6 = found.dots["q9_9"], found.dots["q7_7"], found.dots["q6_6"]
    assert q9.rvv and q9.vec_dot_type == "q8_0" and set(q9.variants) == {
        "ggml_vec_dot_q9_9_q8_0_vl128", "ggml_vec_dot_q9_9_q8_0_vl256"}
    assert q9.dispatch == {128: "ggml_vec_dot_q9_9_q8_0_vl128", 256: "ggml_vec_dot_q9_9_q8_0_vl256",
                           512: "ggml_vec_dot_q9_9_q8_0_vl256", 1024: "ggml_vec_dot_q9_9_q8_0_vl256"}
    assert q7.dispatch == {128: "ggml_vec_dot_q7_7_q8_K_generic", 256: "ggml_vec_dot_q7_7_q8_K_generic",
                           512: "ggml_vec_dot_q7_7_q8_K_vl512", 1024: "ggml_vec_dot_q7_7_q8_K_vl512"}
    assert not q6.rvv
    assert found.quantizers["q8_0"].rvv
    # What a trace shows, judged: the generic at a VLEN the tree serves with RVV is a failure.
    assert V.observed_variant(q9, {"ggml_vec_dot_q9_9_q8_0", "ggml_vec_dot_q9_9_q8_0_vl128"}, 128) == ("vl128", None)
    label, problem = V.observed_variant(q9, {"ggml_vec_dot_q9_9_q8_0", "ggml_vec_dot_q9_9_q8_0_generic"}, 512)
    assert label == "generic" and "fell back" in problem
    assert V.observed_variant(q7, {"ggml_vec_dot_q7_7_q8_K", "ggml_vec_dot_q7_7_q8_K_generic"}, 128)[1] is None

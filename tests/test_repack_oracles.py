"""The repack family's own oracles: the NumPy layouts are bijections, agree with a second,
element-wise reading and with worked examples from repack.h's structs; the activation
interleave keeps q8_K's block sums with their rows; the GEMV / GEMM oracle agrees with the exact
dot product of oracles/quants.py; the selection scan reads the pinned tree as its code says.
No kernel server is needed (the scan reads the pinned source)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

from cases import quant_blocks as QB
from cases import repack_kernels as K
from cases import repack_selection as SEL
from cases import repack_strategies as RS
from harness.ggml import cwalk, source
from oracles import dots as OD
from oracles import quants as Q
from oracles import repack as RP

LAYOUTS = sorted(RP.LAYOUTS)


def _random_rows(weight: str, rows: int, nb: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (rows, nb, Q.block_bytes(weight)), dtype=np.uint8)


@pytest.mark.parametrize("name", LAYOUTS)
@pytest.mark.parametrize("groups,nb", [(1, 1), (2, 3), (3, 2)])
def test_pack_is_a_bijection(name: str, groups: int, nb: int) -> None:
    """unpack(pack(x)) = x for any bytes, and pack(unpack(y)) = y for any packed bytes."""
    lay = RP.layout(name)
    raw = _random_rows(lay.weight, groups * lay.ncols, nb, 1)
    packed = RP.pack_matrix(lay, raw)
    assert packed.size == raw.size
    assert np.array_equal(RP.unpack_matrix(lay, packed, nb), raw)
    other = np.random.default_rng(2).integers(0, 256, packed.shape, dtype=np.uint8)
    assert np.array_equal(RP.pack_matrix(lay, RP.unpack_matrix(lay, other, nb)), other)


@pytest.mark.parametrize("name", LAYOUTS)
def test_every_bit_moves(name: str) -> None:
    """Flipping any one input bit flips exactly one packed bit (a bit permutation up to the XOR)."""
    lay = RP.layout(name)
    raw = _random_rows(lay.weight, lay.ncols, 1, 3)
    base = RP.pack_matrix(lay, raw)
    rng = np.random.default_rng(4)
    for flat in rng.choice(raw.size * 8, 200, replace=False):
        r = raw.copy().reshape(-1)
        r[flat // 8] ^= np.uint8(1 << (flat % 8))
        diff = np.unpackbits(RP.pack_matrix(lay, r.reshape(raw.shape)) ^ base)
        assert diff.sum() == 1, f"{name}: input bit {flat} changed {diff.sum()} packed bits"


@pytest.mark.parametrize("name", LAYOUTS)
def test_read_packed_matches_dequantize(name: str) -> None:
    """The element-wise reading of the packed bytes gives the values oracles.quants decodes from the rows."""
    lay = RP.layout(name)
    for seed, classes in [(5, ("normal",)), (6, ("subnormal", "zero", "max")), (7, ("pow2", "negative"))]:
        rows = RS.weight_matrix(lay.weight, 2 * lay.ncols, 3, QB.RowRecipe(seed, classes, "random", "random"))
        got = RP.read_packed(lay, RP.pack_matrix(lay, rows), len(rows), 3)
        want = np.stack([Q.dequantize(lay.weight, r) for r in rows])
        assert np.array_equal(got, want), f"{name}: {np.sum(got != want)} elements differ"


def test_worked_example_q4_0_16x1() -> None:
    """block_q4_0x16: d[16] then qs[16 * b + col] = row col's qs[b] ^ 0x88."""
    raw = np.zeros((16, 1, 18), np.uint8)
    for c in range(16):
        raw[c, 0, 0:2] = np.array([c + 1], np.float16).view(np.uint8)
        raw[c, 0, 2:] = (np.arange(16) * 16 + c) % 256
    p = RP.pack_matrix(RP.layout("q4_0_16x1"), raw).ravel()
    assert p[:32].view(np.float16).tolist() == list(range(1, 17))
    assert p[32 + 16 * 5 + 3] == ((5 * 16 + 3) ^ 0x88)


def test_worked_example_q4_0_8x8() -> None:
    """block_q4_0x8: d[8], then 8-byte chunks: chunk i from row i % 8, bytes 8 (i // 8) ... (XOR 0x88)."""
    raw = np.zeros((8, 1, 18), np.uint8)
    for c in range(8):
        raw[c, 0, 2:] = np.arange(16) + 16 * c
    p = RP.pack_matrix(RP.layout("q4_0_8x8"), raw).ravel()[16:] ^ 0x88
    assert p[8 * 9:8 * 10].tolist() == list(range(16 + 8, 16 + 16))  # chunk 9: row 1, bytes 8-15


def test_worked_example_q4_K_16x1() -> None:
    """The re-encoded scales: low nibbles of scale / min per (sub-block, row), then 2-bit high parts."""
    sc = np.array([[1, 2, 3, 4, 53, 6, 7, 8]] * 16)
    mn = np.array([[9, 10, 11, 12, 13, 14, 15, 60]] * 16)
    raw = np.zeros((16, 1, 144), np.uint8)
    raw[:, 0, 4:16] = RP.k4_encode(sc, mn)
    got_sc, got_mn = RP.k4_scales(raw[:, 0, 4:16])
    assert np.array_equal(got_sc, sc) and np.array_equal(got_mn, mn)
    s = RP.pack_matrix(RP.layout("q4_K_16x1"), raw).ravel()[64:256]
    assert s[16 * 4 + 2] == (53 & 15) | ((13 & 15) << 4)  # sub-block 4, row 2
    # high byte for sub-blocks 0 and 4 of row 2: s0 >> 4, m0 >> 4 (0, 0), s4 >> 4 = 3, m4 >> 4 = 0
    assert s[128 + 16 * 0 + 2] == (3 << 4)
    assert s[128 + 16 * 3 + 2] == (60 >> 4) << 6  # sub-blocks 3 and 7: m7 >> 4 = 3


def test_worked_example_q2_K_16x1() -> None:
    """Scales regrouped: position p holds sub-block Q2_K_SCALE_ORDER[p] of all 16 rows."""
    raw = np.zeros((16, 1, 84), np.uint8)
    for c in range(16):
        raw[c, 0, :16] = np.arange(16) * 16 + c
    s = RP.pack_matrix(RP.layout("q2_K_16x1"), raw).ravel()[64:320]
    assert s[16 * 4 + 7] == 1 * 16 + 7  # position 4 is sub-block 1 (odd-low group), row 7
    assert s[16 * 9 + 0] == 10 * 16  # position 9 is sub-block 10


@pytest.mark.parametrize("act,blocklen", [("q8_0", 1), ("q8_0", 8), ("q8_K", 1)])
def test_activations_round_trip(act: str, blocklen: int) -> None:
    rows = np.stack([QB.activation_row(act, 3, 9 + r, ("normal",), "random") for r in range(8)])
    packed = RP.pack_activations(act, rows, blocklen)
    assert packed.shape == (2 * 3, RP.activation_block_bytes(act))
    assert np.array_equal(RP.unpack_activations(act, packed, 3, blocklen), rows)
    if act == "q8_K":  # bsums[4 g + r] of the first block of the first group = row r's sum of elements 16 g ...
        bsums = np.ascontiguousarray(packed[0, 1040:]).view("<i2")
        qs = rows[:4, 0, 4:260].view(np.int8).astype(np.int64)
        assert [bsums[4 * g + r] for g in (0, 15) for r in range(4)] == \
            [qs[r, 16 * g:16 * g + 16].sum() for g in (0, 15) for r in range(4)]


@pytest.mark.parametrize("weight,act", [("q4_0", "q8_0"), ("q8_0", "q8_0"), ("iq4_nl", "q8_0"), ("q4_K", "q8_K"),
                                        ("q2_K", "q8_K")])
def test_products_match_exact_dot(weight: str, act: str) -> None:
    """products(): value within its float64 error of oracles.dots.dot, the same magnitudes."""
    nb = 2
    w = RS.weight_matrix(weight, 5, nb, QB.RowRecipe(11, ("normal", "subnormal"), "random", "random"))
    a = np.stack([QB.activation_row(act, nb * Q.block_size(weight) // Q.block_size(act), 12 + r, ("normal",), "random")
                  for r in range(3)])
    p = RP.products(weight, w, act, a)
    for r in range(3):
        for c in range(5):
            d = OD.dot(weight, w[c].ravel(), act, a[r].ravel())
            assert abs(p.value[r, c] - d.value) <= RP.oracle_error(nb * Q.block_size(weight), p.magnitude[r, c])
            assert p.magnitude[r, c] == pytest.approx(d.magnitude, rel=1e-12)
            assert p.int_magnitude[r, c] == d.int_magnitude


@pytest.mark.parametrize("name", sorted(K.BY_NAME))
def test_exact_cases_are_exact(name: str) -> None:
    """The exact mul_mat cases keep every sum within 2^24 units (the premise of bit-exact parity)."""
    kernel = K.BY_NAME[name]

    @settings(max_examples=20, deadline=None, database=None)
    @given(case=RS.mul_mat_cases(kernel, exact=True))
    def check(case: RS.MulMatCase) -> None:
        p = RP.products(kernel.layout.weight, case.weights, kernel.layout.activation, case.acts)
        assert np.all(p.magnitude <= 2.0 ** 24 * case.units[:, None])

    check()


def test_selection_scan_of_the_pinned_tree() -> None:
    """The pinned tree picks the five 16x1 layouts at VLEN 256 for row counts divisible by 16, with zvfh only."""
    cpu = source.pinned().cpu_dir
    with_zvfh = SEL.scan_selection(cpu, True)
    picks = {t: {v: r for v, r in vl.items() if r} for t, vl in with_zvfh.items()}
    assert picks == {
        "q4_0": {256: cwalk.Rule("q4_0_16x1", 16)}, "q4_K": {256: cwalk.Rule("q4_K_16x1", 16)},
        "q2_K": {256: cwalk.Rule("q2_K_16x1", 16)}, "iq4_nl": {256: cwalk.Rule("iq4_nl_16x1", 16)},
        "q8_0": {256: cwalk.Rule("q8_0_16x1", 16)}, "q5_K": {}, "q6_K": {}, "mxfp4": {}, "q1_0": {},
    }
    assert all(r is None for vl in SEL.scan_selection(cpu, False).values() for r in vl.values())


def test_chosen_layout_parses_ggml_traits() -> None:
    assert SEL.chosen_layout("ggml::cpu::repack::tensor_traits<block_q4_K, 1l, 16l, (ggml_type)15>") == "q4_K_16x1"
    assert SEL.chosen_layout("none") is None

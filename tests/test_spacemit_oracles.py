"""The SpacemiT oracles' own tests (oracles/spacemit_q8.py, oracles/spacemit_repack.py): worked examples of each
activation format, the quantizers' oracle keeps its format's promise on both paths, the copy layouts are bit
permutations, q6_K's reading agrees with oracles/quants.py's, the buffer size is the tree's formula.  No kernel
server is needed."""

from __future__ import annotations

import numpy as np
import pytest

from cases import spacemit_layouts as SL
from cases import spacemit_quant as SQ
from oracles import quants as Q
from oracles import spacemit_q8 as SQ8
from oracles import spacemit_repack as SR


def test_i8_worked_example() -> None:
    """One block of 32 with amax 127: scale 1 on both paths, ties to even, the negated sum."""
    x = np.zeros((1, 32), np.float32)
    x[0, :4] = [127, -63.5, 2.5, -0.5]
    for path in SQ8.PATHS:
        f = SQ8.fields("i8", SQ8.quantize("i8", x, path))
        assert f["scale"][0, 0] == 1.0
        assert list(f["q"][0, 0, :4]) == [127, -64, 2, 0]
        assert f["sum"][0, 0] == -(127 - 64 + 2)
    raw = SQ8.quantize("i8", x, "rvv").view(np.uint8)
    assert raw.size == SQ8.FORMATS["i8"].row_bytes == 38 and raw[4:6].view("<i2")[0] == -65 and raw[6] == 127


def test_hp_layout_and_shared_step() -> None:
    """hp with 4 rows: one step per sub-block over all rows, ratio and average in the first slots only."""
    x = np.zeros((4, 256), np.float32)
    x[2, 0] = 127.0  # sub-block 0's largest magnitude, in row 2
    x[0, 1] = 1.0
    x[1, 32] = 254.0  # sub-block 1
    b = SQ8.quantize("hp", x, "rvv")
    assert b.dtype.itemsize == 4 * SQ8.FORMATS["hp"].row_bytes == 1160
    f = SQ8.fields("hp", b)
    avg = np.float32((1.0 + 2.0) / 8)
    assert f["avg"][0] == np.float16(avg)
    assert f["ratio"][0, 0] == np.float16(np.float32(1.0) * np.float32(1 / avg))
    assert f["q"][0, 0, 2, 0] == 127 and f["q"][0, 0, 0, 1] == 1 and f["q"][0, 1, 1, 0] == 127
    assert f["sum"][0, 2, 0] == -8 * 127 and np.all(b["sub"]["ratio"][:, :, 1:] == 0)


@pytest.mark.parametrize("fmt", sorted(SQ8.FORMATS))
@pytest.mark.parametrize("domain", SQ.DOMAINS)
def test_quantize_keeps_its_promise(fmt: str, domain: str) -> None:
    """Both paths' bytes satisfy the format's promise on every kind of block; the paths differ only where they
    round the scale differently (i8, i8k) and never in hp."""
    q = next(q for q in SQ.QUANTIZERS.values() if q.fmt == fmt and q.rows == 4)
    a = SQ.make_input(SQ.QCase(q.name, SQ.KINDS[domain] * 3, seed=11, scale_exp=3))
    out = {p: SQ8.quantize(fmt, a, p) for p in SQ8.PATHS}
    for p in SQ8.PATHS:
        for name, (stored, exact, bound) in SQ8.promise(fmt, a, out[p]).checks.items():
            err = np.abs(np.asarray(stored, np.float64) - exact)
            assert np.all((err <= bound) | (np.asarray(stored, np.float64) == exact)), (fmt, domain, p, name)
    if fmt == "hp":
        assert out["rvv"].tobytes() == out["ref"].tobytes()


def test_promise_catches_a_wrong_quant() -> None:
    """A quant off by one, a wrong sum or a scale off by 2^-20 breaks the promise."""
    a = SQ.make_input(SQ.QCase("row_i8", ("gaussian",) * 2, seed=3))
    for field, change in (("q", 1), ("sum", 1), ("scale", 2.0 ** -20)):
        b = SQ8.quantize("i8", a, "rvv")
        b[field][0, 0, ...].flat[0] += change * (b[field][0, 0, ...].flat[0] if field == "scale" else 1)
        stored, exact, bound = SQ8.promise("i8", a, b).checks[field]
        assert np.any(np.abs(np.asarray(stored, np.float64) - exact) > bound), field


@pytest.mark.parametrize("name", ["q4_0_32x32", "q4_0_32x256", "q8_0_32x32"])
def test_copy_layouts_move_every_bit(name: str) -> None:
    """Flipping any one source bit flips exactly one packed bit: every source byte lands once."""
    x = SL.LAYOUTS[name]
    ne = (256, 32, 1)
    src = SL.make_blocks(SL.RCase(name, ne, 1))
    base = SR.pack(x.oracle, src, *ne)
    assert base.size == src.size
    rng = np.random.default_rng(2)
    for flat in rng.choice(src.size * 8, 300, replace=False):
        s = src.copy().reshape(-1)
        s[flat // 8] ^= np.uint8(1 << (flat % 8))
        diff = np.unpackbits(SR.pack(x.oracle, s.reshape(src.shape), *ne) ^ base)
        assert diff.sum() == 1, f"{name}: source bit {flat} changed {diff.sum()} packed bits"


def test_q4_layout_worked_example() -> None:
    """q4_0: byte j of ggml's block holds elements j and j + 16; the layout's byte m holds 2m (low) and 2m + 1."""
    src = np.zeros((32, 1, 18), np.uint8)
    src[0, 0, 2:18] = np.arange(16) | (15 - np.arange(16)) << 4  # element j = j, element j + 16 = 15 - j
    p = np.frombuffer(SR.pack(SR.LAYOUTS["q4_0_32x32"], src, 32, 32, 1).tobytes(), SR.LAYOUTS["q4_0_32x32"].dtype)
    assert p["qs"][0, 0, 0] == 0 | 1 << 4 and p["qs"][0, 0, 7] == 14 | 15 << 4 and p["qs"][0, 0, 8] == 15 | 14 << 4


def test_q6_reading_agrees_with_ggml_decoder() -> None:
    """q6_parts (the repack's reading) times the scales gives oracles/quants.py's q6_K values."""
    src = SL.make_blocks(SL.RCase("q6_K_32x32", (512, 4, 1), 5)).reshape(-1, 210)
    a, sc, d = SR.q6_parts(src)
    values = a * np.repeat(sc, 16, axis=1) * d.astype(np.float64)[:, None]
    assert np.array_equal(values.reshape(-1), Q.dequantize("q6_K", src.reshape(-1)))


def test_q4_1_zero_points() -> None:
    """zp = clamp(nearest(fp16(-m / d)), 0, 15); ties to even; d = 0 gives 15 (NaN, +inf) or 0 (-inf)."""
    d = np.array([1, 1, 1, 1, 0.5, 0, 0, 0], np.float16)
    m = np.array([-2.5, -3.5, 4, -40, -1, 0, 1, -1], np.float16)
    assert list(SR._zero_points(d, m)) == [2, 4, 0, 15, 2, 15, 0, 15]


def test_alloc_pads_ne1_once() -> None:
    """The buffer type pads 32 - ne1 % 32 rows once; the _ref repack pads the flattened rows: 17 x 2 rows overflow,
    40 x 2 and 2-d tails do not."""
    lay = SR.LAYOUTS["q8_0_32x32"]
    assert SR.written_bytes(lay, 32, 17, 2) > SR.alloc_bytes("q8_0", 32, 17, 2)
    for ne in ((32, 40, 2), (64, 69, 1), (32, 64, 3)):
        assert SR.written_bytes(lay, *ne) <= SR.alloc_bytes("q8_0", *ne), ne
    assert SR.written_bytes(SR.LAYOUTS["q4_0_32x32"], 32, 40, 1) == 0  # refused

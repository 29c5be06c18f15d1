"""The IME1 GEMM's oracle (oracles/spacemit_ime1.py) on cases worked by hand: the 16-row layouts' values against
ggml's own (equal for q4_0, for q4_1 / q4_K only where the offset is a whole number of steps; with block offsets kept
q4_1's always, q4_K's but for the fp16 roundings of d sc and dmin mn), the quantizer's rounding and its zero block,
the work buffer's byte positions, and the product's bound, with and without the offsets' second pass, against a
float32 model of the kernel's order of operations (and a model that rounds more or drops an offset, beyond it)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from oracles import spacemit_ime1 as IME
from oracles.bounds import gamma
from oracles.repack import k4_encode


def _q4_1(d: float, m: float, nib: np.ndarray) -> np.ndarray:
    b = np.zeros(20, np.uint8)
    b[0:2] = np.float16(d).reshape(1).view(np.uint8)
    b[2:4] = np.float16(m).reshape(1).view(np.uint8)
    b[4:] = nib[:16] | (nib[16:] << 4)
    return b.reshape(1, 20)


def _values(name: str, raw: np.ndarray, *, offsets: bool = False) -> np.ndarray:
    d, q, zp, m = IME.layout_weights(name, raw, offsets=offsets)
    return (d[..., None] * (q - zp[..., None]) + m[..., None]).reshape(raw.shape[0], -1)


def test_q4_0_layout_is_the_format() -> None:
    rng = np.random.default_rng(1)
    raw = rng.integers(0, 256, (3, 2 * 18), dtype=np.uint8)
    raw.reshape(3, 2, 18)[..., 0:2] = np.float16(0.25).reshape(1).view(np.uint8)
    np.testing.assert_array_equal(_values("q4_0", raw), IME.format_values("q4_0", raw))


@pytest.mark.parametrize("m_steps, zp, exact", [(-3, 3, True), (0, 0, True), (-15, 15, True), (-3.5, 4, False),
                                                (-2.5, 2, False), (2, 0, False), (-17, 15, False)])
def test_q4_1_zero_point(m_steps: float, zp: int, exact: bool) -> None:
    """zp = clamp(-nearbyint(m / d), 0, 15), ties to even; the values are q4_1's only for a whole, in-range offset."""
    nib = np.arange(32, dtype=np.uint8) % 16
    raw = _q4_1(0.5, 0.5 * m_steps, nib)
    assert IME.layout_weights("q4_1", raw)[2].tolist() == [[zp]]
    same = np.array_equal(_values("q4_1", raw), IME.format_values("q4_1", raw))
    assert same == exact
    d, q, zp_kept, m = IME.layout_weights("q4_1", raw, offsets=True)  # the fixed layout: zp 0, the offset kept
    assert zp_kept.tolist() == [[0]] and m.tolist() == [[0.5 * m_steps]]
    np.testing.assert_array_equal(_values("q4_1", raw, offsets=True), IME.format_values("q4_1", raw))


def test_q4_0_layout_has_no_offsets() -> None:
    rng = np.random.default_rng(2)
    raw = rng.integers(0, 256, (2, 18), dtype=np.uint8)
    raw[:, 0:2] = np.float16(-0.125).reshape(1).view(np.uint8)
    for offsets in (False, True):
        d, q, zp, m = IME.layout_weights("q4_0", raw, offsets=offsets)
        assert (zp == 8).all() and not m.any()


def test_q4_K_sub_blocks() -> None:
    """Sub-block j: step fp16(d sc_j), offset fp16(-(dmin mn_j)); d = dmin = 0.5, sc = 2, mn = 6 gives step 1 and
    offset -3: zp 3, the values q4_K's; mn = 5 gives -2.5: zp 2 (ties to even), every value 0.5 too high."""
    sc = np.full((1, 8), 2)
    for mn, zp, exact in ((6, 3, True), (5, 2, False)):
        b = np.zeros((1, 144), np.uint8)
        b[0, 0:2] = np.float16(0.5).reshape(1).view(np.uint8)
        b[0, 2:4] = np.float16(0.5).reshape(1).view(np.uint8)
        b[0, 4:16] = k4_encode(sc, np.full((1, 8), mn))
        b[0, 16:] = np.arange(128) % 256
        d, _, z, m = IME.layout_weights("q4_K", b)
        assert d.tolist() == [[1.0] * 8] and z.tolist() == [[zp] * 8] and not m.any()
        got, want = _values("q4_K", b), IME.format_values("q4_K", b)
        assert np.array_equal(got, want) == exact
        if not exact:
            np.testing.assert_array_equal(got - want, 0.5)
        np.testing.assert_array_equal(_values("q4_K", b, offsets=True), want)  # whole steps: both roundings exact


def test_q4_K_with_offsets_keeps_the_fp16_roundings() -> None:
    """With block offsets kept, q4_K's values are still ``fp16(d sc) q - fp16(dmin mn)``: d = 0.3 (fp16
    0.2999...), sc = 37 and dmin = 0.7, mn = 41 give products fp16 rounds, so the values differ from q4_K's own."""
    b = np.zeros((1, 144), np.uint8)
    b[0, 0:2] = np.float16(0.3).reshape(1).view(np.uint8)
    b[0, 2:4] = np.float16(0.7).reshape(1).view(np.uint8)
    b[0, 4:16] = k4_encode(np.full((1, 8), 37), np.full((1, 8), 41))
    b[0, 16:] = np.arange(128) % 256
    d, _, zp, m = IME.layout_weights("q4_K", b, offsets=True)
    dq, mq = float(np.float16(0.3)) * 37, -float(np.float16(0.7)) * 41
    assert (zp == 0).all() and d[0, 0] == float(np.float16(dq)) != dq and m[0, 0] == float(np.float16(mq)) != mq
    assert not np.array_equal(_values("q4_K", b, offsets=True), IME.format_values("q4_K", b))


def test_quantizer_rounding_and_zero_block() -> None:
    """amax 127 makes the scale fl(127 * fl(1/127)) = 1 exactly, so x = k + 1/2 rounds to even; a zero block has
    scale 0 and, 0 * inf being NaN, every value 127."""
    x = np.zeros((1, 64), np.float32)
    x[0, 0] = 127
    x[0, 1:5] = (0.5, 1.5, 2.5, -2.5)
    scale, q = IME.quantize(x)
    assert scale.tolist() == [[1.0, 0.0]]
    assert q[0, 0, :5].tolist() == [127, 0, 2, 2, -2]
    assert (q[0, 1] == 127).all()


def test_work_image_positions() -> None:
    """Four rows: per block the four scales, then row r's values 8c .. 8c + 7 at 16 + 32 c + 8 r; a fifth row
    after them alone (scale, 32 values); mul_mat_id's rows all alone."""
    scale = np.arange(1, 6, dtype=np.float32).reshape(5, 1) * np.ones((1, 2), np.float32)
    q = (np.arange(5 * 2 * 32) % 100).astype(np.int8).reshape(5, 2, 32)
    img = IME.work_image(scale, q)
    assert img.size == IME.work_bytes(5, 64) == 5 * 2 * 36
    blk = img[144:288]  # the group's second block
    assert blk[:16].view("<f4").tolist() == [1, 2, 3, 4]
    for r in range(4):
        for c in range(4):
            assert blk[16 + 32 * c + 8 * r:24 + 32 * c + 8 * r].view(np.int8).tolist() == q[r, 1, 8 * c:8 * c + 8].tolist()
    tail = img[288:]
    assert tail[:4].view("<f4")[0] == 5 and tail[4:36].view(np.int8).tolist() == q[4, 0].tolist()
    alone = IME.work_image(scale, q, grouped=False)
    assert alone[36:40].view("<f4")[0] == 1 and alone[72:76].view("<f4")[0] == 2


def _f32(v: Fraction) -> Fraction:
    return Fraction(float(np.float32(float(v))))


@pytest.mark.parametrize("seed", range(4))
def test_product_bound_holds_for_the_kernels_order_and_not_for_coarser(seed: int) -> None:
    """A float32 model of the kernels (scale product rounded, then fma over the blocks in order) stays within the
    bound; the same with the products rounded to fp16 (a wrong kernel) does not, on these inputs."""
    rng = np.random.default_rng(seed)
    nb, n = 6, 8
    d = np.float16(rng.uniform(0.01, 0.02, (n, nb))).astype(np.float64)
    q = rng.integers(0, 16, (n, nb, 32))
    zp = np.full((n, nb), 8)
    x = rng.standard_normal((1, nb * 32)).astype(np.float32)
    scale, qa = IME.quantize(x)
    value, bound = IME.product(d, q, zp, scale, qa)
    worse = False
    for j in range(n):
        acc = coarse = Fraction(0)
        for b in range(nb):
            dot = int(np.dot(qa[0, b].astype(np.int64), q[j, b] - zp[j, b]))
            p = _f32(Fraction(float(d[j, b])) * Fraction(float(scale[0, b])))
            acc = _f32(acc + dot * p)
            coarse = _f32(coarse + dot * Fraction(float(np.float16(float(p)))))
        assert abs(float(acc) - value[0, j]) <= bound[0, j]
        worse |= abs(float(coarse) - value[0, j]) > bound[0, j]
    assert worse


@pytest.mark.parametrize("seed", range(4))
def test_product_with_offsets_bound_holds_for_the_second_pass_and_not_without_an_offset(seed: int) -> None:
    """The fixed layout's product: a float32 model of the integer GEMM (zp 0) followed by the second pass (sa_b =
    fp32(s_b S_b), then fma(sa_b, m_b, acc) over the blocks in order) stays within the bound; the same pass without
    the last block's offset (a planted break) does not."""
    rng = np.random.default_rng(10 + seed)
    nb, n = 5, 8
    d = np.float16(rng.uniform(0.01, 0.02, (n, nb))).astype(np.float64)
    m = np.float16(-d * rng.uniform(0, 15, (n, nb))).astype(np.float64)
    q = rng.integers(0, 16, (n, nb, 32))
    zp = np.zeros((n, nb), np.int64)
    x = rng.standard_normal((1, nb * 32)).astype(np.float32)
    scale, qa = IME.quantize(x)
    value, bound = IME.product(d, q, zp, scale, qa, m)
    assert IME.product(d, q, zp, scale, qa)[1].max() < bound.max()  # the pass adds to the bound
    dropped = False
    for j in range(n):
        acc = Fraction(0)
        for b in range(nb):
            dot = int(np.dot(qa[0, b].astype(np.int64), q[j, b]))
            acc = _f32(acc + dot * _f32(Fraction(float(d[j, b])) * Fraction(float(scale[0, b]))))
        short = acc
        for b in range(nb):
            sa = _f32(Fraction(float(scale[0, b])) * int(qa[0, b].astype(np.int64).sum()))
            acc = _f32(acc + sa * Fraction(float(m[j, b])))
            if b < nb - 1:
                short = _f32(short + sa * Fraction(float(m[j, b])))
        assert abs(float(acc) - value[0, j]) <= bound[0, j]
        dropped |= abs(float(short) - value[0, j]) > bound[0, j]
    assert dropped


def _split_model(d: np.ndarray, q: np.ndarray, m: np.ndarray, scale: np.ndarray, qa: np.ndarray) -> np.ndarray:
    """A float32 model of a kernel computing ``d q + m`` as ggml's own q4_1 dot does (``d s sum q a`` plus
    ``m s sum a``) in IME1's order: fma of each block's dot and ``fp32(d s)``, then of ``fp32(s sum a)`` and ``m``."""
    out = []
    for j in range(d.shape[0]):
        acc = np.float32(0)
        for b in range(d.shape[1]):
            dot = int(np.dot(qa[0, b].astype(np.int64), q[j, b]))
            acc = np.float32(dot * np.float64(np.float32(np.float32(d[j, b]) * scale[0, b])) + np.float64(acc))
        for b in range(d.shape[1]):
            sa = np.float32(scale[0, b] * np.float32(int(qa[0, b].astype(np.int64).sum())))
            acc = np.float32(np.float64(sa) * np.float64(np.float32(m[j, b])) + np.float64(acc))
        out.append(acc)
    return np.asarray(out, np.float64)


def _spiky_q4_1(seed: int, nb: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """16 q4_1 rows of model-like blocks (``m`` between -15 d and 0) and one row of activations with one large value
    per block: where that value meets a weight whose ``d q`` and ``m`` nearly cancel, the split's roundings stay."""
    rng = np.random.default_rng(seed)
    raw = np.zeros((16, 20 * nb), np.uint8)
    blocks = raw.reshape(16, nb, 20)
    d = np.float16(np.exp2(rng.uniform(-9, -4, (16, nb))))
    blocks[..., 0:2] = d.reshape(16, nb, 1).view(np.uint8)
    blocks[..., 2:4] = np.float16(-d.astype(np.float64) * rng.uniform(0, 15, (16, nb))).reshape(16, nb, 1).view(np.uint8)
    blocks[..., 4:] = rng.integers(0, 256, (16, nb, 16))
    x = (rng.standard_normal((1, 32 * nb)) * 1e-3).astype(np.float32)
    x.reshape(nb, 32)[np.arange(nb), rng.integers(0, 32, nb)] *= 1e4
    scale, qa = IME.quantize(x)
    return raw, scale, qa


def test_format_bound_is_the_splits_and_holds_for_ggmls_own_split() -> None:
    """The type's product computed as ``d s sum q a + m s sum a`` (ggml's q4_1 dot; the fixed IME1 layout) stays within
    format_product's bound, whose magnitude is the split's; a bound over ``sum |a w|`` (the values'), gamma(nb + 2),
    is exceeded on most of these cases (where ``d q`` and ``m`` nearly cancel). The tree's zero points miss it by far."""
    beyond_values_bound = 0
    for seed in range(12):
        raw, scale, qa = _spiky_q4_1(seed, nb=1 + seed % 3)
        nb = scale.shape[1]
        value, bound = IME.format_product("q4_1", raw, scale, qa)
        got = _split_model(*IME.format_parts("q4_1", raw), scale, qa)
        assert (np.abs(got - value[0]) <= bound[0]).all(), seed
        a = (scale.astype(np.float64)[..., None] * qa).reshape(1, -1)
        by_values = gamma(nb + 2) * (np.abs(a) @ np.abs(IME.format_values("q4_1", raw)).T)[0]
        beyond_values_bound += int((np.abs(got - value[0]) > by_values).any())
        d, q, zp, m = IME.layout_weights("q4_1", raw)  # the tree's layout: the offset rounded into zp
        tree = IME.product(d, q, zp, scale, qa)[0][0]
        assert (np.abs(tree - value[0]) > bound[0]).any(), seed
    assert beyond_values_bound >= 6

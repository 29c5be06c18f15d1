"""SpacemiT's IME1 GEMM (ggml-cpu/spacemit: ime.cpp's ``tensor_traits<block, 32, 16>``, ime1_kernels.cpp), what the
K1's A60 cores run for MUL_MAT / MUL_MAT_ID of q4_0, q4_1 and q4_K weights, in NumPy: the weights as the backend's
16-row layouts hold them, the activations as its IME1 quantizers write them, and the product with its error bound.
Nothing here imports the harness.

**Weights** (repack.cpp: ``make_block_q4_0x16``, ``make_block_q4_1x16``, ``repack_q4_k_to_q4_1_16_bl``): every
block of 32 becomes an fp16 step ``d``, 32 nibbles ``q`` and an integer zero point ``zp``; its value is
``d (q - zp)`` (:func:`layout_weights`):

* q4_0: ``d`` and ``q`` as stored, ``zp = 8`` (the kernel subtracts 8): exactly ggml's q4_0.
* q4_1: ``d`` as stored, ``zp = clamp(-nearbyint(m / d), 0, 15)`` (fp32 division, ties to even; NaN gives 0): ggml's
  ``d q + m`` only where ``m`` is that multiple of ``-d``.
* q4_K: each sub-block ``j`` of 32: ``d_j = fp16(d sc_j)`` and ``m_j = fp16(-(dmin mn_j))`` (the fp32 products are
  exact), then q4_1's rule on ``(d_j, m_j)``.

**With block offsets** (the fix ``spacemit_ime1_block_offsets``, ``layout_weights(..., offsets=True)``): the q4_1 and
q4_K layouts hold ``zp = 0`` and keep each block's offset ``m`` (q4_K: ``m_j``, already rounded to fp16) as an fp32
beside the blocks: the value is ``d q + m``, ggml's q4_1 exactly; q4_K's but for the fp16 roundings of ``d sc_j`` and
``dmin mn_j``, which this layout keeps.  q4_0's layout is unchanged (``m = 0``).

**Activations** (``ime1::quantize_a_row_i8`` / ``quantize_a_4row_i8``, :func:`quantize`): per row and block of 32,
``scale = fp32(amax * fp32(1 / 127))`` and ``q = int8(nearest_even(fp32(x * fp32(1 / scale))))`` saturated
(``vfcvt.x.f.v``, then ``vnclip`` to int16 and int8).  An all-zero block has scale 0 and, ``0 * inf`` being NaN,
every ``q`` is 127 (the conversion of NaN is the largest integer); they multiply a zero scale, so no result reads
them (:func:`unread`: the quantizers of the backend before 2026-05 write -1 there).  In the work buffer
(:func:`work_image`) the rows come in groups of four -- per block the four fp32 scales, then 8 values of each row
in turn, four times: vmadot's A operand, 4 rows x 8 at e8 m1 on VLEN 256 -- and the rows left over one by one
(scale, then the 32 values); mul_mat_id quantizes every row alone.

**Product** (``SQ4BitGemmM4Kernel`` / ``SQ4BitGemmM1Kernel``, :func:`product`): per output and block the integer dot
``D = sum (q_w - zp) q_a`` (vmadot, int32, ``|D| <= 32 * 15 * 128``) converts exactly to fp32, and
``acc = fma(D, fp32(d_w * s_a), acc)`` runs over the blocks in order.  Each term suffers its scale product's
rounding and one rounding per fused add from its own on, so ``|got - sum_b D_b d_b s_b| <= gamma(nb + 1) *
sum_b |D_b d_b s_b|``, plus ``2^-149 (sum_b |D_b| + nb)`` for scale products and sums in fp32's subnormal range.
Each term of the oracle is exact in float64 (at most 16 + 11 + 24 bits); its sum adds ``gamma_64(nb)`` of the same
magnitude.

**Product with block offsets** (:func:`product` given the offsets ``m``): after the integer GEMM above, a second pass adds per
output and block, in order, ``acc = fma(sa_b, m_b, acc)`` with ``sa_b = fp32(s_b * S_b)``, ``S_b`` the int32 sum of the
block's 32 activation values (exact in fp32: ``|S_b| <= 32 * 128``).  A GEMM term then suffers its ``nb + 1``
roundings and ``nb`` more fused adds; an offset term ``m_b s_b S_b`` its ``sa_b`` rounding and at most ``nb`` fused
adds: ``|got - (sum_b D_b d_b s_b + sum_b m_b s_b S_b)| <= gamma(2 nb + 1) sum_b |D_b d_b s_b| + gamma(nb + 1) sum_b
|m_b s_b S_b|``, plus ``2^-149 (sum_b |D_b| + nb)`` and ``2^-149 (sum_b |m_b| + nb)`` for the subnormal range.  The
offset terms are exact in float64 too (11 + 24 + 13 bits); the oracle's sum of ``2 nb`` terms adds ``gamma_64(2 nb)``.
"""

from __future__ import annotations

import numpy as np

from .bounds import gamma
from .quants import decode
from .repack import k4_scales

BLOCK = 32
#: Bytes of one row's block in the work buffer: the fp32 scale and 32 int8 (``q8_blk_size(32)``).
ROW_BYTES = 4 + BLOCK
#: Rows the 4-row quantizer and the M4 kernel take at once.
GROUP = 4
TYPES = ("q4_0", "q4_1", "q4_K")
#: The types whose 16-row layout the fix spacemit_ime1_block_offsets changes (q4_0's has no offset).
OFFSET_TYPES = ("q4_1", "q4_K")
_U64 = 2.0 ** -53


def _nibbles(qs: np.ndarray) -> np.ndarray:
    """16 bytes per block ``(..., 16)`` -> its 32 nibbles in ggml's order (the low ones, then the high ones)."""
    return np.concatenate([qs & 15, qs >> 4], axis=-1).astype(np.int64)


def _zero_point(d: np.ndarray, m: np.ndarray) -> np.ndarray:
    """``clamp(-nearbyint(m / d), 0, 15)`` of make_block_q4_1x16, in fp32 (NaN -> 0 as std::max(0, NaN) is 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        mid = -np.rint(m.astype(np.float32) / d.astype(np.float32))
    mid = np.where(np.isnan(mid), 0, mid)
    return np.clip(mid, 0, 15).astype(np.int64)


def layout_weights(name: str, raw: np.ndarray, *, offsets: bool = False
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``raw``: ``(n, nbytes)`` rows of ggml blocks of ``name`` -> per row and block of 32: ``d`` ``(n, nb)``
    float64 (an fp16 value), ``q`` ``(n, nb, 32)`` nibbles, ``zp`` ``(n, nb)`` and the float offset ``m`` ``(n, nb)``
    as the 16-row layout holds them: the tree's (``offsets`` False: the offset rounded into ``zp``, ``m = 0``) or
    the fixed one (``offsets`` True: ``zp = 0``, ``m`` kept; q4_0 unchanged).  The value is ``d (q - zp) + m``."""
    n = raw.shape[0]
    b = np.ascontiguousarray(raw, np.uint8)
    if name in ("q4_0", "q4_1"):
        size = 18 if name == "q4_0" else 20
        blocks = b.reshape(n, -1, size)
        d = blocks[..., 0:2].copy().view("<f2")[..., 0]
        q = _nibbles(blocks[..., size - 16:])
        none = np.zeros(d.shape, np.float64)
        if name == "q4_0":
            return d.astype(np.float64), q, np.full(d.shape, 8, np.int64), none
        m = blocks[..., 2:4].copy().view("<f2")[..., 0]
        if offsets:
            return d.astype(np.float64), q, np.zeros(d.shape, np.int64), m.astype(np.float64)
        return d.astype(np.float64), q, _zero_point(d, m), none
    if name == "q4_K":
        blocks = b.reshape(n, -1, 144)
        d = blocks[..., 0:2].copy().view("<f2")[..., 0].astype(np.float32)
        dmin = blocks[..., 2:4].copy().view("<f2")[..., 0].astype(np.float32)
        sc, mn = k4_scales(blocks[..., 4:16])  # (n, nbk, 8)
        with np.errstate(over="ignore"):
            dj = (d[..., None] * sc.astype(np.float32)).astype(np.float16)
            mj = (-(dmin[..., None] * mn.astype(np.float32))).astype(np.float16)
        qs = blocks[..., 16:].reshape(n, -1, 4, 32)  # 4 pairs of sub-blocks: low nibbles j = 2p, high 2p + 1
        q = np.stack([qs & 15, qs >> 4], axis=3).reshape(n, -1, 32).astype(np.int64)
        d64 = dj.reshape(n, -1).astype(np.float64)
        if offsets:
            return d64, q, np.zeros(d64.shape, np.int64), mj.reshape(n, -1).astype(np.float64)
        return d64, q, _zero_point(dj, mj).reshape(n, -1), np.zeros(d64.shape, np.float64)
    raise ValueError(f"IME1 takes {', '.join(TYPES)}, not {name!r}")


def format_values(name: str, raw: np.ndarray) -> np.ndarray:
    """ggml's own values of the weights (oracles/quants.py), ``(n, k)`` float64: what the type means."""
    return np.stack([decode(name, row).values() for row in np.ascontiguousarray(raw, np.uint8)])


def format_parts(name: str, raw: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ggml's own values as ``d q + m`` per block of 32, exact in float64: ``d`` and ``m`` ``(n, nb)``, ``q``
    ``(n, nb, 32)`` nibbles (q4_1: its ``d`` and ``m``; q4_K: ``d sc_j`` and ``-dmin mn_j`` of sub-block ``j``, not
    rounded; q4_0: ``d`` and ``-8 d``), the split ggml's own dots take (q4_1: ``d_x d_y sumi + m_x s_y``)."""
    n = raw.shape[0]
    b = np.ascontiguousarray(raw, np.uint8)
    if name in ("q4_0", "q4_1"):
        size = 18 if name == "q4_0" else 20
        blocks = b.reshape(n, -1, size)
        d = blocks[..., 0:2].copy().view("<f2")[..., 0].astype(np.float64)
        m = -8 * d if name == "q4_0" else blocks[..., 2:4].copy().view("<f2")[..., 0].astype(np.float64)
        return d, _nibbles(blocks[..., size - 16:]), m
    if name == "q4_K":
        blocks = b.reshape(n, -1, 144)
        d = blocks[..., 0:2].copy().view("<f2")[..., 0].astype(np.float64)
        dmin = blocks[..., 2:4].copy().view("<f2")[..., 0].astype(np.float64)
        sc, mn = k4_scales(blocks[..., 4:16])
        qs = blocks[..., 16:].reshape(n, -1, 4, 32)
        q = np.stack([qs & 15, qs >> 4], axis=3).reshape(n, -1, 32).astype(np.int64)
        return (d[..., None] * sc).reshape(n, -1), q, (-dmin[..., None] * mn).reshape(n, -1)
    raise ValueError(f"IME1 takes {', '.join(TYPES)}, not {name!r}")


def quantize(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``x`` ``(m, k)`` float32, ``k % 32 == 0`` -> per row and block the fp32 scale ``(m, nb)`` and the int8 values
    ``(m, nb, 32)`` as the IME1 quantizers write them (module docstring)."""
    xb = np.asarray(x, np.float32).reshape(x.shape[0], -1, BLOCK)
    scale = (np.max(np.abs(xb), axis=2) * np.float32(1.0 / 127)).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = (np.float32(1) / scale).astype(np.float32)
        v = (xb * inv[..., None]).astype(np.float32)
        q = np.where(np.isnan(v), 127, np.clip(np.rint(v), -128, 127))
    return scale, q.astype(np.int8)


def work_image(scale: np.ndarray, q: np.ndarray, *, grouped: bool = True) -> np.ndarray:
    """The bytes the quantizers leave in the work buffer for rows ``(m, nb)`` / ``(m, nb, 32)``: groups of four
    rows interleaved (``grouped``: mul_mat's ``quantize_a_4row_i8``), the rest one row after another."""
    m, nb = scale.shape
    out = []
    full = (m // GROUP) * GROUP if grouped else 0
    for g in range(0, full, GROUP):
        blk = np.zeros((nb, GROUP * ROW_BYTES), np.uint8)
        blk[:, :4 * GROUP] = np.ascontiguousarray(scale[g:g + GROUP].T.astype("<f4")).view(np.uint8)
        part = q[g:g + GROUP].view(np.uint8).reshape(GROUP, nb, 4, 8)  # (row, block, chunk, 8)
        blk[:, 4 * GROUP:] = part.transpose(1, 2, 0, 3).reshape(nb, -1)
        out.append(blk.reshape(-1))
    for r in range(full, m):
        row = np.zeros((nb, ROW_BYTES), np.uint8)
        row[:, :4] = np.ascontiguousarray(scale[r].astype("<f4")).view(np.uint8).reshape(nb, 4)
        row[:, 4:] = q[r].view(np.uint8)
        out.append(row.reshape(-1))
    return np.concatenate(out) if out else np.zeros(0, np.uint8)


def unread(scale: np.ndarray, *, grouped: bool = True) -> np.ndarray:
    """Which bytes of :func:`work_image` no product reads: the values of the blocks whose scale is 0 (an all-zero
    block: each value multiplies that scale).  The quantizers may write anything there."""
    marked = np.broadcast_to((scale == 0)[..., None], (*scale.shape, BLOCK)).astype(np.int8)
    return work_image(np.zeros_like(scale), marked, grouped=grouped) == 1


def work_bytes(m: int, k: int) -> int:
    """Bytes of the quantized activations of ``m`` rows of ``k`` in the work buffer."""
    return m * (k // BLOCK) * ROW_BYTES


def product(d: np.ndarray, q: np.ndarray, zp: np.ndarray, scale: np.ndarray, qa: np.ndarray,
            offsets: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The IME1 product of weights ``(d, q, zp)`` of :func:`layout_weights` (``n`` rows) and activations
    ``(scale, qa)`` of :func:`quantize` (``m`` rows): ``(value, bound)`` ``(m, n)`` float64 (module docstring).
    ``offsets``: the ``m`` of the fixed layout, added by its second pass (None: the tree's layout, no such pass)."""
    nb = d.shape[1]
    wq = (q - zp[..., None]).astype(np.float64).transpose(1, 2, 0)  # (nb, 32, n)
    dots = np.matmul(qa.astype(np.float64).transpose(1, 0, 2), wq)  # (nb, m, n): exact integers
    p = scale.astype(np.float64).T[:, :, None] * d.T[:, None, :]  # (nb, m, n): exact
    terms = dots * p
    value = terms.sum(axis=0)
    magnitude = np.abs(terms).sum(axis=0)
    subnormal = 2.0 ** -149 * (np.abs(dots).sum(axis=0) + nb)
    if offsets is None:
        return value, (gamma(nb + 1) + gamma(nb, _U64)) * magnitude + subnormal
    sums = qa.astype(np.int64).sum(axis=2).astype(np.float64)  # (m, nb): S_b, exact
    off = (scale.astype(np.float64) * sums).T[:, :, None] * offsets.T[:, None, :]  # (nb, m, n): exact
    off_magnitude = np.abs(off).sum(axis=0)
    bound = (gamma(2 * nb + 1) * magnitude + gamma(nb + 1) * off_magnitude
             + gamma(2 * nb, _U64) * (magnitude + off_magnitude)
             + subnormal + 2.0 ** -149 * (np.abs(offsets).sum(axis=1)[None, :] + nb))
    return value + off.sum(axis=0), bound


def format_product(name: str, raw: np.ndarray, scale: np.ndarray, qa: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The product the type means: ggml's weight values (:func:`format_values`) times the activations as the kernel
    quantized them, ``(value, bound)`` ``(m, n)``.  The bound is what a kernel computing the type's own split
    ``d q + m`` (:func:`format_parts`: ggml's q4_1 dot takes ``d_x d_y sumi + m_x s_y``) in IME1's order keeps: the
    block offsets' product's (:func:`product`), each block's ``d`` and ``m`` rounded once more to fp32 (q4_K's
    ``d sc``, ``dmin mn``): gamma(2 nb + 2) over ``sum_b |d_b s_b D_b| + |m_b s_b S_b|`` with ``D_b = sum q a``,
    ``S_b = sum a``.  Its magnitude is the split's, not ``sum |a w|``: where a block's ``d q`` and ``m`` nearly cancel,
    the roundings of the two parts do not (a float32 model of ggml's own q4_1 dot exceeds ``gamma(nb + 2) sum |a w|``
    there: tests/test_spacemit_ime1_oracle.py)."""
    values = format_values(name, raw)
    d, q, m = format_parts(name, raw)
    a = (scale.astype(np.float64)[..., None] * qa.astype(np.float64)).reshape(qa.shape[0], -1)  # exact
    value = a @ values.T
    nb = scale.shape[1]
    s = scale.astype(np.float64).T[:, :, None]  # (nb, m, 1)
    dots = np.matmul(qa.astype(np.float64).transpose(1, 0, 2), q.astype(np.float64).transpose(1, 2, 0))  # (nb, m, n)
    sums = qa.astype(np.int64).sum(axis=2).astype(np.float64).T[:, :, None]  # (nb, m, 1)
    split = (np.abs(dots * s * d.T[:, None, :]) + np.abs(sums * s * m.T[:, None, :])).sum(axis=0)
    largest_dot = BLOCK * 15 * 128  # 2^-149 per scale product and per sum in the subnormal range, times |D| <= this
    subnormal = 2.0 ** -149 * ((nb + 1) * largest_dot + np.abs(m).sum(axis=1)[None, :] + nb)
    return value, gamma(2 * nb + 2) * split + gamma(values.shape[1], _U64) * (np.abs(a) @ np.abs(values).T) + subnormal

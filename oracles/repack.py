"""Independent NumPy models of ggml's interleaved weight layouts (repack.cpp) on RISC-V, their
inverses, and the interleaved activation blocks the GEMM kernels read.

ggml repacks a weight matrix of ``m`` rows ahead of time: rows are taken ``ncols`` at a time
(``NB_COLS``: 16 for the RVV outer-product kernels, 8 for q4_0 8x8), and for every block index
along K the ``ncols`` blocks of those rows become one interleaved block.  The repacked tensor is
``[m / ncols][n_blocks]`` interleaved blocks, exactly as many bytes as the original.  Inside an
interleaved block the per-row scales come first (row order), then the payload bytes are
interleaved ``blocklen`` (``INTER_SIZE``) bytes from each row in turn::

    packed[(i // ncols) * blocklen ... ] = row (i % ncols), bytes [(i // ncols) * blocklen, +blocklen)

The layouts (each is described from the structs of ``repack.h`` and what the kernels read):

* ``q4_0_16x1`` -- ``d[16]`` fp16, ``qs[256]`` byte-interleaved, every byte XOR 0x88 (each
  nibble's bias of 8 becomes its sign bit, so the kernels read nibbles as signed with shifts);
* ``q4_0_8x8`` -- ``d[8]``, ``qs[128]`` interleaved 8 bytes at a time, XOR 0x88;
* ``q8_0_16x1`` -- ``d[16]``, ``qs[512]`` byte-interleaved;
* ``iq4_nl_16x1`` -- ``d[16]``, ``qs[256]`` byte-interleaved (no XOR: the nibbles index a table);
* ``q4_K_16x1`` -- ``d[16]``, ``dmin[16]``, ``scales[192]``, ``qs[2048]`` byte-interleaved.  The
  6-bit scales ``sc`` and mins ``mn`` of the 8 sub-blocks (packed in 12 bytes per block by
  ``get_scale_min_k4``) are re-encoded: ``scales[16 sb + col] = (sc & 15) | (mn & 15) << 4`` for
  the 8 sub-blocks, then for ``sb < 4``: ``scales[128 + 16 sb + col] = sc[sb] >> 4 |
  (mn[sb] >> 4) << 2 | (sc[sb + 4] >> 4) << 4 | (mn[sb + 4] >> 4) << 6``;
* ``q2_K_16x1`` -- ``d[16]``, ``dmin[16]``, ``scales[256]``, ``qs[1024]`` byte-interleaved; the
  16 scale bytes of each row are regrouped by sub-block in the order even-low (0 2 4 6),
  odd-low (1 3 5 7), even-high (8 10 12 14), odd-high (9 11 13 15), each sub-block's 16 rows
  together: ``scales[16 p + col] = row col's scales[Q2_K_SCALE_ORDER[p]]``.

Every layout is a permutation of bytes plus, for q4_0, an involution (XOR) and, for q4_K, a
bijective re-encoding of the same 192 bits: :func:`unpack_matrix` inverts :func:`pack_matrix`
exactly.  :func:`read_packed` is a second, element-wise reading of a packed matrix (the
access pattern of the kernels, written per element from the description above rather than as
the inverse shuffles) used to check the two against each other.

Activations (``block_q8_0x4`` / ``block_q8_Kx4``): the GEMM kernels take four activation rows at
a time, quantized by ``ggml_quantize_mat_<q8>_4x<blocklen>``: per block index the four scales,
then the quants interleaved ``blocklen`` at a time, and for q8_K the 16 ``bsums`` of each row
interleaved one at a time (``bsums[4 g + r]`` = row r's sum of elements ``16 g .. 16 g + 15``).

Nothing here imports the harness.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import quant_tables as T
from . import quants as Q

#: q2_K's sub-block order in the regrouped scales of q2_K_16x1.
Q2_K_SCALE_ORDER = (0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15)
#: The XOR that turns q4_0's biased nibbles into signed ones.
Q4_0_XOR = 0x88


@dataclass(frozen=True)
class Layout:
    """One interleaved weight layout: ``ncols`` rows of ``weight`` blocks, ``blocklen`` bytes at a time."""

    name: str
    weight: str  # ggml type name of the blocks
    ncols: int  # NB_COLS
    blocklen: int  # INTER_SIZE
    activation: str  # the activation type its kernels pair with (vec_dot_type)
    activation_blocklen: int  # INTER_SIZE of the 4-row activation blocks its GEMM reads

    @property
    def block_bytes(self) -> int:
        """Bytes of one interleaved block (``ncols`` blocks of the weight type)."""
        return self.ncols * Q.block_bytes(self.weight)


LAYOUTS: dict[str, Layout] = {lay.name: lay for lay in (
    Layout("q4_0_16x1", "q4_0", 16, 1, "q8_0", 1),
    Layout("q4_0_8x8", "q4_0", 8, 8, "q8_0", 8),
    Layout("q8_0_16x1", "q8_0", 16, 1, "q8_0", 1),
    Layout("iq4_nl_16x1", "iq4_nl", 16, 1, "q8_0", 1),
    Layout("q4_K_16x1", "q4_K", 16, 1, "q8_K", 1),
    Layout("q2_K_16x1", "q2_K", 16, 1, "q8_K", 1),
)}


def layout(name: str) -> Layout:
    try:
        return LAYOUTS[name]
    except KeyError:
        raise KeyError(f"no repack layout {name!r}; known: {', '.join(LAYOUTS)}") from None


# ------------------------------------------------------------------ byte interleaving


def interleave(parts: np.ndarray, blocklen: int) -> np.ndarray:
    """``(G, N, L)`` -> ``(G, N * L)``: ``blocklen`` bytes (elements) of each of the N rows in turn."""
    g, n, length = parts.shape
    if length % blocklen:
        raise ValueError(f"interleave: {length} is not a multiple of blocklen {blocklen}")
    return parts.reshape(g, n, length // blocklen, blocklen).transpose(0, 2, 1, 3).reshape(g, n * length)


def deinterleave(packed: np.ndarray, n: int, blocklen: int) -> np.ndarray:
    """The inverse of :func:`interleave`: ``(G, N * L)`` -> ``(G, N, L)``."""
    g, total = packed.shape
    length = total // n
    return packed.reshape(g, length // blocklen, n, blocklen).transpose(0, 2, 1, 3).reshape(g, n, length)


def _fields(parts: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Bytes ``[lo, hi)`` of every block of ``(G, N, B)`` as a contiguous ``(G, N, hi - lo)``."""
    return np.ascontiguousarray(parts[:, :, lo:hi])


# ------------------------------------------------------------------ K-quant scale encodings


def k4_scales(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """q4_K / q5_K's 12 scale bytes (``(..., 12)``) -> 6-bit scales and mins ``(..., 8)`` each.

    Bytes 0-3: scales 0-3 (low 6 bits), bytes 4-7: mins 0-3; bytes 8-11: low nibble scale 4-7's
    low 4 bits, high nibble min 4-7's low 4 bits; the top 2 bits of bytes 0-3 / 4-7 are the high
    bits of scales / mins 4-7 (``get_scale_min_k4``).
    """
    r = raw.astype(np.uint8)
    sc = np.concatenate([r[..., 0:4] & 63, (r[..., 8:12] & 15) | ((r[..., 0:4] >> 6) << 4)], axis=-1)
    mn = np.concatenate([r[..., 4:8] & 63, (r[..., 8:12] >> 4) | ((r[..., 4:8] >> 6) << 4)], axis=-1)
    return sc, mn


def k4_encode(sc: np.ndarray, mn: np.ndarray) -> np.ndarray:
    """The inverse of :func:`k4_scales`: 6-bit scales and mins -> the 12 packed bytes."""
    sc = sc.astype(np.uint8)
    mn = mn.astype(np.uint8)
    return np.concatenate([
        (sc[..., 0:4] & 63) | ((sc[..., 4:8] >> 4) << 6),
        (mn[..., 0:4] & 63) | ((mn[..., 4:8] >> 4) << 6),
        (sc[..., 4:8] & 15) | ((mn[..., 4:8] & 15) << 4),
    ], axis=-1)


def _q4_K_x16_scales(raw: np.ndarray) -> np.ndarray:
    """``(G, 16, 12)`` packed K scales -> the 192 re-encoded bytes of q4_K_16x1 ``(G, 192)``."""
    sc, mn = k4_scales(raw)  # (G, 16 cols, 8 sub-blocks)
    sc, mn = sc.transpose(0, 2, 1), mn.transpose(0, 2, 1)  # (G, sb, col)
    low = (sc & 15) | ((mn & 15) << 4)
    high = (sc[:, :4] >> 4) | ((mn[:, :4] >> 4) << 2) | ((sc[:, 4:] >> 4) << 4) | ((mn[:, 4:] >> 4) << 6)
    return np.concatenate([low.reshape(len(raw), 128), high.reshape(len(raw), 64)], axis=1).astype(np.uint8)


def _q4_K_x16_unscales(packed: np.ndarray) -> np.ndarray:
    """The inverse of :func:`_q4_K_x16_scales`: ``(G, 192)`` -> ``(G, 16, 12)``."""
    g = len(packed)
    low = packed[:, :128].reshape(g, 8, 16)
    high = packed[:, 128:].reshape(g, 4, 16)
    hs = np.concatenate([high & 3, (high >> 4) & 3], axis=1)  # (G, sb, col): high bits of the scales
    hm = np.concatenate([(high >> 2) & 3, (high >> 6) & 3], axis=1)
    sc = (low & 15) | (hs << 4)
    mn = (low >> 4) | (hm << 4)
    return k4_encode(sc.transpose(0, 2, 1), mn.transpose(0, 2, 1))


# ------------------------------------------------------------------ one interleaved block


def pack_blocks(lay: Layout, parts: np.ndarray) -> np.ndarray:
    """``(G, ncols, block_bytes)`` blocks (one per row) -> ``(G, lay.block_bytes)`` interleaved blocks."""
    g = len(parts)
    if lay.weight in ("q4_0", "q8_0", "iq4_nl"):
        d = _fields(parts, 0, 2).reshape(g, -1)
        qs = interleave(_fields(parts, 2, parts.shape[2]), lay.blocklen)
        if lay.weight == "q4_0":
            qs = qs ^ np.uint8(Q4_0_XOR)
        return np.concatenate([d, qs], axis=1)
    if lay.weight == "q4_K":
        d, dmin = _fields(parts, 0, 2).reshape(g, -1), _fields(parts, 2, 4).reshape(g, -1)
        return np.concatenate([d, dmin, _q4_K_x16_scales(_fields(parts, 4, 16)),
                               interleave(_fields(parts, 16, 144), lay.blocklen)], axis=1)
    if lay.weight == "q2_K":
        scales = _fields(parts, 0, 16)[:, :, list(Q2_K_SCALE_ORDER)]  # (G, col, position)
        return np.concatenate([_fields(parts, 80, 82).reshape(g, -1), _fields(parts, 82, 84).reshape(g, -1),
                               scales.transpose(0, 2, 1).reshape(g, -1),
                               interleave(_fields(parts, 16, 80), lay.blocklen)], axis=1)
    raise ValueError(f"pack_blocks: no layout for {lay.weight}")


def unpack_blocks(lay: Layout, packed: np.ndarray) -> np.ndarray:
    """The inverse of :func:`pack_blocks`: ``(G, lay.block_bytes)`` -> ``(G, ncols, block_bytes)``."""
    g, n = len(packed), lay.ncols
    out = np.empty((g, n, Q.block_bytes(lay.weight)), np.uint8)
    if lay.weight in ("q4_0", "q8_0", "iq4_nl"):
        out[:, :, 0:2] = packed[:, :2 * n].reshape(g, n, 2)
        qs = packed[:, 2 * n:]
        if lay.weight == "q4_0":
            qs = qs ^ np.uint8(Q4_0_XOR)
        out[:, :, 2:] = deinterleave(qs, n, lay.blocklen)
    elif lay.weight == "q4_K":
        out[:, :, 0:2] = packed[:, 0:2 * n].reshape(g, n, 2)
        out[:, :, 2:4] = packed[:, 2 * n:4 * n].reshape(g, n, 2)
        out[:, :, 4:16] = _q4_K_x16_unscales(packed[:, 4 * n:4 * n + 192])
        out[:, :, 16:] = deinterleave(packed[:, 4 * n + 192:], n, lay.blocklen)
    elif lay.weight == "q2_K":
        out[:, :, 80:82] = packed[:, 0:2 * n].reshape(g, n, 2)
        out[:, :, 82:84] = packed[:, 2 * n:4 * n].reshape(g, n, 2)
        scales = packed[:, 4 * n:4 * n + 256].reshape(g, 16, n).transpose(0, 2, 1)  # (G, col, position)
        out[:, :, list(Q2_K_SCALE_ORDER)] = scales
        out[:, :, 16:80] = deinterleave(packed[:, 4 * n + 256:], n, lay.blocklen)
    else:
        raise ValueError(f"unpack_blocks: no layout for {lay.weight}")
    return out


# ------------------------------------------------------------------ whole matrices


def _check_rows(lay: Layout, m: int) -> None:
    if m % lay.ncols:
        raise ValueError(f"{lay.name}: {m} rows is not a multiple of {lay.ncols} (ggml does not repack it)")


def pack_matrix(lay: Layout, rows: np.ndarray) -> np.ndarray:
    """A weight matrix ``(m, n_blocks, block_bytes)`` -> its repacked bytes ``(m // ncols * n_blocks, block_bytes')``
    in ggml's tensor order (row group major, then block index)."""
    m, nb, b = rows.shape
    _check_rows(lay, m)
    groups = rows.reshape(m // lay.ncols, lay.ncols, nb, b).transpose(0, 2, 1, 3).reshape(-1, lay.ncols, b)
    return pack_blocks(lay, groups)


def unpack_matrix(lay: Layout, packed: np.ndarray, n_blocks: int) -> np.ndarray:
    """The inverse of :func:`pack_matrix`: repacked bytes (any shape) -> ``(m, n_blocks, block_bytes)``."""
    flat = np.asarray(packed, np.uint8).reshape(-1, lay.block_bytes)
    if len(flat) % n_blocks:
        raise ValueError(f"{lay.name}: {len(flat)} interleaved blocks is not a multiple of {n_blocks} blocks per row")
    parts = unpack_blocks(lay, flat)  # (groups * nb, ncols, b)
    ng = len(flat) // n_blocks
    b = parts.shape[2]
    return parts.reshape(ng, n_blocks, lay.ncols, b).transpose(0, 2, 1, 3).reshape(ng * lay.ncols, n_blocks, b)


# ------------------------------------------------------------------ reading a packed matrix


def _nibble(byte: np.ndarray, high: np.ndarray) -> np.ndarray:
    return np.where(high, byte >> 4, byte & 15).astype(np.int64)


def read_packed(lay: Layout, packed: np.ndarray, m: int, n_blocks: int) -> np.ndarray:
    """The dequantized ``(m, n_blocks * block)`` matrix read element by element from the packed
    bytes, the way the kernels address them (not through :func:`unpack_matrix`)."""
    blk = Q.block_size(lay.weight)
    flat = np.asarray(packed, np.uint8).reshape(m // lay.ncols, n_blocks, lay.block_bytes)
    n = lay.ncols
    i, e = np.meshgrid(np.arange(m), np.arange(n_blocks * blk), indexing="ij")  # row, element
    grp, col, l, j = i // n, i % n, e // blk, e % blk  # (grp, l): the interleaved block holding (i, e)

    def u8(off: np.ndarray) -> np.ndarray:
        return flat[grp, l, off].astype(np.int64)

    def f16(off: np.ndarray) -> np.ndarray:
        return (u8(off) | (u8(off + 1) << 8)).astype(np.uint16).view(np.float16).astype(np.float64)

    def qs_byte(base: int, index: np.ndarray) -> np.ndarray:
        """Byte ``index`` of row ``col``'s payload: chunk index // blocklen, row col, offset index % blocklen."""
        bl = lay.blocklen
        return u8(base + (index // bl) * n * bl + col * bl + index % bl)

    d = f16(2 * col)
    if lay.weight in ("q4_0", "iq4_nl"):
        q = _nibble(qs_byte(2 * n, j % 16), j >= 16)
        if lay.weight == "q4_0":
            return d * np.where(q >= 8, q - 16, q)  # the XOR'd nibble read as a signed 4-bit number
        return d * T.kvalues_iq4nl()[q]
    if lay.weight == "q8_0":
        return d * qs_byte(2 * n, j).astype(np.int8).astype(np.float64)
    dmin = f16(2 * n + 2 * col)
    if lay.weight == "q4_K":
        sb = j // 32
        low = u8(4 * n + 16 * sb + col)
        high = u8(4 * n + 128 + 16 * (sb % 4) + col)
        sc = (low & 15) | (((high >> np.where(sb < 4, 0, 4)) & 3) << 4)
        mn = (low >> 4) | (((high >> np.where(sb < 4, 2, 6)) & 3) << 4)
        q = _nibble(qs_byte(4 * n + 192, 32 * (j // 64) + j % 32), (j // 32) % 2 == 1)
        return d * sc * q - dmin * mn
    if lay.weight == "q2_K":
        sb = j // 16
        pos = np.argsort(Q2_K_SCALE_ORDER)[sb]
        s = u8(4 * n + 16 * pos + col)
        q = (qs_byte(4 * n + 256, 32 * (j // 128) + j % 32) >> (2 * ((j % 128) // 32))) & 3
        return d * (s & 15) * q - dmin * (s >> 4)
    raise ValueError(f"read_packed: no layout for {lay.weight}")


# ------------------------------------------------------------------ activations


def activation_block_bytes(act: str) -> int:
    """Bytes of one 4-row interleaved activation block (``block_q8_0x4`` / ``block_q8_Kx4``)."""
    return 4 * Q.block_bytes(act)


def pack_activations(act: str, rows: np.ndarray, blocklen: int) -> np.ndarray:
    """Activation rows ``(nr, n_blocks, block_bytes)`` of ``act`` (q8_0 / q8_K), ``nr % 4 == 0``, ->
    the 4-row interleaved blocks ``(nr // 4 * n_blocks, 4 * block_bytes)`` a GEMM reads."""
    nr, nb, b = rows.shape
    if nr % 4:
        raise ValueError(f"pack_activations: {nr} rows is not a multiple of 4")
    g = rows.reshape(nr // 4, 4, nb, b).transpose(0, 2, 1, 3).reshape(-1, 4, b)
    n = len(g)
    if act == "q8_0":
        return np.concatenate([_fields(g, 0, 2).reshape(n, -1), interleave(_fields(g, 2, 34), blocklen)], axis=1)
    if act == "q8_K":
        bsums = _fields(g, 260, 292).view("<i2")  # (n, 4, 16)
        return np.concatenate([_fields(g, 0, 4).reshape(n, -1), interleave(_fields(g, 4, 260), blocklen),
                               interleave(bsums, 1).view(np.uint8)], axis=1)
    raise ValueError(f"pack_activations: {act} is not q8_0 / q8_K")


def unpack_activations(act: str, packed: np.ndarray, n_blocks: int, blocklen: int) -> np.ndarray:
    """The inverse of :func:`pack_activations`: -> ``(nr, n_blocks, block_bytes)``."""
    flat = np.asarray(packed, np.uint8).reshape(-1, activation_block_bytes(act))
    n = len(flat)
    b = Q.block_bytes(act)
    out = np.empty((n, 4, b), np.uint8)
    if act == "q8_0":
        out[:, :, 0:2] = flat[:, :8].reshape(n, 4, 2)
        out[:, :, 2:] = deinterleave(flat[:, 8:], 4, blocklen)
    elif act == "q8_K":
        out[:, :, 0:4] = flat[:, :16].reshape(n, 4, 4)
        out[:, :, 4:260] = deinterleave(flat[:, 16:1040], 4, blocklen)
        bsums = deinterleave(np.ascontiguousarray(flat[:, 1040:]).view("<i2"), 4, 1)
        out[:, :, 260:292] = np.ascontiguousarray(bsums).view(np.uint8).reshape(n, 4, 32)
    else:
        raise ValueError(f"unpack_activations: {act} is not q8_0 / q8_K")
    groups = n // n_blocks
    return out.reshape(groups, n_blocks, 4, b).transpose(0, 2, 1, 3).reshape(groups * 4, n_blocks, b)


# ------------------------------------------------------------------ what a GEMV / GEMM should return


@dataclass(frozen=True)
class Products:
    """Every dot product of ``n`` activation rows with ``m`` weight rows: ``(n, m)`` arrays.

    ``value``: the dot products in float64 (each a sum of exact products, rounded at most
    ``K`` times by float64 additions: :func:`oracle_error`).  ``magnitude``: the sum of
    ``|x_i y_i|`` over the elements, the main part and the offset part (minimums) taken
    separately, as the kernels compute them (``oracles.dots.DotExpected.magnitude``); an
    activation carrying its block sums (q8_1's ``s``) gives the offset part as offset times
    sum, as the kernels (and ``oracles.dots.dot``) take it.
    ``int_magnitude``: the same over the integer parts alone (for the underflow term of a bound).
    """

    value: np.ndarray
    magnitude: np.ndarray
    int_magnitude: np.ndarray


def products(w_name: str, w_rows: np.ndarray, a_name: str, a_rows: np.ndarray) -> Products:
    """``w_rows`` ``(m, ...)`` raw weight rows of ``w_name``, ``a_rows`` ``(n, ...)`` raw activation
    rows of ``a_name`` (the same number of elements per row) -> :class:`Products`."""
    m, n = len(w_rows), len(a_rows)
    dw = Q.decode(w_name, np.ascontiguousarray(w_rows).reshape(-1))
    da = Q.decode(a_name, np.ascontiguousarray(a_rows).reshape(-1))
    if dw.n // m != da.n // n:
        raise ValueError(f"products: {w_name} rows of {dw.n // m} elements, {a_name} rows of {da.n // n}")
    main = (dw.scale * dw.q).reshape(m, -1)
    qw = np.abs(dw.q).reshape(m, -1).astype(np.float64)
    if dw.offset_scale is not None:
        off = (dw.offset_scale * dw.offset_q).reshape(m, -1)
        qw = qw + np.abs(dw.offset_q).reshape(m, -1)
    else:
        off = np.zeros_like(main)
    y = (da.scale * da.q).reshape(n, -1)
    value = y @ main.T
    magnitude = np.abs(y) @ np.abs(main).T
    if dw.offset_scale is not None and da.block_sums is not None:  # q8_1: offset * s per block
        g = dw.offset_group
        off_b = off.reshape(m, -1, g)[:, :, 0]
        s = da.block_sums.reshape(n, -1)
        value = value + s @ off_b.T
        magnitude = magnitude + np.abs(s) @ np.abs(off_b).T
    else:
        value = value + y @ off.T
        magnitude = magnitude + np.abs(y) @ np.abs(off).T
    int_magnitude = np.abs(da.q).reshape(n, -1).astype(np.float64) @ qw.T
    return Products(value, magnitude, int_magnitude)


def oracle_error(k: int, magnitude: np.ndarray) -> np.ndarray:
    """Bound on the float64 rounding of :func:`products` (sums of ``2 k`` exact products)."""
    return 1.01 * 2 * k * 2.0 ** -53 * magnitude

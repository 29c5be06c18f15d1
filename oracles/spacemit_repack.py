"""SpacemiT's weight layouts for its IME2 GEMMs (ggml-cpu/spacemit/repack.cpp), written from reading the code.

``repack<BLOC_TYPE, INTER_SIZE, NB_COLS>`` rewrites a weight tensor's rows (``nrow = ne1 * ne2``, flattened) in
groups of 32: for each group and each block index along K, one interleaved block of the group's 32 rows.  The
repacked tensor is those blocks, group by group, block index by block index:

``q4_0`` 32x32 (``block_q4_0x32``, 576 bytes)
    ``d[32]`` (the rows' fp16 scales, bits copied), ``qs[32][16]``: row i's 32 nibbles in element order, two a
    byte (element 2m in the low nibble of byte m, 2m + 1 in the high one; ggml's q4_0 puts element j and j + 16
    in byte j).  ``q4_0`` 32x256 (``block_q4_0x32x256``, eight of them per 8 block indices) is the same bytes.
``q4_1`` 32x32 (``block_q4_1x32``, 608 bytes)
    ``d[32]``, ``zp[32]``, ``qs[32][16]`` as q4_0's: the value ``d * q + m`` becomes ``d * (q - zp)`` with
    ``zp = clamp(nearest(-m / d), 0, 15)``.  The RVV function computes ``-m / d`` in fp16 (``vfdiv``), converts it to
    int32 to nearest even (NaN and +inf to INT32_MAX, -inf to INT32_MIN) and clamps.  The offset is exact only
    when m is -zp d; else rounded to a multiple of d, and lost to the clamp when the block does not straddle 0.
``q8_0`` 32x32 (``block_q8_0x32``, 1088 bytes)
    ``d[32]``, ``qs[32][32]``, copied.
``q6_K`` to ``q8_0`` 32x32
    each 256-value super-block becomes eight ``block_q8_0x32``: sub-block ``bi`` of a row (its values ``a l * s``,
    ``a`` the 6-bit quant less 32, ``s = scales[2 bi + l / 16] * d`` in float32) is requantized to int8 with
    ``step = amax / 127`` (float32: ``amax`` over the rounded products), ``q = clamp(nearest(a * (s / step)))``, and
    ``d = fp16(step)``.  An all-zero sub-block (step 0) has one right answer, ``d = 0`` and ``q = 0``; the code
    divides by zero there (docs/spacemit.md).

Rows past the last whole group: the ``_ref`` functions (q6_K, q8_0, which the tree calls) write the last group in
full, its missing rows zero; the RVV ones (q4_0, q4_1, and the uncalled q6_K / q8_0 twins) and q4_0 32x256 refuse
a tensor whose ne1 is not a multiple of 32 (return -1, write nothing).  :func:`alloc_bytes` is what the pinned tree's
buffer type allocates for the tensor (``ggml_backend_cpu_riscv64_spacemit_nbytes``): it pads ne1, not the
flattened rows.  Nothing here imports the harness.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

GROUP = 32  # rows per interleaved block (NB_COLS)
QK_K = 256
SRC_BYTES = {"q4_0": 18, "q4_1": 20, "q8_0": 34, "q6_K": 210}
SRC_BLOCK = {"q4_0": 32, "q4_1": 32, "q8_0": 32, "q6_K": 256}


@dataclass(frozen=True)
class Layout:
    """One layout: its source type, INTER_SIZE, and whether a tail group is padded (else refused)."""

    name: str
    type: str
    inter: int
    pads: bool

    @property
    def dtype(self) -> np.dtype:
        """One interleaved block (packed)."""
        if self.type == "q4_1":
            return np.dtype([("d", "<u2", (GROUP,)), ("zp", "u1", (GROUP,)), ("qs", "u1", (GROUP, 16))])
        if self.type == "q4_0":
            return np.dtype([("d", "<u2", (GROUP,)), ("qs", "u1", (GROUP, 16))])
        return np.dtype([("d", "<u2", (GROUP,)), ("qs", "i1", (GROUP, 32))])

    @property
    def per_block(self) -> int:
        """Interleaved blocks per source block index (q6_K: eight sub-blocks of 32)."""
        return 8 if self.type == "q6_K" else 1


def rows_written(layout: Layout, ne1: int, ne2: int) -> int:
    """Rows the repack writes (a whole number of groups), or 0 when it refuses the shape."""
    nrow = ne1 * ne2
    if not layout.pads:
        return nrow if ne1 % GROUP == 0 else 0
    return -(-nrow // GROUP) * GROUP


def written_bytes(layout: Layout, ne0: int, ne1: int, ne2: int) -> int:
    nb = ne0 // SRC_BLOCK[layout.type]
    return rows_written(layout, ne1, ne2) // GROUP * nb * layout.per_block * layout.dtype.itemsize


def alloc_bytes(type_: str, ne0: int, ne1: int, ne2: int) -> int:
    """The pinned tree's buffer size for the tensor (``ggml_backend_cpu_riscv64_spacemit_nbytes``, ne3 = 1): q6_K and
    q8_0 are remapped to 34-byte blocks (q6_K: 8 a super-block) plus ``32 - ne1 % 32`` rows once; q4_0 / q4_1 keep
    ggml_nbytes.  The tests ask the tree for its own figure (a fixed tree pads the flattened rows instead)."""
    nb = ne0 // SRC_BLOCK[type_]
    per_row = {"q6_K": 8 * 34, "q8_0": 34}.get(type_, SRC_BYTES[type_]) * nb
    pad = (GROUP - ne1 % GROUP) if type_ in ("q6_K", "q8_0") and ne1 % GROUP else 0
    return (ne1 * ne2 + pad) * per_row


def _nibbles(qs: np.ndarray) -> np.ndarray:
    """ggml's q4 bytes (..., 16) -> the 32 quants in element order (byte j: element j low, j + 16 high)."""
    return np.concatenate([qs & 15, qs >> 4], axis=-1)


def _pairs(q: np.ndarray) -> np.ndarray:
    """32 quants in element order -> the layout's 16 bytes (element 2m low, 2m + 1 high)."""
    return (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8)


def q6_parts(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q6_K blocks (n, 210) -> (a: (n, 256) quants less 32, scales: (n, 16) int8, d: (n,) fp16), read as the repack
    reads them: sub-block bi takes ql[64 (bi / 4) + 32 (bi % 2) + l] (low nibble for bi % 4 < 2, else high) and
    the 2-bit pair 2 (bi % 4) of qh[32 (bi / 4) + l]."""
    ql, qh = raw[:, :128].astype(np.int64), raw[:, 128:192].astype(np.int64)
    a = np.empty((raw.shape[0], QK_K), np.int64)
    l = np.arange(32)
    for bi in range(8):
        half, idx = bi // 4, bi % 4
        low = ql[:, 64 * half + 32 * (idx % 2) + l]
        low = (low & 15) if idx < 2 else (low >> 4)
        a[:, 32 * bi + l] = (low | (((qh[:, 32 * half + l] >> (2 * idx)) & 3) << 4)) - 32
    return a, raw[:, 192:208].view(np.int8).astype(np.int64), raw[:, 208:210].copy().view(np.float16)[:, 0]


def _requant_q6(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """q6_K blocks (n, 210) -> (d bits (n, 8), qs (n, 8, 32) int8) of the eight q8_0 sub-blocks."""
    a, sc, d = q6_parts(raw)
    a = a.reshape(-1, 8, 2, 16).astype(np.float32)
    s = (sc.reshape(-1, 8, 2).astype(np.float32) * d.astype(np.float32)[:, None, None]).astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        amax = np.abs((a * s[..., None]).astype(np.float32)).max(axis=(2, 3))
        step = (amax / np.float32(127)).astype(np.float32)
        r = (s / np.where(step != 0, step, 1)[..., None]).astype(np.float32)
        q = np.clip(np.rint((a * r[..., None]).astype(np.float32)), -128, 127)
    q = np.where(step[..., None, None] != 0, q, 0).astype(np.int8).reshape(-1, 8, 32)
    return step.astype(np.float16).view(np.uint16), q


def _zero_points(d: np.ndarray, m: np.ndarray) -> np.ndarray:
    """zp of each q4_1 block (fp16 d, m): ``-m / d`` in fp16 (a float64 quotient rounded once more to fp16 is the
    correctly rounded one: 53 >= 2 * 11 + 2), to int32 nearest even (NaN, +inf -> INT32_MAX; -inf -> INT32_MIN),
    clamped to [0, 15]."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        ratio = (-m.astype(np.float64) / d.astype(np.float64)).astype(np.float16).astype(np.float64)
    i = np.where(np.isnan(ratio), 2.0 ** 31 - 1, np.clip(np.rint(ratio), -2.0 ** 31, 2.0 ** 31 - 1))
    return np.clip(i, 0, 15).astype(np.uint8)


def pack(layout: Layout, src: np.ndarray, ne0: int, ne1: int, ne2: int) -> np.ndarray:
    """The bytes ``repack`` writes for ``src`` (the tensor's ggml blocks, uint8), as this module describes them."""
    nb = ne0 // SRC_BLOCK[layout.type]
    rows = rows_written(layout, ne1, ne2)
    blocks = np.zeros((rows, nb, SRC_BYTES[layout.type]), np.uint8)  # missing rows: zero blocks (memset)
    if rows:
        blocks[:ne1 * ne2] = np.asarray(src, np.uint8).reshape(-1, nb, SRC_BYTES[layout.type])
    g = blocks.reshape(rows // GROUP, GROUP, nb, -1).transpose(0, 2, 1, 3)  # (group, block index, row, bytes)
    out = np.zeros((rows // GROUP, nb, layout.per_block), layout.dtype)
    if layout.type == "q6_K":
        d, q = _requant_q6(g.reshape(-1, SRC_BYTES["q6_K"]))
        d = d.reshape(rows // GROUP, nb, GROUP, 8).transpose(0, 1, 3, 2)
        out["qs"] = q.reshape(rows // GROUP, nb, GROUP, 8, 32).transpose(0, 1, 3, 2, 4)
        out["d"] = d  # a padded (zero) row requantizes to d = 0, q = 0: what the memset writes
        return out.reshape(-1).view(np.uint8)
    out["d"][..., 0, :] = np.ascontiguousarray(g[..., 0:2]).view("<u2")[..., 0]
    if layout.type == "q8_0":
        out["qs"][..., 0, :, :] = g[..., 2:34].view(np.int8)
    elif layout.type == "q4_0":
        out["qs"][..., 0, :, :] = _pairs(_nibbles(g[..., 2:18]))
    else:
        d = np.ascontiguousarray(g[..., 0:2]).view(np.float16)[..., 0]
        m = np.ascontiguousarray(g[..., 2:4]).view(np.float16)[..., 0]
        out["zp"][..., 0, :] = _zero_points(d, m)
        out["qs"][..., 0, :, :] = _pairs(_nibbles(g[..., 4:20]))
    return out.reshape(-1).view(np.uint8)


def unpack(layout: Layout, raw: np.ndarray, ne0: int, rows: int) -> dict[str, np.ndarray]:
    """A repacked tensor read back per source row (the first ``rows`` rows written), as the GEMM reads it: ``d``
    (fp16 bits) per row and 32-value block, ``q`` (the quants in element order, int64), and q4_1's ``zp``."""
    nb = ne0 // SRC_BLOCK[layout.type] * layout.per_block
    b = np.frombuffer(np.ascontiguousarray(raw, np.uint8).tobytes(), layout.dtype).reshape(-1, nb)
    out: dict[str, np.ndarray] = {"d": b["d"].transpose(0, 2, 1).reshape(-1, nb)[:rows]}
    if layout.type in ("q4_0", "q4_1"):
        qs = b["qs"].astype(np.int64)
        q = np.stack([qs & 15, qs >> 4], axis=-1).reshape(*qs.shape[:-1], 32)  # byte m: elements 2m, 2m + 1
        out["q"] = q.transpose(0, 2, 1, 3).reshape(-1, nb, 32)[:rows]
    else:
        out["q"] = b["qs"].astype(np.int64).transpose(0, 2, 1, 3).reshape(-1, nb, 32)[:rows]
    if layout.type == "q4_1":
        out["zp"] = b["zp"].transpose(0, 2, 1).reshape(-1, nb)[:rows].astype(np.int64)
    return out


LAYOUTS = {x.name: x for x in (
    Layout("q4_0_32x32", "q4_0", 32, pads=False),
    Layout("q4_0_32x256", "q4_0", 256, pads=False),
    Layout("q4_1_32x32", "q4_1", 32, pads=False),
    Layout("q6_K_32x32", "q6_K", 32, pads=True),
    Layout("q8_0_32x32", "q8_0", 32, pads=True),
    Layout("q6_K_32x32_rvv", "q6_K", 32, pads=False),
    Layout("q8_0_32x32_rvv", "q8_0", 32, pads=False),
)}

"""Oracles for ggml's quantized formats: dequantization, dot products and activation quantizers
(NumPy, float64 / exact integers).

Every block format is decoded from its raw bytes (the struct layouts of ``ggml-common.h``) into
an exact representation::

    x_i = scale_i * q_i  +  offset_scale_i * offset_q_i

where ``scale`` / ``offset_scale`` are products of the format's floating-point scales (fp16,
fp32, E8M0, and the exact constants 1/8, 1/4), exact in float64, and ``q`` / ``offset_q`` are
integers (quant values times integer sub-block scales, grid values times signs).  The second
term exists for formats with a per-group offset (the minimums of q4_1, q5_1 and the K-quants,
the deltas of iq1_s / iq1_m); it is kept apart because the kernels compute it apart (through
``bsums`` or q8_1's ``s``), and an error bound must hold for each part separately.

The dot-product oracle built on these decodings is :mod:`oracles.dots`; the activation quantizers
(q8_0, q8_1, q8_K) are :mod:`oracles.q8`.

Tables (IQ grids, sign patterns, non-linear values) come from gguf-py (see ``quant_tables``);
block sizes, byte counts and kinds from the types' records (``quant_types``).  Nothing here
imports the harness.  The public interface, also used by the repack family:

* :data:`FORMATS` / :func:`fmt` -- block size, bytes per block, kind, per type name (every
  record with a decoder); :func:`decoder` registers a decoder;
* :func:`blocks` -- a raw row (``uint8``, any shape) as ``(n_blocks, block_bytes)``;
* :func:`decode` / :func:`dequantize` -- exact decoding / float64 values;
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from . import quant_tables as T
from . import quant_types as QT

QK_K = 256
#: IQ1S_DELTA / IQ1M_DELTA: the grid shift of iq1_s / iq1_m (ggml-common.h), 1/8.
IQ1_DELTA = 0.125

# ------------------------------------------------------------------ decoded rows


@dataclass(frozen=True)
class Decoded:
    """A row decoded exactly: ``x = scale * q + offset_scale * offset_q`` element by element."""

    scale: np.ndarray  # float64 per element, exact
    q: np.ndarray  # int64 per element
    offset_scale: np.ndarray | None = None  # float64 per element (constant over each offset group)
    offset_q: np.ndarray | None = None  # int64 per element (constant over each offset group)
    offset_group: int = 0  # elements sharing one offset
    block_sums: np.ndarray | None = None  # q8_1 only: the stored ``s`` (d * sum(qs)) of each block
    bsums: np.ndarray | None = None  # q8_K only: the stored int16 sums of 16 quants

    @property
    def n(self) -> int:
        return int(self.q.size)

    def values(self) -> np.ndarray:
        """The dequantized row in float64 (each element rounded once, if at all)."""
        v = self.scale * self.q.astype(np.float64)
        if self.offset_scale is not None:
            v = v + self.offset_scale * self.offset_q.astype(np.float64)
        return v


@dataclass(frozen=True)
class Format:
    """One block format: ``block`` elements stored in ``nbytes`` bytes."""

    name: str
    block: int
    nbytes: int
    kind: str  # "weight" or "activation"
    decode_blocks: Callable[[np.ndarray], Decoded]


#: Decoder per type name, filled by :func:`decoder`.
DECODERS: dict[str, Callable[[np.ndarray], Decoded]] = {}


def decoder(name: str) -> Callable[[Callable[[np.ndarray], Decoded]], Callable[[np.ndarray], Decoded]]:
    """Decorator: the decoder of type ``name`` (raw blocks ``(nb, nbytes)`` -> :class:`Decoded`).
    The type's block layout is its record in oracles/quant_types.py."""
    def deco(fn: Callable[[np.ndarray], Decoded]) -> Callable[[np.ndarray], Decoded]:
        if name in DECODERS:
            raise ValueError(f"two decoders for {name!r}")
        DECODERS[name] = fn
        return fn
    return deco


# ------------------------------------------------------------------ byte helpers


def _f16(b: np.ndarray, off: int) -> np.ndarray:
    """The fp16 at byte ``off`` of every block, as float64 (exact)."""
    return np.ascontiguousarray(b[:, off:off + 2]).view("<f2")[:, 0].astype(np.float64)


def _f32(b: np.ndarray, off: int) -> np.ndarray:
    return np.ascontiguousarray(b[:, off:off + 4]).view("<f4")[:, 0].astype(np.float64)


def _u16(b: np.ndarray, off: int, count: int) -> np.ndarray:
    return np.ascontiguousarray(b[:, off:off + 2 * count]).view("<u2").astype(np.int64)


def _u32(b: np.ndarray, off: int, count: int) -> np.ndarray:
    return np.ascontiguousarray(b[:, off:off + 4 * count]).view("<u4").astype(np.int64)


def _i8(b: np.ndarray, off: int, count: int) -> np.ndarray:
    return np.ascontiguousarray(b[:, off:off + count]).view(np.int8).astype(np.int64)


def _u8(b: np.ndarray, off: int, count: int) -> np.ndarray:
    return b[:, off:off + count].astype(np.int64)


def _per_element(per_block: np.ndarray, k: int) -> np.ndarray:
    """A per-block (or per-group, shape ``(nb, g)``) value repeated over its ``k`` elements."""
    return np.repeat(np.asarray(per_block).reshape(-1), k)


def _nibbles16(qs: np.ndarray) -> np.ndarray:
    """16 bytes -> 32 nibbles in ggml's order: the 16 low nibbles, then the 16 high ones."""
    return np.concatenate([qs & 15, qs >> 4], axis=1)


# ------------------------------------------------------------------ legacy 32-element formats


@decoder("q4_0")
def _q4_0(b: np.ndarray) -> Decoded:
    d = _f16(b, 0)
    return Decoded(_per_element(d, 32), (_nibbles16(_u8(b, 2, 16)) - 8).ravel())


@decoder("q4_1")
def _q4_1(b: np.ndarray) -> Decoded:
    d, m = _f16(b, 0), _f16(b, 2)
    q = _nibbles16(_u8(b, 4, 16)).ravel()
    return Decoded(_per_element(d, 32), q, _per_element(m, 32), np.ones_like(q), 32)


def _q5(b: np.ndarray, qh_off: int, qs_off: int) -> np.ndarray:
    """The 5-bit quants (0..31) of q5_0 / q5_1: bit e of the 32-bit ``qh`` is element e's 5th bit."""
    qh = _u32(b, qh_off, 1)
    hb = (qh >> np.arange(32)) & 1
    return (_nibbles16(_u8(b, qs_off, 16)) | (hb << 4)).ravel()


@decoder("q5_0")
def _q5_0(b: np.ndarray) -> Decoded:
    return Decoded(_per_element(_f16(b, 0), 32), _q5(b, 2, 6) - 16)


@decoder("q5_1")
def _q5_1(b: np.ndarray) -> Decoded:
    q = _q5(b, 4, 8)
    return Decoded(_per_element(_f16(b, 0), 32), q, _per_element(_f16(b, 2), 32), np.ones_like(q), 32)


@decoder("q8_0")
def _q8_0(b: np.ndarray) -> Decoded:
    return Decoded(_per_element(_f16(b, 0), 32), _i8(b, 2, 32).ravel())


@decoder("q8_1")
def _q8_1(b: np.ndarray) -> Decoded:
    return Decoded(_per_element(_f16(b, 0), 32), _i8(b, 4, 32).ravel(), block_sums=_f16(b, 2))


@decoder("q1_0")
def _q1_0(b: np.ndarray) -> Decoded:
    bits = (_u8(b, 2, 16)[:, :, None] >> np.arange(8)) & 1  # element 8 * byte + bit
    return Decoded(_per_element(_f16(b, 0), 128), (2 * bits - 1).ravel())


@decoder("mxfp4")
def _mxfp4(b: np.ndarray) -> Decoded:
    # GGML_E8M0_TO_FP32_HALF(e) = 2^(e - 128) for every e (ggml gives 0xFF no NaN meaning).
    scale = np.ldexp(1.0, _u8(b, 0, 1)[:, 0] - 128)
    q = T.kvalues_mxfp4()[_nibbles16(_u8(b, 1, 16))]
    return Decoded(_per_element(scale, 32), q.ravel())


@decoder("iq4_nl")
def _iq4_nl(b: np.ndarray) -> Decoded:
    return Decoded(_per_element(_f16(b, 0), 32), T.kvalues_iq4nl()[_nibbles16(_u8(b, 2, 16))].ravel())


# ------------------------------------------------------------------ K-quants (256 elements)

_E = np.arange(QK_K)


@decoder("q2_K")
def _q2_K(b: np.ndarray) -> Decoded:
    sc, qs = _u8(b, 0, 16), _u8(b, 16, 64)
    d, dmin = _f16(b, 80), _f16(b, 82)
    k, j, l = _E // 128, (_E % 128) // 32, _E % 32
    q = (qs[:, 32 * k + l] >> (2 * j)) & 3
    s = sc[:, _E // 16]
    return Decoded(_per_element(d, QK_K), ((s & 15) * q).ravel(),
                   _per_element(dmin, QK_K), (-(s >> 4)).ravel(), 16)


def _scales_q3_K(raw: np.ndarray) -> np.ndarray:
    """The 16 6-bit scales of q3_K (0..63, before the -32), unpacked from 12 bytes."""
    i = np.arange(16)
    low = (raw[:, i % 8] >> (4 * (i // 8))) & 15
    high = (raw[:, 8 + i % 4] >> (2 * (i // 4))) & 3
    return low | (high << 4)


@decoder("q3_K")
def _q3_K(b: np.ndarray) -> Decoded:
    hmask, qs, sc = _u8(b, 0, 32), _u8(b, 32, 64), _scales_q3_K(_u8(b, 96, 12))
    k, j, l = _E // 128, (_E % 128) // 32, _E % 32
    q = (qs[:, 32 * k + l] >> (2 * j)) & 3
    q = q - 4 * (((hmask[:, l] >> (4 * k + j)) & 1) == 0)
    return Decoded(_per_element(_f16(b, 108), QK_K), ((sc[:, _E // 16] - 32) * q).ravel())


def _scale_min_k4(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """get_scale_min_k4 for the 8 sub-blocks: 6-bit scales and mins packed in 12 bytes."""
    j = np.arange(8)
    lo = j < 4
    jj = np.where(lo, j, j - 4)
    sc = np.where(lo, raw[:, jj] & 63, (raw[:, jj + 8] & 15) | ((raw[:, jj] >> 6) << 4))
    mn = np.where(lo, raw[:, jj + 4] & 63, (raw[:, jj + 8] >> 4) | ((raw[:, jj + 4] >> 6) << 4))
    return sc, mn


def _q45_K(b: np.ndarray, qh_off: int | None, qs_off: int) -> Decoded:
    d, dmin = _f16(b, 0), _f16(b, 2)
    sc, mn = _scale_min_k4(_u8(b, 4, 12))
    qs = _u8(b, qs_off, 128)
    j, l = _E // 64, _E % 64
    q = (qs[:, 32 * j + l % 32] >> (4 * (l // 32))) & 15
    if qh_off is not None:
        qh = _u8(b, qh_off, 32)
        q = q + 16 * ((qh[:, l % 32] >> (2 * j + l // 32)) & 1)
    sb = _E // 32
    return Decoded(_per_element(d, QK_K), (sc[:, sb] * q).ravel(),
                   _per_element(dmin, QK_K), (-mn[:, sb]).ravel(), 32)


@decoder("q4_K")
def _q4_K(b: np.ndarray) -> Decoded:
    return _q45_K(b, None, 16)


@decoder("q5_K")
def _q5_K(b: np.ndarray) -> Decoded:
    return _q45_K(b, 16, 48)


@decoder("q6_K")
def _q6_K(b: np.ndarray) -> Decoded:
    ql, qh, sc = _u8(b, 0, 128), _u8(b, 128, 64), _i8(b, 192, 16)
    h, r = _E // 128, _E % 128
    quarter, l = r // 32, r % 32
    low = (ql[:, 64 * h + l + 32 * (quarter % 2)] >> (4 * (quarter // 2))) & 15
    high = (qh[:, 32 * h + l] >> (2 * quarter)) & 3
    q = (low | (high << 4)) - 32
    return Decoded(_per_element(_f16(b, 208), QK_K), (sc[:, _E // 16] * q).ravel())


@decoder("q8_K")
def _q8_K(b: np.ndarray) -> Decoded:
    return Decoded(_per_element(_f32(b, 0), QK_K), _i8(b, 4, QK_K).ravel(),
                   bsums=np.ascontiguousarray(b[:, 260:292]).view("<i2").astype(np.int64))


# ------------------------------------------------------------------ ternary


@decoder("tq1_0")
def _tq1_0(b: np.ndarray) -> Decoded:
    qs, qh = _u8(b, 0, 48), _u8(b, 48, 4)
    pow3 = np.array([1, 3, 9, 27, 81, 243], np.int64)

    def trits(byte: np.ndarray, l: int) -> np.ndarray:  # digit l of a base-3 fixed-point byte
        return ((((byte * pow3[l]) & 255) * 3) >> 8) - 1

    out = np.empty((b.shape[0], QK_K), np.int64)
    for l in range(5):
        out[:, 32 * l:32 * l + 32] = trits(qs[:, :32], l)  # elements 0..159
        out[:, 160 + 16 * l:176 + 16 * l] = trits(qs[:, 32:48], l)  # elements 160..239
    for l in range(4):
        out[:, 240 + 4 * l:244 + 4 * l] = trits(qh, l)  # elements 240..255
    return Decoded(_per_element(_f16(b, 52), QK_K), out.ravel())


@decoder("tq2_0")
def _tq2_0(b: np.ndarray) -> Decoded:
    qs = _u8(b, 0, 64)
    half, l, k = _E // 128, (_E % 128) // 32, _E % 32
    q = ((qs[:, 32 * half + k] >> (2 * l)) & 3) - 1
    return Decoded(_per_element(_f16(b, 64), QK_K), q.ravel())


# ------------------------------------------------------------------ IQ formats


def _grid_rows(name: str, idx: np.ndarray) -> np.ndarray:
    """Grid entries for an index array of shape (nb, k): shape (nb, k * width)."""
    g = T.grid(name)[idx]
    return g.reshape(idx.shape[0], -1)


def _signs(sign_bytes: np.ndarray) -> np.ndarray:
    return T.sign_bits(sign_bytes).reshape(sign_bytes.shape[0], -1)


@decoder("iq2_xxs")
def _iq2_xxs(b: np.ndarray) -> Decoded:
    raw = _u8(b, 2, 64).reshape(-1, 8, 8)  # 8 sub-blocks: 4 grid indices, then a uint32 of signs + scale
    aux1 = _u32(b, 2, 16).reshape(-1, 8, 2)[:, :, 1]
    ls = 2 * (aux1 >> 28) + 1
    sign_idx = (aux1[:, :, None] >> (7 * np.arange(4))) & 127
    grid = _grid_rows("iq2xxs_grid", raw[:, :, :4].reshape(-1, 32))
    signs = _signs(T.ksigns_iq2xs()[sign_idx].reshape(-1, 32))
    q = grid * signs * _per_element(ls, 32).reshape(-1, QK_K)
    return Decoded(_per_element(_f16(b, 0) / 8, QK_K), q.ravel())


@decoder("iq2_xs")
def _iq2_xs(b: np.ndarray) -> Decoded:
    q2 = _u16(b, 2, 32)  # 9-bit grid index, 7 sign bits
    sc = _u8(b, 66, 8)
    grid = _grid_rows("iq2xs_grid", q2 & 511)
    signs = _signs(T.ksigns_iq2xs()[q2 >> 9])
    ls = 2 * np.stack([sc & 15, sc >> 4], axis=2) + 1  # (nb, 8, 2): groups of 16
    q = grid * signs * _per_element(ls, 16).reshape(-1, QK_K)
    return Decoded(_per_element(_f16(b, 0) / 8, QK_K), q.ravel())


@decoder("iq2_s")
def _iq2_s(b: np.ndarray) -> Decoded:
    qs, sg, qh, sc = _u8(b, 2, 32), _u8(b, 34, 32), _u8(b, 66, 8), _u8(b, 74, 8)
    l = np.arange(32) % 4
    idx = qs | ((qh[:, np.arange(32) // 4] << (8 - 2 * l)) & 0x300)
    grid = _grid_rows("iq2s_grid", idx)
    ls = 2 * np.stack([sc & 15, sc >> 4], axis=2) + 1
    q = grid * _signs(sg) * _per_element(ls, 16).reshape(-1, QK_K)
    return Decoded(_per_element(_f16(b, 0) / 8, QK_K), q.ravel())


@decoder("iq3_xxs")
def _iq3_xxs(b: np.ndarray) -> Decoded:
    q3 = _u8(b, 2, 64)
    aux = _u32(b, 66, 8)
    ls = 2 * (aux >> 28) + 1
    sign_idx = (aux[:, :, None] >> (7 * np.arange(4))) & 127
    grid = _grid_rows("iq3xxs_grid", q3)  # 64 entries of 4
    signs = _signs(T.ksigns_iq2xs()[sign_idx].reshape(-1, 32))
    q = grid * signs * _per_element(ls, 32).reshape(-1, QK_K)
    return Decoded(_per_element(_f16(b, 0) / 4, QK_K), q.ravel())


@decoder("iq3_s")
def _iq3_s(b: np.ndarray) -> Decoded:
    qs, qh, sg, sc = _u8(b, 2, 64), _u8(b, 66, 8), _u8(b, 74, 32), _u8(b, 106, 4)
    i = np.arange(64)  # grid entry i: sub-block i // 8, position i % 8 (l = (i % 8) // 2)
    sub, pos = i // 8, i % 8
    shift = 8 - pos  # (8 - 2l) for even entries, (7 - 2l) for odd ones
    idx = qs | ((qh[:, sub] << shift) & 256)
    grid = _grid_rows("iq3s_grid", idx)
    ls = 2 * np.stack([sc & 15, sc >> 4], axis=2) + 1  # (nb, 4, 2): sub-blocks of 32
    q = grid * _signs(sg) * _per_element(ls, 32).reshape(-1, QK_K)
    return Decoded(_per_element(_f16(b, 0), QK_K), q.ravel())


@decoder("iq1_s")
def _iq1_s(b: np.ndarray) -> Decoded:
    qs, qh = _u8(b, 2, 32), _u16(b, 34, 8)
    l = np.arange(32) % 4
    idx = qs | (((qh[:, np.arange(32) // 4] >> (3 * l)) & 7) << 8)
    grid = _grid_rows("iq1s_grid", idx)
    ls = 2 * ((qh >> 12) & 7) + 1
    delta = np.where(qh & 0x8000, -1, 1)
    d = _per_element(_f16(b, 0), QK_K)
    return Decoded(d, (grid * _per_element(ls, 32).reshape(-1, QK_K)).ravel(),
                   d * IQ1_DELTA, _per_element(ls * delta, 32), 32)


def iq1_m_scale_bits(b: np.ndarray) -> np.ndarray:
    """The fp16 bits of iq1_m's block scale, spread over the top nibbles of its 4 uint16 scales."""
    sc = _u16(b, 48, 4)
    return (sc[:, 0] >> 12) | ((sc[:, 1] >> 8) & 0xF0) | ((sc[:, 2] >> 4) & 0xF00) | (sc[:, 3] & 0xF000)


@decoder("iq1_m")
def _iq1_m(b: np.ndarray) -> Decoded:
    qs, qh, sc = _u8(b, 0, 32), _u8(b, 32, 16), _u16(b, 48, 4)
    i = np.arange(32)  # grid entry: sub-block ib = i // 4, l = i % 4, qh byte 2 ib + l // 2
    l = i % 4
    h = qh[:, 2 * (i // 4) + l // 2]
    idx = qs | ((h << (8 - 4 * (l % 2))) & 0x700)
    grid = _grid_rows("iq1s_grid", idx)
    delta = np.where(h & np.where(l % 2 == 0, 0x08, 0x80), -1, 1)  # one per 8 elements
    ib = i // 4
    shift = 6 * (ib % 2) + 3 * (l // 2)
    ls = 2 * ((sc[:, ib // 2] >> shift) & 7) + 1  # per 8 elements
    d = np.asarray(iq1_m_scale_bits(b), np.uint16).view(np.float16).astype(np.float64)
    dd = _per_element(d, QK_K)
    return Decoded(dd, (grid * _per_element(ls, 8).reshape(-1, QK_K)).ravel(),
                   dd * IQ1_DELTA, _per_element(ls * delta, 8), 8)


@decoder("iq4_xs")
def _iq4_xs(b: np.ndarray) -> Decoded:
    sh, sl, qs = _u16(b, 2, 1)[:, 0], _u8(b, 4, 4), _u8(b, 8, 128)
    ib = np.arange(8)
    ls = ((sl[:, ib // 2] >> (4 * (ib % 2))) & 15) | (((sh[:, None] >> (2 * ib)) & 3) << 4)
    nib = np.concatenate([_nibbles16(qs[:, 16 * k:16 * k + 16]) for k in range(8)], axis=1)
    q = T.kvalues_iq4nl()[nib] * _per_element(ls - 32, 32).reshape(-1, QK_K)
    return Decoded(_per_element(_f16(b, 0), QK_K), q.ravel())


# ------------------------------------------------------------------ the table

#: One Format per record of oracles/quant_types.py that has a decoder, in the records' order.
FORMATS: dict[str, Format] = {r.name: Format(r.name, r.block, r.nbytes, r.kind, DECODERS[r.name])
                              for r in QT.RECORDS if r.name in DECODERS}


def fmt(name: str) -> Format:
    """The format called ``name`` (ggml's type name); a clear error for an unknown one."""
    try:
        return FORMATS[name]
    except KeyError:
        where = ("add its decoder to oracles/quants.py (@decoder)" if name in QT.BY_NAME else
                 "add its record to oracles/quant_types.py and its decoder to oracles/quants.py")
        raise KeyError(f"no oracle for quantization type {name!r} ({where}); known: {', '.join(FORMATS)}") from None


def block_size(name: str) -> int:
    """Elements per block of ``name``."""
    return fmt(name).block


def block_bytes(name: str) -> int:
    """Bytes per block of ``name``."""
    return fmt(name).nbytes


def row_bytes(name: str, n: int) -> int:
    """Bytes of a row of ``n`` elements of ``name`` (``n`` a multiple of the block size)."""
    f = fmt(name)
    if n % f.block:
        raise ValueError(f"{name}: n={n} is not a multiple of the block size {f.block}")
    return n // f.block * f.nbytes


def blocks(name: str, raw: np.ndarray | bytes) -> np.ndarray:
    """A raw row of ``name`` as a ``(n_blocks, block_bytes)`` uint8 array."""
    f = fmt(name)
    a = np.frombuffer(raw, np.uint8) if isinstance(raw, (bytes, bytearray)) else np.asarray(raw)
    if a.dtype != np.uint8:
        raise TypeError(f"{name}: raw blocks must be uint8, got {a.dtype}")
    if a.size % f.nbytes:
        raise ValueError(f"{name}: {a.size} bytes is not a whole number of {f.nbytes}-byte blocks")
    return a.reshape(-1, f.nbytes)


def decode(name: str, raw: np.ndarray | bytes) -> Decoded:
    """The exact decomposition of a raw row of ``name``."""
    return fmt(name).decode_blocks(blocks(name, raw))


def dequantize(name: str, raw: np.ndarray | bytes) -> np.ndarray:
    """The values of a raw row of ``name`` as float64 (what ``dequantize_row_<name>`` means)."""
    return decode(name, raw).values()

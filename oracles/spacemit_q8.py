"""SpacemiT's activation formats (ggml-cpu/spacemit/rvv_kernels.h) and what its quantizers write into them.

The backend's IME GEMMs read activations quantized by ``quantize_a_{row,4row}_{i8,i8_hp,i8k}`` into three block
formats, one group of ``rows`` (1 or 4) rows per block of K, groups one after another along K:

``i8`` (``q8_blk_size(32, true)`` = 38 bytes a row)
    ``[f32 scale x rows] [int16 -sum x rows] [int8 x 32 x rows]``: per row and block of 32.
``hp`` (``q8_hp_blk_size(256, true, true)`` = 290 bytes a row)
    per block of 256, eight sub-blocks of 32, each ``[fp16 ratio x rows] [int8 x 32 x rows]``, then
    ``[fp16 -8 sum x rows x 8]`` and ``[fp16 average scale x rows]``.  The rows of a group share one step per
    sub-block (the largest magnitude over all of them); only the first ratio and the first average slot are
    written (the GEMM reads those), the other ``rows - 1`` slots are holes.  A sub-block's step is
    ``ratio * average``.
``i8k`` (``q8k_blk_size(256)`` = 292 bytes a row)
    ``[f32 scale x rows] [int16 -sum x 16 x rows] [int8 x 256 x rows]``: one scale per row and block of 256,
    a sum per 16 values.

Two implementations write them, chosen by ``__riscv_vlenb()``: the RVV paths (VLEN 256 and 1024) and the
``quantize_a_nrow_*_ref`` loops (every other VLEN).  They differ in the scale of ``i8`` and ``i8k``:

* RVV: ``scale = amax / 127``, ``rep = scale ? 1 / scale : 0``; values ``vfncvt`` to int16 (nearest, ties to even,
  saturating) then ``vncvt`` to int8 (the low byte).
* ``_ref``: ``rep = 127 / amax``, ``scale = 1 / rep``; values ``nearbyintf`` (ties to even) clamped to [-128, 127].

``hp``'s two paths compute alike.  An all-zero block (or sub-block) has one right answer, the RVV paths' (scale or
ratio 0, int8s 0, sums 0): that is what :func:`quantize` gives on both paths; the ``_ref`` loops divide by zero
there (docs/spacemit.md).  Every operation is float32 (or fp16 where the format stores fp16), each correctly
rounded, as NumPy's float32 / float16 arithmetic is: the oracle is exact, byte for byte.

:func:`promise` is the format's contract checked from the input alone, whatever the path: quantized values within
half a step of ``x / step`` (``step = amax / 127``), the stored sums equal to the int8s' sums, the stored scales
within their rounding of the step.  Nothing here imports the harness.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

PATHS = ("rvv", "ref")
SUB = 32  # hp's sub-block
GROUP = 16  # i8k's sum group


@dataclass(frozen=True)
class Format:
    """One activation format: its block length along K and its bytes per row and block."""

    name: str
    blk_len: int
    row_bytes: int  # q8_blk_size / q8_hp_blk_size / q8k_blk_size of rvv_kernels.h

    def dtype(self, rows: int) -> np.dtype:
        """The layout of one group (``rows`` rows, one block of K) as a packed structured dtype."""
        if self.name == "i8":
            return np.dtype([("scale", "<f4", (rows,)), ("sum", "<i2", (rows,)), ("q", "i1", (rows, self.blk_len))])
        if self.name == "hp":
            sub = np.dtype([("ratio", "<f2", (rows,)), ("q", "i1", (rows, SUB))])
            n = self.blk_len // SUB
            return np.dtype([("sub", sub, (n,)), ("sum", "<f2", (rows, n)), ("avg", "<f2", (rows,))])
        return np.dtype([("scale", "<f4", (rows,)), ("sum", "<i2", (rows, self.blk_len // GROUP)),
                         ("q", "i1", (rows, self.blk_len))])


FORMATS = {f.name: f for f in (Format("i8", 32, 4 + 2 + 32), Format("hp", 256, 256 + 8 * 2 + 8 * 2 + 2),
                               Format("i8k", 256, 4 + 2 * 16 + 256))}


def nbytes(fmt: str, rows: int, count_k: int) -> int:
    """Bytes the quantizer writes for ``rows`` rows of ``count_k`` values."""
    f = FORMATS[fmt]
    return rows * (count_k // f.blk_len) * f.row_bytes


def _fncvt_i8(v: np.ndarray) -> np.ndarray:
    """RVV's ``vfncvt.x.f.w`` to int16 (nearest even, saturating, NaN -> 32767), then ``vncvt`` to int8 (low byte)."""
    with np.errstate(invalid="ignore"):
        r = np.clip(np.rint(np.nan_to_num(v.astype(np.float64), nan=32767.0)), -32768, 32767)
    return r.astype(np.int64).astype(np.int16).astype(np.int8)


def _clamp_i8(v: np.ndarray) -> np.ndarray:
    """``_ref``'s ``(int8_t) clamp(nearbyintf(v), -128, 127)`` (NaN, undefined in C, taken as 0)."""
    with np.errstate(invalid="ignore"):
        return np.clip(np.rint(np.nan_to_num(v.astype(np.float64), nan=0.0)), -128, 127).astype(np.int8)


def _scales(amax: np.ndarray, path: str) -> tuple[np.ndarray, np.ndarray]:
    """(scale, rep) of i8 / i8k per block, float32, on ``path``; (0, 0) for an all-zero block."""
    amax = amax.astype(np.float32)
    zero = amax == 0
    with np.errstate(divide="ignore", over="ignore"):
        if path == "rvv":
            scale = (amax / np.float32(127)).astype(np.float32)
            rep = np.where(scale != 0, np.float32(1) / np.where(scale != 0, scale, 1), 0).astype(np.float32)
        elif path == "ref":
            rep = np.where(zero, 0, np.float32(127) / np.where(zero, 1, amax)).astype(np.float32)
            scale = np.where(zero, 0, np.float32(1) / np.where(zero, 1, rep)).astype(np.float32)
        else:
            raise ValueError(f"path must be one of {PATHS}, got {path!r}")
    return scale, rep


def _int16(v: np.ndarray) -> np.ndarray:
    return v.astype(np.int64).astype(np.int16)  # wraps as C's int16_t does


def quantize(fmt: str, a: np.ndarray, path: str) -> np.ndarray:
    """What ``quantize_a_{row,4row}_<fmt>`` writes for ``a`` (rows x count_k float32; rows 1 or 4) on ``path``: one
    structured element of :meth:`Format.dtype` per block of K (holes zero)."""
    f = FORMATS[fmt]
    a = np.asarray(a, np.float32)
    rows, k = a.shape
    if k % f.blk_len:
        raise ValueError(f"quantize: count_k={k} is not a multiple of {f.blk_len}")
    nb = k // f.blk_len
    out = np.zeros(nb, f.dtype(rows))
    blocks = a.reshape(rows, nb, f.blk_len).transpose(1, 0, 2)  # (nb, rows, blk_len)
    with np.errstate(over="ignore", invalid="ignore"):
        if fmt == "hp":
            n = f.blk_len // SUB
            sub = blocks.reshape(nb, rows, n, SUB)
            st = (np.abs(sub).max(axis=(1, 3)) / np.float32(127)).astype(np.float32)  # (nb, n): shared by the rows
            avg = np.zeros(nb, np.float32)
            for kk in range(n):  # the kernels' order of additions
                avg = (avg + st[:, kk]).astype(np.float32)
            avg = (avg / np.float32(n)).astype(np.float32)
            sf = np.where(avg != 0, np.float32(1) / np.where(avg != 0, avg, 1), 0).astype(np.float32)
            rep = np.where(st != 0, np.float32(1) / np.where(st != 0, st, 1), 0).astype(np.float32)
            q = _fncvt_i8((sub * rep[:, None, :, None]).astype(np.float32))  # (nb, rows, n, SUB)
            out["sub"]["ratio"][:, :, 0] = (st * sf[:, None]).astype(np.float32).astype(np.float16)
            out["sub"]["q"] = q.transpose(0, 2, 1, 3)
            s = -q.astype(np.int64).sum(axis=3)  # (nb, rows, n); |s| <= 4096: an int16 holds it
            out["sum"] = s.astype(np.float16) * np.float16(8)
            out["avg"][:, 0] = avg.astype(np.float16)
            return out
        amax = np.abs(blocks).max(axis=2)  # (nb, rows)
        scale, rep = _scales(amax, path)
        v = (blocks * rep[:, :, None]).astype(np.float32)
        q = _fncvt_i8(v) if path == "rvv" else _clamp_i8(v)
        out["scale"] = scale
        out["q"] = q
        if fmt == "i8":
            out["sum"] = _int16(-q.astype(np.int64).sum(axis=2))
        else:
            out["sum"] = _int16(-q.astype(np.int64).reshape(nb, rows, -1, GROUP).sum(axis=3))
    return out


def decode(fmt: str, rows: int, raw: np.ndarray) -> np.ndarray:
    """A quantizer's output bytes as structured elements of :meth:`Format.dtype`."""
    return np.frombuffer(np.ascontiguousarray(raw, np.uint8).tobytes(), FORMATS[fmt].dtype(rows))


def fields(fmt: str, blocks: np.ndarray) -> dict[str, np.ndarray]:
    """The written fields of decoded blocks, by name (``hp``: ratio and avg without their holes)."""
    if fmt == "hp":
        return {"ratio": blocks["sub"]["ratio"][:, :, 0], "q": blocks["sub"]["q"], "sum": blocks["sum"],
                "avg": blocks["avg"][:, 0]}
    return {name: blocks[name] for name in ("scale", "sum", "q")}


# ------------------------------------------------------------------ the format's promise, from the input alone

#: |q - x / step| <= 1/2 + QUANT_SLACK: RVV rounds amax / 127, 1 / scale and x * rep (three roundings of relative
#: error <= u = 2^-24), _ref 127 / amax and x * rep; |x / step| <= 127, so x * rep is within 127 * 3u (1 + u)^2 <
#: 2^-15 of x / step.
QUANT_SLACK = 2.0 ** -15
#: An i8 / i8k scale is step (float64) rounded once (RVV: amax / 127) or twice (_ref: 127 / amax, then 1 / rep).
SCALE_REL = 2.0 ** -22


@dataclass(frozen=True)
class Promise:
    """What the format promises for one input, from the input alone: per field, (stored, exact, bound)."""

    checks: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]


def steps(fmt: str, a: np.ndarray) -> np.ndarray:
    """``amax / 127`` in float64 for every (block, row) (``hp``: every (block, sub-block), the rows' shared one)."""
    f = FORMATS[fmt]
    rows, k = a.shape
    blocks = np.asarray(a, np.float64).reshape(rows, k // f.blk_len, f.blk_len).transpose(1, 0, 2)
    if fmt == "hp":
        return np.abs(blocks.reshape(blocks.shape[0], rows, -1, SUB)).max(axis=(1, 3)) / 127
    return np.abs(blocks).max(axis=2) / 127


def promise(fmt: str, a: np.ndarray, got: np.ndarray) -> Promise:
    """The format's contract for input ``a`` held against decoded output ``got``:

    * ``q``: each int8 within 1/2 + :data:`QUANT_SLACK` of ``x / step`` (0 where the step is 0), so the value it
      stands for is within half a step of ``x``;
    * ``sum``: the negated sum of the int8s (i8: per block, i8k: per 16), exactly; ``hp`` stores ``-8 sum`` in fp16,
      exact up to |sum| = 2048 and within half an fp16 ulp of it beyond;
    * ``scale`` (i8, i8k): ``step`` within :data:`SCALE_REL`; ``hp``: ``ratio * avg`` is the sub-block's step within
      the fp16 roundings of both (relative 2^-11 each while normal, 2^-25 absolute each below 2^-14) and three
      float32 ones, and ``avg`` the mean step within its fp16 rounding and eight float32 additions.
    """
    f = FORMATS[fmt]
    a = np.asarray(a, np.float64)
    rows, k = a.shape
    nb = k // f.blk_len
    g = fields(fmt, got)
    st = steps(fmt, a)
    checks: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    blocks = a.reshape(rows, nb, f.blk_len).transpose(1, 0, 2)
    if fmt == "hp":
        x = blocks.reshape(nb, rows, -1, SUB).transpose(0, 2, 1, 3)  # (nb, sub, rows, SUB), as g["q"]
        s = st[:, :, None, None]
    else:
        x, s = blocks, st[:, :, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        exact_q = np.where(s > 0, x / np.where(s > 0, s, 1), 0)
    checks["q"] = (g["q"], exact_q, np.where(np.broadcast_to(s, x.shape) > 0, 0.5 + QUANT_SLACK, 0.0))
    q = g["q"].astype(np.int64)
    if fmt == "i8":
        checks["sum"] = (g["sum"], -q.sum(axis=2), np.zeros(g["sum"].shape))
        checks["scale"] = (g["scale"], st, SCALE_REL * st)
    elif fmt == "i8k":
        s16 = -q.reshape(nb, rows, -1, GROUP).sum(axis=3)
        checks["sum"] = (g["sum"], s16, np.zeros(s16.shape))
        checks["scale"] = (g["scale"], st, SCALE_REL * st)
    else:
        s8 = -8 * q.sum(axis=3).transpose(0, 2, 1)  # (nb, rows, sub), as g["sum"]
        ulp = np.where(np.abs(s8) > 8 * 2048, 8 * 2.0 ** (np.floor(np.log2(np.maximum(np.abs(s8), 1) / 8)) - 10), 0)
        checks["sum"] = (g["sum"], s8, ulp / 2)
        ratio = g["ratio"].astype(np.float64)
        avg = g["avg"].astype(np.float64)
        step = ratio * avg[:, None]
        checks["step"] = (step, st, st * (2.0 ** -10 + 2.0 ** -21) + 2.0 ** -25 * (avg[:, None] + ratio) + 2.0 ** -50)
        mean = st.mean(axis=1)
        checks["avg"] = (g["avg"], mean, mean * (2.0 ** -11 + 2.0 ** -20) + 2.0 ** -25)
    return Promise(checks)

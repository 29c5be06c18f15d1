"""Quantized blocks and rows drawn as raw bytes, from each type's record (oracles/quant_types.py).

A row is a ``(n_blocks, block_bytes)`` uint8 array.  Its bytes come in three roles:

* **float scales** (``d``, ``dmin``, ``m``; q8_K's fp32 ``d``; mxfp4's E8M0 exponent; iq1_m's
  fp16 spread over four nibbles): drawn per block from classes -- ordinary values, zero,
  negative, subnormal, the largest finite fp16, powers of two;
* **integer sub-scales** (the packed 4/6/8-bit scales of K-quants and IQ types): random, or all
  at an extreme (all bits set, all clear, alternating, int8's -128 / 127);
* **payload** (quants, grid indices, signs): random, or constant fills that maximise magnitudes.

Activation rows (q8_0 / q8_1 / q8_K) are made consistent: q8_1's ``s`` is ``d * sum(qs)``
rounded to fp16 and q8_K's ``bsums`` are the sums of its ``qs``, as every quantizer makes them.
They can also be produced by quantizing float data (the reference quantizers of ``oracles.q8``).

The byte offsets of the float scales and sub-scales come from the roles of the record's fields
(:data:`LAYOUTS`); what is left per type is the grid-sweep encoder of each IQ type (the inverse of
its decoder, :func:`grid_sweep_row`).  Rows are pairs of these in cases/quant_strategies.py."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np
from hypothesis import strategies as st

from oracles import q8 as Q8
from oracles import quant_tables as T
from oracles import quant_types as QT
from oracles import quants as Q


@dataclass(frozen=True)
class Layout:
    """Where a block keeps its float scales and its integer sub-scales; the rest is payload."""

    fp16: tuple[int, ...] = ()  # byte offsets of fp16 scales
    fp32: tuple[int, ...] = ()  # byte offsets of fp32 scales (q8_K's d)
    e8m0: tuple[int, ...] = ()  # byte offsets of E8M0 exponents (mxfp4)
    subscales: tuple[int, int] | None = None  # [start, end) of packed integer sub-scales
    iq1_m_scale: bool = False  # iq1_m: the fp16 lives in the top nibbles of the scales


    @classmethod
    def of(cls, r: QT.QuantType) -> Layout:
        """The layout a type's record (oracles/quant_types.py) declares: its fields' roles."""
        return cls(fp16=r.offsets("fp16"), fp32=r.offsets("fp32"), e8m0=r.offsets("e8m0"),
                   subscales=r.span("sub", "sub+fp16"), iq1_m_scale=bool(r.offsets("sub+fp16")))


#: The roles of oracles/quant_types.py whose bytes these strategies write (Layout.of, weight_row,
#: exact_pair, write_quants); a record with another role needs a drawer here first.
ROLES = ("fp16", "fp32", "e8m0", "sub", "sub+fp16", "payload", "int8", "int16")


#: Per type, from its record (iq2_xxs's 4-bit scales share uint32s with the signs: payload).
LAYOUTS: dict[str, Layout] = {r.name: Layout.of(r) for r in QT.RECORDS}


#: Classes of floating-point scale values.
_F16_MAX = 0x7BFF  # 65504

E8M0_EDGES = (0, 1, 2, 126, 127, 128, 129, 253, 254, 255)

SCALE_CLASSES = ("normal", "negative", "zero", "subnormal", "max", "pow2")


def _fp16_scales(rng: np.random.Generator, classes: Sequence[str], k: int) -> np.ndarray:
    """``k`` fp16 scales as bits, each from one of ``classes``."""
    pick = rng.integers(0, len(classes), k)
    out = np.empty(k, np.uint16)
    for ci, cls in enumerate(classes):
        m = pick == ci
        c = int(m.sum())
        if cls in ("normal", "negative"):
            v = np.exp2(rng.uniform(-12, 4, c)) * (1 + rng.random(c))
            v = v * (np.where(rng.random(c) < 0.5, -1, 1) if cls == "normal" else -1)
            bits = v.astype(np.float16).view(np.uint16)
        elif cls == "zero":
            bits = np.where(rng.random(c) < 0.5, 0x0000, 0x8000).astype(np.uint16)
        elif cls == "subnormal":
            bits = rng.integers(1, 0x400, c).astype(np.uint16) | np.where(rng.random(c) < 0.5, 0, 0x8000).astype(np.uint16)
        elif cls == "max":
            bits = np.where(rng.random(c) < 0.5, _F16_MAX, _F16_MAX | 0x8000).astype(np.uint16)
        elif cls == "pow2":
            v = np.exp2(rng.integers(-8, 9, c).astype(np.float64)) * np.where(rng.random(c) < 0.5, -1, 1)
            bits = v.astype(np.float16).view(np.uint16)
        else:
            raise ValueError(f"unknown scale class {cls!r}; expected one of {SCALE_CLASSES}")
        out[m] = bits
    return out


def _fp32_scales(rng: np.random.Generator, classes: Sequence[str], k: int) -> np.ndarray:
    """q8_K's fp32 ``d``: the same classes in fp32 terms (``max``: 2^20, still safe to multiply)."""
    pick = rng.integers(0, len(classes), k)
    out = np.empty(k, np.float32)
    for ci, cls in enumerate(classes):
        m = pick == ci
        c = int(m.sum())
        sign = np.where(rng.random(c) < 0.5, -1.0, 1.0)
        if cls in ("normal", "negative"):
            v = np.exp2(rng.uniform(-20, 2, c)) * (1 + rng.random(c)) * (sign if cls == "normal" else -1.0)
        elif cls == "zero":
            v = 0.0 * sign
        elif cls == "subnormal":
            v = (rng.integers(1, 1 << 23, c).astype(np.uint32).view(np.float32)).astype(np.float64) * sign
        elif cls == "max":
            v = 2.0 ** 20 * sign
        elif cls == "pow2":
            v = np.exp2(rng.integers(-8, 9, c).astype(np.float64)) * sign
        else:
            raise ValueError(f"unknown scale class {cls!r}; expected one of {SCALE_CLASSES}")
        out[m] = np.asarray(v, np.float32)
    return out


def _e8m0(rng: np.random.Generator, classes: Sequence[str], k: int) -> np.ndarray:
    """E8M0 exponents: ``pow2`` / ``normal`` near 2^0, the rest from the edges of the range."""
    near = rng.integers(112, 140, k)
    edges = np.array(E8M0_EDGES)[rng.integers(0, len(E8M0_EDGES), k)]
    use_edges = np.isin(rng.integers(0, len(classes), k), [i for i, c in enumerate(classes) if c not in ("normal", "pow2")])
    return np.where(use_edges, edges, near).astype(np.uint8)


SUBSCALE_MODES = ("random", "ones", "zeros", "alternate", "int8_extremes")


PAYLOAD_MODES = ("random", "random", "random", "ones", "zeros", "fill")  # random weighted


def _fill(rng: np.random.Generator, mode: str, shape: tuple[int, ...]) -> np.ndarray:
    if mode == "random":
        return rng.integers(0, 256, shape, dtype=np.uint8)
    if mode == "ones":
        return np.full(shape, 0xFF, np.uint8)
    if mode == "zeros":
        return np.zeros(shape, np.uint8)
    if mode == "alternate":
        return np.resize(np.array([0x00, 0xFF], np.uint8), shape)
    if mode == "int8_extremes":
        return np.resize(np.array([0x80, 0x7F], np.uint8), shape)
    if mode == "fill":
        return np.full(shape, int(rng.integers(0, 256)), np.uint8)
    raise ValueError(f"unknown fill mode {mode!r}")


def set_iq1_m_scale(b: np.ndarray, bits: np.ndarray) -> None:
    """Write fp16 ``bits`` into iq1_m's four scale words (top nibble of each uint16)."""
    sc = np.ascontiguousarray(b[:, 48:56]).view("<u2").copy()
    bits = bits.astype(np.uint16)
    for k in range(4):
        sc[:, k] = (sc[:, k] & 0x0FFF) | (((bits >> (4 * k)) & 0xF) << 12)
    b[:, 48:56] = sc.view(np.uint8)


def _write_scales(name: str, b: np.ndarray, rng: np.random.Generator, classes: Sequence[str]) -> None:
    lay = LAYOUTS[name]
    nb = b.shape[0]
    for off in lay.fp16:
        b[:, off:off + 2] = _fp16_scales(rng, classes, nb).reshape(-1, 1).view(np.uint8)
    for off in lay.fp32:
        b[:, off:off + 4] = _fp32_scales(rng, classes, nb).reshape(-1, 1).view(np.uint8)
    for off in lay.e8m0:
        b[:, off] = _e8m0(rng, classes, nb)
    if lay.iq1_m_scale:
        set_iq1_m_scale(b, _fp16_scales(rng, classes, nb))


@dataclass(frozen=True)
class RowRecipe:
    """How a row was drawn (shown in failing examples next to the row itself)."""

    seed: int
    scale_classes: tuple[str, ...]
    payload: str
    subscales: str


def weight_row(name: str, nb: int, recipe: RowRecipe) -> np.ndarray:
    """The ``(nb, block_bytes)`` row of weight type ``name`` that ``recipe`` describes."""
    f = Q.fmt(name)
    rng = np.random.default_rng(recipe.seed)
    b = _fill(rng, recipe.payload, (nb, f.nbytes))
    lay = LAYOUTS[name]
    if lay.subscales is not None:
        lo, hi = lay.subscales
        b[:, lo:hi] = _fill(rng, recipe.subscales, (nb, hi - lo))
    _write_scales(name, b, rng, recipe.scale_classes)
    return b


@cache
def scale_class_lists(classes: tuple[str, ...]) -> st.SearchStrategy[list[str]]:
    """One to three distinct classes of ``classes``.  Built once per tuple: a strategy made afresh
    on every draw is validated afresh too (Hypothesis caches none built from a list), which cost
    a fifth of the time of drawing a row; the same strategy draws the same examples."""
    return st.lists(st.sampled_from(classes), min_size=1, max_size=3, unique=True)


@st.composite
def recipes(draw: st.DrawFn, *, scale_classes: Sequence[str] = SCALE_CLASSES) -> RowRecipe:
    """A seed and the structural choices of a row; shrinks to random payload and ordinary scales."""
    classes = draw(scale_class_lists(tuple(scale_classes)), label="scale_classes")
    payload = draw(st.sampled_from(PAYLOAD_MODES), label="payload")
    subscales = draw(st.sampled_from(SUBSCALE_MODES), label="subscales")
    seed = draw(st.integers(0, 2**32 - 1), label="seed")
    return RowRecipe(seed, tuple(classes), payload, subscales)


ACTIVATION_MODES = ("raw", "quantized")


QS_MODES = ("random", "extreme", "max", "min", "small")


#: Float data an activation row is quantized from: signed, all positive (post-ReLU / softmax
#: like), constant (every quant at +127).
FLOAT_KINDS = ("gaussian", "positive", "constant")


def activation_row(name: str, nb: int, seed: int, classes: Sequence[str], qs_mode: str,
                   *, max_scale: float | None = None) -> np.ndarray:
    """A consistent activation row (q8_0, q8_1 or q8_K) of ``nb`` blocks drawn from raw parts.

    ``qs_mode`` (one of QS_MODES): ``random`` int8 in [-127, 127] (the range every quantizer
    produces), ``extreme`` (+-127 at random), ``max`` / ``min`` (all +127 / all -127: the
    largest same-sign sums, where narrow integer accumulators overflow) or ``small`` ([-4, 4]).
    ``max_scale`` caps ``|d|`` (keeps the
    products with a huge weight scale finite); q8_1's ``d`` is also capped at 16, so that its
    ``s`` is a finite fp16 (ggml's quantizer would store inf there for larger blocks)."""
    r = activation_record(name)
    rng = np.random.default_rng(seed)
    qs = {"random": lambda k: rng.integers(-127, 128, k),
          "extreme": lambda k: np.where(rng.random(k) < 0.5, -127, 127),
          "max": lambda k: np.full(k, 127),
          "min": lambda k: np.full(k, -127),
          "small": lambda k: rng.integers(-4, 5, k)}[qs_mode](nb * r.block).reshape(nb, r.block)
    b = np.zeros((nb, r.nbytes), np.uint8)
    lo, hi = r.field("d")
    if hi - lo == 4:  # an fp32 d (q8_K)
        d = _fp32_scales(rng, classes, nb)
        if max_scale is not None:
            d = np.where(np.abs(d) > max_scale, np.float32(max_scale) * np.sign(d), d).astype(np.float32)
        b[:, lo:hi] = d.reshape(-1, 1).view(np.uint8)
        write_quants(r, b, qs, d)
        return b
    if _has_field(r, "s"):  # s = d * sum(qs) must stay a finite fp16: |d| <= 65504 / (32 * 127)
        max_scale = min(max_scale if max_scale is not None else 16.0, 16.0)
    dbits = _fp16_scales(rng, classes, nb)
    if max_scale is not None and max_scale < 65504:
        d = dbits.view(np.float16).astype(np.float64)
        dbits = np.where(np.abs(d) > max_scale, (np.sign(d) * max_scale).astype(np.float16).view(np.uint16), dbits)
    b[:, lo:hi] = dbits.reshape(-1, 1).view(np.uint8)
    write_quants(r, b, qs, dbits.view(np.float16).astype(np.float32))
    return b


def activation_record(name: str) -> QT.QuantType:
    r = QT.record(name)
    if r.kind != "activation":
        raise ValueError(f"{name} is not an activation type "
                         f"({', '.join(t.name for t in QT.RECORDS if t.kind == 'activation')})")
    return r


def _has_field(r: QT.QuantType, name: str) -> bool:
    return any(f.name == name for f in r.fields)


def write_quants(r: QT.QuantType, b: np.ndarray, qs: np.ndarray, d: np.ndarray) -> None:
    """An activation block's quants ``qs`` (``(nb, block)``) and what its record derives from
    them: ``s = fp16(sum(qs) * d)`` (product in fp32; q8_1) and ``bsums``, the int16 sums of 16
    consecutive quants (q8_K), as every quantizer makes them."""
    lo, hi = r.field("qs")
    b[:, lo:hi] = qs.astype(np.int8).view(np.uint8)
    if _has_field(r, "s"):
        lo, hi = r.field("s")
        s = (qs.sum(axis=1).astype(np.float32) * np.asarray(d, np.float32)).astype(np.float16)
        b[:, lo:hi] = s.view(np.uint16).reshape(-1, 1).view(np.uint8)
    if _has_field(r, "bsums"):
        lo, hi = r.field("bsums")
        b[:, lo:hi] = qs.reshape(qs.shape[0], -1, 16).sum(axis=2).astype("<i2").view(np.uint8)


def activation_floats(kind: str, n: int, seed: int, cap: float = 2.0 ** 20) -> np.ndarray:
    """``n`` float activations of ``kind`` (one of FLOAT_KINDS), one drawn magnitude, at most
    ``cap * 127`` (so their quantized scale stays at most ``cap``)."""
    rng = np.random.default_rng(seed)
    v = rng.standard_normal(n) * 2.0 ** float(rng.integers(-8, 8))
    if kind == "positive":
        v = np.abs(v)
    elif kind == "constant":
        v = np.full(n, abs(v[0]) + 2.0 ** -8)
    elif kind != "gaussian":
        raise ValueError(f"unknown float kind {kind!r}; expected one of {FLOAT_KINDS}")
    return np.clip(v, -cap * 127, cap * 127).astype(np.float32)


def quantized_activation_row(name: str, x: np.ndarray) -> np.ndarray:
    """Floats ``x`` quantized to ``name`` by the reference quantizer (oracles.q8)."""
    activation_record(name)
    return Q8.REFERENCE_QUANTIZERS[name](x)


def _put_u16(b: np.ndarray, off: int, v: np.ndarray) -> None:
    b[:, off:off + 2 * v.shape[1]] = np.ascontiguousarray(v.astype("<u2")).view(np.uint8)


def _put_u32(b: np.ndarray, off: int, v: np.ndarray) -> None:
    b[:, off:off + 4 * v.shape[1]] = np.ascontiguousarray(v.astype("<u4")).view(np.uint8)


#: Per IQ type (every record with a grid): (grid entries, grid references per block).
GRID_SWEEPS = {r.name: (T.GRIDS[r.grid][1], r.grid_refs) for r in QT.RECORDS if r.grid is not None}


def grid_sweep_row(name: str, seed: int, *, subscale: int | None = None) -> np.ndarray:
    """Blocks of IQ type ``name`` that reference every grid entry once, in order, with every sign
    pattern, sub-scale and (iq1) delta cycling; fp16 scales are 1.0 (so with power-of-two
    activations the dot product is exact).  Encoders invert ``oracles.quants``' decoders.
    ``subscale``: every 3/4-bit sub-scale field set to this value (default: random)."""
    entries, per_block = GRID_SWEEPS[name]
    nb = entries // per_block
    rng = np.random.default_rng(seed)
    idx = np.arange(entries, dtype=np.int64).reshape(nb, per_block)
    f = Q.fmt(name)
    b = np.zeros((nb, f.nbytes), np.uint8)
    one = int(np.float16(1.0).view(np.uint16))
    # A 4-bit sub-scale per sub-block (and a second one where the format has two).
    lscale = rng.integers(0, 16, (nb, 8)) if subscale is None else np.full((nb, 8), subscale)
    lscale2 = rng.integers(0, 16, (nb, 8)) if subscale is None else np.full((nb, 8), subscale)
    signs7 = (np.arange(nb * 32).reshape(nb, 32) + int(rng.integers(0, 128))) % 128  # cycles all 128
    if name == "iq2_xxs":
        sub = idx.reshape(nb, 8, 4)
        aux1 = (signs7.reshape(nb, 8, 4) << (7 * np.arange(4))).sum(axis=2) | (lscale << 28)
        raw = np.zeros((nb, 8, 8), np.uint8)
        raw[:, :, :4] = sub
        raw[:, :, 4:] = np.ascontiguousarray(aux1.astype("<u4")).view(np.uint8).reshape(nb, 8, 4)
        b[:, 2:66] = raw.reshape(nb, 64)
    elif name == "iq2_xs":
        _put_u16(b, 2, idx | (signs7 << 9))
        b[:, 66:74] = (lscale | (lscale2 << 4)).astype(np.uint8)
    elif name == "iq2_s":
        b[:, 2:34] = (idx & 255).astype(np.uint8)
        b[:, 34:66] = rng.integers(0, 256, (nb, 32), dtype=np.uint8)
        hi = (idx >> 8).reshape(nb, 8, 4)
        b[:, 66:74] = (hi << (2 * np.arange(4))).sum(axis=2).astype(np.uint8)
        b[:, 74:82] = (lscale | (lscale2 << 4)).astype(np.uint8)
    elif name == "iq3_xxs":
        b[:, 2:66] = idx.astype(np.uint8)
        aux = (signs7.reshape(nb, 8, 4) << (7 * np.arange(4))).sum(axis=2) | (lscale << 28)
        _put_u32(b, 66, aux)
    elif name == "iq3_s":
        b[:, 2:66] = (idx & 255).astype(np.uint8)
        hi = (idx >> 8).reshape(nb, 8, 8)
        b[:, 66:74] = (hi << np.arange(8)).sum(axis=2).astype(np.uint8)
        b[:, 74:106] = rng.integers(0, 256, (nb, 32), dtype=np.uint8)
        b[:, 106:110] = (lscale[:, :4] | (lscale[:, 4:] << 4)).astype(np.uint8)
    elif name == "iq1_s":
        b[:, 2:34] = (idx & 255).astype(np.uint8)
        hi = (idx >> 8).reshape(nb, 8, 4)
        qh = (hi << (3 * np.arange(4))).sum(axis=2) | ((lscale & 7) << 12) | (rng.integers(0, 2, (nb, 8)) << 15)
        _put_u16(b, 34, qh)
    elif name == "iq1_m":
        b[:, 0:32] = (idx & 255).astype(np.uint8)
        hi = (idx >> 8).reshape(nb, 16, 2)
        delta = rng.integers(0, 2, (nb, 16, 2)) << 3
        b[:, 32:48] = ((hi[:, :, 0] | delta[:, :, 0]) | ((hi[:, :, 1] | delta[:, :, 1]) << 4)).astype(np.uint8)
        sc3 = (lscale[:, :4] & 7) * 0o1111 if subscale is not None else rng.integers(0, 1 << 12, (nb, 4))
        _put_u16(b, 48, sc3)
        set_iq1_m_scale(b, np.full(nb, one, np.uint16))
        return b
    else:
        raise ValueError(f"no grid sweep for {name!r}; known: {', '.join(GRID_SWEEPS)}")
    b[:, 0:2] = np.full((nb, 1), one, np.uint16).view(np.uint8)
    return b

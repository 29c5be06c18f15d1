"""Hypothesis strategies for quantized rows: raw block bytes drawn directly (the struct layouts of
``ggml-common.h``), with the edge encodings kernels mishandle.

A row is a ``(n_blocks, block_bytes)`` uint8 array.  Its bytes come in three roles:

* **float scales** (``d``, ``dmin``, ``m``; q8_K's fp32 ``d``; mxfp4's E8M0 exponent; iq1_m's
  fp16 spread over four nibbles): drawn per block from classes -- ordinary values, zero,
  negative, subnormal, the largest finite fp16, powers of two;
* **integer sub-scales** (the packed 4/6/8-bit scales of K-quants and IQ types): random, or all
  at an extreme (all bits set, all clear, alternating, int8's -128 / 127);
* **payload** (quants, grid indices, signs): random, or constant fills that maximise magnitudes.

Activation rows (q8_0 / q8_1 / q8_K) are made consistent: q8_1's ``s`` is ``d * sum(qs)``
rounded to fp16 and q8_K's ``bsums`` are the sums of its ``qs``, as every quantizer makes them.
They can also be produced by quantizing float data (the reference quantizers of
``oracles.quants``), and :func:`exact_pair` draws rows whose dot product every kernel must
compute without rounding.

Block counts shrink towards 1 and include 2, 3, odd and even counts, long rows and real models'
row lengths (:func:`block_counts`); :func:`every_run_counts` gives those every run checks.  Data is
filled by NumPy from a drawn seed (shrinks well, fast), as in ``cases/strategies.py``.

Every per-type fact comes from the type's record (oracles/quant_types.py): the byte offsets of the
float scales and sub-scales (:data:`LAYOUTS`, from the roles of its fields), the largest integer
(exact pairs), the grid of an IQ type, an activation block's fields.  What is left per type is
the grid-sweep encoder of each IQ type (the inverse of its decoder).

Used by the quant_dot family (cases/quant_dot.py) and, per type, by the repack family.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

from cases.strategies import LONG_ROW
from oracles import quant_tables as T
from oracles import quant_types as QT
from oracles import quants as Q

# ------------------------------------------------------------------ layouts


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

# ------------------------------------------------------------------ scale classes

#: Classes of floating-point scale values.
SCALE_CLASSES = ("normal", "negative", "zero", "subnormal", "max", "pow2")

_F16_MAX = 0x7BFF  # 65504


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


#: E8M0 exponents: the extremes (0 and 1 give subnormal fp32 halves, 254 / 255 the largest), and 127 / 128.
E8M0_EDGES = (0, 1, 2, 126, 127, 128, 129, 253, 254, 255)


def _e8m0(rng: np.random.Generator, classes: Sequence[str], k: int) -> np.ndarray:
    """E8M0 exponents: ``pow2`` / ``normal`` near 2^0, the rest from the edges of the range."""
    near = rng.integers(112, 140, k)
    edges = np.array(E8M0_EDGES)[rng.integers(0, len(E8M0_EDGES), k)]
    use_edges = np.isin(rng.integers(0, len(classes), k), [i for i, c in enumerate(classes) if c not in ("normal", "pow2")])
    return np.where(use_edges, edges, near).astype(np.uint8)


# ------------------------------------------------------------------ bytes by role

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


@st.composite
def recipes(draw: st.DrawFn, *, scale_classes: Sequence[str] = SCALE_CLASSES) -> RowRecipe:
    """A seed and the structural choices of a row; shrinks to random payload and ordinary scales."""
    classes = draw(st.lists(st.sampled_from(list(scale_classes)), min_size=1, max_size=3, unique=True),
                   label="scale_classes")
    payload = draw(st.sampled_from(PAYLOAD_MODES), label="payload")
    subscales = draw(st.sampled_from(SUBSCALE_MODES), label="subscales")
    seed = draw(st.integers(0, 2**32 - 1), label="seed")
    return RowRecipe(seed, tuple(classes), payload, subscales)


# ------------------------------------------------------------------ activations

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
    r = _activation_record(name)
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


def _activation_record(name: str) -> QT.QuantType:
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
    """Floats ``x`` quantized to ``name`` by the reference quantizer (oracles.quants)."""
    _activation_record(name)
    return Q.REFERENCE_QUANTIZERS[name](x)


# ------------------------------------------------------------------ rows and pairs

#: Elements of a long row (as in cases/strategies.py).
LONG = LONG_ROW
#: Elements of the longest row the non-real random draws reach.
LONG_TOP = LONG + 2048
#: Row lengths of real models: hidden sizes 2048-8192 and FFN sizes 5632-14336 (every one a
#: multiple of 256, so a whole number of blocks of every type).
REAL_ROW_ELEMENTS = (2048, 4096, 5632, 8192, 11008, 14336)
#: Block counts every run checks: one block, two (the second iteration of a per-block row
#: loop), three (twice plus one), five (a loop over block pairs crossed twice plus its
#: leftover block).
EVERY_RUN_COUNTS = (1, 2, 3, 5)
#: Explicit examples ahead of the draws have at most this many blocks (each is as small as a
#: failure it finds can be); larger fixed rows run after the draws, so that a bug they and a
#: smaller drawn row both show is reported shrunk (``cases.strategies.explore``'s ``after``).
EDGE_BLOCKS = 3


def real_counts(block: int, *, max_elements: int = max(REAL_ROW_ELEMENTS)) -> list[int]:
    """Block counts of the real-model row lengths (at most ``max_elements`` elements), smallest first."""
    return [k // block for k in REAL_ROW_ELEMENTS if k % block == 0 and k <= max_elements]


def every_run_counts(block: int, *, max_elements: int = max(REAL_ROW_ELEMENTS)) -> list[int]:
    """The block counts of the fixed rows every run checks (edge_pairs, loop_pairs): EVERY_RUN_COUNTS and the
    longest real-model row that fits in ``max_elements`` (so the row loop runs at a real
    model's length on every run, not only when the draws are lucky).  The size table of
    cases/loops.py is computed from this function."""
    top = max(1, max_elements // block)
    real = real_counts(block, max_elements=max_elements)
    return [k for k in EVERY_RUN_COUNTS if k <= top] + real[-1:]


def block_count_range(block: int, *, max_elements: int = LONG_TOP,
                      max_real: int = max(REAL_ROW_ELEMENTS)) -> tuple[int, int]:
    """Smallest and largest block count :func:`block_counts` draws."""
    top = max(1, max_elements // block)
    return 1, max([top, *real_counts(block, max_elements=max_real)])


def block_counts(block: int, *, max_elements: int = LONG_TOP,
                 max_real: int = max(REAL_ROW_ELEMENTS)) -> st.SearchStrategy[int]:
    """Block counts: 1, 2, 3 and small ones first (shrinking goes there), odd and even counts
    around 16 and 32, long rows of at least LONG_ROW elements, and last the block counts of
    real models' row lengths (REAL_ROW_ELEMENTS up to ``max_real``: 64 to 448 blocks of 32, 8
    to 56 super-blocks of 256)."""
    top = max(1, max_elements // block)
    long_lo = min(top, max(1, LONG // block))
    small = st.integers(1, min(top, 8))
    edges = st.sampled_from([k for k in (15, 16, 17, 31, 32, 33) if k <= top] or [1])
    parts = [small, edges, st.integers(long_lo, top)]
    real = real_counts(block, max_elements=max_real)
    if real:
        parts.append(st.sampled_from(real))
    return st.one_of(*parts)


def pair_unit(x_type: str, y_type: str) -> int:
    """Elements of one unit of a row pair: the least common multiple of the two block sizes."""
    return int(np.lcm(Q.fmt(x_type).block, Q.fmt(y_type).block))


@dataclass(frozen=True)
class Pair:
    """A weight row and an activation row of the same length (``x``: weights, ``y``: activations)."""

    x_type: str
    y_type: str
    x: np.ndarray
    y: np.ndarray

    @property
    def n(self) -> int:
        return self.x.shape[0] * Q.fmt(self.x_type).block

    @property
    def n_blocks(self) -> int:
        return self.x.shape[0]

    def __repr__(self) -> str:  # failing examples print the shape; the bytes are in the message
        return f"Pair({self.x_type} x {self.y_type}, n={self.n}, x_blocks={self.n_blocks})"

    def _repr_pretty_(self, p, cycle) -> None:  # Hypothesis's printer of failing examples
        p.text(repr(self))


def _max_activation_scale(x_type: str, x: np.ndarray) -> float:
    """The largest activation scale that keeps every product, and the row's whole sum, below
    2^126 in magnitude (ggml would return inf beyond fp32's range, as it should, but such rows
    test nothing): |sum| <= blocks * block * max|int part| * 127 * max|x scale| * |y scale|."""
    dec = Q.decode(x_type, x)
    top = float(np.max(np.abs(dec.scale)))
    if dec.offset_scale is not None:
        top = max(top, float(np.max(np.abs(dec.offset_scale))))
    if not np.isfinite(top) or top == 0:
        return 2.0 ** 20
    worst = dec.n * _MAX_INT[x_type] * 127 * top
    return float(min(2.0 ** 20, 2.0 ** 126 / worst))


@st.composite
def pairs(draw: st.DrawFn, x_type: str, y_type: str, *, n_blocks: int | None = None) -> Pair:
    """A weight row of ``x_type`` from raw bytes and an activation row of ``y_type``, raw or
    quantized from floats, with the same number of elements."""
    fx, fy = Q.fmt(x_type), Q.fmt(y_type)
    if x_type not in LAYOUTS or fy.kind != "activation":
        raise ValueError(f"pairs: {x_type} x {y_type} is not a weight type with an activation type")
    unit = int(np.lcm(fx.block, fy.block))
    nb = n_blocks if n_blocks is not None else draw(block_counts(unit), label="n_units")
    n = nb * unit
    # Weights are any bytes the format can hold (q8_0 weights may hold -128, activations never do).
    x = weight_row(x_type, n // fx.block, draw(recipes(), label="x_recipe"))
    mode = draw(st.sampled_from(ACTIVATION_MODES), label="y_mode")
    seed = draw(st.integers(0, 2**32 - 1), label="y_seed")
    cap = _max_activation_scale(x_type, x)
    if mode == "quantized":
        kind = draw(st.sampled_from(FLOAT_KINDS), label="y_floats")
        y = quantized_activation_row(y_type, activation_floats(kind, n, seed, cap))
    else:
        classes = draw(st.lists(st.sampled_from(SCALE_CLASSES), min_size=1, max_size=3, unique=True),
                       label="y_scale_classes")
        qs_mode = draw(st.sampled_from(QS_MODES), label="y_qs")
        y = activation_row(y_type, n // fy.block, seed, classes, qs_mode, max_scale=cap)
    return Pair(x_type, y_type, x, y)


def _fixed_pair(x_type: str, y_type: str, nb: int, recipe: RowRecipe, qs_mode: str,
                classes: Sequence[str] = ("normal",)) -> Pair:
    """A fixed pair of ``nb`` units (the lcm of both block sizes) made by ``recipe``."""
    fy = Q.fmt(y_type)
    n = nb * pair_unit(x_type, y_type)
    x = weight_row(x_type, n // Q.fmt(x_type).block, recipe)
    y = activation_row(y_type, n // fy.block, recipe.seed, classes, qs_mode, max_scale=_max_activation_scale(x_type, x))
    return Pair(x_type, y_type, x, y)


def edge_pairs(x_type: str, y_type: str) -> list[Pair]:
    """Fixed pairs every run checks before exploring (Hypothesis explicit examples): rows of random
    bytes of the block counts of :func:`every_run_counts` up to EDGE_BLOCKS (one, two, three
    blocks: tails, odd counts, per-block indexing), saturated rows (all payload and sub-scale bits
    set, activations all +127 or all -127: the largest same-sign integer sums), and every scale
    class in one row."""
    unit = pair_unit(x_type, y_type)
    out = [_fixed_pair(x_type, y_type, nb, RowRecipe(nb, ("normal",), "random", "random"), "random")
           for nb in every_run_counts(unit) if nb <= EDGE_BLOCKS]
    for qs_mode in ("max", "min"):
        out.append(_fixed_pair(x_type, y_type, 1, RowRecipe(7, ("normal",), "ones", "ones"), qs_mode))
        out.append(_fixed_pair(x_type, y_type, 1, RowRecipe(8, ("normal",), "zeros", "ones"), qs_mode))
    out.append(_fixed_pair(x_type, y_type, 2, RowRecipe(9, SCALE_CLASSES, "random", "alternate"), "extreme",
                           SCALE_CLASSES))
    return out


def loop_pairs(x_type: str, y_type: str) -> list[Pair]:
    """Fixed pairs every run checks after exploring: rows of random bytes of the block counts of
    :func:`every_run_counts` above EDGE_BLOCKS (five blocks: a loop over block pairs crossed twice
    plus its leftover; and a real model's row length)."""
    unit = pair_unit(x_type, y_type)
    return [_fixed_pair(x_type, y_type, nb, RowRecipe(nb, ("normal",), "random", "random"), "random")
            for nb in every_run_counts(unit) if nb > EDGE_BLOCKS]


# ------------------------------------------------------------------ exact by construction

#: Largest |integer part| of one element's product x_i * y_i per unit of |q_y|, per weight type
#: (main part plus offset part, in units of the finest scale: d/8 for iq1_*, iq2_*, d/4 for
#: iq3_xxs): the sub-scale ints times the quant range.
_MAX_INT = {r.name: r.max_int for r in QT.RECORDS if r.max_int is not None}


def exact_pair(x_type: str, y_type: str, nb: int, seed: int, payload: str, subscales: str) -> Pair:
    """A pair whose dot product is exact in fp32 by construction: every float scale of the row
    is +-2^e for one e (random signs), activations scaled by +-2^e' and their quants bounded so
    that ``sum |x_i y_i| <= 2^24 * unit`` (every partial sum any kernel forms is an fp32 number).
    (q8_1's ``s`` is rounded to fp16 when the block sum needs more than 11 bits; ``m * s`` is
    still one exact product, and the oracle checks the premise.)

    ``nb`` counts units of lcm(block sizes); the quant range of y shrinks with the row length
    (to 0 / +-1 at worst)."""
    fx, fy = Q.fmt(x_type), Q.fmt(y_type)
    unit = int(np.lcm(fx.block, fy.block))
    n = nb * unit
    rng = np.random.default_rng(seed)
    x = weight_row(x_type, n // fx.block, RowRecipe(seed, ("pow2",), payload, subscales))
    e = int(rng.integers(-4, 5))
    lay = LAYOUTS[x_type]
    # One magnitude for all float scales (2^e), signs random: the finest unit is then shared.
    mag = np.float16(2.0 ** e).view(np.uint16)
    for off in lay.fp16:
        signs = np.where(rng.random(x.shape[0]) < 0.5, 0, 0x8000).astype(np.uint16)
        x[:, off:off + 2] = (mag | signs).reshape(-1, 1).view(np.uint8)
    for off in lay.e8m0:
        x[:, off] = 128 + e
    if lay.iq1_m_scale:
        set_iq1_m_scale(x, mag | np.where(rng.random(x.shape[0]) < 0.5, 0, 0x8000).astype(np.uint16))
    max_q = int(min(127, 2 ** 24 // (n * _MAX_INT[x_type])))
    y = exact_activation_row(y_type, n // fy.block, int(rng.integers(0, 2**32 - 1)), max_q)
    return Pair(x_type, y_type, x, y)


def exact_activation_row(name: str, nb: int, seed: int, max_q: int) -> np.ndarray:
    """An activation row whose scales are all +-2^e for one drawn e in [-4, 4] and whose quants
    lie in [-max_q, max_q]; q8_1's ``s`` is then exact too (an integer times 2^e)."""
    r = _activation_record(name)
    rng = np.random.default_rng(seed)
    e = int(rng.integers(-4, 5))
    qs = rng.integers(-max_q, max_q + 1, nb * r.block).reshape(nb, r.block)
    y = np.zeros((nb, r.nbytes), np.uint8)
    sgn = np.where(rng.random(nb) < 0.5, -1.0, 1.0)
    lo, hi = r.field("d")
    d = (sgn * 2.0 ** e).astype(np.float32 if hi - lo == 4 else np.float16)
    y[:, lo:hi] = d.reshape(-1, 1).view(np.uint8)
    write_quants(r, y, qs, d)
    return y


def exact_max_elements(x_type: str) -> int:
    """The longest row :func:`exact_pair` can make exact for ``x_type``: beyond 2^24 / max|x_i y_i|
    elements y would have no room left."""
    return 2 ** 24 // _MAX_INT[x_type]


def exact_every_run_counts(x_type: str, y_type: str) -> list[int]:
    """Block counts (in units of lcm(block sizes)) of the exact pairs every run checks."""
    return every_run_counts(pair_unit(x_type, y_type), max_elements=exact_max_elements(x_type))


@st.composite
def exact_pairs(draw: st.DrawFn, x_type: str, y_type: str) -> Pair:
    """:func:`exact_pair` with a drawn block count, seed and payload / sub-scale modes."""
    fx, fy = Q.fmt(x_type), Q.fmt(y_type)
    unit = int(np.lcm(fx.block, fy.block))
    # Rows beyond 2^24 / max|x_i y_i| elements would leave y no room: stop there.
    cap = exact_max_elements(x_type)
    nb = draw(block_counts(unit, max_elements=min(LONG_TOP, cap), max_real=cap), label="n_units")
    seed = draw(st.integers(0, 2**32 - 1), label="seed")
    payload = draw(st.sampled_from(PAYLOAD_MODES), label="payload")
    subscales = draw(st.sampled_from(SUBSCALE_MODES), label="subscales")
    return exact_pair(x_type, y_type, nb, seed, payload, subscales)


# ------------------------------------------------------------------ IQ grid sweeps


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

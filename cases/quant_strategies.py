"""Hypothesis strategies for pairs of quantized rows (a weight row and an activation row) and the block
counts a kernel must cross; the rows themselves are drawn by cases/quant_blocks.py from each type's
record (oracles/quant_types.py).

Block counts shrink towards 1 and include 2, 3, odd and even counts, long rows and real models'
row lengths (:func:`block_counts`); :func:`every_run_counts` gives those every run checks.  Data is
filled by NumPy from a drawn seed (shrinks well, fast), as in ``cases/strategies.py``.
:func:`exact_pair` draws rows whose dot product every kernel must compute without rounding (the
largest integer of each type comes from its record).

Used by the quant_dot family (cases/quant_dot.py) and, per type, by the repack family.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np
from hypothesis import strategies as st

from cases import quant_blocks as QB
from cases.strategies import LONG_ROW
from oracles import quant_types as QT
from oracles import quants as Q

# ------------------------------------------------------------------ layouts


# ------------------------------------------------------------------ scale classes


#: E8M0 exponents: the extremes (0 and 1 give subnormal fp32 halves, 254 / 255 the largest), and 127 / 128.


# ------------------------------------------------------------------ bytes by role


# ------------------------------------------------------------------ activations


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


@cache
def block_counts(block: int, *, max_elements: int = LONG_TOP,
                 max_real: int = max(REAL_ROW_ELEMENTS)) -> st.SearchStrategy[int]:
    """Block counts: 1, 2, 3 and small ones first (shrinking goes there), odd and even counts
    around 16 and 32, long rows of at least LONG_ROW elements, and last the block counts of
    real models' row lengths (REAL_ROW_ELEMENTS up to ``max_real``: 64 to 448 blocks of 32, 8
    to 56 super-blocks of 256).  One strategy per set of arguments (``QB.scale_class_lists`` says why)."""
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
    if x_type not in QB.LAYOUTS or fy.kind != "activation":
        raise ValueError(f"pairs: {x_type} x {y_type} is not a weight type with an activation type")
    unit = int(np.lcm(fx.block, fy.block))
    nb = n_blocks if n_blocks is not None else draw(block_counts(unit), label="n_units")
    n = nb * unit
    # Weights are any bytes the format can hold (q8_0 weights may hold -128, activations never do).
    x = QB.weight_row(x_type, n // fx.block, draw(QB.recipes(), label="x_recipe"))
    mode = draw(st.sampled_from(QB.ACTIVATION_MODES), label="y_mode")
    seed = draw(st.integers(0, 2**32 - 1), label="y_seed")
    cap = _max_activation_scale(x_type, x)
    if mode == "quantized":
        kind = draw(st.sampled_from(QB.FLOAT_KINDS), label="y_floats")
        y = QB.quantized_activation_row(y_type, QB.activation_floats(kind, n, seed, cap))
    else:
        classes = draw(QB.scale_class_lists(QB.SCALE_CLASSES), label="y_scale_classes")
        qs_mode = draw(st.sampled_from(QB.QS_MODES), label="y_qs")
        y = QB.activation_row(y_type, n // fy.block, seed, classes, qs_mode, max_scale=cap)
    return Pair(x_type, y_type, x, y)


def fixed_pair(x_type: str, y_type: str, nb: int, recipe: QB.RowRecipe, qs_mode: str,
                classes: Sequence[str] = ("normal",)) -> Pair:
    """A fixed pair of ``nb`` units (the lcm of both block sizes) made by ``recipe``."""
    fy = Q.fmt(y_type)
    n = nb * pair_unit(x_type, y_type)
    x = QB.weight_row(x_type, n // Q.fmt(x_type).block, recipe)
    y = QB.activation_row(y_type, n // fy.block, recipe.seed, classes, qs_mode, max_scale=_max_activation_scale(x_type, x))
    return Pair(x_type, y_type, x, y)


def edge_pairs(x_type: str, y_type: str) -> list[Pair]:
    """Fixed pairs every run checks before exploring (Hypothesis explicit examples): rows of random
    bytes of the block counts of :func:`every_run_counts` up to EDGE_BLOCKS (one, two, three
    blocks: tails, odd counts, per-block indexing), saturated rows (all payload and sub-scale bits
    set, activations all +127 or all -127: the largest same-sign integer sums), and every scale
    class in one row."""
    unit = pair_unit(x_type, y_type)
    out = [fixed_pair(x_type, y_type, nb, QB.RowRecipe(nb, ("normal",), "random", "random"), "random")
           for nb in every_run_counts(unit) if nb <= EDGE_BLOCKS]
    for qs_mode in ("max", "min"):
        out.append(fixed_pair(x_type, y_type, 1, QB.RowRecipe(7, ("normal",), "ones", "ones"), qs_mode))
        out.append(fixed_pair(x_type, y_type, 1, QB.RowRecipe(8, ("normal",), "zeros", "ones"), qs_mode))
    out.append(fixed_pair(x_type, y_type, 2, QB.RowRecipe(9, QB.SCALE_CLASSES, "random", "alternate"), "extreme",
                           QB.SCALE_CLASSES))
    return out


def loop_pairs(x_type: str, y_type: str) -> list[Pair]:
    """Fixed pairs every run checks after exploring: rows of random bytes of the block counts of
    :func:`every_run_counts` above EDGE_BLOCKS (five blocks: a loop over block pairs crossed twice
    plus its leftover; and a real model's row length)."""
    unit = pair_unit(x_type, y_type)
    return [fixed_pair(x_type, y_type, nb, QB.RowRecipe(nb, ("normal",), "random", "random"), "random")
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
    x = QB.weight_row(x_type, n // fx.block, QB.RowRecipe(seed, ("pow2",), payload, subscales))
    e = int(rng.integers(-4, 5))
    lay = QB.LAYOUTS[x_type]
    # One magnitude for all float scales (2^e), signs random: the finest unit is then shared.
    mag = np.float16(2.0 ** e).view(np.uint16)
    for off in lay.fp16:
        signs = np.where(rng.random(x.shape[0]) < 0.5, 0, 0x8000).astype(np.uint16)
        x[:, off:off + 2] = (mag | signs).reshape(-1, 1).view(np.uint8)
    for off in lay.e8m0:
        x[:, off] = 128 + e
    if lay.iq1_m_scale:
        QB.set_iq1_m_scale(x, mag | np.where(rng.random(x.shape[0]) < 0.5, 0, 0x8000).astype(np.uint16))
    max_q = int(min(127, 2 ** 24 // (n * _MAX_INT[x_type])))
    y = exact_activation_row(y_type, n // fy.block, int(rng.integers(0, 2**32 - 1)), max_q)
    return Pair(x_type, y_type, x, y)


def exact_activation_row(name: str, nb: int, seed: int, max_q: int) -> np.ndarray:
    """An activation row whose scales are all +-2^e for one drawn e in [-4, 4] and whose quants
    lie in [-max_q, max_q]; q8_1's ``s`` is then exact too (an integer times 2^e)."""
    r = QB.activation_record(name)
    rng = np.random.default_rng(seed)
    e = int(rng.integers(-4, 5))
    qs = rng.integers(-max_q, max_q + 1, nb * r.block).reshape(nb, r.block)
    y = np.zeros((nb, r.nbytes), np.uint8)
    sgn = np.where(rng.random(nb) < 0.5, -1.0, 1.0)
    lo, hi = r.field("d")
    d = (sgn * 2.0 ** e).astype(np.float32 if hi - lo == 4 else np.float16)
    y[:, lo:hi] = d.reshape(-1, 1).view(np.uint8)
    QB.write_quants(r, y, qs, d)
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
    payload = draw(st.sampled_from(QB.PAYLOAD_MODES), label="payload")
    subscales = draw(st.sampled_from(QB.SUBSCALE_MODES), label="subscales")
    return exact_pair(x_type, y_type, nb, seed, payload, subscales)


# ------------------------------------------------------------------ IQ grid sweeps



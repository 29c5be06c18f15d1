"""Which integer sub-scales of a block a quantized vec_dot applies to the right elements: a probe that
isolates each sub-scale field, so that a report can say *which* sub-blocks a kernel gets wrong and a
test can check that it says exactly those.

Why not probe with activations on one sub-block: a kernel that reads sub-block j's products from the
wrong place may read them from where another sub-block's products are (or were), so setting the
activations of one sub-block moves the results of others, and every such probe fails.  The sub-scale
is what a kernel applies to one sub-block's sum and to nothing else, so the probe varies it:

    delta_j = dot(x with field j = 1, y) - dot(x with field j = 0, y)

with every other byte fixed.  For the oracle delta_j is ``(2*1+1 - (2*0+1)) * d * S_j * c``, ``S_j``
the integer sum over the elements the field scales (``c`` the type's constant factor); for the kernel
it is ``2 * d * c`` times what the kernel sums under that scale.  Field j "differs" when the two
deltas differ by more than the dot product's bound for the two calls (the inputs below are exact by
construction, so the bound is 0): the kernel scales something other than the sub-block's sum.

The weights are a block whose every grid index, sign bit and sub-scale is 0 and d = 1 (one grid
value everywhere); the activations are seeded random int8 in [-127, 127] with d = 1, so that the
sub-block sums are all different and a sum read from the wrong sub-block shows.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from cases import quant_blocks as QB
from cases import quant_dot as QD
from cases import quant_strategies as QS
from oracles import dots as OD
from oracles import quant_types as QT


@dataclass(frozen=True)
class SubScale:
    """One integer sub-scale field of a block: the elements it scales and the bits that hold it."""

    label: str  # "sub-block 2", "sub-block 2, elements 0-15"
    elements: tuple[int, int]  # [start, end) within the block
    byte: int  # byte offset within the block
    shift: int  # its lowest bit within that byte

    def set(self, block: np.ndarray, value: int) -> None:
        block[self.byte] = (int(block[self.byte]) & ~(0xF << self.shift)) | (value << self.shift)


def _top_nibbles(name: str, field: str, stride: int) -> list[SubScale]:
    """4-bit scales in the top nibble of the little-endian uint32 ending every ``stride`` bytes of
    ``field``, one per 32-element sub-block (iq2_xxs: after the 4 grid indices; iq3_xxs: the
    signs_scales words)."""
    lo, _ = QT.record(name).field(field)
    return [SubScale(f"sub-block {j}", (32 * j, 32 * j + 32), lo + stride * j + stride - 1, 4) for j in range(8)]


def _nibble_pairs(name: str, field: str) -> list[SubScale]:
    """Two 4-bit scales per byte of ``field``: the low nibble for elements 0-15 of the 32-element
    group, the high one for 16-31 (iq2_s, iq2_xs)."""
    lo, _ = QT.record(name).field(field)
    return [SubScale(f"sub-block {j}, elements {h * 16}-{h * 16 + 15}", (32 * j + 16 * h, 32 * j + 16 * h + 16),
                     lo + j, 4 * h) for j in range(8) for h in (0, 1)]


#: The sub-scale fields of the types the probe knows, from their records (oracles/quant_types.py).
FIELDS: dict[str, list[SubScale]] = {
    "iq2_xxs": _top_nibbles("iq2_xxs", "qs", 8),
    "iq3_xxs": _top_nibbles("iq3_xxs", "signs_scales", 4),
    "iq2_s": _nibble_pairs("iq2_s", "scales"),
    "iq2_xs": _nibble_pairs("iq2_xs", "scales"),
}


@dataclass(frozen=True)
class Response:
    """How the result moves when one sub-scale field goes from 0 to 1, by the kernel and the oracle."""

    field: SubScale
    kernel: float
    oracle: float
    bound: float
    #: Where the field differs: the other field whose oracle move the kernel's equals (the kernel applies
    #: this scale to that field's elements: swapped nibbles, shifted sub-blocks), or None.
    like: str | None = None

    @property
    def differs(self) -> bool:
        return not abs(self.kernel - self.oracle) <= self.bound

    def describe(self) -> str:
        said = f"{self.field.label}: kernel moves by {self.kernel!r}, oracle by {self.oracle!r}"
        return said + (f", as {self.like} should" if self.like else "")


def activations(n_blocks: int = 1, seed: int = 0) -> np.ndarray:
    """q8_K activations, d = 1, quants seeded random in [-127, 127]."""
    y = QD.block_row("q8_K", n_blocks)
    qs = np.random.default_rng(seed).integers(-127, 128, size=(n_blocks, 256))
    QB.write_quants(QT.record("q8_K"), y, qs, np.ones(n_blocks, np.float32))
    return y


def probe(name: str, target, *, seed: int = 0, block: int = 0, n_blocks: int = 1) -> list[Response]:
    """Each sub-scale field of block ``block`` of a row of ``n_blocks``, through the tree's vec_dot
    for ``name`` (the RVV entry point, as mul_mat reaches it) on ``target``."""
    if name not in FIELDS:
        raise KeyError(f"no sub-scale fields known for {name!r} (known: {', '.join(FIELDS)}): add them to FIELDS")
    kernel = QD.BY_NAME[name]
    y = activations(n_blocks, seed)

    def both(x: np.ndarray) -> tuple[float, float, float]:
        pair = QS.Pair(name, kernel.vec_dot_type, x, y)
        expected = OD.dot(name, x, kernel.vec_dot_type, y)
        bound = 0.0 if expected.exact else kernel.bound(n_blocks, expected)
        return QD.run_dot(kernel, target, pair, 0), expected.value, bound

    x0 = QD.block_row(name, n_blocks)
    k0, o0, b0 = both(x0)
    out = []
    for f in FIELDS[name]:
        x1 = x0.copy()
        f.set(x1[block], 1)
        k1, o1, b1 = both(x1)
        out.append(Response(f, k1 - k0, o1 - o0, b0 + b1))
    return [dataclasses.replace(r, like=next((o.field.label for o in out if o is not r and
                                              abs(r.kernel - o.oracle) <= r.bound), None)) if r.differs else r
            for r in out]


#: How cases/test_quant_dot.py::test_vec_dot_subscales introduces the fields that differ, and the fields
#: that move the result as another should (read back by tests/test_subscale_claims.py).
WRONG = "sub-scales applied to the wrong elements"
LIKE = "moving as another should"


def summary(responses: list[Response]) -> str:
    """One line: the fields that differ, then those that move the result as another field should."""
    wrong = [r for r in responses if r.differs]
    like = [f"{r.field.label} -> {r.like}" for r in wrong if r.like]
    return (f"{WRONG}: {'; '.join(r.field.label for r in wrong)}" + (f" | {LIKE}: {'; '.join(like)}" if like else "")
            + f" | e.g. {wrong[0].describe()}")

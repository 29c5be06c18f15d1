"""Hypothesis strategies shared by the kernel families: lengths that hit vector tails, the
lengths that cross every loop of a vector kernel, and floating-point data by class.

Long arrays are not drawn element by element (that is slow and shrinks
badly): a strategy draws a seed and a few structural choices, and NumPy fills
the array.  Hypothesis still shrinks the length, the seed and the choices, so
a failure is reported at its smallest length.  The same fill functions
(``float_array``, ``small_integer_array``, ...) build the seeded arrays of the
fixed cases, which every run checks whatever Hypothesis draws.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cases import loops as L
from harness.core.config import VLENS
from harness.emulators.pool import Unsupported
from oracles.floats import BF16

#: A long row: longer than any register group at any VLEN, many loop trips.
LONG_ROW = 8192
#: The widest row of the real models the loop tables name (an FFN of 14336: Llama-3-8B, Mistral-7B).
REAL_ROW = 14336
#: Largest random length: long rows run from LONG_ROW to a real model's widest row plus a tail.
MAX_LENGTH = REAL_ROW + 257
#: Real-model row lengths for the loop tables: hidden 2048-8192, FFN 5632-14336.
REAL_ROWS = (2048, 4096, 5632, 8192, 11008, 14336)


class KernelSpec:
    """Base of the kernel tables: a short repr, so failing examples print ``DotKernel('f16')``."""

    name: str

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    def _repr_pretty_(self, p, cycle) -> None:  # Hypothesis's printer of failing examples
        p.text(repr(self))


@dataclass(frozen=True)
class VectorShape:
    """How a kernel walks its input: element width (SEW), register group sizes (LMUL) and unroll."""

    sew: int
    lmuls: Sequence[int] = (1,)
    unroll: int = 1

    def vlmax(self, vlen: int, lmul: int) -> int:
        """Elements one vsetvl trip at this SEW and LMUL takes at ``vlen``."""
        return vlen * lmul // self.sew

    def steps(self, vlen: int) -> list[int]:
        """Elements one iteration of each loop level consumes at ``vlen``: VLMAX per LMUL (a
        strip-mined loop, or the leftover loop after an unrolled one) and, with an unroll,
        unroll * VLMAX (the unrolled main loop)."""
        out = {self.vlmax(vlen, lmul) * u for lmul in self.lmuls for u in {1, self.unroll}}
        return sorted(out)

    def boundaries(self, vlens: Sequence[int] = VLENS) -> list[int]:
        """VLMAX and unrolled steps (and their doubles) at every VLEN: the lengths where tails begin."""
        out = set()
        for vlen in vlens:
            for lmul in self.lmuls:
                vlmax = self.vlmax(vlen, lmul)
                out.update({vlmax, vlmax * self.unroll, 2 * vlmax * self.unroll})
        return sorted(out)

    def loops(self, kernels: str, var: str, source: str, *, real: Sequence[int] = REAL_ROWS) -> list[L.Loop]:
        """The loop levels of a kernel walking its row this way, for the family's size table:
        one strip-mined vsetvl loop, or an unrolled main loop (unroll * VLMAX elements per
        iteration, a multiple by construction when the main loop is all there is) and its
        leftover vsetvl loop (VLMAX per trip)."""
        out = []
        for lmul in self.lmuls:
            group = f"e{self.sew}m{lmul}"
            if self.unroll > 1:
                out.append(L.Loop(kernels, f"unrolled main loop, x{self.unroll} {group}", var,
                                  step=lambda vlen, m=lmul: self.vlmax(vlen, m) * self.unroll, real=real,
                                  source=source))
                out.append(L.Loop(kernels, f"leftover loop, vsetvl {group}", var,
                                  step=lambda vlen, m=lmul: self.vlmax(vlen, m), real=real, source=source))
            else:
                out.append(L.Loop(kernels, f"strip-mining, vsetvl {group}", var,
                                  step=lambda vlen, m=lmul: self.vlmax(vlen, m), real=real, source=source))
        return out


def crossing_lengths(shape: VectorShape, vlen: int, *, real: bool = True) -> list[int]:
    """The lengths every run checks at ``vlen``, smallest first: for each loop step s of
    ``shape`` (``VectorShape.steps``), 2s + 1 (two full iterations, then a one-element tail)
    and 3s - 1 (two full iterations, then a tail one short of a full one).  With an unroll by
    two, 3 * step - 1 leaves the leftover loop a full trip and a partial one after the main
    loop ran twice.  With ``real``, also a real model's widest row plus a tail that crosses
    every loop again: ``REAL_ROW + max(step) - 1``.  Tests build their fixed cases (checked after the draws) from
    this list, and the families' size tables (cases/loops.py) read it."""
    steps = shape.steps(vlen)
    out = {m for s in steps for m in (2 * s + 1, 3 * s - 1)}
    if real:
        out.add(REAL_ROW + max(steps) - 1)
    return sorted(out)


def lengths(shape: VectorShape, *, min_value: int = 1, max_value: int = MAX_LENGTH) -> st.SearchStrategy[int]:
    """Vector lengths for a kernel: small ones, each VLMAX / unrolled step -1, +0, +1 at every
    VLEN, and long rows (LONG_ROW up to a real model's widest row and a tail, MAX_LENGTH).
    Shrinks towards the small ones.  Random: the lengths that must be crossed on every run
    come from ``crossing_lengths``, as fixed cases checked after the draws."""
    if min_value < 1 or max_value < min_value:
        raise ValueError(f"lengths: need 1 <= min_value <= max_value, got {min_value}, {max_value}")
    edges = sorted({b + d for b in shape.boundaries() for d in (-1, 0, 1)} | {1, 2, 3})
    edges = [n for n in edges if min_value <= n <= max_value]
    parts: list[st.SearchStrategy[int]] = [st.integers(min_value, min(max_value, 64))] if min_value <= 64 else []
    if edges:
        parts.append(st.sampled_from(edges))
    if max_value >= LONG_ROW:
        parts.append(st.integers(max(min_value, LONG_ROW), max_value))
    if not parts:
        parts.append(st.integers(min_value, max_value))
    return st.one_of(parts)


def explore(request: pytest.FixtureRequest, strategy: st.SearchStrategy, examples: Sequence[object],
            check: Callable[[object], None], *, after: Sequence[object] = ()) -> None:
    """Run ``check`` on every explicit example (every run, in order, before anything random:
    known edge cases and loop-crossing sizes never depend on luck), then on cases Hypothesis
    draws from ``strategy`` and shrinks, then on every case of ``after`` (fixed cases that
    must not pre-empt the shrinking: a bug that a smaller drawn case also shows is reported
    shrunk, not at the larger fixed one).  Explicit examples may depend on the target (its
    VLEN), which ``@example`` on a module-level test cannot.  The Hypothesis database key is
    the test's node id, as for any parametrized ``@given`` test."""
    def case_check(case: object) -> None:
        check(case)

    case_check._hypothesis_internal_add_digest = request.node.nodeid.encode()  # as the pytest plugin does
    test = given(case=strategy)(case_check)
    for e in reversed(examples):
        test = example(case=e)(test)
    # Stop at the first failing example: the failure report records the last kernel call, so
    # running the remaining explicit examples after a failure would record a passing one.
    settings(report_multiple_bugs=False)(test)()
    for case in after:
        try:
            check(case)
        except Unsupported:  # e.g. a fixed case on 2 threads on Spike: the others still run
            continue


# ------------------------------------------------------------- float data

#: The formats kernels read; values are carried as float32 (exactly representable in the format).
FORMATS = ("f32", "f16", "bf16")


def round_to(fmt: str, x: np.ndarray) -> np.ndarray:
    """``x`` rounded to ``fmt`` and returned as float32 (exact)."""
    x = np.asarray(x, np.float32)
    if fmt == "f32":
        return x
    with np.errstate(over="ignore"):
        if fmt == "f16":
            return x.astype(np.float16).astype(np.float32)
        if fmt == "bf16":
            return x.astype(BF16).astype(np.float32)
    raise ValueError(f"unknown format {fmt!r}; expected one of {FORMATS}")


def to_storage(fmt: str, x: np.ndarray) -> np.ndarray:
    """The in-memory form ggml uses: float32, or the raw uint16 bits of fp16 / bf16."""
    x = np.asarray(x, np.float32)
    if fmt == "f32":
        return x
    if fmt == "f16":
        return x.astype(np.float16).view(np.uint16)
    if fmt == "bf16":
        return x.astype(BF16).view(np.uint16)
    raise ValueError(f"unknown format {fmt!r}; expected one of {FORMATS}")


#: Largest power-of-two scale per format that keeps n <= ~9000 products and their sums finite.
_MAX_EXP = {"f32": 40, "f16": 6, "bf16": 40}

VALUE_KINDS = ("normal", "positive", "spiky", "wide")


def float_array(n: int, fmt: str, kind: str, seed: int, scale_exp: int = 0) -> np.ndarray:
    """The array of :func:`float_vectors` for one draw of its choices (also the seeded data of
    fixed cases)."""
    if fmt not in FORMATS:
        raise ValueError(f"float_array: unknown format {fmt!r}; expected one of {FORMATS}")
    if kind not in VALUE_KINDS:
        raise ValueError(f"float_array: unknown kind {kind!r}; expected one of {VALUE_KINDS}")
    lim = _MAX_EXP[fmt]
    scale = 2.0 ** scale_exp
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n)
    if kind == "positive":
        x = np.abs(x)
    elif kind == "spiky":
        k = max(1, n // 64)
        idx = np.concatenate([rng.integers(0, n, k), [n - 1]])
        x[idx] *= 256.0 * (1 + rng.random(idx.size))
    elif kind == "wide":
        x = np.sign(x) * np.exp2(rng.uniform(-lim, lim, n))
        scale = 1.0
    return round_to(fmt, x * scale)


@st.composite
def float_vectors(draw: st.DrawFn, n: int, fmt: str, *, kinds: Sequence[str] = VALUE_KINDS) -> np.ndarray:
    """A float32 array of length ``n`` whose values are representable in ``fmt``.

    kinds: ``normal`` (Gaussian, one drawn scale), ``positive`` (no
    cancellation), ``spiky`` (Gaussian plus a few values 2^8 larger, always
    one of them last, so a dropped tail shows), ``wide`` (each element its
    own binade across the format's safe range).
    """
    if fmt not in FORMATS:
        raise ValueError(f"float_vectors: unknown format {fmt!r}; expected one of {FORMATS}")
    unknown = set(kinds) - set(VALUE_KINDS)
    if not kinds or unknown:
        raise ValueError(f"float_vectors: kinds must be a non-empty subset of {VALUE_KINDS}, got {kinds!r}")
    kind = draw(st.sampled_from(tuple(kinds)), label="kind")
    seed = draw(st.integers(0, 2**32 - 1), label="seed")
    lim = _MAX_EXP[fmt]
    scale_exp = draw(st.integers(-lim // 2, lim // 2), label="scale_exp")
    return float_array(n, fmt, kind, seed, scale_exp)


def small_integer_array(n: int, seed: int, *, zero_free: bool = False, max_abs: int = 8) -> np.ndarray:
    """The array of :func:`small_integer_vectors` for one draw of its choices."""
    v = np.random.default_rng(seed).integers(-max_abs, max_abs + 1, n)
    if zero_free:
        v[v == 0] = 1
    return v.astype(np.float32)


@st.composite
def small_integer_vectors(draw: st.DrawFn, n: int, *, max_abs: int = 8) -> np.ndarray:
    """Integers in [-max_abs, max_abs] as float32: exact in fp32, fp16 and bf16 alike."""
    seed = draw(st.integers(0, 2**32 - 1), label="seed")
    zero_free = draw(st.booleans(), label="zero_free")
    return small_integer_array(n, seed, zero_free=zero_free, max_abs=max_abs)


# ------------------------------------------------- bit patterns by class

def _fp32_edge_pool(target: str) -> np.ndarray:
    """float32 values where rounding to ``target`` (f16 / bf16) is delicate, as uint32 bits:
    every midpoint between neighbouring target values, one float32 ulp either side of it,
    and the largest finite values, infinities, zeros and NaNs."""
    if target == "f16":
        lo = np.arange(0, 0x7C00, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float64)
        hi = np.arange(1, 0x7C01, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float64)
        hi[-1] = 65536.0  # the "next value" after 65504 for overflow purposes
        mids = ((lo + hi) / 2).astype(np.float32)  # exact: fp16 midpoints have <= 12 significant bits
        # Below the smallest subnormal: 2^-25 is the tie between 0 and 2^-24.
    elif target == "bf16":
        hi16 = np.arange(0, 0x7F80, dtype=np.uint32)
        mids = ((hi16 << 16) | 0x8000).view(np.float32)  # exactly halfway between hi16 and hi16 + 1
    else:
        raise ValueError(f"unknown target {target!r}")
    m = mids.view(np.uint32)
    pool = np.concatenate([m, m - 1, m + 1])
    specials = np.array([0x00000000, 0x7F7FFFFF, 0x7F800000, 0x7FC00000, 0x7F800001, 0x7FBFFFFF,
                         0x7FFFFFFF, 0x00000001, 0x007FFFFF, 0x00800000, 0x3F800000], np.uint32)
    pool = np.concatenate([pool, specials])
    return np.concatenate([pool, pool | np.uint32(0x80000000)])


FP32_CLASSES = ("edges", "random_bits", "in_range")


def fp32_narrowing_array(n: int, target: str, seed: int, classes: Sequence[str] = FP32_CLASSES) -> np.ndarray:
    """The array of :func:`fp32_for_narrowing` for one draw of its choices."""
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, len(classes), n)
    out = np.empty(n, np.uint32)
    edges = _fp32_edge_pool(target)
    for ci, cls in enumerate(classes):
        k = int(np.sum(pick == ci))
        if cls == "edges":
            vals = edges[rng.integers(0, edges.size, k)]
        elif cls == "random_bits":
            vals = rng.integers(0, 2**32, k, dtype=np.uint64).astype(np.uint32)
        else:
            top = 65504.0 if target == "f16" else 3.0e38
            vals = (rng.uniform(-1, 1, k) * np.exp2(rng.uniform(-30, np.log2(top), k))).astype(np.float32).view(np.uint32)
        out[pick == ci] = vals
    return out.view(np.float32)


@st.composite
def fp32_for_narrowing(draw: st.DrawFn, n: int, target: str) -> np.ndarray:
    """float32 inputs for a conversion to ``target`` (f16 / bf16): a mix of rounding edges
    (ties, ties +- 1 ulp, overflow, subnormals, NaN payloads), random bit patterns and values
    inside the target's range."""
    seed = draw(st.integers(0, 2**32 - 1), label="seed")
    classes = draw(st.lists(st.sampled_from(FP32_CLASSES), min_size=1, max_size=3, unique=True), label="classes")
    return fp32_narrowing_array(n, target, seed, classes)


def all_edges_fp32(target: str) -> np.ndarray:
    """Every rounding edge of :func:`fp32_for_narrowing` at once, for a sweep in one call."""
    return _fp32_edge_pool(target).view(np.float32)


def uint16_array(n: int, seed: int) -> np.ndarray:
    """The array of :func:`uint16_patterns` for one seed."""
    return np.random.default_rng(seed).integers(0, 1 << 16, n, dtype=np.uint32).astype(np.uint16)


@st.composite
def uint16_patterns(draw: st.DrawFn, n: int) -> np.ndarray:
    """Uniformly random 16-bit patterns: every class of fp16 / bf16 value (zeros, subnormals,
    normals, infinities, NaNs) appears in long arrays; all 65536 are swept separately."""
    return uint16_array(n, draw(st.integers(0, 2**32 - 1), label="seed"))

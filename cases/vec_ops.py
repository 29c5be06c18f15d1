"""The rest of the floating-point vector kernels (vec.h / vec.cpp) against NumPy oracles.

Kernels: ``ggml_vec_mad_f32``, ``_mad1_f32``, ``_scale_f32``, ``_mad_f16``,
``_scale_f16``, ``_mad_f32_unroll``, ``_dot_f16_unroll``, ``_silu_f32``,
``_swiglu_f32``, ``_soft_max_f32`` and ``_cvar_f32`` (the dot products are in
test_vec_dot.py).  One table, :data:`VEC_OPS`, says for each how it is
called, which extension selects its RVV path, how its RVV loop walks the
data (for the tail lengths) and which bound applies; the bound's derivation
is written beside the entry and in the oracle it names (oracles/vec_ops.py).

Units: elementwise results are measured in ULPs of their format at the
exact value (oracles/ulp.py; a correctly rounded result is within 0.5 ULP);
sums whose order is unspecified get an absolute bound derived from their
accumulation.  Where a kernel's arithmetic is fully determined (the
multiply-adds, the scalings, the centring) the oracle also gives the
bit-exact result, and the comparison is bitwise: a half-ULP check alone
would miss a wrong tie.

Tests:

* ``test_vec_op`` -- random data of several kinds with a few special
  values planted at random places (the last element included), every tail
  length, in-place aliasing where ggml uses it; then, at the test's VLEN,
  seeded data at every length of ``S.crossing_lengths`` (every loop level
  crossed twice plus a remainder, then a real model's widest row plus a
  tail; each kernel's ``fixed`` case).
* ``test_vec_op_edges`` -- named edge cases per kernel: IEEE special values
  crossed with special scalars, the exp overflow / underflow thresholds,
  softmax rows with -inf entries, one dominant entry, all equal.
* ``test_expf_sweep`` -- the polynomial exp against float64 exp over a
  strided sweep of every float32 (the whole of float32 with
  ``RVVDIFF_EXPF_EXHAUSTIVE=1``): the measurement behind :data:`EXPF_ULPS`.

What the tree has (``scan``, registered with cases/coverage.py and checked by
cases/test_coverage.py): every function of the tree's vec.h / vec.cpp with an
RVV path (harness/ggml/csource.py: ``rvv_functions``) is known to some test; a new
one is "uncovered" and fails test_coverage, named with file:line.  A kernel
of the table the tree lacks is skipped as "not in this tree" (each entry's
``requires``).  Whether a test runs the RVV or the scalar path of a kernel is
read from the tree too (``rvv_path``: does the function, as the test's ISA
build compiles it, call RVV intrinsics); ``rvv_when`` records the pinned
tree's answer.

Loop sizes (the table in docs/vec_ops.md, from the ``VectorShape`` of each
entry): mad_f32, mad1_f32, scale_f32 and mad_f32_unroll strip-mine at e32m8
(mad_f32_unroll runs its GGML_VEC_MAD_UNROLL rows inside each trip); mad_f16
and scale_f16 run an unrolled main loop of 2 x VLMAX(e16m4) and a leftover
vsetvl loop, dot_f16_unroll the same at e16m2; silu, swiglu, soft_max and cvar
strip-mine at e32m2.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np
from hypothesis import strategies as st

from cases import coverage
from cases import loops as L
from cases import strategies as S
from harness.check import observe
from harness.check.compare import assert_bitwise_equal, assert_within_bound, assert_within_ulps
from harness.core.config import ISA_BUILDS, IsaBuild
from harness.emulators.protocol import Buf, In, InOut, Out
from harness.ggml import csource, tree
from harness.ggml.source import GgmlSource
from harness.ggml.tree import Tree
from harness.plugin.targets import session
from oracles import vec_ops as VO
from oracles.bounds import gamma
from oracles.floats import dot_exact
from oracles.ulp import allowed_ulps, ulp_error

# ------------------------------------------------------------------ the exp bound

#: Error bound of ggml's polynomial exp (``ggml_v_expf_m2``, vec.h), in ULPs of its result.
#: vec.h documents "the maximum error is 1.45358 plus 0.5 ulps" (from the Arm optimized-routines
#: algorithm it adapts); that figure is rounded.  Measured over all 2^32 float32 inputs on this
#: machine (softmax with max = 0 as in test_expf_sweep, at VLEN 1024, zvfh build, 24 min)
#: against float64 exp: worst 1.9535802 ULP at x = -5.1986871 (0xc0a65ba5) -- 2e-7 ULP above the
#: documented 1.95358 --, worst 1.2881 ULP where the result is subnormal (x = -87.890755); every
#: NaN input gives NaN; overflow to +inf exactly where fp32 expf overflows, never earlier.  The
#: bound is that measured worst case rounded up; test_expf_sweep with RVVDIFF_EXPF_EXHAUSTIVE=1
#: (same target, 23 min) then passed with worst 1.954 ULP.  (The polynomial is elementwise and
#: the same instruction sequence at every VLEN; the sampled sweep re-checks it at each VLEN and
#: build.)
EXPF_ULPS = 1.9536

# ------------------------------------------------------------------ values

F32_MAX = float(np.finfo(np.float32).max)

#: fp32 special values: zeros, the subnormal range, the normal range's ends, infinities, NaN.
SPECIAL_F32 = np.array([0.0, -0.0, 2.0 ** -149, -(2.0 ** -149), 2.0 ** -127 * 1.5, 2.0 ** -126,
                        -(2.0 ** -126), 1.0, -1.0, 3.0, F32_MAX, -F32_MAX, np.inf, -np.inf, np.nan],
                       np.float32)
#: fp16 special values: zeros, subnormals, the smallest normal, the largest finite, infinities, NaN.
SPECIAL_F16 = np.array([0.0, -0.0, 2.0 ** -24, -(2.0 ** -24), 2.0 ** -15 * 1.5, 2.0 ** -14, 1.0, -1.0,
                        3.0, 65504.0, -65504.0, np.inf, -np.inf, np.nan], np.float32)
#: Scales: fp16-exact and not, the fp16 rounding edges of the scale itself (65504, 65519 rounds
#: down, 65520 rounds to inf, 2^-25 ties to 0, 2^-25 + 1 ulp rounds up to 2^-24), and specials.
SPECIAL_SCALES = (0.0, -0.0, 1.0, -0.5, 0.1, 1 / 3, 2.0 ** -25, 2.0 ** -25 * (1 + 2 ** -23), 3e-8,
                  65504.0, 65519.0, 65520.0, 1e5, 2.0 ** -140, F32_MAX, np.inf, -np.inf, np.nan)
_SPECIAL = {"f32": SPECIAL_F32, "f16": SPECIAL_F16}


def _between(lo: float, hi: float) -> np.ndarray:
    """Every float32 in [lo, hi] (same sign), as float32."""
    a, b = np.array([lo, hi], np.float32).view(np.uint32)
    return np.arange(min(a, b), max(a, b) + 1, dtype=np.uint32).view(np.float32)


#: Where exp and SiLU change regime, every float32 in a small window around each (both signs
#: where both matter): fp32 exp overflow (ln FLT_MAX = 88.7228), the polynomial's scale-splitting
#: path (|n| > 126: |x| > 126.5 ln 2 = 87.682) and its flush (|n| > 192: |x| > 192.5 ln 2 =
#: 133.43), subnormal results (x < ln 2^-126 = -87.337), the smallest subnormal (ln 2^-149 =
#: -103.28) and the underflow to zero (ln 2^-150 = -103.97).
EXP_EDGES = np.concatenate([_between(a, b) for a, b in (
    (88.70, 88.75), (87.66, 87.70), (-87.66, -87.70), (-87.32, -87.36), (-103.25, -103.30), (-103.95, -104.0),
    (133.40, 133.46), (-133.40, -133.46))])


@st.composite
def rows(draw: st.DrawFn, n: int, fmt: str, *, spread: tuple[float, float] | None = None) -> np.ndarray:
    """An array of ``n`` values representable in ``fmt`` (as float32): the shared kinds of
    cases.strategies.float_vectors, or (with ``spread``) uniform over that interval, where an
    activation's behaviour changes; then 0 to 3 special values of the format planted at random
    places, the last element among them when there are any, so a mishandled tail shows."""
    if spread is not None and draw(st.booleans(), label="uniform_spread"):
        seed = draw(st.integers(0, 2**32 - 1), label="seed")
        x = S.round_to(fmt, np.random.default_rng(seed).uniform(*spread, n))
    else:
        x = draw(S.float_vectors(n, fmt), label="values")
    k = draw(st.integers(0, 3), label="n_special")
    if k:
        seed = draw(st.integers(0, 2**32 - 1), label="special_seed")
        rng = np.random.default_rng(seed)
        pool = _SPECIAL[fmt]
        at = np.concatenate([rng.integers(0, n, k - 1), [n - 1]])
        x = x.copy()
        x[at] = pool[rng.integers(0, pool.size, k)]
    return x


def scales(*, fp16_edges: bool = False) -> st.SearchStrategy[float]:
    """fp32 scalar parameters: moderate values (most examples), any float32 (Hypothesis's float
    strategy favours 0, infinities, NaN, subnormals and the extremes) and, for the fp16 kernels,
    the scale's own fp16 rounding edges."""
    parts = [st.floats(-8, 8, width=32), st.floats(width=32)]
    if fp16_edges:
        parts.append(st.sampled_from(SPECIAL_SCALES))
    return st.one_of(parts)


# ------------------------------------------------------------------ the table


@dataclass(frozen=True)
class VecOpCase:
    """One call: what goes over the wire, and the values the oracle needs."""

    n: int
    ip: tuple[int, ...]      # integer parameters after n
    fp: tuple[float, ...]    # float parameters
    bufs: tuple[Buf, ...]
    values: dict[str, np.ndarray]  # inputs by role, as float32 values
    label: str = ""          # names an edge case in failure messages

    def __repr__(self) -> str:
        """Short, for Hypothesis's failing examples: the values, not the wire bytes."""
        vals = ", ".join(f"{k}={np.array2string(np.asarray(v), threshold=16, precision=9)}"
                         for k, v in self.values.items())
        return f"VecOpCase(n={self.n}, ip={self.ip}, fp={self.fp}, {vals}" + (f", {self.label!r})" if self.label else ")")

    def _repr_pretty_(self, p, cycle) -> None:  # Hypothesis's printer of failing examples
        p.text(repr(self))


@dataclass(frozen=True, repr=False)
class VecOp(S.KernelSpec):
    """One ggml vector kernel: how it is called, its RVV loop, its oracle and bound."""

    name: str              # ggml_vec_<name>; the server's kernel is vec_<name>; the test id
    fmt: str               # format of the output array (f32 or f16)
    shape: S.VectorShape   # its RVV loop: element width, LMUL, unroll (for tail lengths)
    rvv_when: str          # extension that selects the RVV path in the pinned tree ("v": every build)
    draw: Callable[..., st.SearchStrategy[VecOpCase]]   # (spec, n, source) -> strategy of cases
    oracle: Callable[[VecOpCase, bool], VO.Elementwise]  # (case, rvv path?) -> the output's reference
    bound: str             # the bound and where it comes from (failure messages, docs)
    edges: Callable[[VecOp, GgmlSource], list[VecOpCase]]   # (spec, source) -> named edge cases
    fixed: Callable[[VecOp, int, GgmlSource], VecOpCase]    # (spec, n, source) -> seeded case of length n
    result: Callable[[VecOpCase, np.ndarray], VO.Accumulated] | None = None  # a returned double

    @property
    def function(self) -> str:
        return f"ggml_vec_{self.name}"

    @property
    def requires(self) -> tuple[str, ...]:
        """What the kernel server's adapter calls (harness/plugin/ skips the kernel as "not in
        this tree" when the tree lacks it)."""
        return (self.function,)

    def rvv(self, src: GgmlSource, isa: IsaBuild) -> bool:
        """The tree's function, as ``isa`` compiles it, calls RVV intrinsics (else it runs a scalar
        loop); in the pinned tree that is exactly the builds with ``rvv_when``."""
        return rvv_path(src, isa, self.function, VEC_FILES)


def _storage(fmt: str, x: np.ndarray) -> np.ndarray:
    return S.to_storage(fmt, np.asarray(x, np.float32))


def elementwise_case(spec: VecOp, n: int, values: dict[str, np.ndarray], fp: Sequence[float], *,
                     inputs: Sequence[str], update: str | None = None, inplace: bool | None = None,
                     returns: bool = False, label: str = "") -> VecOpCase:
    """The buffers of a kernel over arrays of length n: ``inputs`` as In buffers in order, then
    the output -- ``update`` as an InOut buffer (y op= ...), or a fresh Out array, or with
    ``inplace`` the single input itself as InOut (y == x) -- then an 8-byte Out for a returned
    double.  ``inplace`` not None adds it as an integer parameter (the adapter's flag)."""
    bufs: list[Buf] = []
    if inplace:
        bufs.append(InOut(_storage(spec.fmt, values[inputs[0]])))
    else:
        bufs += [In(_storage(spec.fmt, values[a])) for a in inputs]
        if update is not None:
            bufs.append(InOut(_storage(spec.fmt, values[update])))
        else:
            bufs.append(Out(n * np.dtype(np.float32 if spec.fmt == "f32" else np.uint16).itemsize))
    if returns:
        bufs.append(Out(8))
    ip = () if inplace is None else (int(inplace),)
    # The kernels take `const float` scalars: carry them as float32 values, so that the value
    # on the wire, the one the kernel sees and the one the oracle uses are the same.
    return VecOpCase(n, ip, tuple(float(np.float32(v)) for v in fp), tuple(bufs), values, label)


# --- per-signature draws: each returns a strategy of VecOpCase for length n


@st.composite
def draw_update(draw: st.DrawFn, spec: VecOp, n: int, src: GgmlSource, *, with_x: bool) -> VecOpCase:
    """y op= (x *) v: mad_f32, mad_f16 (with x), scale_f32, scale_f16 (without)."""
    values = {"y": draw(rows(n, spec.fmt), label="y")}
    if with_x:
        values["x"] = draw(rows(n, spec.fmt), label="x")
    v = draw(scales(fp16_edges=spec.fmt == "f16"), label="v")
    return elementwise_case(spec, n, values, [v], inputs=("x",) if with_x else (), update="y")


@st.composite
def draw_map(draw: st.DrawFn, spec: VecOp, n: int, src: GgmlSource, *, gates: bool = False, n_scalars: int = 0,
             spread: tuple[float, float] | None = None, aliasing: bool = True, returns: bool = False,
             scalar: Callable[[np.ndarray], st.SearchStrategy[float]] | None = None) -> VecOpCase:
    """y = f(x[, g]; scalars): mad1_f32, silu, swiglu, soft_max, cvar; y == x drawn where ggml
    calls the kernel in place."""
    x = draw(rows(n, "f32", spread=spread), label="x")
    values = {"x": x}
    if gates:
        values["g"] = draw(rows(n, "f32"), label="g")
    make = scalar or (lambda _x: scales())
    fp = [draw(make(x), label=f"scalar{i}") for i in range(n_scalars)]
    inplace = draw(st.booleans(), label="inplace") if aliasing else None
    return elementwise_case(spec, n, values, fp, inputs=("x", "g") if gates else ("x",), inplace=inplace,
                            returns=returns)


def _row_max(x: np.ndarray) -> st.SearchStrategy[float]:
    """softmax's max: the row's maximum (how ggml calls it), or any other value."""
    finite = x[np.isfinite(x)]
    m = float(np.max(x)) if not np.any(np.isnan(x)) else float("nan")
    parts = [st.just(m)] * 3 + [st.floats(-100, 100, width=32)]
    if finite.size:
        parts.append(st.just(float(np.max(finite))))
    return st.one_of(parts)


def _near_mean(x: np.ndarray) -> st.SearchStrategy[float]:
    """cvar's mean: the row's mean rounded to fp32 (how ggml calls it), or any other value."""
    with np.errstate(invalid="ignore", over="ignore"):
        m = float(np.float32(np.mean(x.astype(np.float64))))
    return st.one_of(st.just(m), st.just(m), st.floats(-1e6, 1e6, width=32), st.floats(width=32))


def mad_unroll_case(x: np.ndarray, v: np.ndarray, y: np.ndarray, *, pad: int, vpad: int, label: str = "") -> VecOpCase:
    """ggml_vec_mad_f32_unroll's buffers: the K rows of x ``pad`` floats apart beyond n (row
    stride xs), the K scales ``vpad`` floats apart (stride vs), y updated in place."""
    k, n = x.shape
    xbuf = np.zeros((k, n + pad), np.float32)
    xbuf[:, :n] = x
    vbuf = np.zeros((k, 1 + vpad), np.float32)
    vbuf[:, 0] = v
    bufs = (In(xbuf.reshape(-1)[: (k - 1) * (n + pad) + n]), In(vbuf.reshape(-1)[: (k - 1) * (1 + vpad) + 1]),
            InOut(y))
    return VecOpCase(n, ((n + pad) * 4, (1 + vpad) * 4), (), bufs, {"x": x, "v": v, "y": y}, label)


def dot_unroll_case(x: np.ndarray, y: np.ndarray, *, pad: int, label: str = "") -> VecOpCase:
    """ggml_vec_dot_f16_unroll's buffers: the K fp16 rows of x ``pad`` elements apart beyond n
    (row stride xs), y, and the K float results."""
    k, n = x.shape
    xbuf = np.zeros((k, n + pad), np.uint16)
    xbuf[:, :n] = S.to_storage("f16", x)
    bufs = (In(xbuf.reshape(-1)[: (k - 1) * (n + pad) + n]), In(S.to_storage("f16", y)), Out(4 * k))
    return VecOpCase(n, ((n + pad) * 2,), (), bufs, {"x": x, "y": y}, label)


@st.composite
def draw_mad_unroll(draw: st.DrawFn, spec: VecOp, n: int, src: GgmlSource) -> VecOpCase:
    """ggml_vec_mad_f32_unroll: K rows of x, K scales, y; padded strides."""
    k = unroll_factor(src, "GGML_VEC_MAD_UNROLL")
    pad = draw(st.integers(0, 3), label="row_pad")
    vpad = draw(st.integers(0, 2), label="v_pad")
    x = np.stack([draw(S.float_vectors(n, "f32"), label=f"x{i}") for i in range(k)])
    v = np.asarray([draw(st.floats(-4, 4, width=32), label=f"v{i}") for i in range(k)], np.float32)
    y = draw(rows(n, "f32"), label="y")
    return mad_unroll_case(x, v, y, pad=pad, vpad=vpad)


@st.composite
def draw_dot_unroll(draw: st.DrawFn, spec: VecOp, n: int, src: GgmlSource) -> VecOpCase:
    """ggml_vec_dot_f16_unroll: K fp16 rows of x against one fp16 y.  Half the examples use small
    integers, for which every partial sum is exact (the bound becomes 0)."""
    k = unroll_factor(src, "GGML_VEC_DOT_UNROLL")
    pad = draw(st.integers(0, 3), label="row_pad")
    if draw(st.booleans(), label="small_integers"):
        x = np.stack([draw(S.small_integer_vectors(n), label=f"x{i}") for i in range(k)])
        y = draw(S.small_integer_vectors(n), label="y")
    else:
        x = np.stack([draw(S.float_vectors(n, "f16"), label=f"x{i}") for i in range(k)])
        y = draw(S.float_vectors(n, "f16"), label="y")
    return dot_unroll_case(x, y, pad=pad)


# --- seeded cases of a given length: the fixed cases at the loop-crossing lengths


def fixed_update(spec: VecOp, n: int, src: GgmlSource, *, with_x: bool) -> VecOpCase:
    """y op= (x *) 0.1 over seeded spiky rows (a large value last, so a dropped or doubled tail
    shows in the bit-exact comparison)."""
    values = {"y": S.float_array(n, spec.fmt, "spiky", seed=n)}
    if with_x:
        values["x"] = S.float_array(n, spec.fmt, "spiky", seed=n + 1)
    return elementwise_case(spec, n, values, [0.1], inputs=("x",) if with_x else (), update="y",
                            label=f"seeded, n={n}")


def fixed_map(spec: VecOp, n: int, src: GgmlSource, *, gates: bool = False, aliasing: bool = True,
              returns: bool = False, scalars: Callable[[np.ndarray], Sequence[float]] = lambda x: ()) -> VecOpCase:
    """y = f(x[, g]; scalars) over a seeded Gaussian row of scale 4 (SiLU and exp well inside
    their range), in place where ggml calls the kernel in place; ``scalars(x)`` as ggml passes
    them (the row's maximum, its mean)."""
    values = {"x": S.float_array(n, "f32", "normal", seed=n, scale_exp=2)}
    if gates:
        values["g"] = S.float_array(n, "f32", "normal", seed=n + 1)
    return elementwise_case(spec, n, values, list(scalars(values["x"])), inputs=("x", "g") if gates else ("x",),
                            inplace=True if aliasing else None, returns=returns, label=f"seeded, n={n}")


def _mean_fp32(x: np.ndarray) -> tuple[float]:
    return (float(np.float32(np.mean(x.astype(np.float64)))),)


def fixed_mad_unroll(spec: VecOp, n: int, src: GgmlSource) -> VecOpCase:
    """The K rows, K scales and y of mad_f32_unroll, seeded; rows one float apart beyond n."""
    k = unroll_factor(src, "GGML_VEC_MAD_UNROLL")
    rng = np.random.default_rng(n)
    x = np.stack([S.float_array(n, "f32", "normal", seed=n + 1 + i) for i in range(k)])
    v = rng.uniform(-4, 4, k).astype(np.float32)
    return mad_unroll_case(x, v, S.float_array(n, "f32", "spiky", seed=n), pad=1, vpad=1, label=f"seeded, n={n}")


def fixed_dot_unroll(spec: VecOp, n: int, src: GgmlSource) -> VecOpCase:
    """The K fp16 rows and y of dot_f16_unroll as small integers (exact: a lost or doubled
    element always shows), rows two elements apart beyond n."""
    k = unroll_factor(src, "GGML_VEC_DOT_UNROLL")
    x = np.stack([S.small_integer_array(n, seed=n + 1 + i, zero_free=True) for i in range(k)])
    return dot_unroll_case(x, S.small_integer_array(n, seed=n), pad=2, label=f"seeded, n={n}")



@cache
def unroll_factor(src: GgmlSource, macro: str) -> int:
    """An unroll factor of the tree under test (``#define GGML_VEC_MAD_UNROLL 32`` in vec.h, as an
    RVV build reads it)."""
    inv = tree.of(src)
    value = inv.file(VEC_FILES[0]).defines(csource.build_macros(ALL_EXTENSIONS, _headers(src))).get(macro)
    if value is None:
        raise AssertionError(f"{macro} is not defined in {src.ggml / VEC_FILES[0]}: the adapter and this "
                             "test need updating")
    return int(value)


# --- oracles adapted to VecOpCase


def _dot_unroll_oracle(case: VecOpCase, rvv: bool) -> VO.Elementwise:
    """The K dot products, each within gamma(n + 1) sum|x y| (as test_vec_dot.py derives: one fp32
    rounding per term -- the fp16 products are exact in fp32 --, any reduction order, the store),
    as ULPs of the result: (gamma(n) sum|x y| + 0.5 ulp) / ulp.  Exact (0 ULP) when all products
    are integers and sum|x y| < 2^24: every partial sum is then an integer fp32 holds, in any
    order, so a dropped or doubled element always shows.  The sign of a zero sum depends on the
    order of the additions, so zeros of either sign match."""
    ex, bound = [], []
    y = case.values["y"]
    for row in case.values["x"]:
        e, abs_sum = dot_exact(row, y)
        ex.append(e)
        with np.errstate(invalid="ignore"):
            integral = np.all(np.mod(row, 1) == 0) and np.all(np.mod(y, 1) == 0)
        bound.append(0.0 if integral and abs_sum < 2**24 else gamma(case.n) * abs_sum)
    ex64, b = np.array(ex), np.array(bound)
    return VO.Elementwise(ex64, np.where(b == 0, 0.0, allowed_ulps(ex64, b, "f32")), "f32", signed_zeros=False)


# --- edge cases: deterministic, named in failure messages


def _cross(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every pair (a_i, b_j), as two flat arrays."""
    return np.repeat(a, b.size), np.tile(b, a.size)


def edges_update(spec: VecOp, src: GgmlSource, *, with_x: bool) -> list[VecOpCase]:
    """y op= (x *) v over every special y (paired with every special x) for every special
    scale.  Expected (IEEE, as the scalar reference): NaN propagates, 0 * inf is NaN, inf - inf
    is NaN, overflow gives inf, subnormals are kept; for mad_f16 / scale_f16 on the RVV path the
    scale is first rounded to fp16 (so 65520 and 1e5 act as inf, 2^-25 as 0)."""
    pool = _SPECIAL[spec.fmt]
    x, y = _cross(pool, pool) if with_x else (None, pool)
    values = {"y": y} if x is None else {"x": x, "y": y}
    return [elementwise_case(spec, y.size, values, [v], inputs=("x",) if with_x else (), update="y",
                             label=f"special values, v={v!r}") for v in SPECIAL_SCALES]


def edges_mad1(spec: VecOp, src: GgmlSource) -> list[VecOpCase]:
    """x*s + b for every special x, every special scale s and every special b, out of place and
    in place (same IEEE expectations as the fma in mad_f32)."""
    return [elementwise_case(spec, SPECIAL_F32.size, {"x": SPECIAL_F32}, [s, b], inputs=("x",), inplace=inplace,
                             label=f"special values, s={s!r}, b={float(b)!r}, inplace={inplace}")
            for s in SPECIAL_SCALES for b in SPECIAL_F32 for inplace in (False, True)]


def edges_activation(spec: VecOp, src: GgmlSource, *, gates: bool) -> list[VecOpCase]:
    """SiLU over every special value and every float32 near the exp's regime edges (both
    signs); SwiGLU over every special x crossed with every special gate, and the edges with
    ordinary gates.  Expected (scalar reference x / (1 + expf(-x)) [* g]): silu(NaN) = NaN,
    silu(+inf) = +inf, silu(-inf) = -inf/inf = NaN, silu(-0) = -0, silu(x) = -0 once
    expf(-x) overflows (x < -88.72); any NaN, and 0 * inf, give NaN."""
    edges = np.concatenate([SPECIAL_F32, EXP_EDGES, -EXP_EDGES])
    if not gates:
        return [elementwise_case(spec, edges.size, {"x": edges}, [], inputs=("x",), inplace=inplace,
                                 label=f"special values and exp edges, inplace={inplace}") for inplace in (False, True)]
    x, g = _cross(SPECIAL_F32, SPECIAL_F32)
    ordinary = np.resize(np.array([1.5, -3.0, 2.0 ** -20, 1e30], np.float32), edges.size)
    return [elementwise_case(spec, x.size, {"x": x, "g": g}, [], inputs=("x", "g"), label="special x and g"),
            elementwise_case(spec, edges.size, {"x": edges, "g": ordinary}, [], inputs=("x", "g"),
                             label="exp edges")]


def edges_soft_max(spec: VecOp, src: GgmlSource) -> list[VecOpCase]:
    """Rows the issue names, with what the scalar reference (expf(x - max), summed in double)
    gives: -inf entries -> 0; one dominant entry -> that 1 and 0 elsewhere (exp underflows);
    all equal -> exactly 1 everywhere and a sum of exactly n; all -inf with max -inf -> NaN
    (-inf - -inf); NaN entries -> NaN; entries above the given max by > 88.72 -> +inf; the
    exp's regime edges with max = 0; special values with max = 0 and max = +inf."""
    n = 77
    rng = np.random.default_rng(4)
    base = rng.standard_normal(n).astype(np.float32)
    rows_ = {
        "-inf entries": np.where(np.arange(n) % 3 == 1, -np.inf, base).astype(np.float32),
        "one dominant entry": np.where(np.arange(n) == 40, 1000.0, base).astype(np.float32),
        "all equal": np.full(n, 3.25, np.float32),
        "all -inf": np.full(n, -np.inf, np.float32),
        "a NaN entry": np.where(np.arange(n) == n - 1, np.nan, base).astype(np.float32),
        "special values": SPECIAL_F32,
    }
    cases = []
    for label, x in rows_.items():
        for inplace in (False, True):
            mx = float(np.max(x))
            cases.append(elementwise_case(spec, x.size, {"x": x}, [mx], inputs=("x",), inplace=inplace, returns=True,
                                          label=f"{label}, max={mx!r}, inplace={inplace}"))
    for label, x, mx in (("entries above max", base * 100, -10.0), ("exp edges", np.concatenate([EXP_EDGES, -EXP_EDGES]), 0.0),
                         ("special values", SPECIAL_F32, 0.0), ("special values", SPECIAL_F32, np.inf)):
        cases.append(elementwise_case(spec, x.size, {"x": x.astype(np.float32)}, [mx], inputs=("x",), inplace=False,
                                      returns=True, label=f"{label}, max={mx!r}"))
    return cases


def edges_cvar(spec: VecOp, src: GgmlSource) -> list[VecOpCase]:
    """Rows with what the scalar reference gives: a constant row centred on itself -> zeros and
    variance 0; special values (NaN -> NaN variance, inf -> inf); squares that overflow fp32
    (|y| > 1.8e19 -> inf) or underflow to subnormals and zero; small integers (exact)."""
    n = 67
    rows_ = {
        "constant row": (np.full(n, -2.75, np.float32), -2.75),
        "special values": (SPECIAL_F32, 0.0),
        "special values, mean 1": (SPECIAL_F32, 1.0),
        "squares overflow": (np.linspace(-3e19, 3e19, n).astype(np.float32), 0.0),
        "squares underflow": (np.linspace(-2e-22, 2e-22, n).astype(np.float32), 0.0),
        "small integers": (np.arange(n, dtype=np.float32) % 17 - 8, 1.0),
    }
    return [elementwise_case(spec, x.size, {"x": x}, [mean], inputs=("x",), inplace=inplace, returns=True,
                             label=f"{label}, inplace={inplace}")
            for label, (x, mean) in rows_.items() for inplace in (False, True)]


def edges_mad_unroll(spec: VecOp, src: GgmlSource) -> list[VecOpCase]:
    """Special values in one row of x, in the scales and in y: NaN and 0 * inf give NaN, inf
    propagates, inf - inf is NaN, in row order (the fma chain's model says where)."""
    k = unroll_factor(src, "GGML_VEC_MAD_UNROLL")
    n = SPECIAL_F32.size
    x = np.ones((k, n), np.float32)
    x[k // 2] = SPECIAL_F32
    out = []
    for v_special in (0.0, np.inf, np.nan, 2.0 ** -149):
        v = np.full(k, 0.5, np.float32)
        v[k // 2] = v_special
        v[-1] = -v_special if np.isfinite(v_special) else 1.0
        out.append(mad_unroll_case(x, v, SPECIAL_F32[::-1].copy(), pad=1, vpad=0,
                                   label=f"special values, v[{k // 2}]={v_special!r}"))
    return out


def edges_dot_unroll(spec: VecOp, src: GgmlSource) -> list[VecOpCase]:
    """Small integers with one NaN / +-inf planted in a row (scalar reference: a NaN makes the dot
    NaN, an infinity times a non-zero finite makes it +-inf; the other row stays exact), at a
    length with a tail at every VLEN."""
    k = unroll_factor(src, "GGML_VEC_DOT_UNROLL")
    n = 133
    rng = np.random.default_rng(7)
    y = rng.integers(1, 9, n).astype(np.float32)
    out = []
    for poison in (np.nan, np.inf, -np.inf):
        for at in (0, n // 2, n - 1):
            x = rng.integers(-8, 9, (k, n)).astype(np.float32)
            x[0, at] = poison
            out.append(dot_unroll_case(x, y, pad=2, label=f"x[0][{at}]={poison!r}"))
    return out


VEC_OPS = [
    # vfmadd.vf at e32/m8 in one vsetvl loop, every build.
    VecOp("mad_f32", "f32", S.VectorShape(32, (8,)), "v",
          draw=lambda spec, n, src: draw_update(spec, n, src, with_x=True),
          oracle=lambda c, rvv: VO.mad_f32(c.values["x"], c.values["y"], c.fp[0]),
          bound="0.5 ULP, bit-exact: one fused multiply-add per element",
          fixed=lambda spec, n, src: fixed_update(spec, n, src, with_x=True),
          edges=lambda spec, src: edges_update(spec, src, with_x=True)),
    # vfmadd.vf onto a splat of b at e32/m8; ggml calls it in place (ops.cpp, scale with a bias).
    VecOp("mad1_f32", "f32", S.VectorShape(32, (8,)), "v",
          draw=lambda spec, n, src: draw_map(spec, n, src, n_scalars=2),
          oracle=lambda c, rvv: VO.mad1_f32(c.values["x"], c.fp[0], c.fp[1]),
          bound="0.5 ULP, bit-exact: one fused multiply-add per element",
          fixed=lambda spec, n, src: fixed_map(spec, n, src, scalars=lambda x: (0.75, -1.5)),
          edges=edges_mad1),
    # vfmul.vf at e32/m8.
    VecOp("scale_f32", "f32", S.VectorShape(32, (8,)), "v",
          draw=lambda spec, n, src: draw_update(spec, n, src, with_x=False),
          oracle=lambda c, rvv: VO.scale_f32(c.values["y"], c.fp[0]),
          bound="0.5 ULP, bit-exact: one multiply per element",
          fixed=lambda spec, n, src: fixed_update(spec, n, src, with_x=False),
          edges=lambda spec, src: edges_update(spec, src, with_x=False)),
    # zvfh: scale rounded to fp16, vfmacc.vf at e16/m4, unrolled by two, then a vsetvl tail loop;
    # without zvfh a scalar loop in fp32.
    VecOp("mad_f16", "f16", S.VectorShape(16, (4,), 2), "zvfh",
          draw=lambda spec, n, src: draw_update(spec, n, src, with_x=True),
          oracle=lambda c, rvv: VO.mad_f16(c.values["x"], c.values["y"], c.fp[0], fp16_arith=rvv),
          bound="zvfh: 0.5 ULP of y + x*fp16(v), bit-exact (the scale rounded to fp16, one fp16 fma); "
                "scalar: one fp16 rounding of an fp32 intermediate within u32 (|xv| + |y + xv|), "
                "bit-exact with or without contraction",
          fixed=lambda spec, n, src: fixed_update(spec, n, src, with_x=True),
          edges=lambda spec, src: edges_update(spec, src, with_x=True)),
    # zvfh: scale rounded to fp16, vfmul.vf at e16/m4, unrolled by two, then a tail loop.
    VecOp("scale_f16", "f16", S.VectorShape(16, (4,), 2), "zvfh",
          draw=lambda spec, n, src: draw_update(spec, n, src, with_x=False),
          oracle=lambda c, rvv: VO.scale_f16(c.values["y"], c.fp[0], fp16_arith=rvv),
          bound="zvfh: 0.5 ULP of y*fp16(v), bit-exact; scalar: fp16(fp32(y*v)), bit-exact",
          fixed=lambda spec, n, src: fixed_update(spec, n, src, with_x=False),
          edges=lambda spec, src: edges_update(spec, src, with_x=False)),
    # e32/m8 vsetvl loop; y stays in a register across the K fmas.
    VecOp("mad_f32_unroll", "f32", S.VectorShape(32, (8,)), "v", draw=draw_mad_unroll,
          oracle=lambda c, rvv: VO.mad_f32_unroll(c.values["x"], c.values["v"], c.values["y"]),
          bound="bit-exact chain of K fmas in row order; gamma(K-1) (|y| + sum|x_k v_k|) + 0.5 ULP",
          fixed=fixed_mad_unroll,
          edges=edges_mad_unroll),
    # zvfh: vfwmacc e16/m2 -> e32/m4, unrolled by two, a vsetvl tail loop, vfredusum;
    # without zvfh a scalar loop accumulating in double.
    VecOp("dot_f16_unroll", "f32", S.VectorShape(16, (2,), 2), "zvfh", draw=draw_dot_unroll,
          oracle=_dot_unroll_oracle,
          bound="gamma(n+1) * sum|x y| per row (u = 2^-24); exact for small integers",
          fixed=fixed_dot_unroll,
          edges=edges_dot_unroll),
    # e32/m2 vsetvl loop around ggml_v_silu_m2; ggml calls it in place (ggml_silu_inplace).
    VecOp("silu_f32", "f32", S.VectorShape(32, (2,)), "v",
          draw=lambda spec, n, src: draw_map(spec, n, src, spread=(-110.0, 100.0)),
          oracle=lambda c, rvv: VO.silu(c.values["x"], EXPF_ULPS),
          bound=f"(0.5 ulp + eta |s|) / ulp(s): eta from the exp's {EXPF_ULPS:.6g} ULP, 1 + E and the "
                "division (oracles/vec_ops.py: silu)",
          fixed=fixed_map,
          edges=lambda spec, src: edges_activation(spec, src, gates=False)),
    # e32/m2 vsetvl loop: vfmul(ggml_v_silu_m2(x), g).  ggml never calls it in place.
    VecOp("swiglu_f32", "f32", S.VectorShape(32, (2,)), "v",
          draw=lambda spec, n, src: draw_map(spec, n, src, gates=True, spread=(-110.0, 100.0), aliasing=False),
          oracle=lambda c, rvv: VO.swiglu(c.values["x"], c.values["g"], EXPF_ULPS),
          bound="SiLU's error scaled by |g|, then one multiply (0.5 ULP) (oracles/vec_ops.py: swiglu)",
          fixed=lambda spec, n, src: fixed_map(spec, n, src, gates=True, aliasing=False),
          edges=lambda spec, src: edges_activation(spec, src, gates=True)),
    # e32/m2 vsetvl loop around ggml_v_expf_m2, vfwredusum into f64; ggml calls it in place
    # (tiled flash attention).
    VecOp("soft_max_f32", "f32", S.VectorShape(32, (2,)), "v",
          draw=lambda spec, n, src: draw_map(spec, n, src, n_scalars=1, spread=(-120.0, 10.0), returns=True,
                                             scalar=_row_max),
          oracle=lambda c, rvv: VO.soft_max(c.values["x"], c.fp[0], EXPF_ULPS),
          bound=f"y: {EXPF_ULPS:.6g} ULP of exp(fp32(x - max)), the polynomial exp's bound; "
                "returned sum: gamma(n-1) sum|y| (u = 2^-53) of the returned y, exact for integer y",
          fixed=lambda spec, n, src: fixed_map(spec, n, src, returns=True, scalars=lambda x: (float(np.max(x)),)),
          edges=edges_soft_max, result=lambda c, y: VO.double_sum(y)),
    # e32/m2 vsetvl loop: vfsub, store, vfmul, vfwredusum into f64; ggml calls it in place (norm).
    VecOp("cvar_f32", "f32", S.VectorShape(32, (2,)), "v",
          draw=lambda spec, n, src: draw_map(spec, n, src, n_scalars=1, returns=True, scalar=_near_mean),
          oracle=lambda c, rvv: VO.cvar(c.values["x"], c.fp[0])[0],
          bound="y: 0.5 ULP, bit-exact fp32 subtraction; returned variance: gamma(n) S/n (u = 2^-53, "
                "S = sum of the fp32 squares), exact for small integers",
          fixed=lambda spec, n, src: fixed_map(spec, n, src, returns=True, scalars=_mean_fp32),
          edges=edges_cvar, result=lambda c, y: VO.cvar(c.values["x"], c.fp[0])[1]),
]


# ------------------------------------------------------------------ running and checking


def run(spec: VecOp, target, case: VecOpCase) -> tuple[np.ndarray, float | None]:
    """Call the kernel; return its output array as float64 values and the returned double, if any."""
    r = target.call(f"vec_{spec.name}", [case.n, *case.ip], list(case.fp), list(case.bufs))
    if spec.fmt == "f16":
        got = r.output(0, np.uint16).view(np.float16).astype(np.float64)
    else:
        got = r.output(0, np.float32).astype(np.float64)
    ret = float(r.output(1, np.float64)[0]) if spec.result is not None else None
    return got, ret


def check(spec: VecOp, target, case: VecOpCase) -> None:
    """Run ``case``; hold the output to the oracle's ULP bound and, where the arithmetic is
    determined, to its bit-exact model; hold a returned double to its accumulation bound."""
    rvv = spec.rvv(session().source, target.isa)
    path = "rvv" if rvv else "scalar"
    if rvv and spec.fmt == "f16" and widens_to_f32(session().source, target.isa, spec.function):
        # The tree's RVV body widens to fp32, multiplies there and narrows (ggml 2025-12): the
        # arithmetic of the scalar path, fp16(fp32 op), not the fp16 arithmetic of later trees.
        rvv, path = False, "rvv, widened to fp32"
    observe.note("path", path)
    got, ret = run(spec, target, case)
    want = spec.oracle(case, rvv)
    what = f"ggml_vec_{spec.name}, n={case.n}, {target.id}, {path} path" + (f", {case.label}" if case.label else "")
    name = f"vec_{spec.name}(...)"
    ulps = ulp_error(got, want.exact, want.fmt, signed_zeros=want.signed_zeros)
    dt = np.float16 if want.fmt == "f16" else np.float32
    shown = got.astype(dt)  # as the kernel stored it
    x = case.values.get("x")
    inputs = x.astype(dt) if x is not None and x.shape == got.shape else None
    assert_within_ulps(shown, want.exact, ulps, want.allowed, name=name, context=what, derivation=spec.bound,
                       inputs=inputs)
    if want.models:
        assert_matches_a_model(got, want.models, want.fmt, name=name, context=what)
    if spec.result is not None:
        acc = spec.result(case, got)
        assert_within_bound(ret, acc.exact, acc.bound, name=f"{name} returned", context=what,
                            derivation=spec.bound)


def assert_matches_a_model(got: np.ndarray, models: Sequence[tuple[str, np.ndarray]], fmt: str, *,
                           name: str, context: str) -> None:
    """``got`` is bit for bit one of the models (any NaN matches any NaN); records which one
    matched when there is a choice, else shows the closest."""
    dt, bits = (np.float32, np.uint32) if fmt == "f32" else (np.float16, np.uint16)
    g = got.astype(dt)
    with np.errstate(over="ignore", invalid="ignore"):
        cands = [(label, np.asarray(m, np.float64).astype(dt)) for label, m in models]

    def mismatches(m: np.ndarray) -> int:
        return int(np.sum((g.view(bits) != m.view(bits)) & ~(np.isnan(g) & np.isnan(m))))

    label, best = min(cands, key=lambda c: mismatches(c[1]))
    if len(cands) > 1 and mismatches(best) == 0:
        observe.note("model", label)
    assert_bitwise_equal(g, best, name=name, context=f"{context}; bit-exact model: {label}")


ids = [k.name for k in VEC_OPS]


@st.composite
def vec_op_cases(draw: st.DrawFn, spec: VecOp, src: GgmlSource) -> VecOpCase:
    """A random length (``S.lengths``: small ones first), then the kernel's own draw."""
    n = draw(S.lengths(spec.shape), label="n")
    return draw(spec.draw(spec, n, src), label="case")


def crossing_cases(spec: VecOp, vlen: int, src: GgmlSource) -> list[VecOpCase]:
    """The kernel's seeded case at every length of ``S.crossing_lengths`` for this VLEN,
    smallest first: the fixed cases of every run."""
    return [spec.fixed(spec, n, src) for n in S.crossing_lengths(spec.shape, vlen)]


# ------------------------------------------------------------------ the exp sweep


#: Stride of the default sweep over float32 bit patterns (a prime, so every exponent and
#: low-bit pattern is visited); RVVDIFF_EXPF_EXHAUSTIVE=1 makes it 1 (2^32 inputs, ~10 min).
EXPF_STRIDE = 4093
_CHUNK = 1 << 22


def expf_sweep_inputs(stride: int) -> Iterator[np.ndarray]:
    """The sweep's inputs in chunks: the regime edges and special values, then every
    ``stride``-th float32 bit pattern (generated chunk by chunk: 2^32 inputs do not fit at once)."""
    yield np.concatenate([EXP_EDGES, SPECIAL_F32])
    step = _CHUNK * stride
    for start in range(0, 1 << 32, step):
        bits = np.arange(start, min(start + step, 1 << 32), stride, dtype=np.uint64).astype(np.uint32)
        yield bits.view(np.float32)


# ------------------------------------------------------------------ loop sizes (docs/vec_ops.md)

_SOURCE = {"mad_f32": "vec.h:ggml_vec_mad_f32", "mad1_f32": "vec.h:ggml_vec_mad1_f32",
           "scale_f32": "vec.h:ggml_vec_scale_f32", "mad_f16": "vec.h:ggml_vec_mad_f16",
           "scale_f16": "vec.h:ggml_vec_scale_f16", "mad_f32_unroll": "vec.h:ggml_vec_mad_f32_unroll",
           "dot_f16_unroll": "vec.h:ggml_vec_dot_f16_unroll", "silu_f32": "vec.cpp:ggml_vec_silu_f32",
           "swiglu_f32": "vec.cpp:ggml_vec_swiglu_f32", "soft_max_f32": "vec.cpp:ggml_vec_soft_max_f32",
           "cvar_f32": "vec.cpp:ggml_vec_cvar_f32"}


def _var(spec: VecOp) -> str:
    return f"n ({spec.name})"


@cache
def _sweep_sizes() -> tuple[int, ...]:
    """Lengths of test_expf_sweep's calls of soft_max (default stride): every run."""
    return tuple(x.size for x in expf_sweep_inputs(EXPF_STRIDE))


@cache
def _drawn(vlen: int) -> dict[str, L.Drawn]:
    """Per kernel: the lengths of test_vec_op's fixed cases at ``vlen`` (``crossing_cases``
    builds one case at each length of ``S.crossing_lengths``), soft_max's sweep lengths, and
    the random range of ``S.lengths``."""
    out = {}
    for spec in VEC_OPS:
        sizes = set(S.crossing_lengths(spec.shape, vlen))
        if spec.name == "soft_max_f32":
            sizes |= set(_sweep_sizes())
        out[_var(spec)] = L.Drawn(every_run=sorted(sizes), lo=1, hi=S.MAX_LENGTH)
    return out


L.register(L.Family(
    name="vec_ops", doc="docs/vec_ops.md",
    loops=[loop for spec in VEC_OPS
           for loop in spec.shape.loops(f"ggml_vec_{spec.name}", _var(spec), _SOURCE[spec.name])],
    drawn=_drawn,
    notes=("Row loops: mad_f32_unroll runs all GGML_VEC_MAD_UNROLL rows (32 in the pinned tree) inside "
           "every strip-mining trip, and dot_f16_unroll its GGML_VEC_DOT_UNROLL rows (2) side by side: "
           "fixed counts that every call runs whole (the tests read them from the tree under test), "
           "not sizes to draw.",
           "soft_max_f32 is also called by test_expf_sweep (every run) at the lengths of its chunks; "
           "those cross its loop at every VLEN even without the fixed cases.",
           "The scalar loops after the RVV loops run no element (the vsetvl loops finish the row); "
           "without zvfh, mad_f16, scale_f16 and dot_f16_unroll are one scalar loop.")))


# ------------------------------------------------------------------ what the tree has (cases/coverage.py)

#: The vector kernels' sources (relative to the ggml directory), and the header they are read
#: after: simd-mappings.h defines GGML_SIMD and the vector mappings in an RVV build.
VEC_FILES = ("src/ggml-cpu/vec.h", "src/ggml-cpu/vec.cpp")
HEADERS = ("src/ggml-cpu/simd-mappings.h",)
#: Every ISA build's extensions at once: a function with an RVV path in any build.
ALL_EXTENSIONS = tuple(sorted({e for b in ISA_BUILDS.values() for e in b.extensions}))


def _headers(src: GgmlSource) -> list[csource.CFile]:
    return [tree.of(src).file(h) for h in HEADERS if (src.ggml / h).is_file()]


@cache
def rvv_paths(src: GgmlSource, files: tuple[str, ...], extensions: tuple[str, ...] = ALL_EXTENSIONS
              ) -> dict[str, csource.RvvPath]:
    """The functions of ``files`` (relative to the ggml directory; absent ones are skipped) with an
    RVV path in a build with ``extensions`` (harness/ggml/csource.py: ``rvv_functions``)."""
    out: dict[str, csource.RvvPath] = {}
    for rel in files:
        if (src.ggml / rel).is_file():
            for name, r in csource.rvv_functions(tree.of(src).file(rel), extensions, _headers(src)).items():
                out.setdefault(name, r)
    return out


def rvv_path(src: GgmlSource, isa: IsaBuild, function: str, files: tuple[str, ...]) -> bool:
    """``function`` of ``files``, as the ISA build compiles it in this tree, calls RVV intrinsics
    (the test's path is "rvv"; else the build runs a scalar loop)."""
    r = rvv_paths(src, files, tuple(isa.extensions)).get(function)
    return bool(r and r.intrinsics)


def widens_to_f32(src: GgmlSource, isa: IsaBuild, function: str) -> bool:
    """The RVV body of ``function`` (as ``isa`` compiles it) converts its fp16 data to fp32 and
    does its arithmetic there (``vfwcvt`` to f32, no fp16 multiply): the oracle's fp32 model."""
    r = rvv_paths(src, VEC_FILES, tuple(isa.extensions)).get(function)
    body = r.function.body if r else ""
    return "vfwcvt_f_f_v_f32" in body and not re.search(r"__riscv_vf(w?)(mul|macc|madd)_v[vf]_f16", body)


def where(src: GgmlSource, f: csource.Function) -> str:
    """file:line of a function, relative to the ggml directory."""
    return f"{f.file.relative_to(src.ggml)}:{f.line}"


def file_notes(src: GgmlSource, files: Sequence[str]) -> list[str]:
    """What harness/ggml/csource.py could not read in ``files``."""
    inv = tree.of(src)
    return [str(n) for rel in files if (src.ggml / rel).is_file() for n in inv.file(rel).notes]


#: Every function of vec.h / vec.cpp with an RVV path in the pinned tree, and where it is tested.
RVV_FUNCTIONS = {
    **{k.function: "test_vec_ops.py" for k in VEC_OPS},
    "ggml_vec_dot_f32": "test_vec_dot.py",
    "ggml_vec_dot_f16": "test_vec_dot.py",
    "ggml_vec_dot_bf16": "test_vec_dot.py",
    "ggml_v_expf_m2": "test_vec_ops.py (soft_max_f32, test_expf_sweep)",
    "ggml_v_silu_m2": "test_vec_ops.py (silu_f32, swiglu_f32)",
}


@coverage.register("vec_ops")
def scan(inv: Tree) -> coverage.FamilyScan:
    """vec.h / vec.cpp: a function with an RVV path (in any ISA build) that no test knows is
    uncovered; a kernel of VEC_OPS the tree lacks is not in this tree; a tested function whose
    RVV branch calls no intrinsic (a scalar loop kept for RVV builds), or that has no RVV path in
    this tree, is a note (its tests run, on the path the tree has)."""
    src = inv.source
    out = coverage.FamilyScan("vec_ops")
    found = rvv_paths(src, VEC_FILES)
    ours = {k.function for k in VEC_OPS}  # (the vec_dot family notes its own)
    for name, r in sorted(found.items()):
        if name not in RVV_FUNCTIONS:
            out.uncovered.append(coverage.Uncovered(
                name, where(src, r.function), f"{r.describe()}; no test knows it (cases/vec_ops.py: VEC_OPS)"))
        elif name in ours and not r.intrinsics:
            out.notes.append(f"{name} ({where(src, r.function)}) {r.describe()}: tested on that path")
    for name in sorted(ours - set(found)):
        if inv.has(name):
            out.notes.append(f"{name} has no RVV path in this tree: tested on its scalar path")
    for k in VEC_OPS:
        out.lacks(inv, k)
    out.notes += file_notes(src, HEADERS + VEC_FILES)
    return out

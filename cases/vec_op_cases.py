"""The vec ops family's cases (cases/vec_ops.py is the family's definition: the table VEC_OPS, its
edge cases, checks, loop levels and coverage): the exp bound, the values the strategies draw,
one call (VecOpCase) and a kernel's spec (VecOp), the draws per signature and the seeded
cases at a given length, and the oracles adapted to a case.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np
from hypothesis import strategies as st

from cases import strategies as S
from cases.vec_source import ALL_EXTENSIONS, VEC_FILES, headers, rvv_path
from harness.core.config import IsaBuild
from harness.emulators.protocol import Buf, In, InOut, Out
from harness.ggml import csource, tree
from harness.ggml.source import GgmlSource
from oracles import vec_ops as VO
from oracles.bounds import gamma
from oracles.floats import dot_exact
from oracles.ulp import allowed_ulps

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
SPECIAL = {"f32": SPECIAL_F32, "f16": SPECIAL_F16}


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
        pool = SPECIAL[fmt]
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
        """What the kernel server's adapter calls (harness/plugin/marks.py skips the kernel as "not in
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


def row_max(x: np.ndarray) -> st.SearchStrategy[float]:
    """softmax's max: the row's maximum (how ggml calls it), or any other value."""
    finite = x[np.isfinite(x)]
    m = float(np.max(x)) if not np.any(np.isnan(x)) else float("nan")
    parts = [st.just(m)] * 3 + [st.floats(-100, 100, width=32)]
    if finite.size:
        parts.append(st.just(float(np.max(finite))))
    return st.one_of(parts)


def near_mean(x: np.ndarray) -> st.SearchStrategy[float]:
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


def mean_fp32(x: np.ndarray) -> tuple[float]:
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
    value = inv.file(VEC_FILES[0]).defines(csource.build_macros(ALL_EXTENSIONS, headers(src))).get(macro)
    if value is None:
        raise AssertionError(f"{macro} is not defined in {src.ggml / VEC_FILES[0]}: the adapter and this "
                             "test need updating")
    return int(value)


# --- oracles adapted to VecOpCase


def dot_unroll_oracle(case: VecOpCase, rvv: bool) -> VO.Elementwise:
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



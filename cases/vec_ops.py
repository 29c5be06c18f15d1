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

from collections.abc import Iterator, Sequence
from functools import cache

import numpy as np
from hypothesis import strategies as st

from cases import coverage
from cases import loops as L
from cases import strategies as S
from cases.vec_op_cases import (
    EXP_EDGES,
    EXPF_ULPS,
    SPECIAL,
    SPECIAL_F32,
    SPECIAL_SCALES,
    VecOp,
    VecOpCase,
    dot_unroll_case,
    dot_unroll_oracle,
    draw_dot_unroll,
    draw_mad_unroll,
    draw_map,
    draw_update,
    elementwise_case,
    fixed_dot_unroll,
    fixed_mad_unroll,
    fixed_map,
    fixed_update,
    mad_unroll_case,
    mean_fp32,
    near_mean,
    row_max,
    unroll_factor,
)
from cases.vec_source import HEADERS, VEC_FILES, file_notes, rvv_paths, where, widens_to_f32
from harness.check import observe
from harness.check.compare import assert_bitwise_equal, assert_within_bound, assert_within_ulps
from harness.ggml.source import GgmlSource
from harness.ggml.tree import Tree
from harness.plugin.targets import session
from oracles import vec_ops as VO
from oracles.ulp import ulp_error

# --- edge cases: deterministic, named in failure messages


def _cross(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every pair (a_i, b_j), as two flat arrays."""
    return np.repeat(a, b.size), np.tile(b, a.size)


def edges_update(spec: VecOp, src: GgmlSource, *, with_x: bool) -> list[VecOpCase]:
    """y op= (x *) v over every special y (paired with every special x) for every special
    scale.  Expected (IEEE, as the scalar reference): NaN propagates, 0 * inf is NaN, inf - inf
    is NaN, overflow gives inf, subnormals are kept; for mad_f16 / scale_f16 on the RVV path the
    scale is first rounded to fp16 (so 65520 and 1e5 act as inf, 2^-25 as 0)."""
    pool = SPECIAL[spec.fmt]
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
          oracle=dot_unroll_oracle,
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
                                             scalar=row_max),
          oracle=lambda c, rvv: VO.soft_max(c.values["x"], c.fp[0], EXPF_ULPS),
          bound=f"y: {EXPF_ULPS:.6g} ULP of exp(fp32(x - max)), the polynomial exp's bound; "
                "returned sum: gamma(n-1) sum|y| (u = 2^-53) of the returned y, exact for integer y",
          fixed=lambda spec, n, src: fixed_map(spec, n, src, returns=True, scalars=lambda x: (float(np.max(x)),)),
          edges=edges_soft_max, result=lambda c, y: VO.double_sum(y)),
    # e32/m2 vsetvl loop: vfsub, store, vfmul, vfwredusum into f64; ggml calls it in place (norm).
    VecOp("cvar_f32", "f32", S.VectorShape(32, (2,)), "v",
          draw=lambda spec, n, src: draw_map(spec, n, src, n_scalars=1, returns=True, scalar=near_mean),
          oracle=lambda c, rvv: VO.cvar(c.values["x"], c.fp[0])[0],
          bound="y: 0.5 ULP, bit-exact fp32 subtraction; returned variance: gamma(n) S/n (u = 2^-53, "
                "S = sum of the fp32 squares), exact for small integers",
          fixed=lambda spec, n, src: fixed_map(spec, n, src, returns=True, scalars=mean_fp32),
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

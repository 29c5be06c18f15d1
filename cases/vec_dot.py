"""Floating-point dot products (``ggml_vec_dot_f32 / _f16 / _bf16`` in vec.cpp) against a float64 oracle.

Bound (one for the three kernels, derived from their arithmetic):

* Every product enters the sum through one fp32 rounding.  fp16 x fp16 and
  bf16 x bf16 products are exact in fp32 (11 + 11 and 8 + 8 significant bits
  fit in 24), and the widening multiply-accumulates (vfwmacc, vfwmaccbf16)
  round only the addition; fp32 products are rounded inside a fused
  multiply-add (vfmacc), again once per term.
* The per-lane partial sums are combined by vfredusum, whose order is
  unspecified.  Summing n terms in any order costs at most gamma(n - 1) *
  sum|x_i y_i| (Higham, ch. 4); the per-term roundings above add one more
  gamma step: gamma(n) * sum|x_i y_i|.
* The result is stored to ``float *s``: one more rounding, at most
  u |s| <= u sum|x_i y_i|.

So ``|got - exact| <= gamma(n + 1) * sum|x_i y_i|`` with u = 2^-24.  The
scalar fallbacks (f16 without zvfh, bf16 without zvfbfwma) accumulate in
double and stay far inside it.  The oracle's exact value is ``math.fsum`` of
float64 products, which are exact for these formats.

Because a dropped element can hide inside that bound when it is small, a
second test uses inputs exact by construction: integers in [-8, 8], whose
every partial sum (at most 64 * n < 2^24) is exact in fp32 in any order, so
the result must be exact -- a missing or doubled element always shows.

Loop sizes (the table in docs/vec_dot.md): f32 strip-mines at e32m8, f16 at
e16m1 (widening into e32m2), bf16 runs an unrolled main loop (2 x
VLMAX(e16m2) per iteration) and a leftover vsetvl loop.  After what
Hypothesis draws, both tests check, at the test's VLEN, seeded rows at every
length of ``S.crossing_lengths`` (each loop twice plus a remainder, then a
real model's widest row plus a tail).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np
from hypothesis import strategies as st

from cases import coverage
from cases import loops as L
from cases import strategies as S
from cases.vec_source import VEC_FILES, rvv_path, rvv_paths, where
from harness.check import observe
from harness.check.compare import assert_bitwise_equal, assert_within_bound
from harness.core.config import IsaBuild
from harness.emulators.protocol import In, Out
from harness.ggml.tree import Tree
from harness.plugin.targets import session
from oracles.bounds import gamma
from oracles.floats import dot_exact

BOUND = "gamma(n+1) * sum|x_i y_i|, u = 2^-24: one fp32 rounding per term, any reduction order, final store"


#: ggml's storage type of each format (what the kernel server's adapter passes).
STORAGE_TYPE = {"f32": "float", "f16": "ggml_fp16_t", "bf16": "ggml_bf16_t"}


@dataclass(frozen=True, repr=False)
class DotKernel(S.KernelSpec):
    name: str  # test id: the element type
    fmt: str
    shape: S.VectorShape  # of the RVV path: element width loaded, LMUL, unroll
    rvv_when: str  # the extension that selects the RVV path in the pinned tree (else a scalar loop)

    @property
    def server_name(self) -> str:
        return f"vec_dot_{self.name}"

    @property
    def function(self) -> str:
        return f"ggml_vec_dot_{self.name}"

    @property
    def requires(self) -> tuple[str, ...]:
        """What the kernel server's adapter calls (harness/plugin/marks.py skips the kernel as "not in
        this tree" when the tree lacks it)."""
        return (self.function,) + ((STORAGE_TYPE[self.fmt],) if self.fmt != "f32" else ())

    def path(self, isa: IsaBuild) -> str:
        """"rvv" when the tree's function, as ``isa`` compiles it, calls RVV intrinsics (in the
        pinned tree: the builds with ``rvv_when``), else "scalar"."""
        return "rvv" if rvv_path(session().source, isa, self.function, VEC_FILES) else "scalar"


DOTS = [
    # vfmacc.vv e32/m8, tail-undisturbed accumulator, one vsetvl loop.
    DotKernel("f32", "f32", S.VectorShape(32, (8,)), "v"),
    # vfwmacc e16/m1 -> e32/m2 accumulator, one vsetvl loop.
    DotKernel("f16", "f16", S.VectorShape(16, (1,)), "zvfh"),
    # vfwmaccbf16 e16/m2 -> e32/m4, unrolled by two, then a vsetvl tail loop.
    DotKernel("bf16", "bf16", S.VectorShape(16, (2,), 2), "zvfbfwma"),
]


def run_dot(kernel: DotKernel, target, x: np.ndarray, y: np.ndarray) -> float:
    n = x.size
    observe.note("path", kernel.path(target.isa))
    r = target.call(kernel.server_name, [n], [],
                    [In(S.to_storage(kernel.fmt, x)), In(S.to_storage(kernel.fmt, y)), Out(4)])
    return float(r.output(0, np.float32)[0])


def _context(kernel: DotKernel, target, n: int) -> str:
    return f"ggml_vec_dot_{kernel.name}, n={n}, {target.id}, {kernel.path(target.isa)} path"


@dataclass(frozen=True)
class DotCase:
    """One call's rows (float32 values representable in the kernel's format)."""

    x: np.ndarray
    y: np.ndarray

    def __repr__(self) -> str:
        show = lambda a: np.array2string(a, threshold=16, precision=9)  # noqa: E731
        return f"DotCase(n={self.x.size}, x={show(self.x)}, y={show(self.y)})"

    def _repr_pretty_(self, p, cycle) -> None:  # Hypothesis's printer of failing examples
        p.text(repr(self))


@st.composite
def dot_cases(draw: st.DrawFn, kernel: DotKernel) -> DotCase:
    """Random data of every kind at a random length (``S.lengths``: small ones first)."""
    n = draw(S.lengths(kernel.shape), label="n")
    return DotCase(draw(S.float_vectors(n, kernel.fmt), label="x"), draw(S.float_vectors(n, kernel.fmt), label="y"))


@st.composite
def exact_cases(draw: st.DrawFn, kernel: DotKernel) -> DotCase:
    """Small integers at a random length, optionally one NaN or infinity planted (its partner
    made non-zero, so an infinity gives +-inf)."""
    n = draw(S.lengths(kernel.shape), label="n")
    x = draw(S.small_integer_vectors(n), label="x")
    y = draw(S.small_integer_vectors(n), label="y")
    poison = draw(st.sampled_from([None, "nan", "inf", "-inf"]), label="poison")
    if poison is not None:
        at = draw(st.integers(0, n - 1), label="at")
        x[at] = float(poison)
        if y[at] == 0:
            y[at] = 1.0
    return DotCase(x, y)


def crossing_cases(kernel: DotKernel, vlen: int, *, exact: bool) -> list[DotCase]:
    """Seeded rows at every length of ``S.crossing_lengths`` for this VLEN, smallest first (the
    fixed cases of every run): spiky values (a large one last) for the bound, small
    integers for exactness."""
    out = []
    for n in S.crossing_lengths(kernel.shape, vlen):
        if exact:
            out.append(DotCase(S.small_integer_array(n, 2 * n, zero_free=True), S.small_integer_array(n, 2 * n + 1)))
        else:
            out.append(DotCase(S.float_array(n, kernel.fmt, "spiky", 2 * n), S.float_array(n, kernel.fmt, "spiky", 2 * n + 1)))
    return out


def check_bound(kernel: DotKernel, target, case: DotCase) -> None:
    n = case.x.size
    got = run_dot(kernel, target, case.x, case.y)
    exact, abs_sum = dot_exact(case.x, case.y)
    assert_within_bound(got, exact, gamma(n + 1) * abs_sum, name=f"vec_dot_{kernel.name}(x, y)",
                        context=_context(kernel, target, n), derivation=BOUND)


def check_exact(kernel: DotKernel, target, case: DotCase) -> None:
    got = run_dot(kernel, target, case.x, case.y)
    exact, _ = dot_exact(case.x, case.y)
    assert_bitwise_equal(np.array([got], np.float32), np.array([exact], np.float32),
                         name=f"vec_dot_{kernel.name}(x, y)", context=_context(kernel, target, case.x.size))


# ------------------------------------------------------------------ loop sizes (docs/vec_dot.md)

_SOURCE = {"f32": "vec.cpp:ggml_vec_dot_f32", "f16": "vec.cpp:ggml_vec_dot_f16", "bf16": "vec.cpp:ggml_vec_dot_bf16"}


def _var(kernel: DotKernel) -> str:
    return f"n ({kernel.name})"


@cache
def _drawn(vlen: int) -> dict[str, L.Drawn]:
    """Per kernel: the lengths both tests' fixed cases check at ``vlen`` (the rows
    ``crossing_cases`` builds), and the random range of ``S.lengths``."""
    return {_var(k): L.Drawn(every_run=sorted({c.x.size for exact in (False, True)
                                               for c in crossing_cases(k, vlen, exact=exact)}),
                             lo=1, hi=S.MAX_LENGTH)
            for k in DOTS}


L.register(L.Family(
    name="vec_dot", doc="docs/vec_dot.md",
    loops=[loop for k in DOTS for loop in k.shape.loops(f"ggml_vec_dot_{k.name}", _var(k), _SOURCE[k.name])],
    drawn=_drawn,
    notes=("The reductions after the loops (vfredusum over VLMAX) are not loops over n. Without the "
           "extension (f16 without zvfh, bf16 without zvfbfwma) the kernels are one scalar loop.",)))


# ------------------------------------------------------------------ what the tree has (cases/coverage.py)


@coverage.register("vec_dot")
def scan(inv: Tree) -> coverage.FamilyScan:
    """The dot products of DOTS: not in this tree when the tree lacks one; a note when one has
    no RVV path in this tree (its tests run on the scalar path) or an RVV branch without
    intrinsics.  (A new function of vec.cpp with an RVV path is the vec_ops scan's uncovered.)"""
    out = coverage.FamilyScan("vec_dot")
    found = rvv_paths(inv.source, VEC_FILES)
    for k in DOTS:
        if out.lacks(inv, k):
            continue
        if k.function not in found:
            out.notes.append(f"{k.function} has no RVV path in this tree: tested on its scalar path")
        elif not found[k.function].intrinsics:
            r = found[k.function]
            out.notes.append(f"{k.function} ({where(inv.source, r.function)}) {r.describe()}: tested on that path")
    return out  # (what csource could not read in vec.h / vec.cpp: the vec_ops scan's notes)

"""Cost cases of the floating-point vector kernels: the vec ops (cases/vec_ops.py ``VEC_OPS``), the
FP dot products (cases/vec_dot.py ``DOTS``) and the FP16 / BF16 <-> FP32 conversions
(cases/conversions.py ``CONVERSIONS``), each through its family's own call code, at two lengths:

* n = 4096: a 7-8B model's hidden size (a row of norm, softmax over a 4096-position KV cache, a
  row of a weight's dot products), a multiple of every loop step at every VLEN;
* n = 4109 = 4096 + 13: the same and a tail.  Every loop step is a power of two, so every loop
  ends on a partial trip (13 elements, or 13 mod a step of 8 at VLEN 128), an unrolled main loop's
  leftover loop included.

Units: elements of the row (``ROWS``: of each of the rows the kernel runs side by side).  What
runs is the build's entry point (without the kernel's extension its scalar loop: f16 without
zvfh, bf16 without zvfbfwma); an RVV build compiles no separate scalar twin of these, so the
cases have none (``has_twin=False``).
"""

from __future__ import annotations

from cases import conversions as C
from cases import strategies as S
from cases import vec_dot as VD
from cases import vec_ops as VOPS
from costs.suite import CostCase
from harness.plugin.targets import session

#: A hidden size, and the same with an odd tail (every loop ends on a partial trip).
SIZES = (4096, 4096 + 13)


#: Kernels over several rows of n (GGML_VEC_MAD_UNROLL / GGML_VEC_DOT_UNROLL of the tree): a unit is an
#: element of each row.
ROWS = ("mad_f32_unroll", "dot_f16_unroll")


def _vec_op(spec: VOPS.VecOp, n: int) -> CostCase:
    def run(target) -> None:
        VOPS.run(spec, target, spec.fixed(spec, n, session().source))

    unit = "row element" if spec.name in ROWS else "element"
    return CostCase("vec_ops", spec.name, f"n{n}", "rvv", f"vec_{spec.name}", spec.function, n, unit, run,
                    entry_points=(spec.function,), requires=spec.requires, has_twin=False)


def _dot(kernel: VD.DotKernel, n: int) -> CostCase:
    def run(target) -> None:
        VD.run_dot(kernel, target, S.float_array(n, kernel.fmt, "normal", seed=2 * n),
                   S.float_array(n, kernel.fmt, "normal", seed=2 * n + 1))

    return CostCase("vec_dot", kernel.name, f"n{n}", "rvv", kernel.server_name, kernel.function, n, "element", run,
                    entry_points=(kernel.function,), requires=kernel.requires, has_twin=False)


def _conversion(kernel: C.Conversion, n: int) -> CostCase:
    def run(target) -> None:
        C.check_conversion(kernel, target, S.to_storage(kernel.src, S.float_array(n, kernel.src, "normal", seed=n)))

    return CostCase("conversions", kernel.name, f"n{n}", "rvv", kernel.name, kernel.function, n, "element", run,
                    entry_points=(kernel.function,), requires=kernel.requires, has_twin=False)


VEC_OPS = [_vec_op(spec, n) for spec in VOPS.VEC_OPS for n in SIZES]
DOTS = [_dot(kernel, n) for kernel in VD.DOTS for n in SIZES]
CONVERSIONS = [_conversion(kernel, n) for kernel in C.CONVERSIONS for n in SIZES]

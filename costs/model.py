"""Cost cases of the model-shaped estimate (harness/cost/prices/per_token.py): the slices of one transformer
layer's mul_mats, each through ggml's graph on one thread, computed ``reps`` times after the one set-up.

* a quantized weight type: a ``repack_mul_mat`` request, the weights placed as llama.cpp places them
  (CPU_REPACK where the tree repacks the type), weight rows of random blocks with normal scales
  (cases/quant_blocks.py);
* a float weight type (f32, f16, bf16): the ``mul_mat`` request of the differential mul_mat family
  (cases/mul_mat.py ``run_mul_mat``) with f32 activations, as a model's reach it (ggml converts them to
  the weight's dot type), Gaussian weights rounded to the type.  The row records the path each slice
  took (tinyBLAS_RVV from 2 activation rows in the pinned tree, the type's vec_dot below; bf16's vector
  kernels only in the zvfbfwma build, f16's in zvfh: costs/graph.py ``path_of``).

Only the cases the ``RVVDIFF_COST_MODEL`` setting names exist (``rvvdiff cost --model
tinyllama:q4_0:1+32``): each is dozens of Spike runs, too many for every cost run.  Inputs are fixed
and seeded; activations Gaussian floats.  Units: m x k x n (MAC).
"""

from __future__ import annotations

import numpy as np

from cases import mul_mat as MM
from cases import quant_blocks as QB
from cases import quant_variants as V
from cases import repack_strategies as RS
from cases import strategies as S
from cases.mul_mat_shapes import Shape
from costs.graph import path_of
from costs.suite import CostCase
from harness.core import settings
from harness.cost.prices import per_token
from harness.emulators.protocol import In, Out
from oracles import quants as Q

SEED = 2048
#: A float weight type -> the mul_mat kernel of its model use: weights of that type, f32 activations.
FLOAT_KERNELS = {k.a: k for k in MM.KERNELS if k.b == "f32"}


def request(target, spec: per_token.Spec, k: int, m: int, n: int, reps: int) -> None:
    """mul_mat of ``m`` weight rows of ``k`` elements and ``n`` activation rows, computed ``reps`` times."""
    rng = np.random.default_rng(SEED)
    if spec.type in FLOAT_KERNELS:
        kernel = FLOAT_KERNELS[spec.type]
        w = S.round_to(kernel.a, rng.standard_normal((1, m, k)))
        MM.run_mul_mat(kernel, target, Shape(k, m, n), w, rng.standard_normal((1, n, k)).astype(np.float32), reps)
        return
    nb = k // Q.block_size(spec.type)
    w = RS.weight_matrix(spec.type, m, nb, QB.RowRecipe(SEED, ("normal",), "random", "random"))
    x = rng.standard_normal((n, k)).astype(np.float32)
    ip = [V.type_id(target, spec.type), k, m, n, 1, 0 if spec.cpu else 1, 1, reps]
    target.call("repack_mul_mat", ip, [], [In(w), In(x), Out(4 * n * m)])


def _case(spec: per_token.Spec, k: int, m: int, n: int, reps: int) -> CostCase:
    def run(target) -> None:
        request(target, spec, k, m, n, reps)

    size = per_token.size_label(k, m, n, reps)
    if spec.type in FLOAT_KERNELS:
        kernel = FLOAT_KERNELS[spec.type]
        return CostCase("mul_mat", per_token.case_name(spec), size, "rvv", "mul_mat", "ggml_mul_mat", m * k * n, "MAC",
                        run, requires=kernel.requires, has_twin=False, path=path_of(kernel, Shape(k, m, n)))
    return CostCase("repack", per_token.case_name(spec), size, "rvv", "repack_mul_mat", "ggml_mul_mat", m * k * n, "MAC",
                    run, has_twin=False)


def cases(text: str | None) -> list[CostCase]:
    """The cases of a ``RVVDIFF_COST_MODEL`` value (none when unset)."""
    return [_case(spec, *s) for spec in per_token.parse_spec(text or "") for s in spec.slices()]


CASES = cases(settings.get("COST_MODEL"))

"""Cost cases of the model-shaped estimate (harness/cost/per_token.py): the slices of one transformer
layer's mul_mats, each a ``repack_mul_mat`` request through ggml's graph on one thread with the weights
placed as llama.cpp places them (CPU_REPACK where the tree repacks the type), computed ``reps`` times
after the one set-up.

Only the cases the ``RVVDIFF_COST_MODEL`` setting names exist (``rvvdiff cost --model
tinyllama:q4_0:1+32``): each is dozens of Spike runs, too many for every cost run.  Inputs are fixed
and seeded: weight rows of random blocks with normal scales (cases/quant_blocks.py), activations
Gaussian floats.  Units: m x k x n (MAC).
"""

from __future__ import annotations

import numpy as np

from cases import quant_blocks as QB
from cases import quant_variants as V
from cases import repack_strategies as RS
from costs.suite import CostCase
from harness.core import settings
from harness.cost import per_token
from harness.emulators.protocol import In, Out
from oracles import quants as Q

SEED = 2048


def request(target, spec: per_token.Spec, k: int, m: int, n: int, reps: int) -> None:
    """mul_mat of ``m`` weight rows of ``k`` elements and ``n`` activation rows, computed ``reps`` times."""
    nb = k // Q.block_size(spec.type)
    w = RS.weight_matrix(spec.type, m, nb, QB.RowRecipe(SEED, ("normal",), "random", "random"))
    x = np.random.default_rng(SEED).standard_normal((n, k)).astype(np.float32)
    ip = [V.type_id(target, spec.type), k, m, n, 1, 0 if spec.cpu else 1, 1, reps]
    target.call("repack_mul_mat", ip, [], [In(w), In(x), Out(4 * n * m)])


def _case(spec: per_token.Spec, k: int, m: int, n: int, reps: int) -> CostCase:
    def run(target) -> None:
        request(target, spec, k, m, n, reps)

    return CostCase("repack", per_token.case_name(spec), per_token.size_label(k, m, n, reps), "rvv", "repack_mul_mat",
                    "ggml_mul_mat", m * k * n, "MAC", run, has_twin=False)


def cases(text: str | None) -> list[CostCase]:
    """The cases of a ``RVVDIFF_COST_MODEL`` value (none when unset)."""
    return [_case(spec, *s) for spec in per_token.parse_spec(text or "") for s in spec.slices()]


CASES = cases(settings.get("COST_MODEL"))

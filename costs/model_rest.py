"""Cost cases of the rest of a token (harness/cost/prices/token_rest.py): every call of a llama-architecture
forward pass at a model's shape but the layers' mul_mats, each through ggml's graph on one thread, at reps 1 and 2
(the difference is one compute).

* the ops (norms, the norm weights' mul, RoPE, the KV cache store, the residual adds, swiglu): the kernel
  server's ``op`` request (harness/server/k_ops.cpp), measured only (no oracle: the differential families check
  these ops; RoPE and swiglu are measured here alone);
* the attention: the fused ``attention`` request (ggml_flash_attn_ext, Q f32, K and V f16), a causal mask;
* the output head, when its type is not the model-shaped case's own: the model-shaped case's mul_mat request
  (costs/model.py ``request``) at ``k = hidden``, the two slices of weight rows.

Only the cases the ``RVVDIFF_COST_REST`` setting names exist (``RVVDIFF_COST_REST=tinyllama:q6_K:1+32 rvvdiff cost
-k rest``).  Inputs fixed and seeded.  Units: the first source's elements (attention: MAC; head: MAC).
"""

from __future__ import annotations

import numpy as np

from cases import flash_attn_problems as FP
from cases import spacemit_fa_problems as SFP
from cases import spacemit_ops as SO
from cases.flash_attn import attention_call
from costs import model
from costs.suite import CostCase
from harness.core import settings
from harness.cost.prices import per_token
from harness.cost.prices import token_rest as TR
from harness.emulators.protocol import In, Out

SEED = 4242
#: The op adapter's op numbers of the two ops only the rest measures (the others: cases/spacemit_ops.py ``OPS``).
OP_CODES = {**{name: op.code for name, op in SO.OPS.items()}, "rope": 12, "swiglu": 13}
GGML_TYPE = {**SO.GGML_TYPE}
NP_TYPE = {"f32": np.float32, "f16": np.float16, "i32": np.int32}


def _source(call: TR.Call, i: int, type_: str, ne: tuple[int, int, int, int], n: int) -> np.ndarray:
    if type_ == "i32":
        count = ne[0] * ne[1] * ne[2] * ne[3]
        return np.arange(count, dtype=np.int32)  # RoPE's positions
    rng = np.random.default_rng(SEED + i)
    return rng.standard_normal(ne[0] * ne[1] * ne[2] * ne[3]).astype(NP_TYPE[type_])


def run_op(call: TR.Call, target, n: int, reps: int) -> None:
    """One op request of ``call`` computed ``reps`` times after its one set-up."""
    ip = [OP_CODES[call.op], 1, GGML_TYPE[call.dst], len(call.srcs), len(call.iparams)]
    for t, ne in call.srcs:
        ip += [GGML_TYPE[t], *ne, *SO.IDENTITY]
    ip += [*call.iparams, reps]
    stored = [_source(call, i, t, ne, n) for i, (t, ne) in enumerate(call.srcs)]
    ne0 = call.srcs[0][1]
    out = ne0[0] * ne0[1] * ne0[2] * ne0[3]
    size = 2 if call.dst == "f16" else 4
    target.call("op", ip, list(call.fparams), [*(In(x) for x in stored), Out(out * size)])


def run_attention(call: TR.Call, target, reps: int) -> None:
    n_q, n_kv, d, h, hkv = call.attention
    problem = SFP.fixed_problem(FP.Shape(n_q, n_kv, d, d, h, hkv, 1), "causal", SEED, sinks=False)
    ip, fp, bufs = attention_call(SFP.F16, problem, True)
    target.call("attention", [*ip, reps], fp, bufs)


def _call_case(spec: TR.Spec, call: TR.Call, n: int, reps: int) -> CostCase:
    def run(target) -> None:
        if call.request == "attention":
            run_attention(call, target, reps)
        else:
            run_op(call, target, n, reps)

    family, kernel = ("flash_attn", "attention") if call.request == "attention" else ("spacemit_ops", "op")
    return CostCase(family, TR.case_name(spec.shape, call.name), TR.size_label(n, reps), "rvv", kernel,
                    f"ggml_{call.op}", call.units, "MAC" if call.attention else "element", run, has_twin=False)


def _head_case(spec: TR.Spec, k: int, m: int, n: int, reps: int) -> CostCase:
    head = spec.head_spec()
    assert head is not None
    base = model._case(head, k, m, n, reps)
    name = TR.head_name(spec.shape, head.type)

    def run(target) -> None:
        model.request(target, head, k, m, n, reps)

    return CostCase(base.family, name, base.size, "rvv", base.kernel, base.function, base.units, base.unit, run,
                    requires=base.requires, has_twin=False, path=base.path)


def cases(text: str | None) -> list[CostCase]:
    """The cases of a ``RVVDIFF_COST_REST`` value (none when unset)."""
    out = []
    for spec in TR.parse_spec(text or ""):
        out += [_call_case(spec, c, n, r) for c, n in spec.cases() for r in per_token.REPS]
        if spec.head:
            out += [_head_case(spec, *s) for s in spec.head_slices()]
    return out


CASES = cases(settings.get("COST_REST"))

"""The flash_attn family's tests; the family (bounds, loops, checks) is cases/flash_attn.py, its table and
problems cases/flash_attn_problems.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cases import strategies as S
from cases.flash_attn import (
    PROBES,
    attention_call,
    check_attention,
    executed_path,
    finding_problems,
    loop_problems,
)
from cases.flash_attn_problems import (
    BLOCK_BYTES,
    CASES,
    IDS,
    AttnCase,
    Options,
    fused_path,
    make_problem,
    problems,
)
from harness.check import observe
from harness.ggml import tree
from harness.plugin.targets import session


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_flash_attn(case: AttnCase, target, request: pytest.FixtureRequest) -> None:
    """Fused and materialised attention, each within its bound of the oracle, and of each other;
    fully masked rows exactly 0 from the fused path; per-row cosine recorded (gated for f32).
    Drawn problems first (a failure among them shrinks to the smallest failing shape), then, on
    every run, the loop-crossing shapes of ``loop_shapes`` at the target's VLEN (fixed sizes: as
    explicit examples ahead of the draws they would pre-empt the shrinking of any bug they catch)."""
    S.explore(request, problems(case, target.isa.vector), finding_problems(case), lambda p: check_attention(case, target, p),
              after=loop_problems(case, target.vlen))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_flash_attn_path(case: AttnCase, target) -> None:
    """The probes of the case's path take it, as QEMU's trace shows; the K type's vec_dot is recorded."""
    for sh in PROBES[case.path]:
        if fused_path(case.k, case.v, sh.n_q, sh.n_kv, sh.dv, vector=target.isa.vector) != case.path or \
                (case.v in BLOCK_BYTES and sh.dv % 32) or (case.k in BLOCK_BYTES and sh.dk % 32):
            continue  # a near miss of f32 / f16 that this case's types take the same way anyway
        opts = Options("causal", 1, 0.0, 0.0, True, float(np.float32(1 / math.sqrt(sh.dk))), 1.0, 0.0)
        p = make_problem(case, sh, opts, seed=11)
        calls = target.trace("attention", *attention_call(case, p, True)).call
        ran = executed_path(calls, tree.of(session().source).has("ggml_compute_forward_flash_attn_ext_tiled"))
        dots = sorted(c for c in calls if c.startswith("ggml_vec_dot_"))
        observe.note("variant", f"{sh}: {ran} {' '.join(dots)}".strip())
        assert ran == case.path, f"path={ran!r}, but should be {case.path!r} [{case.k}/{case.v}, {sh}, {target.id}]"


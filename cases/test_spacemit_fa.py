"""The SpacemiT flash-attention family's tests (the spacemit build only); the family (dispatch rule, bounds, paths,
loops) is cases/spacemit_fa.py, its table and problems cases/spacemit_fa_problems.py."""

from __future__ import annotations

import numpy as np
import pytest

from cases import strategies as S
from cases.flash_attn import attention_call
from cases.flash_attn_problems import Options, make_problem
from cases.spacemit_fa import FA_PROBES, FALLBACK_PROBES, check_fa, check_tcm, exp_inputs, traced_path
from cases.spacemit_fa_problems import (
    DOMAINS,
    F16,
    FINDINGS,
    KERNELS,
    SPACEMIT_VLEN,
    FaKernel,
    Finding,
    TcmCase,
    fa_path,
    fa_problems,
    finding_examples,
    fixed_problems,
    fixed_tcm_cases,
    tcm_cases,
    tcm_finding_examples,
)
from harness.check import observe
from harness.check.compare import assert_bitwise_equal
from harness.emulators.protocol import In, Out
from oracles import spacemit_fa as SF

pytestmark = pytest.mark.rvvdiff_backend("spacemit")

CASES = [(k, d) for k in KERNELS for d in DOMAINS]
#: SpacemiT's kernels called directly assume VLEN 1024: the TCM tests run there only.
AT_1024 = pytest.mark.rvvdiff_targets(lambda t, cfg: t.vlen == SPACEMIT_VLEN)


@pytest.mark.parametrize("kernel,domain", CASES, ids=[f"{k.name}-{d}" for k, d in CASES])
def test_spacemit_fa(kernel: FaKernel, domain: str, target, request: pytest.FixtureRequest) -> None:
    """Fused (SpacemiT's kernel at VLEN 1024, ggml's elsewhere) and materialised attention, each within its bound
    of the oracle and of each other: the domain's findings first (explicit examples), drawn problems of the
    kernel's shapes and the domain's masks, then the loop-crossing shape and (masked) real models' shapes."""
    S.explore(request, fa_problems(kernel, domain), finding_examples(kernel, domain), lambda p: check_fa(target, p),
              after=fixed_problems(kernel, domain))


@AT_1024
@pytest.mark.parametrize("kernel", KERNELS, ids=[f"{k.name}-tcm" for k in KERNELS])
def test_spacemit_fa_tcm(kernel: FaKernel, target, request: pytest.FixtureRequest) -> None:
    """The kernels with a TCM, called as ime.cpp calls them (the one-chunk kernel's 2- and 4-row kernels run only
    so): its findings first, drawn masked problems with TCM sizes that take each branch, then the fixed cases that
    cross the TCM tiles and a real GQA decode."""
    S.explore(request, tcm_cases(kernel), tcm_finding_examples(kernel), lambda c: check_tcm(target, c),
              after=fixed_tcm_cases(kernel))


GRAPH_FINDINGS = [f for f in FINDINGS if not f.tcm]
TCM_FINDINGS = [f for f in FINDINGS if f.tcm]  # their problems run right through ggml (no TCM): VLEN 1024 only


@pytest.mark.parametrize("finding", GRAPH_FINDINGS, ids=[f.name for f in GRAPH_FINDINGS])
def test_spacemit_fa_finding(finding: Finding, target) -> None:
    """The smallest problem of each finding through ggml: wrong at VLEN 1024 (SpacemiT's kernel), right elsewhere
    (ggml's)."""
    check_fa(target, finding.problem)
    observe.note("finding", f"{finding.name}: right at {target.id}")


@AT_1024
@pytest.mark.parametrize("finding", TCM_FINDINGS, ids=[f.name for f in TCM_FINDINGS])
def test_spacemit_fa_tcm_finding(finding: Finding, target) -> None:
    """The smallest problem of each finding of the kernels with a TCM."""
    check_tcm(target, TcmCase(finding.kernel, finding.tcm, finding.problem))
    observe.note("finding", f"{finding.name}: right at {target.id}")


@pytest.mark.parametrize("kernel", KERNELS, ids=[k.name for k in KERNELS])
def test_spacemit_fa_path(kernel: FaKernel, target) -> None:
    """The probes take the path fa_path says, as QEMU's trace shows: SpacemiT's kernel at VLEN 1024, ggml's own
    elsewhere and, at VLEN 1024, for heads beyond 128 (the tiled kernel's test has those)."""
    probes = FA_PROBES[kernel.name] + (FALLBACK_PROBES if kernel.name == "tiled" else [])
    for sh in probes:
        opts = Options("causal", 1, 0.0, 0.0, True, 0.125, 1.0, 0.0)
        p = make_problem(F16, sh, opts, seed=11)
        calls = target.trace("attention", *attention_call(F16, p, True)).call
        ran, want = traced_path(calls), fa_path(sh, target.vlen)
        observe.note("variant", f"{sh}: {ran}")
        assert ran == want, f"path={ran!r}, but should be {want!r} [{sh}, {target.id}]"
        if target.vlen == SPACEMIT_VLEN:
            mine = sh in FA_PROBES[kernel.name]
            assert (want == f"spacemit-{kernel.name}") == mine, f"table error: {sh} takes {want} at VLEN 1024"


def test_spacemit_fa_exp_model(target) -> None:
    """oracles/spacemit_fa.py's exp is the kernels' bit for bit: ggml_vec_soft_max_f32 with max 0 computes
    ggml_v_expf_m2(x), which rvv_expf_approx_f32m2 is token for token (cases/spacemit_fa.py's scan checks
    that); over the regime edges and every EXP_STRIDE-th non-positive float32 (its input range in the kernels)."""
    for i, x in enumerate(exp_inputs()):
        r = target.call("vec_soft_max_f32", [x.size, 0], [0.0], [In(x), Out(4 * x.size), Out(8)])
        assert_bitwise_equal(r.output(0, np.float32), SF.expf_poly(x), name="ggml_v_expf_m2(x)",
                             context=f"chunk {i}, {target.id}", inputs=x)

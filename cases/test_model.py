"""The model family's tests; its tables, shapes and bound are in cases/model.py, its runs in harness/model/
(``model_runs``), under the run's emulator (``--emulator``; one that cannot run llama.cpp's tools skips the
tests with its reason).

The main job runs the budgeted part (docs/model.md, "Budget"): SmolLM2 as shipped (Q4_1), repacking on, one
thread, at every VLEN, in ggml's default riscv64 build (zvfh) without stress, by the run's first compiler
(clang in the main job), and the no-V build of that compiler.  Each compiler's pair of tools builds (the
RVV build and its no-V reference) costs about ten CPU-minutes apiece on this project's machines, so GCC 14's
model runs, the host's second opinion and the rest of the matrix are nightly: ``--thorough`` runs every type
of cases/model.py's table, every path, every target and every compiler.

``test_model`` runs at the builds of both CPU backends: ggml-cpu's and SpacemiT's (``--isa spacemit``: the
backend's own ops under QEMU with the X60's core type, the build's environment passed as the kernel servers
get it).  The spacemit build costs a tools build of its own (rvvdiff's additions change every object) and a run
of minutes per target, so its runs are ``--thorough``'s (docs/model.md, Budget; docs/spacemit.md).

A distribution's build (``--isa riscv64_v``, selected by name only: docs/dispatch.md) is a target of
``test_model`` wherever it is selected: llama-perplexity built with shared libraries and every CPU variant, ggml
loading the one the emulated CPU scores best, the run failing when that is not ``riscv64_v``.  Without
``--thorough`` it runs the budgeted part (the model as shipped, repacking on, one thread) at each VLEN and stress
mode selected; the main job runs it with ``--thorough`` only (ci/main-job.sh's ``dispatch-model`` step).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cases import model as M
from harness.check import observe
from harness.model import machine, model_runs
from harness.model.catalogue import ModelError
from harness.plugin.options import compilers
from harness.plugin.session import of as run_session
from harness.plugin.targets import Target, session


def _thorough(config: pytest.Config) -> bool:
    return bool(config.getoption("thorough"))


def budgeted(case: M.Case, path: M.RunPath) -> bool:
    """The part of the matrix the main job runs: the real model as shipped, repacking on, one thread."""
    return case.id == "smollm2-q4_1" and path == M.PATHS[0]


def _first_compiler(target, config: pytest.Config) -> bool:
    return _thorough(config) or target.compiler == next(iter(compilers(config)))


def _main_job_target(target, config: pytest.Config) -> bool:
    """Every target with ``--thorough``; else the zvfh build without stress by the first compiler, and a dispatch
    variant's build (selected by name only, never by ``all``) at every VLEN and stress mode selected."""
    return _thorough(config) or bool(target.isa.variant) or (
        target.isa.name == "zvfh" and not target.stress and _first_compiler(target, config))


def _once_per_compiler(target, config: pytest.Config) -> bool:
    """The references do not depend on VLEN, ISA build or stress: one target per compiler."""
    return (target.isa.name == "zvfh" and not target.stress and target.vlen == min(config.getoption("vlen"))
            and _first_compiler(target, config))



def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "case" not in metafunc.fixturenames:
        return
    thorough = _thorough(metafunc.config)
    gguf = run_session(metafunc.config).gguf
    if gguf:
        try:
            case = M.user_case(gguf)
        except ModelError as e:
            raise pytest.UsageError(f"--gguf: {e}") from None
        pairs = [(case, p) for p in M.PATHS if thorough or p == M.PATHS[0]]
    else:
        pairs = [(c, p) for c in M.CASES for p in M.PATHS if thorough or budgeted(c, p)]
    metafunc.parametrize(("case", "path"), pairs, ids=[f"{c.id}-{p.id}" for c, p in pairs])


def _model(source, case: M.Case) -> Path:
    """The model file; without it (never fetched, and no network) the test is skipped with the reason."""
    try:
        return case.file(source)
    except ModelError as e:
        pytest.skip(f"the model is not available: {e} (ci/setup.sh fetches it)")


def _machine(target: Target) -> machine.Machine:
    """The target under the run's emulator; an emulator that cannot run llama.cpp's tools (Spike, a board over
    ssh) skips the test with its reason."""
    emulator = session().emulator
    try:
        return machine.on(emulator, target)
    except machine.CannotRun as e:
        pytest.skip(f"the model family does not run on --emulator {emulator.name}: {e}")


@pytest.mark.model
@pytest.mark.rvvdiff_backend("cpu", "spacemit")
@pytest.mark.rvvdiff_targets.with_args(_main_job_target)
def test_model(case: M.Case, path: M.RunPath, target, request: pytest.FixtureRequest) -> None:
    """llama-perplexity of the tree under test, at this target, against the generic riscv64 build's logits:
    within :data:`cases.model.BOUND`."""
    on = _machine(target)
    source = session().source
    why = M.repeated_in(target.isa, case, path, source)
    if why:
        pytest.skip(why)
    model = _model(source, case)
    why = M.unreached(source, case, path, target.vlen, target.isa, model)
    if why:
        pytest.skip(why)
    shape = M.SHAPE_THOROUGH if _thorough(request.config) else M.SHAPE
    k = model_runs.check(source, model, on, path.shape(shape), label=case.id)
    observe.record("emulated_s", k.seconds)
    request.node.user_properties.append(("rvvdiff.model", k.line()))
    request.node.user_properties.extend(k.figures())
    bad = M.BOUND.violations(k)
    assert not bad, (f"{case.id} ({path.id}) at {target.id}: {'; '.join(bad)} against the generic riscv64 build "
                     f"({k.line()}; {k.tokens} tokens in {k.seconds:.0f} s)\nreplay: {' '.join(k.argv)}")


@pytest.mark.model
@pytest.mark.rvvdiff_targets.with_args(_once_per_compiler)
def test_model_host(target, request: pytest.FixtureRequest) -> None:
    """The second opinion on the reference: the host's own build of the tree against the generic riscv64
    build's logits (same model, text and shape), within the same bound: two correct builds of different
    architectures agree as closely as the bound asks of the RVV kernels."""
    if not _thorough(request.config):
        pytest.skip("the host's second opinion runs with --thorough (nightly): the host's tools build costs about "
                    "ten CPU-minutes (docs/model.md, Budget)")
    on = _machine(target)
    case = M.Case("smollm2", M.BY_NAME["q4_1"])
    model = _model(session().source, case)
    shape = M.SHAPE_THOROUGH if _thorough(request.config) else M.SHAPE
    k = model_runs.host_against_reference(session().source, model, shape, on, label=case.id)
    request.node.user_properties.append(("rvvdiff.model", k.line()))
    request.node.user_properties.extend(k.figures())
    bad = M.BOUND.violations(k)
    assert not bad, f"host build against the {target.compiler} generic riscv64 build: {'; '.join(bad)} ({k.line()})"


@pytest.mark.model
@pytest.mark.rvvdiff_targets.with_args(_once_per_compiler)
def test_novector_build(target) -> None:
    """ggml builds for riscv64 without V (rv64gc: boards without the vector extension) as the tree is, by
    the target's compiler.  Under clang the trees of 2025-2026 fail (llama.cpp #22159: ggml tests
    __riscv_v_intrinsic, which clang defines without V); a known failure."""
    model_runs.novector_build(session().source, target.compiler)

"""The plugin's command-line options: the matrix's (harness/core/matrix.py) and the plugin's own."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.core import matrix
from harness.core.config import IS_CHECKOUT, PROJECT_ROOT
from harness.toolchain.compilers import ToolchainError, selected


def run_dir(config: pytest.Config) -> Path:
    """What a relative ``--report-dir`` lies under: the rootdir, except when the rootdir is inside an
    installed rvvdiff (``pytest --pyargs cases`` from a wheel: site-packages/cases), then the directory
    pytest was started in."""
    root = config.rootpath
    if not IS_CHECKOUT and root.resolve().is_relative_to(PROJECT_ROOT):
        return config.invocation_params.dir
    return root


def report_dir(config: pytest.Config) -> Path:
    """Where this run's failure reports and summary go (``--report-dir``)."""
    return Path(run_dir(config), config.getoption("report_dir"))


def compilers(config: pytest.Config) -> dict[str, tuple[str, ...]]:
    """The run's compilers (``--cc``), each with the ISA builds it may make; without ``--cc`` the
    setting's one (``RVVDIFF_COMPILER``, else clang) for every ISA build.  The one place where the
    setting becomes the run's explicit choice."""
    chosen = config.getoption("cc")
    if chosen is not None:
        return chosen
    try:
        return {selected(): tuple(matrix.ISAS)}
    except ToolchainError as e:
        raise pytest.UsageError(str(e)) from None


def run_matrix(config: pytest.Config) -> matrix.Matrix:
    """The run's matrix as parsed, with its compilers (:func:`compilers`) and, once pytest_configure
    resolved them, its VLENs."""
    return matrix.Matrix.of(config.option).merged(matrix.Matrix(compilers=compilers(config)))


def id_compiler(config: pytest.Config) -> str:
    """The compiler of a test whose id names none: the run's one compiler ("" with several: their ids
    name theirs)."""
    chosen = compilers(config)
    return next(iter(chosen)) if len(chosen) == 1 else ""


def _positive(kind: type, option: str):
    def parse(value: str):
        try:
            v = kind(value)
        except ValueError:
            raise pytest.UsageError(f"{option} {value!r}: expected a positive number") from None
        if v <= 0:
            raise pytest.UsageError(f"{option} {value!r}: expected a positive number")
        return v
    return parse


def add_options(parser: pytest.Parser) -> None:
    g = parser.getgroup("rvvdiff", "rvvdiff: differential testing of ggml's RISC-V Vector kernels")
    # The axes of the matrix (VLEN, ISA build, compiler, stress, emulator, tree): harness/core/matrix.py.
    matrix.add_options(g, error=pytest.UsageError)
    g.addoption("--max-examples", type=_positive(int, "--max-examples"), default=None, metavar="N",
                help="Hypothesis examples per differential test (default: 25, or 200 with --thorough)")
    g.addoption("--thorough", action="store_true",
                help="the nightly budget: 200 examples per test instead of 25 (about 5x the run time); the model "
                     "family's whole matrix (every type, path and target) instead of its budgeted part")
    g.addoption("--report-dir", default="reports", metavar="DIR",
                help="where failure reports (case.json, inputs.npz, README.md per failing test) and the run's "
                     "summary.md / summary.html / results.json go (default: reports/ under the rootdir; from an "
                     "installed wheel, under the current directory)")
    g.addoption("--bench-log", default=None, metavar="FILE",
                help="(used by `rvvdiff bench`) append one JSON line per Hypothesis example with its time split, "
                     "and per test the largest call timed again, repeated, inside the server")
    g.addoption("--cost-log", default=None, metavar="FILE",
                help="(used by `rvvdiff cost`) append one JSON line per cost case (costs/) with its counts under Spike")
    g.addoption("--example-db", default=None, metavar="DIR",
                help="Hypothesis's example database (default: .hypothesis/ under the rootdir); a failing example "
                     "saved there replays first on the next run, on any tree")
    g.addoption("--known-failures", choices=("apply", "ignore"), default="apply",
                help="apply (default): the entries of known_failures.toml that apply to the tree are strict "
                     "expected failures; ignore: raw outcomes (the PR gate and rvvdiff bisect judge them)")
    g.addoption("--changes", default=None, metavar="FILE",
                help="a diff of two trees (written by rvvdiff gate): the tests that reach a changed function run "
                     "at the thorough budget; <report-dir>/covers.json says which")
    g.addoption("--changed-only", action="store_true",
                help="with --changes: run only the tests that reach a change")
    g.addoption("--also-run", action="append", default=[], metavar="GLOB",
                help="with --changed-only: also run the tests whose node id (without its compiler) matches GLOB "
                     "(fnmatch; repeatable), at the thorough budget (rvvdiff fixes: a finding's tests)")
    g.addoption("--plan", default=None, metavar="FILE",
                help='run only the tests a JSON plan names, each at its budget: {"tests": {"<node id>": '
                     '"default" | "thorough" | "replay"}} (replay: no new examples, the saved ones and the fixed cases)')
    g.addoption("--rvv-coverage", action="store_true",
                help="RVV line coverage measured from QEMU's log of the code the kernel servers execute: an lcov "
                     "tracefile per target and merged, a matrix per function and an HTML view in "
                     "<report-dir>/coverage/ (docs/coverage.md); off by default")
    g.addoption("--gguf", default=None, metavar="PATH",
                help="the model family (cases/test_model.py) runs this GGUF model as it is, instead of SmolLM2 "
                     "and its requantized types (docs/model.md)")
    g.addoption("--kernel-timeout", type=_positive(float, "--kernel-timeout"), default=120.0, metavar="SECONDS",
                help="deadline of one kernel call before it counts as hung (default: 120)")


#: Examples per test.  The default keeps the main job (every family, VLEN, ISA build, stress off
#: and on) at about 14 minutes on 2 cores (docs/performance.md, Budgets); --thorough is for nightly runs.
DEFAULT_MAX_EXAMPLES = 25


THOROUGH_MAX_EXAMPLES = 200


def max_examples(config: pytest.Config) -> int:
    return config.getoption("max_examples") or (
        THOROUGH_MAX_EXAMPLES if config.getoption("thorough") else DEFAULT_MAX_EXAMPLES)

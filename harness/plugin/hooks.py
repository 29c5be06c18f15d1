"""The pytest plugin's entry point: its options, the xdist set-up, and the session it makes per run.

A differential test asks for the ``target`` argument; the plugin
parametrizes it over the selected VLENs, ISA builds and stress modes, so test
ids read ``test_vec_dot[f16-vlen512-zvfh]`` and ``-k`` selects by kernel,
VLEN or build.  Builds and servers are made lazily, in whichever process
(pytest-xdist worker) first needs them, under a file lock.

This module holds the hooks that come before a run's state exists or need none: the options
(harness/plugin/options.py), the worker cap and the scheduler of pytest-xdist
(harness/plugin/workers.py), and pytest_configure, which makes the run's
:class:`harness.plugin.session.RvvdiffSession`, registers it as a plugin and puts it in
``config.stash``: the session's methods are the hooks of collection, of each test and of the
summary.  The targets are harness/plugin/targets.py's, the marks harness/plugin/marks.py's.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.internal import observability

from harness.core import settings as env_settings
from harness.emulators import registry
from harness.plugin import budget, linecov, workers
from harness.plugin.benchlog import BenchLog
from harness.plugin.options import THOROUGH_MAX_EXAMPLES, add_options, max_examples
from harness.plugin.session import KEY, NAME, RvvdiffSession
from harness.report.ids import suite_module_id
from harness.toolchain.compilers import ToolchainError


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector) -> pytest.Module | None:
    """A test module of the suite (cases/, costs/) gets the id it has in a checkout, whatever the
    rootdir (harness/report/ids.py: ``suite_module_id``); any other module pytest's own."""
    nodeid = suite_module_id(module_path)
    return pytest.Module.from_parent(parent, path=module_path, nodeid=nodeid) if nodeid else None


@pytest.hookimpl(wrapper=True)  # a wrapper runs before xdist's own hook reads -n and --maxprocesses
def pytest_cmdline_main(config: pytest.Config) -> Any:
    workers.cap_workers(config)
    return (yield)


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # xdist hooks: unknown under -p no:xdist
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    return workers.TargetScheduling(config, log) if workers.target_scheduling(config) else None


@pytest.hookimpl(trylast=True)  # after -k and -m: the reasons count the cases they kept
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    config.stash[KEY].deselect_unbuildable(config, items)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    if workers.target_scheduling(node.config):
        node.workerinput["rvvdiff_live_servers"] = 1


def pytest_configure(config: pytest.Config) -> None:
    sess = RvvdiffSession(config)
    config.stash[KEY] = sess
    config.pluginmanager.register(sess, NAME)
    sess.begin()
    config.addinivalue_line("markers", "rvvdiff_kernel(name): the ggml kernel a differential test exercises")
    config.addinivalue_line("markers", "rvvdiff_targets(predicate): the targets a test runs at, "
                            "predicate(target, config) -> bool (the others are not collected)")
    config.addinivalue_line("markers", "rvvdiff_backend(*names): the CPU backends whose ISA builds a test runs at "
                            "(cpu: ggml-cpu's, the default; spacemit: ggml-cpu/spacemit/'s)")
    config.addinivalue_line("markers", "rvvdiff_cost: a test of the cost suite (costs/): a case no build of the run "
                            "can measure is deselected at collection, with the reason (harness/plugin/costlog.py)")
    config.addinivalue_line("markers", "model: a run of llama.cpp's own tools on a real model (cases/test_model.py)")
    # Shared by the controller and its xdist workers (inherited through the environment).
    env_settings.set_default("SESSION", uuid.uuid4().hex[:12])
    # The oracles' NumPy products on OpenBLAS's threads compete with the emulators for the cores (a worker
    # and its emulator keep about one core busy): workers started from here multiply on their own thread
    # unless the user says otherwise. Measured on 2 cores, -n 2, mul_mat + repack + quant dots at VLEN 256
    # and 1024: 37-38 s instead of 40-43 s (docs/performance.md).
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    _register_hypothesis_profile(config)
    if config.getoption("bench_log"):
        # Hypothesis traces coverage of every example while observability is on; that
        # tracing (not the harness) would dominate the times measured.
        observability.OBSERVABILITY_COLLECT_COVERAGE = False
        sess.bench = BenchLog(config.getoption("bench_log"), sess)
        observability.add_observability_callback(sess.bench.observe)
    _resolve_emulator_options(config)
    linecov.configure(config, sess.report_dir, sess.pool)


def _resolve_emulator_options(config: pytest.Config) -> None:
    """--vlen 'all' becomes the emulator's VLENs; what the emulator cannot do is a usage error."""
    emulator = registry.kind(config.getoption("emulator"))
    vlens = config.getoption("vlen")
    try:
        config.option.vlen = emulator.resolve_vlens(vlens)
    except ValueError as e:
        raise pytest.UsageError(f"--vlen {','.join(map(str, vlens or ()))}: {e}") from None
    except ToolchainError as e:  # a board that cannot be reached or probed
        raise pytest.UsageError(f"--emulator {config.getoption('emulator')}: {e}") from None
    if not emulator.has_stress and True in config.getoption("rvv_stress"):
        raise pytest.UsageError(f"--rvv-stress with --emulator {emulator.name}: {emulator.no_stress}")


def _register_hypothesis_profile(config: pytest.Config) -> None:
    n = max_examples(config)
    budget.register_profiles(
        n, THOROUGH_MAX_EXAMPLES, config.getoption("example_db"), deadline=None, print_blob=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
    )
    if not config.getoption("hypothesis_profile", None):
        settings.load_profile("rvvdiff")

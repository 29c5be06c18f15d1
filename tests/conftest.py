"""The harness's own tests.  ``pytester`` runs pytest sessions in a subprocess, as a user would."""

import os
from pathlib import Path

import pytest

from harness.core import config

pytest_plugins = ["pytester"]

# pytester points HOME at a fresh temporary directory for every session it runs; without these
# each of them would fetch the pinned source, probe the toolchain and build ggml again.
os.environ.setdefault("RVVDIFF_CACHE", str(config.cache_dir()))
os.environ.setdefault("ZIG_GLOBAL_CACHE_DIR",
                      str(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "zig"))


# Long verifications: end-to-end runs of a whole job on trees of their own (ggml's own test suite built by a
# stock compiler, a fix verified with its cost under Spike), minutes each on two cores.  `ci/test.sh` (CI's
# every run) skips them with the reason; `ci/test.sh --long` runs them too (docs/tested.md records when and
# what they gave).  Each feature they verify end to end keeps a shorter end-to-end test in every run.
def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--long", action="store_true",
                     help="also run the long verifications (tests marked long: minutes each on two cores)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "long(minutes): a long end-to-end verification, run by ci/test.sh --long "
                                       "(minutes: its time on two cores)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--long"):
        return
    for item in items:
        m = item.get_closest_marker("long")
        if m is not None:
            took = f" (about {m.args[0]} min on two cores)" if m.args else ""
            item.add_marker(pytest.mark.skip(reason=f"a long verification{took}: `ci/test.sh --long` runs it"))

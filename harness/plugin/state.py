"""The plugin's state, in one place: ``config.stash`` entries of the pytest run.

Every entry lives on the run's :class:`pytest.Config`, so a new pytest run in the same process
(pytester, ``pytest.main``) starts afresh.  The one module-level name is the config of the run
in progress, for :func:`harness.plugin.targets.session`, which the differential test modules
call without a config at hand.
"""

from __future__ import annotations

from typing import Any

import pytest

from harness.ggml.known import Known

#: What every differential test of this process shares (a :class:`harness.plugin.targets.Session`,
#: made on first use; typed Any here because targets.py reads this module).
SESSION = pytest.StashKey[Any]()
#: The per-example time log of `rvvdiff bench` (a :class:`harness.plugin.benchlog.BenchLog`), or None.
BENCH = pytest.StashKey[Any]()
#: Each differential test's outcome, for the summary (in the controlling process).
RESULTS = pytest.StashKey[list[dict[str, Any]]]()
#: When the session started (time.time()).
T0 = pytest.StashKey[float]()
#: The kernel servers' request counts and times, of this process and its xdist workers.
STATS = pytest.StashKey[list[dict[str, Any]]]()
#: (kind, line) per ISA build that failed, could not be expressed, or left adapters out.
BUILDS = pytest.StashKey[list[tuple[str, str]]]()
#: Known failures whose function changed in this tree (None: not judged in this process).
CHANGED_KNOWN = pytest.StashKey["list[KnownState] | None"]()
#: Known failures that matched no test of a full run of their file.
UNUSED_KNOWN = pytest.StashKey[list[Known]]()
#: The config of the run this one interrupted (a pytest run inside a test), restored at its end.
_OUTER = pytest.StashKey["pytest.Config | None"]()

_CURRENT: pytest.Config | None = None


def begin(config: pytest.Config) -> None:
    """Make ``config`` the run in progress (pytest_configure), with empty results."""
    global _CURRENT
    config.stash[_OUTER] = _CURRENT
    config.stash[RESULTS] = []
    config.stash[STATS] = []
    _CURRENT = config


def end(config: pytest.Config) -> None:
    """The run of ``config`` is over (pytest_unconfigure): the run it interrupted, if any, is current again."""
    global _CURRENT
    if _CURRENT is config:
        _CURRENT = config.stash.get(_OUTER, None)


def current() -> pytest.Config | None:
    """The config of the pytest run in progress in this process, if any."""
    return _CURRENT

"""The cost suite's side of the plugin: a target that meters one call, and the rows of ``--cost-log``.

A cost case (costs/) runs a family's own call code (the function its differential tests use) on a
:class:`Metered` target: the one call of the kernel being costed is measured by the emulator
(:meth:`harness.plugin.targets.Target.measure`), every other request (type ids, layouts) goes to the
ordinary server.  The row it records is one JSON line of ``--cost-log`` (``rvvdiff cost`` reads them).
"""

from __future__ import annotations

import fcntl
import json
from collections.abc import Sequence
from typing import Any

import pytest

from harness.cost.measure.spike_count import Cost
from harness.emulators import protocol as P
from harness.emulators.base import Emulator
from harness.plugin.targets import Target, session


class Metered:
    """``target`` for a family's call code, with the calls of ``kernel`` measured (exactly one allowed)."""

    def __init__(self, target: Target, kernel: str) -> None:
        self.target = target
        self.kernel = kernel
        self.cost: Cost | None = None
        self.response: P.Response | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.target, name)

    def call(self, kernel: str, ip: Sequence[int] = (), fp: Sequence[float] = (), bufs: Sequence[P.Buf] = (),
             *, repeat: int = 1, timeout: float | None = None, emulator: Emulator | None = None) -> P.Response:
        if kernel != self.kernel:
            return self.target.call(kernel, ip, fp, bufs, repeat=repeat, timeout=timeout, emulator=emulator)
        if self.cost is not None:
            raise AssertionError(f"harness: a cost case calls {kernel} more than once; it must make exactly one call")
        self.response, self.cost = self.target.measure(kernel, ip, fp, bufs, emulator=emulator)
        return self.response


def record(config: pytest.Config, row: dict[str, Any]) -> None:
    """Append ``row`` (with the tree's name and commit) to ``--cost-log`` (one JSON line; workers append)."""
    path = config.getoption("cost_log")
    if not path:
        return
    src = session().source
    line = json.dumps({**row, "tree": src.label, "commit": src.commit}) + "\n"
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.write(line)

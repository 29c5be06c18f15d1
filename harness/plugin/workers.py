"""How the differential suite uses pytest-xdist: workers the cores can keep busy, and each target's
tests on few workers, so that emulator servers are per target, not per worker x target.

A kernel server runs one call at a time and the worker that drives it waits for it, so a worker
and its emulator together keep about one core busy; workers beyond the usable cores only make the
emulators wait for each other, and each of them starts its own server for every target it meets
(each start: an emulator process, the server's initialisation, memory).  Two things follow:

1. **Workers**: ``-n N`` is capped at the usable cores (xdist's own ``--maxprocesses``, set by
   rvvdiff when the user did not set it; ``RVVDIFF_MAX_WORKERS`` sets another cap, ``0`` none).
   ``-n auto`` is already the number of cores.
2. **Scheduling** (xdist's ``load`` mode, the default of ``-n``, is replaced by a load-scope
   scheduler of xdist's own): the scope of a differential test is its target (VLEN x ISA build x
   stress mode x compiler: each compiler's build has a server of its own) and a shard
   ``crc32(node id) mod k``; xdist gives each scope to one worker,
   whole.  A target's tests therefore run on at most ``k`` workers, so at most ``k`` servers are
   ever started for it (plus restarts after a crash or hang).  ``k = max(2, ceil(4 w / t))`` for
   ``w`` workers and ``t`` targets: two when there are enough targets, more when a narrow
   selection (few targets) must still give every worker about four scopes to draw from, so that
   no worker idles at the end.  A worker runs a scope's tests one after the other, so it keeps
   one server live (its session's ``live_limit``, handed to :meth:`harness.emulators.pool.Pool.server`):
   the one of the target it is on; the others are stopped when it moves on.  Tests without a target (the coverage test) are
   each their own scope.

Nothing else changes: each test is reported once, the rest of a crashed worker's scope goes to the
others (the test it was running is the crash, never run again: :meth:`TargetScheduling.remove_node`),
and the pool still restarts a server after a crash or hang.  Any
other ``--dist`` mode the user names is left alone.
"""

from __future__ import annotations

import math
import os
import zlib
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

from harness.core import settings
from harness.emulators import registry
from harness.report.ids import parse_id

#: Scopes each worker should be able to draw from (so that none idles while another finishes).
SCOPES_PER_WORKER = 4


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def worker_cap(config: pytest.Config) -> int | None:
    """The most workers worth starting: ``RVVDIFF_MAX_WORKERS`` (0: no cap), else the usable cores."""
    v = settings.get("MAX_WORKERS")
    if v is None:
        return usable_cores()
    try:
        n = int(v)
    except ValueError:
        raise pytest.UsageError(f"RVVDIFF_MAX_WORKERS={v!r}: give a whole number of workers (0: no cap)") from None
    return n or None


def cap_workers(config: pytest.Config) -> None:
    """Before xdist reads them: ``--maxprocesses`` defaults to :func:`worker_cap` (a user's own wins)."""
    if getattr(config.option, "maxprocesses", None) or not hasattr(config.option, "numprocesses"):
        return
    cap = worker_cap(config)
    # On a board each worker runs its server on one of the board's cores: at most that many workers.
    board = registry.kind(getattr(config.option, "emulator", registry.DEFAULT)).max_workers()
    if board is not None:
        cap = board if cap is None else min(cap, board)
    if cap is not None:
        config.option.maxprocesses = cap


def target_scheduling(config: pytest.Config) -> bool:
    """Whether this run's controller schedules by target (xdist's default ``load`` mode)."""
    return getattr(config.option, "dist", "no") == "load" and bool(getattr(config.option, "tx", None))


class TargetScheduling(LoadScopeScheduling):
    """xdist's load-scope scheduler with a differential test's scope = its target and a shard."""

    shards = 2

    def schedule(self) -> None:
        if self.collection is None and self.collection_is_completed:
            ids = next(iter(self.registered_collections.values()), [])
            targets = {(t.vlen, t.isa, t.stress, t.compiler) for t in map(parse_id, ids) if t is not None}
            self.shards = shards(len(self.nodes), len(targets))
        super().schedule()

    def remove_node(self, node: Any) -> str | None:
        """A worker is gone (crashed, or done at shutdown).  The first test it had not finished is the
        one it crashed in: reported once by xdist as that crash and never sent again; the unfinished
        rest of its scopes goes back to the queue for the other workers.  (xdist's load-scope
        scheduler would queue the crashed test again, so a test that kills its worker kills the
        next one too, and would queue scopes with nothing left to run, which no worker ever
        reports back on.)"""
        workload = self.assigned_work.pop(node)
        crashed = next((n for unit in workload.values() for n, done in unit.items() if not done), None)
        if crashed is None:
            return None
        for unit in workload.values():
            if crashed in unit:
                unit[crashed] = True
        self.workqueue.update({scope: unit for scope, unit in workload.items() if not all(unit.values())})
        for other in self.assigned_work:
            self._reschedule(other)
        return crashed

    def _split_scope(self, nodeid: str) -> str:
        t = parse_id(nodeid)
        if t is None:
            return nodeid
        # The compiler is part of the target: a scope holding both compilers' tests of one VLEN, ISA build
        # and stress mode would make its worker alternate between two servers and restart one per test.
        compiler = f"-{t.compiler}" if t.compiler else ""
        return f"vlen{t.vlen}-{t.isa}{'-stress' if t.stress else ''}{compiler}#{zlib.crc32(nodeid.encode()) % self.shards}"


def shards(workers: int, targets: int) -> int:
    """Shards per target: two, or enough that every worker has :data:`SCOPES_PER_WORKER` scopes."""
    return max(2, math.ceil(SCOPES_PER_WORKER * workers / max(targets, 1)))


def describe(config: pytest.Config) -> str | None:
    """The report header's line on workers and scheduling, on the controller of an xdist run."""
    if not target_scheduling(config):
        return None
    asked, used = config.option.numprocesses, len(config.option.tx)
    capped = f" (-n {asked} capped at {used}: the usable cores, or a board's; RVVDIFF_MAX_WORKERS=0 lifts the cap)" \
        if isinstance(asked, int) and asked > used else ""
    return (f"workers: {used}{capped}; each target's tests on at most max(2, ceil(4 x workers / targets)) of "
            "them, one live emulator server per worker")


def worker_live_limit(config: Any) -> int | None:
    """On a worker: the live servers it keeps (1 under target scheduling), else None (no limit)."""
    return (getattr(config, "workerinput", None) or {}).get("rvvdiff_live_servers")
